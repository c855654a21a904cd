"""Probing math on hand-made attention patterns: JSD values, head matching, the T5 fit."""

import math

import numpy as np
import pytest

from analysis.probing import (ProbingError, head_distance, jsd, kazemnejad_distance,
                              match_heads, relative_position_fit, t5_bucket)


def _causal_uniform(n):
    p = np.tril(np.ones((n, n)))
    return p / p.sum(-1, keepdims=True)


def _random_causal(rng, n, heads, temp=3.0):
    logits = rng.normal(size=(heads, n, n)) * temp
    logits = np.where(np.tril(np.ones((n, n), bool)), logits, -np.inf)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


def test_jsd_identical_is_zero_and_disjoint_is_one():
    p = np.array([0.2, 0.3, 0.5])
    assert jsd(p, p) == pytest.approx(0.0, abs=1e-12)
    assert jsd([1.0, 0.0, 0.0], [0.0, 0.5, 0.5]) == pytest.approx(1.0)


def test_jsd_known_values_by_hand():
    # P = (1/2, 1/2), Q = (1, 0): M = (3/4, 1/4).
    # KL(P||M) = 1/2 log2(2/3) + 1/2 log2(2); KL(Q||M) = log2(4/3).
    expected = 0.5 * (0.5 * math.log2(2 / 3) + 0.5 * 1.0) + 0.5 * math.log2(4 / 3)
    assert jsd([0.5, 0.5], [1.0, 0.0]) == pytest.approx(expected)
    # symmetric
    assert jsd([1.0, 0.0], [0.5, 0.5]) == pytest.approx(expected)
    # Kazemnejad's variant 1/2[KL(M||P) + KL(M||Q)] on (1/2,1/2) vs (1/4,3/4): M = (3/8, 5/8)
    p, q, m = np.array([.5, .5]), np.array([.25, .75]), np.array([3 / 8, 5 / 8])
    kl = lambda a, b: float(np.sum(a * np.log2(a / b)))  # noqa: E731
    assert jsd(p, q, variant="kazemnejad") == pytest.approx(0.5 * (kl(m, p) + kl(m, q)), rel=1e-6)
    with pytest.raises(ProbingError):
        jsd(p, q, variant="bogus")


def test_jsd_is_scipy_jensenshannon_squared():
    from scipy.spatial.distance import jensenshannon
    rng = np.random.default_rng(1)
    p, q = rng.dirichlet(np.ones(7), size=20), rng.dirichlet(np.ones(7), size=20)
    ours = jsd(p, q)
    ref = jensenshannon(p, q, axis=-1, base=2) ** 2
    np.testing.assert_allclose(ours, ref, atol=1e-9)
    assert ((ours >= 0) & (ours <= 1)).all()


def test_head_distance_averages_rows_and_skips_padding():
    n = 4
    a = np.zeros((1, n, n))
    b = np.zeros((1, n, n))
    a[0] = np.eye(n)                         # each query attends to itself
    b[0, :, 0] = 1.0                         # each query attends to BOS
    # Row 0 identical (JSD 0), rows 1..3 disjoint (JSD 1): mean 3/4, or 1 skipping BOS.
    assert head_distance(a, b) == pytest.approx(0.75)
    assert head_distance(a, b, first_query=1) == pytest.approx(1.0)
    # Padding rows (all zero in both) are ignored.
    ap = np.zeros((1, 6, 6)); bp = np.zeros((1, 6, 6))
    ap[:, :n, :n], bp[:, :n, :n] = a, b
    assert head_distance(ap, bp) == pytest.approx(0.75)
    with pytest.raises(ProbingError):
        head_distance(a, bp)


