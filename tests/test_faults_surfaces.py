"""The surfaces added in round three as safe as the old ones (issue 49): registrations, replication
cell files, task files, searches and their flags.

Every hostile case runs the real ``rasp`` command line under the driver of
``tests/test_faults_files.py`` (a 2 GB address-space cap, a 60 s alarm per case, peak memory
checked) and must end in exit 2 and one line, never a traceback, a hang or an exit 0 doing
nothing. Truths stated independently of the code under test: a link planted at an output name
keeps its target's bytes; a FIFO is not an output file to block on; code named only inside a
JSON file is not code the user asked to run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from test_faults_files import assert_one_line, run_cases, victim

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_TASK = ROOT / "tasks" / "examples" / "more_a_than_b.py"


# -- 1. `rasp score --register FILE` writes through the one writer ----------------------------

def test_register_never_writes_through_a_link_or_blocks_on_a_fifo(tmp_path):
    v, data = victim(tmp_path)
    (tmp_path / "link.json").symlink_to(v)
    (tmp_path / "dangling.json").symlink_to(tmp_path / "created-by-a-link.txt")
    os.mkfifo(tmp_path / "fifo.json")
    cases = [["score", "count", "--pe", "nope", "--register", str(tmp_path / n)]
             for n in ("link.json", "dangling.json", "fifo.json")]
    for r in run_cases(cases, tmp_path):
        assert r["tb"] is None and r["rc"] == 0, (r["argv"], r["tb"], r["err"])
    assert v.read_bytes() == data
    assert not (tmp_path / "created-by-a-link.txt").exists()
    for n in ("link.json", "dangling.json", "fifo.json"):
        p = tmp_path / n
        assert p.is_file() and not p.is_symlink(), n
        assert json.loads(p.read_text())["format"] == "rasp-lab registered predictions"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]
