"""Value-set growth: Tracr's ``make_shuffle_dyck`` imported with ``rasp.from_tracr`` against the
project's own ``compiler.library.make_shuffle_dyck`` (docs/benchmarks.md, "Compiler",
issue 38 item 5).

For each ``max_seq_len`` the two programs (pairs ``()`` and ``[]``, vocabulary ``()[]``) are
compiled by ``compile_program`` (its verification gate included): CPU seconds
(``time.process_time``) of the value sets alone and of the whole compilation, the largest value
set, layers, parameters, non-zero parameters, or the refusal. Every compiled model is also
checked against the interpreter on ``--random`` random inputs per length.

Writes ``bench/results/compiler_growth.json``.

Run:  ``.venv/bin/python -m bench.bench_compiler_growth`` (``--lens 8 16 32 64``,
``--random K``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import rasp  # noqa: E402
from compiler import CompilerError, compile_program  # noqa: E402
from compiler.basis_inference import infer_bases  # noqa: E402
from compiler.library import make_shuffle_dyck  # noqa: E402

from bench.bench_compiler import check  # noqa: E402

VOCAB = list("()[]")


def programs() -> dict:
    """``{"tracr": imported program, "ours": the project's}``; Tracr's is absent without the
    test extra."""
    out = {}
    try:
        import tracr.compiler.lib as L
        logging.getLogger("absl").setLevel(logging.ERROR)
        out["tracr"] = lambda: rasp.from_tracr(L.make_shuffle_dyck(["()", "[]"]))
    except ImportError:
        pass
    out["ours"] = lambda: make_shuffle_dyck(["()", "[]"])
    return out


def measure(which: str, make, n: int, random_k: int) -> dict:
    sop = make()
    row = {"program": which, "max_seq_len": n}
    c0 = time.process_time()
    try:
        vs = infer_bases(sop, VOCAB, n, False)
    except CompilerError as e:
        row["refused"] = str(e).splitlines()[0]
        row["value_sets_cpu_seconds"] = round(time.process_time() - c0, 3)
        return row
    row["value_sets_cpu_seconds"] = round(time.process_time() - c0, 3)
    row["largest_value_set"] = max(len(v) for v in vs.sets.values())
    c0 = time.process_time()
    try:
        cm = compile_program(sop, VOCAB, n)
    except CompilerError as e:
        row["refused"] = str(e).splitlines()[0]
        return row
    row["compile_cpu_seconds"] = round(time.process_time() - c0, 3)
    s = cm.stats
    row.update(layers=s["layers"], params=s["params"], nonzero_params=s["nonzero_params"],
               d_model=s["d_model"])
    bad, total = check(cm, sop, VOCAB, n, random_k)
    row.update(checked_inputs=total, mismatches=bad)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lens", type=int, nargs="+", default=[8, 16, 32, 64])
    ap.add_argument("--random", type=int, default=5,
                    help="random inputs per length checked against the interpreter (default 5)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "compiler_growth.json"))
    args = ap.parse_args(argv)
    rows = []
    print(f"{'program':8s} {'n':>3s} {'value sets s':>12s} {'largest set':>11s} "
          f"{'compile s':>9s} {'layers':>6s} {'params':>9s} {'non-zero':>8s} {'exact':>9s}")
    for n in args.lens:
        for which, make in programs().items():
            r = measure(which, make, n, args.random)
            rows.append(r)
            if "refused" in r:
                print(f"{which:8s} {n:>3d} {r['value_sets_cpu_seconds']:>12.3f} refused: "
                      f"{r['refused'][:90]}")
                continue
            print(f"{which:8s} {n:>3d} {r['value_sets_cpu_seconds']:>12.3f} "
                  f"{r['largest_value_set']:>11,d} {r['compile_cpu_seconds']:>9.3f} "
                  f"{r['layers']:>6d} {r['params']:>9,d} {r['nonzero_params']:>8,d} "
                  f"{r['checked_inputs'] - r['mismatches']:>4d}/{r['checked_inputs']}")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
                   "rows": rows}, f, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
