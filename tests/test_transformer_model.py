"""The shared Transformer: shapes and names (contract D), hooks, save/load, bad input."""

import numpy as np
import pytest
import torch

from model import (
    PE_NAMES, ContextLengthError, Transformer, TransformerConfig, TransformerConfigError,
    load_safetensors, save_safetensors)


def small(pe="nope", **kw):
    base = dict(n_layers=2, d_model=32, d_head=8, n_heads=4, d_mlp=64, d_vocab=11, n_ctx=16,
                pe=pe)
    base.update(kw)
    return Transformer(TransformerConfig(**base))


def test_parameter_names_and_shapes_follow_transformerlens():
    m = small("ape_learned", n_layers=3, n_heads=[2, 0, 3], d_mlp=[0, 20, 12], d_vocab_out=5)
    shapes = {n: tuple(p.shape) for n, p in m.named_parameters()}
    assert shapes["embed.W_E"] == (11, 32)
    assert shapes["pos_embed.W_pos"] == (16, 32)
    assert shapes["blocks.0.attn.W_Q"] == (2, 32, 8)
    assert shapes["blocks.0.attn.b_K"] == (2, 8)
    assert shapes["blocks.0.attn.W_O"] == (2, 8, 32)
    assert shapes["blocks.0.attn.b_O"] == (32,)
    assert shapes["blocks.2.attn.W_V"] == (3, 32, 8)
    assert not any(n.startswith("blocks.1.attn") for n in shapes)  # 0 heads: no attention
    assert not any(n.startswith("blocks.0.mlp") for n in shapes)   # width 0: no MLP
    assert shapes["blocks.1.mlp.W_in"] == (32, 20)
    assert shapes["blocks.1.mlp.W_out"] == (20, 32)
    assert shapes["blocks.1.ln2.w"] == (32,)
    assert shapes["ln_final.b"] == (32,)
    assert shapes["unembed.W_U"] == (32, 5)
    assert shapes["unembed.b_U"] == (5,)
    x = torch.randint(0, 11, (2, 9))
    assert m(x).shape == (2, 9, 5)


def test_compiled_style_config_has_no_biases_and_no_layernorm():
    m = small("ape_learned", normalization="none", attn_bias=False, mlp_bias=False)
    names = [n for n, _ in m.named_parameters()]
    assert not any((".b_" in n and n != "unembed.b_U") or "ln" in n for n in names)
    assert "unembed.b_U" in names


@pytest.mark.parametrize("pe", PE_NAMES)
def test_hooks_do_not_change_outputs_and_patterns_are_distributions(pe):
    torch.manual_seed(0)
    m = small(pe).eval()
    x = torch.randint(0, 11, (3, 10))
    plain = m(x)
    logits, cache = m.run_with_cache(x)
    assert torch.equal(plain, logits)
    assert torch.equal(m(x), plain)  # hooks removed afterwards
    pat = cache["blocks.1.attn.hook_pattern"]
    assert pat.shape == (3, 4, 10, 10)
    assert torch.allclose(pat.sum(-1), torch.ones(3, 4, 10), atol=1e-5)
    assert float(pat.triu(1).abs().max()) == 0.0  # causal: no weight on future keys
    for name in ("blocks.0.hook_resid_pre", "blocks.0.hook_attn_out", "blocks.0.hook_mlp_out",
                 "blocks.1.hook_resid_post"):
        assert cache[name].shape == (3, 10, 32)
    pats = m.attention_patterns(x)
    assert len(pats) == 2 and isinstance(pats[0], np.ndarray)
    assert np.allclose(pats[1], pat.numpy())


def test_causal_model_prefix_outputs_do_not_depend_on_the_future():
    torch.manual_seed(1)
    for pe in PE_NAMES:
        m = small(pe).eval()
        x = torch.randint(0, 11, (2, 12))
        y = x.clone()
        y[:, 8:] = (y[:, 8:] + 1) % 11
        assert torch.allclose(m(x)[:, :8], m(y)[:, :8], atol=1e-5), pe


