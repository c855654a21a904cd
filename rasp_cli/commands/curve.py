"""`rasp curve TASK --pe PE... --train-lengths 10,20,40,60 [--seeds 0-4] [--preset P]`:
training-length curves (``analysis.experiment.curve``).

Trains the task with each PE on lengths 1..L for every L given (run directories
``<runs>/<task>/<pe>/seed<k>-<preset>-L<n>``, and at the task's own training length the
``seed<k>-<preset>`` runs ``rasp train`` and ``rasp report`` write: finished runs reused,
interrupted ones resumed),
then prints per PE and L the OOD exact match on L+1..2L (per seed, mean with a bootstrap 95%
interval over seeds), the claims rule's outcome, and the **shortest training length at which each
PE generalizes** (or "not within the lengths tried"), beside the training length the task's paper
states (``tasks.base.Regime``). Writes ``curve.json``, the table ``curve.md`` and the figure
``curve.png`` to ``-o DIR``
(default ``reports/curves/<task>``). Task files and regular expressions as ``rasp train``.

Exit codes: 0 printed; 1 a run failed or was left by the budget; 2 bad input.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rasp_cli.common import (PE_HELP, UsageError, add_task_source_args, output_dir,
                             parse_overrides, parse_pe_presets, parse_pes, parse_seeds,
                             tasks_from_args, whole_number)

#: the one-line help of `rasp curve` (shown by `rasp --help` without importing the command)
HELP = 'OOD exact match vs training length per PE; the shortest length that generalizes'


def add_arguments(p) -> None:
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.training.configs import TRAIN_PRESETS
    p.description = (
        "Train one task with each positional encoding at several maximum training lengths L "
        "(lengths 1..L) and measure the out-of-distribution exact match on L+1..2L: where "
        "does each PE start to length-generalize? The theories (Zhou et al. 2023, Huang et al. "
        "2025) are limits; Zhou et al.'s count generalizes only once training reaches 60.")
    p.epilog = ("The outcome per point is the claims rule's (>= 5 seeds that all fit, an exact "
                "sign test and a bootstrap interval against max(0.5, chance + 0.1)); fewer "
                "seeds are always inconclusive. Cost grows with L: a run on 1..60 costs about "
                "5x the tokens of 1..10.")
    p.add_argument("task", nargs="?", metavar="TASK", help="a task of the catalogue "
                   "(`rasp tasks --group A`), or use --task-file / --regex")
    p.add_argument("--pe", default="nope,ape_learned", help=PE_HELP + " (default nope,ape_learned)")
    p.add_argument("--train-lengths", default="10,20,40,60", metavar="L,L,...",
                   help="maximum training lengths, a comma list or ranges (default 10,20,40,60)")
    p.add_argument("--seeds", default="0-4", metavar="SEEDS",
                   help="seeds per PE and length (default 0-4: 5, the fewest that can decide)")
    p.add_argument("--preset", default="demo",
                   help=f"training preset: {' or '.join(TRAIN_PRESETS)} (default demo: the main "
                        "job's 3,000 steps)")
    p.add_argument("--pe-preset", action="append", default=None, metavar="PE=PRESET",
                   help="another preset for one PE (default: ape_learned=demo_random_offsets "
                        "with the demo preset: the random offsets the theories for a learned "
                        "APE assume)")
    p.add_argument("--steps", type=int, default=None, help="override the training steps")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a model or training setting (JSON value)")
    p.add_argument("--runs", default="runs", metavar="DIR", help="runs root (default runs/)")
    p.add_argument("-o", "--out", default=None, metavar="DIR",
                   help="where curve.json, curve.md and curve.png go (default reports/curves/<task>)")
    p.add_argument("--json", action="store_true", help="print the curve as one JSON object")
    p.add_argument("--address", default=None, metavar="HOST:PORT",
                   help="Ray cluster (default: a local Ray instance)")
    p.add_argument("--serial", action="store_true",
                   help="train in this process, one run at a time (no Ray)")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="wall-clock budget of the grid: runs that would not finish are left "
                        "for the next call (exit 1)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_task_source_args(p, many=False)


def _pe_presets(args) -> dict:
    """``--pe-preset`` items; none given: each PE whose theories assume a training protocol
    (a learned APE: random offsets) under the preset that is ``--preset`` with it
    (:func:`analysis.reporting.presets.theory_presets`: demo -> demo_random_offsets)."""
    if args.pe_preset is None:
        # start-up: torch-free (the registry and the training presets)
        from analysis.reporting.presets import theory_presets
        return theory_presets(args.preset)
    return parse_pe_presets(args.pe_preset)


def run(args) -> int:
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.training.configs import TRAIN_PRESETS
    own = [t.name for t in tasks_from_args(args)]
    if args.task and own:
        raise UsageError("give a TASK or --task-file / --regex, not both")
    name = args.task or (own[0] if own else None)
    if name is None:
        raise UsageError("give a TASK (or --task-file / --regex); `rasp tasks --group A` "
                         "lists them")
    import tasks as _catalogue
    try:
        _catalogue.get_task(name)
    except _catalogue.UnknownTaskError as e:
        raise UsageError(str(e)) from None
    if args.preset not in TRAIN_PRESETS:
        raise UsageError(f"--preset {args.preset!r}: one of {', '.join(TRAIN_PRESETS)}")
    lengths = parse_seeds(args.train_lengths, "--train-lengths")
    if any(L < 1 for L in lengths):
        raise UsageError("--train-lengths: every length must be >= 1")
    whole_number(args.steps, "--steps", 1, 10 ** 9)
    pes, seeds = parse_pes(args.pe), parse_seeds(args.seeds)
    out_dir = Path(output_dir(args.out or str(Path("reports") / "curves" / name)))
    pe_presets = _pe_presets(args)
    # start-up: torch loads once the arguments are checked (a usage error answers at once)
    from analysis.experiment.curve import format_curve, training_length_curve
    from analysis.experiment.pipeline import ExperimentError
    from analysis.training.runs import RunDirError, atomic_write_text
    from analysis.training.trainer import TrainingError
    try:
        curve = training_length_curve(
            name, pes, lengths, seeds, preset=args.preset, pe_presets=pe_presets,
            steps=args.steps, overrides=parse_overrides(args.set), runs_root=args.runs,
            address=args.address, serial=args.serial, budget_s=args.budget,
            progress=not args.no_progress,
            log=None if args.json else (lambda m: print(m, file=sys.stderr)))
    except TrainingError as e:
        if "skipped" in str(e) or "failed" in str(e):
            print(f"rasp curve: {e}", file=sys.stderr)
            return 1
        raise UsageError(str(e)) from None
    except (ExperimentError, RunDirError) as e:
        raise UsageError(str(e)) from None
    # start-up: matplotlib loads only when a figure is drawn
    from analysis.reporting.figures import curve_figure
    data = curve.to_dict()
    out_dir.mkdir(parents=True, exist_ok=True)
    text = format_curve(curve)
    command = "rasp curve " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["curve"] else None
    atomic_write_text(out_dir / "curve.json", json.dumps(data, indent=1), mode=0o644)
    atomic_write_text(out_dir / "curve.md", (f"Generated by `{command}`.\n\n" if command
                                             else "") + text + "\n", mode=0o644)
    png = curve_figure(data, out_dir / "curve.png")
    if args.json:
        print(json.dumps(data))
    else:
        print(text)
        print(f"\nwrote {out_dir / 'curve.json'}, {out_dir / 'curve.md'} and {png}")
    return 0
