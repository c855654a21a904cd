"""Progress bars are drawn on a terminal and never into a file, a pipe or a CI log
(rasp.repl.progress, the one owner of that decision)."""

import fcntl
import io
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from rasp.repl.progress import progress_bar, shows_progress, working

ROOT = Path(__file__).resolve().parents[1]
RASP = [sys.executable, "-m", "rasp_cli.main"]


def test_the_decision():
    assert not shows_progress(True, io.StringIO())              # a file-like object, no TTY
    assert not shows_progress(False, io.StringIO())
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as tty:
            assert shows_progress(True, tty)
            assert not shows_progress(False, tty)               # --no-progress wins
    finally:
        os.close(master)
        os.close(slave)
    closed = io.StringIO()
    closed.close()
    assert not shows_progress(True, closed)


def test_a_bar_into_a_file_writes_nothing():
    out = io.StringIO()
    assert list(progress_bar(range(50), desc="x", file=out)) == list(range(50))
    assert out.getvalue() == ""
    with pytest.raises(TypeError, match="decides 'disable'"):
        progress_bar(range(3), disable=False)


def test_long_work_into_a_file_writes_log_lines_with_k_of_n_and_time_left(monkeypatch):
    """No bar in a log, but a whole line at most every RASP_PROGRESS_EVERY seconds with
    ``k/N`` and the time left, and a last line at the end; short work writes nothing."""
    import time
    monkeypatch.setenv("RASP_PROGRESS_EVERY", "0.2")
    out = io.StringIO()
    bar = progress_bar(total=8, desc="grid", unit="run", file=out, leave=False)
    for _ in range(8):
        time.sleep(0.1)
        bar.update(1)
    bar.close()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and len(lines) >= 3, lines
    assert all(re.fullmatch(r"grid: \d/8 \[\d\d:\d\d<\d\d:\d\d, .*run/s\]", x) for x in lines)
    assert lines[-1].startswith("grid: 8/8")
    counts = [int(x.split(": ")[1].split("/")[0]) for x in lines]
    assert counts == sorted(counts) and lines[-1] != lines[-2]   # the last line not twice
    quick = io.StringIO()
    list(progress_bar(range(5), desc="x", file=quick))
    assert quick.getvalue() == ""
    monkeypatch.setenv("RASP_PROGRESS_EVERY", "off")
    off = io.StringIO()
    b = progress_bar(total=3, desc="y", file=off)
    time.sleep(0.3)
    b.update(3)
    b.close()
    assert off.getvalue() == ""


class _Timed(io.StringIO):
    """A log file that notes when each line arrived (seconds since it was made)."""

    def __init__(self):
        super().__init__()
        self.t0, self.times = time.monotonic(), []

    def write(self, text):
        self.times += [time.monotonic() - self.t0] * text.count("\n")
        return super().write(text)


def _gaps(times: list[float], end: float) -> list[float]:
    """The silences of a log: start -> first line, between lines, last line -> ``end``."""
    marks = [0.0, *times, end]
    return [b - a for a, b in zip(marks, marks[1:])]


def test_a_log_line_comes_every_interval_while_nothing_progresses(monkeypatch):
    """Time-based, not event-based: a bar that is not updated for several intervals (a worker
    training, a search level) still writes a line every interval, with what it is doing; so
    does :func:`working` around one blocking call."""
    monkeypatch.setenv("RASP_PROGRESS_EVERY", "0.2")
    out = _Timed()
    bar = progress_bar(total=3, desc="grid", unit="run", file=out)
    bar.set_postfix_str("training count/nope/seed0", refresh=False)
    time.sleep(1.3)                                  # the slow job: no update at all
    end = time.monotonic() - out.t0
    bar.update(3)
    bar.close()
    lines = out.getvalue().splitlines()
    assert len(lines) >= 4, lines
    assert re.fullmatch(r"grid: 0/3 \[00:0\d<\?, \?run/s, training count/nope/seed0\]", lines[0])
    assert max(_gaps(out.times[:-1], end)) < 0.2 + 1.0, out.times   # 1 s of slack for load
    searching = _Timed()
    with working("search sort_unique", file=searching) as b:
        time.sleep(0.5)
        b.set_postfix_str("size 3", refresh=False)
        time.sleep(0.5)
    text = searching.getvalue()
    assert re.search(r"^search sort_unique: working \[00:00\]$", text, re.M), text
    assert re.search(r"^search sort_unique: working \[00:0\d, size 3\]$", text, re.M), text
    quiet = io.StringIO()
    with working("quick", file=quiet):
        pass
    assert quiet.getvalue() == ""                    # shorter than the interval: nothing
    import gc
    lost = io.StringIO()
    bar = progress_bar(total=3, desc="lost", file=lost)   # never closed (an error path)
    time.sleep(0.5)
    del bar
    gc.collect()
    time.sleep(0.1)
    written = lost.getvalue()
    time.sleep(1.5)
    assert written and lost.getvalue() == written    # collected: its thread wrote no more


