"""Property: random operator chains such as ``3 % - 4 * 2 ^ 2 or 5 - 1`` evaluate as an
independent precedence-climbing evaluator written here from the table of docs/language.md
(smaller level binds tighter; every binary operator is left-associative; prefix - and not bind
tighter than every binary operator)."""

import math
import operator

from hypothesis import given, settings
from hypothesis import strategies as st

from rasp import run_source
from rasp.ir import RASPError

LEVEL = {"^": 3, "*": 4, "/": 4, "%": 5, "+": 6, "-": 6, "==": 7, "<": 7, ">=": 7, "!=": 7,
         "and": 8, "or": 8}
APPLY = {"^": operator.pow, "*": operator.mul, "/": operator.truediv, "%": operator.mod,
         "+": operator.add, "-": operator.sub, "==": operator.eq, "<": operator.lt,
         ">=": operator.ge, "!=": operator.ne,
         "and": lambda a, b: a and b, "or": lambda a, b: a or b}


class Fail(Exception):
    pass


def reference(tokens):
    """Evaluate a token list by precedence climbing over LEVEL."""
    pos = [0]

    def peek():
        return tokens[pos[0]] if pos[0] < len(tokens) else None

    def take():
        pos[0] += 1
        return tokens[pos[0] - 1]

    def unary():
        t = take()
        if t == "-":
            v = unary()
            if isinstance(v, str):
                raise Fail
            return -v
        if t == "not":
            return not unary()
        if t == "(":
            v = climb(8)
            assert take() == ")"
            return v
        return t

    def climb(limit):
        left = unary()
        while peek() in LEVEL and LEVEL[peek()] <= limit:
            op = take()
            right = climb(LEVEL[op] - 1)      # left-associative
            try:
                left = APPLY[op](left, right)
            except (ZeroDivisionError, TypeError, OverflowError):
                raise Fail from None
            if isinstance(left, complex):
                raise Fail
        return left

    return climb(8)


operand = st.tuples(st.lists(st.sampled_from(["-", "not"]), max_size=2),
                    st.integers(min_value=0, max_value=9))
chain = st.tuples(operand, st.lists(st.tuples(st.sampled_from(sorted(LEVEL)), operand),
                                    min_size=1, max_size=6))


def to_tokens(ch):
    (pre, v), rest = ch
    toks = list(pre) + [v]
    for op, (pre2, v2) in rest:
        if op == "^":
            v2 = v2 % 3          # keep powers small
        toks += [op] + list(pre2) + [v2]
    return toks


@settings(max_examples=300, deadline=None)
@given(chain)
def test_operator_chains_follow_the_precedence_table(ch):
    toks = to_tokens(ch)
    text = " ".join(str(t) for t in toks)
    try:
        expected = ("ok", reference(toks))
    except Fail:
        expected = ("error",)
    try:
        got = ("ok", run_source(f"v = {text};")["v"])
    except RASPError:
        got = ("error",)
    if expected[0] == "ok" and got[0] == "ok" and isinstance(expected[1], float):
        assert math.isclose(got[1], expected[1], rel_tol=1e-9, abs_tol=1e-12), text
    else:
        assert got == expected, text


def test_reference_agrees_with_the_documented_examples():
    assert reference(["-", 2, "^", 2]) == 4
    assert reference([7, "%", 4, "*", 2]) == 7
    assert reference([2, "^", 3, "^", 2]) == 64
    assert reference([True, "or", False, "and", False]) is False
    assert reference(["not", 1, "==", 2]) is False
