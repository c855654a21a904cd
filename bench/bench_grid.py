"""Grid-runner benchmark (docs/benchmarks.md, "## Grid runner"): old process pool vs Ray.

Trains the default report's grid (``rasp report`` / ``rasp demo`` with no arguments: the tasks
of ``analysis.reporting.report.DEFAULT_TASKS``, every PE, seed 0 plus NoPE's other seed, quick preset)
twice, side by side in one run, each into a fresh temporary runs root:

* ``old``: ``analysis.reporting.report.train_missing`` — the process pool (2 jobs of 1 torch thread on
  2 cores) that ``rasp report`` used before the grid runner — run from the source tree of
  ``--old-commit`` (extracted with ``git archive``, since the pool was removed afterwards);
* ``ray``: ``analysis.training.grid.run_grid`` of this tree (a local Ray instance sized to the machine,
  one CPU and one torch thread per run; Ray's start-up included).

Each runner is a subprocess; its wall time (start-up included), runs finished and the 1-minute
load average before and after are recorded. Writes ``bench/results/grid.json`` and prints a
table. Run: ``.venv/bin/python -m bench.bench_grid`` (``--tasks``, ``--set steps=N`` to shrink
the runs, ``--runners old,ray``, ``--old-commit SHA``).

``--startup N``: instead of the grid, time a local Ray instance's start-up (``ray.init``) and
shutdown N times each, alternating, with Ray's default settings (dashboard on) and with
``analysis.training.grid``'s settings (``include_dashboard=False``, no log forwarding, 128 MiB object
store); each trial in a fresh subprocess. Writes ``bench/results/ray_startup.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The last commit of main whose ``analysis/reporting/report.py`` holds the process-pool runner.
OLD_COMMIT = "6ca52579e152e2c804b04c3b0d99d2994b796743"

OLD_SCRIPT = """
import json, sys, time
from analysis.reporting import report
opts = report.ReportOptions(runs_root=sys.argv[1], progress=False,
                            train_overrides=json.loads(sys.argv[3]) or None)
t0 = time.time()
done = report.train_missing(sys.argv[2].split(","), opts)
print(json.dumps({"seconds": time.time() - t0, "runs": len(done),
                  "finished": sum(r["status"] in ("trained", "resumed") for r in done.values()),
                  "failed": [r.get("error") for r in done.values() if r["status"] == "failed"]}))
"""

RAY_SCRIPT = """
import json, sys, time
from analysis.training import grid
from analysis.reporting import report
opts = report.ReportOptions(runs_root=sys.argv[1], progress=False)
overrides = json.loads(sys.argv[3])
preset = opts.resolved()["train_preset"]
runs = [grid.GridRun(t, pe, seed, preset=preset, overrides=overrides, run_dir=str(rd))
        for t in sys.argv[2].split(",") for pe, seed, rd in report.wanted_runs(t, opts)]
t0 = time.time()
rep = grid.run_grid(runs, runs_root=sys.argv[1], progress=False, log=lambda s: None)
print(json.dumps({"seconds": time.time() - t0, "runs": len(rep.results),
                  "finished": sum(r.finished for r in rep.results),
                  "failed": [r.error for r in rep.failed]}))
"""


def _old_tree(commit: str, dest: Path) -> Path:
    """The source tree of ``commit`` under ``dest`` (``git archive``)."""
    tar = dest / "old.tar"
    with open(tar, "wb") as f:
        subprocess.run(["git", "archive", commit], cwd=ROOT, stdout=f, check=True)
    with tarfile.open(tar) as t:
        t.extractall(dest / "old", filter="data")
    return dest / "old"


def _run(name: str, tree: Path, script: str, runs_root: Path, tasks: str,
         overrides: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), RAY_USAGE_STATS_ENABLED="0")
    env.pop("RAY_ADDRESS", None)
    load0 = os.getloadavg()[0]
    t0 = time.time()
    p = subprocess.run([sys.executable, "-c", script, str(runs_root), tasks,
                        json.dumps(overrides)], env=env, cwd=tree, capture_output=True,
                       text=True, stdin=subprocess.DEVNULL)
    wall = time.time() - t0
    if p.returncode != 0:
        raise SystemExit(f"{name} runner failed:\n{p.stderr[-3000:]}")
    inner = json.loads(p.stdout.strip().splitlines()[-1])
    return {"runner": name, "wall_s": round(wall, 1), "inner_s": round(inner["seconds"], 1),
            "runs": inner["runs"], "finished": inner["finished"], "failed": inner["failed"],
            "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2)}


STARTUP_SCRIPT = r"""
import json, logging, os, sys, time
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
import ray
lean = sys.argv[1] == "lean"
kw = (dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
           object_store_memory=128 * 1024 ** 2) if lean else {})
