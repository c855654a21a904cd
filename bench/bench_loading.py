"""Loading time of large ``.rasp`` files, today's code side by side with a baseline revision
(docs/benchmarks.md, "Loading large programs"; issue 13 item 4).

Generates programs of about 0.5, 1.7 and 5 MB in two shapes (``library``: assignments of
aggregates, selector widths and function definitions, each name new; ``short``: many short
atom statements), then runs
``rasp.run_file`` on each in a fresh subprocess for the working tree and for a baseline git
revision (its ``rasp/`` package extracted with ``git archive``), and reports the CPU seconds of
the child (``resource.getrusage``; the machine is shared, so wall time is not used) and the
seconds per MB, whose constancy across sizes is what "linear" means here.

Run:  ``.venv/bin/python -m bench.bench_loading`` (``--baseline REV``, ``--sizes 0.5,1.7,5``,
``--skip-baseline``). Writes ``bench/results/loading.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import cpu_model  # noqa: E402

#: main when issue 13 was measured (before the GC pause in the parser and the journal rollback)
BASELINE = "79749dd"

_CHILD = """
import resource, sys, time
from rasp.repl.session import run_file
env = run_file(sys.argv[1])
ru = resource.getrusage(resource.RUSAGE_SELF)
print(ru.ru_utime + ru.ru_stime, ru.ru_maxrss, len(env.own_names()))
"""


_REPL_CHILD = """
import contextlib, io, os, resource, sys
from rasp.repl.repl import Repl
path = sys.argv[1]
os.chdir(os.path.dirname(path))
with contextlib.redirect_stdout(io.StringIO()) as out:
    Repl(history_file=False).run_lines(['load "' + os.path.basename(path)[:-5] + '";' + chr(10)])
assert "s-op: x" in out.getvalue() and "ignoring" not in out.getvalue(), out.getvalue()[-500:]
ru = resource.getrusage(resource.RUSAGE_SELF)
print(ru.ru_utime + ru.ru_stime, ru.ru_maxrss, 1)
"""


def make_program(size_bytes: int, shape: str = "library") -> str:
    """A program of about ``size_bytes`` bytes. ``library``: blocks of an aggregate, a
    selector width and a function definition, every name new; ``short``: many short atom
    statements reassigning one name (``x = 17 + 1;``)."""
    parts, total, k = [], 0, 0
    while total < size_bytes:
        if shape == "library":
            s = (f"a{k} = aggregate(select(indices, length - indices - 1, ==), tokens);\n"
                 f"h{k} = selector_width(select(tokens, tokens, ==)) + {k % 7};\n"
                 f"def f{k}(x) {{ return x + {k}; }}\n")
        else:
            s = f"x = {k} + 1;\n"
        parts.append(s)
        total += len(s)
        k += 1
    return "".join(parts)


SHAPES = ("library", "short")


def _extract(rev: str, dest: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "rasp"], check=True,
                             capture_output=True).stdout
    dest.mkdir(parents=True, exist_ok=True)
    tar = dest / "rasp.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as t:
        t.extractall(dest)
    return dest


def _trees(baseline: str | None, tmp: Path) -> dict[str, Path]:
    """``{"today": ROOT, "baseline": extracted tree}`` (no baseline: today only)."""
    trees = {"today": ROOT}
    if baseline:
        trees["baseline"] = _extract(baseline, tmp / "baseline")
    return trees


def _load_cpu(tree: Path, path: Path, timeout: int, child: str = _CHILD) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    # cwd=tree: ``python -c`` puts the working directory first on sys.path, which would import
    # the working tree's ``rasp`` for the baseline too
    out = subprocess.run([sys.executable, "-c", child, str(path)], capture_output=True,
                         text=True, env=env, timeout=timeout, cwd=str(tree))
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-1000:])
    cpu, rss, names = out.stdout.split()
    return {"cpu_s": float(cpu), "max_rss_mb": int(rss) / 1024, "names": int(names)}


def run(sizes=(0.5, 1.7, 5.0), baseline: str | None = BASELINE, timeout: int = 1800,
        verbose: bool = True, shapes=SHAPES) -> dict:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trees = _trees(baseline, tmp)
        for shape, mb in [(sh, mb) for sh in shapes for mb in sizes]:
            path = tmp / f"prog_{shape}_{mb}MB.rasp"
            path.write_text(make_program(int(mb * 1_000_000), shape))
            size = path.stat().st_size / 1e6
            row = {"shape": shape, "size_mb": round(size, 2)}
            for label, tree in trees.items():
                r = _load_cpu(tree, path, timeout)
                row[label] = r
                row[f"{label}_s_per_mb"] = r["cpu_s"] / size
            if "baseline" in row:
                row["speedup"] = row["baseline"]["cpu_s"] / row["today"]["cpu_s"]
            rows.append(row)
            if verbose:
                base = (f"  baseline {row['baseline']['cpu_s']:8.1f} s "
                        f"({row['baseline_s_per_mb']:.1f} s/MB)" if "baseline" in row else "")
                print(f"{shape:<8} {size:5.2f} MB: today {row['today']['cpu_s']:7.1f} s "
                      f"({row['today_s_per_mb']:.1f} s/MB){base}", flush=True)
    return {"command": ".venv/bin/python -m bench.bench_loading", "baseline": baseline,
            "machine": {"cpu": cpu_model(), "cores": os.cpu_count(),
                        "python": platform.python_version()},
            "rows": rows}


def run_repl_chain(counts=(1000, 2000, 4000), baseline: str | None = "ba133f1",
                   timeout: int = 1800, verbose: bool = True) -> dict:
    """The REPL's ``load`` of a chain ``x = indices; x = x + 1; ...`` of ``count`` statements:
    every statement is checked on the running example (as the original REPL), which before the
    cached example evaluator re-evaluated the whole chain each time (quadratic)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trees = _trees(baseline, tmp)
        for n in counts:
            path = tmp / f"chain{n}.rasp"
            path.write_text("x = indices;\n" + "x = x + 1;\n" * n)
            row = {"statements": n}
            for label, tree in trees.items():
                row[label] = _load_cpu(tree, path, timeout, _REPL_CHILD)
                row[f"{label}_ms_per_statement"] = 1000 * row[label]["cpu_s"] / n
            rows.append(row)
            if verbose:
                base = (f"  baseline {row['baseline']['cpu_s']:7.1f} s"
                        if "baseline" in row else "")
                print(f"REPL load of a {n}-statement chain: today {row['today']['cpu_s']:6.1f} s"
                      f"{base}", flush=True)
    return {"command": ".venv/bin/python -m bench.bench_loading --repl-chain",
            "baseline": baseline, "rows": rows}


