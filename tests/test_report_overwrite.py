"""Issue 39 item 3: a report never silently overwrites a report of another preset.

Truths checked: a directory holding a report whose report.json records the ``demo`` preset is
refused for a ``quick`` report (exit 2, the page's bytes unchanged, the message naming both
presets and the ways out) before anything runs; the same preset, ``--force`` and an empty
directory are let through.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.reporting.report import ReportError, check_overwrite

ROOT = Path(__file__).resolve().parents[1]


def _a_report(d: Path, preset: str | None) -> bytes:
    d.mkdir(parents=True, exist_ok=True)
    page = f"<html>the {preset} report</html>".encode()
    (d / "report.html").write_bytes(page)
    if preset is not None:
        (d / "report.json").write_text(json.dumps({"meta": {"preset": preset}}))
    return page


def test_the_cli_refuses_to_replace_the_demo_report(tmp_path):
    out = tmp_path / "reports"
    page = _a_report(out, "demo")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "rasp_cli.main", "report", "copy_unique",
                        "-o", str(out), "--no-train", "--quick"], capture_output=True,
                       text=True, timeout=120, env=env, cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "'demo' preset" in p.stderr and "'tour'" in p.stderr and "--force" in p.stderr
    assert "Traceback" not in p.stderr
    assert (out / "report.html").read_bytes() == page           # untouched
    assert sorted(x.name for x in out.iterdir()) == ["report.html", "report.json"]


def test_what_is_let_through(tmp_path):
    check_overwrite(tmp_path / "nothing_here", "quick")          # no report yet
    _a_report(tmp_path / "same", "quick")
    check_overwrite(tmp_path / "same", "quick")                  # the same preset again
    check_overwrite(tmp_path / "same", "tour")                   # its current name (issue 35)
    _a_report(tmp_path / "demo", "demo")
    check_overwrite(tmp_path / "demo", "quick", force=True)      # asked for
    with pytest.raises(ReportError, match="'demo' preset"):
        check_overwrite(tmp_path / "demo", "quick")


def test_a_page_without_a_record_is_not_replaced_either(tmp_path):
    _a_report(tmp_path / "old", None)
    with pytest.raises(ReportError, match="unknown preset"):
        check_overwrite(tmp_path / "old", "quick")


def test_report_has_the_force_flag():
    p = subprocess.run([sys.executable, "-m", "rasp_cli.main", "report", "--help"],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert "--force" in p.stdout
