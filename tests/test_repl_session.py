"""The REPL driven through its non-interactive mode and through prompt_toolkit's pipe input.

Truths checked: the reverse of the running example is the string reversed in Python; the flip
selector is the anti-diagonal; an s-op of ints doubles the example's ints; the original RASP
analyser needs 2 layers for reverse (Weiss et al. 2021: `length` costs a layer); a non-causal
select breaks RASP-L rule 1 (Zhou et al. 2023); failed statements leave the environment as it
was.
"""

from __future__ import annotations

import io
import re

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from rasp.repl.repl import Repl, ReplError, needs_more_input, parse_literal
from rasp.repl.session import Session

REVERSE = "reverse = aggregate(select(indices, length - indices - 1, ==), tokens);\n"


def make_repl(**kw):
    out = io.StringIO()
    repl = Repl(session=Session(), stdout=out, history_file=False, **kw)
    return repl, out


ERROR = "\t\t!!ignoring input:"


def run(lines, **kw):
    """Run ``lines`` in the piped mode; returns the REPL, its output, the error messages
    (the lines after each error header, as the original frames them) and the exit status."""
    repl, out = make_repl(**kw)
    rc = repl.run_lines(lines)
    text = out.getvalue()
    errors = re.findall(re.escape(ERROR) + r"\n\t (.*)", text)
    return repl, text, "\n".join(errors), rc


def expected_list(seq, typ):
    return "[" + ", ".join(str(x) for x in seq) + f"] ({typ})"


