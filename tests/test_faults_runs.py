"""Fault tests of run directories and the training loop (issue 13 items 1, 2, 5, 6).

Truths checked, each independent of the code under test:

* a run interrupted (SIGINT) or crashed at *every* point of a training step, then resumed, ends
  bitwise equal to an uninterrupted run of the same configuration (weights, accuracy, metrics);
* two writers of one run directory: the second fails at once naming the first one's PID; a
  writer killed with SIGKILL leaves no stale lock;
* every kind of file a run directory holds, corrupted (garbage, empty, out-of-range or
  non-finite values), is refused with an error naming the file, never a traceback, never a
  suggestion to unpickle with ``weights_only=False``;
* bad command lines exit with code 2 and one line on stderr, and leave nothing behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from analysis.training.runs import RunDirError, load_run, read_accuracy
from analysis.training.trainer import STEP_POINTS, train
from rasp_cli.main import main as rasp_main

ROOT = Path(__file__).resolve().parent.parent
TASK = "copy_unique"
# tiny and fast; every point of the step occurs within 6 steps (probe and fit check at 3 and 6,
# checkpoint at 4 and at the end)
TINY = {"n_layers": 1, "d_model": 16, "d_head": 8, "n_heads": 2, "d_mlp": 16, "batch_size": 4,
        "train_max_len": 3, "eval_samples": 4, "eval_stride": 2, "warmup_steps": 1,
        "log_every": 1, "probe_every": 3, "probe_samples": 2, "checkpoint_every": 4,
        # the fit check of Huang et al.'s protocol runs at 3 and 6 (it never stops this run)
        "eval_bins": [[1, 3], [4, 6]], "bin_samples": 8, "fit_every": 3}
STEPS = 6
KW = dict(seed=1, steps=STEPS, config_overrides=TINY, progress=False, verbose=False)


def _metrics(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k != "elapsed_s"} for r in rows]


def _weights(run_dir: Path) -> dict:
    return load_file(str(run_dir / "model.safetensors"))


def _assert_same_run(a: Path, b: Path) -> None:
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    assert all(torch.equal(wa[k], wb[k]) for k in wa), "weights differ"
    assert read_accuracy(a) == read_accuracy(b)
    assert _metrics(a) == _metrics(b)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """An uninterrupted run."""
    d = tmp_path_factory.mktemp("ref") / "run"
    train(TASK, "t5", out_dir=d, **KW)
    return d


# --------------------------------------------------------------------------------------------
# interrupts and crashes at every point of the step
# --------------------------------------------------------------------------------------------

def _at(point: str, action):
    """A step hook firing ``action`` once, the first time ``point`` is reached at step >= 1."""
    fired = []

    def hook(p, step):
        if p == point and step >= 1 and not fired:
            fired.append(step)
            action()
    hook.fired = fired
    return hook


@pytest.mark.parametrize("point", STEP_POINTS)
def test_sigint_at_every_point_of_the_step_resumes_exactly(point, reference, tmp_path):
    d = tmp_path / "run"
    hook = _at(point, lambda: os.kill(os.getpid(), signal.SIGINT))
    with pytest.raises(KeyboardInterrupt):
        train(TASK, "t5", out_dir=d, step_hook=hook, **KW)
    assert hook.fired, point
    state = json.loads((d / "checkpoint" / "state.json").read_text())
    assert state["step"] == hook.fired[0] + 1          # the interrupted step was completed
    assert not (d / "DONE").exists()
    train(TASK, "t5", out_dir=d, **KW)
    _assert_same_run(reference, d)


@pytest.mark.parametrize("point", STEP_POINTS)
def test_crash_at_every_point_of_the_step_resumes_exactly(point, reference, tmp_path):
    """A crash (an exception, like a kill) saves nothing: the run resumes from its last
    checkpoint and the metrics written after it are dropped."""
    d = tmp_path / "run"

    def crash():
        raise SystemError("simulated crash")
    hook = _at(point, crash)
    with pytest.raises(SystemError):
        train(TASK, "t5", out_dir=d, step_hook=hook, **KW)
    train(TASK, "t5", out_dir=d, **KW)
    _assert_same_run(reference, d)


def test_kill_between_the_checkpoint_renames_resumes_exactly(reference, tmp_path):
    d = tmp_path / "run"
    train(TASK, "t5", out_dir=d, stop_after=5, **KW)       # checkpoint of step 4
    os.replace(d / "checkpoint", d / "checkpoint.old")   # killed between the two renames
    (d / "checkpoint.tmp").mkdir()                        # and a half-written new one
    (d / "checkpoint.tmp" / "state.json").write_text("{")
    train(TASK, "t5", out_dir=d, **KW)
    _assert_same_run(reference, d)


# --------------------------------------------------------------------------------------------
# concurrent writers and stale locks
# --------------------------------------------------------------------------------------------

_WRITER = """
import sys, time
from pathlib import Path
from analysis.training.trainer import train
marker = Path(sys.argv[2])
def hook(point, step):
    if step == 2 and point == "commit":
        marker.write_text("holding")
        time.sleep(120)                              # killed by the test long before
