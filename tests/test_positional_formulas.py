"""Each positional encoding against its published formula (Kazemnejad et al. 2023 and sources)."""

import math

import pytest
import torch

from rasp_model.positional import (
    PositionalEncodingError, alibi_bias, alibi_slopes, apply_rotary, check_pe,
    default_rotary_dim, rotary_dim_from_fraction,
    sinusoidal_table, t5_bucket)
from rasp_model import Transformer, TransformerConfig


def test_t5_buckets_at_published_distances():
    # HF T5 _relative_position_bucket, bidirectional=False, 32 buckets, max_distance 128:
    # 50 -> 16 + floor(log(50/16)/log(8)*16) = 16 + floor(8.77) = 24
    expected = {0: 0, 15: 15, 16: 16, 50: 24, 127: 31, 200: 31}
    for n, b in expected.items():
        assert t5_bucket(n) == b, n
    t = t5_bucket(torch.tensor([0, 15, 16, 50, 127, 200]))
    assert t.tolist() == list(expected.values())


def test_t5_bucket_formula_all_distances():
    for n in range(0, 300):
        want = n if n < 16 else min(31, 16 + int(math.floor(math.log(n / 16) / math.log(8) * 16)))
        assert t5_bucket(n) == want
    assert t5_bucket(-5) == 0  # future keys: bucket 0 (unidirectional)


def test_alibi_slopes_powers_of_two_and_interleaving():
    assert alibi_slopes(4) == pytest.approx([2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8])
    assert alibi_slopes(8) == pytest.approx([2 ** -k for k in range(1, 9)])
    # 12 heads (Press et al. reference): the 8-head slopes, then slopes 1,3,5,7 of 16 heads
    s16 = [2 ** (-k / 2) for k in range(1, 17)]
    assert alibi_slopes(12) == pytest.approx([2 ** -k for k in range(1, 9)] + s16[0::2][:4])


def test_alibi_bias_is_minus_slope_times_distance():
    b = alibi_bias(4, 5, 5)
    slopes = alibi_slopes(4)
    for h in range(4):
        for q in range(5):
            for k in range(q + 1):
                assert float(b[h, q, k]) == pytest.approx(-slopes[h] * (q - k))


def test_sinusoidal_table_values():
    d = 8
    t = sinusoidal_table(50, d)
    for p in (0, 1, 7, 49):
        for i in range(d // 2):
            w = 10000 ** (-2 * i / d)
            assert float(t[p, i]) == pytest.approx(math.sin(p * w), abs=1e-6)
            assert float(t[p, d // 2 + i]) == pytest.approx(math.cos(p * w), abs=1e-6)


def test_rope_dot_product_depends_only_on_offset():
    torch.manual_seed(0)
    q = torch.randn(1, 1, 1, 16)
    k = torch.randn(1, 1, 1, 16)
    r = default_rotary_dim(16)
    assert r == 4  # 25% of d_head, as Kazemnejad et al.

    def dot(m, n):
        qm = apply_rotary(q, torch.tensor([m]), r)
        kn = apply_rotary(k, torch.tensor([n]), r)
        return float((qm * kn).sum())

    for delta in (0, 1, 5, 37):
        vals = [dot(n + delta, n) for n in (0, 3, 20, 90)]
        assert max(vals) - min(vals) < 1e-4
    assert abs(dot(5, 0) - dot(9, 0)) > 1e-4  # it does depend on the offset
    # unrotated dims pass through unchanged
    out = apply_rotary(q, torch.tensor([7]), r)
    assert torch.equal(out[..., r:], q[..., r:])
    assert not torch.allclose(out[..., :r], q[..., :r])


def test_rope_full_fraction_rotates_everything():
    assert rotary_dim_from_fraction(16, 1.0) == 16
    with pytest.raises(PositionalEncodingError):
        rotary_dim_from_fraction(16, 0.0)


def test_nope_has_no_positional_parameters_and_is_permutation_equivariant_without_mask():
    cfg = TransformerConfig(n_layers=2, d_model=32, d_head=8, n_heads=4, d_mlp=64, d_vocab=7,
                            pe="nope")
    m = Transformer(cfg)
    names = [n for n, _ in m.named_parameters()]
    assert not any("pos" in n or "t5" in n or "rel" in n for n in names)
    # a bidirectional NoPE model is permutation equivariant (nothing positional at all)
    m2 = Transformer(cfg.replace(attention_dir="bidirectional")).eval()
    x = torch.tensor([[1, 2, 3, 4, 5, 6]])
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    assert torch.allclose(m2(x)[:, perm], m2(x[:, perm]), atol=1e-5)


def test_only_ape_learned_has_w_pos_and_t5_bias_shared():
    for pe in ("ape_learned", "t5"):
        m = Transformer(TransformerConfig(n_layers=3, pe=pe, d_vocab=5))
        names = [n for n, _ in m.named_parameters()]
        if pe == "ape_learned":
            assert "pos_embed.W_pos" in names
        else:
            assert [n for n in names if "rel_bias" in n] == ["t5_bias.rel_bias.weight"]


def test_unknown_pe():
    with pytest.raises(PositionalEncodingError, match="known"):
        check_pe("xpos")