class _Ref:
    """A fake Ray object reference: when its task is done, and its job's size."""

    def __init__(self, done_at: float, n: int):
        self.done_at, self.n = done_at, n


class _FakeRay:
    """Just enough of ``ray`` for the grid's driver loop: one task per job that takes
    ``seconds`` to finish; ``wait`` refuses to block without a timeout (a driver that does
    cannot write its log lines or see Ctrl-C)."""

    def __init__(self, seconds: float):
        self.seconds, self.waits, self.cancelled = seconds, [], []
        self.exceptions = type(sys)("ray.exceptions")
        self.exceptions.RayError = RuntimeError

    def remote(self, **_resources):
        fake = self

        class Task:
            def remote(self, job, *args):
                return _Ref(time.monotonic() + fake.seconds, len(job))
        return lambda fn: Task()

    def cluster_resources(self):
        return {"CPU": 2.0}

    def wait(self, refs, num_returns=1, timeout=None):
        assert timeout is not None and timeout <= 5, "ray.wait without a (short) timeout"
        self.waits.append(timeout)
        left = min(r.done_at for r in refs) - time.monotonic()
        time.sleep(max(0.0, min(left, timeout)))
        ready = [r for r in refs if r.done_at <= time.monotonic()][:num_returns]
        return ready, [r for r in refs if r not in ready]

    def get(self, ref):
        return [{"status": "failed", "error": "fake job"}] * ref.n

    def cancel(self, ref, force=False):
        self.cancelled.append(ref)

    def shutdown(self):
        pass


def _fake_grid(monkeypatch, tmp_path, seconds: float):
    """``run_grid`` of one run against :class:`_FakeRay` (a job of ``seconds``), its log a
    :class:`_Timed` standard error."""
    from analysis.training import grid
    fake = _FakeRay(seconds)
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setitem(sys.modules, "ray.exceptions", fake.exceptions)
    monkeypatch.setattr(grid, "connect", lambda *a, **k: (False, "ray (fake)"))
    monkeypatch.setenv("RASP_PROGRESS_EVERY", "0.2")
    log = _Timed()
    monkeypatch.setattr(sys, "stderr", log)
    run = grid.GridRun("count", "nope", 0, preset="quick")
    return fake, log, lambda: grid.run_grid([run], runs_root=tmp_path, ray_num_cpus=2)


def test_the_grid_log_is_never_silent_while_a_run_trains(monkeypatch, tmp_path):
    """A run that takes 1.5 s (the fake job; real ones take minutes): the grid's log has a
    line ``grid: 0/1 [..., training count/nope/seed0]`` every interval meanwhile, and the
    driver waits for Ray with a timeout."""
    fake, log, go = _fake_grid(monkeypatch, tmp_path, seconds=1.5)
    go()
    lines = log.getvalue().splitlines()
    during = [ln for ln in lines if ln.startswith("grid: 0/1 [")]
    assert len(during) >= 3, lines
    assert "\r" not in log.getvalue()          # the run's summary line too (bar.write)
    assert any(ln.startswith("count/nope/seed0: FAILED: fake job") for ln in lines), lines
    assert all(ln.endswith("training count/nope/seed0]") for ln in during), during
    assert fake.waits and all(0 < w <= 1.0 for w in fake.waits)
    first = lines.index(during[0])
    assert max(_gaps(log.times[first:first + len(during)], 1.5)[1:]) < 0.2 + 1.0, log.times


def test_the_in_process_grid_log_is_never_silent_either(monkeypatch, tmp_path):
    """``serial=True`` (the run trains in the driver, here a fake one of 1.2 s): the same
    lines every interval."""
    from analysis.training import grid

    def slow_job(job, *args):
        time.sleep(1.2)
        return [{"status": "failed", "error": "fake job"} for _ in job]

    monkeypatch.setattr(grid, "_train_job", slow_job)
    monkeypatch.setenv("RASP_PROGRESS_EVERY", "0.2")
    log = _Timed()
    monkeypatch.setattr(sys, "stderr", log)
    grid.run_grid([grid.GridRun("count", "nope", 0, preset="quick")], runs_root=tmp_path,
                  serial=True)
    during = [ln for ln in log.getvalue().splitlines() if ln.startswith("grid: 0/1 [")]
    assert len(during) >= 3 and all(ln.endswith("training count/nope/seed0]")
                                    for ln in during), log.getvalue()


