"""Interpreter corners the original RASP decides (issue 27 item 4), each against plain Python.

The reference is the original's aggregate (tech-srl/RASP ``RASP_support/Support.py``,
``apply_average_select``): no selected key -> the default; one -> that value itself, unaveraged;
several -> ``sum(values) * 1.0 / n``, refused when they are not all numbers. Its ``select``
compares with Python's operators.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import rasp
from rasp import aggregate, evaluate, indices, map_sop, numerical, select, tokens, tokens_int
from rasp.errors import RASPTypeError

OPS = {"==": lambda k, q: k == q, "!=": lambda k, q: k != q, "<": lambda k, q: k < q,
       "<=": lambda k, q: k <= q, ">": lambda k, q: k > q, ">=": lambda k, q: k >= q}


def original_mean(values, selected, default):
    """The original RASP's mean aggregate at one query (plain Python)."""
    picked = [v for v, s in zip(values, selected) if s]
    if not picked:
        return default
    if len(picked) == 1:
        return picked[0]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in picked):
        raise TypeError("asked to average multiple values, but they are non-numbers")
    return sum(picked) * 1.0 / len(picked)


@pytest.mark.parametrize("scale", [1, 2 ** 53 + 1, 2 ** 62 - 1, -(2 ** 60) - 7])
def test_one_key_mean_of_an_int_is_that_int_exactly(scale):
    """A one-key mean moved an int above 2**53 through float64 (...993 -> ...992)."""
    x = numerical(aggregate(select(indices, indices, "=="), map_sop(lambda v: v * scale,
                                                                      tokens_int)))
    for inp in ([1, 1], [0, 1, 1], [1]):
        got = evaluate(x, inp)[0].tolist()
        want = [original_mean([v * scale for v in inp], [k == q for k in range(len(inp))], 0)
                for q in range(len(inp))]
        assert got == want and all(type(g) is int for g in got)


def _prev(values):
    """The previous position's value, ``None`` at position 0 (a ``None``-default aggregate)."""
    return aggregate(select(indices, map_sop(lambda i: i - 1, indices), "=="), values,
                     default=None)


def test_means_over_none_are_none_or_a_clear_error():
    """Mean over values holding None: one key -> that value (None included); several with a
    None -> an error, as the original (it was NaN, and round(NaN) INT64_MIN)."""
    prev = _prev(tokens_int)                               # [None, t0, t1, ...]
    for inp in ([3, 1, 2], [5, 5, 5, 5]):
        vals = [None] + inp[:-1]
        one = aggregate(select(indices, indices, "=="), prev)
        assert evaluate(one, inp)[0].tolist() == vals
        # first-two-keys windows: position 0 alone, then (None, t0) pairs -> the original raises
        two = numerical(aggregate(select(indices, indices, "<="), prev))
        with pytest.raises(TypeError):
            [original_mean(vals, [k <= q for k in range(len(vals))], 0)
             for q in range(len(vals))]
        with pytest.raises(RASPTypeError, match="not all numbers"):
            evaluate(two, inp)
        # keys after position 0 only: numbers, averaged as the original
        late = numerical(aggregate(select(indices, indices, ">") & select(indices,
                                   map_sop(lambda i: 0, indices), ">"), prev))
        got = evaluate(late, inp)[0].tolist()
        want = [original_mean(vals, [k > q and k > 0 for k in range(len(vals))], 0)
                for q in range(len(vals))]
        assert got == pytest.approx(want)


@pytest.mark.parametrize("op", sorted(OPS))
def test_selects_between_none_and_strings_compare_as_python(op):
    """A string s-op holding None against a string s-op: Python's == / != per pair (it was
    'string vs number': == nothing, != everything); ordering None raises, as in Python."""
    prev = _prev(tokens)
    width = rasp.selector_width(select(prev, tokens, op))
    for word in ("aab", "abcab", "b"):
        keys = [None] + list(word[:-1])
        try:
            want = [sum(bool(OPS[op](k, q)) for k in keys) for q in word]
        except TypeError:
            with pytest.raises(RASPTypeError, match="None"):
                evaluate(width, word)
            continue
        assert evaluate(width, word)[0].tolist() == want
