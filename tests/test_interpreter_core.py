"""Core semantics of the batched interpreter, against plain-Python ground truths and the
original RASP's documented behaviour (Weiss et al. 2021; tech-srl/RASP Support.aggregate)."""

import numpy as np
import pytest

from rasp import (RASPError, RASPTypeError, RASPValueError, aggregate, causal_mode, evaluate,
                  format_sop_value, indices, kqv, length, select, selector_width, tokens,
                  tokens_int)


def py_reverse(s):
    return list(reversed(s))


def py_hist(s):
    return [s.count(c) for c in s]


def test_reverse_batched_matches_python():
    flip = select(indices, length - indices - 1, "==")
    rev = aggregate(flip, tokens)
    words = ["hello", "world", "abcde"]
    out = evaluate(rev, words)
    assert out.shape == (3, 5)
    for w, row in zip(words, out):
        assert row.tolist() == py_reverse(list(w))


def test_hist_is_selector_width_of_equal_tokens():
    hist = selector_width(select(tokens, tokens, "=="))
    for w in ["hello", "aaaa", "abcabc", "x"]:
        assert evaluate(hist, w)[0].tolist() == py_hist(list(w))


def test_aggregate_default_single_and_mean():
    # query q selects keys k < q: none at 0 (default), one at 1 (moved), mean after.
    prev = select(indices, indices, "<")
    vals = aggregate(prev, tokens_int, default=-1)
    out = evaluate(vals, [[4, 2, 6, 8]])[0]
    assert out.tolist() == [-1, 4, 3, 4]


def test_mean_of_strings_is_an_error_but_moving_one_is_fine():
    moved = aggregate(select(indices, indices - 1, "=="), tokens, default="_")
    assert evaluate(moved, "abc")[0].tolist() == ["_", "a", "b"]
    averaged = aggregate(select(indices, indices, "<="), tokens)
    with pytest.raises(RASPTypeError):
        evaluate(averaged, "abc")


def test_frac_prevs_original_value():
    # The original paper's frac_prevs on "hello" counting "l": [0, 0, 1/3, 2/4, 2/5].
    frac = aggregate(select(indices, indices, "<="), tokens == "l")
    out = evaluate(frac, "hello")[0]
    np.testing.assert_allclose(out, [0, 0, 1 / 3, 0.5, 0.4])
    assert format_sop_value(out) == "[0.0, 0.0, 0.333, 0.5, 0.4] (floats)"


def test_max_min_reductions_and_kqv_truncation():
    with causal_mode():
        allprev = select(indices, indices, "TRUE")
        runmax = aggregate(allprev, tokens_int, reduction="max")
        runmin = aggregate(allprev, tokens_int, reduction="min")
        mean_trunc = kqv(indices, indices, tokens_int, "TRUE")
    seq = [3, 1, 4, 1, 5]
    assert evaluate(runmax, [seq])[0].tolist() == [max(seq[:i + 1]) for i in range(5)]
    assert evaluate(runmin, [seq])[0].tolist() == [min(seq[:i + 1]) for i in range(5)]
    assert evaluate(mean_trunc, [seq])[0].tolist() == [int(sum(seq[:i + 1]) / (i + 1))
                                                       for i in range(5)]


def test_causal_flag_of_evaluate_masks_every_selector():
    width = selector_width(select(tokens, tokens, "TRUE"))
    assert evaluate(width, "abcd")[0].tolist() == [4, 4, 4, 4]
    assert evaluate(width, "abcd", causal=True)[0].tolist() == [1, 2, 3, 4]


def test_selector_combinators():
    a = select(indices, indices, "<")
    b = select(indices, indices, ">")
    eq = evaluate(~(a | b), "abc")[0]
    assert eq.tolist() == np.eye(3, dtype=bool).tolist()
    assert not evaluate(a & b, "abc")[0].any()


def test_batched_equals_one_at_a_time():
    prog = selector_width(select(tokens, tokens, "<")) * 2 + (indices % 2)
    rng = np.random.default_rng(0)
    batch = ["".join(rng.choice(list("abcd"), 7)) for _ in range(20)]
    together = evaluate(prog, batch)
    for w, row in zip(batch, together):
        assert row.tolist() == evaluate(prog, w)[0].tolist()


def test_bad_inputs_raise_rasp_errors():
    with pytest.raises(RASPValueError):
        evaluate(tokens, [])
    with pytest.raises(RASPValueError):
        evaluate(tokens, ["ab", ""])         # an empty sequence in a ragged batch
    with pytest.raises(RASPTypeError):
        evaluate(tokens + 1, "abc")          # adding a number to strings
    with pytest.raises(RASPError):
        evaluate(tokens_int / (indices - indices), [[1, 2]])
