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
from pathlib import Path

import pytest

from rasp.repl.progress import progress_bar, shows_progress

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
    assert counts == sorted(set(counts))                         # no line twice
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
