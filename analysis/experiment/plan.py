"""An experiment's plan: every run of a :class:`~analysis.training.study.Study` with its settings
resolved once.

``Plan.of(study)`` lists the study's runs (:meth:`Study.runs`, in its order: task, PE, seed)
and resolves each one's :class:`~analysis.training.configs.RunSpec` a single time
(:meth:`analysis.training.grid.GridRun.spec`, i.e.
:func:`analysis.training.trainer.resolve_spec`: the model and training settings, lengths and
evaluation bins a run directory records in ``config.json``). What the jobs of this room ask of
a run afterwards is read from that spec: whether a finished run directory holds this
configuration (:meth:`PlannedRun.stale`), a task's training length (:meth:`Plan.train_lengths`),
and whether every run can train at all (:meth:`Plan.check`, before the grid starts). A run whose
settings do not resolve keeps the error instead of a spec: :meth:`Plan.check` raises it (the
predictor's check, the curves), the report's grid reports it per run.

A plan also carries each task as a **source record** (:func:`tasks.custom.task_source`:
``{"catalogue": name}``, a task file with its sha256, or a regular expression's specification),
set on every run it hands to the grid (:attr:`analysis.training.grid.GridRun.source`): a Ray
worker loads the task from that record (a task file only while it still has the recorded
sha256), never by looking its name up in a registry it does not share with the driver.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from analysis.training.configs import RunSpec
from analysis.training.grid import GridRun
from analysis.training.runs import is_finished, read_spec
from analysis.training.study import Study
from analysis.training.trainer import resolve_task
from rasp.errors import RASPError
from tasks.custom import task_source

__all__ = ["PlannedRun", "Plan"]


def _source(run: GridRun, task) -> dict | None:
    """The source record a run of ``task`` carries: the task's own
    (:func:`tasks.custom.task_source`), except for a task object of no source (an
    in-process task that is not the catalogue's: None, the grid hands the object itself)."""
    source = task_source(task)
    if "catalogue" in source and not isinstance(run.task, str):
        return None
    return source


@dataclass(frozen=True)
class PlannedRun:
    """One run of a plan.

    Attributes:
        run: what the grid trains (:class:`analysis.training.grid.GridRun`, its ``run_dir``
            set by the study, its ``source`` the task's source record).
        spec: the run's settings, resolved once (None when they do not resolve).
        error: why they do not resolve (the exception :meth:`GridRun.spec` or
            :func:`resolve_task` raised: an unknown task or PE, a bad setting or length).
    """

    run: GridRun
    spec: RunSpec | None
    error: Exception | None = None

    @property
    def task_name(self) -> str:
        return self.run.task_name

    @property
    def pe(self) -> str:
        return self.run.pe

    @property
    def seed(self) -> int:
        return self.run.seed

    @property
    def run_dir(self) -> Path:
        return Path(self.run.run_dir)

    def stale(self) -> bool:
        """Whether the run directory's ``config.json`` holds another configuration than the
        plan's (an unreadable one, or a run whose settings do not resolve, counts as stale:
        the grid then says why)."""
        if self.spec is None:
            return True
        try:
            return read_spec(self.run_dir)[0] != self.spec
        except (RASPError, ValueError):
            return True

    def pending(self) -> bool:
        """Whether the grid has to train this run: not finished, or finished with another
        configuration (the grid reports that one with the fix: another runs root, or remove
        it)."""
        return not is_finished(self.run_dir) or self.stale()


@dataclass(frozen=True)
class Plan:
    """The runs of a study with their resolved settings (module docstring).

    Attributes:
        runs: one :class:`PlannedRun` per run, in the study's order (task, PE, seed).
        runs_root: the study's runs root (the grid's ``runs_root``).
        tasks: task name -> the task, resolved once (tasks that do not resolve are left out:
            their runs hold the error).
    """

    runs: tuple[PlannedRun, ...]
    runs_root: str
    tasks: dict = field(default_factory=dict)

    @classmethod
    def of(cls, study: Study) -> "Plan":
        """Plan every run of ``study``: each task resolved once
        (:func:`analysis.training.trainer.resolve_task`) and carried as its source record
        (module docstring), each run's spec resolved once."""
        planned, resolved = [], {}
        for run in study.runs():
            key = run.task if isinstance(run.task, str) else id(run.task)
            if key not in resolved:
                try:
                    resolved[key] = resolve_task(run.task)
                except RASPError as e:
                    resolved[key] = e
            task = resolved[key]
            if isinstance(task, Exception):
                planned.append(PlannedRun(run, None, task))
                continue
            source = _source(run, task)
            if source is not None:
                run = dataclasses.replace(run, source=source)
            try:
                spec = run.spec(task)
            except (RASPError, ValueError) as e:
                planned.append(PlannedRun(run, None, e))
            else:
                planned.append(PlannedRun(run, spec))
        return cls(tuple(planned), str(study.runs_root),
                   {t.name: t for t in resolved.values() if not isinstance(t, Exception)})

    @classmethod
    def joined(cls, plans: Sequence["Plan"]) -> "Plan":
        """One plan of the runs of ``plans`` (in their order; a run directory planned twice is
        kept once), under the first plan's runs root (e.g. one task's runs at several training
        lengths, trained by one grid)."""
        runs: dict = {}
        for pl in plans:
            for p in pl.runs:
                runs.setdefault(str(p.run_dir), p)
        return cls(tuple(runs.values()), plans[0].runs_root,
                   {k: v for pl in plans for k, v in pl.tasks.items()})

    def task(self, name: str):
        """The planned task called ``name`` (resolved once).

        Raises:
            KeyError: no run of the plan is of a task of that name that resolves."""
        return self.tasks[name]

    def check(self) -> None:
        """Raise the first run's error, if any (what the grid would fail on: an unknown task or
        PE, a bad preset, setting or length), before anything starts."""
        for p in self.runs:
            if p.error is not None:
                raise p.error

    def for_task(self, name: str) -> list[PlannedRun]:
        """The runs of task ``name``, in the plan's order."""
        return [p for p in self.runs if p.task_name == name]

    def triples(self, name: str) -> list[tuple[str, int, Path]]:
        """``(PE, seed, run directory)`` of task ``name``'s runs."""
        return [(p.pe, p.seed, p.run_dir) for p in self.for_task(name)]

    def grid_runs(self) -> list[GridRun]:
        """What the grid trains, in the plan's order."""
        return [p.run for p in self.runs]

    def pending(self) -> list[PlannedRun]:
        """The runs the grid has to train (:meth:`PlannedRun.pending`)."""
        return [p for p in self.runs if p.pending()]

    def train_lengths(self) -> set[int]:
        """The longest training length of the planned runs (each run trains on
        ``spec.train_lengths``); runs whose settings do not resolve are left out."""
        return {p.spec.train_lengths[1] for p in self.runs if p.spec is not None}
