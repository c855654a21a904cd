"""`rasp train`: train small transformers on the task catalogue (``analysis.training.trainer``).

    rasp train TASK --pe PE [--seed S] [--steps N] [--train-max-len L] [--device D] [-o DIR]
               [--preset default|quick] [--force] [--set KEY=VALUE ...]
    rasp train --grid TASK,TASK --pe all --seeds 0,1 [--preset quick] [--json FILE]
               [--address HOST:PORT] [--serial] [--budget S] [--cpus-per-run N]

One run writes ``runs/<task>/<pe>/seed<k>/`` (``seed<k>-quick`` with ``--preset quick``): config,
metrics, accuracy by length, weights, and a DONE marker; a finished run is reused, an
interrupted one resumes. ``--grid`` trains every task x PE x seed with the grid runner
(``analysis.training.grid``: one Ray task per run, a local Ray instance unless ``--address``) and prints
a table of mean ID and OOD exact match (mean over seeds). Exit codes: 0 done, 1 a run of the
grid failed or was left by the budget, 2 bad input (unknown task / PE / setting, unreachable
cluster, a run directory holding another configuration without ``--force``).

A learned APE (``--pe ape_learned``) trained without random position offsets (every preset but
``demo_random_offsets`` unless ``--set position_offsets=random``) gets one warning line on
stderr (:func:`offsets_warning`): the RASP-L and C-RASP[periodic, local] theories -- every
prediction for that PE, registered ones included -- assume random offsets, so checks of such
runs (``rasp validate-predictor``) get "no theory".
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rasp_cli.common import (MAX_THREADS, PE_HELP, PE_PRESET_HELP, UsageError,
                             add_device_option, add_task_source_args, check_grid_options,
                             grid_options, output_dir, parse_overrides, parse_pe_presets,
                             parse_pes, parse_seeds, run_grid_from_args, seed_flag,
                             tasks_from_args, whole_number)

#: the one-line help of `rasp train` (shown by `rasp --help` without importing the command)
HELP = 'train transformers with a positional encoding on a task'


def add_arguments(p) -> None:
    """One run (TASK) or a grid (``--grid``), the training settings (``--set``), your own tasks
    and the grid runner's options; the epilog lists the ``--set`` keys."""
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.training.configs import MODEL_KEYS, PER_RUN_KEYS, TRAIN_KEYS, TRAIN_PRESETS
    p.description = (
        "Train a small decoder transformer on a generalization task with one of six "
        "positional encodings, evaluate exact match per length (ID and OOD up to 2x "
        "the training length), and write a run directory (default "
        "runs/TASK/PE/seed<k>/; locked while training, resumed after an interrupt, "
        "reused when finished). --grid trains several tasks x PEs x seeds and prints "
        "a table.")
    p.epilog = (
        f"--set keys: model {', '.join(sorted(MODEL_KEYS - PER_RUN_KEYS))}; training "
        f"{', '.join(sorted(TRAIN_KEYS))} (docs/training.md). Exit codes: 0 done, "
        f"2 bad input or an unusable run directory, 130 interrupted (checkpoint saved).")
    p.add_argument("task", nargs="?", metavar="TASK",
                   help="task name: a part-A task of `rasp tasks --group A`")
    p.add_argument("--grid", metavar="TASKS", default=None,
                   help="comma-separated tasks to train as a grid (instead of TASK)")
    p.add_argument("--pe", default=None, help=PE_HELP)
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--seeds", default=None, metavar="SEEDS",
                   help="seeds for --grid: a comma list and ranges, e.g. 0,1,2 or 0-4 (the "
                        "same in every subcommand; default: --seed)")
    p.add_argument("--steps", type=int, default=None, help="optimizer steps (default: config)")
    p.add_argument("--train-max-len", type=int, default=None, metavar="L",
                   help="train on lengths 1..L (default: the task's)")
    add_device_option(p)
    p.add_argument("--preset", default="default",
                   help=f"training preset: {' or '.join(TRAIN_PRESETS)} (quick: ~12 s per run "
                        f"on 2 cores)")
    p.add_argument("--pe-preset", action="append", default=[], metavar="PE=PRESET",
                   help=PE_PRESET_HELP + " (run directories seed<k>-<that preset>)")
    p.add_argument("-o", "--out", default=None, metavar="DIR",
                   help="run directory (single run) or runs root (--grid); default runs/")
    p.add_argument("--force", action="store_true",
                   help="redo a finished run / replace a run with another configuration")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a model or training setting (JSON value), e.g. --set lr=3e-4")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default 1)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--json", default=None, metavar="FILE", help="write the results as JSON")
    add_task_source_args(p)
    grid_options(p)


