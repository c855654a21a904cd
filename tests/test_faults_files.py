"""Files the project did not write, and writers that must not follow links (issue 41 items 1,
2, 3, 5, 6).

Every hostile case runs the real ``rasp`` command line in a subprocess under a 2 GB
address-space cap (``resource.setrlimit``) and a time cap (``signal.alarm`` per case: a named
pipe that blocks is a failure, not a hung suite). A case fails on a traceback, on more than
one line of error, on an exit code other than the one expected, on a hang, on a peak resident
memory above 1 GB, or on a write through a planted link (the link's target is compared
byte for byte with what it held before).

Truths stated independently of the code under test: a FIFO, ``/dev/zero`` or ``/dev/urandom``
is not a file a run or an export consists of; a crafted ``optimizer.pt`` of a few KB cannot
be a model's optimizer state of another shape, flag or step; a seed is >= 0; a link planted at
a temporary or final name keeps its target's bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from analysis.training.trainer import train

ROOT = Path(__file__).resolve().parent.parent
GB = 1 << 30
TASK = "copy_unique"
TINY = {"n_layers": 1, "d_model": 16, "d_head": 8, "n_heads": 2, "d_mlp": 16, "batch_size": 4,
        "train_max_len": 3, "eval_samples": 4, "eval_stride": 2, "warmup_steps": 1,
        "log_every": 1, "probe_every": 0, "checkpoint_every": 4}
STEPS = 6
KW = dict(seed=1, steps=STEPS, config_overrides=TINY, progress=False, verbose=False)
SETS = [x for k, v in TINY.items() for x in ("--set", f"{k}={json.dumps(v)}")]

#: Runs each case (a list of rasp arguments) in one process under the caps and prints one JSON
#: line per case: exit code, stderr, and whether it raised out of main (a traceback).
DRIVER = r"""
import contextlib, io, json, resource, signal, sys, traceback
cases = json.loads(sys.stdin.read())
from rasp_cli.main import main
class Hang(BaseException):
    pass
def alarm(*a):
    raise Hang()
signal.signal(signal.SIGALRM, alarm)
for argv in cases:
    err, out = io.StringIO(), io.StringIO()
    rc, tb = None, None
    signal.alarm(60)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            rc = main(argv)
    except SystemExit as e:
        rc = e.code
    except Hang:
        tb = "HANG"
    except BaseException:
        tb = traceback.format_exc()[-1500:]
    signal.alarm(0)
    print(json.dumps({"argv": argv, "rc": rc, "err": err.getvalue()[-2000:], "tb": tb}),
          flush=True)
# VmHWM: this process's own peak (ru_maxrss keeps the forking parent's size across exec:
# inside a long test session that parent is the pytest process, ~1.8 GB by the end)
try:
    with open("/proc/self/status") as f:
        peak = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
