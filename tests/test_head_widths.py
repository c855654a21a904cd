"""Per-head widths (``TransformerConfig.d_head_widths``): a model with narrow heads computes
exactly what the same model with the heads zero-padded to ``d_head`` computes, stores its
attention weights unpadded, and files written before the field existed still load."""

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from rasp_model import Transformer, TransformerConfig
from rasp_model.config import TransformerConfigError
from rasp_model.io import load_safetensors, read_safetensors_metadata, save_safetensors


def _cfg(**kw):
    base = dict(n_layers=2, d_model=12, d_head=4, n_heads=[2, 1], d_mlp=8, d_vocab=7, n_ctx=9,
                pe="ape_learned", normalization_type="LN")
    base.update(kw)
    return TransformerConfig(**base)


def _narrow(seed=0):
    """A model with widths [[1, 3], [2]] and its uniform twin with the padding zeroed."""
    narrow = Transformer(_cfg(d_head_widths=[[1, 3], [2]]))
    narrow.reset_parameters(seed)
    wide = Transformer(_cfg())
    sd = {k: v.clone() for k, v in narrow.state_dict().items()}
    for l, ws in enumerate([[1, 3], [2]]):
        for h, w in enumerate(ws):
            for n in ("W_Q", "W_K", "W_V"):
                sd[f"blocks.{l}.attn.{n}"][h, :, w:] = 0
            for n in ("b_Q", "b_K", "b_V"):
                sd[f"blocks.{l}.attn.{n}"][h, w:] = 0
            sd[f"blocks.{l}.attn.W_O"][h, w:, :] = 0
    wide.load_state_dict(sd)
    return narrow, wide


def test_narrow_heads_equal_zero_padded_heads_and_ignore_padding():
    narrow, wide = _narrow()
    tokens = torch.randint(0, 7, (3, 8))
    ref = wide(tokens)
    assert torch.allclose(narrow(tokens), ref, atol=1e-6)
    with torch.no_grad():                      # garbage in the padding changes nothing
        narrow.blocks[0].attn.W_Q[0, :, 1:] = 5.0
        narrow.blocks[0].attn.W_O[1, 3:, :] = -7.0
    assert torch.allclose(narrow(tokens), ref, atol=1e-6)


def test_parameter_count_is_unpadded():
    narrow, wide = _narrow()
    d = 12
    # q, k, v, o of width w each hold d*w weights; biases b_Q/b_K/b_V w each
    removed = sum((4 * d + 3) * (4 - w) for w in (1, 3, 2))
    assert narrow.num_parameters() == wide.num_parameters() - removed
    assert narrow.num_nonzero_parameters() <= narrow.num_parameters()


def test_safetensors_holds_unpadded_heads_and_round_trips(tmp_path):
    narrow, _ = _narrow(seed=3)
    save_safetensors(narrow, tmp_path / "m.safetensors")
    stored = load_file(tmp_path / "m.safetensors")
    assert stored["blocks.0.attn.W_Q"].shape == (12, 1 + 3)
    assert stored["blocks.0.attn.W_O"].shape == (1 + 3, 12)
    assert stored["blocks.1.attn.b_V"].shape == (2,)
    back = load_safetensors(tmp_path / "m.safetensors")
    tokens = torch.randint(0, 7, (2, 9))
    assert torch.equal(back(tokens), narrow.eval()(tokens))
    assert back.cfg.d_head_widths == [[1, 3], [2]]


def test_files_without_head_widths_load_unchanged(tmp_path):
    """A file as written before d_head_widths existed (config without the key, padded
    [n_heads, d_model, d_head] tensors) loads, and uniform configs are saved without the key."""
    m = Transformer(_cfg())
    m.reset_parameters(1)
    cfg = m.cfg.to_dict()
    assert "d_head_widths" not in cfg
    save_file({k: v.contiguous() for k, v in m.state_dict().items()}, tmp_path / "old.safetensors",
              metadata={"config": json.dumps(cfg), "format": "rasp-lab-transformer"})
    back = load_safetensors(tmp_path / "old.safetensors")
    assert back.cfg.d_head_widths is None
    tokens = torch.randint(0, 7, (2, 9))
    assert torch.equal(back(tokens), m.eval()(tokens))
    save_safetensors(back, tmp_path / "new.safetensors")
    assert load_file(tmp_path / "new.safetensors")["blocks.0.attn.W_Q"].shape == (2, 12, 4)
    assert "d_head_widths" not in json.loads(
        read_safetensors_metadata(tmp_path / "new.safetensors")["config"])


@pytest.mark.parametrize("widths", [[[1, 5], [2]], [[1], [2]], [[0, 1], [2]]])
def test_bad_head_widths_are_rejected(widths):
    with pytest.raises(TransformerConfigError, match="d_head_widths"):
        _cfg(d_head_widths=widths)
