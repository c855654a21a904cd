"""The positional-encoding registry: each encoding one :class:`PositionalEncoding` object,
registered once, that says everything the toolkit needs of it.

An encoding carries

- its names and docs: :attr:`~PositionalEncoding.name` (the config's ``pe``, the ``--pe``
  word), :attr:`~PositionalEncoding.label` (the papers' name), :attr:`~PositionalEncoding.source`
  and its docstring;
- its formula, how the one :class:`rasp_model.transformer.Transformer` applies it
  (:attr:`~PositionalEncoding.applies`: nothing, an embedding added to the residual stream, a
  bias added to the attention logits, or a rotation of queries and keys), through the hooks
  :meth:`~PositionalEncoding.build`, :meth:`~PositionalEncoding.embedding`,
  :meth:`~PositionalEncoding.shared_bias`, :meth:`~PositionalEncoding.attention_bias` and
  :meth:`~PositionalEncoding.rotate`;
- its config rules (:meth:`~PositionalEncoding.configure`,
  :meth:`~PositionalEncoding.check_config`, :meth:`~PositionalEncoding.parameter_count`);
- its evaluation limits (:meth:`~PositionalEncoding.max_positions`: a learned absolute
  embedding represents only the positions it has rows for; :attr:`~PositionalEncoding.absolute`:
  whether ``pos_offset``, Zhou et al.'s random position offsets, moves it);
- the training protocol the length-generalization theories assume for it
  (:attr:`~PositionalEncoding.theory_offsets`, read by :func:`theory_protocol`: a learned APE's
  RASP-L and C-RASP[periodic, local] predictions assume random position offsets, so every
  position embedding is trained); every command that trains "as the theories assume" reads it;
- what the compiler's TransformerLens export writes for it (:attr:`~PositionalEncoding.tl_type`,
  :meth:`~PositionalEncoding.tl_refusal`, :meth:`~PositionalEncoding.tl_config`,
  :meth:`~PositionalEncoding.tl_pos_embed`).

Adding an encoding is one subclass and one :func:`register_pe` call
(``tests/test_pe_registry.py`` registers a fixed random attention bias and trains it).
The six of Kazemnejad et al. 2023 are registered here; :data:`PE_NAMES` is their display
order (the ``all`` of every table, figure and ``--pe all``), :data:`PE_LABELS` their papers'
names.

Imports no torch, so that the command line can check a ``--pe`` or a preset and answer a usage
error at once (``tests/test_cli_startup.py``): the formulas' tensor code is
:mod:`rasp_model.positional`, which the built-in encodings load when a model first applies
them (:func:`_formulas`). Which theory predicts for an encoding is the prediction room's
(``analysis.prediction.theories.PE_THEORIES``), above this floor.
"""

from __future__ import annotations

import importlib
from typing import Any

from rasp.errors import RASPError

__all__ = ["PositionalEncoding", "PositionalEncodingError", "register_pe", "unregister_pe",
           "get_pe", "registered_pes", "check_pe", "PE_NAMES", "PE_LABELS", "NOTHING",
           "EMBEDDING", "BIAS", "ROTATION", "DEFAULT_ROTARY_FRACTION", "rotary_dim_from_fraction",
           "default_rotary_dim", "theory_protocol"]


class PositionalEncodingError(RASPError, ValueError):
    """A bad positional-encoding setting or a position the encoding cannot represent."""


DEFAULT_ROTARY_FRACTION = 0.25
"""Share of each head's dimensions rotated when ``rotary_dim`` is not given (Kazemnejad et al.
2023 rotated 25%, GPT-J style)."""


