"""Value-set inference (rasp.analyses.value_sets): exact sets for means, soundness against exhaustive
evaluation."""

import itertools
from fractions import Fraction

import numpy as np
import pytest

import rasp
from rasp import (Evaluator, aggregate, indices, length, numerical, select, selector_width,
                  tokens, tokens_int)
from rasp.ir import SOp, topological_order
from rasp.analyses.value_sets import (ValueSetError, infer_value_sets, mean_values,
                             selects_at_least_one, selects_at_most_one)


def test_mean_values_are_every_k_over_n():
    got = set(mean_values([0, 1], 5))
    want = {Fraction(k, n) for n in range(1, 6) for k in range(n + 1)}
    assert got == {float(f) if f.denominator != 1 else int(f) for f in want}
    assert len(got) == len(want)        # 11 distinct values, not Tracr's {0, 1/n}


def test_mean_values_of_negative_and_float_values():
    got = set(mean_values([-1, 2], 2))
    assert got == {-1, 2, 0.5}
    got = set(mean_values([0.5, 1.5], 2))
    assert got == {0.5, 1, 1.5}


def test_basic_sets():
    prog = tokens_int - 3
    vs = infer_value_sets(prog, ["1", "2", "3", "4", "5"], 5)
    assert vs[prog.id] == frozenset({-2, -1, 0, 1, 2})
    assert vs[tokens_int.id] == frozenset({1, 2, 3, 4, 5})
    assert infer_value_sets(indices, ["a"], 4)[indices.id] == frozenset(range(4))
    assert infer_value_sets(length, ["a"], 4)[length.id] == frozenset(range(1, 5))
    sw = selector_width(select(tokens, tokens, "=="))
    assert infer_value_sets(sw, ["a", "b"], 6)[sw.id] == frozenset(range(1, 7))
    sw0 = selector_width(select(tokens, "a", "=="))
    assert infer_value_sets(sw0, ["a", "b"], 6)[sw0.id] == frozenset(range(0, 7))
    mx = aggregate(select(indices, indices, "<="), tokens_int, reduction="max", default=-1)
    assert infer_value_sets(mx, ["3", "7"], 4)[mx.id] == frozenset({3, 7})
    const = rasp.full(4) * 2
    assert infer_value_sets(const, ["a"], 3)[const.id] == frozenset({8})


def test_mean_of_equal_values_is_not_a_fraction():
    prog = aggregate(select(tokens_int, tokens_int, "=="), tokens_int)
    assert infer_value_sets(prog, ["1", "2"], 6)[prog.id] == frozenset({1, 2})


def test_selector_facts():
    assert selects_at_most_one(select(indices, tokens_int, "=="))
    assert not selects_at_most_one(select(tokens, tokens, "=="))
    assert selects_at_least_one(select(tokens, tokens, "=="))
    assert selects_at_least_one(select(indices, indices, "<="))
    assert not selects_at_least_one(select(tokens, "a", "=="))


def _programs():
    frac = numerical(aggregate(select(indices, indices, "<="), numerical(tokens == "a"),
                               default=0))
    hist = selector_width(select(tokens, tokens, "=="))
    rev = aggregate(select(indices, length - indices - 1, "=="), tokens)
    mean_idx = aggregate(select(tokens, tokens, "=="), indices)
    with rasp.causal_mode():
        pref = selector_width(select(indices, indices, "<="))
        trunc = rasp.kqv(indices, indices, indices, "<=", default=0)
    return {"frac": (frac * 10, False), "hist": (hist * 2 - 1, False), "rev": (rev, False),
            "mean_idx": (mean_idx, False), "pref": (pref, True), "trunc": (trunc, True)}


@pytest.mark.parametrize("name", list(_programs()))
def test_sound_against_exhaustive_evaluation(name):
    """Every value any node takes on any input of length <= 5 is in its inferred set."""
    prog, causal = _programs()[name]
    vocab = ["a", "b"]
    n = 5
    sets = infer_value_sets(prog, vocab, n, causal=causal)
    for length_ in range(1, n + 1):
        batch = [list(x) for x in itertools.product(vocab, repeat=length_)]
        ev = Evaluator(batch, causal=True if causal else None)
        ev(prog)
        for node in topological_order(prog):
            if isinstance(node, SOp):
                seen = set(np.asarray(ev.values[node.id]).reshape(-1).tolist())
                missing = {v for v in seen if v not in sets[node.id]}
                assert not missing, (node.label, missing)


def test_exactness_of_mean_set_for_frac_prevs():
    """For frac_prevs the inferred set is exactly the set of values that occur."""
    frac = numerical(aggregate(select(indices, indices, "<="), numerical(tokens == "a"),
                               default=0))
    n = 5
    sets = infer_value_sets(frac, ["a", "b"], n)
    seen = set()
    for length_ in range(1, n + 1):
        batch = [list(x) for x in itertools.product("ab", repeat=length_)]
        seen |= set(rasp.evaluate(frac, batch).reshape(-1).tolist())
    assert seen == set(sets[frac.id])


def test_errors():
    with pytest.raises(ValueSetError):
        infer_value_sets(tokens, ["a"], 0)
    big = aggregate(select(tokens, tokens, "=="), indices * 1000 + tokens_int)
    with pytest.raises(ValueSetError):
        infer_value_sets(big, [str(i) for i in range(300)], 700)


def test_sum_of_dependent_means_is_exact():
    """opens - closes over the same selector: one mean of the differences (-1, 0, 1), i.e.
    every k/m with |k| <= m <= n: 2,521 values at 64 (the product of the two sets has ~1.6M);
    sound against exhaustive evaluation at 7."""
    from compiler.library import make_pair_balance
    pb = make_pair_balance(tokens, "(", ")")
    assert len(infer_value_sets(pb, list("()x"), 64)[pb.id]) == 2521
    n = 7
    vals = sorted(infer_value_sets(pb, list("()x"), n)[pb.id])
    want = {Fraction(k, m) for m in range(1, n + 1) for k in range(-m, m + 1)}
    assert {Fraction(v).limit_denominator(1000) for v in vals} == want
    for length_ in range(1, n + 1):
        batch = [list(x) for x in itertools.product("()x", repeat=length_)]
        seen = np.asarray(rasp.evaluate(pb, batch), dtype=float).reshape(-1)
        gap = np.min(np.abs(seen[:, None] - np.asarray(vals, dtype=float)[None, :]), axis=1)
        assert gap.max() < 1e-12
