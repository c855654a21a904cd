"""`rasp demo`: the main job (what `make demo` runs).

Runs `rasp report` with its defaults: copy_unique (predicted to generalize: a short RASP-L
program, an induction head) and copy_repeat (predicted to fail: no RASP-L program), all six
positional encodings, one seed each plus a second NoPE seed for the other-seed baseline, with the
training engineer's quick preset (about 10 minutes or less on 2 CPU cores). `--full` runs the
larger grid of docs/results.md.
"""

from __future__ import annotations

import time


def register(sub) -> None:
    """Add the ``demo`` subcommand."""
    p = sub.add_parser("demo", help="the main job: the default report (2 tasks x 6 PEs)",
                       description=__doc__.split("\n", 1)[1].strip())
    from rasp_cli.commands.report import add_arguments
    add_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from rasp_cli.commands import report as report_cmd

    t0 = time.time()
    rc = report_cmd.run(args)
    print(f"demo finished in {time.time() - t0:.0f} s; open the report in a browser "
          f"(it is self-contained).")
    return rc