def markdown_table(result: dict) -> str:
    lines = ["| program | size | today CPU s | today s/MB | baseline CPU s | baseline s/MB | "
             "speed-up |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in result["rows"]:
        b = r.get("baseline")
        lines.append(f"| {r['shape']} | {r['size_mb']} MB | {r['today']['cpu_s']:.1f} | "
                     f"{r['today_s_per_mb']:.1f} | "
                     + (f"{b['cpu_s']:.1f} | {r['baseline_s_per_mb']:.1f} | "
                        f"{r['speedup']:.1f}x |" if b else "- | - | - |"))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="0.5,1.7,5", help="program sizes in MB")
    ap.add_argument("--baseline", default=BASELINE, help="git revision to compare with")
    ap.add_argument("--skip-baseline", action="store_true")
    ap.add_argument("--shapes", default=",".join(SHAPES), help="program shapes: library,short")
    ap.add_argument("--repl-chain", action="store_true",
                    help="instead: the REPL's load of chains of 1,000-4,000 dependent statements "
                         "(checked on the running example), today vs --baseline (default ba133f1, "
                         "before the cached example evaluator)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "loading.json"))
    args = ap.parse_args(argv)
    if args.repl_chain:
        base = None if args.skip_baseline else (
            "ba133f1" if args.baseline == BASELINE else args.baseline)
        result = run_repl_chain(baseline=base)
        out = Path(args.out).with_name("loading_repl_chain.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2))
        print("\n| statements | today CPU s | baseline CPU s | ms/statement today | baseline |"
              "\n|---|---|---|---|---|")
        for r in result["rows"]:
            b = r.get("baseline", {}).get("cpu_s")
            print(f"| {r['statements']:,} | {r['today']['cpu_s']:.1f} | "
                  f"{'' if b is None else f'{b:.1f}'} | {r['today_ms_per_statement']:.2f} | "
                  f"{r.get('baseline_ms_per_statement', float('nan')):.2f} |")
        return 0
    sizes = tuple(float(s) for s in args.sizes.split(","))
    result = run(sizes, None if args.skip_baseline else args.baseline,
                 shapes=tuple(args.shapes.split(",")))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print()
    print(markdown_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
