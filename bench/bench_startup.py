"""Start-up time of the `rasp` command: the working tree against a baseline revision, side by side.

Each command runs ``--repeat`` times in a fresh process (``python -m rasp_cli.main ...`` run in
the tree's directory, so its packages come first on ``sys.path``), alternating baseline and working tree so that machine load hits
both alike; the table gives the median wall seconds and the ratio. The baseline's packages are
extracted with ``git archive`` into a temporary directory.

Run: ``.venv/bin/python -m bench.bench_startup [--baseline REV] [--repeat N]``; results in
``bench/results/startup.json`` and ``docs/benchmarks.md`` ("Start-up").
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: the last commit before lazy subcommand parsers (issue 28)
BASELINE = "e7539a9"
PACKAGES = ["rasp", "rasp_model", "model", "tasks", "compiler", "analysis", "rasp_cli"]
COMMANDS = [
    ["--help"],
    ["run", "rasp/stdlib/examples.rasp", "--name", "reverse", "--input", "hello"],
    ["check", "tasks/programs/sort_unique.rasp"],
    ["repl"],                      # stdin is empty: the REPL starts, reads EOF and exits
    ["tasks"],
]


def _extract(rev: str, tmp: Path) -> Path:
    present = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", rev],
                             check=True, capture_output=True, text=True).stdout.split()
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev,
                           *[p for p in PACKAGES + ["tasks"] if p in present]],
                          check=True, capture_output=True).stdout
    out = tmp / rev
    out.mkdir()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(out, filter="data")
    return out


def _time(tree: Path, cmd: list[str]) -> float:
    env = dict(os.environ, PYTHONPATH=str(tree))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rasp_cli.main", *cmd], cwd=tree, env=env,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=300)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", default=BASELINE, help=f"git revision (default {BASELINE})")
    ap.add_argument("--repeat", type=int, default=5, help="runs per command and tree (default 5)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "startup.json"))
    a = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = _extract(a.baseline, Path(tmp))
        for cmd in COMMANDS:
            before, after = [], []
            for _ in range(a.repeat):
                before.append(_time(base, cmd))
                after.append(_time(ROOT, cmd))
            b, n = statistics.median(before), statistics.median(after)
            rows.append({"command": "rasp " + " ".join(cmd), "before_s": round(b, 3),
                         "after_s": round(n, 3), "speedup": round(b / n, 1)})
    print(f"| command | {a.baseline} (s) | now (s) | speedup |")
    print("| --- | --- | --- | --- |")
    for r in rows:
        print(f"| `{r['command']}` | {r['before_s']:.2f} | {r['after_s']:.2f} | "
              f"{r['speedup']:.1f}x |")
    Path(a.out).write_text(json.dumps({"baseline": a.baseline, "repeat": a.repeat,
                                       "load_average": os.getloadavg(), "rows": rows},
                                      indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