train("copy_unique", "t5", out_dir=sys.argv[1], step_hook=hook, seed=1, steps=6,
      config_overrides=%r, progress=False, verbose=False)
""" % (TINY,)


def test_second_writer_fails_naming_the_pid_and_a_killed_writer_leaves_no_stale_lock(
        reference, tmp_path):
    d, marker = tmp_path / "run", tmp_path / "holding"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(d), str(marker)], env=env)
    try:
        deadline = time.time() + 120
        while not marker.exists():
            assert proc.poll() is None, "the writer exited early"
            assert time.time() < deadline, "the writer never reached step 2"
            time.sleep(0.05)
        with pytest.raises(RunDirError, match=f"in use by PID {proc.pid}"):
            train(TASK, "t5", out_dir=d, **KW)
        with pytest.raises(RunDirError, match="in use"):    # --force does not override a lock
            train(TASK, "t5", out_dir=d, force=True, **{**KW, "steps": 3})
        assert json.loads((d / "config.json").read_text())["steps"] == STEPS
    finally:
        proc.kill()
        proc.wait()
    # the kernel dropped the dead writer's lock: the run resumes and ends as the reference
    train(TASK, "t5", out_dir=d, **KW)
    _assert_same_run(reference, d)


# --------------------------------------------------------------------------------------------
# corrupt files of every kind a run directory holds
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def finished(reference, tmp_path_factory):
    """A copy factory of the finished reference run."""
    import shutil
    base = tmp_path_factory.mktemp("copies")

    def copy(name):
        d = base / name
        shutil.copytree(reference, d, ignore=shutil.ignore_patterns(".lock"))
        return d
    return copy


def _row(**kw):
    return {"length": 1, "split": "id", "em": 0.5, "n": 4, "ci_low": 0.15, "ci_high": 0.85,
            **kw}


FINISHED_CASES = {
    "config.json garbage": ("config.json", b"{not json", "config.json"),
    "config.json empty": ("config.json", b"", "config.json"),
    "config.json wrong schema": ("config.json", json.dumps({"task": TASK, "seed": "x"}).encode(),
                                 "config.json"),
    "DONE garbage": ("DONE", b"\x00\xff", "DONE"),
    "DONE em out of range": ("DONE", json.dumps({"task": TASK, "pe": "t5", "seed": 1, "steps": 6,
                                                 "id_em": 7.5}).encode(), "id_em"),
    "accuracy em 7.5 n -3": ("accuracy.json", json.dumps([_row(em=7.5, n=-3)]).encode(),
                             "accuracy.json"),
    "accuracy NaN": ("accuracy.json", b'[{"length": 1, "split": "id", "em": NaN, "n": 4}]',
                     "accuracy.json"),
    "accuracy not a fraction of n": ("accuracy.json", json.dumps([_row(em=0.3)]).encode(),
                                     "fraction"),
    "accuracy CI without em": ("accuracy.json", json.dumps([_row(ci_low=0.9)]).encode(),
                               "interval"),
    "accuracy bad split": ("accuracy.json", json.dumps([_row(split="train")]).encode(), "split"),
    "accuracy empty": ("accuracy.json", b"", "accuracy.json"),
    "DONE of another run": ("DONE", json.dumps({"task": TASK, "pe": "t5", "seed": 1,
                                                "steps": 600}).encode(), "different runs"),
    "accuracy of another run": ("accuracy.json", json.dumps([_row(length=9)]).encode(),
                                "different runs"),
    "weights garbage": ("model.safetensors", b"garbage", "model.safetensors"),
    "weights empty": ("model.safetensors", b"", "model.safetensors"),
}


@pytest.mark.parametrize("case", sorted(FINISHED_CASES))
def test_corrupt_finished_run_files_are_refused(case, finished, capsys):
    name, content, words = FINISHED_CASES[case]
    d = finished(case.replace(" ", "_"))
    (d / name).write_bytes(content)
    with pytest.raises(RunDirError, match=words):
        load_run(d)
    assert rasp_main(["probe", str(d), "--no-compile"]) == 2   # the CLI: one line, exit 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_all_nan_weights_are_refused_not_reported(finished, capsys):
    d = finished("nan")
    w = _weights(d)
    meta = __import__("safetensors").safe_open(str(d / "model.safetensors"), "pt").metadata()
    save_file({k: torch.full_like(v, float("nan")) for k, v in w.items()}, str(d /
              "model.safetensors"), metadata=meta)
    with pytest.raises(RunDirError, match="non-finite weights"):
        load_run(d)
    assert rasp_main(["probe", str(d), "--no-compile"]) == 2
    assert "non-finite" in capsys.readouterr().err


def _partial(tmp_path) -> Path:
    d = tmp_path / "run"
    train(TASK, "t5", out_dir=d, stop_after=5, **KW)           # checkpoint of step 4
    return d


CHECKPOINT_CASES = {
    "optimizer.pt empty": ("checkpoint/optimizer.pt", b""),
    "optimizer.pt garbage": ("checkpoint/optimizer.pt", b"PK\x03\x04 garbage"),
    "state.json garbage": ("checkpoint/state.json", b"[1, 2"),
    "state.json negative step": ("checkpoint/state.json", json.dumps(
        {"step": -4, "elapsed": 1.0, "tokens_seen": 0, "metrics_bytes": 0}).encode()),
    "state.json step beyond the run": ("checkpoint/state.json", json.dumps(
        {"step": 99, "elapsed": 1.0, "tokens_seen": 0, "metrics_bytes": 0}).encode()),
    "checkpoint weights garbage": ("checkpoint/model.safetensors", b"garbage"),
    "metrics shorter than the checkpoint": ("metrics.jsonl", b""),
    # state.json of another step than the weights beside it (step 2; the weights are step 4's)
    "state.json of another step than the weights": ("checkpoint/state.json", json.dumps(
        {"step": 2, "elapsed": 1.0, "tokens_seen": 0, "metrics_bytes": 0}).encode()),
}


@pytest.mark.parametrize("case", sorted(CHECKPOINT_CASES))
def test_corrupt_checkpoint_files_are_refused(case, tmp_path):
    name, content = CHECKPOINT_CASES[case]
    d = _partial(tmp_path)
    (d / name).write_bytes(content)
    with pytest.raises(RunDirError, match=Path(name).name) as e:
        train(TASK, "t5", out_dir=d, **KW)
    assert "weights_only=False" not in str(e.value) and "\n" not in str(e.value)
    assert "--force" in str(e.value)
    res = train(TASK, "t5", out_dir=d, force=True, **KW)       # --force starts over
    assert res.finished


def test_pickle_with_code_in_optimizer_pt_is_refused_without_running_it(tmp_path):
    import pickle

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'pwned'}",))
    d = _partial(tmp_path)
    (d / "checkpoint" / "optimizer.pt").write_bytes(pickle.dumps(Evil()))
    with pytest.raises(RunDirError, match="optimizer.pt") as e:
        train(TASK, "t5", out_dir=d, **KW)
    assert not (tmp_path / "pwned").exists()
    assert "weights_only" not in str(e.value)


def test_cli_corrupt_optimizer_pt_is_one_line_exit_2(tmp_path, capsys):
    d = _partial(tmp_path)
    (d / "checkpoint" / "optimizer.pt").write_bytes(b"")
    args = ["train", TASK, "--pe", "t5", "--seed", "1", "--steps", str(STEPS), "-o", str(d),
            "--no-progress"] + [x for k, v in TINY.items() for x in ("--set", f"{k}={v}")]
    assert rasp_main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "optimizer.pt" in err and "weights_only" not in err


# --------------------------------------------------------------------------------------------
# bad command lines: exit 2, one line, nothing left behind
# --------------------------------------------------------------------------------------------

def _one_line_exit_2(argv, capsys, words):
    assert rasp_main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "Traceback" not in err and words in err, err


@pytest.fixture
def program(tmp_path):
    p = tmp_path / "p.rasp"
    p.write_text("rev = aggregate(select(indices, length - indices - 1, ==), tokens);\n")
    return p


@pytest.mark.parametrize("out,words", [("/proc/rasp-lab-x", "cannot create"),
                                       ("FILE", "not a directory")])
def test_cli_compile_bad_output(out, words, program, tmp_path, capsys):
    if out == "FILE":
        out = str(tmp_path / "file")
        Path(out).write_text("x")
    _one_line_exit_2(["compile", str(program), "-n", "rev", "--vocab", "a,b", "--max-len", "4",
                      "-o", out], capsys, words)


@pytest.mark.parametrize("setting,words", [("lr=abc", "lr must be"), ("lr=-1", "lr must be"),
                                           ("lr=NaN", "lr must be"), ("steps=0", "steps"),
                                           ("betas=[2,3]", "betas"), ("n_ctx=9", "n_ctx"),
                                           ("layers=3", "unknown configuration key")])
def test_cli_train_bad_setting_leaves_nothing(setting, words, tmp_path, capsys):
    d = tmp_path / "run"
    _one_line_exit_2(["train", TASK, "--pe", "nope", "-o", str(d), "--set", setting], capsys,
                     words)
    assert not d.exists()
    # the next correct command is not blocked
    assert rasp_main(["train", TASK, "--pe", "nope", "-o", str(d), "--steps", "2",
                      "--no-progress"] + [x for k, v in TINY.items()
                                          for x in ("--set", f"{k}={v}")]) == 0


@pytest.mark.parametrize("out,words", [("/proc/rasp-lab-x", "cannot create"),
                                       ("FILE", "not a directory")])
def test_cli_train_bad_output(out, words, tmp_path, capsys):
    if out == "FILE":
        out = str(tmp_path / "file")
        Path(out).write_text("x")
    _one_line_exit_2(["train", TASK, "--pe", "nope", "--steps", "1", "-o", out], capsys, words)


def test_cli_as_a_module_prints_no_traceback(tmp_path):
    """`python -m rasp_cli.main` (a second import of the module) maps errors the same way."""
    proc = subprocess.run([sys.executable, "-m", "rasp_cli.main", "train", TASK, "--pe", "nope",
                           "--set", "lr=abc", "-o", str(tmp_path / "r")], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------------------------
# a full disk (issue 29 item 3)
# --------------------------------------------------------------------------------------------

def test_a_full_disk_at_a_checkpoint_is_one_error_and_the_run_resumes_exactly(
        reference, tmp_path, monkeypatch):
    """Simulated ENOSPC while the checkpoint of step 4 is written: DiskFullError (a
    RunDirError: one line from the CLI), the half-written checkpoint removed, and the rerun
    ends bitwise equal to an uninterrupted run."""
    import errno
    from analysis.training import runs

    real = runs._atomic_torch_save
    calls = []

    def full(path, obj):
        calls.append(path)
        raise OSError(errno.ENOSPC, "No space left on device", str(path))
    d = tmp_path / "run"
    monkeypatch.setattr(runs, "_atomic_torch_save", full)
    with pytest.raises(runs.DiskFullError, match="disk is full.*step 4.*rerun"):
        train(TASK, "t5", out_dir=d, **KW)
    assert calls and not (d / "checkpoint.tmp").exists() and not (d / "DONE").exists()
    monkeypatch.setattr(runs, "_atomic_torch_save", real)
    train(TASK, "t5", out_dir=d, **KW)
    _assert_same_run(reference, d)


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                       capture_output=True)
    return r.returncode == 0


def test_a_real_full_disk_is_one_line_and_the_run_resumes(tmp_path):
    """A run on a 1.5 MB tmpfs: the quick model's first checkpoint (~1 MB) fits, the second
    does not. torch reports that as a RuntimeError of its zip writer, not ENOSPC; the CLI
    still says "the disk is full" in one line, keeps the first checkpoint, and after the file
    system grows the rerun finishes with the weights of an uninterrupted run."""
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, "1500k"):
        pytest.skip("mounting a tmpfs is not permitted here (the simulated ENOSPC test runs)")
    try:
        cmd = [sys.executable, "-m", "rasp_cli.main", "train", "count", "--pe", "nope",
               "--preset", "quick", "--set", "steps=120", "--set", "checkpoint_every=40",
               "--set", "eval_samples=4", "--set", "probe_every=0", "--no-progress"]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        r = subprocess.run(cmd + ["-o", str(disk / "run")], capture_output=True, text=True,
                           env=env, cwd=ROOT, timeout=300)
        assert r.returncode != 0 and "Traceback" not in r.stderr
        err = [l for l in r.stderr.splitlines() if l.strip()]
        assert len(err) == 1 and "disk is full" in err[0], r.stderr
        state = json.loads((disk / "run" / "checkpoint" / "state.json").read_text())
        assert state["step"] == 40 and not (disk / "run" / "checkpoint.tmp").exists()
        subprocess.run(["mount", "-o", "remount,size=20m", str(disk)], check=True)
        r = subprocess.run(cmd + ["-o", str(disk / "run")], capture_output=True, text=True,
                           env=env, cwd=ROOT, timeout=300)
        assert r.returncode == 0, r.stderr
        ref = tmp_path / "ref"
        r = subprocess.run(cmd + ["-o", str(ref)], capture_output=True, text=True, env=env,
                           cwd=ROOT, timeout=300)
        assert r.returncode == 0, r.stderr
        assert (disk / "run" / "model.safetensors").read_bytes() == \
            (ref / "model.safetensors").read_bytes()
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


# --------------------------------------------------------------------------------------------
# the fit check's early stop (Huang et al.'s protocol) resumes exactly
# --------------------------------------------------------------------------------------------

def test_early_stop_by_the_fit_check_is_final_and_resumes_exactly(tmp_path):
    """``fit_em`` 0 stops at the first fit check (step 3 of 6): ``DONE`` records 3 steps and
    ``early_stopped``; a run killed right after that check's checkpoint finishes without
    training another step, bitwise equal to the uninterrupted run."""
    kw = {**KW, "config_overrides": {**TINY, "fit_em": 0.0}}
    ref = tmp_path / "ref"
    res = train(TASK, "t5", out_dir=ref, **kw)
    done = json.loads((ref / "DONE").read_text())
    assert (res.steps, done["steps"], done["early_stopped"]) == (3, 3, True)
    bins = json.loads((ref / "bins.json").read_text())
    assert [b["bin"] for b in bins] == [[1, 3], [4, 6]] and [b["n"] for b in bins] == [8, 8]
    d = tmp_path / "run"

    def crash():
        raise SystemError("killed after the fit check's checkpoint")
    with pytest.raises(SystemError):
        train(TASK, "t5", out_dir=d, step_hook=_at("checkpoint", crash), **kw)
    assert json.loads((d / "checkpoint" / "state.json").read_text())["early_stopped"] is True
    train(TASK, "t5", out_dir=d, **kw)
    _assert_same_run(ref, d)
    assert json.loads((d / "bins.json").read_text()) == bins
    again = train(TASK, "t5", out_dir=d, **kw)               # a finished early-stopped run is reused
    assert again.reused and again.steps == 3
