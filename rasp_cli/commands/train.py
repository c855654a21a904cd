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
"""

from __future__ import annotations

import json

#: the one-line help of `rasp train` (shown by `rasp --help` without importing the command)
HELP = 'train transformers with a positional encoding on a task'

PE_HELP = "nope, ape_learned, ape_sinusoidal, t5, alibi, rope, or 'all' (comma-separated list ok)"


def register(sub) -> None:
    """Add the ``train`` subcommand to the CLI's subparsers."""
    from analysis.training.configs import MODEL_KEYS, PER_RUN_KEYS, TRAIN_KEYS, TRAIN_PRESETS
    p = sub.add_parser(
        "train", help=HELP,
        description="Train a small decoder transformer on a generalization task with one of six "
                    "positional encodings, evaluate exact match per length (ID and OOD up to 2x "
                    "the training length), and write a run directory (default "
                    "runs/TASK/PE/seed<k>/; locked while training, resumed after an interrupt, "
                    "reused when finished). --grid trains several tasks x PEs x seeds and prints "
                    "a table.",
        epilog=f"--set keys: model {', '.join(sorted(MODEL_KEYS - PER_RUN_KEYS))}; training "
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
    p.add_argument("--device", default="cpu", help="torch device: cpu (default) or cuda")
    p.add_argument("--preset", default="default",
                   help=f"training preset: {' or '.join(TRAIN_PRESETS)} (quick: ~30 s per run "
                        f"on 2 cores)")
    p.add_argument("-o", "--out", default=None, metavar="DIR",
                   help="run directory (single run) or runs root (--grid); default runs/")
    p.add_argument("--force", action="store_true",
                   help="redo a finished run / replace a run with another configuration")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a model or training setting (JSON value), e.g. --set lr=3e-4")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default 1)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--json", default=None, metavar="FILE", help="write the results as JSON")
    from rasp_cli.main import add_task_source_args
    add_task_source_args(p)
    grid_options(p)
    p.set_defaults(func=train_command)


def parse_pes(text):
    """PE names from ``--pe`` text (comma list or ``all``); UsageError for an unknown one."""
    from rasp_model import PE_NAMES
    from rasp_cli.main import UsageError
    if not text:
        raise UsageError(f"--pe is required: {PE_HELP}")
    if text == "all":
        return list(PE_NAMES)
    pes = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in pes if s not in PE_NAMES]
    if bad:
        raise UsageError(f"unknown positional encoding {bad[0]!r}; known: "
                         f"{', '.join(PE_NAMES)} (or 'all')")
    return pes


def _overrides(items):
    from rasp_cli.main import UsageError
    out = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--set expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        try:
            out[k.strip()] = json.loads(v)
        except json.JSONDecodeError:
            out[k.strip()] = v  # a bare string such as act=gelu
        except RecursionError:
            raise UsageError(f"--set {k.strip()}: the value is nested too deeply") from None
    return out


def format_grid(results) -> str:
    """Table task x PE of mean ID / OOD exact match over seeds (``RunResult`` list)."""
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


def grid_options(p) -> None:
    """Add the options of the grid runner (``analysis.training.grid``) to a subcommand's parser."""
    g = p.add_argument_group("grid runner (Ray)")
    g.add_argument("--address", default=None, metavar="HOST:PORT",
                   help="Ray cluster to run on (default: $RAY_ADDRESS, else a local Ray "
                        "instance sized to this machine); run directories (-o) must then be "
                        "on a path every node sees")
    g.add_argument("--serial", action="store_true",
                   help="train the runs in this process, one at a time (debugging)")
    g.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="wall-clock budget: no new run starts when it would not finish in "
                        "time; the rest is listed and trained by the next call")
    g.add_argument("--cpus-per-run", type=int, default=1, metavar="N",
                   help="CPUs (and torch threads) each run declares (default 1)")
    g.add_argument("--gpus-per-run", type=float, default=None, metavar="F",
                   help="GPU fraction each run declares with --device cuda (default 0.25)")
    g.add_argument("--stack", type=int, default=None, metavar="N",
                   help="train up to N seeds of one configuration as one stacked model per "
                        "Ray task (each still its own run directory; default: 16 with "
                        "--device cuda, 1 on a CPU, where it does not pay)")
    g.add_argument("--no-stack", action="store_true",
                   help="one run per Ray task (same as --stack 1)")


