"""Training configuration: typed settings, presets and the run specification.

A run is fully described by a :class:`RunSpec` (task, positional encoding, seed, preset, the
:class:`rasp_model.TransformerConfig` and the :class:`TrainConfig`, the training and
evaluated lengths). It is written to the run directory as ``config.json``
(:meth:`RunSpec.to_dict`) and read back with :meth:`RunSpec.from_dict`; two runs are the same
run when their specs are equal (settings added to the code after a run was written count as
their defaults, so older finished runs stay reusable).

Settings are resolved in this order, later entries overriding earlier ones:

1. :data:`MODEL_DEFAULTS` and the defaults of :class:`TrainConfig` (the ``"default"`` preset),
2. the training preset (:data:`TRAIN_PRESETS`, e.g. ``"quick"`` for the report demo),
3. the caller's overrides (a flat dict of model and training keys, ``rasp train --set``).

Model keys are :class:`rasp_model.TransformerConfig` fields; training keys are the
fields of :class:`TrainConfig`. Unknown keys and bad values raise :class:`ConfigError`.

The paper (Kazemnejad et al. 2023) trained a 12-layer, d_model 768 T5 decoder (AdamW lr 3e-5,
weight decay 0.05, batch 64, 40k steps). These defaults are a CPU-sized stand-in, tuned so
that ``copy_unique`` with NoPE reaches >= 0.99 ID exact match in minutes on 2 cores.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from rasp_model import TransformerConfig, TransformerConfigError
from rasp.errors import RASPError

__all__ = ["ConfigError", "TrainConfig", "RunSpec", "MODEL_DEFAULTS", "TRAIN_PRESETS",
           "PAPER_ROTARY_DIM",
           "MODEL_KEYS", "TRAIN_KEYS", "split_overrides", "resolve"]


class ConfigError(RASPError, ValueError):
    """Unknown preset or configuration key, or an invalid value (the message names the key)."""


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
    # None: as many rotated dimensions as Kazemnejad et al. (PAPER_ROTARY_DIM), capped at d_head
    "rotary_dim": None,
    # one initialization for every PE, T5's scales (Kazemnejad et al.'s model; HF T5
    # ``_init_weights``): token embeddings ~ N(0, 1) (the shared embedding, std factor * 1.0). At
    # GPT-2's 0.02 the unit-scale sinusoid table drowns the token identity and ape_sinusoidal
    # cannot fit even in distribution (docs/training.md).
    "embed_init_std": 1.0,
    # ... and every other weight ~ N(0, d_model^-0.5) (None: resolved per run from d_model; T5's
    # k, v, MLP-in, relative-bias std and, with our 1/sqrt(d_head) score scale, its q), output
    # projections W_O / W_out divided by sqrt(2 n_layers) as GPT-2. With embeddings at 1.0 and
    # the rest at GPT-2's 0.02 every sublayer starts at ~1% of the residual stream and the
    # default preset no longer fit copy_unique/NoPE (ID EM 0.11; docs/training.md, "Default
    # preset: why copy_unique stopped fitting").
    "initializer_range": None,
}
"""Model settings of the default preset (``n_ctx``, ``d_vocab`` and ``pe`` are set per run)."""

#: Rotated dimensions per head of the paper's RoPE: 25% of d_head 64 = 16 dims, i.e. 8 frequency
#: pairs (Kazemnejad et al. 2023, GPT-J style). At our d_head 16 the model default (25% = 4
#: dims, 2 pairs) behaves almost like NoPE; training rotates as many pairs as the paper.
PAPER_ROTARY_DIM = 16

_SCHEDULES = ("cosine", "linear", "constant")


#: Largest value of an integer training setting (default 10^8 steps or samples): sizes of
#: one batch or one evaluation are bounded so a setting cannot allocate without bound.
_INT_MAX = {"batch_size": 1 << 16, "eval_batch_size": 1 << 16, "eval_samples": 1_000_000,
            "probe_samples": 100_000, "bin_samples": 1_000_000, "eval_stride": 100_000,
            "train_min_len": 100_000, "train_max_len": 100_000, "train_max_len_cap": 100_000,
            "offset_span": 1_000_000, "offset_range": 1_000_000, "train_set": 10_000_000,
            "train_set_seed": 2 ** 32 - 1}


@dataclass(frozen=True)
class TrainConfig:
    """Training settings of one run (defaults: the ``"default"`` preset).

    Attributes:
        steps: optimizer steps.
        batch_size: sequences per step.
        lr: peak learning rate of AdamW.
        weight_decay: AdamW weight decay on weight matrices (Kazemnejad et al.: 0.05).
        betas: AdamW betas.
        warmup_steps: linear warmup steps.
        schedule: decay after warmup, ``"cosine"``, ``"linear"`` or ``"constant"``.
        min_lr_ratio: final lr = ``lr * min_lr_ratio``.
        grad_clip: maximum global gradient norm (0 = off).
        train_min_len, train_max_len: training lengths drawn from this range
            (:meth:`tasks.base.Task.drawn_lengths`; 0 only for a task that accepts it;
            ``train_max_len`` None = the task's ``default_train_max_len``).
        train_max_len_cap: if set, caps the task's default ``train_max_len``.
        position_offsets: the position-offset protocol, ``"none"`` (Kazemnejad et al.: positions
            0..n-1) or ``"random"`` (Zhou et al. 2023 / Huang et al. 2025: each training example
            shifted by a random offset so every absolute position row is trained; offset 0 at
            test). Recorded with every run; runs of different protocols are never compared.
        batching: batch layout, ``"packed"`` (whole examples packed into rows, no padding
            compute), ``"bucketed"`` or ``"padded"`` (:mod:`analysis.training.batches`; the same
            gradient in every layout).
        eval_samples: samples per evaluated length; ``eval_stride``: evaluate every k-th
            length; ``eval_max_factor``: OOD lengths up to this x ``train_max_len``;
            ``eval_batch_size``: prompts per decoding batch.
        log_every: a ``metrics.jsonl`` line every k steps; ``checkpoint_every``: a checkpoint
            every k steps; ``probe_every``: a greedy ID exact-match probe every k steps
            (0 = off) on ``probe_samples`` prompts.
        torch_compile: run the training forward through ``torch.compile(model, dynamic=True)``
            (PyTorch 2.x; the first steps pay a compile warm-up; evaluation stays eager).
        eval_bins: length bins ``((lo, hi), ...)`` evaluated at the end of the run besides the
            per-length evaluation (Huang et al. 2025's protocol, ``algorithmic/
            run_multiple_seeds.py``: ``EvalDataset`` of ``bin_samples`` examples whose lengths
            are uniform in the bin, exact match of every answer position under teacher forcing,
            which equals greedy decoding's exact match); the first bin is the in-distribution
            one. Written to ``bins.json``. Empty: no bins.
        bin_samples: examples per bin (Huang et al.: 2,000).
        fit_every: every k steps, evaluate the first bin and stop training once its exact match
            reaches ``fit_em`` (Huang et al.'s early stop: evaluation every 3,000 steps, stop at
            100% in distribution); 0 = off. Needs ``eval_bins``.
        fit_em: the in-distribution exact match at which ``fit_every`` stops (1.0 = all).
        offset_span: with ``"random"`` offsets, every example stays within the first
            ``offset_span`` positions (None: the model's ``n_ctx``), so the offsets can be drawn
            exactly as a paper's generator draws them (Huang et al.: uniform in
            ``[0, n_positions - len(instance)]``). The model has at least ``offset_span``
            positions (``n_ctx`` grows to it).
        offset_range: with ``"random"`` offsets, each example's offset drawn uniformly from
            ``[0, offset_range)`` whatever its length (Huang et al.'s formal languages,
            ``formal_lang_suite/train_with_ce.py:136-150``: ``torch.randint(n_positions / 2)``)
            instead of ``[0, offset_span - len]``; None: the latter.
        train_set: the size of a fixed training set (Huang et al.'s formal languages: 10,000
            strings written once to ``train_src.txt``): drawn once (lengths uniform over the
            training range, seeded by ``train_set_seed``, the same for every run and seed) and
            read in order, ``batch_size`` examples a step (a smaller last batch), epoch after
            epoch, as their ``DataLoader`` without shuffling. 0: fresh examples every step
            (seeded by the run's seed and the step).
        train_set_seed: the seed of the fixed training set.
        autocast: ``"none"`` (float32) or ``"bfloat16"``: the training forward under
            ``torch.autocast(device_type, torch.bfloat16)`` (weights and optimizer state stay
            float32). Both are recorded with the run; measured in docs/benchmarks.md
            ("Training settings"): on this CPU neither pays.
    Raises:
        ConfigError: a value of the wrong type or out of range (the message names the key).
    """

    steps: int = 3000
    batch_size: int = 64
    # 3e-3 (as the quick and demo presets): with T5-scale init, 1e-3 left copy_unique/NoPE at
    # ID EM 0.989 after 3,000 steps, 3e-3 reached 0.998 (docs/training.md, "Default preset")
    lr: float = 3e-3
    weight_decay: float = 0.05
    betas: tuple = (0.9, 0.98)
    warmup_steps: int = 150
    schedule: str = "cosine"
    min_lr_ratio: float = 0.05
    grad_clip: float = 1.0
    train_min_len: int = 1
    train_max_len: int | None = None
    train_max_len_cap: int | None = None
    position_offsets: str = "none"
    batching: str = "packed"
    eval_samples: int = 100
    eval_stride: int = 1
    eval_max_factor: float = 2.0
    eval_batch_size: int = 256
    log_every: int = 50
    checkpoint_every: int = 500
    probe_every: int = 500
    probe_samples: int = 64
    torch_compile: bool = False
    autocast: str = "none"
    eval_bins: tuple = ()
    bin_samples: int = 2000
    fit_every: int = 0
    fit_em: float = 1.0
    offset_span: int | None = None
    offset_range: int | None = None
    train_set: int = 0
    train_set_seed: int = 0

    def __post_init__(self):
        def integer(name, lo, optional=False):
            v = getattr(self, name)
            if optional and v is None:
                return
            hi = _INT_MAX.get(name, 10 ** 8)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ConfigError(f"{name} must be an integer >= {lo}, got {v!r}")
            if v > hi:
                raise ConfigError(f"{name} must be an integer <= {hi:,}, got {v!r}")

        def number(name, lo, hi=math.inf, lo_open=False):
            v = getattr(self, name)
            ok = (not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
                  and (v > lo if lo_open else v >= lo) and v <= hi)
            if not ok:
                rng = (f"> {lo:g}" if lo_open else f">= {lo:g}") + \
                    (f" and <= {hi:g}" if hi != math.inf else "")
                raise ConfigError(f"{name} must be a finite number {rng}, got {v!r}")

        for name in ("steps", "batch_size", "eval_samples", "eval_stride", "eval_batch_size",
                     "log_every", "checkpoint_every", "probe_samples", "bin_samples"):
            integer(name, 1)
        for name in ("warmup_steps", "probe_every", "fit_every", "train_set", "train_set_seed",
                     "train_min_len"):
            integer(name, 0)
        for name in ("train_max_len", "train_max_len_cap", "offset_span", "offset_range"):
            integer(name, 1, optional=True)
        number("fit_em", 0.0, 1.0)
        bins = self.eval_bins
        if (not isinstance(bins, (list, tuple)) or len(bins) > 16 or any(
                not isinstance(b, (list, tuple)) or len(b) != 2
                or any(isinstance(x, bool) or not isinstance(x, int) for x in b)
                or not 0 <= b[0] <= b[1] <= 100_000 for b in bins)):
            raise ConfigError(f"eval_bins must be at most 16 pairs [lo, hi] of integers with "
                              f"0 <= lo <= hi <= 100000, got {bins!r}")
        object.__setattr__(self, "eval_bins", tuple((int(a), int(b)) for a, b in bins))
        if self.fit_every and not self.eval_bins:
            raise ConfigError("fit_every needs eval_bins (its first bin is the in-distribution "
                              "exact match that stops training)")
        # upper bounds: past them AdamW overflows (lr 1e308) or every weight is driven to 0
        number("lr", 0.0, 10.0, lo_open=True)
        number("weight_decay", 0.0, 100.0)
        number("min_lr_ratio", 0.0, 1.0)
        number("grad_clip", 0.0, 1e6)
        number("eval_max_factor", 1.0, 1000.0)
        if self.schedule not in _SCHEDULES:
            raise ConfigError(f"schedule must be cosine, linear or constant, got "
                              f"{self.schedule!r}")
        if self.position_offsets not in ("none", "random"):
            raise ConfigError(f"position_offsets must be none or random, got "
                              f"{self.position_offsets!r}")
        if self.batching not in ("packed", "bucketed", "padded"):
            raise ConfigError(f"batching must be packed, bucketed or padded, got "
                              f"{self.batching!r}")
        if not isinstance(self.torch_compile, bool):
            raise ConfigError(f"torch_compile must be true or false, got {self.torch_compile!r}")
        if self.autocast not in ("none", "bfloat16"):
            raise ConfigError(f"autocast must be none or bfloat16, got {self.autocast!r}")
        b = self.betas
        if (not isinstance(b, (list, tuple)) or len(b) != 2 or any(
                isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 <= x < 1
                for x in b)):
            raise ConfigError(f"betas must be two numbers in [0, 1), got {b!r}")
        object.__setattr__(self, "betas", tuple(float(x) for x in b))

    def to_dict(self) -> dict:
        """Plain JSON-able dict (``betas`` as a list)."""
        d = dataclasses.asdict(self)
        d["betas"] = list(self.betas)
        d["eval_bins"] = [list(b) for b in self.eval_bins]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        """Inverse of :meth:`to_dict`; missing keys take their defaults, unknown keys raise
        :class:`ConfigError`."""
        d = _legacy_train(d)
        unknown = set(d) - TRAIN_KEYS
        if unknown:
            raise ConfigError(f"unknown training keys: {', '.join(sorted(unknown))}")
        return cls(**d)

    def replace(self, **changes) -> "TrainConfig":
        """A copy with some settings changed (validated)."""
        return dataclasses.replace(self, **changes)


TRAIN_KEYS = frozenset(f.name for f in dataclasses.fields(TrainConfig))


def _legacy_train(d: dict) -> dict:
    """Older runs and ``--set`` lines wrote ``random_offsets: bool``; it is the protocol
    ``position_offsets`` ``"random"`` / ``"none"``."""
    if "random_offsets" not in d:
        return d
    d = dict(d)
    v = d.pop("random_offsets")
    if not isinstance(v, bool):
        raise ConfigError(f"random_offsets must be true or false, got {v!r}")
    d.setdefault("position_offsets", "random" if v else "none")
    return d


def _task_source(v) -> dict | None:
    if v is not None and not isinstance(v, dict):
        raise ConfigError(f"task_source must be an object, got {v!r}")
    return dict(v) if v else None


MODEL_KEYS = frozenset(f.name for f in dataclasses.fields(TransformerConfig))

PER_RUN_KEYS = frozenset({"pe", "d_vocab", "d_vocab_out", "n_ctx"})
"""Model keys every run sets itself (from the task, the evaluated lengths and the PE)."""

_QUICK = {
    # measured on copy_unique / NoPE (docs/training.md): batch 64 and lr 3e-3 learn the
    # induction head fastest among the settings tried; train lengths 1..10 (not 1..20)
    "n_layers": 2, "d_model": 64, "d_head": 16, "n_heads": 4, "d_mlp": 128,
    "steps": 600, "batch_size": 64, "lr": 3e-3, "warmup_steps": 50,
    "train_max_len_cap": 10,
    "eval_samples": 32, "eval_stride": 2, "log_every": 25, "checkpoint_every": 200,
    "probe_every": 300, "probe_samples": 32,
}

TRAIN_PRESETS: dict = {
    "default": {},
    # ~10 s per run on a 2-core CPU: a smoke test of the pipeline; the encodings do not separate.
    "quick": _QUICK,
    # The main job's experiment (``rasp demo``): the quick model trained 5x longer, where the
    # encodings separate on sort_unique (measured: at 600 steps they do not; at 3,000 they do,
    # docs/results.md), at batch 32: ~22 CPU-seconds of training per run on one core (batch 64:
    # ~34 s), so that 5 seeds of every PE fit the main job's 10 minutes on 2 cores. Measured at
    # batch 32, 5 seeds (docs/training.md, "Demo preset"): ID EM >= 0.979 for every PE on
    # sort_unique and copy_repeat, and the PEs' OOD order of batch 64 kept.
    "demo": {**_QUICK, "steps": 3000, "batch_size": 32, "warmup_steps": 100,
             "eval_samples": 64, "log_every": 50, "checkpoint_every": 500, "probe_every": 1000},
}
# The demo preset under the protocol of the RASP-L and C-RASP[periodic, local] theories for a
# learned absolute position embedding (Zhou et al. 2023; Huang et al. 2025): every training
# example shifted by a random position offset, so every position row is trained.
TRAIN_PRESETS["demo_random_offsets"] = {**TRAIN_PRESETS["demo"], "position_offsets": "random"}
# The demo preset with the head width of Kazemnejad et al.'s model (d_head 64, as T5-base) and
# their Rotary: 25% of d_head rotated = 16 dimensions (8 frequency pairs). At the demo's d_head
# 16 the default rotary_dim (16) rotates *every* dimension — the paper's 25% of 16 would be 4
# dimensions, which behaves almost like NoPE — so a Rotary result comparable with the paper's
# needs this width; every PE may be trained with it, so the comparison stays paired by seed.
TRAIN_PRESETS["demo_paper_heads"] = {**TRAIN_PRESETS["demo"], "d_head": 64,
                                     "rotary_dim": PAPER_ROTARY_DIM}
"""Named training presets (flat dicts of model and training keys). The report's presets
(seeds, probe sizes) are :data:`analysis.reporting.presets.REPORT_PRESETS`."""


def split_overrides(overrides: dict | None) -> tuple[dict, dict]:
    """Split a flat override dict into ``(model keys, training keys)``.

    Raises :class:`ConfigError` for an unknown key (the message lists the known ones)."""
    model, train = {}, {}
    for k, v in _legacy_train(dict(overrides or {})).items():
        if k in PER_RUN_KEYS:
            raise ConfigError(f"{k!r} is set by the run itself (the task's vocabulary, the "
                              f"evaluated lengths, --pe), not by an override")
        if k in MODEL_KEYS:
            model[k] = v
        elif k in TRAIN_KEYS:
            train[k] = v
        else:
            raise ConfigError(
                f"unknown configuration key {k!r}; model keys: {', '.join(sorted(MODEL_KEYS))}; "
                f"training keys: {', '.join(sorted(TRAIN_KEYS))}")
    return model, train


def resolve(preset: str = "default", overrides: dict | None = None) -> tuple[dict, TrainConfig]:
    """Resolved ``(model settings, TrainConfig)`` of a preset plus overrides (module docstring).

    The model settings are :class:`~rasp_model.TransformerConfig` keyword arguments
    without ``d_vocab``, ``n_ctx`` and ``pe`` (set per run). Raises :class:`ConfigError` for an
    unknown preset or key, or a bad training value."""
    if preset not in TRAIN_PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; known: {', '.join(TRAIN_PRESETS)}")
    model = dict(MODEL_DEFAULTS)
    train: dict = {}
    for layer in (TRAIN_PRESETS[preset], overrides or {}):
        m, t = split_overrides(layer)
        model.update(m)
        train.update(t)
    if model.get("initializer_range") is None and isinstance(model.get("d_model"), int) \
            and model["d_model"] > 0:
        model["initializer_range"] = model["d_model"] ** -0.5       # T5's fan-in scale
    if model.get("rotary_dim") is None and isinstance(model.get("d_head"), int):
        model["rotary_dim"] = min(PAPER_ROTARY_DIM, model["d_head"] - model["d_head"] % 2)
    try:
        return model, TrainConfig(**train)
    except TypeError as e:                       # pragma: no cover - keys are checked above
        raise ConfigError(str(e)) from None


@dataclass(frozen=True)
class RunSpec:
    """Everything that defines a run; ``config.json`` holds :meth:`to_dict` plus provenance.

    Attributes:
        task, pe, seed, preset: what was trained (``pe`` one of
            :data:`rasp_model.PE_NAMES`).
        model: the :class:`~rasp_model.TransformerConfig` (``n_ctx`` = the longest
            evaluated sequence).
        train: the resolved :class:`TrainConfig` (``train_max_len`` set).
        train_lengths: ``(min, max)`` training input length.
        eval_lengths: ``((length, "id"|"ood"), ...)`` evaluated lengths.
        task_source: for a task defined outside the catalogue, what defines it
            (``{"name", "sha256"}`` of a task file, the specification of a regular
            expression: :func:`tasks.custom.task_source`), so a run of an edited task file is
            not mistaken for one of the file it was trained on; None for catalogue tasks.
    """

    task: str
    pe: str
    seed: int
    preset: str
    model: TransformerConfig
    train: TrainConfig
    train_lengths: tuple
    eval_lengths: tuple = field(default_factory=tuple)
    task_source: dict | None = None

    def to_dict(self) -> dict:
        """The JSON form written to ``config.json`` (``optimizer`` and ``steps`` repeat
        training settings for readers of the file)."""
        tr = self.train
        return {"task": self.task, "pe": self.pe, "seed": int(self.seed),
                "preset": self.preset, "model": self.model.to_dict(),
                "optimizer": {"name": "AdamW", "lr": tr.lr, "betas": list(tr.betas),
                              "weight_decay": tr.weight_decay, "warmup_steps": tr.warmup_steps,
                              "schedule": tr.schedule, "min_lr_ratio": tr.min_lr_ratio,
                              "grad_clip": tr.grad_clip},
                "train": tr.to_dict(), "steps": tr.steps,
                "train_lengths": list(self.train_lengths),
                "eval_lengths": [[n, s] for n, s in self.eval_lengths],
                **({"task_source": dict(self.task_source)} if self.task_source else {})}

    @classmethod
    def from_dict(cls, d: dict) -> "RunSpec":
        """Read :meth:`to_dict`'s form (extra provenance keys are ignored; settings missing
        from an older file take their defaults).

        Raises:
            ConfigError: a missing or malformed field, or a bad setting.
        """
        if not isinstance(d, dict):
            raise ConfigError("not a JSON object")
        try:
            seed, lengths = d["seed"], d["train_lengths"]
            if isinstance(seed, bool) or not isinstance(seed, int):
                raise ConfigError(f"seed must be an integer, got {seed!r}")
            if (not isinstance(lengths, list) or len(lengths) != 2
                    or not all(isinstance(x, int) and x >= 0 for x in lengths)
                    or lengths[0] > lengths[1]):
                raise ConfigError(f"train_lengths must be [min, max], got {lengths!r}")
            evals = tuple((int(n), str(s)) for n, s in d.get("eval_lengths", []))
            if any(s not in ("id", "ood") for _, s in evals):
                raise ConfigError("eval_lengths splits must be 'id' or 'ood'")
            for key in ("task", "pe", "preset"):
                if not isinstance(d.get(key, "default"), str):
                    raise ConfigError(f"{key} must be a string")
            return cls(task=d["task"], pe=d["pe"], seed=seed, preset=d.get("preset", "default"),
                       model=TransformerConfig.from_dict(dict(d["model"])),
                       train=TrainConfig.from_dict(dict(d["train"])),
                       train_lengths=tuple(lengths), eval_lengths=evals,
                       task_source=_task_source(d.get("task_source")))
        except KeyError as e:
            raise ConfigError(f"missing field {e.args[0]!r}") from None
        except (TransformerConfigError, TypeError, ValueError, OverflowError) as e:
            if isinstance(e, ConfigError):
                raise
            raise ConfigError(str(e)) from None
