"""Interpreter throughput benchmark (docs/benchmarks.md, "Interpreter throughput").

For each reference program (hist, sort, reverse, dyck2; count next-token when the task catalogue
provides it) and each length (16, 64, 256), on a batch of 1,000 random sequences, measures
token-positions per second (sequences x length / seconds) of:

* ``batched``     — ``rasp.evaluate`` on the whole batch at once;
* ``one_at_a_time`` — the same interpreter called once per sequence;
* ``numpy``       — the same program hand-written directly in NumPy (batched): the limit;
* ``python``      — a plain per-sequence Python evaluator of the same semantics (loops over
  positions; measured on a subset and reported per token-position).

All numbers of one row are measured side by side in one run; ratios are what we compare
(machines are shared and noisy). Writes ``bench/results/interpreter.json`` and prints a table.

Run:  ``.venv/bin/python -m bench.bench_interpreter`` (options: ``--batch``, ``--lengths``,
``--repeats``, ``--quick``). ``--lists-vs-tracr`` instead measures Python-list input (and the
same batch as an ndarray) against Tracr's evaluator for hist, sort_unique and reverse at
length 64 (writes ``bench/results/interpreter_lists_vs_tracr.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import cpu_model  # noqa: E402
import rasp  # noqa: E402
from rasp import (aggregate, evaluate, indices, length, select, selector_width,  # noqa: E402
                  tokens_int)
from rasp.ir import Elementwise, Full, Map, SequenceMap  # noqa: E402

VOCAB = 8


# --------------------------------------------------------------------------------------------
# The programs (Python API, as in the original paper_examples.rasp / rasplib.rasp)
# --------------------------------------------------------------------------------------------

def prog_hist():
    return selector_width(select(tokens_int, tokens_int, "=="))


def prog_sort():
    key = tokens_int
    earlier = select(key, key, "<") | (select(key, key, "==") & select(indices, indices, "<"))
    target = selector_width(earlier)
    return aggregate(select(target, indices, "=="), tokens_int)


def prog_reverse():
    return aggregate(select(indices, length - indices - 1, "=="), tokens_int)


def _indicator(x):
    return Map(Elementwise("indicator"), x)


def prog_dyck2():
    """The original paper's dyck2 (``dyckk_ptf(["()", "{}"])``) on token ids 0 ( 1 ) 2 { 3 }:
    1 = balanced so far ("T"), 2 = open ("P"), 0 = failed ("F")."""
    opens = _indicator(Map(Elementwise("in", container=[0, 2]), tokens_int))
    closes = _indicator(Map(Elementwise("in", container=[1, 3]), tokens_int))
    up_to_self = select(indices, indices, "<=")
    n_opens = (indices + 1) * aggregate(up_to_self, opens)
    n_closes = (indices + 1) * aggregate(up_to_self, closes)
    depth = Map(Elementwise("round"), n_opens - n_closes)
    delay_closer = depth + closes
    depth_index = selector_width(select(delay_closer, delay_closer, "==") & up_to_self)
    open_for_close = (select(opens, 1, "==") & select(delay_closer, delay_closer, "==")
                      & select(depth_index, depth_index - 1, "=="))
    matched_opener = aggregate(open_for_close, tokens_int, -1)
    opener_matches = (matched_opener + 1) == tokens_int
    mismatch = closes & ~opener_matches
    had_problem = aggregate(up_to_self, _indicator(mismatch | (depth < 0))) > 0
    tern = Elementwise("ternary")
    return SequenceMap(tern, (had_problem, Full(0),
                              SequenceMap(tern, (depth == 0, Full(1), Full(2)))))


# --------------------------------------------------------------------------------------------
# The same programs hand-written in NumPy (batched, same algorithm: selector matrices)
# --------------------------------------------------------------------------------------------

def np_hist(x):
    return (x[:, None, :] == x[:, :, None]).sum(-1)


def _np_mean_aggregate(sel, vals, default=0):
    count = sel.sum(-1)
    sums = np.einsum("bqk,bk->bq", sel.astype(np.float64), vals.astype(np.float64))
    return np.where(count == 0, default, sums / np.maximum(count, 1))


def np_sort(x):
    n = x.shape[1]
    idx = np.arange(n)
    k, q = x[:, None, :], x[:, :, None]
    earlier = (k < q) | ((k == q) & (idx[None, None, :] < idx[None, :, None]))
    target = earlier.sum(-1)
    sel = target[:, None, :] == idx[None, :, None]
    return _np_mean_aggregate(sel, x)


def np_reverse(x):
    n = x.shape[1]
    idx = np.arange(n)
    sel = idx[None, None, :] == (n - idx - 1)[None, :, None]
    sel = np.broadcast_to(sel, (x.shape[0], n, n))
    return _np_mean_aggregate(sel, x)


def np_dyck2(x):
    b, n = x.shape
    idx = np.arange(n)
    opens = np.isin(x, [0, 2]).astype(np.int64)
    closes = np.isin(x, [1, 3]).astype(np.int64)
    up = idx[None, :] <= idx[:, None]
    upb = np.broadcast_to(up, (b, n, n))
    n_opens = (idx + 1) * _np_mean_aggregate(upb, opens)
    n_closes = (idx + 1) * _np_mean_aggregate(upb, closes)
    depth = np.round(n_opens - n_closes).astype(np.int64)
    delay = depth + closes
    same = delay[:, None, :] == delay[:, :, None]
    depth_index = (same & up).sum(-1)
    ofc = (opens[:, None, :] == 1) & same & (depth_index[:, None, :] == depth_index[:, :, None] - 1)
    matched = _np_mean_aggregate(ofc, x, -1)
    mismatch = closes.astype(bool) & ~((matched + 1) == x)
    had = _np_mean_aggregate(upb, (mismatch | (depth < 0)).astype(np.int64)) > 0
    return np.where(had, 0, np.where(depth == 0, 1, 2))


# --------------------------------------------------------------------------------------------
# Plain per-sequence Python evaluator (same semantics, loops), for the "python" column
# --------------------------------------------------------------------------------------------

def py_hist(seq):
    return [sum(1 for k in seq if k == q) for q in seq]


def py_sort(seq):
    n = len(seq)
    target = [sum(1 for j in range(n) if seq[j] < seq[i] or (seq[j] == seq[i] and j < i))
              for i in range(n)]
    out = []
    for q in range(n):
        chosen = [seq[k] for k in range(n) if target[k] == q]
        out.append(sum(chosen) / len(chosen) if chosen else 0)
    return out


def py_reverse(seq):
    n = len(seq)
    out = []
    for q in range(n):
        chosen = [seq[k] for k in range(n) if k == n - q - 1]
        out.append(sum(chosen) / len(chosen) if chosen else 0)
    return out


def prog_count():
    """The count task's RASP-L next-token program (``tasks/programs/count.rasp``, causal)."""
    import tasks
    task = tasks.get_task("count")
    path = Path(task.reference_file)
    if not path.is_absolute():
        path = Path(tasks.__file__).parent / "programs" / path
    return rasp.run_file(path, causal=True)[task.reference_name]


