"""Configuration of the one :class:`rasp_model.transformer.Transformer` (:class:`TransformerConfig`).

Plain data, JSON round-trip with :meth:`TransformerConfig.to_dict` / :meth:`TransformerConfig.from_dict`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from rasp_model.pe_names import (
    PE_NAMES, PositionalEncoding, PositionalEncodingError, get_pe, registered_pes)
from rasp.errors import RASPError

__all__ = ["TransformerConfig", "TransformerConfigError", "TL_FIELDS", "TLField",
           "LAYER_OVERHEAD_BYTES", "MAX_MODEL_BYTES"]

#: The model budget: the most memory (:meth:`TransformerConfig.memory_bytes`) a config may
#: describe, 1 GiB (268M float32 weights; Kazemnejad et al.'s 12-layer d_model 768 model has
#: 85M). Checked by :meth:`TransformerConfig.validate` before anything is allocated, for
#: configs from flags (``rasp train --set``) and from files (``config.json``, safetensors
#: metadata) alike. Raise it by assigning ``rasp_model.config.MAX_MODEL_BYTES``.
MAX_MODEL_BYTES = 2 ** 30

#: Ranges of the float settings (a rotary base of 1e308 gives all-zero frequencies: silently
#: no positional information; a huge init scale overflows).
_FLOAT_RANGES = (("rotary_base", 2.0, 1e9), ("dropout", 0.0, 1.0),
                 ("initializer_range", 0.0, 10.0), ("embed_init_std", 0.0, 10.0))

#: Memory a constructed :class:`~rasp_model.transformer.Transformer` takes per layer beyond its
#: weights (modules, hook points, small tensors; measured 66 KiB for a layer of width 1, rounded
#: up). Counted by :meth:`TransformerConfig.memory_bytes`, so a config with 100,000 tiny layers
#: is refused as surely as one with ``d_model`` 10**9.
LAYER_OVERHEAD_BYTES = 96 * 1024


class TransformerConfigError(RASPError, ValueError):
    """An invalid :class:`TransformerConfig` (message names the field and the allowed values)."""


@dataclass(frozen=True)
class TLField:
    """One row of :data:`TL_FIELDS`: a :class:`TransformerConfig` field and its TransformerLens
    counterpart.

    ``tl_name`` is the ``HookedTransformerConfig`` field (None: TransformerLens has none);
    ``tl_value`` says how our value becomes TransformerLens's; ``legacy`` is the field's name
    in configs saved before it took TransformerLens's name (still read by
    :meth:`TransformerConfig.from_dict`).
    """

    name: str
    tl_name: str | None
    tl_value: str
    legacy: str | None = None


TL_FIELDS: tuple[TLField, ...] = (
    TLField("n_layers", "n_layers", "same"),
    TLField("d_model", "d_model", "same"),
    TLField("d_head", "d_head", "same"),
    TLField("n_heads", "n_heads", "int, or per-layer list -> its maximum (missing heads are zero "
            "weights)"),
    TLField("d_mlp", "d_mlp", "int, or per-layer list -> its maximum (missing units are zero "
            "weights)"),
    TLField("d_vocab", "d_vocab", "same"),
    TLField("d_vocab_out", "d_vocab_out", "same"),
    TLField("n_ctx", "n_ctx", "same (TransformerLens accepts at most n_ctx positions)"),
    TLField("pe", "positional_embedding_type",
            "the paper's six names (Kazemnejad et al.) -> "
            + "; ".join(f"{n}: {get_pe(n).tl_doc}" for n in PE_NAMES)
            + " (each encoding's tl_doc, rasp_model.pe_names)"),
    TLField("rotary_dim", "rotary_dim", "same (rotated dimensions per head; rope only)",
            legacy="rope_fraction"),
    TLField("rotary_base", "rotary_base", "same", legacy="rope_base"),
    TLField("act_fn", "act_fn", "same ('relu', 'gelu')", legacy="act"),
    TLField("normalization_type", "normalization_type", "same ('LN' = pre-LN with w and b "
            "before attention, MLP and unembedding; None)", legacy="normalization"),
    TLField("use_attn_scale", "use_attn_scale", "same (divide scores by sqrt(d_head))",
            legacy="attn_scale"),
    TLField("attention_dir", "attention_dir", "same ('causal', 'bidirectional')",
            legacy="causal"),
    TLField("tied_embeddings", None, "W_U = W_E^T is written out"),
    TLField("dropout", None, "none (inference only)"),
    TLField("attn_bias", None, "TransformerLens always has b_Q, b_K, b_V, b_O: zeros when False"),
    TLField("mlp_bias", None, "TransformerLens always has b_in, b_out: zeros when False"),
    TLField("d_head_widths", None, "heads zero-padded to d_head (W_Q/W_K/W_V columns, W_O rows "
            "beyond a head's width are 0)"),
    TLField("n_heads_mask", None, "folded into W_O (a silenced head writes nothing)"),
    TLField("initializer_range", "initializer_range", "same (std of the normal init)",
            legacy="init_std"),
    TLField("embed_init_std", None, "none (init only)"),
    TLField("relative_attention_num_buckets", "relative_attention_num_buckets", "same (t5 only)",
            legacy="t5_num_buckets"),
    TLField("relative_attention_max_distance", "relative_attention_max_distance",
            "same (t5 only)", legacy="t5_max_distance"),
)
"""The one table of :class:`TransformerConfig` fields and TransformerLens's
``HookedTransformerConfig`` fields (every field has a row; ``tests/test_transformer_model.py``
checks it, and ``tests/test_transformer_lens.py`` checks the names against the installed
library)."""

_LEGACY = {f.legacy: f.name for f in TL_FIELDS if f.legacy}
_LEGACY_VALUES = {"normalization_type": {"pre_ln": "LN", "none": None},
                  "attention_dir": {True: "causal", False: "bidirectional"}}


@dataclass
class TransformerConfig:
    """Hyper-parameters of :class:`Transformer` (all serialisable with :meth:`to_dict`).

    Field names are TransformerLens's where it has the concept (table :data:`TL_FIELDS`);
    ``pe`` names a registered positional encoding (:mod:`rasp_model.pe_names`: the paper's six,
    :data:`~rasp_model.pe_names.PE_NAMES`, which TransformerLens does not all have, and any
    registered since); :attr:`encoding` is that object. ``n_heads`` and ``d_mlp`` are an int (same in every layer) or a list with
    one entry per layer; 0 removes that sublayer. ``n_ctx`` is the number of learned positions
    for ``ape_learned`` (other encodings accept any length). ``use_attn_scale`` divides scores by
    sqrt(d_head). ``attention_dir`` ``"causal"`` masks keys after the query,
    ``"bidirectional"`` does not. ``rotary_dim`` (``pe="rope"`` only) is the number of rotated
    dimensions per head, even, 2..d_head; None means the default
    (:func:`rasp_model.positional.default_rotary_dim`, 25% of d_head as Kazemnejad et al.).
    ``normalization_type`` is ``"LN"`` (pre-LN) or None. ``tied_embeddings`` reuses ``W_E`` as
    the unembedding (needs ``d_vocab == d_vocab_out``). ``n_heads_mask`` (optional, list of
    per-layer lists of 0/1) silences heads, e.g. for ablations. ``d_head_widths`` (optional,
    one list of per-head ints per layer, each 1..d_head) gives each head its own width: head
    ``h`` of layer ``l`` uses only the first ``d_head_widths[l][h]`` of its ``d_head``
    query/key/value dimensions (the rest are zero; weights are stored unpadded, see
    :mod:`rasp_model.io`); None = every head has ``d_head`` (trained models). Scores are still
    divided by sqrt(d_head). Not with ``pe="rope"``. Raises
    :class:`TransformerConfigError` for an invalid value.
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
    rotary_dim: int | None = None
    rotary_base: float = 10000.0
    act_fn: str = "relu"
    normalization_type: str | None = "LN"
    use_attn_scale: bool = True
    attention_dir: str = "causal"
    tied_embeddings: bool = False
    dropout: float = 0.0
    attn_bias: bool = True
    mlp_bias: bool = True
    n_heads_mask: list | None = None
    d_head_widths: list | None = None
    initializer_range: float = 0.02
    embed_init_std: float | None = None
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128

    def __post_init__(self):
        if self.d_vocab_out is None:
            self.d_vocab_out = self.d_vocab
        if self.pe in registered_pes():
            self.encoding.configure(self)          # e.g. rope's default rotary_dim
        self.validate()

    @property
    def encoding(self) -> PositionalEncoding:
        """The registered positional encoding ``pe`` names (its formula, limits, export);
        :class:`~rasp_model.pe_names.PositionalEncodingError` for an unknown name."""
        return get_pe(self.pe)

    # -- per-layer views ------------------------------------------------------------------
    def heads(self, layer: int) -> int:
        """Number of heads in ``layer``."""
        return int(self.n_heads[layer] if isinstance(self.n_heads, (list, tuple))
                   else self.n_heads)

    def mlp_width(self, layer: int) -> int:
        """MLP hidden width in ``layer`` (0 = no MLP)."""
        return int(self.d_mlp[layer] if isinstance(self.d_mlp, (list, tuple)) else self.d_mlp)

    def head_widths(self, layer: int) -> list[int]:
        """Per-head widths of ``layer`` (``d_head`` each unless ``d_head_widths`` is set)."""
        if self.d_head_widths is None:
            return [self.d_head] * self.heads(layer)
        return [int(w) for w in self.d_head_widths[layer]]

    @property
    def max_heads(self) -> int:
        return max([self.heads(l) for l in range(self.n_layers)] + [0])

    def parameter_count(self) -> int:
        """Number of weights of the :class:`~rasp_model.transformer.Transformer` built from
        this config (its ``parameters()``; exact Python int, however large the shape)."""
        d, count = self.d_model, self.d_vocab * self.d_model
        ln = 2 * d if self.normalization_type == "LN" else 0
        count += self.encoding.parameter_count(self)
        for layer in range(self.n_layers):
            h, w = self.heads(layer), self.mlp_width(layer)
            if h:
                count += ln + 4 * h * d * self.d_head
                count += 3 * h * self.d_head + d if self.attn_bias else 0
            if w:
                count += ln + 2 * d * w + (w + d if self.mlp_bias else 0)
        count += ln + self.d_vocab_out + (0 if self.tied_embeddings else d * self.d_vocab_out)
        return count

    def memory_bytes(self) -> int:
        """Memory the model takes once built: float32 weights plus
        :data:`LAYER_OVERHEAD_BYTES` per layer (and one layer's worth for the embeddings)."""
        return 4 * self.parameter_count() + LAYER_OVERHEAD_BYTES * (self.n_layers + 1)

    def validate(self) -> None:
        """Raise :class:`TransformerConfigError` for an inconsistent config, or one whose
        model would not fit the model budget (:meth:`memory_bytes` against
        :data:`MAX_MODEL_BYTES`) — checked here, before anything is allocated."""
        def bad(msg):
            raise TransformerConfigError(msg)
        if self.pe not in registered_pes():
            bad(f"pe must be one of {', '.join(registered_pes())}, got {self.pe!r}")
        if self.act_fn not in ("relu", "gelu"):
            bad(f"act_fn must be 'relu' or 'gelu', got {self.act_fn!r}")
        if self.normalization_type not in ("LN", None):
            bad(f"normalization_type must be 'LN' or None, got {self.normalization_type!r}")
        if self.attention_dir not in ("causal", "bidirectional"):
            bad(f"attention_dir must be 'causal' or 'bidirectional', got "
                f"{self.attention_dir!r}")
        for name in ("n_layers", "d_model", "d_head", "d_vocab", "d_vocab_out", "n_ctx"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < (0 if name == "n_layers"
                                                                        else 1):
                bad(f"{name} must be a positive int, got {v!r}")
        if LAYER_OVERHEAD_BYTES * (self.n_layers + 1) > MAX_MODEL_BYTES:   # before per-layer loops
            bad(f"n_layers={self.n_layers:,} would need more than the model budget of "
                f"{MAX_MODEL_BYTES // 2**20:,} MiB (rasp_model.config.MAX_MODEL_BYTES) for the "
                f"layers alone")
        for name in ("relative_attention_num_buckets", "relative_attention_max_distance"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
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
        for name, lo, hi in _FLOAT_RANGES:
            v = getattr(self, name)
            if v is None and name == "embed_init_std":
                continue
            if (not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v)
                    or not lo <= v <= hi):
                bad(f"{name} must be a finite number in [{lo:g}, {hi:g}], got {v!r}")
        if not 0.0 <= self.dropout < 1.0:
            bad(f"dropout must be in [0, 1), got {self.dropout}")
        problem = self.encoding.check_config(self)
        if problem:
            bad(problem)
        if self.n_heads_mask is not None:
            if len(self.n_heads_mask) != self.n_layers or any(
                    len(m) != self.heads(l) for l, m in enumerate(self.n_heads_mask)):
                bad("n_heads_mask must hold one list of length n_heads_l per layer")

        if self.d_head_widths is not None:
            w = self.d_head_widths
            if (not isinstance(w, (list, tuple)) or len(w) != self.n_layers
                    or any(not isinstance(m, (list, tuple)) or len(m) != self.heads(l)
                           for l, m in enumerate(w))):
                bad("d_head_widths must hold one list of length n_heads_l per layer")
            if any(not isinstance(x, int) or isinstance(x, bool) or not 1 <= x <= self.d_head
                   for m in w for x in m):
                bad(f"d_head_widths entries must be ints in 1..d_head={self.d_head}")
        need = self.memory_bytes()
        if need > MAX_MODEL_BYTES:
            bad(f"the model would need about {need // 2**20:,} MiB ({self.parameter_count():,} "
                f"float32 weights in {self.n_layers:,} layers), more than the model budget of "
                f"{MAX_MODEL_BYTES // 2**20:,} MiB (rasp_model.config.MAX_MODEL_BYTES)")

    def to_dict(self) -> dict:
        """Plain JSON-serialisable dict."""
        d = dataclasses.asdict(self)
        for k in ("n_heads", "d_mlp"):
            if isinstance(d[k], tuple):
                d[k] = list(d[k])
        if d["d_head_widths"] is None:
            del d["d_head_widths"]          # configs without it stay byte-identical
        else:
            d["d_head_widths"] = [list(m) for m in d["d_head_widths"]]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TransformerConfig":
        """Inverse of :meth:`to_dict`; unknown keys raise TransformerConfigError.

        Configs saved before the fields took TransformerLens's names load too (the ``legacy``
        column of :data:`TL_FIELDS`: ``rope_fraction`` becomes ``rotary_dim`` =
        :func:`rasp_model.positional.rotary_dim_from_fraction`, ``normalization`` ``"pre_ln"`` /
        ``"none"`` becomes ``"LN"`` / None, ``causal`` True / False becomes ``attention_dir``).
        """
        d = dict(d)
        legacy = {"rope_fraction": d.pop("rope_fraction", None)}
        for old, new in _LEGACY.items():
            if old in d and new not in d:
                v = d.pop(old)
                d[new] = _LEGACY_VALUES.get(new, {}).get(v, v)
        if d.get("pe", "nope") in registered_pes():    # the encoding's own older settings
            try:
                get_pe(d.get("pe", "nope")).upgrade_config(d, legacy)
            except (PositionalEncodingError, TypeError, ValueError) as e:
                raise TransformerConfigError(f"bad {d.get('pe')} setting: {e}") from None
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise TransformerConfigError(f"unknown config keys: {sorted(unknown)}")
        return cls(**d)

    def replace(self, **changes) -> "TransformerConfig":
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)
