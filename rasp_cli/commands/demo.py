"""`rasp demo`: the main job (what `make demo` runs).

Runs `rasp report --demo --search`: sort_unique with all six positional encodings, 5 seeds each
(the learned APE with random position offsets, the protocol its theories assume), and
copy_repeat with NoPE, 5 seeds. The predictions come from this call's evidence: the checkers,
and the program searches where they leave a verdict unknown (work budgets stated on the page;
sort_unique / learned APE: generalizes, a verified RASP-L program; sort_unique / NoPE:
generalizes, a verified C-RASP[] program; copy_repeat / NoPE: no program <= 12, a bounded
certificate, not a decision). Together: 35 runs of a 2-layer d_model 64 model, 3,000 steps at
batch 32, training lengths 1..10, tested up to 20 — the configuration in which the encodings
separate (docs/results.md). Two runs train side by side; finished runs are reused. The claims
about the papers are computed from the runs (5 seeds: the fewest with which a label can be
decided) and shown at the top of the report; `--results docs/results.md` also writes the results
document (`make results`). Every run is trained in the one call, so the report is always
complete: ~8 minutes on 2 idle cores, longer on a busy machine (measured in docs/benchmarks.md,
"The demo"); a progress bar shows the runs done and the time left. `--budget SECONDS` stops
starting new runs when they would not end in time (the report then names the runs left out and
the next call trains them, reusing the rest). The total wall time (from the command's start to
the page: the page and this line show the same number) and CPU time are printed and written to
report.json. `--full` adds a task the demo did not select for (count: the same model, preset and
seeds) and reports whether each claim of the selected task is confirmed there, at 7 seeds per PE
(the fewest at which a claim can also be contradicted; 91 runs, ~20 minutes on 2 idle cores).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rasp_cli.common import add_report_arguments, generate_report_from_args, write_results_file

#: the one-line help of `rasp demo` (shown by `rasp --help` without importing the command)
HELP = 'the main job: the default report (2 tasks, 6 PEs x 5 seeds)'

def add_arguments(p) -> None:
    p.description = (__doc__.split("\n", 1)[1].strip())
    add_report_arguments(p, default_preset="main")


def run(args) -> int:

    if args.preset == "confirmation" and not args.tasks:
        # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
        from analysis.reporting.presets import FULL_TASKS
        args.tasks = list(FULL_TASKS)
    results, args.results = args.results, None
    rc = generate_report_from_args(args)
    report_json = Path(args.out) / "report.json"
    doc = json.loads(report_json.read_text())
    # the page's wall time (from the command's start to the page, rasp_cli.common.STARTED):
    # the CLI prints the same number, not one of its own
    wall = doc.get("meta", {}).get("wall_seconds") or 0.0
    if results:
        write_results_file(report_json, results, args.command_line)
    meta = doc["meta"]
    print(f"demo finished in {wall:.0f} s wall ({meta.get('trained_now', 0)} runs trained now, "
          f"{meta.get('run_seconds_trained_now', 0):.0f} run-seconds in the Ray workers, "
          f"{meta.get('driver_cpu_seconds', 0):.0f} driver CPU-seconds, {os.cpu_count()} cores); open the "
          f"report in a browser (it is self-contained).")
    return rc
