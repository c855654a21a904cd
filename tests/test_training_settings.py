"""Issue 11: ``torch_compile`` and ``autocast`` as training settings.

Truths: a setting written to a run round-trips; a bad value is refused naming the key; a
bfloat16 autocast run learns and follows the float32 run of the same seed (same batches) to
within bfloat16's precision; the torch.compile forward computes the eager forward's loss (same
weights, same batch) within float32 rounding (slow: the compile warm-up).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from analysis.training.batches import make_step, step_loss
from analysis.training.configs import ConfigError, TrainConfig
from analysis.training.trainer import autocast_context, resolve_spec, resolve_task, train

TINY = {"n_layers": 1, "d_model": 32, "d_head": 16, "n_heads": 2, "d_mlp": 64, "batch_size": 16,
        "train_max_len": 4, "eval_samples": 4, "eval_stride": 2, "warmup_steps": 5,
        "log_every": 1, "probe_every": 0, "checkpoint_every": 1000, "lr": 3e-3}


def test_settings_round_trip_and_validation():
    tc = TrainConfig(torch_compile=True, autocast="bfloat16")
    assert TrainConfig.from_dict(json.loads(json.dumps(tc.to_dict()))) == tc
    assert TrainConfig().torch_compile is False and TrainConfig().autocast == "none"
    with pytest.raises(ConfigError, match="autocast"):
        TrainConfig(autocast="fp8")
    with pytest.raises(ConfigError, match="torch_compile"):
        TrainConfig(torch_compile="yes")


def _losses(run_dir):
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r["loss"] for r in rows if "loss" in r]


def test_bfloat16_autocast_trains_like_float32(tmp_path):
    runs = {}
    for name, extra in (("fp32", {}), ("bf16", {"autocast": "bfloat16"})):
        res = train("copy_unique", "nope", seed=0, steps=60, out_dir=tmp_path / name,
                    config_overrides={**TINY, **extra}, progress=False, verbose=False)
        assert res.finished
        runs[name] = _losses(tmp_path / name)
    cfg = json.loads((tmp_path / "bf16" / "config.json").read_text())
    assert '"autocast": "bfloat16"' in json.dumps(cfg)               # recorded with the run
    bf16, fp32 = runs["bf16"], runs["fp32"]
    assert all(math.isfinite(x) for x in bf16)
    assert np.mean(bf16[-10:]) < np.mean(bf16[:5]) - 0.3              # it learns
    # and follows the float32 run (same seed, same batches) to within bfloat16's precision
    assert abs(np.mean(bf16[-10:]) - np.mean(fp32[-10:])) < 0.1 * np.mean(fp32[-10:])


def test_autocast_runs_the_forward_in_bfloat16():
    tr = TrainConfig(autocast="bfloat16")
    lin = torch.nn.Linear(4, 4)
    with autocast_context(tr, "cpu"):
        assert lin(torch.ones(2, 4)).dtype == torch.bfloat16
    with autocast_context(TrainConfig(), "cpu"):
        assert lin(torch.ones(2, 4)).dtype == torch.float32


@pytest.mark.slow
def test_torch_compile_forward_equals_eager():
    task = resolve_task("copy_unique")
    spec = resolve_spec(task, "rope", 0, config_overrides=TINY)
    from rasp_model import Transformer
    torch.manual_seed(0)
    model = Transformer(spec.model)
    lo, hi = spec.train_lengths
    batch = make_step(task, list(range(lo, hi + 1)), 8, np.random.default_rng(0),
                      spec.model.n_ctx, "none", "packed")
    eager, _ = step_loss(model, batch)
    compiled, _ = step_loss(torch.compile(model, dynamic=True), batch)
    assert torch.allclose(eager, compiled, rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal when no GPU is present")
def test_cli_device_cuda_without_gpu_is_one_line_error(tmp_path, capsys):
    """``rasp train --device cuda`` on a machine without CUDA: exit 2, one line, no traceback,
    and no run directory written."""
    from rasp_cli.main import main

    out = tmp_path / "runs"
    rc = main(["train", "sort_unique", "--pe", "nope", "--device", "cuda", "--set", "steps=1",
               "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1 and "CUDA is not available" in err
    assert "Traceback" not in err
    assert not out.exists() or not any(out.rglob("*.safetensors"))
