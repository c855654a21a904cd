"""The README's quick tour runs as written: its shell lines, its REPL session and its Python
lines are read from README.md itself (a README change is tested) and executed.

Two flags are added so that the tour stays under a minute (both documented in the commands'
``--help``, checked below): ``rasp train ... --steps 20`` (the README's quick preset, 20 steps)
and ``rasp report ... --no-train`` (the report of what exists instead of training its runs).
The shell lines run one after another in a fresh directory (the paths they read, such as
``rasp/stdlib/``, are linked into it), so ``runs/``, ``out/`` and ``reports/`` of the checkout are
never touched: what the tour writes (the paths git ignores, :data:`WRITTEN`) is never linked,
even where a line reads it back (``rasp probe runs/...`` reads the run the line before trained
here). A user's own runs (``rasp train copy_unique --pe nope --preset quick`` as the README says,
a run of 600 steps where the test trains 20) can therefore not break the test (issue 50).
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
#: command prefix -> flags the test adds (and why: see the module docstring)
ADDED = {("rasp", "train"): ["--steps", "20"], ("rasp", "report"): ["--no-train"]}
#: what the tour writes, never linked from the checkout (used where git cannot say what it
#: ignores, e.g. an unpacked archive)
WRITTEN = {"runs", "reports", "out"}


def _blocks(text: str) -> list[tuple[str, str, int]]:
    """Every fenced block of ``text``: (language, body, offset)."""
    return [(m.group(1), m.group(2), m.start())
            for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M)]


def tour() -> dict:
    """The tour's shell lines, REPL session and Python lines, from the README."""
    text = README.read_text()
    start = text.index("## A quick tour")
    end = text.index("\n## ", start + 1)
    blocks = [(lang, body) for lang, body, at in _blocks(text) if start < at < end]
    by_lang = {}
    for lang, body in blocks:
        by_lang.setdefault(lang, body)
    assert set(by_lang) >= {"sh", "text", "python"}, "the tour lost a block"
    lines = [ln for ln in by_lang["sh"].splitlines() if ln.strip()]
    return {"sh": lines, "repl": by_lang["text"], "python": by_lang["python"]}


def _command(line: str) -> list[str]:
    """A README line as argv (its comment dropped), with the test's added flags."""
    argv = shlex.split(line, comments=True)
    for prefix, flags in ADDED.items():
        if tuple(argv[:len(prefix)]) == prefix:
            argv = argv + flags
    return argv


def _written(first: str) -> bool:
    """Whether the top-level path ``first`` of the checkout is the tour's output, not its
    input: a path git ignores (``runs/``, ``reports/``, ``out/``; :data:`WRITTEN` without
    git)."""
    try:
        p = subprocess.run(["git", "check-ignore", "-q", first + "/"], cwd=ROOT, timeout=30,
                           capture_output=True)
    except (OSError, subprocess.TimeoutExpired):
        return first in WRITTEN
    return p.returncode == 0 if p.returncode in (0, 1) else first in WRITTEN


def _link_inputs(commands: list[list[str]], where: Path, root: Path = ROOT) -> None:
    """Link into ``where`` the top-level paths of the checkout ``root`` the commands read
    (``rasp/``, ``tasks/``), never what they write (:func:`_written`)."""
    for argv in commands:
        for arg in argv[1:]:
            first = arg.split("/")[0]
            if "/" in arg and (root / first).exists() and not _written(first) \
                    and not (where / first).exists():
                (where / first).symlink_to(root / first)


def _env() -> dict:
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
               RASP_TORCH_THREADS="1", PYTHONPATH=str(ROOT))
    env.pop("RAY_ADDRESS", None)
    return env


def test_the_added_flags_are_documented():
    for (prog, cmd), flags in ADDED.items():
        p = subprocess.run([str(BIN / prog), cmd, "--help"], capture_output=True, text=True,
                           timeout=60, env=_env())
        assert p.returncode == 0 and flags[0] in p.stdout, (cmd, flags[0])


