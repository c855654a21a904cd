"""Shortest-program search benchmark (docs/benchmarks.md, "Shortest-program search").

Two parts, one run:

1. **Engines side by side.** The same search problem (a batch of task examples of about 64
   tokens each: "length-64 batches") is given to today's engine
   (``analysis.prediction.raspl_search``: families of candidates evaluated as array operations)
   and to the previous engine (the per-candidate interpreter loop of commit ``79749dd``, loaded from git history, its one renamed interpreter
   call patched), each for ``--engine-seconds`` (a rate measurement: today's engine gets an
   unlimited budget and that wall-clock cap); reported: candidate programs evaluated per
   second of wall time and per second of CPU time of this process, and the load average.
2. **What each task's search finds within a work budget.** ``search(task, "raspl")`` per task
   (default: count, mode, copy_unique, sort_unique, boolean_and, parity_scratchpad) with
   ``--budget N`` candidate programs (:mod:`analysis.prediction.budget`; default
   :data:`~analysis.prediction.budget.DEEP_SEARCH_BUDGET`): the certified lower bound, the
   program found (by enumeration: a shortest one; by combining terms: an upper bound), how it
   was found, the candidates it took (the same on any machine) and the seconds (not).

Writes ``bench/results/search.json`` and prints Markdown tables. Today's engine runs its
families on the usable cores (at most 2 worker threads; ``new, 1 thread`` is the same engine
on one): programs per wall second is the rate on those cores, per CPU second the rate per core.
The machine is shared: the load average is reported beside each run.

Run:  ``.venv/bin/python -m bench.bench_search`` (options: ``--tasks a,b``, ``--budget N``
per task, ``--engine-seconds S`` (0: skip part 1), ``--engine-task T``, ``--max-length K``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import cpu_model  # noqa: E402
import tasks  # noqa: E402
from analysis.prediction import raspl_search as new_engine  # noqa: E402
from analysis.prediction.raspl_search.storage import _default_threads  # noqa: E402
from analysis.prediction.search import search  # noqa: E402
from rasp.analyses.measures import measure  # noqa: E402

DEFAULT_TASKS = ["count", "mode", "copy_unique", "sort_unique", "boolean_and",
                 "parity_scratchpad"]
OLD_COMMIT = "79749dd"


def load_old_engine():
    """The search module as of :data:`OLD_COMMIT` (per-candidate interpreter calls)."""
    src = subprocess.run(["git", "-C", str(ROOT), "show", f"{OLD_COMMIT}:analysis/prediction/search/"],
                         check=True, capture_output=True, text=True).stdout
    src = src.replace("self.ev._eval(node)", "self.ev.eval_node(node)")   # renamed since
    mod = types.ModuleType("old_search")
    mod.__file__ = f"{OLD_COMMIT}:analysis/prediction/search/"
    sys.modules["old_search"] = mod
    exec(compile(src, mod.__file__, "exec"), mod.__dict__)  # our own history, not user text
    return mod


def length64_problem(module, task, seed=0, rows=4):
    """``rows`` examples whose sequences are as close to 64 tokens as the task allows."""
    n = max((k for k in range(1, 200) if task.length_ok(k) and task.sequence_length(k) <= 65),
            default=1)
    return module.problem_from_task(task, lengths=[n] * 1, samples=rows, seed=seed), n


def engines(task_name: str, seconds: float, max_length: int) -> dict:
    task = tasks.get_task(task_name)
    old = load_old_engine()
    out = {"task": task_name, "seconds_each": seconds}
    # "new": the engine's default worker threads (the usable cores, at most 2: the bar is per
    # second on 2 cores); "new, 1 thread": everything on one thread (per core)
    runs = [("old", old, True, None), ("new", new_engine, True, None),
            ("new, 1 thread", new_engine, True, 1),
            ("old (search batch)", old, False, None),
            ("new (search batch)", new_engine, False, None)]
    for label, mod, long, threads in runs:
        if long:
            prob, n = length64_problem(mod, task)
        else:      # the batch a task's RASP-L search uses: 3 examples at each length 1..6
            prob, n = mod.problem_from_task(task, range(1, 7), 3, 0), "1..6"
        load0 = os.getloadavg()[0]
        c0, t0 = time.process_time(), time.perf_counter()
        if mod is new_engine:
            res = mod.search_raspl(prob, max_size=max_length, budget=10**15,
                                   time_cap=seconds, combine=0, threads=threads)
        else:
            res = mod.search(prob, max_length=max_length, time_limit=seconds)
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        out[label] = {"programs": res.explored, "wall_s": round(wall, 2),
                      "cpu_s": round(cpu, 2), "per_wall_s": round(res.explored / wall),
                      "per_cpu_s": round(res.explored / max(cpu, 1e-9)),
                      "certified": res.certified_below, "found": res.found,
                      "task_length": n, "batch": list(prob.inputs.shape),
                      "threads": (threads or _default_threads())
                      if mod is new_engine else 1,
                      "load_avg": [round(load0, 2), round(os.getloadavg()[0], 2)]}
        print(f"{label}: {res.explored:,} programs, {wall:.1f} s wall, {cpu:.1f} s CPU "
              f"({res.explored / max(cpu, 1e-9):,.0f}/CPU-s), batch {list(prob.inputs.shape)}, "
              f"load {load0:.1f}", flush=True)
    out["ratio_cpu"] = round(out["new"]["per_cpu_s"] / max(out["old"]["per_cpu_s"], 1), 1)
    out["ratio_wall"] = round(out["new"]["per_wall_s"] / max(out["old"]["per_wall_s"], 1), 1)
    out["ratio_cpu_search_batch"] = round(out["new (search batch)"]["per_cpu_s"] / max(
        out["old (search batch)"]["per_cpu_s"], 1), 1)
    return out


def finds(names, budget: int, max_length: int) -> list[dict]:
    rows = []
    for name in names:
        task = tasks.get_task(name)
        ref = task.load_reference() if task.reference_file else None
        c0, t0 = time.process_time(), time.perf_counter()
        res = search(task, "raspl", budget, max_size=max_length, progress=sys.stderr.isatty())
        d = res.to_dict()
        d["shipped_length"] = measure(ref).length if ref is not None else None
        d["shipped_size"] = new_engine.tree_size(ref) if ref is not None else None
        d["wall_seconds"] = round(time.perf_counter() - t0, 1)
        d["cpu_seconds"] = round(time.process_time() - c0, 1)
        d["load_avg"] = round(os.getloadavg()[0], 2)
        rows.append(d)
        print(res.summary(), flush=True)
        if res.source:
            print("    " + res.source.replace("\n", "\n    "), flush=True)
    return rows


def tables(out: dict) -> str:
    e = out.get("engines")
    lines = [] if e is None else ["| engine | threads | programs | wall s | CPU s | programs / wall s | programs / CPU s | "
             "certified: none of size <= | load |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label in (() if e is None else ("old", "new", "new, 1 thread", "old (search batch)",
                                         "new (search batch)")):
        r = e[label]
        lines.append(f"| {label}, batch {r['batch'][0]} x {r['batch'][1]} | {r['threads']} | "
                     f"{r['programs']:,} | {r['wall_s']} | {r['cpu_s']} | "
                     f"{r['per_wall_s']:,} | {r['per_cpu_s']:,} | {r['certified']} | "
                     f"{r['load_avg'][0]}-{r['load_avg'][1]} |")
    if e is not None:
        lines.append(f"\nnew / old: {e['ratio_wall']}x per wall second at length-64 batches "
                     f"({e['ratio_cpu']}x per CPU second), {e['ratio_cpu_search_batch']}x per "
                     f"CPU second on the search batch ({e['task']}; batch = rows x tokens).\n")
    lines += ["| task | shipped program (length / size) | certified lower bound (size) | found "
              "(size / length, how) | seconds (wall / CPU) | candidates (enumeration + "
              "combination) | load |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in out["finds"]:
        found = (f"{r['length']} / {r['measured_length']}, {r['found_by']}" if r["found"]
                 else f"none ({r['stopped']})")
        lines.append(f"| {r['task']} | {r['shipped_length']} / {r['shipped_size']} | "
                     f"{r['certified_lower_bound']} | {found} | "
                     f"{r['wall_seconds']} / {r['cpu_seconds']} | {r['explored']:,} + "
                     f"{r['combine_work']:,} | "
                     f"{r['load_avg']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default=",".join(DEFAULT_TASKS))
    from analysis.prediction.budget import DEEP_SEARCH_BUDGET, parse_budget
    ap.add_argument("--budget", type=parse_budget, default=DEEP_SEARCH_BUDGET,
                    help=f"candidate programs per task (default {DEEP_SEARCH_BUDGET:,})")
    ap.add_argument("--engine-seconds", type=float, default=60.0,
                    help="seconds per engine in the side-by-side run")
    ap.add_argument("--engine-task", default="count")
    ap.add_argument("--max-length", type=int, default=8)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "search.json"))
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.tasks.split(",") if n.strip()]
    out = {"machine": {"cpu": cpu_model(), "cores": os.cpu_count(),
                       "python": platform.python_version()},
           "settings": vars(args)}
    if args.engine_seconds > 0:
        out["engines"] = engines(args.engine_task, args.engine_seconds, args.max_length)
    out["finds"] = finds(names, args.budget, args.max_length)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(tables(out))
    print(f"machine: {out['machine']}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
