"""Probing math on hand-made attention patterns: JSD values, head matching, the T5 fit."""

import math

import numpy as np
import pytest

from analysis.probing.metrics import (ProbingError, head_distance, jsd, kazemnejad_distance,
                              match_heads, relative_position_fit)
from rasp_model.positional import t5_bucket


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
    # Kazemnejad's variant 1/2[KL(M||P) + KL(M||Q)] on (1/2,1/2) vs (1/4,3/4): M = (3/8, 5/8),
    # natural log (nats) as the released code's torch.nn.KLDivLoss
    p, q, m = np.array([.5, .5]), np.array([.25, .75]), np.array([3 / 8, 5 / 8])
    kl = lambda a, b: float(np.sum(a * np.log(a / b)))  # noqa: E731
    assert jsd(p, q, variant="kazemnejad") == pytest.approx(0.5 * (kl(m, p) + kl(m, q)), rel=1e-9)
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
    assert t5_bucket(-3) == 0                                   # keys after the query
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


# ------------------------------------------------------------------------------------------
# The released code of Kazemnejad et al. 2023 (McGill-NLP/length-generalization,
# src/analyzers/attention_kl_analyzer.py and notebooks/plot_attention_kl_final.ipynb), ported
# line by line to plain NumPy / torch, as the independent truth for our "kazemnejad" variant and
# "released" aggregation.
# ------------------------------------------------------------------------------------------

def _released_jsd(p, q):
    """torch_compute_jensen_shannon_divergence: 0.5 * (KLDivLoss(p.log(), m) + ...(q.log(), m))."""
    import torch
    p, q = torch.tensor(p), torch.tensor(q)
    m = 0.5 * (p + q)
    kl = torch.nn.KLDivLoss(reduction="sum", log_target=False)
    return float(0.5 * (kl(p.log(), m) + kl(q.log(), m)))


def _released_jsd_two_matrix(m1, m2):
    """compute_jsd_two_matrix: mean over every query row l (query 0 included) of row[:l + 1]."""
    return float(np.mean([_released_jsd(m1[l, : l + 1], m2[l, : l + 1])
                          for l in range(m1.shape[0])]))


def _released_distance(nope_maps, pe_maps):
    """attention_kl_analyzer + notebook: per (sample, layer) the min over combinations(H, 2) of
    jsd(no_pe[tgt], attn[src]); then the mean over samples and layers.

    ``*_maps[sample][layer]`` is ``[heads, seq, seq]`` of that sample's own length."""
    import itertools
    mins = []
    for s in range(len(pe_maps)):
        for l in range(len(pe_maps[s])):
            h = pe_maps[s][l].shape[0]
            vals = [_released_jsd_two_matrix(nope_maps[s][l][tgt], pe_maps[s][l][src])
                    for src, tgt in itertools.combinations(range(h), 2)]
            mins.append(min(vals))
    return float(np.mean(mins))


def _pad(maps):
    """[sample][layer] of [heads, seq_s, seq_s] -> list over layers of [sample, heads, S, S]."""
    from analysis.probing.capture import pad_patterns
    return pad_patterns(maps)


def _handmade_models(rng):
    """Two 2-layer, 3-head models on 3 samples of lengths 4, 6, 5 (hand-made causal patterns:
    uniform, previous-token-ish, BOS-heavy, plus random ones)."""
    def model(seed_shift):
        maps = []
        for n in (4, 6, 5):
            uni = _causal_uniform(n)
            prev = np.tril(np.ones((n, n))) * 0.05 + np.eye(n, k=-1) * 0.9 + np.eye(n) * 0.05
            prev = prev / prev.sum(-1, keepdims=True)
            bos = np.tril(np.ones((n, n))) * 0.1
            bos[:, 0] += 1.0
            bos = bos / bos.sum(-1, keepdims=True)
            layer0 = np.stack([uni, prev, bos])[np.roll(np.arange(3), seed_shift)]
            layer1 = _random_causal(rng, n, 3, temp=2.0)
            maps.append([layer0, layer1])
        return maps
    return model(0), model(1)


def test_kazemnejad_variant_is_the_released_jsd_in_nats():
    rng = np.random.default_rng(3)
    for n in (1, 2, 5):
        p, q = rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(n))
        assert float(jsd(p, q, variant="kazemnejad")) == pytest.approx(_released_jsd(p, q),
                                                                       rel=1e-9, abs=1e-12)
    # a causal row padded with masked (zero) keys scores as the released slice [:l + 1]
    m1, m2 = _random_causal(rng, 6, 2)
    assert float(np.mean(jsd(m1, m2, variant="kazemnejad"))) == pytest.approx(
        _released_jsd_two_matrix(m1, m2), rel=1e-9)


def test_released_aggregation_matches_the_ported_released_code():
    rng = np.random.default_rng(5)
    nope, other = _handmade_models(rng)
    ours = kazemnejad_distance(_pad(nope), _pad(other), aggregation="released")
    assert ours.variant == "kazemnejad" and ours.units == "nats"
    assert ours.mean == pytest.approx(_released_distance(nope, other), rel=1e-9)
    # a model against itself: the released i < j pairing never pairs a head with itself
    self_released = kazemnejad_distance(_pad(nope), _pad(nope), aggregation="released")
    assert self_released.mean == pytest.approx(_released_distance(nope, nope), rel=1e-9)
    assert self_released.mean > 0.01
    # ... while the standard aggregation (all H x H pairs) scores it exactly 0
    assert kazemnejad_distance(_pad(nope), _pad(nope)).mean == pytest.approx(0.0, abs=1e-12)
    # the two aggregations are different numbers on the same models
    std = kazemnejad_distance(_pad(nope), _pad(other))
    assert std.aggregation == "standard" and std.units == "bits"
    with pytest.raises(ProbingError):
        kazemnejad_distance(_pad(nope), _pad(other), aggregation="bogus")
    with pytest.raises(ProbingError):        # released needs equal head counts >= 2
        kazemnejad_distance([a[:, :1] for a in _pad(nope)], [a[:, :1] for a in _pad(other)],
                            aggregation="released")