def check_grid_options(args) -> None:
    """The grid runner's numbers, checked before any run is planned or Ray is started:
    ``--budget`` finite >= 0, ``--cpus-per-run`` 1..1024, ``--gpus-per-run`` finite in
    (0, 64], ``--stack`` 1..1024. UsageError (exit 2) naming the flag."""
    from rasp_cli.main import UsageError, finite_number, whole_number
    finite_number(args.budget, "--budget", allow_equal=True)
    whole_number(args.cpus_per_run, "--cpus-per-run", 1, 1024)
    if finite_number(args.gpus_per_run, "--gpus-per-run") is not None and args.gpus_per_run > 64:
        raise UsageError(f"--gpus-per-run must be at most 64, got {args.gpus_per_run!r}")
    whole_number(args.stack, "--stack (1 = no stacking)", 1, 1024)


def check_train_options(args) -> None:
    """``rasp train``'s own numbers, checked before a run directory is created: ``--seed``
    0..2^32-1, ``--steps`` and ``--train-max-len`` >= 1, ``--threads`` 1..MAX_THREADS."""
    from rasp_cli.main import MAX_THREADS, seed_flag, whole_number
    seed_flag(args.seed)
    whole_number(args.steps, "--steps", 1, 10 ** 9)
    whole_number(args.train_max_len, "--train-max-len", 1, 100_000)
    whole_number(args.threads, "--threads", 1, MAX_THREADS)


def run_grid_from_args(runs, args, runs_root):
    """Run ``runs`` (``GridRun`` list) with the grid options of ``args``; GridError -> usage
    error (exit 2)."""
    from analysis.training.grid import GridError, run_grid
    from rasp_cli.main import UsageError
    check_grid_options(args)
    stack = 1 if args.no_stack else args.stack
    try:
        return run_grid(runs, runs_root=runs_root, address=args.address, budget_s=args.budget,
                        serial=args.serial, device=args.device, num_cpus=args.cpus_per_run,
                        num_gpus=args.gpus_per_run, force=args.force,
                        progress=not args.no_progress, stack=stack)
    except GridError as e:
        raise UsageError(str(e)) from None


def train_command(args) -> int:
    """Run ``rasp train``; returns the exit code (1 when a run of a grid failed or was not
    started within the budget)."""
    from pathlib import Path

    from analysis.training.grid import check_runs
    from analysis.training.runs import RunDirError, atomic_write_text
    from analysis.training.trainer import TrainingError, train
    from rasp_cli.main import UsageError

    from rasp_cli.main import tasks_from_args
    own = [t.name for t in tasks_from_args(args)]      # your own tasks, found by name
    if args.grid and args.task:
        raise UsageError("give either TASK or --grid TASKS, not both")
    if not args.grid and not args.task and not own:
        raise UsageError("give a TASK (or --grid TASKS); `rasp tasks --group A` lists them")
    tasks = [s.strip() for s in (args.grid or args.task or "").split(",") if s.strip()] + own
    import tasks as _catalogue
    for name in tasks:               # the task names first: the most likely typo
        try:
            _catalogue.get_task(name)
        except _catalogue.UnknownTaskError as e:
            raise UsageError(str(e)) from None
    pes = parse_pes(args.pe)
    overrides = _overrides(args.set)
    check_train_options(args)
    if args.grid:
        check_grid_options(args)
    from rasp_cli.main import parse_seeds
    seeds = parse_seeds(args.seeds) if args.seeds else [args.seed]
    if not args.grid and (len(pes) > 1 or len(seeds) > 1 or len(tasks) > 1):
        raise UsageError("several tasks, PEs or seeds need --grid")
    if args.grid:
        from analysis.training.study import Study
        runs = Study(tasks=tasks, pes=pes, seeds=seeds, train_preset=args.preset,
                     overrides=overrides, steps=args.steps, train_max_len=args.train_max_len,
                     runs_root=args.out or "runs").runs()
        try:
            check_runs(runs)
        except TrainingError as e:
            raise UsageError(str(e)) from None
        report = run_grid_from_args(runs, args, args.out or "runs")
        results = report.run_results()
        if results:
            print()
            print(format_grid(results))
        if args.json:
            atomic_write_text(Path(args.json), json.dumps([r.to_dict() for r in report.results],
                                                          indent=1), mode=0o644)
        return 0 if report.ok else 1
    try:
        r = train(tasks[0], pes[0], seed=seeds[0], out_dir=args.out, steps=args.steps,
                  train_max_len=args.train_max_len, device=args.device,
                  config_overrides=overrides, progress=not args.no_progress,
                  preset=args.preset, force=args.force, threads=args.threads)
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
