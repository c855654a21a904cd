"""`rasp probe RUN_DIR... [--task T] [--json]`: compare the attention of trained runs.

Prints (1) Kazemnejad et al.'s layer-wise distance of every run from the NoPE run (per layer the
minimum JSD over head pairs, then the mean), (2) the one-to-one matching of each run's heads to
the compiled reference program's heads, (3) for every head the JSD of its best relative-position
(T5 bucket) fit. RUN_DIR may also be a compiled model export (``rasp compile -o DIR``) or any
TransformerLens model saved as ``DIR/tl_config.json`` + ``DIR/tl_model.safetensors``
(``compiler.export.save_transformer_lens(hooked_transformer, DIR)``; needs --task, and its
d_vocab must be the task's: a mismatch is refused naming both sizes).
"""

from __future__ import annotations

import json
import sys

from rasp_cli.common import UsageError

#: the one-line help of `rasp probe` (shown by `rasp --help` without importing the command)
HELP = ('compare attention of trained runs with each other, the compiled '
        'program and relative-position references')


def add_arguments(p) -> None:
    p.description = (__doc__.split("\n", 1)[1].strip())
    p.add_argument("runs", nargs="+", metavar="RUN_DIR",
                   help="finished run directories (runs/<task>/<pe>/seed<k>), compiled "
                        "model directories, or TransformerLens model directories "
                        "(tl_config.json + tl_model.safetensors)")
    p.add_argument("--task", help="the task (default: the runs' own task)")
    p.add_argument("--lengths", help="comma-separated input lengths to probe (default: from "
                                     "the training range)")
    p.add_argument("--per-length", type=int, default=3, help="sequences per length (3)")
    p.add_argument("--variant", choices=["standard", "kazemnejad"], default="standard",
                   help="JSD: standard (base 2, in [0, 1]; default) or the paper code's "
                        "½[KL(M‖P)+KL(M‖Q)]")
    p.add_argument("--no-compile", action="store_true",
                   help="do not compile the task's reference program")
    p.add_argument("--json", action="store_true", help="print the results as JSON")


#: Longest probe length and most probe sequences (``--lengths`` x ``--per-length``): the
#: captured patterns are ``[sequence, layer, head, length, length]`` floats per model.
MAX_PROBE_LENGTH = 1_000
MAX_PROBE_SEQUENCES = 10_000


def _lengths(text):
    if not text:
        return None
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--lengths must be comma-separated integers, got {text!r}")
    if not vals or min(vals) < 1:
        raise UsageError("--lengths must be positive integers")
    if max(vals) > MAX_PROBE_LENGTH:
        raise UsageError(f"--lengths: at most {MAX_PROBE_LENGTH:,} (probe patterns grow with "
                         f"the square of the length), got {max(vals):,}")
    return vals


def run(args) -> int:
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.probing import alignment
    from analysis.probing import metrics
    from analysis.training.runs import RunDirError

    if args.per_length < 1:
        raise UsageError("--per-length must be >= 1")
    lengths = _lengths(args.lengths)
    if args.per_length * (len(lengths) if lengths else 1) > MAX_PROBE_SEQUENCES:
        raise UsageError(f"--per-length x lengths: at most {MAX_PROBE_SEQUENCES:,} probe "
                         f"sequences, got {args.per_length:,} per length")
    try:
        res, info = alignment.probe_run_dirs(
            args.runs, task_name=args.task, lengths=lengths,
            per_length=args.per_length, variant=args.variant,
            compile_reference_program=not args.no_compile)
    except (RunDirError, metrics.ProbingError) as e:
        raise UsageError(str(e)) from None
    if args.json:
        out = res.to_dict()
        out["info"] = info
        print(json.dumps(out, indent=1))
        return 0
    print(f"task {info['task']}: {len(res.sequences)} probe sequences at lengths "
          f"{info['lengths']} (JSD {res.variant}, {metrics.JSD_UNITS[res.variant]})")
    if "compiled" in info:
        print("compiled reference: " + ", ".join(
            f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
            for k, v in info["compiled"].items()))
    elif "compiled_error" in info:
        print(f"compiled reference: not available ({info['compiled_error']})")
    if res.pairwise:
        print("\nKazemnejad distance, NoPE of the same seed vs each model: standard aggregation "
              f"({metrics.JSD_UNITS[res.variant]}; per layer the min over all head pairs, then the "
              "mean over layers) and the released code's (nats; head pairs i < j, min per sample "
              "and layer, then the mean)")
        print(f"  {'model A':<18} {'model B':<18} {'standard':>8}  {'released':>8}  "
              "standard per layer")
        for (a, b), d in res.pairwise.items():
            r = res.pairwise_released.get((a, b))
            print(f"  {a:<18} {b:<18} {d.mean:8.3f}  "
                  f"{(f'{r.mean:.3f}' if r is not None else '-'):>8}  "
                  + " ".join(f"{x:.3f}" for x in d.per_layer))
    for label, m in res.matchings.items():
        fits = dict(res.relpos.get(label, []))
        print(f"\n{label} vs compiled: one-to-one head matching, mean JSD {m.mean:.3f}")
        print(f"  {'trained':<8} {'compiled':<9} {'JSD':>6}  {'relpos fit':>10}")
        for t, c, d in m.pairs:
            f = fits.get(t)
            print(f"  L{t[0]}H{t[1]:<6} L{c[0]}H{c[1]:<7} {d:6.3f}  "
                  f"{(f'{f.jsd:.3f}' if f else '-'):>10}")
    if res.relpos:
        print("\nrelative-position (T5 bucket) fit, JSD per head")
        for label, fits in res.relpos.items():
            print(f"  {label:<18} " + " ".join(f"L{h[0]}H{h[1]}={f.jsd:.3f}" for h, f in fits))
    for n in res.notes:
        print(f"note: {n}", file=sys.stderr)
    return 0
