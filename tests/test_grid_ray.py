"""The grid runner on a real Ray cluster (analysis.training.grid, issue 11's must-show).

A Ray head node is started on 127.0.0.1 with ``ray start --head --block`` in its own session and
a temporary directory; a 4-run quick grid runs against it through the CLI (``--address``); one
worker process is SIGKILLed while it trains; after a rerun every run is finished and its weights
and accuracy are bitwise those of the same grid trained in-process (``--serial``). The cluster's
processes (all in the session of ``ray start``) are killed at the end.
"""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[1]
RAY = Path(sys.executable).with_name("ray")
TASKS, PES = "count,parity", "nope,alibi"
# tiny runs: 80 quick-preset steps, a checkpoint every 10 steps (so a kill loses little)
SETTINGS = ["--set", "steps=80", "--set", "checkpoint_every=10", "--set", "log_every=10",
            "--set", "eval_samples=4", "--set", "probe_every=0"]


def _env(home: Path) -> dict:
    # the CLI imports matplotlib (analysis.probing.alignment); with HOME moved it would build a fresh
    # font cache and print matplotlib's one-time notice on stderr: point it at this process's
    # cache, built here once
    import matplotlib
    import matplotlib.font_manager  # noqa: F401  (builds the font cache if missing)
    env = dict(os.environ)
    env.update(PYTHONPATH=str(ROOT), HOME=str(home), RAY_USAGE_STATS_ENABLED="0",
               MPLCONFIGDIR=matplotlib.get_cachedir(),
               # keep every Ray address on the loopback interface (Ray otherwise rewrites
               # 127.0.0.1 to the machine's outward address)
               RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    env.pop("RAY_ADDRESS", None)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _session_pids(sid: int) -> list[int]:
    """PIDs of the processes in session ``sid`` (the head node and its workers)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[3]) == sid:           # state ppid pgrp session ...
            out.append(int(d.name))
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _rasp(args, env, cwd, **kw):
    return subprocess.Popen([sys.executable, "-m", "rasp_cli.main", *args], env=env, cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


@pytest.fixture
def ray_head():
    """A Ray head node on 127.0.0.1 in a temporary directory; yields (address, env, sid)."""
    tmp = Path(tempfile.mkdtemp(prefix="rr-", dir="/tmp"))     # short: Ray's socket paths
    env = _env(tmp)
    with head_node(tmp, env) as (address, pid):
        yield address, env, pid, tmp


@contextlib.contextmanager
def head_node(tmp: Path, env: dict):
    """``ray start --head --block`` on 127.0.0.1 in its own session, HOME and temporary
    directory ``tmp`` (removed after); yields (address, the session's PID); every process of
    the session is killed at the end."""
    port = _free_port()
    head = subprocess.Popen(
        [str(RAY), "start", "--head", "--port", str(port), "--node-ip-address", "127.0.0.1",
         "--temp-dir", str(tmp / "ray"), "--num-cpus", "2", "--include-dashboard", "false",
         "--disable-usage-stats", "--block"],
        env=env, cwd=tmp, stdin=subprocess.DEVNULL, stdout=open(tmp / "head.log", "w"),
        stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if head.poll() is not None or time.time() > deadline:
                    pytest.fail("ray start failed:\n" + (tmp / "head.log").read_text()[-3000:])
                time.sleep(0.5)
        yield f"127.0.0.1:{port}", head.pid
    finally:
        for pid in _session_pids(head.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        head.wait(timeout=30)
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


def test_cluster_grid_survives_a_killed_worker_and_matches_a_local_run(ray_head, tmp_path):
    address, env, sid, tmp = ray_head
    runs = tmp_path / "cluster_runs"
    args = ["train", "--grid", TASKS, "--pe", PES, "--preset", "quick", *SETTINGS,
            "-o", str(runs), "--no-progress", "--address", address]
    first = _rasp(args, env, tmp_path)
    killed = None
    deadline = time.time() + 300
    while first.poll() is None and time.time() < deadline:
        running = [c.parent for c in runs.glob("*/*/*/config.json")
                   if not (c.parent / "DONE").exists()]
        if killed is None and running and all((d / "checkpoint").exists() for d in running):
            busy = [p for p in _session_pids(sid) if _cmdline(p).startswith("ray::_train_job")]
            if busy:
                os.kill(busy[0], signal.SIGKILL)          # a worker dies mid-run
                killed = busy[0]
        time.sleep(0.2)
    out, err = first.communicate(timeout=60)
    assert killed is not None, f"no worker was caught training:\n{err[-3000:]}"
    assert "ray://" + address in err, err[-3000:]

    again = _rasp(args, env, tmp_path)                     # the rerun finishes what is missing
    out2, err2 = again.communicate(timeout=300)
    assert again.returncode == 0, err2[-3000:]
    dirs = sorted(p.parent for p in runs.glob("*/*/*/DONE"))
    assert len(dirs) == 4, err2[-3000:]
    # the killed run resumed from its checkpoint (retried by Ray, or by the rerun)
    assert "resumed from a checkpoint" in err + err2, err + err2

    local = tmp_path / "local_runs"                        # the same grid, in-process
    ref = _rasp(["train", "--grid", TASKS, "--pe", PES, "--preset", "quick", *SETTINGS,
                 "-o", str(local), "--no-progress", "--serial"], env, tmp_path)
    _, err3 = ref.communicate(timeout=300)
    assert ref.returncode == 0, err3[-3000:]
    for d in dirs:
        twin = local / d.relative_to(runs)
        a, b = load_file(d / "model.safetensors"), load_file(twin / "model.safetensors")
        assert a.keys() == b.keys()
        for k in a:
            assert (a[k] == b[k]).all(), f"{d.relative_to(runs)}: {k} differs"
        assert json.loads((d / "accuracy.json").read_text()) == \
            json.loads((twin / "accuracy.json").read_text())

    # a run that raises inside a worker: reported with its error and run directory, the other
    # run of the grid finishes, the command exits non-zero at the end
    bad = tmp_path / "bad_runs"
    broken = bad / "count" / "nope" / "seed0-quick"
    broken.mkdir(parents=True)
    (broken / "config.json").write_text("{not json")
    p = _rasp(["train", "--grid", "count,parity", "--pe", "nope", "--preset", "quick",
               *SETTINGS, "-o", str(bad), "--no-progress", "--address", address], env, tmp_path)
    _, err4 = p.communicate(timeout=300)
    assert p.returncode == 1, err4[-3000:]
    failed = [l for l in err4.splitlines() if "FAILED" in l]
    assert len(failed) == 1 and "count/nope/seed0" in failed[0] and str(broken) in failed[0]
    assert "config.json" in failed[0], failed[0]
    assert "Traceback" not in err4
    assert (bad / "parity" / "nope" / "seed0-quick" / "DONE").exists()


def test_unreachable_address_fails_fast_with_a_clear_message(tmp_path):
    port = _free_port()                       # nothing listens there
    t0 = time.time()
    p = _rasp(["train", "--grid", "count", "--pe", "nope", "--preset", "quick", "-o",
               str(tmp_path), "--no-progress", "--address", f"127.0.0.1:{port}"],
              _env(tmp_path), tmp_path)
    out, err = p.communicate(timeout=60)
    assert time.time() - t0 < 30
    assert p.returncode == 2
    assert f"cannot reach a Ray cluster at 127.0.0.1:{port}" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("address", ["nohostport", "ray://127.0.0.1:10001", "127.0.0.1:0"])
def test_malformed_address_is_a_usage_error(address, tmp_path, capsys):
    from rasp_cli.main import main
    rc = main(["train", "--grid", "count", "--pe", "nope", "--preset", "quick", "-o",
               str(tmp_path), "--no-progress", "--address", address])
    assert rc == 2
    assert "--address" in capsys.readouterr().err


_DRIVER = r"""
import os, signal, sys
from analysis.training.grid import connect, ray_token_path
connect(num_cpus=1)
import ray

@ray.remote
def pid():
    return os.getpid()

@ray.remote
def niceness():
    return os.nice(0)

node = ray._private.worker._global_node
pids = [p.process.pid for procs in node.all_processes.values() for p in procs]
pids.append(ray.get(pid.remote()))
import time, psutil
deadline = time.time() + 30          # the agents start after ray.init returns
while time.time() < deadline and not any(
        "Agent" in " ".join(c.cmdline()) for c in psutil.Process().children(recursive=True)):
    time.sleep(0.2)
pids += [c.pid for c in psutil.Process().children(recursive=True)]
print("PIDS", *pids, flush=True)
print("TOKEN", oct(ray_token_path().stat().st_mode & 0o777), flush=True)
print("NICE", os.nice(0), ray.get(niceness.remote()), flush=True)
if sys.argv[1] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("how", ["exit", "kill"])
def test_a_local_instance_ends_with_its_driver_and_keeps_its_token_private(how, tmp_path):
    """No Ray process (GCS, raylet, workers, and the dashboard and runtime-env agents, which
    Ray does not tie to the driver: every descendant of the driver) outlives the driver that
    started the local instance by more than 30 s, whether it exits or is SIGKILLed; the token is mode 0600 (Ray writes
    0644); the workers run at the driver's priority (Ray's default niceness 15 let any busy
    process on a shared machine starve the training runs)."""
    token = tmp_path / "auth_token"
    env = _env(tmp_path)
    env.pop("RAY_ADDRESS", None)
    env["RAY_AUTH_TOKEN_PATH"] = str(token)
    token.write_text("0" * 64)
    token.chmod(0o644)
    out = subprocess.run([sys.executable, "-c", _DRIVER, how], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=180)
    lines = dict(l.split(" ", 1) for l in out.stdout.splitlines() if " " in l)
    assert "PIDS" in lines, out.stderr[-2000:]
    assert lines["TOKEN"] == "0o600"
    driver_nice, worker_nice = lines["NICE"].split()
    assert worker_nice == driver_nice
    pids = [int(p) for p in lines["PIDS"].split()]
    assert len(pids) >= 3                               # gcs_server, raylet, a worker at least
    deadline = time.time() + 30
    alive = pids
    while alive and time.time() < deadline:
        time.sleep(0.5)
        alive = [p for p in pids if _alive(p)]
    assert not alive, f"Ray processes outlived the driver ({how}): {alive}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:                                                # a zombie is gone for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False
