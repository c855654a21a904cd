"""The REPL's running-example evaluator is reused across statements (rasp.repl.original): values and
the original's per-position types of nodes already evaluated on an example are kept. Truths:
plain Python values of each program on each example, for chains, for alternating examples,
and for failures (never cached)."""

import pytest

import rasp
from rasp.repl import original
from rasp.errors import RASPError


def test_chain_values_on_the_example_equal_plain_python():
    env = rasp.run_source("x = indices;" + "x = x + 1;" * 50)
    # every intermediate is a distinct IR node; evaluate the chain head last so that most
    # nodes come from the cache, and compare with Python
    x = env["x"]
    assert original.original_values(x, "hello") == [50, 51, 52, 53, 54]
    y = rasp.run_source("y = indices * 2;")["y"]
    assert original.original_values(y, "hello") == [0, 2, 4, 6, 8]


def test_alternating_examples_are_not_confused():
    x = rasp.run_source("x = tokens + tokens; y = x == \"aa\";")
    for _ in range(2):
        assert original.original_values(x["x"], "ab") == ["aa", "bb"]
        assert original.original_values(x["y"], "ba") == [False, True]
        assert original.original_values(x["y"], ["a", "b"]) == [True, False]


def test_the_cache_is_bounded():
    x = rasp.run_source("x = length;")["x"]
    for n in range(1, 12):
        assert original.original_values(x, "a" * n) == [n] * n
    assert len(original._EXAMPLE_EVALUATORS) <= original._EXAMPLE_CACHE_SIZE


def test_failures_are_not_cached():
    env = rasp.run_source("bad = 1 / (indices - 1); good = indices + 1;")
    for _ in range(2):
        with pytest.raises(RASPError):
            original.original_values(env["bad"], "abc")
    assert original.original_values(env["good"], "abc") == [1, 2, 3]
    # a mean of several booleans is refused by the original, every time
    m = rasp.run_source("m = aggregate(select(indices, indices, <=), tokens == \"a\");")["m"]
    for _ in range(2):
        with pytest.raises(RASPError):
            original.original_values(m, "abc")
