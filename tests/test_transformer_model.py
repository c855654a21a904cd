"""The shared Transformer: shapes and names (TransformerLens), hooks, save/load, bad input."""

import numpy as np
import pytest
import torch

import dataclasses

from rasp_model import (
    PE_NAMES, ContextLengthError, Transformer, TransformerConfig, TransformerConfigError,
    load_safetensors, save_safetensors)
from rasp_model.config import TL_FIELDS


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
    m = small("ape_learned", normalization_type=None, attn_bias=False, mlp_bias=False)
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
    m = small("ape_learned", normalization_type=None, attn_bias=False, mlp_bias=False).double()
    save_safetensors(m, tmp_path / "d.safetensors")
    m2 = load_safetensors(tmp_path / "d.safetensors")
    assert m2.embed.W_E.dtype == torch.float64
    assert torch.equal(m2.embed.W_E, m.embed.W_E)


def test_embed_init_std_sets_token_embedding_scale_only():
    m = small(d_vocab=200, embed_init_std=1.0)
    assert 0.9 < float(m.embed.W_E.detach().std()) < 1.1
    assert float(m.blocks[0].attn.W_Q.detach().std()) < 0.05


def test_hook_z_has_transformerlens_layout_batch_pos_head_d_head():
    # distinct sizes so no two axes can be confused: batch 2, pos 7, head 3, d_head 5
    torch.manual_seed(0)
    m = small("rope", d_head=6, n_heads=3, d_model=30, normalization_type=None).double().eval()
    x = torch.randint(0, 11, (2, 7))
    _, cache = m.run_with_cache(x)
    z = cache["blocks.1.attn.hook_z"]
    assert z.shape == (2, 7, 3, 6)
    for name in ("hook_q", "hook_k", "hook_v", "hook_rot_q", "hook_rot_k"):
        assert cache[f"blocks.1.attn.{name}"].shape == (2, 7, 3, 6), name
    attn = m.blocks[1].attn
    # independent truth 1: z[b, p, h] = sum_k pattern[b, h, p, k] * v[b, k, h], with v computed
    # here from the layer's input and W_V (no hook of the model involved beyond the pattern)
    resid = cache["blocks.1.hook_resid_pre"]
    v = torch.stack([resid @ attn.W_V[h] + attn.b_V[h] for h in range(3)], dim=2)
    pat = cache["blocks.1.attn.hook_pattern"]
    for b in range(2):
        for p in range(7):
            for h in range(3):
                want = (pat[b, h, p, :, None] * v[b, :, h]).sum(0)
                assert torch.allclose(z[b, p, h], want, atol=1e-12)
    # independent truth 2: the attention output is sum_h z[:, :, h] @ W_O[h] + b_O
    out = sum(z[:, :, h] @ attn.W_O[h] for h in range(3)) + attn.b_O
    assert torch.allclose(out, cache["blocks.1.hook_attn_out"], atol=1e-12)


def test_every_hook_listed_in_the_module_docstring_exists_with_that_shape():
    import rasp_model.transformer as mt
    m = small("ape_learned", n_layers=1).eval()
    x = torch.randint(0, 11, (2, 5))
    _, cache = m.run_with_cache(x)
    sizes = {"batch": 2, "pos": 5, "query": 5, "key": 5, "head": 4, "d_head": 8,
             "d_model": 32, "d_mlp_l": 64}
    listed = 0
    for line in mt.__doc__.splitlines():
        parts = line.split()
        if not parts or not parts[0].startswith(("hook_", "blocks.{l}", "ln_final.hook")):
            continue
        if "[" not in line or "hook" not in parts[0]:
            continue
        shape = line[line.index("[") + 1: line.index("]")].split(", ")
        names = [parts[0]] + [p for p in parts[1:] if p.startswith("hook_")]
        base = parts[0].rsplit(".", 1)[0] + "." if "." in parts[0] else ""
        for n in names:
            full = (n if n == parts[0] else base + n).replace("{l}", "0")
            if "rot_" in full:
                continue  # rope only
            assert full in cache, full
            assert tuple(cache[full].shape) == tuple(sizes[s] for s in shape), full
            listed += 1
    assert listed >= 15
    assert set(cache) <= set(m.hook_names())


def test_every_config_field_has_one_transformer_lens_row():
    names = [f.name for f in TL_FIELDS]
    assert sorted(names) == sorted(f.name for f in dataclasses.fields(TransformerConfig))
    assert len(set(names)) == len(names)