def test_the_shell_lines_run_as_written(tmp_path):
    lines = tour()["sh"]
    commands = [_command(ln) for ln in lines]
    assert all(c and c[0] == "rasp" for c in commands), lines
    _link_inputs(commands, tmp_path)               # the paths the lines read, from the checkout
    env = _env()
    for line, argv in zip(lines, commands):
        if argv == ["rasp"]:
            continue                                   # the REPL: test_the_repl_session
        p = subprocess.run(["bash", "-c", shlex.join(argv)], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, f"{line}\n-> exit {p.returncode}\n{p.stdout[-2000:]}" \
                                  f"\n{p.stderr[-2000:]}"
        assert "Traceback" not in p.stderr, line
    # what the tour says it writes, written here (not through a link into the checkout)
    assert not any((tmp_path / w).is_symlink() for w in WRITTEN)
    assert (tmp_path / "out" / "hist" / "model.safetensors").exists()
    assert (tmp_path / "runs" / "copy_unique" / "nope" / "seed0-quick" / "DONE").exists()
    report = next(c for c in commands if c[:2] == ["rasp", "report"])
    out = report[report.index("-o") + 1]
    assert out.rstrip("/") != "reports"        # its own folder, not make demo's reports/
    assert (tmp_path / out / "report.html").exists()


def test_the_tour_reads_no_output_of_the_checkout(tmp_path):
    """The inputs are linked, the outputs not, even when the checkout holds them (a user's
    ``runs/``, ``reports/`` and ``out/``, in a stand-in checkout here): the ``rasp probe
    runs/...`` line reads the run the tour trained, not the user's."""
    assert all(_written(w) for w in WRITTEN) and not _written("rasp")
    checkout = tmp_path / "checkout"
    for d in ("rasp", "tasks", *WRITTEN):
        (checkout / d).mkdir(parents=True)
    where = tmp_path / "tour"
    where.mkdir()
    _link_inputs([_command(ln) for ln in tour()["sh"]], where, checkout)
    linked = {p.name for p in where.iterdir()}
    assert "rasp" in linked and "tasks" in linked, linked
    assert not linked & WRITTEN, linked


def test_the_quick_preset_has_one_time():
    """The README's tour and docs/training.md state the same time for ``rasp train
    copy_unique --pe nope --preset quick`` (measured once: 12.2 s wall on 2 cores, issue 50)."""
    line = "rasp train copy_unique --pe nope --preset quick"
    said = {}
    for doc in (README, ROOT / "docs" / "training.md"):
        hit = next(ln for ln in doc.read_text().splitlines() if ln.startswith(line))
        said[doc.name] = re.search(r"#.*?(~\d+(?:-\d+)? s)\b", hit).group(1)
    assert len(set(said.values())) == 1, said


def test_the_repl_session():
    """The `>>` lines typed into `rasp`; every other line of the session is printed, in
    order (compared without the leading and trailing blanks)."""
    session = tour()["repl"].splitlines()
    typed = [ln[3:] for ln in session if ln.startswith(">> ")]
    assert typed, "the README shows no REPL session"
    p = subprocess.run([str(BIN / "rasp")], input="\n".join(typed) + "\n", capture_output=True,
                       text=True, timeout=120, env=_env(), cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    got = [ln.replace(">>", "", 1).strip() if ln.startswith(">>") else ln.strip()
           for ln in p.stdout.splitlines()]
    at = 0
    for want in (ln.strip() for ln in session if not ln.startswith(">> ")):
        assert want in got[at:], f"REPL output lacks {want!r} after line {at}:\n{p.stdout}"
        at = got.index(want, at) + 1


def test_the_python_lines(tmp_path):
    code = tour()["python"]
    assert "import rasp" in code
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, env=_env(), cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]


@pytest.mark.parametrize("doc", sorted(p.relative_to(ROOT).as_posix()
                                       for p in [README, *(ROOT / "docs").glob("*.md")]))
def test_docs_name_no_machine_paths(doc):
    """A page names paths inside the checkout or beside it (``../shared``), never where this
    machine keeps them."""
    text = (ROOT / doc).read_text()
    # the checkout's own absolute path (its parent may be a shared directory such as /tmp,
    # which pages may name in example commands: not checked)
    assert str(ROOT) + "/" not in text and not text.rstrip().endswith(str(ROOT))
    hits = re.findall(r"(?<![\w.~-])/(?:work|home|Users|root)/[^\s`'\")]*", text)
    assert not hits, hits
