"""C-RASP search benchmark: :func:`analysis.prediction.search.search` (the C-RASP grammars) on
each task of Huang et al. 2025 (``tasks/huang.py``) for both variants (``crasp`` = C-RASP[], NoPE;
``crasp_pl`` = C-RASP[periodic, local], learned APE with random offsets).

Prints a Markdown table: task, variant, found, size, certified_below, stopped, candidates
explored, seconds (and the found program's schema with ``--programs``); ``--json`` prints the
rows as JSON instead. The search stops on work (``--budget`` candidate Booleans and counts per
cell, :mod:`analysis.prediction.budget`), so every column but the seconds is the same on any
machine at any load.

Run:  ``.venv/bin/python -m bench.bench_crasp_search`` (options: ``--budget N`` (default
:data:`analysis.prediction.budget.DEFAULT_CRASP_BUDGET`), ``--time-cap S`` (a safety stop),
``--tasks a,b``, ``--variants crasp,crasp_pl``, ``--max-size K``, ``--json``, ``--programs``).

``--expressive`` runs the 30 (task, variant) cells where Huang et al. report a C-RASP program
(``tasks.huang.HUANG_EXPRESSIVE``, from their plotting data) and adds a column with their flag
and a summary line: how many of the programs that exist the search finds within the budget.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    from analysis.prediction.budget import DEFAULT_CRASP_BUDGET, parse_budget
    ap.add_argument("--budget", type=parse_budget, default=DEFAULT_CRASP_BUDGET,
                    help="candidate Booleans and counts per cell (e.g. 24M; default "
                         f"{DEFAULT_CRASP_BUDGET:,})")
    ap.add_argument("--time-cap", type=float, default=None,
                    help="wall-clock safety stop per cell in seconds (default none)")
    ap.add_argument("--tasks", default=None, help="comma-separated (default: all Huang tasks)")
    ap.add_argument("--variants", default="crasp,crasp_pl")
    ap.add_argument("--max-size", type=int, default=14)
    ap.add_argument("--json", action="store_true", help="print JSON rows")
    ap.add_argument("--programs", action="store_true", help="print found programs' schemas")
    ap.add_argument("--expressive", action="store_true",
                    help="only the 30 cells where Huang et al. report a C-RASP program")
    a = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from analysis.prediction.search import search
    from tasks.huang import HUANG_EXPRESSIVE, make_huang_tasks
    T = make_huang_tasks()
    names = a.tasks.split(",") if a.tasks else list(T)
    pe_of = {"crasp": "nope", "crasp_pl": "ape"}
    rows = []
    for name in names:
        for var in a.variants.split(","):
            expressive = name in HUANG_EXPRESSIVE[pe_of[var]]
            if a.expressive and not expressive:
                continue
            r = search(T[name], var, budget=a.budget, time_cap=a.time_cap,
                       max_size=a.max_size)
            rows.append({**r.to_dict(), "huang_expressive": expressive})
            if not a.json:
                print(f"{name:16s} {var:9s} found={r.found!s:5s} size={r.size} "
                      f"cert={r.certified_below} {r.stopped} {r.explored:,} "
                      f"{r.seconds:.1f}s",
                      file=sys.stderr, flush=True)
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    print("| task | variant | Huang et al.: a program | found | size | certified_below | "
          "stopped | level | candidates | seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for d in rows:
        print(f"| {d['task']} | {d['variant']} | {'yes' if d['huang_expressive'] else 'no'} | "
              f"{'yes' if d['found'] else 'no'} | "
              f"{d['size'] if d['size'] is not None else '-'} | "
              f"{d['certified_below'] if d['certified_below'] is not None else '-'} | "
              f"{d['stopped']} | {d['level_reached']} | {d['explored']:,} | "
              f"{d['seconds']:.1f} |")
    exp = [d for d in rows if d["huang_expressive"]]
    if exp:
        secs = sorted(d["seconds"] for d in exp if d["found"])
        median = f"{secs[len(secs) // 2]:.1f} s" if secs else "-"
        print(f"\nOf {len(exp)} cells where Huang et al. report a C-RASP program, the search "
              f"found {len(secs)} within {a.budget:,} candidates each (median {median} to "
              f"find one; "
              f"longest {secs[-1] if secs else 0:.1f} s).")
    if a.programs:
        for d in rows:
            if d["found"]:
                print(f"\n{d['task']} ({d['variant']}, size {d['size']}):\n{d['schema']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
