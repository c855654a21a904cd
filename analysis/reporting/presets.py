"""The report's tasks and presets (seeds, probe sizes, training preset).

A module of constants only, so that the command line can show them in ``--help`` without
importing the report (torch, matplotlib). The report itself is :mod:`analysis.reporting.report`.
"""

__all__ = ["DEFAULT_TASKS", "FULL_TASKS", "REPORT_PRESETS"]

#: The demo's default: one task predicted to generalize and one predicted to fail (Zhou et al.):
#: sort_unique (a RASP-L program of length 5) is where the positional encodings separate at
#: 3,000 steps of the small model (docs/results.md); copy_repeat has no RASP-L program.
DEFAULT_TASKS = ["sort_unique", "copy_repeat"]

#: The larger grid (``rasp demo --full``).
FULL_TASKS = ["count", "copy_unique", "sort_unique", "copy_repeat", "parity", "reverse"]

#: Report presets: seeds per PE, extra NoPE seeds (for the other-seed baseline), probe size, the
#: training preset of the runs (:data:`analysis.training.configs.TRAIN_PRESETS`), and optionally the PEs
#: per task (``task_pes``; others: all PEs asked for).
REPORT_PRESETS = {
    # the main job (``rasp demo``): 2 seeds per PE and 3 NoPE seeds on the generalizing task;
    # the failing task with NoPE only (3 seeds), so that all 16 runs start within the budget
    # on 2 CPU cores (measured: with ALiBi on copy_repeat as well, 18 runs, the two learned-APE
    # runs were skipped by the budget; docs/benchmarks.md)
    "demo": {"seeds": [0, 1], "nope_seeds": 3, "probe_per_length": 4, "train_preset": "demo",
             "runs_root": "runs", "task_pes": {"copy_repeat": ["nope"]}},
    "quick": {"seeds": [0], "nope_seeds": 2, "probe_per_length": 3, "train_preset": "quick",
              "runs_root": "runs"},
    "full": {"seeds": [0, 1, 2], "nope_seeds": 3, "probe_per_length": 8,
             "train_preset": "default", "runs_root": "runs"},
}
