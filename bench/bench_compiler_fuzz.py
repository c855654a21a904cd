"""Compiler differential fuzzing, long profile (issue 16 item 6; docs/compiler.md, "Fuzzing").

Random programs over the whole op vocabulary (``tests/compiler_fuzz.py``), compiled at
vocabulary {"1", "2", "3"} and max_seq_len 6 (bidirectional or causal), run on 16 random inputs
each; the compiled model and the interpreter are compared with an independent plain-Python
evaluator. Prints and writes (``bench/results/compiler_fuzz.json``) the counts: programs,
compiled, refused by reason, inputs, mismatches (compiled and interpreter vs the reference).

Run:  ``.venv/bin/python -m bench.bench_compiler_fuzz`` (``--programs N``, ``--seed S``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from compiler_fuzz import run_fuzz  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=1000, help="random programs (default 1000)")
    ap.add_argument("--seed", type=int, default=2026, help="hypothesis seed (default 2026)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "compiler_fuzz.json"))
    args = ap.parse_args(argv)
    t0, c0 = time.perf_counter(), time.process_time()
    stats = run_fuzz(args.programs, args.seed)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    out = {"programs": stats["programs"], "compiled": stats["compiled"],
           "refused": dict(stats["refused"].most_common()), "inputs": stats["inputs"],
           "compiled_mismatches": stats["compiled_mismatches"],
           "interpreter_mismatches": stats["interpreter_mismatches"],
           "examples": [[str(x) for x in e] for e in stats["examples"]],
           "seed": args.seed, "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1)}
    print(json.dumps(out, indent=1))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {args.out}")
    return 0 if stats["compiled_mismatches"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
