"""Configuration of the one :class:`model.transformer.Transformer` (:class:`TransformerConfig`).

Plain data, JSON round-trip with :meth:`TransformerConfig.to_dict` / :meth:`TransformerConfig.from_dict`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from model.positional import PE_NAMES

__all__ = ["TransformerConfig", "TransformerConfigError"]


class TransformerConfigError(ValueError):
    """An invalid :class:`TransformerConfig` (message names the field and the allowed values)."""


@dataclass
class TransformerConfig:
    """Hyper-parameters of :class:`Transformer` (all serialisable with :meth:`to_dict`).

    ``n_heads`` and ``d_mlp`` are an int (same in every layer) or a list with one entry per
    layer; 0 removes that sublayer. ``n_ctx`` is the number of learned positions for
    ``ape_learned`` (other encodings accept any length). ``attn_scale`` multiplies logits by
    1/sqrt(d_head). ``causal`` masks keys after the query. ``tied_embeddings`` reuses ``W_E``
    as the unembedding (needs ``d_vocab == d_vocab_out``). ``n_heads_mask`` (optional, list of
    per-layer lists of 0/1) silences heads, e.g. for ablations.
    """

    n_layers: int = 2
    d_model: int = 64
    d_head: int = 16
    n_heads: Any = 4
    d_mlp: Any = 256
    d_vocab: int = 16
    d_vocab_out: int | None = None
    n_ctx: int = 128
    pe: str = "nope"
    rope_fraction: float = 0.25
    rope_base: float = 10000.0
    act: str = "relu"
    normalization: str = "pre_ln"
    attn_scale: bool = True
    causal: bool = True
    tied_embeddings: bool = False
    dropout: float = 0.0
    attn_bias: bool = True
    mlp_bias: bool = True
    n_heads_mask: list | None = None
    init_std: float = 0.02
    embed_init_std: float | None = None
    t5_num_buckets: int = 32
    t5_max_distance: int = 128

    def __post_init__(self):
        if self.d_vocab_out is None:
            self.d_vocab_out = self.d_vocab
        self.validate()

    # -- per-layer views ------------------------------------------------------------------
    def heads(self, layer: int) -> int:
        """Number of heads in ``layer``."""
        return int(self.n_heads[layer] if isinstance(self.n_heads, (list, tuple))
                   else self.n_heads)

    def mlp_width(self, layer: int) -> int:
        """MLP hidden width in ``layer`` (0 = no MLP)."""
        return int(self.d_mlp[layer] if isinstance(self.d_mlp, (list, tuple)) else self.d_mlp)

    @property
    def max_heads(self) -> int:
        return max([self.heads(l) for l in range(self.n_layers)] + [0])

    def validate(self) -> None:
        """Raise :class:`TransformerConfigError` for an inconsistent config."""
        def bad(msg):
            raise TransformerConfigError(msg)
        if self.pe not in PE_NAMES:
            bad(f"pe must be one of {', '.join(PE_NAMES)}, got {self.pe!r}")
        if self.act not in ("relu", "gelu"):
            bad(f"act must be 'relu' or 'gelu', got {self.act!r}")
        if self.normalization not in ("none", "pre_ln"):
            bad(f"normalization must be 'none' or 'pre_ln', got {self.normalization!r}")
        for name in ("n_layers", "d_model", "d_head", "d_vocab", "d_vocab_out", "n_ctx"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < (0 if name == "n_layers"
                                                                        else 1):
                bad(f"{name} must be a positive int, got {v!r}")
        for name in ("n_heads", "d_mlp"):
            v = getattr(self, name)
            vals = list(v) if isinstance(v, (list, tuple)) else [v]
            if isinstance(v, (list, tuple)) and len(vals) != self.n_layers:
                bad(f"{name} has {len(vals)} entries for {self.n_layers} layers")
            if any(not isinstance(x, int) or isinstance(x, bool) or x < 0 for x in vals):
                bad(f"{name} entries must be ints >= 0, got {v!r}")
        if self.tied_embeddings and self.d_vocab != self.d_vocab_out:
            bad("tied_embeddings needs d_vocab == d_vocab_out")
        if not 0.0 <= self.dropout < 1.0:
            bad(f"dropout must be in [0, 1), got {self.dropout}")
        if self.pe == "rope":
            if self.d_head < 2:
                bad("rope needs d_head >= 2")
            if not 0.0 < self.rope_fraction <= 1.0:
                bad(f"rope_fraction must be in (0, 1], got {self.rope_fraction}")
        if self.pe == "ape_sinusoidal" and self.d_model < 2:
            bad("ape_sinusoidal needs d_model >= 2")
        if self.n_heads_mask is not None:
            if len(self.n_heads_mask) != self.n_layers or any(
                    len(m) != self.heads(l) for l, m in enumerate(self.n_heads_mask)):
                bad("n_heads_mask must hold one list of length n_heads_l per layer")

    def to_dict(self) -> dict:
        """Plain JSON-serialisable dict."""
        d = dataclasses.asdict(self)
        for k in ("n_heads", "d_mlp"):
            if isinstance(d[k], tuple):
                d[k] = list(d[k])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TransformerConfig":
        """Inverse of :meth:`to_dict`; unknown keys raise TransformerConfigError."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise TransformerConfigError(f"unknown config keys: {sorted(unknown)}")
        return cls(**d)

    def replace(self, **changes) -> "TransformerConfig":
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)
