"""Compiler benchmark (docs/benchmarks.md, "Compiler").

For every program of the peer size table (docs/compiler.md; Tracr's published sizes), compiles
our version at the same vocabulary and max_seq_len and prints our size beside the peer's
(layers, heads, d_model, MLP hidden, parameters; plus non-zero parameters and compile time), then
the sizes at max_seq_len 64, then Tracr's own compiler against ours on every program of Tracr's
library (``tracr.compiler.lib`` through ``rasp.from_tracr``, bidirectional and causal:
parameters, non-zero parameters (ours: all we store, ``W_U`` included; Tracr's: its ``params``
plus its unembedding, a projection applied outside them), layers, compile CPU; needs the test
extra), then, per program whose non-zeros exceed Tracr's, the parts where they do (both
models counted the same way, part by part: ``ours_nonzeros`` / ``tracr_nonzeros``) and the
exactness weights among ours (``exactness_nonzeros``: PAD mask, ``None`` value, count heads).
Every compiled model is checked against the interpreter: all inputs
at the peer's size (exhaustive), ``--random`` random inputs per length at 64. The CPU seconds of
the compiler's stages and of its verification gate (inside ``compile_program``) are reported
side by side, with the gate's share of the total.

Writes ``bench/results/compiler.json``.

Run:  ``.venv/bin/python -m bench.bench_compiler`` (``--random K``, ``--long N``;
``--library-only``: only Tracr's library, printed; ``--corpus``: the fuzzer-shaped corpus).
"""

from __future__ import annotations

import argparse
import itertools
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

import torch  # noqa: E402

import rasp  # noqa: E402
from compiler import CompilerError, compile_program  # noqa: E402
from rasp.equality import values_equal  # noqa: E402
from compiler.library import PEER_TABLE, peer_programs  # noqa: E402


def check(cm, sop, vocab, n, random_k=None, seed=0) -> tuple[int, int]:
    """(mismatches, inputs): exhaustive when ``random_k`` is None, else random per length."""
    rng = np.random.default_rng(seed)
    bad = total = 0
    for length in range(1, n + 1):
        if random_k is None:
            batch = [list(x) for x in itertools.product(vocab, repeat=length)]
        else:
            batch = [[vocab[i] for i in rng.integers(0, len(vocab), length)]
                     for _ in range(random_k)]
        try:
            ref = rasp.evaluate(sop, batch)
            got = cm.run(batch)
            pairs = list(zip(ref, got))
        except rasp.RASPError:
            pairs = []
            for b in batch:
                try:
                    pairs.append((rasp.evaluate(sop, [b])[0], cm.run([b])[0]))
                except rasp.RASPError:
                    pass
        for r, g in pairs:
            total += 1
            bad += not values_equal(r, g)
    return bad, total


def measure(name, sop, vocab, n, random_k):
    t0 = time.perf_counter()
    try:
        cm = compile_program(sop, vocab, n)
    except CompilerError as e:
        return {"program": name, "max_seq_len": n, "error": str(e).splitlines()[0]}
    secs = time.perf_counter() - t0
    bad, total = check(cm, sop, vocab, n, random_k)
    s = cm.stats
    return {"program": name, "vocab": vocab, "max_seq_len": n, "layers": s["layers"],
            "heads": s["max_heads"], "heads_total": s["heads"], "d_model": s["d_model"],
            "d_head": s["d_head"], "mlp_hidden": s["max_mlp_hidden"],
            "mlp_hidden_total": s["mlp_hidden"], "params": s["params"],
            "nonzero_params": s["nonzero_params"], "compile_seconds": round(secs, 4),
            "stages_cpu_seconds": round(s["compile_cpu_seconds"], 4),
            "gate_cpu_seconds": round(s["verify_cpu_seconds"], 4),
            "gate_inputs": s["verified_inputs"], "gate_exhaustive": s["verified_exhaustively"],
            "checked_inputs": total, "mismatches": bad}


def _nz(x) -> int:
    return int((np.asarray(x) != 0).sum())


