"""Shortest-program search benchmark (docs/benchmarks.md, "Shortest-program search").

For each task (default: count, boolean_and, sort_unique, copy_unique, mode), runs the bounded
RASP-L search of :mod:`analysis.search` (smallest first, observational equivalence on a batch of
3 examples at each of the lengths 1..6; a found program must also reproduce 10 examples at each
of the lengths 1..20) and reports: the certified bound ("no program of length <= k"), the
program found (its length and text), programs explored, distinct values kept, programs per
second, the time, and the length of the shipped reference program for comparison.

Writes ``bench/results/search.json`` and prints a table. Absolute speeds depend on the machine
(reported with it); the search is single-threaded NumPy.

Run:  ``.venv/bin/python -m bench.bench_search`` (options: ``--tasks a,b``, ``--time-limit S``
per task, ``--max-length K``, ``--memory-mb M``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import cpu_model  # noqa: E402
import tasks  # noqa: E402
from analysis.search import search_task  # noqa: E402
from rasp.measures import measure  # noqa: E402

DEFAULT_TASKS = ["count", "boolean_and", "sort_unique", "copy_unique", "mode"]


def run(names, time_limit: float, max_length: int, memory_mb: float) -> dict:
    rows = []
    for name in names:
        task = tasks.get_task(name)
        ref_len = measure(task.load_reference()).length
        t0 = time.perf_counter()
        res = search_task(task, max_length=max_length, time_limit=time_limit,
                          max_memory_mb=memory_mb, progress=sys.stderr.isatty())
        d = res.to_dict()
        d["reference_length"] = ref_len
        d["wall_seconds"] = round(time.perf_counter() - t0, 2)
        rows.append(d)
        print(res.summary(), flush=True)
        if res.source:
            print("    " + res.source.replace("\n", "\n    "), flush=True)
    return {"machine": {"cpu": cpu_model(), "cores": os.cpu_count(),
                        "python": platform.python_version()},
            "settings": {"time_limit_s": time_limit, "max_length": max_length,
                         "memory_mb": memory_mb, "search_lengths": "1..6 x 3 examples",
                         "validation_lengths": "1..20 x 10 examples"},
            "results": rows}


def table(out: dict) -> str:
    lines = [f"| task | shipped program | search result | certified: no program of length <= "
             f"| programs | programs/s | seconds |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in out["results"]:
        found = f"found, length {r['length']}" if r["found"] else f"none ({r['stopped']})"
        lines.append(f"| {r['task']} | {r['reference_length']} | {found} | "
                     f"{r['certified_no_program_up_to']} | {r['explored']:,} | "
                     f"{r['programs_per_s']:,.0f} | {r['seconds']:.0f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default=",".join(DEFAULT_TASKS))
    ap.add_argument("--time-limit", type=float, default=60.0,
                    help="seconds per task (docs/benchmarks.md used 600)")
    ap.add_argument("--max-length", type=int, default=6)
    ap.add_argument("--memory-mb", type=float, default=2048)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "search.json"))
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.tasks.split(",") if n.strip()]
    out = run(names, args.time_limit, args.max_length, args.memory_mb)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(table(out))
    print(f"machine: {out['machine']}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
