"""Deep programs (issue 13, item 9): depth is bounded by documented limits, never by Python's
recursion limit.

Truths are plain Python: a chain of n ``x = x + 1`` statements on ``indices`` is
``[i + n for i in range(len(input))]``.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rasp
from compiler import compile_program
from rasp import limits
from rasp.errors import RASPError

ROOT = Path(__file__).resolve().parents[1]


def chain(n: int) -> str:
    return "x = indices;\n" + "x = x + 1;\n" * n


@pytest.mark.parametrize("n", [500, 2000])
def test_chain_of_maps_compiles_exactly(n):
    x = rasp.run_source(chain(n)).get("x")
    cm = compile_program(x, [1, 2, 3], 4)
    # every input up to max_seq_len, against plain Python
    for length in range(1, 5):
        batch = [list(t) for t in itertools.product([1, 2, 3], repeat=length)]
        got = np.asarray(cm.run(batch))
        want = np.array([[i + n for i in range(length)]] * len(batch))
        assert np.array_equal(got, want)


def test_chain_of_5000_maps_interprets():
    x = rasp.run_source(chain(5000)).get("x")
    got = rasp.evaluate(x, [list("abcdef")])
    assert got.tolist() == [[i + 5000 for i in range(6)]]


def test_deep_parentheses_are_not_depth():
    # brackets do not add parse-tree levels: 2,000 of them are fine
    w = rasp.run_source("w = " + "(" * 2000 + "indices" + ")" * 2000 + " + 1;").get("w")
    assert rasp.evaluate(w, [list("abc")]).tolist() == [[1, 2, 3]]


@pytest.mark.parametrize("source", [
    "w = indices" + " + 1" * 10_000 + ";",
    "w = " + "-" * 5000 + "indices;",
    "def f(x) { return x + 1; }\nw = " + "f(" * 3000 + "indices" + ")" * 3000 + ";",
    "w = " + "[" * 3000 + "1" + "]" * 3000 + ";",
])
def test_deep_expression_is_a_clear_error(source):
    with pytest.raises(RASPError) as e:
        rasp.run_source(source)
    msg = str(e.value)
    # the parse-tree depth, or (deep brackets: refused before parsing) the bracket depth
    assert "nested more than" in msg and ("MAX_EXPR_DEPTH" in msg or "MAX_BRACKET_DEPTH" in msg)
    assert msg.startswith("<string>:")          # file:line:col


def test_expressions_below_the_limit_evaluate():
    k = limits.MAX_EXPR_DEPTH // 2 - 5            # a binary operator adds up to two levels
    w = rasp.run_source("w = indices" + " + 1" * k + ";").get("w")
    assert rasp.evaluate(w, [list("ab")]).tolist() == [[k, k + 1]]


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "rasp_cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_cli_compiles_a_chain_and_refuses_deep_nesting(tmp_path):
    (tmp_path / "chain.rasp").write_text(chain(500))
    r = _cli("compile", "chain.rasp", "--name", "x", "--vocab", "1,2,3", "--max-len", "4",
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    (tmp_path / "deep.rasp").write_text("w = indices" + " + 1" * 3000 + ";\n")
    r = _cli("run", "deep.rasp", "--name", "w", "--input", "abc", cwd=tmp_path)
    assert r.returncode == 2
    assert "Traceback" not in r.stdout + r.stderr
    assert "deep.rasp:1:" in r.stderr and "MAX_EXPR_DEPTH" in r.stderr


def _selector_chain(n: int) -> str:
    return ("s = select(indices, indices, ==);\n"
            + "s = s and select(indices, indices, <=);\n" * n
            + "y = aggregate(s, indices);\n")


def test_selector_chain_below_the_limit_compiles_exactly():
    n = limits.MAX_SELECTOR_DEPTH - 1
    y = rasp.run_source(_selector_chain(n)).get("y")
    # (i == j) and (i <= j) ... selects exactly the query's own position: y = indices
    assert rasp.evaluate(y, [[1, 2, 3]]).tolist() == [[0, 1, 2]]
    cm = compile_program(y, [1, 2, 3], 4)
    assert np.asarray(cm.run([[3, 1, 2, 1]])).tolist() == [[0, 1, 2, 3]]


def test_selector_chain_above_the_limit_is_a_clear_error():
    with pytest.raises(RASPError) as e:
        rasp.run_source(_selector_chain(1500))
    assert "MAX_SELECTOR_DEPTH" in str(e.value) and str(e.value).startswith("<string>:")
