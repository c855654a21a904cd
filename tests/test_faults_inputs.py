"""Issue 29, items 1 and 2 (the parts outside training): absurd model shapes, deeply nested
files and huge REPL values end in one clear line before anything is allocated, never a
traceback or an out-of-memory kill."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def rasp(args, env=None, timeout=300, stdin=None):
    e = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "rasp_cli.main", *args], cwd=ROOT, env=e,
                          input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


# -- model shapes against the model budget ---------------------------------------------------

@pytest.mark.parametrize("cfg", [
    dict(n_layers=2, d_model=16, n_heads=2, d_head=8, d_mlp=32, d_vocab=7, n_ctx=10,
         pe="ape_learned"),
    dict(n_layers=3, d_model=12, n_heads=[3, 0, 1], d_head=4, d_mlp=[0, 5, 7], d_vocab=5,
         d_vocab_out=9, n_ctx=6, pe="t5", attn_bias=False, relative_attention_num_buckets=8),
    dict(n_layers=1, d_model=8, n_heads=1, d_head=8, d_mlp=16, d_vocab=5, n_ctx=4, pe="rope",
         normalization_type=None, mlp_bias=False, tied_embeddings=True),
    dict(n_layers=0, d_model=4, d_head=2, n_heads=1, d_mlp=1, d_vocab=3, n_ctx=3,
         pe="ape_sinusoidal"),
])
def test_parameter_count_is_the_built_models(cfg):
    from rasp_model import Transformer, TransformerConfig
    c = TransformerConfig(**cfg)
    assert c.parameter_count() == sum(p.numel() for p in Transformer(c).parameters())


@pytest.mark.parametrize("change, words", [
    (dict(d_model=10 ** 9), "model budget"),
    (dict(d_mlp=[10 ** 8, 1]), "model budget"),
    (dict(n_layers=100_000, n_heads=1, d_mlp=1), "n_layers=100,000"),
    (dict(n_layers=10 ** 15, n_heads=1, d_mlp=1), "n_layers=1,000,000,000,000,000"),
    (dict(d_model=10 ** 400), "model budget"),
    (dict(pe="t5", relative_attention_num_buckets=10 ** 12), "model budget"),
    (dict(pe="t5", relative_attention_num_buckets=0), "positive int"),
])
def test_absurd_model_shapes_are_refused_before_allocation(change, words):
    """Refused at once (no per-layer loop over 10^15 layers, no float overflow of 10^400)."""
    from rasp_model import TransformerConfig, TransformerConfigError
    base = dict(n_layers=2, d_model=16, n_heads=2, d_head=8, d_mlp=[32, 32], d_vocab=7,
                n_ctx=10)
    if "n_layers" in change or "d_mlp" in change:
        base.pop("d_mlp")
    t0 = time.perf_counter()
    with pytest.raises(TransformerConfigError, match=words):
        TransformerConfig(**{**base, **change})
    assert time.perf_counter() - t0 < 1.0


def test_the_model_budget_can_be_raised(monkeypatch):
    import rasp_model.config as config
    shape = dict(n_layers=2, d_model=256, d_mlp=1024, d_vocab=10, n_ctx=10)
    monkeypatch.setattr(config, "MAX_MODEL_BYTES", 2 ** 20)
    with pytest.raises(config.TransformerConfigError, match="1 MiB"):
        config.TransformerConfig(**shape)
    monkeypatch.setattr(config, "MAX_MODEL_BYTES", 64 * 2 ** 20)
    assert config.TransformerConfig(**shape).memory_bytes() < 64 * 2 ** 20


def test_train_with_a_huge_shape_is_one_line(tmp_path):
    for setting in ("d_model=1000000000", "n_layers=100000"):
        p = rasp(["train", "copy_unique", "--pe", "nope", "--steps", "1", "--set", setting,
                  "-o", str(tmp_path / "run")])
        assert p.returncode == 2, p.stderr[-800:]
        assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
        assert "model budget" in p.stderr


def test_a_weight_file_claiming_100000_layers_is_refused_before_building(tmp_path):
    """A small file whose metadata config says n_layers 100000 (it drove probe and report
    past 4 GB) is refused by the loader, which builds nothing first."""
    import torch
    from safetensors.torch import save_file
    from rasp_model import load_safetensors
    cfg = dict(n_layers=100_000, d_model=2, d_head=2, n_heads=1, d_mlp=1, d_vocab=3, n_ctx=4)
    path = tmp_path / "model.safetensors"
    save_file({"embed.W_E": torch.zeros(3, 2)}, str(path),
              metadata={"config": json.dumps(cfg), "format": "rasp-lab-transformer"})
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="n_layers=100,000 would need more than the model"):
        load_safetensors(path)
    assert time.perf_counter() - t0 < 2.0