def format_grid(results) -> str:
    """Table task x PE of mean ID / OOD exact match over seeds (``RunResult`` list)."""
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from rasp_model import PE_NAMES
    cells = {}
    for r in results:
        cells.setdefault((r.task, r.pe), []).append(r)
    tasks = list(dict.fromkeys(r.task for r in results))
    pes = [pe for pe in PE_NAMES if any(r.pe == pe for r in results)]

    def mean(vals):
        vals = [v for v in vals if v is not None]
        return None if not vals else sum(vals) / len(vals)

    def fmt(v):
        return "  -  " if v is None else f"{v:.2f}"
    w = max([len(t) for t in tasks] + [4])
    head = f"{'task':<{w}}  " + "  ".join(f"{pe:>14}" for pe in pes)
    sub = f"{'':<{w}}  " + "  ".join(f"{'ID':>6} / {'OOD':<5}" for _ in pes)
    lines = [head, sub]
    for t in tasks:
        row = []
        for pe in pes:
            rs = cells.get((t, pe), [])
            row.append(f"{fmt(mean([r.id_em for r in rs])):>6} / "
                       f"{fmt(mean([r.ood_em for r in rs])):<5}")
        lines.append(f"{t:<{w}}  " + "  ".join(row))
    return "\n".join(lines)


def offsets_warning(pes, preset: str, overrides: dict,
                    pe_presets: dict | None = None) -> str | None:
    """The warning line for runs of a PE whose theories assume a training protocol
    (:func:`analysis.prediction.theories.required_offsets`: a learned APE, random offsets)
    that its preset (``pe_presets.get(pe, preset)``) with ``overrides`` does not use; None
    when every PE is trained as its theories assume, or when the settings are invalid
    (training then says why)."""
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.prediction.theories import required_offsets
    from analysis.training import configs
    off = {}
    for pe in dict.fromkeys(pes):
        try:
            _, tr = configs.resolve((pe_presets or {}).get(pe, preset), overrides)
        except (configs.ConfigError, TypeError, ValueError):
            return None
        if (required_offsets(pe) or tr.position_offsets) != tr.position_offsets:
            off[pe] = tr.position_offsets
    if not off:
        return None
    return (f"warning: {', '.join(off)} trained with position_offsets="
            f"{next(iter(off.values()))}: the RASP-L and C-RASP[periodic, local] theories (Zhou et "
            "al. 2023; Huang et al. 2025) assume random position offsets, so checks of these "
            "runs get 'no theory'; train with --preset demo_random_offsets, --pe-preset "
            "ape_learned=demo_random_offsets or --set position_offsets=random")


def check_train_options(args) -> None:
    """``rasp train``'s own numbers, checked before a run directory is created: ``--seed``
    0..2^32-1, ``--steps`` and ``--train-max-len`` >= 1, ``--threads`` 1..MAX_THREADS."""
    seed_flag(args.seed)
    whole_number(args.steps, "--steps", 1, 10 ** 9)
    whole_number(args.train_max_len, "--train-max-len", 1, 100_000)
    whole_number(args.threads, "--threads", 1, MAX_THREADS)


