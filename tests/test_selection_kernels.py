"""rasp/selection.py: the NumPy kernels over a selector matrix agree with plain loops over
every (batch, query) on random matrices, shared (stride-0 batch) and not."""

import numpy as np
import pytest

from rasp.selection import (count_selected, first_selected, grouped_reduce, masked_reduce,
                            selected_sums)


def _cases(seed):
    rng = np.random.default_rng(seed)
    B, Q, K = 3, 5, 7
    sel = rng.random((B, Q, K)) < 0.4
    shared = np.broadcast_to(sel[:1], sel.shape)            # one matrix for the batch
    ints = rng.integers(-50, 50, (B, K))
    floats = rng.normal(size=(B, K))
    return [(sel, ints), (sel, floats), (shared, ints), (shared, floats)]


@pytest.mark.parametrize("seed", range(5))
def test_counts_first_keys_and_sums_follow_their_definition(seed):
    for sel, vals in _cases(seed):
        B, Q, K = sel.shape
        cnt, first, sums = count_selected(sel), first_selected(sel), selected_sums(sel, vals)
        for b in range(B):
            for q in range(Q):
                keys = [k for k in range(K) if sel[b, q, k]]
                assert cnt[b, q] == len(keys)
                assert first[b, q] == (keys[0] if keys else 0)
                assert sums[b, q] == pytest.approx(sum(float(vals[b, k]) for k in keys))


@pytest.mark.parametrize("reduction", ["max", "min"])
def test_masked_reduce_is_the_max_or_min_of_the_selected_values(reduction):
    for sel, vals in _cases(7):
        out = masked_reduce(np.ascontiguousarray(sel), vals, reduction)
        pick = max if reduction == "max" else min
        for b in range(sel.shape[0]):
            for q in range(sel.shape[1]):
                keys = [k for k in range(sel.shape[2]) if sel[b, q, k]]
                if keys:
                    assert out[b, q] == pick(vals[b, k] for k in keys)


def test_grouped_reduce_reads_each_query_s_group():
    codes = np.array([0, 1, 0, 2, 1])            # the group of each key
    vals = np.array([5, 3, 9, 4, 8])
    qc = np.array([[0, 1, 2, 1]])                 # the group each query reads
    count = np.array([[2, 2, 1, 0]])              # no key selected for the last query: 0
    assert grouped_reduce(codes, 3, vals, qc, count, "max").tolist() == [[9, 8, 4, 0]]
    assert grouped_reduce(codes, 3, vals, qc, count, "min").tolist() == [[5, 3, 4, 0]]
