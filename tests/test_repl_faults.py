"""Faults at the REPL: interrupts, bad files, bad commands (issue 13 items 7-9, issue 12's bad
input).

Truths checked: an interrupted statement leaves the session exactly as an error does (as it
was before the statement); Ctrl-D on a continuation line drops the pending input and the
session goes on; ``load`` reads only ``.rasp`` files (as the original, which appends
``.rasp``) and never prints the content of a file that is not RASP source; a bad command in a
loaded file is an error with its file:line:col and the file goes on.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from rasp.errors import RASPError
from rasp.repl.repl import Repl
from rasp.repl.session import Session

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def interrupt_at(session: Session, monkeypatch, n: int, exc: BaseException) -> None:
    """Make the ``n``-th statement the interpreter runs from now on raise ``exc`` (a
    deterministic hook: no timing, no signals)."""
    real = session._interp.exec_stmt
    calls = {"n": 0}

    def hooked(st, env, ctx):
        calls["n"] += 1
        if calls["n"] == n:
            raise exc
        return real(st, env, ctx)
    monkeypatch.setattr(session._interp, "exec_stmt", hooked)


LOOP = "for i in range(5) {\n  a = a + 1;\n  b = a;\n}\n"


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), RASPError("boom")],
                         ids=["ctrl-c", "error"])
@pytest.mark.parametrize("at", [2, 3, 4, 7])
def test_an_interrupt_inside_a_for_rolls_back_like_an_error(monkeypatch, exc, at):
    s = Session()
    s.execute("a = 0;")
    before = dict(s.env.vars)
    interrupt_at(s, monkeypatch, at, exc)   # statement 1 is the for itself, then its body
    with pytest.raises(type(exc)):
        s.execute(LOOP)
    assert s.env.vars == before             # no partial a, b or i
    monkeypatch.undo()
    s.execute(LOOP)                         # and the session still works
    assert s.env["a"] == 5 and s.env["i"] == 4


def test_an_interrupted_load_leaves_none_of_the_files_names(tmp_path, monkeypatch):
    (tmp_path / "three.rasp").write_text("p = 1;\nq = 2;\nr = 3;\n")
    monkeypatch.chdir(tmp_path)
    repl = Repl(session=Session(), stdout=io.StringIO(), history_file=False)
    interrupt_at(repl.session, monkeypatch, 4, KeyboardInterrupt())   # load, p, q, r
    with pytest.raises(KeyboardInterrupt):
        repl.session.execute('load "three";')
    assert not {"p", "q", "r"} & set(repl.session.names())
    assert repl.session.pending == []


def test_ctrl_c_in_the_terminal_rolls_back_and_the_repl_goes_on(monkeypatch):
    out = io.StringIO()
    with create_pipe_input() as inp:
        inp.send_text("a = 0;\n" + LOOP + "a;\nexit\n")
        repl = Repl(session=Session(), input=inp, output=DummyOutput(), stdout=out,
                    history_file=False)
        interrupt_at(repl.session, monkeypatch, 4, KeyboardInterrupt())
        assert repl.run() == 0
    text = out.getvalue()
    assert "interrupted (the statement was rolled back)" in text
    assert text.count("value: a =  0") == 2 and "i" not in repl.session.env


def test_ctrl_d_on_a_continuation_line_cancels_the_pending_input():
    out = io.StringIO()
    with create_pipe_input() as inp:
        inp.send_text("x = 1 +\n")
        inp.send_text("\x04")             # Ctrl-D at the `..` prompt: drop `x = 1 +`
        inp.send_text("y = 2;\n")
        inp.send_text("x;\n")
        inp.send_text("\x04")             # Ctrl-D at the `>>` prompt: leave
        repl = Repl(session=Session(), input=inp, output=DummyOutput(), stdout=out,
                    history_file=False)
        assert repl.run() == 0
    text = out.getvalue()
    assert "value: y =  2" in text
    assert "unknown name 'x'" in text and "x" not in repl.session.env


def run_piped(text: str, cwd, **kw) -> str:
    out = io.StringIO()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        Repl(session=Session(), stdout=out, history_file=False, **kw).run_lines(
            io.StringIO(text))
    finally:
        os.chdir(old)
    return out.getvalue()


def test_load_reads_only_rasp_files_and_never_prints_another_file(tmp_path, monkeypatch):
    secret = "TOPSECRET-4471"
    (tmp_path / "secret").write_text(f"root:x:0:0:{secret}:/root:/bin/bash\n")
    (tmp_path / "binary.rasp").write_bytes(b"x = 1;\0" + secret.encode() + b"\n")
    (tmp_path / "notrasp.rasp").write_text(f"root:x:0:0:{secret}:/root:/bin/bash\nz = 5;\n")
    monkeypatch.setenv("RASP_FAULT_SECRET", secret)      # so /proc/self/environ holds it
    text = run_piped(f'load "{tmp_path}/secret";\nload "/proc/self/environ";\n'
                     'load "/etc/shadow";\nload "binary";\nload "notrasp";\nz;\n', tmp_path)
    assert secret not in text and "root:x" not in text
    errors = re.findall(r"\t\t!!ignoring input:\n\t (.*)", text)
    assert len(errors) == 5, text
    assert errors[0].startswith(f"<stdin>:1:1: could not find file: {tmp_path}/secret.rasp")
    assert "could not find file: /proc/self/environ.rasp" in errors[1]
    assert "could not find file: /etc/shadow.rasp" in errors[2]
    assert "is not RASP source (binary content)" in errors[3]
    # a text file named .rasp that is not RASP: its syntax error gives the position only
    assert re.match(rf"{re.escape(str(tmp_path))}/notrasp.rasp:1:5: syntax error; expected",
                    errors[4])
    assert "value: z =  5" in text        # and the file went on, as the original
    if os.access("/etc/shadow", os.R_OK):
        with open("/etc/shadow") as f:
            first = f.readline().strip()
        assert first and first not in text


def test_load_outside_the_working_directory_when_asked(tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "lib.rasp").write_text("def twice(x) { return 2 * x; }\n")
    work = tmp_path / "work"
    work.mkdir()
    text = run_piped(f'load "{other}/lib";\nload "../elsewhere/lib";\ntwice(21);\n', work)
    assert "value: out =  42" in text and "!!" not in text


def test_an_unknown_command_in_a_loaded_file_is_an_error_and_load_goes_on(tmp_path):
    (tmp_path / "cmds.rasp").write_text('a = 1;\nfrobnicate on\nset example "abc"\n'
                                        "set exampel [1]\nb = a + 1;\n")
    text = run_piped('load "cmds";\nshow example\nb;\n', tmp_path)
    errors = re.findall(r"\t\t!!ignoring input:\n\t (.*)", text)
    path = re.escape(str(tmp_path / "cmds.rasp"))
    assert len(errors) == 2, text
    assert re.match(rf"{path}:2:12: syntax error", errors[0])
    assert re.match(rf"{path}:4:5: syntax error", errors[1])
    assert '\ts-op example: "abc"' in text          # the file's `set example` ran
    assert "value: b =  2" in text


def test_statement_failing_on_the_example_is_rejected_and_changes_nothing():
    text = run_piped("x = 1;\nx = tokens_int + 1;\nx;\nset example [1, 2]\n"
                     "x = tokens_int + 1;\n", ROOT)
    errors = re.findall(r"\t\t!!ignoring input:\n\t (.*)", text)
    assert len(errors) == 1 and errors[0].startswith("<stdin>:2:")
    assert "on the running example \"hello\"" in errors[0]
    assert text.count("value: x =  1") == 2     # before and after the rejected statement
    assert "x([1, 2]) = [2, 3] (ints)" in text


def test_library_names_are_reserved_unless_allowed(tmp_path):
    text = run_piped("count = 3;\ndef sort(a) { return a; }\nget = 1;\n", tmp_path)
    errors = re.findall(r"\t\t!!ignoring input:\n\t (.*)", text)
    assert len(errors) == 3
    assert "cannot assign to the reserved name 'count' (a name of the RASP library" in errors[0]
    text = run_piped("count = 3;\ncount;\n", tmp_path, reserve_library=False)
    assert "!!" not in text and text.count("value: count =  3") == 2


def test_cli_allow_library_override_flag(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, "-m", "rasp_cli.main", "repl", "--no-history",
                        "--allow-library-override"], input="count = 3;\n", text=True,
                       capture_output=True, cwd=tmp_path, env=env, timeout=120)
    assert p.returncode == 0 and "value: count =  3" in p.stdout


def test_info_names_the_kind_with_the_right_article(tmp_path):
    text = run_piped('load "rasp_l";\ninfo cumsum\nx = 3;\ninfo x\nl = [1];\ninfo l\n',
                     tmp_path)
    assert "cumsum is a function, not an s-op or a selector" in text
    assert "x is an atom, not" in text and "l is a list, not" in text
    assert "a atom" not in text