def ours_nonzeros(cm) -> dict:
    """Our model's non-zero weights by part, counted as :func:`tracr_nonzeros` counts Tracr's:
    ``embed`` (tokens), ``pos``, per layer ``L<i> attn`` (Q, K, V, O and their biases of every
    head) and ``L<i> mlp`` (in, out, biases), ``unembed`` (``W_U``, ``b_U``); and
    ``heads``: ``{"L<i> <node>": non-zeros}`` per head, named by the node it computes
    (``..._count``: a count head of the run-time checks)."""
    sd = {k: v.detach().numpy() for k, v in cm.model.packed_state_dict().items()}
    out = {"embed": 0, "pos": 0, "unembed": 0}
    heads = {}
    for k, a in sd.items():
        if k.startswith("embed."):
            out["embed"] += _nz(a)
        elif k.startswith("pos_embed."):
            out["pos"] += _nz(a)
        elif k.startswith("unembed."):
            out["unembed"] += _nz(a)
        elif k.startswith("blocks."):
            layer, part = int(k.split(".")[1]), k.split(".")[2]
            key = f"L{layer} {'attn' if part == 'attn' else 'mlp'}"
            out[key] = out.get(key, 0) + _nz(a)
    for layer, names in enumerate(cm.head_nodes):
        if f"blocks.{layer}.attn.W_Q" not in sd:
            continue
        for name, cols in zip(names, _head_columns(cm, layer)):
            heads[f"L{layer} {name}"] = sum(_nz(sd[f"blocks.{layer}.attn.{w}"][:, cols])
                                            for w in ("W_Q", "W_K", "W_V")) + _nz(
                sd[f"blocks.{layer}.attn.W_O"][cols])
    out["total"] = sum(v for k, v in out.items())
    out["heads"] = heads
    out["exactness"] = exactness_nonzeros(cm)
    return out


def _head_columns(cm, layer: int) -> list[slice]:
    """Each head's columns of the packed ``W_Q``/``W_K``/``W_V`` (rows of ``W_O``)."""
    out, c0 = [], 0
    for w in cm.model.cfg.d_head_widths[layer]:
        out.append(slice(c0, c0 + w))
        c0 += w
    return out


#: the exactness weights Tracr's models lack, by kind
EXACTNESS = ("pad", "none", "count")


def exactness_nonzeros(cm, kinds=EXACTNESS) -> dict:
    """The non-zero weights of ``cm`` spent on exactness Tracr's compiled models lack:
    ``pad`` -- one ``W_K`` weight per head giving PAD keys a large negative logit (Tracr never
    masks PAD: its failure mode 7); ``none`` -- the value and output weights of a ``None``
    direction (Tracr's default is the zero vector, decoded as an arbitrary value: failure
    mode 5); ``count`` -- a count head (``..._count``: ``1/(w+1)`` read by the run-time checks,
    e.g. the model raising where a mean of strings selects two keys, as the interpreter).
    Returns ``{kind: non-zeros}`` for ``kinds``."""
    sd = cm.model.packed_state_dict()
    labels = cm.residual_labels
    pad = labels.index("pad")
    out = dict.fromkeys(kinds, 0)
    for layer in range(cm.model.cfg.n_layers):
        if f"blocks.{layer}.attn.W_K" not in sd:
            continue
        WQ, WK, WV, WO = (sd[f"blocks.{layer}.attn.{w}"] for w in ("W_Q", "W_K", "W_V", "W_O"))
        for h, cols in enumerate(_head_columns(cm, layer)):
            if "count" in kinds and cm.head_nodes[layer][h].endswith("_count"):
                out["count"] += sum(_nz(t[:, cols]) for t in (WQ, WK, WV)) + _nz(WO[cols])
                continue
            if "pad" in kinds:
                out["pad"] += _nz(WK[pad, cols])
            if "none" in kinds:
                for j in range(cols.start, cols.stop):
                    if any(labels[d].endswith(":None") for d in np.flatnonzero(WO[j].numpy())):
                        out["none"] += _nz(WO[j]) + _nz(WV[:, j])
    return out


def tracr_nonzeros(theirs) -> dict:
    """Tracr's non-zero weights by part (the parts of :func:`ours_nonzeros`): its ``params``
    (token and position embeddings, per layer attention and MLP, biases included) and its
    unembedding, a projection onto the output space applied outside ``params`` (one weight
    per output direction, as our ``W_U``)."""
    out = {"embed": 0, "pos": 0}
    for mod, arrays in theirs.params.items():
        n = sum(_nz(a) for a in arrays.values())
        if mod.startswith("token_embed"):
            out["embed"] += n
        elif mod.startswith("pos_embed"):
            out["pos"] += n
        elif "/layer_" in mod:
            layer = int(mod.split("/layer_")[1].split("/")[0])
            key = f"L{layer} {'attn' if '/attn/' in mod else 'mlp'}"
            out[key] = out.get(key, 0) + n
    enc = theirs.output_encoder
    out["unembed"] = len(enc.encoding_map) if hasattr(enc, "encoding_map") else 1
    out["total"] = sum(out.values())
    return out


