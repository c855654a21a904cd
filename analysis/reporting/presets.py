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
#: training preset of the runs (:data:`analysis.training.configs.TRAIN_PRESETS`), optionally
#: another training preset per PE (``pe_train_presets``: the protocol a PE's theory assumes) and
#: the PEs per task (``task_pes``; others: all PEs asked for).
REPORT_PRESETS = {
    # the main job (``rasp demo``): 5 seeds of every PE (the fewest with which the claims'
    # rule can decide a label, analysis/evidence/statistics.py) on the generalizing task, the
    # learned APE with random position offsets (the protocol its RASP-L / C-RASP predictions
    # assume); the failing task with NoPE only. 35 runs of ~25 CPU-s (batch 32): ~8 minutes on
    # 2 idle cores (docs/benchmarks.md, "The demo").
    "demo": {"seeds": [0, 1, 2, 3, 4], "nope_seeds": 5, "probe_per_length": 4,
             "train_preset": "demo", "runs_root": "runs",
             "pe_train_presets": {"ape_learned": "demo_random_offsets"},
             "task_pes": {"copy_repeat": ["nope"]}},
    "quick": {"seeds": [0], "nope_seeds": 2, "probe_per_length": 3, "train_preset": "quick",
              "runs_root": "runs"},
    "full": {"seeds": [0, 1, 2], "nope_seeds": 3, "probe_per_length": 8,
             "train_preset": "default", "runs_root": "runs"},
}
