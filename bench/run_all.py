"""Run every benchmark of rasp-lab in turn (`make bench` / `python -m bench.run_all`).

Each benchmark prints its table and writes JSON under ``bench/results/``; see
``docs/benchmarks.md`` for the recorded numbers and the machine they were measured on.
"""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = ["bench.bench_interpreter", "bench.bench_compiler", "bench.bench_compiler_fuzz",
              "bench.bench_search", "bench.bench_loading",
              "bench.bench_training"]


def main(argv: list[str] | None = None) -> int:
    names = argv if argv else BENCHMARKS
    status = 0
    for name in names:
        print(f"== {name} ==", flush=True)
        module = importlib.import_module(name)
        try:
            rc = module.main([]) if hasattr(module, "main") else 0
        except SystemExit as e:  # argparse-based mains
            rc = e.code or 0
        status = status or int(rc or 0)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
