"""The report's tasks and presets (seeds, probe sizes, training preset).

A module of constants (and :func:`theory_presets`, torch-free), so that the command line can
show them in ``--help`` without importing the report (torch, matplotlib). The report itself is
:mod:`analysis.reporting.report`.
"""

from analysis.training.configs import TRAIN_PRESETS
from rasp_model.pe_names import get_pe, registered_pes

__all__ = ["DEFAULT_TASKS", "CONFIRMATION_TASKS", "FULL_TASKS", "VALIDATION_TASKS",
           "SELECTED_TASK", "REPORT_PRESETS", "PRESET_ALIASES", "study_preset", "theory_presets"]


def theory_presets(preset: str) -> dict[str, str]:
    """PE -> the training preset that trains like ``preset`` but with the position offsets the
    PE's theories assume (:func:`rasp_model.pe_names.theory_protocol`: a learned APE's are
    random, so ``demo`` -> ``demo_random_offsets``), for every registered encoding that states
    such a protocol and where :data:`analysis.training.configs.TRAIN_PRESETS` has a preset of
    exactly those settings (``quick`` has none: ``{}``). An unknown preset: ``{}``."""
    base = TRAIN_PRESETS.get(preset)
    out: dict[str, str] = {}
    for pe in registered_pes() if base is not None else ():
        offsets = get_pe(pe).theory_offsets
        if offsets is None or base.get("position_offsets", "none") == offsets:
            continue
        want = {**base, "position_offsets": offsets}
        match = next((name for name, s in TRAIN_PRESETS.items() if s == want), None)
        if match is not None:
            out[pe] = match
    return out

#: The demo's default: one task with a RASP-L program (Zhou et al.: generalizes) and one without:
#: sort_unique (a RASP-L program of length 5) is where the positional encodings separate at
#: 3,000 steps of the small model (docs/results.md); copy_repeat has no RASP-L program.
DEFAULT_TASKS = ["sort_unique", "copy_repeat"]

#: The task the demo's configuration was chosen on (the encodings separate there): its claims
#: need confirming on a task that was not selected for.
SELECTED_TASK = "sort_unique"

#: Tasks the demo did not select for, run by ``rasp demo --full`` with the demo's model, preset
#: and seeds, where the paper's claims are tested again (confirmation or not). count (Zhou et
#: al. 2023, a RASP-L program) was chosen because every PE fits it at the demo preset (ID EM
#: 1.00 for NoPE and sinusoidal APE, seed 0) and before its OOD results were known; copy_unique
#: was tried first and left out because NoPE does not fit it at this preset (ID EM 0.79, seed 0),
#: which leaves every claim inconclusive.
CONFIRMATION_TASKS = ["count"]

#: ``rasp demo --full``: the demo's tasks plus the confirmation tasks.
FULL_TASKS = DEFAULT_TASKS + CONFIRMATION_TASKS

#: The tasks ``rasp validate-predictor`` and ``make predictions`` check predictions on by
#: default (RASP-L programs and tasks without one).
VALIDATION_TASKS = ["count", "copy_unique", "sort_unique", "copy_repeat", "parity", "reverse"]

#: Report presets (study presets: which runs exist, :class:`analysis.training.study.Study`; named
#: apart from the training presets ``quick`` / ``demo`` that say how each run trains): seeds per PE, extra NoPE seeds (for the other-seed baseline), probe size, the
#: training preset of the runs (:data:`analysis.training.configs.TRAIN_PRESETS`), optionally
#: another training preset per PE (``pe_train_presets``: the protocol a PE's theory assumes) and
#: the PEs per task (``task_pes``; others: all PEs asked for).
REPORT_PRESETS = {
    # the main job (``rasp demo``): 5 seeds of every PE (the fewest with which the claims'
    # rule can decide a label, analysis/evidence/statistics.py) on the generalizing task, the
    # learned APE with random position offsets (the protocol its RASP-L / C-RASP predictions
    # assume); the failing task with NoPE only. 35 runs of ~25 CPU-s (batch 32): ~8 minutes on
    # 2 idle cores (docs/benchmarks.md, "The demo").
    "main": {"seeds": [0, 1, 2, 3, 4], "nope_seeds": 5, "probe_per_length": 4,
             "train_preset": "demo", "runs_root": "runs",
             "pe_train_presets": theory_presets("demo"),
             "task_pes": {"copy_repeat": ["nope"]}},
    # the quick look (``rasp report``'s default, the README's tour): one seed, quick runs
    "tour": {"seeds": [0], "nope_seeds": 2, "probe_per_length": 3, "train_preset": "quick",
              "runs_root": "runs"},
    # ``rasp demo --full``: the demo on FULL_TASKS with the same training presets (the demo's
    # runs are reused, the confirmation task runs exactly as the selected one) and 7 seeds: the
    # fewest with which "contradicted" is reachable too (exact sign-flip p = 1/128 <= 0.01), so
    # a claim that goes the other way on a task can be said to, not only "not confirmed"
    "confirmation": {"seeds": [0, 1, 2, 3, 4, 5, 6], "nope_seeds": 7, "probe_per_length": 4,
             "train_preset": "demo", "runs_root": "runs",
             "pe_train_presets": theory_presets("demo"),
             "task_pes": {"copy_repeat": ["nope"]}},
}


#: The study presets' former names (they were the training presets' names too): accepted
#: wherever a preset is read (``ReportOptions``, an older ``report.json``).
PRESET_ALIASES = {"demo": "main", "quick": "tour", "full": "confirmation"}


def study_preset(name: str) -> str:
    """The study preset ``name`` stands for (a current name, or a former one:
    :data:`PRESET_ALIASES`); an unknown name is returned as it is."""
    return PRESET_ALIASES.get(name, name)