def tracr_library(max_seq_len: int = 8, corpus: bool = False) -> list[dict]:
    """Tracr's compiler against ours on every program of Tracr's own library
    (``tracr.compiler.lib``, imported with ``rasp.from_tracr``), bidirectional and causal:
    parameters and non-zero parameters (Tracr's: every array of its ``params``, and its
    unembedding apart; ours: as stored), layers, compile CPU seconds (ours include the
    verification gate). With ``corpus``: the 30 programs of ``compiler.library.tracr_corpus``
    (the outside fuzzer's corpus shape), bidirectional only. Empty when Tracr (the test
    extra) is not installed."""
    try:
        import jax
        from tracr.compiler import compiling
        from compiler.library import tracr_corpus, tracr_lib_programs
        if corpus:
            programs = [(name, prog, vocab, False) for name, prog, vocab in tracr_corpus()]
        else:
            programs = [(name, prog, list("abcd") if vocab == "unique" else vocab, causal)
                        for causal in (False, True)
                        for name, (prog, vocab) in tracr_lib_programs().items()]
    except ImportError:
        return []
    import logging
    logging.getLogger("absl").setLevel(logging.ERROR)
    rows = []
    for name, prog, vocab, causal in programs:
        row = {"program": name, "causal": causal, "max_seq_len": max_seq_len}
        c0 = time.process_time()
        try:
            theirs = compiling.compile_rasp_to_model(prog, vocab=set(vocab),
                                                     max_seq_len=max_seq_len,
                                                     compiler_bos="BOS", causal=causal)
        except Exception as e:   # noqa: BLE001 -- Tracr's own failures are a result here
            row["tracr"] = {"refused": f"{type(e).__name__}: {e}"[:120]}
            rows.append(row)
            continue
        leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(theirs.params)]
        parts = tracr_nonzeros(theirs)
        row["tracr"] = {"params": int(sum(x.size for x in leaves)),
                        "nonzero_params": int(sum((x != 0).sum() for x in leaves)),
                        # its unembedding: a projection onto the output space applied
                        # outside ``params`` (one weight per output direction)
                        "unembed_nonzero": parts["unembed"],
                        "nonzero_parts": parts,
                        "layers": int(theirs.model_config.num_layers),
                        "compile_cpu_seconds": round(time.process_time() - c0, 3)}
        c0 = time.process_time()
        try:
            # make_sort_unique's contract is distinct keys (Tracr requires them; its mean of
            # strings raises on a repeated one, which the compiler refuses by default): those
            # inputs are declared out of contract, the model raising there (a count head)
            cm = compile_program(rasp.from_tracr(prog), vocab, max_seq_len, causal=causal,
                                 raising="declare" if name == "make_sort_unique" else "refuse")
        except CompilerError as e:
            row["ours"] = {"refused": e.message.splitlines()[0]}
        else:
            row["ours"] = {"params": cm.stats["params"],
                           "nonzero_params": cm.stats["nonzero_params"],
                           "nonzero_parts": ours_nonzeros(cm),
                           "layers": cm.stats["layers"],
                           "compile_cpu_seconds": round(time.process_time() - c0, 3)}
        rows.append(row)
    return rows