def np_count(x):
    """count.rasp by hand, with its selects as causal [batch, query, key] matrices like the
    other programs here (needs length >= 3): at b's position (2) the next token is a = x[1];
    after b (``has_seen``: a key at or before the query equal to b) EOS (-3); else token + 1."""
    n = x.shape[1]
    idx = np.arange(n)
    tril = idx[None, :] <= idx[:, None]                              # [query, key]
    at_b = idx == 2
    read = (idx[None, :] == np.where(at_b, 1, idx)[:, None]) & tril  # index_select
    current = np.einsum("qk,bk->bq", read.astype(np.int64), x)
    masked = np.where(at_b[None, :], x, -9)
    seen = ((masked[:, None, :] == x[:, :, None]) & tril[None]).any(-1)
    return np.where(seen & ~at_b, -3, current + (~at_b).astype(np.int64))


# name -> (program maker, direct NumPy, plain Python (or None), causal)
PROGRAMS = {
    "hist": (prog_hist, np_hist, py_hist, None),
    "sort": (prog_sort, np_sort, py_sort, None),
    "reverse": (prog_reverse, np_reverse, py_reverse, None),
    "dyck2": (prog_dyck2, np_dyck2, None, None),
    "count": (prog_count, np_count, None, True),
}


def make_inputs(name, batch, n, rng):
    if name == "dyck2":
        return rng.integers(0, 4, size=(batch, n))
    if name == "count":
        # BOS a b, then the answer so far: token values as count.rasp sees them (ints, BOS -1)
        x = rng.integers(0, 120, size=(batch, n))
        x[:, 0] = -1
        return x
    return rng.integers(0, VOCAB, size=(batch, n))


def best_time(fn, repeats, clock=time.perf_counter):
    """The best of ``repeats`` timings of ``fn()`` (``clock``: wall or ``time.process_time``)."""
    best = float("inf")
    for _ in range(repeats):
        t0 = clock()
        fn()
        best = min(best, clock() - t0)
    return best