except (OSError, StopIteration, ValueError):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"maxrss_kb": peak}), flush=True)
"""


def _capped():
    resource_cap = 2 * GB
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (resource_cap, resource_cap))


def run_cases(cases: list[list[str]], cwd: Path, timeout: int = 600) -> list[dict]:
    """The results of ``cases``, run in one capped subprocess; asserts the memory cap."""
    p = subprocess.run([sys.executable, "-c", DRIVER], input=json.dumps(cases), cwd=cwd,
                       capture_output=True, text=True, timeout=timeout, preexec_fn=_capped,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    assert lines and "maxrss_kb" in lines[-1], p.stderr[-2000:]
    assert lines[-1]["maxrss_kb"] * 1024 < GB, f"peak memory {lines[-1]['maxrss_kb'] // 1024} MB"
    return lines[:-1]


def assert_one_line(r: dict, rc: int = 2, words: str | None = None) -> None:
    assert r["tb"] is None, (r["argv"], r["tb"])
    assert r["rc"] == rc, (r["argv"], r["rc"], r["err"])
    err = r["err"].strip()
    assert "Traceback" not in err and err.count("\n") <= 2, (r["argv"], err)  # usage + 1 line
    if words:
        assert words.lower() in err.lower(), (r["argv"], err)


def victim(tmp_path: Path) -> tuple[Path, bytes]:
    v = tmp_path / "victim.txt"
    data = b"precious bytes that no writer may touch\n"
    v.write_bytes(data)
    return v, data


# --------------------------------------------------------------------------------------------
# fixtures: a finished run, an unfinished one, a compiled export
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("fin") / "run"
    train(TASK, "nope", out_dir=d, **KW)
    return d


@pytest.fixture(scope="module")
def partial(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("part") / "run"
    train(TASK, "nope", out_dir=d, stop_after=5, **KW)          # the checkpoint of step 4
    return d


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    import compiler
    from rasp.repl.session import run_source
    env = run_source("x = tokens == \"a\";")
    d = tmp_path_factory.mktemp("exp") / "c"
    compiler.compile_program(env["x"], ["a", "b"], 3).save(d)
    return d


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


def _resume(d: Path) -> list[str]:
    return ["train", TASK, "--pe", "nope", "--seed", "1", "--steps", str(STEPS), "-o", str(d),
            "--no-progress"] + SETS


# --------------------------------------------------------------------------------------------
# readers: FIFOs and devices never read, never block
# --------------------------------------------------------------------------------------------

def test_fifos_and_devices_are_refused_without_blocking(tmp_path, finished, export):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    cases, expect = [], []

    def case(argv, rc=2, words=None):
        cases.append(argv)
        expect.append((rc, words))
    case(["repl", str(fifo)], 2, "named pipe")
    case(["search", "--examples", str(fifo)], 2, "named pipe")
    case(["sweep", TASK, "--pe", "nope", "--grid-file", str(fifo), "-o", str(tmp_path / "sw")],
         2, "named pipe")
    case(["sweep", TASK, "--pe", "nope", "--grid-file", "/dev/zero", "-o", str(tmp_path / "sw")],
         2, "/dev")
    for name, target in (("DONE", fifo), ("config.json", "/dev/zero"),
                         ("accuracy.json", "/dev/urandom"), ("model.safetensors", "/dev/zero")):
        d = _copy(finished, tmp_path / f"run-{name}")
        (d / name).unlink()
        if target == fifo:
            os.mkfifo(d / name)
        else:
            os.symlink(target, d / name)
        case(["probe", str(d), "--no-compile"], 2, name)
    for name, target in (("model.json", "/dev/zero"), ("model.safetensors", fifo)):
        d = _copy(export, tmp_path / f"exp-{name}")
        (d / name).unlink()
        os.symlink(target, d / name)
        case(["probe", str(d), "--task", TASK, "--no-compile"], 2, name)
    tl = tmp_path / "tl"
    tl.mkdir()
    os.symlink("/dev/urandom", tl / "tl_config.json")
    os.symlink("/dev/zero", tl / "tl_model.safetensors")
    case(["probe", str(tl), "--task", TASK, "--no-compile"], 2, "tl_config.json")
    for r, (rc, words) in zip(run_cases(cases, tmp_path), expect):
        assert_one_line(r, rc, words)


def test_checkpoint_files_as_fifos_and_devices_are_refused(tmp_path, partial):
    cases = []
    for name in ("checkpoint/optimizer.pt", "checkpoint/state.json",
                 "checkpoint/model.safetensors"):
        d = _copy(partial, tmp_path / name.replace("/", "-"))
        (d / name).unlink()
        if name.endswith(".json"):
            os.mkfifo(d / name)
        else:
            os.symlink("/dev/zero", d / name)
        cases.append(_resume(d))
    for r, name in zip(run_cases(cases, tmp_path), ("optimizer.pt", "state.json",
                                                    "model.safetensors")):
        assert_one_line(r, 2, name)


# --------------------------------------------------------------------------------------------
# readers: damaged exports, sizes from a file, weights of the wrong dtype
# --------------------------------------------------------------------------------------------

def test_damaged_compiled_and_transformer_lens_exports_are_one_line(tmp_path, export):
    cases = []

    def variant(name, edit):
        d = _copy(export, tmp_path / name)
        edit(d)
        cases.append(["probe", str(d), "--task", TASK, "--no-compile"])

    def meta(d):
        return json.loads((d / "model.json").read_text())
    variant("list", lambda d: (d / "model.json").write_text("[1, 2, 3]"))
    variant("novocab", lambda d: (d / "model.json").write_text(
        json.dumps({k: v for k, v in meta(d).items() if k != "vocab"})))
    variant("truncated", lambda d: (d / "model.safetensors").write_bytes(
        (d / "model.safetensors").read_bytes()[:-100]))

    def tl_only(d, cfg_edit):
        for f in ("model.json", "model.safetensors"):
            (d / f).unlink()
        cfg = json.loads((d / "tl_config.json").read_text())
        cfg_edit(cfg)
        (d / "tl_config.json").write_text(json.dumps(cfg))
    variant("osystem", lambda d: tl_only(d, lambda c: c.update(act_fn="os.system")))
    variant("dtype", lambda d: tl_only(d, lambda c: c.update(dtype="load")))
    variant("layers", lambda d: tl_only(d, lambda c: c.update(n_layers=100_000)))
    variant("ctx", lambda d: tl_only(d, lambda c: c.update(n_ctx=10 ** 6)))
    variant("tltrunc", lambda d: (tl_only(d, lambda c: None), (d / "tl_model.safetensors")
                                  .write_bytes((d / "tl_model.safetensors").read_bytes()[:200])))
    for r in run_cases(cases, tmp_path):
        name = Path(r["argv"][1]).name
        assert_one_line(r, 2, {"osystem": "act_fn", "dtype": "dtype", "layers": "budget",
                               "ctx": "budget", "novocab": "vocab"}.get(name))


def test_a_transformer_lens_config_of_100000_layers_is_refused_before_allocation(tmp_path,
                                                                                 export):
    from compiler.export import TransformerLensExportError, load_transformer_lens
    d = _copy(export, tmp_path / "tl")
    cfg = json.loads((d / "tl_config.json").read_text())
    cfg["n_layers"] = 100_000
    (d / "tl_config.json").write_text(json.dumps(cfg))
    with pytest.raises(TransformerLensExportError, match="model budget"):
        load_transformer_lens(d)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_integer_weights_are_not_a_finished_run(tmp_path, finished, dtype):
    d = _copy(finished, tmp_path / "run")
    from safetensors import safe_open
    with safe_open(str(d / "model.safetensors"), "pt") as f:
        meta = f.metadata()
    w = {k: v.to(dtype) for k, v in load_file(str(d / "model.safetensors")).items()}
    save_file(w, str(d / "model.safetensors"), metadata=meta)
    r1, r2 = run_cases([_resume(d), ["probe", str(d), "--no-compile"]], tmp_path)
    assert_one_line(r1, 2, "floating point")                 # never "reused"
    assert_one_line(r2, 2, "floating point")


# --------------------------------------------------------------------------------------------
# crafted optimizer state and checkpoint counters
# --------------------------------------------------------------------------------------------

def _blob(d: Path) -> dict:
    return torch.load(d / "checkpoint" / "optimizer.pt", weights_only=True)


def _craft(d: Path, edit) -> None:
    blob = _blob(d)
    edit(blob)
    torch.save(blob, d / "checkpoint" / "optimizer.pt")


def _first(blob) -> dict:
    return blob["optimizer"]["state"][0]


OPTIMIZER_CASES = {
    "wrong shape": lambda b: _first(b).update(exp_avg=torch.zeros(3, 3)),
    # a stride-0 view: 4 bytes on disk, 4 GB once torch copies it to the parameter's dtype
    "expanded huge": lambda b: _first(b).update(
        exp_avg=torch.zeros(1, dtype=torch.float64).expand(10 ** 9)),
    "int moments": lambda b: _first(b).update(
        exp_avg=torch.zeros_like(_first(b)["exp_avg"], dtype=torch.int64)),
    "nan moments": lambda b: _first(b)["exp_avg_sq"].fill_(float("nan")),
    "step 1e30": lambda b: _first(b).update(step=torch.tensor(1e30)),
    "maximize": lambda b: b["optimizer"]["param_groups"][0].update(maximize=True),
    "other betas": lambda b: b["optimizer"]["param_groups"][0].update(betas=(0.5, 0.5)),
    "other weight decay": lambda b: b["optimizer"]["param_groups"][0].update(weight_decay=5.0),
    "extra group": lambda b: b["optimizer"]["param_groups"].append(
        dict(b["optimizer"]["param_groups"][0])),
    "rng garbage": lambda b: b.update(torch_rng=torch.zeros(3)),
}


def test_crafted_optimizer_state_is_refused_before_loading(tmp_path, partial):
    cases, names = [], sorted(OPTIMIZER_CASES)
    for i, name in enumerate(names):
        d = _copy(partial, tmp_path / f"c{i}")
        _craft(d, OPTIMIZER_CASES[name])
        cases.append(_resume(d))
    # a deflated zip member: a few KB on disk, far more once inflated
    d = _copy(partial, tmp_path / "deflate")
    pt = d / "checkpoint" / "optimizer.pt"
    with zipfile.ZipFile(pt) as z:
        members = [(i, z.read(i)) for i in z.infolist()]
    with zipfile.ZipFile(pt, "w", zipfile.ZIP_DEFLATED) as z:
        for info, data in members:
            z.writestr(info.filename, data + b"\0" * (1 << 24) if info.filename.endswith("/data/0")
                       else data, compress_type=zipfile.ZIP_DEFLATED)
    assert pt.stat().st_size < 1 << 20
    cases.append(_resume(d))
    for r, name in zip(run_cases(cases, tmp_path), names + ["deflate"]):
        assert_one_line(r, 2, "optimizer.pt")


@pytest.mark.parametrize("key, value", [("tokens_seen", 10 ** 30), ("elapsed", 1.7e308),
                                        ("step", 10 ** 30)])
def test_checkpoint_counters_out_of_range_are_refused(tmp_path, partial, key, value):
    from analysis.training.runs import RunDirError
    d = _copy(partial, tmp_path / "run")
    p = d / "checkpoint" / "state.json"
    state = json.loads(p.read_text())
    state[key] = value
    p.write_text(json.dumps(state))
    with pytest.raises(RunDirError, match="state.json"):
        train(TASK, "nope", out_dir=d, **KW)


def test_the_genuine_checkpoint_still_resumes(tmp_path, partial):
    d = _copy(partial, tmp_path / "run")
    assert train(TASK, "nope", out_dir=d, **KW).finished


# --------------------------------------------------------------------------------------------
# writers: planted links are replaced, never written through
# --------------------------------------------------------------------------------------------

def test_compile_output_never_writes_through_planted_links(tmp_path):
    v, data = victim(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    for name in (".model.json.tmp", "tl_config.json.tmp", "model.json", "tl_config.json",
                 "model.safetensors", "tl_model.safetensors"):
        os.symlink(v, out / name)
    prog = tmp_path / "p.rasp"
    prog.write_text('x = tokens == "a";\n')
    r, = run_cases([["compile", str(prog), "-n", "x", "--vocab", "a,b", "--max-len", "3",
                     "-o", str(out)]], tmp_path)
    assert r["tb"] is None and r["rc"] == 0, r
    assert v.read_bytes() == data
    for name in ("model.json", "tl_config.json", "model.safetensors"):
        assert not (out / name).is_symlink()


def test_atomic_writers_replace_a_link_at_the_final_name(tmp_path):
    from analysis.training.runs import atomic_json, atomic_write_text
    from rasp_model.files import atomic_write_bytes
    v, data = victim(tmp_path)
    for i, write in enumerate((lambda p: atomic_json(p, {"a": 1}),
                               lambda p: atomic_write_text(p, "x", mode=0o644),
                               lambda p: atomic_write_bytes(p, b"y"))):
        p = tmp_path / f"f{i}"
        os.symlink(v, p)
        write(p)
        assert not p.is_symlink() and v.read_bytes() == data
    modes = {oct(os.stat(tmp_path / f"f{i}").st_mode & 0o777) for i in (0, 2)}
    assert len(modes) == 1                                    # one default mode


def test_metrics_jsonl_planted_as_a_link_is_refused_on_resume(tmp_path, partial):
    v, _ = victim(tmp_path)
    d = _copy(partial, tmp_path / "run")
    shutil.copy(d / "metrics.jsonl", v)
    data = v.read_bytes()
    (d / "metrics.jsonl").unlink()
    os.symlink(v, d / "metrics.jsonl")
    r, = run_cases([_resume(d)], tmp_path)
    assert_one_line(r, 2, "symbolic link")
    assert v.read_bytes() == data


# --------------------------------------------------------------------------------------------
# numbers: checked before a run directory, Ray or a thread pool
# --------------------------------------------------------------------------------------------

def test_bad_numbers_are_usage_errors_before_any_work(tmp_path):
    prog = tmp_path / "p.rasp"
    prog.write_text('x = tokens == "a";\n')
    out = tmp_path / "out"
    train_ = ["train", TASK, "--pe", "nope", "-o", str(out), "--no-progress"]
    cases = {
        "compile seed": (["compile", str(prog), "-n", "x", "--vocab", "a,b", "--max-len", "3",
                          "--verify", "2", "--seed", "-1"], "--seed"),
        "verify seed": (["verify", TASK, "--seed", "-1", "--max-length", "2"], "--seed"),
        "search length 0": (["search", TASK, "--max-length", "0"], "--max-length"),
        "threads": (train_ + ["--threads", "1000000"], "--threads"),
        "batch size": (train_ + ["--set", "batch_size=1e26"], "batch_size"),
        "batch size int": (train_ + ["--set", "batch_size=" + "9" * 26], "batch_size"),
        "lr 1e308": (train_ + ["--set", "lr=1e308"], "lr"),
        "weight decay": (train_ + ["--set", "weight_decay=1e308"], "weight_decay"),
        "eval samples": (train_ + ["--set", "eval_samples=1000000000"], "eval_samples"),
        "rotary base": (["train", TASK, "--pe", "rope", "-o", str(out), "--set",
                         "rotary_base=1e308"], "rotary_base"),
        "train seed": (train_ + ["--seed", "-3"], "--seed"),
        "gpus nan": (["sweep", TASK, "--pe", "nope", "--grid-file", str(prog),
                      "--gpus-per-run", "nan", "-o", str(out)], "--gpus-per-run"),
        "grid gpus inf": (["train", "--grid", TASK, "--pe", "nope", "--gpus-per-run", "inf",
                           "-o", str(out)], "--gpus-per-run"),
        "stack": (["train", "--grid", TASK, "--pe", "nope", "--stack", "0", "-o", str(out)],
                  "--stack"),
    }
    names = sorted(cases)
    for r, name in zip(run_cases([cases[n][0] for n in names], tmp_path), names):
        assert_one_line(r, 2, cases[name][1])
    assert not out.exists()                                   # no half-made run directory


def test_a_start_that_never_trained_does_not_block_the_corrected_command(tmp_path):
    d = tmp_path / "run"
    # config.json of another configuration (2 steps) and nothing else: a crash at start-up
    train(TASK, "nope", out_dir=d, **{**KW, "steps": 2})
    for f in d.iterdir():
        if f.name not in ("config.json", ".lock"):
            shutil.rmtree(f) if f.is_dir() else f.unlink()
    res = train(TASK, "nope", out_dir=d, **KW)                # another step count: starts
    assert res.finished and res.steps == STEPS


def test_ctrl_c_during_start_up_is_one_line(tmp_path):
    import signal
    import time
    for delay in (0.6, 2.0):        # after the interpreter itself started (~0.1 s)
        p = subprocess.Popen([sys.executable, "-m", "rasp_cli.main", "train", TASK, "--pe",
                              "nope", "-o", str(tmp_path / "r"), "--no-progress"], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
        assert "Traceback" not in err, err[-1500:]
        assert p.returncode == 130 and err.strip() == "interrupted", (p.returncode, err[-500:])


# --------------------------------------------------------------------------------------------
# the one reader, directly
# --------------------------------------------------------------------------------------------

def test_the_reader_refuses_virtual_files_devices_and_oversized_files(tmp_path):
    from rasp_model.files import FileReadError, read_bytes, read_json
    for path in ("/proc/self/environ", "/dev/zero", "/sys/kernel/mm"):
        with pytest.raises(FileReadError, match="regular file"):
            read_bytes(path, "a file", 1 << 20)
    os.symlink("/dev/urandom", tmp_path / "link.json")
    with pytest.raises(FileReadError, match="regular file"):
        read_json(tmp_path / "link.json", "a run file")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2048)
    with pytest.raises(FileReadError, match="larger than 1 KiB"):
        read_bytes(big, "a run file", 1024)
    for text in ("[1e400]", "[NaN]", "[" * 100_000 + "]" * 100_000):
        big.write_text(text)
        with pytest.raises(FileReadError, match="corrupt"):
            read_json(big, "a run file")
    with pytest.raises(FileNotFoundError):
        read_bytes(tmp_path / "missing", "a file", 10)


def test_the_safetensors_reader_checks_the_header_before_building_tensors(tmp_path):
    from safetensors.torch import save
    from rasp_model.files import FileReadError, read_safetensors
    p = tmp_path / "w.safetensors"
    good = save({"a": torch.ones(4, 4), "b": torch.zeros(3)})
    p.write_bytes(good)
    tensors, _ = read_safetensors(p, "weights", shapes={"a": (4, 4), "b": (3,)})
    assert torch.equal(tensors["a"], torch.ones(4, 4))
    for data, says in ((good[:-8], "truncated"), (good[:5], "truncated"),
                       (save({"a": torch.ones(2, dtype=torch.int64)}), "floating point"),
                       ((10 ** 12).to_bytes(8, "little") + good[8:], "header length")):
        p.write_bytes(data)
        with pytest.raises(FileReadError, match=says):
            read_safetensors(p, "weights")
    p.write_bytes(good)
    with pytest.raises(FileReadError, match="shape"):
        read_safetensors(p, "weights", shapes={"a": (2, 8), "b": (3,)})