def _print_tracr_library(rows: list[dict],
                         title: str = "Tracr's library (tracr.compiler.lib via rasp.from_tracr)"
                         ) -> dict:
    print(f"\n{title}, ours / Tracr's compiler")
    print("(non-zeros: all we store, W_U included / Tracr's params + its unembedding; "
          "'>' marks a program above)")
    print(f"{'program':22s} {'causal':>6s} {'params':>17s} {'non-zeros':>15s} {'layers':>7s} "
          f"{'compile CPU s':>14s}")
    for r in rows:
        t, o = r["tracr"], r.get("ours", {})
        if "refused" in t:
            print(f"{r['program']:22s} {str(r['causal']):>6s} Tracr fails: {t['refused'][:70]}")
            continue
        if "refused" in o:
            print(f"{r['program']:22s} {str(r['causal']):>6s} refused (Tracr compiles it, "
                  f"computing prefix values): {o['refused'][:70]}")
            continue
        tn = t["nonzero_params"] + t["unembed_nonzero"]
        mark = ">" if o["nonzero_params"] > tn else " "
        print(f"{r['program']:22s} {str(r['causal']):>6s} {o['params']:>7,d}/{t['params']:<9,d} "
              f"{mark}{o['nonzero_params']:>5,d}/{tn:<8,d} "
              f"{o['layers']:>3d}/{t['layers']:<3d} "
              f"{o['compile_cpu_seconds']:>6.3f}/{t['compile_cpu_seconds']:<7.3f}")
    both = [r for r in rows if not r["causal"] and "refused" not in r.get("ours", {"refused": 1})
            and "refused" not in r["tracr"]]
    summary = {
        "programs": len(both),
        "params_ratio_total": round(sum(r["ours"]["params"] for r in both)
                                    / sum(r["tracr"]["params"] for r in both), 3),
        "nonzero_ratio_total": round(sum(r["ours"]["nonzero_params"] for r in both)
                                     / sum(r["tracr"]["nonzero_params"] for r in both), 3),
        "programs_with_more_params": [r["program"] for r in both
                                      if r["ours"]["params"] > r["tracr"]["params"]],
        "programs_with_more_nonzeros": [
            r["program"] for r in both if r["ours"]["nonzero_params"]
            > r["tracr"]["nonzero_params"] + r["tracr"]["unembed_nonzero"]],
        "programs_with_more_layers": [r["program"] for r in both
                                      if r["ours"]["layers"] > r["tracr"]["layers"]],
        "causal_compiled": sum("refused" not in r.get("ours", {"refused": 1})
                               for r in rows if r["causal"]),
    }
    print("tracr library summary:", json.dumps(summary))
    _print_excess(rows)
    return summary