def run(args) -> int:
    """Run ``rasp train``; returns the exit code (1 when a run of a grid failed or was not
    started within the budget)."""
    own = [t.name for t in tasks_from_args(args)]      # your own tasks, found by name
    if args.grid and args.task:
        raise UsageError("give either TASK or --grid TASKS, not both")
    if not args.grid and not args.task and not own:
        raise UsageError("give a TASK (or --grid TASKS); `rasp tasks --group A` lists them")
    # a task file's task once, also when --grid names it too (it was counted twice: "two runs
    # of the grid write the same run directory")
    tasks = list(dict.fromkeys(
        [s.strip() for s in (args.grid or args.task or "").split(",") if s.strip()] + own))
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    import tasks as _catalogue
    for name in tasks:               # the task names first: the most likely typo
        try:
            _catalogue.get_task(name)
        except _catalogue.UnknownTaskError as e:
            raise UsageError(str(e)) from None
    pes = parse_pes(args.pe)
    overrides = parse_overrides(args.set)
    check_train_options(args)
    seeds = parse_seeds(args.seeds) if args.seeds else [args.seed]
    pe_presets = parse_pe_presets(args.pe_preset)
    if set(pe_presets) - set(pes):
        raise UsageError(f"--pe-preset names {', '.join(sorted(set(pe_presets) - set(pes)))}, "
                         "which --pe does not train")
    warning = offsets_warning(pes, args.preset, overrides, pe_presets)
    if warning:
        print(warning, file=sys.stderr)
    # start-up: torch loads once the arguments are checked (a usage error answers at once)
    from analysis.training.runs import RunDirError, atomic_write_text
    from analysis.training.trainer import TrainingError, train
    several = len(pes) > 1 or len(seeds) > 1 or len(tasks) > 1
    # only task files (no TASK to put after --grid): several PEs or seeds are their grid
    grid = bool(args.grid) or (several and bool(own) and not args.task)
    if grid:
        check_grid_options(args)
        output_dir(args.out or "runs", "-o")      # a regular file there: one line, no grid
    if not grid and several:
        raise UsageError("several tasks, PEs or seeds need --grid")
    if grid:
        return _train_grid(args, tasks, pes, seeds, pe_presets, overrides)
    try:
        r = train(tasks[0], pes[0], seed=seeds[0], out_dir=args.out, steps=args.steps,
                  train_max_len=args.train_max_len, device=args.device,
                  config_overrides=overrides, progress=not args.no_progress,
                  preset=pe_presets.get(pes[0], args.preset), force=args.force,
                  threads=args.threads)
    except (TrainingError, RunDirError) as e:
        raise UsageError(str(e)) from None
    print("length split    EM      n   95% CI")
    for a in r.accuracy:
        em = "  n/a " if a["em"] is None else f"{a['em']:.3f}"
        ci = (f"[{a['ci_low']:.2f}, {a['ci_high']:.2f}]" if a["ci_low"] is not None
              else a.get("note", ""))
        print(f"{a['length']:>6} {a['split']:<5} {em:>6} {a['n']:>6}   {ci}")
    if args.json:
        atomic_write_text(Path(args.json), json.dumps([r.to_dict()], indent=1), mode=0o644)
    return 0


def _train_grid(args, tasks: list, pes: list, seeds: list, pe_presets: dict,
                overrides: dict) -> int:
    """``rasp train --grid``: the runs planned through the experiment's plan (each run's
    settings resolved once, each task carried as its source record; a bad setting is a usage
    error before Ray starts), trained by the grid runner; the exit code (1: a run failed or
    was not started within the budget)."""
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.experiment.plan import Plan
    from analysis.training.runs import atomic_write_text
    from analysis.training.study import Study
    from rasp.errors import RASPError
    plan = Plan.of(Study(tasks=tasks, pes=pes, seeds=seeds, train_preset=args.preset,
                         pe_train_presets=pe_presets, overrides=overrides, steps=args.steps,
                         train_max_len=args.train_max_len, runs_root=args.out or "runs"))
    try:
        plan.check()
    except (RASPError, ValueError) as e:
        raise UsageError(str(e)) from None
    report = run_grid_from_args(plan.grid_runs(), args, args.out or "runs")
    results = report.run_results()
    if results:
        print()
        print(format_grid(results))
    if args.json:
        atomic_write_text(Path(args.json), json.dumps([r.to_dict() for r in report.results],
                                                      indent=1), mode=0o644)
    return 0 if report.ok else 1
