"""`rasp report [TASK...] [-o DIR] [--quick|--full]`: the attention report.

For each task: the reference program, its measures and RASP-L verdict, the prediction, one
trained model per positional encoding (trained now when missing, reused when finished), their
accuracy by length, the compiled model, and the attention comparison. Writes DIR/report.html
(self-contained) and the PNG figures; DIR/report.json records the preset, and a report of
another preset in DIR is never replaced without --force.
"""

from __future__ import annotations

from rasp_cli.common import add_report_arguments, add_task_source_args, generate_report_from_args

#: the one-line help of `rasp report` (shown by `rasp --help` without importing the command)
HELP = 'train what is missing, probe, and write the HTML report'


def add_arguments(p) -> None:
    p.description = __doc__.split("\n", 1)[1].strip()
    add_report_arguments(p)
    add_task_source_args(p)


def run(args) -> int:
    """Run ``rasp report``; 0 (a bad option or report is a ``UsageError``: exit 2)."""
    return generate_report_from_args(args)