def _print_excess(rows: list[dict]) -> None:
    """Per program whose non-zeros exceed Tracr's (counted the same way, part by part): the
    parts where ours are more, and our heads in those layers (a ``..._count`` head is a
    run-time check: the model raises where the interpreter does)."""
    print("\nnon-zeros above Tracr's, part by part (ours - Tracr's; parts: token / position "
          "embedding, attention and MLP per layer, unembedding)")
    for r in rows:
        o, t = r.get("ours", {}), r["tracr"]
        if "refused" in o or "refused" in t or "nonzero_parts" not in o:
            continue
        po, pt = o["nonzero_parts"], t["nonzero_parts"]
        if po["total"] <= pt["total"]:
            continue
        keys = [k for k in po if k not in ("total", "heads", "exactness")] + [
            k for k in pt if k not in po and k != "total"]
        diff = {k: po.get(k, 0) - pt.get(k, 0) for k in keys if po.get(k, 0) != pt.get(k, 0)}
        print(f"{r['program']:22s} {'causal' if r['causal'] else 'bidir.':6s} "
              f"{po['total']} vs {pt['total']} (+{po['total'] - pt['total']}): "
              + ", ".join(f"{k} {v:+d}" for k, v in diff.items()))
        more = {k.split()[0] for k, v in diff.items() if v > 0 and k.endswith("attn")}
        heads = {k: v for k, v in po["heads"].items() if k.split()[0] in more}
        if heads:
            print(f"{'':29s} our heads there: "
                  + ", ".join(f"{k.split(' ', 1)[1]} ({k.split()[0]}) {v}"
                              for k, v in heads.items()))
        ex = po["exactness"]
        print(f"{'':29s} exactness weights: " + ", ".join(f"{k} {v}" for k, v in ex.items())
              + f"; without them {po['total'] - sum(ex.values())} vs {pt['total']}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--random", type=int, default=20,
                    help="random inputs per length for the max_seq_len-64 check (default 20)")
    ap.add_argument("--long", type=int, default=64, help="the long max_seq_len (default 64)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "compiler.json"))
    ap.add_argument("--corpus", action="store_true",
                    help="only the fuzzer-shaped corpus of Tracr programs (compiler.library."
                         "tracr_corpus, max_seq_len 6) against Tracr's compiler (prints it)")
    ap.add_argument("--library-only", action="store_true",
                    help="only the table of Tracr's library against Tracr's compiler (prints it; "
                         "writes nothing)")
    args = ap.parse_args(argv)
    if args.library_only or args.corpus:
        rows = tracr_library(6, corpus=True) if args.corpus else tracr_library()
        if not rows:
            print("Tracr (the test extra) is not installed")
            return 1
        _print_tracr_library(rows, "compiler.library.tracr_corpus at max_seq_len 6"
                             if args.corpus else "Tracr's library")
        return 0
    machine = {"platform": platform.platform(), "cpus": os.cpu_count(),
               "torch_threads": torch.get_num_threads(), "torch": torch.__version__}
    peer_rows, long_rows = [], []
    progs = peer_programs()
    print("At the peer's vocabulary and max_seq_len (ours / Tracr); exhaustive check")
    hdr = (f"{'program':22s} {'layers':>7s} {'heads':>6s} {'d_model':>8s} {'MLP hid':>9s} "
           f"{'params':>17s} {'nonzero':>8s} {'time s':>7s} {'exact':>9s} "
           f"{'CPU stages/gate s':>18s}")
    print(hdr)
    for name in PEER_TABLE:
        sop, vocab, n, peer = progs[name]
        vocab = [str(v) for v in vocab]
        row = measure(name, sop, vocab, n, None)
        row["peer"] = peer
        peer_rows.append(row)
        if "error" in row:
            print(f"{name:22s} ERROR {row['error']}")
            continue
        print(f"{name:22s} {row['layers']:>3d}/{peer['layers']:<3d} {row['heads']:>2d}/"
              f"{peer['heads']:<3d} {row['d_model']:>3d}/{peer['d_model']:<4d} "
              f"{row['mlp_hidden']:>4d}/{peer['mlp_hidden']:<4d} {row['params']:>7,d}/"
              f"{peer['params']:<9,d} {row['nonzero_params']:>8,d} {row['compile_seconds']:>7.3f} "
              f"{row['checked_inputs'] - row['mismatches']:>4d}/{row['checked_inputs']} "
              f"{row['stages_cpu_seconds']:>8.3f}/{row['gate_cpu_seconds']:<8.3f}")
    print(f"\nAt max_seq_len {args.long} (same vocabularies); {args.random} random inputs per "
          "length checked")
    progs = peer_programs(args.long)
    for name in PEER_TABLE:
        sop, vocab, _, _ = progs[name]
        vocab = [str(v) for v in vocab]
        row = measure(name, sop, vocab, args.long, args.random)
        long_rows.append(row)
        if "error" in row:
            print(f"{name:22s} refused: {row['error'][:150]}")
            continue
        print(f"{name:22s} layers {row['layers']} heads {row['heads']} d_model {row['d_model']} "
              f"d_head {row['d_head']} MLP {row['mlp_hidden']} params {row['params']:,} "
              f"nonzero {row['nonzero_params']:,} compile {row['compile_seconds']:.3f}s exact "
              f"{row['checked_inputs'] - row['mismatches']}/{row['checked_inputs']} CPU stages "
              f"{row['stages_cpu_seconds']:.3f}s gate {row['gate_cpu_seconds']:.3f}s "
              f"({row['gate_inputs']} inputs)")
    ok = [r for r in peer_rows if "error" not in r]
    ok_all = ok + [r for r in long_rows if "error" not in r]
    summary = {
        "programs": len(peer_rows),
        "no_more_layers_than_peer": all(r["layers"] <= r["peer"]["layers"] for r in ok),
        "no_more_params_than_peer": all(r["params"] <= r["peer"]["params"] for r in ok),
        "all_exact": all(r["mismatches"] == 0 for r in ok + [r for r in long_rows
                                                            if "error" not in r]),
        "compiled_at_long": sum("error" not in r for r in long_rows),
        "max_compile_seconds_long": max([r["compile_seconds"] for r in long_rows
                                         if "error" not in r] + [0]),
        "gate_cpu_share": round(sum(r["gate_cpu_seconds"] for r in ok_all) / max(
            sum(r["gate_cpu_seconds"] + r["stages_cpu_seconds"] for r in ok_all), 1e-9), 3),
    }
    print("\nsummary:", json.dumps(summary))
    lib_rows = tracr_library()
    lib_summary = _print_tracr_library(lib_rows) if lib_rows else None
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"machine": machine, "peer_size": peer_rows, "long": long_rows,
                   "long_max_seq_len": args.long, "summary": summary,
                   "tracr_library": lib_rows, "tracr_library_summary": lib_summary}, f,
                  indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
