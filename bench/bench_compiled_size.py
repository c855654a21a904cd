"""Compiled size of every task program, before and after (docs/benchmarks.md, "Compiled size").

For every task of the catalogue with a reference program (``tasks/programs``), compiles it at
each ``--max-len`` over the task's program vocabulary, in a fresh subprocess, once with the
working tree and once with a baseline git revision (its ``rasp``, ``compiler``, ``rasp_model``
(``model`` before issue 23) and ``tasks`` packages extracted with ``git archive``), and reports parameters, non-zero
parameters, ``d_model`` and MLP hidden units side by side. Exactness: every model passed the
compiler's verification gate (a compiled model that differs from the interpreter is refused),
and each is compared again here with the interpreter on ``--random`` seeded random inputs per
length (mismatches are reported; they must be 0).

Writes ``bench/results/compiled_size.json`` and prints the Markdown table.

Run:  ``.venv/bin/python -m bench.bench_compiled_size`` (``--baseline REV``, ``--max-len 8 16``,
``--random K``).
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: the compiler before per-head widths and the smallest exact encoding (issue 15, item 5)
BASELINE = "1f34a65"
#: the packages a compiled model needs (the Transformer's package was ``model`` before issue 23)
PACKAGES = ["rasp", "compiler", "rasp_model", "model", "tasks"]

CHILD = r"""
import inspect, json, sys, time
import numpy as np
import rasp, tasks
from compiler import compile_program
from compiler.errors import CompilerError
# a task's inputs outside its contract (sort_unique_seq's repeated tokens) raise: declared
# out of contract where the compiler refuses them by default (issue 51; not in the baseline)
kw = {"raising": "declare"} if "raising" in inspect.signature(compile_program).parameters else {}

lengths = json.loads(sys.argv[1]); K = int(sys.argv[2])
rows = []
for name in tasks.list_tasks():
    t = tasks.get_task(name)
    if t.reference_path is None:
        continue
    sop = t.load_reference()
    for n in lengths:
        row = {"task": name, "max_seq_len": n}
        vocab = sorted(t.program_vocab(n), key=lambda v: (isinstance(v, str), v))
        c0 = time.process_time()
        try:
            cm = compile_program(sop, set(vocab), n, causal=t.causal, **kw)
        except CompilerError as e:
            row["refused"] = str(e).splitlines()[0][:160]
            rows.append(row)
            continue
        row["compile_cpu_s"] = round(time.process_time() - c0, 3)
        s = cm.stats
        row.update({k: s[k] for k in ("layers", "heads", "d_model", "mlp_hidden", "params",
                                      "nonzero_params")})
        rng = np.random.default_rng(0)
        checked = bad = 0
        for length in range(1, n + 1):
            for _ in range(K):
                x = [vocab[i] for i in rng.integers(0, len(vocab), length)]
                try:
                    ref = rasp.evaluate(sop, [x], causal=t.causal)[0]
                except rasp.RASPError:
                    continue
                got = cm.run([x])[0]
                a, b = np.asarray(ref), np.asarray(got)
                if a.dtype.kind in "fiub" and b.dtype.kind in "fiub":
                    same = a.shape == b.shape and np.allclose(a.astype(float), b.astype(float),
                                                              rtol=1e-9, atol=1e-9)
                else:
                    same = a.shape == b.shape and np.array_equal(a.astype(str), b.astype(str))
                checked += 1
                bad += not same
        row["checked"], row["mismatches"] = checked, bad
        rows.append(row)
print(json.dumps(rows))
"""


def _tree(rev: str | None, tmp: Path) -> Path:
    """The directory whose packages are measured: the working tree, or ``rev`` extracted."""
    if rev is None:
        return ROOT
    present = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", rev],
                             check=True, capture_output=True, text=True).stdout.split()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev,
                              *[p for p in PACKAGES if p in present]], check=True,
                             capture_output=True).stdout
    out = tmp / rev
    out.mkdir()
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(out, filter="data")
    return out


def measure(rev: str | None, lengths: list[int], k: int, tmp: Path) -> list[dict]:
    """Rows of one tree (``rev`` None: the working tree), from a child process whose working
    directory is that tree (so it imports that tree's packages)."""
    cwd = _tree(rev, tmp)
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(lengths), str(k)], cwd=cwd,
                          capture_output=True, text=True, env={"PYTHONPATH": str(cwd),
                                                               "PATH": "/usr/bin:/bin"})
    if proc.returncode != 0:
        raise SystemExit(f"measuring {rev or 'the working tree'} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _cell(row: dict | None, key: str) -> str:
    if row is None:
        return "-"
    if "refused" in row:
        return "refused"
    return f"{row[key]:,}"


def table(before: list[dict], after: list[dict], rev: str) -> str:
    idx = {(r["task"], r["max_seq_len"]): r for r in before}
    lines = [f"| task | max_seq_len | params {rev} | params now | ratio | non-zero {rev} | "
             "non-zero now | d_model before / now | MLP hidden before / now | exact now "
             "(random inputs) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    tot = {}
    for a in after:
        b = idx.get((a["task"], a["max_seq_len"]))
        ratio = "-"
        if b and "refused" not in b and "refused" not in a:
            ratio = f"{b['params'] / a['params']:.1f}x"
            t = tot.setdefault(a["max_seq_len"], [0, 0, 0, 0])
            t[0] += b["params"]
            t[1] += a["params"]
            t[2] += b["nonzero_params"]
            t[3] += a["nonzero_params"]
        exact = (a.get("refused", "")[:60] if "refused" in a else
                 f"{a['checked'] - a['mismatches']}/{a['checked']}")
        dm = f"{_cell(b, 'd_model')} / {_cell(a, 'd_model')}"
        mlp = f"{_cell(b, 'mlp_hidden')} / {_cell(a, 'mlp_hidden')}"
        lines.append(f"| {a['task']} | {a['max_seq_len']} | {_cell(b, 'params')} | "
                     f"{_cell(a, 'params')} | {ratio} | {_cell(b, 'nonzero_params')} | "
                     f"{_cell(a, 'nonzero_params')} | {dm} | {mlp} | {exact} |")
    for n, (p0, p1, z0, z1) in sorted(tot.items()):
        lines.append(f"| **all compiled by both** | {n} | {p0:,} | {p1:,} | {p0 / p1:.1f}x | "
                     f"{z0:,} | {z1:,} | | | |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", default=BASELINE, help="git revision to compare with "
                    f"(default {BASELINE}: before per-head widths and the encoding pass)")
    ap.add_argument("--max-len", type=int, nargs="+", default=[8, 16],
                    help="max_seq_len values to compile at (default 8 16)")
    ap.add_argument("--random", type=int, default=10,
                    help="random inputs per length for the extra exactness check (default 10)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "compiled_size.json"))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        before = measure(args.baseline, args.max_len, args.random, Path(tmp))
        after = measure(None, args.max_len, args.random, Path(tmp))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"baseline": args.baseline, "max_len": args.max_len,
                                          "random": args.random, "before": before,
                                          "after": after}, indent=1))
    print(table(before, after, args.baseline))
    bad = sum(r.get("mismatches", 0) for r in after)
    print(f"\nmismatches (now): {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
