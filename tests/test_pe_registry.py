"""A positional encoding is one registered object (``rasp_model.pe_names``, issue 48 item 4).

The proof that adding one touches no other file: this test defines a new encoding (a fixed
random bias per head, query and key, not learned), registers it, and the one Transformer, the
trainer, the evaluation and the TransformerLens export all take it from the registry.
"""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from analysis.training.stacked import train_group
from analysis.training.trainer import TrainingError, resolve_spec, resolve_task, train
from compiler.export import TransformerLensExportError, transformer_lens_config
from rasp_model import Transformer, TransformerConfig
from rasp_model.pe_names import (BIAS, PE_NAMES, PositionalEncoding, PositionalEncodingError,
                                 get_pe, register_pe, registered_pes, unregister_pe)

ROOT = Path(__file__).resolve().parent.parent
MAX_LEN = 64


class FixedRandomBias(PositionalEncoding):
    """A bias ``[head, query, key]`` drawn once from N(0, 1) (seed 0) and never trained."""

    name, label, source = "fixed_random_bias", "fixed random bias", "this test"
    applies = BIAS

    def __init__(self):
        self.table = torch.randn(8, MAX_LEN, MAX_LEN, generator=torch.Generator().manual_seed(0))

    def attention_bias(self, shared, n_heads, seq, device):
        return self.table[:n_heads, :seq, :seq].to(device)


@pytest.fixture
def toy():
    register_pe(FixedRandomBias)
    try:
        yield get_pe("fixed_random_bias")
    finally:
        unregister_pe("fixed_random_bias")


def _cfg(pe):
    return TransformerConfig(n_layers=2, d_model=16, d_head=8, n_heads=2, d_mlp=16, d_vocab=7,
                             n_ctx=32, pe=pe)


def test_the_model_adds_the_registered_bias_to_the_logits(toy):
    """Same weights with and without the encoding: the scaled attention logits differ by
    exactly the toy's bias on every unmasked (key <= query) entry, in every layer."""
    torch.manual_seed(0)
    plain = Transformer(_cfg("nope"))
    biased = Transformer(_cfg("fixed_random_bias"))
    biased.load_state_dict(plain.state_dict())         # the toy has no parameters of its own
    tokens = torch.randint(0, 7, (3, 10), generator=torch.Generator().manual_seed(1))
    names = [f"blocks.{l}.attn.hook_attn_scores" for l in range(2)]
    with torch.no_grad():
        _, a = plain.run_with_cache(tokens, names=names)
        _, b = biased.run_with_cache(tokens, names=names)
    keep = torch.ones(10, 10, dtype=torch.bool).tril()
    want = toy.table[:2, :10, :10]
    diff = (b[names[0]] - a[names[0]])[:, :, keep]      # layer 0: the same input residual
    assert torch.allclose(diff, want[:, keep][None].expand_as(diff), atol=1e-5)
    assert all(torch.isinf(b[n][:, :, ~keep]).all() for n in names)   # the causal mask stays


TINY = {"n_layers": 1, "d_model": 16, "d_head": 8, "n_heads": 2, "d_mlp": 16, "batch_size": 4,
        "train_max_len": 3, "eval_samples": 4, "eval_stride": 2, "warmup_steps": 1,
        "log_every": 1, "probe_every": 0, "checkpoint_every": 1}


def test_a_registered_encoding_trains_and_evaluates(toy, tmp_path):
    """One optimizer step through the product's trainer, then its evaluation, with nothing
    but the registration: the loss is finite, the weights moved, every length evaluated
    (the toy has no position limit)."""
    task = resolve_task("copy_unique")
    res = train(task, "fixed_random_bias", seed=0, steps=1, out_dir=tmp_path / "run",
                config_overrides=TINY, progress=False, verbose=False)
    assert res.finished
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "loss" in r] == [1] and math.isfinite(rows[0]["loss"])
    trained = load_file(str(tmp_path / "run" / "model.safetensors"))
    torch.manual_seed(0)                              # prepare()'s initialisation of seed 0
    fresh = Transformer(_run_config(tmp_path / "run"))
    fresh.reset_parameters(seed=0)
    assert trained.keys() == fresh.state_dict().keys()
    assert any(not torch.equal(trained[k], v) for k, v in fresh.state_dict().items())
    assert res.accuracy and all(r["em"] is not None and 0.0 <= r["em"] <= 1.0
                                for r in res.accuracy)


def _run_config(run_dir: Path) -> TransformerConfig:
    return TransformerConfig.from_dict(json.loads((run_dir / "config.json").read_text())["model"])


def test_the_stacked_trainer_takes_it_too(toy, tmp_path):
    """Two seeds as one stacked model (``vmap`` over the one Transformer): both finish and are
    evaluated at every length."""
    task = resolve_task("copy_unique")
    specs = [resolve_spec(task, "fixed_random_bias", s, steps=1, config_overrides=TINY)
             for s in range(2)]
    out = train_group(task, specs, [tmp_path / f"s{s}" for s in range(2)], progress=False,
                      verbose=False, threads=1)
    assert [r.seed for r in out] == [0, 1] and all(r.finished and r.accuracy for r in out)
    assert all(r["em"] is not None for res in out for r in res.accuracy)


def test_export_refuses_an_encoding_without_a_transformer_lens_type(toy):
    with pytest.raises(TransformerLensExportError, match="fixed_random_bias.*no HookedTransformer"):
        transformer_lens_config(Transformer(_cfg("fixed_random_bias")))


def test_registration_rules(toy):
    assert registered_pes() == PE_NAMES + ("fixed_random_bias",)
    assert len(PE_NAMES) == 6                         # the paper's six, the `all` list
    with pytest.raises(PositionalEncodingError, match="already registered"):
        register_pe(FixedRandomBias)
    with pytest.raises(PositionalEncodingError, match="built in"):
        unregister_pe("alibi")

    class Nameless(PositionalEncoding):
        applies = BIAS

    with pytest.raises(PositionalEncodingError, match="needs a name"):
        register_pe(Nameless)
    with pytest.raises(PositionalEncodingError, match="known: nope, t5, .*fixed_random_bias"):
        get_pe("bogus")


def test_unknown_encoding_is_a_training_error_after_unregistering(tmp_path):
    with pytest.raises(TrainingError, match="unknown positional encoding 'fixed_random_bias'"):
        train(resolve_task("copy_unique"), "fixed_random_bias", steps=1, out_dir=tmp_path / "r",
              progress=False, verbose=False)


def test_the_registry_and_the_config_load_without_torch():
    """A config's encoding rules and an unknown name's error come before torch loads."""
    code = ("import sys\n"
            "from rasp_model.config import TransformerConfig, TransformerConfigError\n"
            "from rasp_model.pe_names import get_pe, PositionalEncodingError\n"
            "c = TransformerConfig(pe='rope', d_head=16)\n"
            "assert c.rotary_dim == 4 and get_pe('ape_learned').max_positions(c) == c.n_ctx\n"
            "try:\n    TransformerConfig(pe='bogus')\nexcept TransformerConfigError as e:\n"
            "    print(e)\n"
            "print('torch' in sys.modules)\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.splitlines() == [
        "pe must be one of nope, t5, alibi, rope, ape_sinusoidal, ape_learned, got 'bogus'",
        "False"]