def rotary_dim_from_fraction(d_head: int, fraction: float) -> int:
    """Rotated dimensions for a share of ``d_head``: ``int(d_head * fraction)`` rounded down to
    even, at least 2. Raises PositionalEncodingError unless 0 < fraction <= 1. (Configs saved
    before ``rotary_dim`` existed stored ``rope_fraction``; this converts them.)"""
    if not 0.0 < fraction <= 1.0:
        raise PositionalEncodingError(f"rope_fraction must be in (0, 1], got {fraction}")
    r = int(d_head * fraction) // 2 * 2
    return max(2, min(r, d_head // 2 * 2))


def default_rotary_dim(d_head: int) -> int:
    """``rotary_dim`` when a config does not set it: :data:`DEFAULT_ROTARY_FRACTION` of
    ``d_head`` (16 -> 4)."""
    return rotary_dim_from_fraction(d_head, DEFAULT_ROTARY_FRACTION)


#: :attr:`PositionalEncoding.applies`: where the model applies an encoding
NOTHING, EMBEDDING, BIAS, ROTATION = ("nothing", "added embedding", "attention bias",
                                      "rotation")


def _formulas():
    """:mod:`rasp_model.positional` (PyTorch), loaded when a built-in encoding's formula first
    runs. By module name, as ``rasp_model/__init__.py`` loads its torch names: that module
    imports this one (the error, the names), so a plain import here would be a cycle, and at
    the top it would load torch for every usage error."""
    return importlib.import_module("rasp_model.positional")


class PositionalEncoding:
    """One positional encoding (module docstring). Subclass it, set the class attributes,
    override the hooks of its :attr:`applies`, and :func:`register_pe` it.

    Shapes: ``positions [batch, seq]`` absolute positions (``arange(seq) + pos_offset``); an
    embedding ``[batch, seq, d_model]``; a bias ``[head, query, key]``; rotated tensors
    ``[batch, head, seq, d_head]``. ``cfg`` is a :class:`rasp_model.config.TransformerConfig`,
    ``model`` the :class:`rasp_model.transformer.Transformer` being run.
    """

    #: the registry key: the config's ``pe``, the ``--pe`` word, run directories' ``<pe>``
    name: str = ""
    #: the name the papers, tables and figures use
    label: str = ""
    #: where the formula comes from (paper, section)
    source: str = ""
    #: where the model applies it: :data:`NOTHING`, :data:`EMBEDDING` (added to the token
    #: embedding, before the first layer), :data:`BIAS` (added to every layer's scaled
    #: attention logits, before the causal mask) or :data:`ROTATION` (of each layer's queries
    #: and keys)
    applies: str = NOTHING
    #: True when it reads absolute positions, so ``pos_offset`` moves it (learned and
    #: sinusoidal APE, RoPE); relative biases and NoPE ignore offsets
    absolute: bool = False
    #: the ``position_offsets`` training protocol the length-generalization theories assume for
    #: it (``"random"``: every position embedding trained, as Zhou et al. 2023's offsets and
    #: Huang et al. 2025 §3 train a learned APE), or None: they assume no offsets
    theory_offsets: str | None = None
    #: the Transformer attribute holding its learned parameters (state-dict prefix), or None
    module_name: str | None = None
    #: TransformerLens's ``positional_embedding_type`` for it, or None: no counterpart
    tl_type: str | None = None
    #: how the TransformerLens export represents it (one phrase, for
    #: :data:`rasp_model.config.TL_FIELDS`)
    tl_doc: str = ""
    #: config fields only this encoding reads (the export drops them for the others)
    own_fields: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"<positional encoding {self.name!r}: {self.label}>"

    # -- config rules (no torch) -----------------------------------------------------------
    def configure(self, cfg) -> None:
        """Fill this encoding's settings a config left unset (before validation)."""

    def check_config(self, cfg) -> str | None:
        """What is wrong with ``cfg`` for this encoding (one sentence), or None."""
        return None

    def parameter_count(self, cfg) -> int:
        """Weights of its learned parameters (:meth:`build`'s module) under ``cfg``."""
        return 0

    def upgrade_config(self, d: dict, legacy: dict) -> None:
        """Turn settings of configs saved under older names (``legacy``: name -> value, taken
        out of ``d``) into this encoding's fields of the dict ``d``."""

    # -- evaluation limits -----------------------------------------------------------------
    def max_positions(self, cfg) -> int | None:
        """How many absolute positions (0..n-1) it has learned, so can represent, or None for
        any length. Evaluation refuses longer sequences and greedy decoding stops there."""
        return None

    # -- formula (called by the Transformer; tensors) -----------------------------------------
    def build(self, cfg) -> Any:
        """Its learned parameters as a ``torch.nn.Module`` (set on the model as
        :attr:`module_name`, right after the token embedding), or None."""
        return None

    def embedding(self, model, positions) -> Any:
        """(:data:`EMBEDDING`) the ``[batch, seq, d_model]`` tensor added to the token
        embedding (``hook_pos_embed``), in the embedding's dtype."""
        raise NotImplementedError(f"{self.name}: applies {self.applies!r}, no embedding")

    def shared_bias(self, model, seq: int) -> Any:
        """(:data:`BIAS`) what every layer's bias is computed from, once per forward pass
        (e.g. T5's ``[max_heads, seq, seq]`` learned bias), or None."""
        return None

    def attention_bias(self, shared, n_heads: int, seq: int, device) -> Any:
        """(:data:`BIAS`) the ``[n_heads, seq, seq]`` bias added to a layer's scaled logits
        (``shared``: :meth:`shared_bias`'s value, on ``device``)."""
        raise NotImplementedError(f"{self.name}: applies {self.applies!r}, no attention bias")

    def rotate(self, cfg, x, positions) -> Any:
        """(:data:`ROTATION`) queries or keys ``x [batch, head, seq, d_head]`` rotated by
        their ``positions``."""
        raise NotImplementedError(f"{self.name}: applies {self.applies!r}, no rotation")

    # -- the compiler's TransformerLens export ----------------------------------------------------
    def tl_refusal(self, cfg) -> str | None:
        """Why a ``HookedTransformer`` cannot compute a model of ``cfg`` with this encoding
        exactly (the export's error message), or None."""
        if self.tl_type is None:
            return (f"positional encoding {self.name!r} has no HookedTransformer counterpart; "
                    f"exportable: {', '.join(n for n in registered_pes() if get_pe(n).tl_type)}")
        return None

    def tl_config(self, cfg) -> dict:
        """The ``HookedTransformerConfig`` fields it sets (``positional_embedding_type`` and
        any of its own)."""
        return {"positional_embedding_type": self.tl_type}

    def tl_pos_embed(self, model, dtype) -> Any:
        """The ``pos_embed.W_pos [n_ctx, d_model]`` a ``HookedTransformer`` of type
        :attr:`tl_type` holds for ``model``, or None (it has none)."""
        return None


_REGISTRY: dict[str, PositionalEncoding] = {}


def register_pe(pe):
    """Register a :class:`PositionalEncoding` (a subclass, instantiated without arguments, or
    an instance) under its ``name``; returns ``pe`` (so it can decorate a class).

    Raises PositionalEncodingError: not a PositionalEncoding, no name or label, an
    :attr:`~PositionalEncoding.applies` not of the four, or a name already registered."""
    obj = pe() if isinstance(pe, type) and issubclass(pe, PositionalEncoding) else pe
    if not isinstance(obj, PositionalEncoding):
        raise PositionalEncodingError(f"register_pe takes a PositionalEncoding subclass or "
                                      f"instance, got {type(pe).__name__}")
    if not obj.name or not obj.label or not obj.name.isidentifier():
        raise PositionalEncodingError(f"{type(obj).__name__} needs a name (an identifier) and "
                                      f"a label, got {obj.name!r} / {obj.label!r}")
    if obj.applies not in (NOTHING, EMBEDDING, BIAS, ROTATION):
        raise PositionalEncodingError(f"{obj.name}: applies must be one of {NOTHING!r}, "
                                      f"{EMBEDDING!r}, {BIAS!r}, {ROTATION!r}; got "
                                      f"{obj.applies!r}")
    if obj.name in _REGISTRY:
        raise PositionalEncodingError(f"positional encoding {obj.name!r} is already registered")
    _REGISTRY[obj.name] = obj
    return pe


def unregister_pe(name: str) -> None:
    """Remove an encoding :func:`register_pe` added (the six built-ins stay)."""
    if name in PE_NAMES:
        raise PositionalEncodingError(f"{name!r} is built in; it cannot be unregistered")
    _REGISTRY.pop(name, None)


def registered_pes() -> tuple[str, ...]:
    """Every registered encoding's name: the built-ins in :data:`PE_NAMES` order, then the
    others in the order they were registered."""
    return tuple(_REGISTRY)


def get_pe(name: str) -> PositionalEncoding:
    """The registered encoding called ``name``; PositionalEncodingError naming the known ones
    otherwise."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise PositionalEncodingError(f"unknown positional encoding {name!r}; known: "
                                      f"{', '.join(_REGISTRY)}") from None


def check_pe(pe: str) -> str:
    """Return ``pe`` if it names a registered encoding, else raise PositionalEncodingError."""
    get_pe(pe)
    return pe


def theory_protocol(pe: str) -> str:
    """The ``position_offsets`` setting (``"none"`` / ``"random"``) of runs of ``pe`` trained
    as the length-generalization theories assume (:attr:`PositionalEncoding.theory_offsets`;
    ``"none"`` when the encoding states none). PositionalEncodingError for an unknown name."""
    return get_pe(pe).theory_offsets or "none"


# ----------------------------------------------------------------------------------------------
# The six encodings of Kazemnejad et al. 2023 ("The Impact of Positional Encoding on Length
# Generalization in Transformers", arXiv 2305.19466), in display order: no position
# information, then the relative encodings, then the absolute ones
# ----------------------------------------------------------------------------------------------

class NoPE(PositionalEncoding):
    """Nothing positional; only the causal mask tells positions apart (Kazemnejad et al. 2023
    show it can represent absolute and relative positions)."""

    name, label, source = "nope", "NoPE", "Kazemnejad et al. 2023"
    tl_type, tl_doc = "standard", "'standard' with W_pos = 0"

    def tl_pos_embed(self, model, dtype):
        return _formulas().zero_table(model.cfg.n_ctx, model.cfg.d_model, dtype)


class T5Bias(PositionalEncoding):
    """A learned scalar per (bucket, head) added to the attention logits; unidirectional
    buckets of the distance q - k: n < 16 -> n, else 16 + floor(log(n/16) / log(128/16) * 16),
    capped at 31 (32 buckets, max distance 128). ``t5_bias.rel_bias.weight [32, max_heads]``
    is computed once per forward pass and shared by all layers (a layer with fewer heads uses
    the first ones)."""

    name, label, source = "t5", "T5 bias", "Raffel et al. 2020"
    applies, module_name = BIAS, "t5_bias"
    tl_doc = "none in HookedTransformer"
    own_fields = ("relative_attention_num_buckets", "relative_attention_max_distance")

    def parameter_count(self, cfg):
        return cfg.relative_attention_num_buckets * max(cfg.max_heads, 1)

    def build(self, cfg):
        return _formulas().T5RelativeBias(max(cfg.max_heads, 1),
                                          cfg.relative_attention_num_buckets,
                                          cfg.relative_attention_max_distance)

    def shared_bias(self, model, seq):
        return model.t5_bias(seq, seq)

    def attention_bias(self, shared, n_heads, seq, device):
        return shared[:n_heads]

    def tl_refusal(self, cfg):
        return (f"positional encoding {self.name!r} has no HookedTransformer counterpart "
                f"(TransformerLens has T5 relative bias only in its encoder-decoder); "
                f"exportable: {', '.join(n for n in registered_pes() if get_pe(n).tl_type)}")


class ALiBi(PositionalEncoding):
    """The bias -slope_h * |q - k| in every layer; slopes 2^(-8/H * h), h = 1..H, with the
    standard interleaving when H is not a power of two."""

    name, label, source = "alibi", "ALiBi", "Press et al. 2022"
    applies = BIAS
    tl_type, tl_doc = "alibi", "'alibi'"

    def attention_bias(self, shared, n_heads, seq, device):
        return _formulas().alibi_bias(n_heads, seq, seq, device=device)

    def tl_refusal(self, cfg):
        heads = [cfg.heads(l) for l in range(cfg.n_layers)]
        h = heads[0] if heads else 0
        # for a power of two, rasp_model.positional.alibi_slopes is TL's 2^(-8/H) geometric series
        if any(x != h for x in heads) or h < 1 or h & (h - 1):
            return (f"alibi export needs the same power-of-two number of heads in every layer "
                    f"(TransformerLens uses slopes 2^(-8h/H) of the layer width); got {heads}")
        if cfg.attention_dir != "causal":
            return ("alibi export needs attention_dir='causal' (TransformerLens's ALiBi bias is "
                    "one-sided)")
        return None

    def tl_pos_embed(self, model, dtype):          # HookedTransformer has W_pos: zeros
        return _formulas().zero_table(model.cfg.n_ctx, model.cfg.d_model, dtype)


class RoPE(PositionalEncoding):
    """Rotary embedding of queries and keys, base ``rotary_base`` (10000), applied to the first
    ``rotary_dim`` of each head's dimensions (GPT-J style, interleaved pairs; default 25% of
    ``d_head``, as the paper)."""

    name, label, source = "rope", "RoPE (Rotary)", "Su et al. 2021"
    applies, absolute = ROTATION, True
    tl_type, tl_doc = "rotary", "'rotary' with rotary_adjacent_pairs=True"
    own_fields = ("rotary_dim",)

    def configure(self, cfg):
        if cfg.rotary_dim is None and isinstance(cfg.d_head, int):
            cfg.rotary_dim = default_rotary_dim(cfg.d_head)

    def check_config(self, cfg):
        if cfg.d_head < 2:
            return "rope needs d_head >= 2"
        r = cfg.rotary_dim
        if not isinstance(r, int) or isinstance(r, bool) or r < 2 or r > cfg.d_head or r % 2:
            return f"rotary_dim must be an even int in 2..d_head={cfg.d_head}, got {r!r}"
        if cfg.d_head_widths is not None:
            return "d_head_widths is not supported with pe='rope'"
        return None

    def upgrade_config(self, d, legacy):
        fraction = legacy.get("rope_fraction")
        if fraction is not None and "rotary_dim" not in d:
            d["rotary_dim"] = rotary_dim_from_fraction(int(d.get("d_head", 16)), float(fraction))

    def rotate(self, cfg, x, positions):
        return _formulas().apply_rotary(x, positions, cfg.rotary_dim, cfg.rotary_base)

    def tl_config(self, cfg):
        return {"positional_embedding_type": self.tl_type,
                "rotary_adjacent_pairs": True}          # GPT-J style, as rasp_model.positional


class SinusoidalAPE(PositionalEncoding):
    """Fixed sinusoids added at the input: a sin block and a cos block concatenated, frequency
    of column i = 10000^(-2i/d_model)."""

    name, label, source = "ape_sinusoidal", "APE (sinusoidal)", "Vaswani et al. 2017, sec. 3.5"
    applies, absolute = EMBEDDING, True
    tl_type, tl_doc = "standard", "'standard' with W_pos = the sinusoid table"

    def check_config(self, cfg):
        return "ape_sinusoidal needs d_model >= 2" if cfg.d_model < 2 else None

    def embedding(self, model, positions):
        return _formulas().sinusoidal_embedding(positions, model.cfg, model.embed.W_E.dtype)

    def tl_pos_embed(self, model, dtype):   # the very table the Transformer adds (float32-rounded)
        return _formulas().sinusoidal_table(model.cfg.n_ctx, model.cfg.d_model).to(dtype)


class LearnedAPE(PositionalEncoding):
    """A learned absolute embedding ``pos_embed.W_pos [n_ctx, d_model]`` added at the input
    (GPT-2). Cannot represent positions >= n_ctx: evaluation stops there, and only the rows
    training reached are trained (hence Zhou et al.'s random position offsets)."""

    name, label, source = "ape_learned", "APE (learned)", "Radford et al. 2019 (GPT-2)"
    applies, absolute, module_name = EMBEDDING, True, "pos_embed"
    theory_offsets = "random"
    tl_type, tl_doc = "standard", "'standard'"

    def parameter_count(self, cfg):
        return cfg.n_ctx * cfg.d_model

    def max_positions(self, cfg):
        return cfg.n_ctx

    def build(self, cfg):
        return _formulas().PosEmbed(cfg)

    def embedding(self, model, positions):
        return model.pos_embed(positions)

    def tl_pos_embed(self, model, dtype):
        return model.pos_embed.W_pos.detach().clone()


for _pe in (NoPE, T5Bias, ALiBi, RoPE, SinusoidalAPE, LearnedAPE):
    register_pe(_pe)

#: the six built-in encodings, in the order every table, figure and `all` list uses
PE_NAMES: tuple[str, ...] = registered_pes()

#: the name each built-in encoding has in the papers (tables, figures, claims)
PE_LABELS: dict[str, str] = {n: get_pe(n).label for n in PE_NAMES}
