"""A grid's runs carry their task's source record (issue 48 item 1: no name lookups and no
environment variable in the workers): a Ray worker that never saw the driver's registrations
still trains a task file's runs, and a task file edited after the runs were planned is
refused, not trained as something else."""

from pathlib import Path

import pytest

from analysis.training.grid import run_grid, with_source
from analysis.training.study import Study
from analysis.training.trainer import TrainingError
from tasks.catalogue import register_task
from tasks.custom import load_task_file

LATE_B = Path(__file__).resolve().parent.parent / "tasks" / "examples" / "late_b.py"


def _copy(tmp_path, name):
    """late_b under another NAME (a registration is per name: tests stay independent)."""
    path = tmp_path / f"{name}.py"
    path.write_text(LATE_B.read_text().replace('NAME = "late_b"', f'NAME = "{name}"'))
    return path


def test_ray_workers_load_a_task_file_from_the_run_record(tmp_path):
    task = register_task(load_task_file(_copy(tmp_path, "late_b_grid")))
    runs = Study(tasks=[task.name], pes=["nope"], seeds=[0], train_preset="quick", steps=3,
                 runs_root=str(tmp_path / "runs")).runs()
    assert runs[0].source is None and runs[0].task == task.name     # planned by name
    # the workers are other processes: the driver's registration is not theirs (nor is it
    # passed in the environment), the run's source record is all they get
    report = run_grid(runs, runs_root=tmp_path / "runs", progress=False, ray_num_cpus=1)
    [res] = report.results
    assert res.status == "trained", res.error
    assert res.run.source["sha256"] == task.sha256
    assert res.result.run_dir.endswith("seed0-quick")


def test_a_task_file_edited_after_planning_is_refused(tmp_path):
    path = _copy(tmp_path, "late_b_edit")
    task = register_task(load_task_file(path))
    [run] = Study(tasks=[task.name], pes=["nope"], seeds=[0], train_preset="quick",
                  runs_root=str(tmp_path / "runs")).runs()
    run = with_source(run)
    assert run.source["sha256"] == task.sha256
    assert run.load_task().name == task.name
    path.write_text(path.read_text().replace("FIRST_B = 4", "FIRST_B = 5"))
    with pytest.raises(TrainingError, match="changed since its runs were planned"):
        run.load_task()


def test_catalogue_runs_carry_no_source(tmp_path):
    [run] = Study(tasks=["sort_unique"], pes=["nope"], seeds=[0], train_preset="quick",
                  runs_root=str(tmp_path)).runs()
    assert with_source(run).source is None