def test_reference_pairs_follow_the_released_seed_pairing():
    from analysis.probing.metrics import reference_pairs
    labels = ["nope/seed0", "nope/seed1", "nope/seed2", "t5/seed0", "t5/seed1", "rope/seed5"]
    assert reference_pairs(labels) == [
        ("nope/seed0", "nope/seed1"), ("nope/seed1", "nope/seed2"), ("nope/seed2", "nope/seed0"),
        ("nope/seed0", "t5/seed0"), ("nope/seed1", "t5/seed1"),
        ("nope/seed0", "rope/seed5")]          # no NoPE seed 5: the first NoPE seed
    assert reference_pairs(["nope/seed0", "nope/seed1", "t5/seed1"]) == [
        ("nope/seed0", "nope/seed1"), ("nope/seed1", "t5/seed1")]
    assert reference_pairs(["t5/seed0"]) == []


# ---- cross-seed distances and resampling over probe sequences (issue 25 item 3) ----------

def _model(rng, examples=6, layers=2, heads=4, n=9):
    """Patterns ``[example, layer, head, query, key]`` of a random causal model."""
    return np.stack([np.stack([_random_causal(rng, n, heads) for _ in range(layers)])
                     for _ in range(examples)])


@pytest.mark.parametrize("aggregation", ["standard", "released"])
def test_replicates_recompute_the_distance_on_resampled_sequences(aggregation):
    rng = np.random.default_rng(3)
    a, b = _model(rng), _model(rng)
    d = kazemnejad_distance(a, b, aggregation=aggregation)
    # all ones: the distance itself; the indicator of a subset (or bootstrap counts): the
    # distance computed from scratch on that subset (duplicates = repeated sequences)
    assert d.replicates(np.ones((1, 6)))[0] == pytest.approx(d.mean, rel=1e-12)
    picks = [[0, 2, 3], [5, 5, 1, 0, 0, 4], [1]]
    w = np.zeros((len(picks), 6))
    for r, pick in enumerate(picks):
        np.add.at(w[r], pick, 1)
    got = d.replicates(w)
    for r, pick in enumerate(picks):
        want = kazemnejad_distance(a[pick], b[pick], aggregation=aggregation).mean
        assert got[r] == pytest.approx(want, rel=1e-10)
    with pytest.raises(ProbingError):
        d.replicates(np.ones((1, 5)))


def test_cross_seed_pairs_never_pair_a_seed_with_itself():
    from analysis.probing.metrics import cross_seed_pairs
    labels = [f"{pe}/seed{s}" for pe in ("nope", "t5", "alibi") for s in range(3)]
    pairs = cross_seed_pairs(labels)
    want = {(f"nope/seed{r}", f"{pe}/seed{s}") for pe in ("nope", "t5", "alibi")
            for s in range(3) for r in range(3) if r != s}
    assert set(pairs) == want and len(pairs) == len(want)


def test_cross_seed_distances_are_means_over_the_other_nope_seeds():
    from analysis.probing.metrics import probe
    rng = np.random.default_rng(5)
    models = {f"{pe}/seed{s}": list(np.moveaxis(_model(rng, examples=4), 1, 0))
              for pe in ("nope", "t5") for s in range(3)}
    seqs = [[0] * 9 for _ in range(4)]
    res = probe("t", seqs, models, relpos=False)
    for agg in ("standard", "released"):
        cross = res.cross_seed_distances(agg, size=50)
        assert set(cross) == {"nope", "t5"}
        for pe in ("nope", "t5"):
            assert cross[pe].seeds == [0, 1, 2]
            assert cross[pe].replicates.shape == (3, 50)
            for i, s in enumerate(range(3)):
                want = np.mean([kazemnejad_distance(models[f"nope/seed{r}"],
                                                    models[f"{pe}/seed{s}"],
                                                    aggregation=agg).mean
                                for r in range(3) if r != s])
                assert cross[pe].values[i] == pytest.approx(want, rel=1e-12)
        # a comparison group restricted by labels keeps only its own models
        part = res.cross_seed_distances(agg, labels={"nope/seed0", "nope/seed1", "t5/seed0"},
                                        size=10)
        assert part["t5"].seeds == [0] and part["nope"].seeds == [0, 1]


def test_probe_sequences_of_next_set_tasks_are_the_inputs():
    """Huang et al.'s next-character sets: the model reads BOS w only (the labels are outputs),
    so probing captures attention on BOS w; a next-token task keeps prompt + answer minus EOS."""
    import tasks
    from analysis.probing.capture import probe_sequences
    t = tasks.get_task("dyck1_depth2_nextchar")
    seqs = probe_sequences(t, [4, 6], per_length=3)
    assert [len(s) for s in seqs] == [5, 5, 5, 7, 7, 7]
    assert all(s[0] == t.vocab.bos and set(t.vocab.decode(s[1:])) <= {"a", "b"} for s in seqs)
    copy = tasks.get_task("copy_unique")
    (s,) = probe_sequences(copy, [3], per_length=1)
    assert len(s) == 1 + 3 + 1 + 3 and copy.vocab.eos not in s        # BOS x SEP x, no EOS
