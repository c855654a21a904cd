"""Operator precedence of the dialect = the original RASP grammar (tech-srl/RASP RASP.g4):
highest first parens/indexing/calls; prefix not - +; ^ (left); * /; % alone; + -; comparisons;
and/or on one level (left); ternary (left, as ANTLR's default); in (lowest).
Expected values are computed by hand from that table (docs/language.md)."""

import pytest

from rasp import RASPSyntaxError, run_source
from rasp.parser import parse


def value(expr: str):
    return run_source(f"v = {expr};")["v"]


@pytest.mark.parametrize("expr, expected", [
    ("-2^2", 4),                      # unary minus binds tighter than ^
    ("not 1 == 2", False),            # (not 1) == 2, not not (1 == 2)
    ("2^3^2", 64),                    # ^ is left-associative: (2^3)^2
    ("7%4*2", 7),                     # % below *: 7 % (4*2)
    ("True or False and False", False),  # one level, left to right: (True or False) and False
    ("False and True or True", True),
    ("2*3%4", 2),                     # (2*3) % 4
    ("10%4+1", 3),                    # + below %: (10 % 4) + 1
    ("1+10%4", 3),
    ("8%5%2", 1),                     # left-associative
    ("2^-1", 0.5),
    ("-3*2", -6),
    ("not True and False", False),    # (not True) and False
    ("1 + 2 * 3", 7),
    ("(1 + 2) * 3", 9),
    ("10 - 4 - 3", 3),
    ("1 < 2 == True", True),          # comparisons left-assoc: (1 < 2) == True
    ("2 ^ 2 * 3", 12),
    ("3 * 2 ^ 2", 12),
    ("1 if True else 2 if False else 3", 3),   # left-assoc: (1 if True else 2) if False else 3
    ("3 if True else 2 in [2]", False),        # in is lowest: (3 if True else 2) in [2]
    ("1 + 1 in [2]", True),
    ("[1, 2, 3][1] ^ 2", 4),          # indexing binds tighter than ^
    ("-[1, 2, 3][2]", -3),            # indexing binds tighter than unary minus
    ("round(2.6) ^ 2", 9),
    ("7 / 2", 3.5),
    ("1.5 + 1", 2.5),
    ('"ab" + "c"', "abc"),
])
def test_precedence_examples(expr, expected):
    assert value(expr) == expected


def test_precedence_trees():
    t = parse("x = -2^2;").children[0].children[1].children[0]
    assert t.data == "pow" and t.children[0].data == "neg"
    t = parse("x = not a == b;").children[0].children[1].children[0]
    assert t.data == "eq" and t.children[0].data == "not_"
    t = parse("x = a and b or c;").children[0].children[1].children[0]
    assert t.data == "or_" and t.children[0].data == "and_"


def test_comments_and_whitespace():
    env = run_source("# a comment\n a = 1; # trailing\n\n\tb = a +\n 2;")
    assert env["b"] == 3


@pytest.mark.parametrize("src, line, col", [
    ("x = 1 +;", 1, 8),
    ("a = 1;\nb = (2 + 3;", 2, 11),
    ("a = 1\nb = 2;", 2, 1),            # the missing ";" is noticed at "b"
    ("def f(x) { return x; ", 1, 22),
    ("x = 3 $ 4;", 1, 7),
    ('x = "abc;', 1, 5),
])
def test_syntax_error_positions(src, line, col):
    with pytest.raises(RASPSyntaxError) as ei:
        run_source(src, filename="prog.rasp")
    err = ei.value
    assert (err.span.line, err.span.column) == (line, col)
    assert str(err).startswith(f"prog.rasp:{line}:{col}: syntax error")


def test_syntax_error_shows_offending_text():
    with pytest.raises(RASPSyntaxError) as ei:
        run_source("y = select(indices, indices ==);")
    assert "select(indices, indices ==)" in str(ei.value)
    assert "^" in str(ei.value)


def test_def_needs_return_last():
    with pytest.raises(RASPSyntaxError):
        parse("def f(x) { return x; y = 1; }")
    with pytest.raises(RASPSyntaxError):
        parse("def f(x) { y = 1; }")


@pytest.mark.parametrize("text, more", [
    ("x = 1", True), ("x = (1 +", True), ("def f(a) {", True), ("def f(a) { return a; }", False),
    ("for i in [1] { y = i;", True), ("x = 1;", False), ("x = );", False), ("", False),
    ("# just a comment", False), ("x = [1,\n 2", True),
])
def test_needs_more_input(text, more):
    from rasp.parser import needs_more_input
    assert needs_more_input(text) is more