@pytest.mark.parametrize("pe", PE_NAMES)
def test_save_load_round_trip(tmp_path, pe):
    m = small(pe, n_layers=3, n_heads=[4, 1, 2], d_mlp=[8, 0, 16], tied_embeddings=True).eval()
    p = tmp_path / "m.safetensors"
    save_safetensors(m, p, {"task": "copy_unique"})
    m2 = load_safetensors(p)
    assert m2.cfg == m.cfg
    assert m2.metadata["task"] == "copy_unique"
    x = torch.randint(0, 11, (2, 7))
    assert torch.equal(m(x), m2(x))
    assert [f for f in p.parent.iterdir()] == [p]  # no temp file left behind


def test_load_rejects_bad_files(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="safetensors"):
        load_safetensors(bad)
    with pytest.raises(FileNotFoundError):
        load_safetensors(tmp_path / "missing.safetensors")
    from safetensors.torch import save_file
    plain = tmp_path / "plain.safetensors"
    save_file({"x": torch.zeros(2)}, plain)
    with pytest.raises(ValueError, match="config"):
        load_safetensors(plain)


def test_bad_config_and_input_give_clear_errors():
    with pytest.raises(TransformerConfigError, match="pe must be one of"):
        TransformerConfig(pe="sinus")
    with pytest.raises(TransformerConfigError, match="n_heads has 1 entries"):
        TransformerConfig(n_layers=2, n_heads=[4])
    with pytest.raises(TransformerConfigError, match="unknown config keys"):
        TransformerConfig.from_dict({"layers": 2})
    m = small()
    with pytest.raises(ValueError, match="token ids"):
        m(torch.tensor([[0, 11]]))
    with pytest.raises(ValueError, match="integer"):
        m(torch.zeros(1, 3))


def test_ape_learned_beyond_n_ctx_raises_context_error_others_extrapolate():
    x = torch.zeros(1, 20, dtype=torch.long)
    with pytest.raises(ContextLengthError, match="n_ctx=16"):
        small("ape_learned")(x)
    for pe in ("nope", "ape_sinusoidal", "t5", "alibi", "rope"):
        assert small(pe)(x).shape == (1, 20, 11)


def test_position_offset_shifts_absolute_encodings_only():
    torch.manual_seed(0)
    x = torch.randint(0, 11, (1, 6))
    for pe in PE_NAMES:
        m = small(pe).eval()
        same = torch.allclose(m(x), m(x, pos_offset=3), atol=1e-5)
        # rope logits are relative but the value path is not rotated: offset-invariant too
        assert same == (pe in ("nope", "t5", "alibi", "rope")), pe


def test_head_mask_silences_a_head():
    m = small(n_heads_mask=[[1, 1, 1, 1], [0, 0, 0, 0]]).eval()
    x = torch.randint(0, 11, (1, 5))
    _, cache = m.run_with_cache(x)
    assert float(cache["blocks.1.hook_attn_out"].abs().max()) == pytest.approx(
        float(m.blocks[1].attn.b_O.detach().abs().max()), abs=1e-6)


def test_float64_model_round_trips_in_float64(tmp_path):
    m = small("ape_learned", normalization="none", attn_bias=False, mlp_bias=False).double()
    save_safetensors(m, tmp_path / "d.safetensors")
    m2 = load_safetensors(tmp_path / "d.safetensors")
    assert m2.embed.W_E.dtype == torch.float64
    assert torch.equal(m2.embed.W_E, m.embed.W_E)


def test_embed_init_std_sets_token_embedding_scale_only():
    m = small(d_vocab=200, embed_init_std=1.0)
    assert 0.9 < float(m.embed.W_E.detach().std()) < 1.1
    assert float(m.blocks[0].attn.W_Q.detach().std()) < 0.05