def test_ctrl_c_stops_the_grid_within_seconds_and_says_so(monkeypatch, tmp_path):
    """SIGINT while a (fake, 60 s) run trains: the grid stops within seconds, prints which run
    it stops, and cancels its Ray task."""
    import signal
    fake, log, go = _fake_grid(monkeypatch, tmp_path, seconds=60)
    sent, done = [], threading.Event()

    def ctrl_c():                         # once the driver waits for its run (+ 0.3 s)
        while not fake.waits and not done.wait(0.05):
            pass
        if not done.wait(0.3):
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)

    # Python's own SIGINT handler (KeyboardInterrupt), whatever an earlier test of the
    # process left installed (in the full suite the test once saw no KeyboardInterrupt)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Thread(target=ctrl_c, daemon=True)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            go()
        acted = time.monotonic()
    finally:
        done.set()
        timer.join(5)
        signal.signal(signal.SIGINT, before)
    assert sent and acted - sent[0] < 3.0, acted - sent[0]
    assert "grid: interrupted; stopping 1 run(s) (count/nope/seed0)" in log.getvalue()
    assert len(fake.cancelled) == 1


def test_the_reports_search_writes_lines_while_it_runs(monkeypatch):
    """``rasp demo`` / ``rasp report``'s program searches (a fake one of 1 s here) write
    ``[report] <task> / <pe>: searching: working [...]`` every interval."""
    from types import SimpleNamespace

    from analysis.reporting import report
    calls = []

    def slow_predict(task, pe, position_offsets=None, search=False, **budgets):
        calls.append(search)
        if search:
            time.sleep(1.5)
        return SimpleNamespace(prediction="unknown" if not search else "generalizes")

    monkeypatch.setattr(report.predict, "predict", slow_predict)
    monkeypatch.setenv("RASP_PROGRESS_EVERY", "0.2")
    log = _Timed()
    monkeypatch.setattr(sys, "stderr", log)
    opts = report.ReportOptions(search=True, search_budget=1000, crasp_budget=1000)
    p = report.report_prediction(SimpleNamespace(name="sort_unique"), "nope", None, opts)
    assert p.prediction == "generalizes" and calls == [False, True]
    lines = [ln for ln in log.getvalue().splitlines()
             if ln.startswith("[report] sort_unique / nope: searching: working [")]
    assert len(lines) >= 3, log.getvalue()


def _run(args, stderr_tty: bool, env_extra: dict | None = None) -> str:
    """Run ``rasp ARGS`` with standard error a pseudo-terminal or a pipe; its stderr text."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), **(env_extra or {}))
    if not stderr_tty:
        p = subprocess.run(RASP + args, cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0, p.stderr
        return p.stderr
    master, slave = pty.openpty()
    # a terminal of 100 columns (a new pseudo-terminal has 0: tqdm would draw an empty bar)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    chunks = []

    def drain():
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:                       # the child closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    p = subprocess.run(RASP + args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=slave,
                       timeout=120)
    os.close(slave)
    reader.join(10)
    os.close(master)
    assert p.returncode == 0
    return b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize("args, desc", [
    (["verify", "copy_unique", "--max-length", "12"], "verify copy_unique"),
])
def test_the_command_line_draws_bars_only_on_a_terminal(args, desc):
    on_tty = _run(args, stderr_tty=True)
    assert desc in on_tty and "\r" in on_tty                    # the bar, redrawn in place
    piped = _run(args, stderr_tty=False, env_extra={"RASP_PROGRESS_EVERY": "off"})
    assert desc not in piped and "\r" not in piped
    assert not re.search(r"\d+%\|", piped)
    logged = _run(args, stderr_tty=False, env_extra={"RASP_PROGRESS_EVERY": "0.001"})
    assert "\r" not in logged and not re.search(r"\d+%\|", logged)
    assert re.search(desc + r": \d+/\d+ \[", logged), logged[-500:]   # a log line, k/N


# tqdm uses that do not go through rasp.repl.progress yet (their owners' files); each passes
# disable=None, tqdm's own rule for its stream (standard error): off on a non-terminal.
NOT_YET = {"compiler/verification.py"}


def test_every_bar_decides_the_same_way():
    """Every tqdm bar in the toolkit is made by rasp.repl.progress.progress_bar, or (the files
    above) passes disable=None; a new bar that does neither fails here."""
    bad = []
    for path in sorted(ROOT.glob("*/**/*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.split("/")[0] in (".venv", "tests", "build") or rel == "rasp/repl/progress.py":
            continue
        text = path.read_text()
        calls = re.findall(r"\btqdm\((.*?)\)\n", text, flags=re.S)
        if not calls:
            continue
        if rel not in NOT_YET:
            bad.append(f"{rel}: calls tqdm directly (use rasp.repl.progress.progress_bar)")
        elif not all(re.search(r"disable=None\b", c) for c in calls):
            bad.append(f"{rel}: a tqdm bar without disable=None")
    assert not bad, bad