def test_configs_saved_before_the_transformer_lens_names_still_load():
    old = {"n_layers": 2, "d_model": 32, "d_head": 16, "n_heads": 4, "d_mlp": 64,
           "d_vocab": 11, "d_vocab_out": 11, "n_ctx": 16, "pe": "rope", "rope_fraction": 0.25,
           "rope_base": 10000.0, "act": "gelu", "normalization": "none", "attn_scale": False,
           "causal": False, "tied_embeddings": False, "dropout": 0.0, "attn_bias": True,
           "mlp_bias": True, "n_heads_mask": None, "init_std": 0.02, "embed_init_std": None,
           "t5_num_buckets": 32, "t5_max_distance": 128}
    cfg = TransformerConfig.from_dict(old)
    assert (cfg.rotary_dim, cfg.act_fn, cfg.normalization_type, cfg.use_attn_scale,
            cfg.attention_dir) == (4, "gelu", None, False, "bidirectional")
    # the old 25% default and today's default give the same config (run reuse compares these)
    new = TransformerConfig(n_layers=2, d_model=32, d_head=16, n_heads=4, d_mlp=64, d_vocab=11,
                            n_ctx=16, pe="rope", act_fn="gelu", normalization_type=None,
                            use_attn_scale=False, attention_dir="bidirectional")
    assert cfg.to_dict() == new.to_dict()
    full = TransformerConfig.from_dict({**old, "rope_fraction": 1.0})
    assert full.rotary_dim == 16
    nope = TransformerConfig.from_dict({**old, "pe": "nope", "normalization": "pre_ln"})
    assert nope.rotary_dim is None and nope.normalization_type == "LN"


def test_rotary_dim_sets_the_rotated_dimensions():
    torch.manual_seed(0)
    x = torch.randint(0, 11, (1, 6))
    for r in (2, 4, 8):
        m = small("rope", rotary_dim=r, n_layers=1, normalization_type=None).double().eval()
        _, cache = m.run_with_cache(x)
        q, rq = cache["blocks.0.attn.hook_q"], cache["blocks.0.attn.hook_rot_q"]
        assert torch.equal(q[..., r:], rq[..., r:])                       # passed through
        assert not torch.allclose(q[:, 1:, :, :r], rq[:, 1:, :, :r])      # rotated
    for bad in (0, 3, 10):
        with pytest.raises(TransformerConfigError, match="rotary_dim"):
            small("rope", rotary_dim=bad)


def _dense_logits(model, tokens):
    """The forward pass with the structured-sparse path switched off (an observer on hook_q,
    hook_pre of every layer forces the dense products)."""
    handles = []
    for blk in model.blocks:
        if blk.attn is not None:
            handles.append(blk.attn.hook_q.register_forward_hook(lambda m, i, o: None))
        if blk.mlp is not None:
            handles.append(blk.mlp.hook_pre.register_forward_hook(lambda m, i, o: None))
    try:
        with torch.no_grad():
            return model(tokens)
    finally:
        for h in handles:
            h.remove()


@pytest.mark.parametrize("name", ["reverse", "sort", "shuffle_dyck2", "frac_prevs",
                                  "detect_pattern(abc)"])
def test_structured_sparse_inference_equals_the_dense_products(name):
    """Compiled models read and write few residual directions per head / MLP: inference
    without gradients skips the all-zero rows and columns (rasp_model/transformer.py). The logits
    equal the dense products' (up to summation order) on random inputs at every length."""
    from compiler import compile_program
    from compiler.library import peer_programs
    sop, vocab, _, _ = peer_programs(32)[name]
    cm = compile_program(sop, [str(v) for v in vocab], 32)
    model = cm.model
    with torch.no_grad():
        assert any(b.attn is not None and b.attn._sparse_plan() is not None
                   for b in model.blocks)
    rng = np.random.default_rng(0)
    for n in (1, 7, 32):
        tokens = torch.tensor(np.concatenate([np.zeros((4, 1), int),
                                              rng.integers(1, len(vocab) + 1, (4, n))], 1))
        with torch.no_grad():
            sparse = model(tokens)
        dense = _dense_logits(model, tokens)
        assert torch.allclose(sparse, dense, rtol=1e-10, atol=1e-9)


def test_dense_models_and_training_take_the_dense_path():
    """A trained-style model (random dense weights) never takes the sparse path, nor does a
    forward with gradients; changing a weight in place recomputes the plan."""
    cfg = TransformerConfig(n_layers=2, d_model=16, d_head=4, n_heads=2, d_mlp=32, d_vocab=7,
                            n_ctx=9, pe="nope", normalization_type=None, attn_bias=False,
                            mlp_bias=False)
    model = Transformer(cfg)
    model.reset_parameters(0)
    model.eval()
    attn = model.blocks[0].attn
    with torch.no_grad():
        assert attn._sparse_plan() is None and model.blocks[0].mlp._sparse_plan() is None
    assert attn._sparse_plan() is None            # gradients enabled
    with torch.no_grad():
        attn.W_Q[:, 4:] = 0                         # reads 4 of 16 directions now
        attn.W_K[:, 4:] = 0
        attn.W_V[:, 4:] = 0
        attn.W_O[:, :, 4:] = 0
        assert attn._sparse_plan() is not None
        tokens = torch.randint(0, 7, (2, 6))
        assert torch.allclose(model(tokens), _dense_logits(model, tokens), atol=1e-5)
