"""`rasp report [TASK...] [-o DIR] [--quick|--full]`: the attention report.

For each task: the reference program, its measures and RASP-L verdict, the prediction, one
trained model per positional encoding (trained now when missing, reused when finished), their
accuracy by length, the compiled model, and the attention comparison. Writes DIR/report.html
(self-contained) and the PNG figures; DIR/report.json records the preset, and a report of
another preset in DIR is never replaced without --force.
"""

from __future__ import annotations

#: the one-line help of `rasp report` (shown by `rasp --help` without importing the command)
HELP = 'train what is missing, probe, and write the HTML report'


def register(sub) -> None:
    """Add the ``report`` subcommand."""
    p = sub.add_parser("report", help=HELP,
                       description=__doc__.split("\n", 1)[1].strip())
    add_arguments(p)
    from rasp_cli.main import add_task_source_args
    add_task_source_args(p)
    p.set_defaults(func=run)


def add_arguments(p, default_preset: str = "tour") -> None:
    """Options shared by ``rasp report`` and ``rasp demo`` (whose default study preset is
    ``"main"``; the presets are :data:`analysis.reporting.presets.REPORT_PRESETS`)."""
    from analysis.reporting.presets import DEFAULT_TASKS
    p.add_argument("tasks", nargs="*", metavar="TASK",
                   help=f"tasks to report on (default: {' '.join(DEFAULT_TASKS)})")
    p.add_argument("-o", "--out", default="reports", metavar="DIR",
                   help="output directory (default: reports/, ignored by git)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--demo", dest="preset", action="store_const", const="main",
                   help="study preset 'main', the main job's experiment: the small model for "
                        "3,000 steps at batch 32 (training preset demo), 5 seeds per PE, the "
                        "learned APE with random position offsets (default of `rasp demo`)")
    g.add_argument("--quick", dest="preset", action="store_const", const="tour",
                   help="study preset 'tour', a smoke test: 600 steps (training preset "
                        "quick), 1 seed per PE + 2 NoPE seeds (default of `rasp report`; the "
                        "encodings do not separate at this budget)")
    g.add_argument("--full", dest="preset", action="store_const", const="confirmation",
                   help="study preset 'confirmation', the demo's experiment on more "
                        "tasks: `rasp demo --full` adds a "
                        "task the demo did not select for (count) and reports whether each "
                        "claim is confirmed there")
    p.set_defaults(preset=default_preset)
    p.add_argument("--pe", default="all",
                   help="comma-separated positional encodings (default: all six)")
    p.add_argument("--runs", metavar="DIR", help="root of the run directories")
    p.add_argument("--device", default="cpu", help="torch device for training (cpu, cuda)")
    p.add_argument("-j", "--jobs", type=int, default=None,
                   help="CPUs of the local Ray instance = training runs side by side "
                        "(default: all cores)")
    p.add_argument("--address", default=None, metavar="HOST:PORT",
                   help="train missing runs on this Ray cluster (default: $RAY_ADDRESS, else a "
                        "local Ray instance); --runs must be a path every node sees")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="wall-clock budget: no new training run starts when it would not "
                        "finish in time (skipped runs are named in the report and trained by "
                        "the next call)")
    p.add_argument("--no-train", action="store_true",
                   help="do not train missing runs; report what exists and say what is missing")
    p.add_argument("--variant", choices=["standard", "kazemnejad"], default="standard",
                   help="JSD variant (default standard)")
    p.add_argument("--results", metavar="FILE",
                   help="also write the results document (Markdown: claims with labels, "
                        "per-seed numbers, the command at its top), e.g. docs/results.md")
    p.add_argument("--replication", metavar="DIR", default=None,
                   help="cell files of `rasp replicate huang` whose checked predictions the "
                        "report shows for Huang et al.'s tasks (default: docs/replication of "
                        "this checkout)")
    from analysis.prediction.budget import DEFAULT_CRASP_BUDGET, DEFAULT_SEARCH_BUDGET
    search = default_preset == "main"
    p.add_argument("--search", dest="search", action="store_true", default=search,
                   help="run the program searches where the checkers leave a prediction "
                        f"unknown (work budgets: RASP-L {DEFAULT_SEARCH_BUDGET:,} candidate "
                        f"programs, C-RASP {DEFAULT_CRASP_BUDGET:,} candidate Booleans and "
                        "counts; minutes per task)"
                        + (" (the default here)" if search else ""))
    p.add_argument("--no-search", dest="search", action="store_false",
                   help="no program searches: an unknown prediction stays unknown"
                        + ("" if search else " (the default here)"))
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    p.add_argument("--force", action="store_true",
                   help="replace a report of another preset in the output directory (without "
                        "it, a report never overwrites one of another preset: write it "
                        "elsewhere with -o)")


def options_from_args(args):
    from rasp_cli.main import UsageError
    from analysis.reporting.report import ReportOptions
    from rasp_model.positional import PE_NAMES

    pes = list(PE_NAMES) if args.pe == "all" else [x.strip() for x in args.pe.split(",")
                                                           if x.strip()]
    bad = [x for x in pes if x not in PE_NAMES]
    if bad or not pes:
        raise UsageError(f"unknown positional encoding(s) {', '.join(bad) or '(none)'}; choose "
                         f"from {', '.join(PE_NAMES)} or 'all'")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be >= 1")
    from rasp_cli.main import finite_number
    finite_number(args.budget, "--budget", allow_equal=True)
    return ReportOptions(preset=args.preset, pes=pes, runs_root=args.runs, device=args.device,
                         train_missing=not args.no_train, variant=args.variant,
                         progress=not args.quiet, jobs=args.jobs,
                         budget_s=args.budget, address=args.address,
                         replication_dir=getattr(args, "replication", None),
                         search=getattr(args, "search", False))


def run(args) -> int:
    from rasp_cli.main import UsageError
    from analysis.reporting.report import ReportError, generate_report

    from rasp_cli.main import tasks_from_args
    own = [t.name for t in tasks_from_args(args)]      # your own tasks, found by name
    opts = options_from_args(args)
    try:
        path = generate_report((args.tasks + own) or None, args.out, opts,
                               force=getattr(args, "force", False))
    except ReportError as e:
        raise UsageError(str(e))
    print(f"report written to {path.resolve()}")
    if args.results:
        write_results_file(path.parent / "report.json", args.results, args.command_line)
    return 0


def write_results_file(report_json, results_path, command: str) -> None:
    """Write the results document of a report (``--results``), naming the command line."""
    import json
    from pathlib import Path

    from analysis.reporting.results import write_results
    from rasp_cli.main import UsageError

    doc = json.loads(Path(report_json).read_text())
    try:
        out = write_results(doc, results_path, command)
    except OSError as e:
        raise UsageError(f"cannot write {results_path}: {e.strerror or e}")
    print(f"results written to {out}")
