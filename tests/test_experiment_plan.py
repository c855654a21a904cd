"""The experiment's plan (issue 48 item 1): every run's settings resolved once, a finished run
directory of another configuration recognized, a run that cannot train named before the grid
starts."""

import pytest

import tasks

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
    real_task, real_spec = plan_mod.resolve_task, plan_mod.resolve_spec
    monkeypatch.setattr(plan_mod, "resolve_task",
                        lambda t: calls["task"].append(t) or real_task(t))
    monkeypatch.setattr(plan_mod, "resolve_spec",
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