def test_kazemnejad_distance_min_over_heads_mean_over_layers():
    n = 6
    uni, diag = _causal_uniform(n), np.eye(n)
    bos = np.zeros((n, n)); bos[:, 0] = 1
    # model A: layer 0 heads (uniform, diag); layer 1 heads (bos, bos)
    a = [np.stack([uni, diag])[None], np.stack([bos, bos])[None]]
    # model B: layer 0 heads (bos, uniform) -> min 0 (uniform vs uniform);
    #          layer 1 heads (diag,) -> bos vs diag is disjoint on rows 1.. -> 1
    b = [np.stack([bos, uni])[None], np.stack([diag])[None]]
    d = kazemnejad_distance(a, b)
    assert d.per_layer[0] == pytest.approx(0.0, abs=1e-12)
    assert d.argmin[0] == (0, 1)
    assert d.per_layer[1] == pytest.approx(1.0)
    assert d.mean == pytest.approx(0.5)
    with pytest.raises(ProbingError):
        kazemnejad_distance(a, b[:1])


def test_match_heads_recovers_a_permutation():
    rng = np.random.default_rng(0)
    n, ex = 8, 3
    heads = [_random_causal(rng, n, 3)[None].repeat(ex, 0), _random_causal(rng, n, 2)[None].repeat(ex, 0)]
    compiled = heads                                             # [ex, head, q, k] per layer
    flat = [(l, h) for l in range(2) for h in range(heads[l].shape[1])]
    perm = rng.permutation(len(flat))
    # a "trained" model with 1 layer of 5 heads holding the compiled heads in permuted order
    trained = [np.stack([heads[flat[i][0]][:, flat[i][1]] for i in perm], axis=1)]
    m = match_heads(trained, compiled)
    assert len(m.pairs) == 5
    for t, c, dist in m.pairs:
        assert flat[perm[t[1]]] == c
        assert dist == pytest.approx(0.0, abs=1e-9)
    assert m.mean == pytest.approx(0.0, abs=1e-9)


def test_match_heads_prefers_global_optimum_over_greedy():
    # trained head 0 is close to compiled 0 and 1; trained head 1 only to compiled 0.
    n = 5
    diag, uni = np.eye(n), _causal_uniform(n)
    bos = np.zeros((n, n)); bos[:, 0] = 1
    mix = 0.5 * (diag + uni)
    trained = [np.stack([mix, diag])[None]]
    compiled = [np.stack([diag, uni])[None]]
    m = match_heads(trained, compiled)
    assigned = {t: c for t, c, _ in m.pairs}
    assert assigned[(0, 1)] == (0, 0) and assigned[(0, 0)] == (0, 1)


def test_t5_bucket_values():
    # distance n < 16 -> n; else 16 + floor(log(n/16)/log(8) * 16), capped at 31
    d = np.array([0, 1, 15, 16, 17, 32, 50, 64, 127, 128, 1000])
    expected = [0, 1, 15, 16, 16, 21, 24, 26, 31, 31, 31]
    assert t5_bucket(d).tolist() == expected
    assert t5_bucket(-3).tolist() == 0                          # keys after the query
    assert t5_bucket(np.array([-3, 3]), bidirectional=True).tolist() == [16 + 3, 3]


def test_relative_position_fit_recovers_a_t5_bias_pattern():
    rng = np.random.default_rng(0)
    w = rng.normal(size=32) * 2.0
    n = 40
    rel = np.arange(n)[:, None] - np.arange(n)[None]
    logits = np.where(rel >= 0, w[t5_bucket(rel)], -np.inf)
    p = np.exp(logits - logits.max(-1, keepdims=True)); p /= p.sum(-1, keepdims=True)
    pats = np.stack([p, p])
    pats[1, 25:] = 0                                             # a shorter example, padded
    pats[1, :, 25:] = 0
    fit = relative_position_fit(pats)
    assert fit.jsd < 1e-6
    # a content-dependent head (random per example) is far from any relative-position fit
    noisy = np.stack([_random_causal(rng, n, 1, temp=4.0)[0] for _ in range(4)])
    assert relative_position_fit(noisy).jsd > 0.1
    with pytest.raises(ProbingError):
        relative_position_fit(np.zeros((2, 3, 3, 3, 3)))
