"""Which training runs an experiment consists of: the :class:`Study`, the one place that decides.

A study is tasks x PEs x seeds with a training preset (optionally another one per PE: the
protocol a PE's theory assumes), the PEs each task is run with, extra seeds of some PEs (NoPE's
other-seed baseline), training overrides and where the run directories live. ``Study.runs()``
lists its :class:`~analysis.training.grid.GridRun` in a fixed order (task, PE, seed). The report
and the main job (:mod:`analysis.reporting.report`, presets
:data:`analysis.reporting.presets.REPORT_PRESETS`), the predictor's validation
(:mod:`analysis.experiment.validate`) and ``rasp train --grid`` / ``rasp sweep`` build their run
lists with it, so the same experiment names the same run directories in each.

Study presets (the report's ``tour``, ``main`` and ``confirmation``) are named apart from the
training presets (:data:`analysis.training.configs.TRAIN_PRESETS`: ``quick``, ``demo``, ...):
a study preset says which runs exist, a training preset how each run trains.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from analysis.training.grid import GridRun
from analysis.training.runs import default_run_dir

__all__ = ["Study"]


@dataclass(frozen=True)
class Study:
    """The runs of an experiment (module docstring).

    Attributes:
        tasks: task names (or task objects, for in-process grids only).
        pes: positional encodings (:data:`rasp_model.PE_NAMES`), in the order asked for.
        seeds: the seeds of every PE.
        train_preset: the training preset of the runs (:data:`analysis.training.configs.
            TRAIN_PRESETS`); ``pe_train_presets``: another one per PE.
        task_pes: the PEs a task is run with (a task not named: every PE of ``pes``).
        extra_seeds: per PE, seeds ``0..n-1`` added to ``seeds`` (NoPE's other-seed baseline).
        overrides: training settings of every run (``config_overrides``); ``steps`` and
            ``train_max_len`` likewise; ``task_train_max_len``: the training length of some
            tasks (task name -> L; e.g. the length their paper's theory speaks from,
            :class:`tasks.base.Regime`), over ``train_max_len``.
        runs_root: where the default run directories lie
            (:func:`analysis.training.runs.default_run_dir`: ``<runs_root>/<task>/<pe>/
            seed<k>[-<preset>]``); ``flat``: ``<runs_root>/seed<k>`` instead (a study of one
            task and PE in a folder of its own, e.g. one configuration of a sweep).
        tag: free text shown with every run (e.g. a sweep configuration).
    """

    tasks: Sequence
    pes: Sequence[str]
    seeds: Sequence[int]
    train_preset: str = "default"
    pe_train_presets: Mapping[str, str] = field(default_factory=dict)
    task_pes: Mapping[str, Sequence[str]] = field(default_factory=dict)
    extra_seeds: Mapping[str, int] = field(default_factory=dict)
    overrides: Mapping = field(default_factory=dict)
    steps: int | None = None
    train_max_len: int | None = None
    task_train_max_len: Mapping[str, int] = field(default_factory=dict)
    runs_root: str = "runs"
    flat: bool = False
    tag: str = ""

    def preset_of(self, pe: str) -> str:
        """The training preset of ``pe``'s runs."""
        return dict(self.pe_train_presets or {}).get(pe, self.train_preset)

    def pes_of(self, task) -> list[str]:
        """The PEs ``task`` is run with, in the order of :attr:`pes`."""
        name = task if isinstance(task, str) else task.name
        only = dict(self.task_pes or {}).get(name)
        return [pe for pe in self.pes if only is None or pe in only]

    def seeds_of(self, pe: str) -> list[int]:
        """The seeds of ``pe``: :attr:`seeds` plus ``0..extra_seeds[pe]-1``, sorted."""
        extra = int(dict(self.extra_seeds or {}).get(pe, 0))
        return sorted(set(int(s) for s in self.seeds) | set(range(extra)))

    def train_max_len_of(self, task) -> int | None:
        """The training length set for ``task``'s runs (None: its preset's)."""
        name = task if isinstance(task, str) else task.name
        return dict(self.task_train_max_len or {}).get(name, self.train_max_len)

    def run_dir(self, task, pe: str, seed: int) -> Path:
        """The default run directory of one run of the study."""
        if self.flat:
            return Path(self.runs_root) / f"seed{seed}"
        name = task if isinstance(task, str) else task.name
        return default_run_dir(name, pe, seed, self.preset_of(pe), self.runs_root,
                               self.train_max_len_of(task))

    def triples(self, task) -> list[tuple[str, int, Path]]:
        """``(PE, seed, run directory)`` of ``task``'s runs."""
        return [(pe, s, self.run_dir(task, pe, s)) for pe in self.pes_of(task)
                for s in self.seeds_of(pe)]

    def runs(self) -> list[GridRun]:
        """Every run, task by task, PE by PE, seed by seed."""
        return [GridRun(task, pe, seed, preset=self.preset_of(pe),
                        overrides=dict(self.overrides or {}), steps=self.steps,
                        train_max_len=self.train_max_len_of(task), run_dir=str(rd),
                        tag=self.tag)
                for task in self.tasks for pe, seed, rd in self.triples(task)]
