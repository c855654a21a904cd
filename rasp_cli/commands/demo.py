"""`rasp demo`: the main job (what `make demo` runs).

Runs `rasp report` with its defaults: count (predicted to generalize: Zhou et al.'s short RASP-L
program, which the quick preset fits) and copy_repeat (predicted to fail: no RASP-L program), all six
positional encodings, one seed each plus a second NoPE seed for the other-seed baseline, with the
quick training preset, two runs side by side. A time budget of 570 s keeps it under
10 minutes on 2 CPU cores: on a busy machine the runs that do not fit are named in the report
and trained by the next `make demo` (finished runs are reused). `--full` runs the larger grid of
docs/results.md (count, copy_unique, sort_unique, copy_repeat, parity, reverse; 3 seeds per PE;
the training defaults) without a time budget unless `--budget` is given.
"""

from __future__ import annotations

import time

#: The demo must finish within 10 minutes on 2 CPU cores: no training run starts that would not
#: end in time (a loaded machine leaves runs for the next `make demo`, which reuses the rest).
DEMO_BUDGET_S = 570.0


def register(sub) -> None:
    """Add the ``demo`` subcommand."""
    p = sub.add_parser("demo", help="the main job: the default report (2 tasks x 6 PEs)",
                       description=__doc__.split("\n", 1)[1].strip())
    from rasp_cli.commands.report import add_arguments
    add_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from rasp_cli.commands import report as report_cmd

    if args.budget is None and args.preset == "quick":
        args.budget = DEMO_BUDGET_S
    if args.preset == "full" and not args.tasks:
        from analysis.report import FULL_TASKS
        args.tasks = list(FULL_TASKS)
    t0 = time.time()
    rc = report_cmd.run(args)
    print(f"demo finished in {time.time() - t0:.0f} s; open the report in a browser "
          f"(it is self-contained).")
    return rc
