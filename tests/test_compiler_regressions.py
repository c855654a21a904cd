"""Regressions: programs (found by the random-program tests) whose compiled model once
differed from the interpreter. Each is checked on the failing input (expected values from the
interpreter and by hand) and exhaustively on every input of length <= 4 over {1, 2, 3}."""

import itertools

import numpy as np

import rasp
from rasp import aggregate, causal_mode, indices, kqv, numerical, select, tokens_int
from compiler import compile_program
from rasp.equality import values_equal
from compiler.graph_to_blocks import _cluster, _simplest

VOCAB = ["1", "2", "3"]
N = 4


def _exhaustive(prog, causal):
    cm = compile_program(prog, VOCAB, N, causal=causal)
    for n in range(1, N + 1):
        batch = [list(x) for x in itertools.product(VOCAB, repeat=n)]
        ref = rasp.evaluate(prog, batch, causal=True if causal else None)
        got = cm.run(batch)
        for b, r, g in zip(batch, ref, got):
            assert values_equal(r, g), (b, r, g)
    return cm


def test_kqv_truncation_of_a_mean_that_is_exactly_one():
    # hypothesis seed 317502545336088420985850234136140911283: the value set of the mean
    # behind kqv holds both 0.9999999999999999 (an exact mean of the floats 1/3, 2/3, ...)
    # and 1; the discretising MLP merged them into the first, so trunc gave 0 for a mean of 1.
    with causal_mode():
        s14 = select(tokens_int, indices, "<") & select(indices, indices, "!=")
        s16 = numerical(aggregate(~s14, indices, default=-2))
        s22 = aggregate(select(indices, tokens_int, "=="), s16, default=-1)
        s24 = kqv(tokens_int, indices, s22, "==", default=2)
    x = [["3", "1", "2"]]
    # by hand: s22 = [-1, 0.5, 1]; position 0 selects nothing (default 2), position 1 the key
    # with token 1 (s22 = 0.5, trunc 0), position 2 the key with token 2 (s22 = 1, trunc 1)
    assert rasp.evaluate(s24, x, causal=True).tolist() == [[2, 0, 1]]
    cm = _exhaustive(s24, causal=True)
    assert np.asarray(cm.run(x)).tolist() == [[2, 0, 1]]


def test_near_duplicate_values_group_at_their_exact_value():
    groups = _cluster([0.5, 0.9999999999999999, 1.0, 1.1666666666666665, 1.1666666666666667])
    assert groups == [[0.5], [0.9999999999999999, 1.0], [1.1666666666666665,
                                                          1.1666666666666667]]
    assert [_simplest(g) for g in groups] == [0.5, 1.0, 7 / 6]
    assert _simplest([-1.0000000000000002, -1.0]) == -1.0