c0, t0 = time.process_time(), time.perf_counter()
ray.init(address="local", num_cpus=2, **kw)
ray.get(ray.remote(lambda: 1).remote())     # a worker is up and answers
t1 = time.perf_counter()
ray.shutdown()
t2 = time.perf_counter()
print(json.dumps({"init_s": t1 - t0, "shutdown_s": t2 - t1, "driver_cpu_s": time.process_time() - c0}))
"""


def _startup(trials: int, out: str) -> int:
    rows = []
    for i in range(trials):
        for mode in ("default", "lean"):
            load0 = os.getloadavg()[0]
            p = subprocess.run([sys.executable, "-c", STARTUP_SCRIPT, mode], capture_output=True,
                               text=True, cwd=str(ROOT))
            if p.returncode:
                raise SystemExit(f"ray start-up ({mode}) failed:\n{p.stderr[-2000:]}")
            r = json.loads(p.stdout.strip().splitlines()[-1])
            r = {"mode": mode, "trial": i, **{k: round(v, 2) for k, v in r.items()},
                 "load_before": round(load0, 2)}
            rows.append(r)
            print(json.dumps(r), flush=True)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps({"rows": rows, "cores": os.cpu_count(), "when": time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=1) + "\n")
    print("\n| Ray settings | start-up + first task (s), per trial | shutdown (s) | load |")
    print("| --- | --- | --- | --- |")
    for mode in ("default", "lean"):
        rs = [r for r in rows if r["mode"] == mode]
        print(f"| {mode} | {', '.join(str(r['init_s']) for r in rs)} | "
              f"{', '.join(str(r['shutdown_s']) for r in rs)} | "
              f"{', '.join(str(r['load_before']) for r in rs)} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default=None, help="comma-separated (default: the report's)")
    ap.add_argument("--runners", default="old,ray")
    ap.add_argument("--old-commit", default=OLD_COMMIT)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="training setting for every run (JSON value), e.g. steps=50")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "grid.json"))
    ap.add_argument("--startup", type=int, default=0, metavar="N",
                    help="time Ray start-up N times, default settings vs analysis.training.grid's")
    args = ap.parse_args(argv)
    if args.startup:
        return _startup(args.startup, str(ROOT / "bench" / "results" / "ray_startup.json"))
    sys.path.insert(0, str(ROOT))
    from analysis.reporting import report
    tasks = args.tasks or ",".join(report.DEFAULT_TASKS)
    overrides = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.set)}
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-grid-") as tmp:
        tmp = Path(tmp)
        for name in args.runners.split(","):
            if name == "old":
                tree, script = _old_tree(args.old_commit, tmp), OLD_SCRIPT
            elif name == "ray":
                tree, script = ROOT, RAY_SCRIPT
            else:
                raise SystemExit(f"unknown runner {name!r} (old, ray)")
            rows.append(_run(name, tree, script, tmp / f"runs-{name}", tasks, overrides))
            print(json.dumps(rows[-1]), flush=True)
    result = {"tasks": tasks, "overrides": overrides, "old_commit": args.old_commit,
              "cores": os.cpu_count(), "rows": rows,
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"\n| runner | runs finished | wall (s) | load before / after |")
    print("| --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['runner']} | {r['finished']}/{r['runs']} | {r['wall_s']} | "
              f"{r['load_before']} / {r['load_after']} |")
    if len(rows) == 2:
        print(f"\nratio {rows[1]['runner']} / {rows[0]['runner']} wall: "
              f"{rows[1]['wall_s'] / rows[0]['wall_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
