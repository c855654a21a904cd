"""`rasp sweep`: a configuration grid per (task, PE), selected as Huang et al. (2025) do.

    rasp sweep TASK --pe PE[,PE] --grid-file SWEEP.toml [--seeds 0-4] [--preset quick]
               [--fit 1.0] [-o RUNS] [--json FILE] [--address HOST:PORT] [--budget S] ...

Every configuration of SWEEP.toml (``analysis.training.sweep``) is trained for the seeds named and every PE
with the grid runner (``analysis.training.grid``, Ray), into ``RUNS/sweeps/<file stem>/<task>/<pe>/
<configuration>/seed<k>``. For each PE it prints the configurations and the selection: the best
configuration among those that fit the training lengths (by the validation lengths) with its
test exact match, and the median and range across fitting configurations. Exit codes: 0 done,
1 a run failed or was left by the budget, 2 bad input (unknown task / PE / key of the sweep
file with its line).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rasp_cli.common import (PE_HELP, UsageError, add_device_option, check_grid_options,
                             grid_options, parse_pes, parse_seeds, run_grid_from_args)

#: the one-line help of `rasp sweep` (shown by `rasp --help` without importing the command)
HELP = 'sweep training settings per (task, PE) and select as Huang et al.'


def add_arguments(p) -> None:
    p.description = (
        "Train every configuration of a TOML sweep file (every key a training "
        "setting; a list is swept, a scalar fixed) for the seeds named and each PE, then "
        "select as Huang et al. 2025: among configurations that fit the training "
        "lengths, the best on the validation lengths (OOD up to 1.5x the training "
        "length); report its test exact match (OOD above 1.5x) and the median and "
        "range across fitting configurations.")
    p.add_argument("task", metavar="TASK", help="task name (see `rasp tasks`)")
    p.add_argument("--pe", required=True, help=PE_HELP)
    p.add_argument("--grid-file", required=True, metavar="SWEEP.toml",
                   help="TOML file: setting = [values] (swept) or setting = value (fixed)")
    p.add_argument("--seeds", default="0", metavar="SEEDS",
                   help="seeds: a comma list and ranges, e.g. 0-4 (default 0; the same in "
                        "every subcommand)")
    p.add_argument("--preset", default="default", help="training preset (default or quick)")
    p.add_argument("--fit", type=float, default=1.0,
                   help="ID exact match a seed needs to count as fitting (Huang et al.: 1.0)")
    p.add_argument("-o", "--out", default="runs", metavar="DIR", help="runs root (default runs/)")
    add_device_option(p)
    p.add_argument("--force", action="store_true", help="retrain finished runs")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", default=None, metavar="FILE", help="write the selection as JSON")
    grid_options(p)


def _slug(tag: str) -> str:
    """A directory name for a configuration: readable, with a short hash for uniqueness."""
    safe = "".join(c if c.isalnum() or c in "-_.=," else "_" for c in tag)[:80]
    return f"{safe}-{hashlib.sha1(tag.encode()).hexdigest()[:6]}"


def run(args) -> int:
    """Run ``rasp sweep``; returns the exit code."""
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.training import sweep

    pes = parse_pes(args.pe)
    seeds = parse_seeds(args.seeds)
    if not 0.0 <= args.fit <= 1.0:                 # NaN fails this too
        raise UsageError("--fit must be in [0, 1]")
    check_grid_options(args)                      # before any run is planned or Ray started
    try:
        swept, fixed = sweep.load_sweep(args.grid_file)
    except sweep.SweepError as e:
        raise UsageError(str(e)) from None
    configs = sweep.expand(swept, fixed)
    root = Path(args.out) / "sweeps" / Path(args.grid_file).stem / args.task
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.experiment.plan import Plan
    from analysis.training.study import Study
    from rasp.errors import RASPError
    plans, index = [], []
    for pe in pes:
        for overrides in configs:
            tag = sweep.config_tag(overrides, swept)
            study = Study(tasks=[args.task], pes=[pe], seeds=seeds, train_preset=args.preset,
                          overrides=overrides, runs_root=str(root / pe / _slug(tag)),
                          flat=True, tag=tag)
            plans.append(Plan.of(study))       # settings resolved once, the task's record
            index += [(pe, tag)] * len(plans[-1].runs)
    plan = Plan.joined(plans)
    try:
        plan.check()
    except (RASPError, ValueError) as e:
        raise UsageError(f"{args.grid_file}: {e}") from None
    runs = plan.grid_runs()
    print(f"sweep {args.task}: {len(configs)} configuration(s) x {len(seeds)} seed(s) x "
          f"{len(pes)} PE(s) = {len(runs)} runs under {root}")
    report = run_grid_from_args(runs, args, args.out)
    selections = []
    for pe in pes:
        per_config = []
        for overrides in configs:
            tag = sweep.config_tag(overrides, swept)
            by_seed = {r.run.seed: (r.result.accuracy if r.finished and r.result else None)
                       for r, key in zip(report.results, index) if key == (pe, tag)}
            per_config.append((tag, overrides, by_seed))
        sel = sweep.select(args.task, pe, per_config, fit=args.fit)
        selections.append(sel)
        print()
        print(_table(sel))
        print(sel.summary())
        for note in sel.notes:
            print(f"  note: {note}")
    if args.json:
        # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
        from analysis.training.runs import atomic_write_text
        atomic_write_text(Path(args.json), json.dumps(
            {"task": args.task, "grid_file": str(args.grid_file), "seeds": seeds,
             "preset": args.preset, "selections": [s.to_dict() for s in selections]},
            indent=1), mode=0o644)
    return 0 if report.ok else 1


def _table(sel) -> str:
    def f(x):
        return "  -  " if x is None else f"{x:.3f}"
    w = max([len(o.tag) for o in sel.configs] + [13])
    lines = [f"{'configuration':<{w}}  fit   ID EM  val EM  test EM",
             "-" * (w + 34)]
    for o in sel.configs:
        mark = "*" if sel.best is o else " "
        lines.append(f"{o.tag:<{w}} {mark}{len(o.fitting)}/{len(o.seeds)}  {f(o.id_em)}  "
                     f"{f(o.val_em)}  {f(o.test_em)}")
    return "\n".join(lines)
