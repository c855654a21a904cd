"""Training choices: defaults, presets and per-task settings (recorded with every run).

A run's configuration is resolved in this order, later entries overriding earlier ones:

1. :data:`MODEL_DEFAULTS` and :data:`TRAIN_DEFAULTS` (the "default" preset),
2. the preset (:data:`PRESETS`, e.g. ``"quick"`` for the report demo), then
   :data:`PE_CONFIGS` for the positional encoding,
3. :data:`TASK_CONFIGS` for the task (choices tuned here), then ``task.default_config``
   (the task owner's overrides), then the preset's per-task entry,
4. the caller's ``config_overrides`` (flat dict; keys of either group).

Model keys are :class:`model.TransformerConfig` fields; training keys are those of
:data:`TRAIN_DEFAULTS`. Unknown keys raise :class:`ConfigError`.

The paper (Kazemnejad et al. 2023) trained a 12-layer, d_model 768 T5 decoder (AdamW lr 3e-5,
weight decay 0.05, batch 64, 40k steps). These defaults are a CPU-sized stand-in, tuned so
that ``copy_unique`` with NoPE reaches >= 0.99 ID exact match in minutes on 2 cores.
"""

from __future__ import annotations

import copy
import dataclasses

from model import TransformerConfig

MODEL_DEFAULTS: dict = {
    "n_layers": 3,
    "d_model": 64,
    "d_head": 16,
    "n_heads": 4,
    "d_mlp": 256,
    "act_fn": "relu",
    "normalization_type": "LN",
    "use_attn_scale": True,
    "attention_dir": "causal",
    "tied_embeddings": False,
    "dropout": 0.0,
    "attn_bias": True,
    "mlp_bias": True,
    "rotary_dim": None,         # None: model.positional.default_rotary_dim (25% of d_head)
}
"""Model settings of the default preset (n_ctx, d_vocab and pe are set per run)."""

TRAIN_DEFAULTS: dict = {
    "steps": 3000,              # optimizer steps
    "batch_size": 64,           # sequences per step
    "lr": 1e-3,                 # peak learning rate (AdamW)
    "weight_decay": 0.05,       # Kazemnejad et al.
    "betas": [0.9, 0.98],
    "warmup_steps": 150,        # linear warmup
    "schedule": "cosine",       # "cosine" | "linear" | "constant" decay after warmup
    "min_lr_ratio": 0.05,       # final lr = lr * min_lr_ratio
    "grad_clip": 1.0,           # max global grad norm (0 = off)
    "train_min_len": 1,         # training lengths drawn uniformly from [min, max]
    "train_max_len": None,      # None = task.default_train_max_len
    "train_max_len_cap": None,  # if set, the default train_max_len is capped at this value
    "random_offsets": False,    # Zhou et al.: random position offsets (absolute PEs see all positions)
    "eval_samples": 100,        # samples per evaluated length
    "eval_stride": 1,           # evaluate every k-th length
    "eval_max_factor": 2.0,     # OOD lengths up to this x train_max_len
    "eval_batch_size": 256,
    "log_every": 50,            # metrics.jsonl line every k steps
    "checkpoint_every": 500,    # checkpoint every k steps (and at the end)
    "probe_every": 500,         # quick ID exact-match probe (greedy) every k steps, 0 = off
    "probe_samples": 64,
}
"""Training settings of the default preset."""

PRESETS: dict = {
    "default": {},
    # ~30 s per run on a 2-core CPU: the report demo trains 13 of these.
    "quick": {
        # measured on copy_unique / NoPE (docs/training.md): batch 64 and lr 3e-3 learn the
        # induction head fastest among the settings tried; train lengths 1..10 (not 1..20)
        "n_layers": 2, "d_model": 64, "d_head": 16, "n_heads": 4, "d_mlp": 128,
        "steps": 600, "batch_size": 64, "lr": 3e-3, "warmup_steps": 50,
        "train_max_len_cap": 10,
        "eval_samples": 32, "eval_stride": 2, "log_every": 25, "checkpoint_every": 200,
        "probe_every": 300, "probe_samples": 32,
    },
}
"""Named presets (flat dicts of model and training keys)."""

TASK_CONFIGS: dict = {
    # task -> overrides for the default preset (measured choices; see docs/training.md)
}
"""Per-task overrides of the default preset."""

PE_CONFIGS: dict = {
    # Measured and rejected (docs/results.md): ape_sinusoidal with a T5-scale token embedding
    # (embed_init_std=1.0) at lr 1e-3 did no better on copy_unique (ID EM 0.00) and worse on
    # count (0.60 vs 1.00) in the quick budget, so every PE shares the same settings.
}
"""Per-positional-encoding overrides (applied after the preset, before per-task choices)."""

PRESET_TASK_CONFIGS: dict = {
    "quick": {},
}
"""Per-task overrides that apply only with a given preset."""


class ConfigError(ValueError):
    """Unknown preset or configuration key, or an invalid value."""


MODEL_KEYS = {f.name for f in dataclasses.fields(TransformerConfig)}
TRAIN_KEYS = set(TRAIN_DEFAULTS)


def split_overrides(overrides: dict | None) -> tuple[dict, dict]:
    """Split a flat override dict into (model keys, training keys); ConfigError on unknown
    keys. A nested ``{"model": {...}, "train": {...}}`` form is accepted too."""
    model, train = {}, {}
    for k, v in (overrides or {}).items():
        if k in ("model", "train") and isinstance(v, dict):
            m, t = split_overrides(v)
            model.update(m)
            train.update(t)
        elif k in MODEL_KEYS:
            model[k] = v
        elif k in TRAIN_KEYS:
            train[k] = v
        else:
            raise ConfigError(
                f"unknown configuration key {k!r}; model keys: {', '.join(sorted(MODEL_KEYS))}; "
                f"training keys: {', '.join(sorted(TRAIN_KEYS))}")
    return model, train


def resolve(task_name: str, preset: str = "default", task_default_config: dict | None = None,
            overrides: dict | None = None, pe: str | None = None) -> tuple[dict, dict]:
    """Resolved ``(model_settings, train_settings)`` for a task (see module docstring)."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}")
    model = copy.deepcopy(MODEL_DEFAULTS)
    train = copy.deepcopy(TRAIN_DEFAULTS)
    # keys of the task owner's default_config that are not ours are ignored (not an error)
    # (applied with the default preset only, so presets keep their time budget)
    task_cfg = {k: v for k, v in (task_default_config or {}).items()
                if k in MODEL_KEYS or k in TRAIN_KEYS} if preset == "default" else {}
    layers = [PRESETS[preset], PE_CONFIGS.get(pe, {}), TASK_CONFIGS.get(task_name, {}) if preset == "default" else {},
              task_cfg, PRESET_TASK_CONFIGS.get(preset, {}).get(task_name, {}),
              overrides or {}]
    for layer in layers:
        m, t = split_overrides(layer)
        model.update(m)
        train.update(t)
    if train["steps"] is not None and int(train["steps"]) < 1:
        raise ConfigError(f"steps must be >= 1, got {train['steps']}")
    if train["schedule"] not in ("cosine", "linear", "constant"):
        raise ConfigError(f"schedule must be cosine, linear or constant, got "
                          f"{train['schedule']!r}")
    return model, train
