"""The experiment's plan (issue 48 item 1): every run's settings resolved once, a finished run
directory of another configuration recognized, a run that cannot train named before the grid
starts."""

import hashlib
import os
from pathlib import Path

import pytest

import tasks
from tasks import catalogue
from tasks.catalogue import register_task
from tasks.custom import load_task_file

from analysis.experiment import plan as plan_mod
from analysis.experiment.plan import Plan
from analysis.training import trainer
from analysis.training.study import Study

#: a run of a few optimizer steps of a very small model (the plan is under test, not learning)
TINY = {"n_layers": 1, "d_model": 16, "d_head": 8, "n_heads": 2, "d_mlp": 16, "batch_size": 4,
        "eval_samples": 2, "eval_stride": 3, "train_max_len": 4, "probe_every": 0,
        "warmup_steps": 1, "log_every": 1, "checkpoint_every": 2}


def test_each_task_and_each_spec_is_resolved_once(monkeypatch):
    calls = {"task": [], "spec": []}
    real_task, real_spec = plan_mod.resolve_task, trainer.resolve_spec
    monkeypatch.setattr(plan_mod, "resolve_task",
                        lambda t: calls["task"].append(t) or real_task(t))
    # every spec comes from the one place a run's arguments become one (GridRun.spec)
    monkeypatch.setattr(trainer, "resolve_spec",
                        lambda *a, **k: calls["spec"].append(a[1:3]) or real_spec(*a, **k))
    study = Study(tasks=["count", "parity"], pes=["nope", "t5"], seeds=[0, 1],
                  train_preset="quick", runs_root="/nonexistent/runs")
    p = Plan.of(study)
    # 2 tasks x 2 PEs x 2 seeds: eight runs, two task look-ups
    assert calls["task"] == ["count", "parity"]
    assert len(calls["spec"]) == 8 and len(p.runs) == 8
    p.check()
    assert len(p.pending()) == 8                  # nothing under a root that does not exist
    assert p.triples("parity") == study.triples("parity")
    assert [r.run_dir for r in p.grid_runs()] == [r.run_dir for r in study.runs()]
    assert len(calls["spec"]) == 8                # asking again resolves nothing
    # the quick preset caps each task's default training length at 10
    assert p.train_lengths() == {min(10, tasks.get_task(n).default_train_max_len)
                                 for n in ("count", "parity")}
    assert {r.spec.seed for r in p.for_task("count")} == {0, 1}


def test_a_run_that_cannot_train_is_named_before_the_grid_starts():
    p = Plan.of(Study(tasks=["count"], pes=["nope", "no_such_pe"], seeds=[0],
                      train_preset="quick", runs_root="/nonexistent/runs"))
    bad = [r for r in p.runs if r.spec is None]
    assert [r.pe for r in bad] == ["no_such_pe"]
    assert bad[0].pending() and bad[0].stale()
    with pytest.raises(trainer.TrainingError, match="no_such_pe"):
        p.check()


def test_a_finished_run_of_another_configuration_is_pending(tmp_path):
    """A run trained with 2 steps is finished for a plan of 2 steps, and pending (stale) for a
    plan of 3: the run directory's config.json is compared with the plan's spec."""
    def plan(steps):
        return Plan.of(Study(tasks=["count"], pes=["nope"], seeds=[0], train_preset="quick",
                             overrides={**TINY, "steps": steps}, runs_root=str(tmp_path)))
    (run,) = plan(2).runs
    trainer.train("count", "nope", seed=0, out_dir=str(run.run_dir), preset="quick",
                  config_overrides={**TINY, "steps": 2}, progress=False, verbose=False)
    assert plan(2).pending() == [] and not plan(2).runs[0].stale()
    (other,) = plan(3).runs
    assert other.run_dir == run.run_dir and other.stale() and plan(3).pending() == [other]


LATE_B = Path(__file__).resolve().parent.parent / "tasks" / "examples" / "late_b.py"


def test_the_plan_carries_each_task_as_its_source_record(tmp_path, monkeypatch):
    """A task file's runs carry the file and its sha256, a catalogue task's runs its name: a
    process that never registered the file (a Ray worker) loads the task from the record, and
    no environment variable lists the registrations."""
    path = tmp_path / "late_b_plan.py"
    path.write_text(LATE_B.read_text().replace('NAME = "late_b"', 'NAME = "late_b_plan"'))
    task = register_task(load_task_file(path))
    assert not [k for k in os.environ if "TASK_SOURCES" in k]
    p = Plan.of(Study(tasks=["late_b_plan", "sort_unique"], pes=["nope"], seeds=[0],
                      train_preset="quick", runs_root=str(tmp_path / "runs")))
    mine, cat = p.runs
    assert mine.run.source["task_file"] == str(path.resolve())
    assert mine.run.source["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert cat.run.source == {"catalogue": "sort_unique"}
    assert p.task("late_b_plan") is task and p.task("sort_unique") is tasks.get_task("sort_unique")
    # a process without the registration: the name is unknown there, the record still loads
    monkeypatch.delitem(catalogue._USER, "late_b_plan")
    with pytest.raises(tasks.UnknownTaskError):
        tasks.get_task("late_b_plan")
    assert mine.run.load_task().name == "late_b_plan"
    assert cat.run.load_task() is tasks.get_task("sort_unique")