def selector_rows(text: str, name: str) -> list[list[int]]:
    """The 0/1 rows printed under `selector: NAME`."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.strip().endswith(f"selector: {name}"))
    rows = []
    for line in lines[start + 1:]:
        if "|" in line:       # the original's rows: `1` where selected, a blank where not
            cells = line.split("| ", 1)[1]
            rows.append([1 if cells[i] == "1" else 0 for i in range(0, len(cells), 2)])
        elif rows:
            break
    return rows


def test_sop_shows_its_value_on_the_running_example():
    _, out, err, rc = run([REVERSE])
    assert rc == 0 and err == ""
    assert "s-op: reverse" in out
    want = expected_list("hello"[::-1], "strings")
    assert f'Example: reverse("hello") = {want}' in out


def test_selector_is_shown_as_a_query_by_key_matrix():
    _, out, _, rc = run(["flip = select(indices, length - indices - 1, ==);\n"])
    assert rc == 0
    rows = selector_rows(out, "flip")
    n = len("hello")
    assert rows == [[1 if k == n - 1 - q else 0 for k in range(n)] for q in range(n)]
    # the keys (the example's tokens) label the columns on top
    lines = out.splitlines()
    header = lines[next(i for i, l in enumerate(lines) if l.endswith("selector: flip")) + 2]
    assert header.split() == list("hello")


def test_selector_matrix_in_causal_mode_is_lower_triangular():
    _, out, _, _ = run(["set causal on\n", "everything = select(indices, indices, >=);\n"])
    rows = selector_rows(out, "everything")
    # keys >= query AND key <= query (causal): only the diagonal survives
    assert rows == [[1 if k == q else 0 for k in range(5)] for q in range(5)]


def test_pasted_causal_directive_acts_as_in_a_file():
    # a printed causal program starts with #!causal (rasp.source); pasted into a running REPL
    # it turns causal mode on, as it does at the top of a file; any other comment stays one
    _, out, _, _ = run(["# not a directive\n", "#!causal\n",
                        "everything = select(indices, indices, >=);\n"])
    rows = selector_rows(out, "everything")
    assert rows == [[1 if k == q else 0 for k in range(5)] for q in range(5)]
    repl, _, _, _ = run(["#!something_else\n", "show causal\n"])
    assert not repl.causal


def test_multiline_def_and_set_example():
    lines = ["set example [1, 2, 3, 4]\n",
             "def double(x) {\n", "    y = x * 2;\n", "    return y;\n", "}\n",
             "d = double(tokens_int);\n"]
    repl, out, err, rc = run(lines)
    assert rc == 0, err
    assert "console function: double(x)" in out
    assert f"Example: d([1, 2, 3, 4]) = {expected_list([2, 4, 6, 8], 'ints')}" in out
    assert repl.session.example == [1, 2, 3, 4]


def test_frac_prevs_matches_the_rasp_paper():
    # Weiss et al. 2021, section 2: frac_prevs("hello", "l") = [0, 0, 1/3, 1/2, 2/5]; the
    # original prints the first position, a mean of one int, as the int 0 and the others,
    # means of several values, as floats
    lines = ["def frac_prevs(sop, val) {\n", "  prevs = select(indices, indices, <=);\n",
             "  return numerical(aggregate(prevs, indicator(sop == val)));\n", "}\n",
             'f = frac_prevs(tokens, "l");\n']
    repl, out, err, rc = run(lines)
    assert rc == 0, err
    assert 'f("hello") = [0, 0.0, 0.333, 0.5, 0.4] (floats)' in out


def test_set_example_string_and_errors():
    repl, out, err, rc = run(['set example "abc";\n', "r = tokens;\n", "set example 3\n",
                              "set example [1, \"a\"]\n", "set example []\n",
                              "set example undefined_thing\n", "set example tokens\n"])
    assert 'r("abc") = [a, b, c] (strings)' in out
    assert repl.session.example == "abc"          # every refused example left it unchanged
    assert out.count(ERROR) == 5 and rc == 1
    assert re.search(r"<stdin>:3:13: example not iterable: .* got int 3", err)
    assert "unknown name 'undefined_thing'" in err and "got an s-op" in err


def test_set_example_takes_any_expression_and_subsets():
    repl, out, err, rc = run(['ex = "xyz";\n', "set example ex\n", 'set selector example "ab" + "c"\n',
                              "show example\n", "show s-op example\n"])
    assert rc == 0, err
    assert repl.session.display.sop_example == "xyz"
    assert repl.session.display.selector_example == "abc"
    assert '\ts-op example: "xyz"\n\tselector example: "abc"' in out
    assert out.rstrip().endswith('>> \ts-op example: "xyz"\n>>')


def test_errors_are_survived_and_leave_the_environment_unchanged():
    repl, out, err, rc = run(["a = 1;\n", "def g(x) { return nothing_such(x); }\n"])
    env_before = {k: id(repl.session.env[k]) for k in repl.session.names()}
    for bad in ["a = undefined_name + 1;\n", "a = (1;\n", "b = select(indices, 3);\n",
                "a, b = 5;\n", "a = g(2);\n"]:
        repl.run_lines([bad])
    env_after = {k: id(repl.session.env[k]) for k in repl.session.names()}
    assert env_after == env_before
    assert repl.session.env["a"] == 1
    assert repl.errors == 5
    repl.run_lines(["c = a + 41;\n"])
    assert repl.session.env["c"] == 42


def test_error_message_is_one_message_with_position_no_traceback():
    _, out, err, rc = run(["x = nope;\n"])
    assert rc == 1
    assert "Traceback" not in out
    assert re.search(r"<stdin>:1:\d+: .*nope", err)


def test_exit_stops_reading():
    repl, _, _, _ = run(["x = 1;\n", "exit\n", "y = 2;\n"])
    assert "x" in repl.session.env and "y" not in repl.session.env


def test_commands_do_not_shadow_assignments():
    repl, out, _, rc = run(["help = 2;\n", "help;\n", "names = [1, 2];\n", "names\n"])
    assert rc == 0
    assert out.count("value: help =  2") == 2 and "list: names = [1, 2]" in out
    assert repl.session.env["help"] == 2 and repl.session.env["names"] == [1, 2]
    # the `names` command (the bare expression `help;` also stored `out`)
    assert out.splitlines()[-2] == ">>   help, names, out"


def test_info_reports_layers_and_raspl_verdict():
    _, out, _, _ = run([REVERSE, "info reverse\n"])
    assert re.search(r"layers: 2\b", out)          # Weiss et al. 2021: reverse takes 2 layers
    assert "not valid RASP-L" in out
    assert re.search(r"rule 1", out)                # the select is not causal


def test_info_in_causal_mode_prefix_count_is_valid_raspl():
    _, out, _, _ = run(["set causal on\n", "n = selector_width(select(indices, indices, <=));\n",
                        "info n\n"])
    assert "valid RASP-L" in out and "not valid" not in out
    assert 'n("hello") = [1, 2, 3, 4, 5] (ints)' in out


def test_info_unknown_name_is_an_error():
    _, _, err, rc = run(["info nothing_here\n"])
    assert rc == 1 and "unknown name 'nothing_here'" in err


def test_unknown_forced_command():
    _, _, err, rc = run([":frobnicate\n"])
    assert rc == 1 and "unknown command" in err


def test_injected_command_gets_the_repl_and_arguments():
    seen = []

    def echo(repl, argtext):
        """echo ARGS back"""
        seen.append(argtext)
        return f"  echo: {argtext}"

    repl, out, _, _ = run(["echo a b\n"], extra_commands={"echo": echo})
    assert seen == ["a b"] and "echo: a b" in out
    assert "echo" in repl.cmd_help() and "echo ARGS back" in repl.cmd_help()
    with pytest.raises(ValueError):
        Repl(session=Session(), extra_commands={"help": echo})


def test_completion_offers_defined_names_and_commands():
    repl, _, _, _ = run(["reverse_me = tokens;\n"])
    comp = [c.text for c in repl.completer.get_completions(Document("x = rever"),
                                                            CompleteEvent())]
    assert "reverse_me" in comp
    comp = [c.text for c in repl.completer.get_completions(Document("inf"), CompleteEvent())]
    assert "info" in comp
    comp = [c.text for c in repl.completer.get_completions(Document("sel"), CompleteEvent())]
    assert "select" in comp and "selector_width" in comp


def test_interactive_pipe_input_history_and_continuation(tmp_path):
    hist = tmp_path / "hist"
    out = io.StringIO()
    with create_pipe_input() as inp:
        inp.send_text("def rev(x) {\n")
        inp.send_text("  return aggregate(select(indices, length - indices - 1, ==), x);\n")
        inp.send_text("}\n")
        inp.send_text("r = rev(tokens);\n")
        inp.send_text("exit\n")
        repl = Repl(session=Session(), input=inp, output=DummyOutput(), stdout=out,
                    history_file=str(hist))
        assert repl.run() == 0
    text = out.getvalue()
    assert f'r("hello") = {expected_list("olleh", "strings")}' in text
    saved = hist.read_text()
    assert "r = rev(tokens);" in saved and "def rev(x) {" in saved


def test_interactive_ctrl_d_leaves_and_history_env_var(tmp_path, monkeypatch):
    hist = tmp_path / "sub" / "h2"
    monkeypatch.setenv("RASP_HISTORY", str(hist))
    out = io.StringIO()
    with create_pipe_input() as inp:
        inp.send_text("z = 7;\n")
        inp.send_text("\x04")             # Ctrl-D
        repl = Repl(session=Session(), input=inp, output=DummyOutput(), stdout=out)
        assert repl.run() == 0
    assert "value: z =  7" in out.getvalue()
    assert "z = 7;" in hist.read_text()


def test_needs_more_input():
    assert needs_more_input("x = 3")
    assert not needs_more_input("x = 3;")
    assert needs_more_input("def f(a) {\n  return a;")
    assert not needs_more_input("def f(a) {\n  return a;\n}")
    assert needs_more_input("x = [1,\n 2")
    assert not needs_more_input("# only a comment")
    assert not needs_more_input("x = (1;")         # a real error: complete, reported


def test_parse_literal():
    assert parse_literal('"hello"') == "hello"
    assert parse_literal("[1, 2, 3];") == [1, 2, 3]
    assert parse_literal('[True, False]') == [True, False]
    assert parse_literal("[1.5, -2]") == [1.5, -2]
    with pytest.raises(ReplError):
        parse_literal("foo(1)")
    with pytest.raises(ReplError):
        parse_literal("__import__('os')")


def test_compile_command_at_the_prompt():
    from rasp_cli.commands.repl import compile_command
    _, out, err, rc = run(["hist = selector_width(select(tokens, tokens, ==));\n",
                           "compile hist\n"], extra_commands={"compile": compile_command})
    assert rc == 0, err
    assert re.search(r"layers\s+\d+", out)
    assert re.search(r"params\s+\d+", out)
    assert "matches the interpreter" in out


def test_prompts_are_the_original_ones():
    from prompt_toolkit.output.plain_text import PlainTextOutput
    screen = io.StringIO()
    with create_pipe_input() as inp:
        inp.send_text("def f(x) {\n  return x;\n}\nexit\n")
        repl = Repl(session=Session(), input=inp, output=PlainTextOutput(screen),
                    stdout=io.StringIO(), history_file=False)
        repl.run()
    shown = screen.getvalue()
    assert ">> def f(x) {" in shown          # the prompt
    # the continuation prompt, two spaces further in per `def` (the original's nest depth)
    assert "..     return x;" in shown and "..   }" in shown
    assert "f" in repl.session.env


def test_completion_offers_the_original_command_words():
    repl, _ = make_repl()
    comp = [c.text for c in repl.completer.get_completions(Document("full"), CompleteEvent())]
    assert "full seq display on" in comp and "full seq display off" in comp
    comp = [c.text for c in repl.completer.get_completions(Document("s-op ex"), CompleteEvent())]
    assert comp == []               # not a word start: names only
    comp = [c.text for c in repl.completer.get_completions(Document("sel"), CompleteEvent())]
    assert "selector examples off" in comp and "select" in comp
    comp = [c.text for c in repl.completer.get_completions(Document("set "), CompleteEvent())]
    assert comp == [] or all(not c.startswith("set") for c in comp)


def test_interactive_original_commands_and_set_example_expression():
    out = io.StringIO()
    with create_pipe_input() as inp:
        inp.send_text('w = "abc";\nset example w\nshow example\ntokens;\nexamples off\n'
                      "tokens;\nexit\n")
        repl = Repl(session=Session(), input=inp, output=DummyOutput(), stdout=out,
                    history_file=False)
        assert repl.run() == 0
    text = out.getvalue()
    assert '\ts-op example: "abc"\n\tselector example: "abc"' in text
    assert 'tokens("abc") = [a, b, c] (strings)' in text
    assert text.rstrip().endswith("     s-op: tokens")      # examples off: the name only


def test_draw_prints_its_flow_once():
    _, out, err, rc = run(['draw(tokens == "l");\n'])
    assert rc == 0, err
    assert out.count("computation flow of") == 1 and "[F, F, T, T, F] (bools)" in out
