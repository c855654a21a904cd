"""REPL `help NAME`: every built-in function and s-op, the library, operators, commands and the
user's own names are explained; a near miss gets "did you mean"."""

import pytest

from rasp.repl.builtins import BUILTINS
from test_repl_session import run


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_every_builtin_function_has_help(name):
    _, out, err, _ = run([f"help {name}\n"])
    assert not err and f"{name}: built-in function." in out
    assert BUILTINS[name][1] in out


def test_builtin_sops_library_operators_commands_and_user_names():
    _, out, err, _ = run(["help indices\n", "help sort\n", "help +\n", "help info\n",
                          "def f(a, b) { return a + b; }\n", "help f\n", "x = 3;\n",
                          "help x\n"])
    assert not err, err
    assert "indices: built-in" in out
    assert "function: sort(seq, key) (defined in RASP_support/rasplib)" in out
    assert "+: add" in out and "info NAME" in out
    assert "function: f(a, b) (defined in console)" in out and "x: int 3" in out


def test_a_near_miss_gets_did_you_mean():
    _, _, err, _ = run(["help selct\n"])
    assert "did you mean select" in err


def test_help_lists_builtins_and_the_library():
    _, out, _, _ = run(["help\n"])
    assert "Built-in functions: aggregate" in out and "selector_width" in out
    assert "The library (rasplib):" in out and "histogram" in out


def test_help_is_still_a_name_in_statements():
    _, out, err, _ = run(["help = 4;\n", "help (1);\n"])
    assert "help =  4" in out