def run(batch=1000, lengths=(16, 64, 256), repeats=3, one_at_a_time_max=1000,
        python_max=50, out_path=None, verbose=True):
    """Run the benchmark; returns the result dict (also written as JSON to ``out_path``)."""
    rng = np.random.default_rng(0)
    rows = []
    programs = dict(PROGRAMS)
    for name, (make, np_fn, py_fn, causal) in programs.items():
        try:
            prog = make()
        except Exception as e:  # noqa: BLE001 - an optional row (task catalogue missing)
            if verbose:
                print(f"{name:<8} skipped: {e}")
            continue
        for n in lengths:
            x = make_inputs(name, batch, n, rng)
            # correctness first: the interpreter must agree with the NumPy version
            got = evaluate(prog, x, causal=causal)
            want = np_fn(x)
            if not np.allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float)):
                # the program changed under the hand-written version: report, skip the row
                if verbose:
                    print(f"{name:<8} {n:>4} skipped: interpreter and direct NumPy disagree")
                continue
            t_batched = best_time(lambda: evaluate(prog, x, causal=causal), repeats)
            t_numpy = best_time(lambda: np_fn(x), repeats)
            m = min(batch, one_at_a_time_max)
            t_single = best_time(
                lambda: [evaluate(prog, x[i:i + 1], causal=causal) for i in range(m)],
                1) * batch / m
            t_python = None
            if py_fn is not None:
                p = min(batch, python_max if n <= 64 else max(5, python_max // 10))
                seqs = x[:p].tolist()
                t_python = best_time(lambda: [py_fn(s) for s in seqs], 1) * batch / p
            tp = batch * n
            row = {
                "program": name, "length": n, "batch": batch, "causal": bool(causal),
                "batched_tps": tp / t_batched, "one_at_a_time_tps": tp / t_single,
                "numpy_tps": tp / t_numpy,
                "python_tps": (tp / t_python) if t_python else None,
                "speedup_vs_one_at_a_time": t_single / t_batched,
                "numpy_over_batched": t_batched / t_numpy,
                "speedup_vs_python": (t_python / t_batched) if t_python else None,
            }
            rows.append(row)
            if verbose:
                print(_fmt_row(row), flush=True)
    result = {
        "command": ".venv/bin/python -m bench.bench_interpreter",
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(),
                    "python": platform.python_version(), "numpy": np.__version__},
        "bars": {"speedup_vs_one_at_a_time_at_64": ">= 50", "numpy_over_batched": "<= 3",
                 "tracr_reference_tps_at_64": "31,000 (sort) to 63,000 (hist)"},
        "rows": rows,
    }
    if out_path is not None:
        Path(out_path).parent.mkdir(parents=True, exist_ok=True)
        Path(out_path).write_text(json.dumps(result, indent=2))
    return result


# --------------------------------------------------------------------------------------------
# Python-list input against Tracr's evaluator (issue 15 item 4)
# --------------------------------------------------------------------------------------------

def _tracr_programs():
    """hist, sort_unique and reverse in tracr.rasp (Tracr's own lib for length and
    sort_unique), on integer tokens."""
    from tracr.compiler import lib
    from tracr.rasp import rasp as tr
    t, i = tr.tokens, tr.indices
    length = lib.make_length()
    opp = tr.SequenceMap(lambda n, k: n - k - 1, length, i)
    return {
        "hist": tr.SelectorWidth(tr.Select(t, t, tr.Comparison.EQ)),
        "sort_unique": lib.make_sort_unique(t, t),
        "reverse": tr.Aggregate(tr.Select(i, opp, tr.Comparison.EQ), t),
    }


def _our_list_programs():
    smaller = select(tokens_int, tokens_int, "<")
    return {
        "hist": prog_hist(),
        "sort_unique": aggregate(select(selector_width(smaller), indices, "=="), tokens_int),
        "reverse": prog_reverse(),
    }


def run_lists_vs_tracr(batch=1000, n=64, repeats=5, tracr_sequences=100, verbose=True):
    """Token-positions per second of ``rasp.evaluate`` on a batch of Python lists and on the
    same batch as an ndarray, and of Tracr's evaluator (``tracr.rasp.rasp.evaluate``, one
    sequence per call, measured on ``tracr_sequences`` sequences), side by side in one run;
    outputs checked equal to Tracr's on those sequences. CPU time (process_time): the
    machine is shared."""
    from tracr.rasp import rasp as tr
    rng = np.random.default_rng(1)
    ours, theirs = _our_list_programs(), _tracr_programs()
    rows = []
    for name in ("hist", "sort_unique", "reverse"):
        if name == "sort_unique":          # unique keys: a permutation per sequence
            x = np.stack([rng.permutation(n) for _ in range(batch)])
        else:
            x = rng.integers(0, VOCAB, size=(batch, n))
        lists = x.tolist()
        prog = ours[name]
        got = evaluate(prog, lists)
        sub = lists[:tracr_sequences]
        t0 = time.process_time()
        want = [tr.evaluate(theirs[name], s) for s in sub]
        t_tracr = (time.process_time() - t0) / len(sub) * batch
        if got[:len(sub)].tolist() != want:
            raise AssertionError(f"{name}: rasp-lab and Tracr disagree")
        t_list = best_time(lambda: evaluate(prog, lists), repeats, time.process_time)
        t_array = best_time(lambda: evaluate(prog, x), repeats, time.process_time)
        tp = batch * n
        row = {"program": name, "length": n, "batch": batch, "list_tps": tp / t_list,
               "ndarray_tps": tp / t_array, "tracr_tps": tp / t_tracr,
               "list_over_tracr": t_tracr / t_list, "ndarray_over_tracr": t_tracr / t_array}
        rows.append(row)
        if verbose:
            print(f"{name:<12} lists {row['list_tps']:>13,.0f}  ndarray {row['ndarray_tps']:>13,.0f}"
                  f"  Tracr {row['tracr_tps']:>9,.0f}  lists/Tracr {row['list_over_tracr']:>6.0f}x"
                  f"  ndarray/Tracr {row['ndarray_over_tracr']:>6.0f}x", flush=True)
    return rows


def markdown_lists(rows) -> str:
    lines = ["| program | Python lists tok-pos/s | ndarray tok-pos/s | Tracr evaluator | "
             "lists / Tracr | ndarray / Tracr |", "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['program']} | {r['list_tps']:,.0f} | {r['ndarray_tps']:,.0f} | "
                     f"{r['tracr_tps']:,.0f} | {r['list_over_tracr']:.0f}x | "
                     f"{r['ndarray_over_tracr']:.0f}x |")
    return "\n".join(lines)


HEADER = (f"{'program':<8} {'len':>4} {'batched tok/s':>14} {'1-at-a-time':>12} "
          f"{'numpy':>12} {'python':>10} {'x 1-at-a-time':>13} {'numpy/batched':>13}")


def _fmt_row(r) -> str:
    py = f"{r['python_tps']:>10,.0f}" if r["python_tps"] else f"{'-':>10}"
    return (f"{r['program']:<8} {r['length']:>4} {r['batched_tps']:>14,.0f} "
            f"{r['one_at_a_time_tps']:>12,.0f} {r['numpy_tps']:>12,.0f} {py} "
            f"{r['speedup_vs_one_at_a_time']:>13.1f} {1 / r['numpy_over_batched']:>13.2f}")


def markdown_table(result) -> str:
    lines = ["| program | length | batched tok-pos/s | one at a time | direct NumPy | "
             "plain Python | batched / one-at-a-time | batched / NumPy |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in result["rows"]:
        py = f"{r['python_tps']:,.0f}" if r["python_tps"] else "-"
        lines.append(f"| {r['program']} | {r['length']} | {r['batched_tps']:,.0f} | "
                     f"{r['one_at_a_time_tps']:,.0f} | {r['numpy_tps']:,.0f} | {py} | "
                     f"{r['speedup_vs_one_at_a_time']:.1f}x | "
                     f"{1 / r['numpy_over_batched']:.2f} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--lengths", default="16,64,256")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="batch 100, lengths 16,64")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "interpreter.json"))
    ap.add_argument("--markdown", action="store_true", help="also print a Markdown table")
    ap.add_argument("--lists-vs-tracr", action="store_true",
                    help="only the Python-list input vs Tracr's evaluator comparison (n=64, "
                         "batch 1,000; needs tracr-pypi)")
    args = ap.parse_args(argv)
    if args.lists_vs_tracr:
        rows = run_lists_vs_tracr(batch=args.batch)
        out = Path(args.out).with_name("interpreter_lists_vs_tracr.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({
            "command": ".venv/bin/python -m bench.bench_interpreter --lists-vs-tracr",
            "machine": {"cpu": cpu_model(), "cores": os.cpu_count(),
                        "python": platform.python_version(), "numpy": np.__version__},
            "bar": "lists / Tracr >= 150x for each program", "rows": rows}, indent=2))
        if args.markdown:
            print()
            print(markdown_lists(rows))
        return 0
    lengths = tuple(int(s) for s in args.lengths.split(","))
    batch = args.batch
    if args.quick:
        batch, lengths = 100, (16, 64)
    print(HEADER)
    result = run(batch=batch, lengths=lengths, repeats=args.repeats, out_path=args.out)
    if args.markdown:
        print()
        print(markdown_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
