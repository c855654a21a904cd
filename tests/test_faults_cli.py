"""Bad flags, environment and files end in one line and exit 2, never a traceback (issue 29:
the cases an outside fault test found)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def rasp(args, env=None, timeout=300):
    e = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "rasp_cli.main", *args], cwd=ROOT, env=e,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("args", [
    ["search", "sort_unique", "--time-cap", "nan"],
    ["search", "sort_unique", "--time-cap", "inf"],
    ["search", "sort_unique", "--budget", "nan"],
    ["search", "sort_unique", "--budget", "-5"],
    ["score", "count", "--search-budget", "1.5"],
    ["search", "sort_unique", "--memory-mb", "nan"],
    ["search", "sort_unique", "--memory-mb", "0"],
    ["train", "--pe", "nope", "--budget", "nan", "--grid", "copy_unique"],
    ["report", "sort_unique", "--budget", "-1", "--no-train"],
])
def test_nan_inf_and_negative_limits_are_refused(args):
    p = rasp(args)
    assert p.returncode == 2, (p.returncode, p.stderr[-800:])
    assert "Traceback" not in p.stderr and "finite number" in p.stderr


def test_a_bad_memory_budget_variable_does_not_break_commands():
    p = rasp(["tasks"], env={"RASP_MEMORY_BUDGET_MB": "abc"})
    assert p.returncode == 0 and "Traceback" not in p.stderr
    assert "RASP_MEMORY_BUDGET_MB='abc'" in p.stderr


def test_bad_threads_variable_and_mps_are_one_line(tmp_path):
    p = rasp(["train", "copy_unique", "--pe", "nope", "--steps", "1", "-o",
              str(tmp_path / "a")], env={"RASP_TORCH_THREADS": "abc"})
    assert p.returncode == 2 and "Traceback" not in p.stderr and "RASP_TORCH_THREADS" in p.stderr
    p = rasp(["train", "copy_unique", "--pe", "nope", "--steps", "1", "--device", "mps", "-o",
              str(tmp_path / "b")])
    assert p.returncode == 2 and "Traceback" not in p.stderr and "mps" in p.stderr


def test_programs_are_not_read_from_virtual_files():
    p = rasp(["run", "/proc/self/environ", "--name", "x"])
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "regular file" in p.stderr and "PATH=" not in p.stderr


def test_a_symlinked_lock_is_refused_and_its_target_untouched(tmp_path):
    from analysis.training.runs import RunDirError, RunLock
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").symlink_to(target)
    with pytest.raises(RunDirError, match="symbolic link"):
        RunLock(run).acquire()
    assert target.read_text() == "keep me"


def test_identical_models_give_identical_weight_files(tmp_path):
    """Two processes saving the same model write byte-identical safetensors files (the
    library's metadata order was a hash map's)."""
    code = ("import sys, torch\n"
            "from rasp_model import Transformer, TransformerConfig, save_safetensors\n"
            "torch.manual_seed(0)\n"
            "cfg = TransformerConfig(n_layers=1, d_model=16, n_heads=2, d_head=8, d_mlp=32,\n"
            "                        d_vocab=7, n_ctx=10, pe='nope')\n"
            "save_safetensors(Transformer(cfg), sys.argv[1], metadata={'b': {'x': 1}, 'a': 'z',"
            " 'c': [1, 2], 'd': 'w', 'e': 'v'})\n")
    for i in range(2):
        subprocess.run([sys.executable, "-c", code, str(tmp_path / f"m{i}.safetensors")],
                       cwd=ROOT, check=True, timeout=120)
    a, b = ((tmp_path / f"m{i}.safetensors").read_bytes() for i in range(2))
    assert a == b
    from rasp_model import load_safetensors, read_safetensors_metadata
    meta = read_safetensors_metadata(tmp_path / "m0.safetensors")
    assert meta["a"] == "z" and meta["format"] == "rasp-lab-transformer"
    assert load_safetensors(tmp_path / "m0.safetensors").cfg.d_model == 16


def test_done_records_wall_time_once(tmp_path):
    """DONE's wall_seconds is the call's wall time (it counted the training twice)."""
    import json
    import time
    from analysis.training.trainer import train
    t0 = time.time()
    res = train("copy_unique", "nope", seed=0, out_dir=str(tmp_path / "r"), preset="quick",
                steps=20, progress=False)
    wall = time.time() - t0
    done = json.loads((tmp_path / "r" / "DONE").read_text())
    assert res.finished
    assert done["train_seconds"] <= done["wall_seconds"] <= wall + 0.5


@pytest.mark.parametrize("damage", ["missing", "empty", "garbage"])
def test_a_finished_run_with_broken_weights_is_not_reused(tmp_path, damage):
    """`rasp train` used to report "reused" (exit 0) for a finished run whose weights were
    missing, empty or garbage; now it refuses in one line and names --force."""
    from analysis.training.runs import RunDirError
    from analysis.training.trainer import train
    rd = tmp_path / "r"
    train("copy_unique", "nope", seed=0, out_dir=str(rd), preset="quick", steps=5,
          progress=False)
    w = rd / "model.safetensors"
    if damage == "missing":
        w.unlink()
    elif damage == "empty":
        w.write_bytes(b"")
    else:
        w.write_bytes(b"\x00garbage" * 10)
    with pytest.raises(RunDirError, match="--force"):
        train("copy_unique", "nope", seed=0, out_dir=str(rd), preset="quick", steps=5,
              progress=False)
    p = rasp(["train", "copy_unique", "--pe", "nope", "--preset", "quick", "--steps", "5",
              "-o", str(rd)])
    assert p.returncode == 2 and "Traceback" not in p.stderr and "--force" in p.stderr


@pytest.mark.parametrize("flags,words", [
    (["--per-length", "100000000"], "at most 10,000 probe sequences"),
    (["--lengths", "5000000"], "at most 1,000"),
])
def test_probe_sizes_are_bounded(flags, words, tmp_path):
    """rasp probe --per-length 10^8 ran unbounded (killed after 60 s); now one line, exit 2,
    before any run directory is read."""
    p = rasp(["probe", str(tmp_path / "no-such-run"), "--no-compile", *flags], timeout=60)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert words in p.stderr and len(p.stderr.strip().splitlines()) == 1
