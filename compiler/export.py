"""TransformerLens round trip: rasp-lab models out to TransformerLens, TL models in for probing.

Out: :func:`to_transformer_lens` turns a compiled model (or any :class:`rasp_model.Transformer`) into
a TransformerLens model with identical logits and hook activations: a ``HookedTransformer``
where the installed ``transformer_lens`` has one (3.x), its ``TransformerBridge`` (built with
``TransformerBridge.boot_native``) otherwise (4.x). :func:`save_transformer_lens` writes
``DIR/tl_config.json`` (``HookedTransformerConfig`` fields, TransformerLens's own names) and
``DIR/tl_model.safetensors`` (every tensor a ``HookedTransformer`` has), which TransformerLens
loads strictly::

    import json, torch; from safetensors.torch import load_file
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    cfg = json.load(open("DIR/tl_config.json")); cfg["dtype"] = getattr(torch, cfg["dtype"])
    model = HookedTransformer(HookedTransformerConfig(**cfg))
    model.load_state_dict(load_file("DIR/tl_model.safetensors"), strict=True)

TransformerLens needs the same number of heads and the same MLP width in every layer and always
has biases; rasp-lab models have per-layer widths and (compiled) no biases. The export pads:
missing heads get zero ``W_Q/W_K/W_V/W_O`` (their pattern is uniform, their output exactly 0),
missing MLP units zero ``W_in/W_out`` (ReLU/GELU of 0 is 0), biases are zeros, missing
LayerNorms ``w = 1, b = 0`` (they feed zero weights only). Config fields map through the one
table :data:`rasp_model.config.TL_FIELDS`.

In: :func:`attention_patterns_from_transformer_lens` reads any TL model's attention patterns
through its ``blocks.{l}.attn.hook_pattern`` hooks; :class:`TransformerLensModel` wraps a TL
model so rasp-lab's probing treats it like its own ``Transformer``; :func:`load_transformer_lens`
loads a ``tl_config.json`` + ``tl_model.safetensors`` directory.

``transformer_lens`` is imported only inside the functions that build TL models (it is the
optional extra ``rasp-lab[tl]``, part of ``[test]``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from typing import Any

import numpy as np
import torch
from safetensors.torch import save

from rasp_model import Transformer
from rasp_model.config import LAYER_OVERHEAD_BYTES, MAX_MODEL_BYTES, TL_FIELDS
from rasp_model.files import FileReadError, atomic_write_bytes, read_json, read_safetensors
from rasp_model.pe_names import get_pe, registered_pes

from .errors import CompilerError

__all__ = ["TransformerLensExportError", "transformer_lens_config",
           "transformer_lens_state_dict", "save_transformer_lens", "to_transformer_lens",
           "load_transformer_lens", "attention_patterns_from_transformer_lens",
           "TransformerLensModel", "TL_CONFIG_FILE", "TL_WEIGHTS_FILE"]

TL_CONFIG_FILE = "tl_config.json"
TL_WEIGHTS_FILE = "tl_model.safetensors"


class TransformerLensExportError(CompilerError):
    """A model TransformerLens cannot represent exactly, a TL model that does not fit, or
    ``transformer_lens`` missing. The message names the reason."""


def _transformer(model) -> Transformer:
    """The :class:`rasp_model.Transformer` of a compiled model (``.model``) or the model itself."""
    # a compiled model is recognised by its ``.model`` Transformer, not by its class:
    # compiler.compile imports this module (CompiledModel.save writes the TL export), so this
    # module cannot import compiler.compile without an import cycle
    inner = model.model if not isinstance(model, Transformer) and isinstance(
        getattr(model, "model", None), Transformer) else model
    if not isinstance(inner, Transformer):
        raise TransformerLensExportError(
            f"expected a compiled model or a rasp_model.Transformer, got {type(model).__name__}")
    return inner


def _dtype_name(m: Transformer) -> str:
    return str(m.embed.W_E.dtype).replace("torch.", "")


def transformer_lens_config(model) -> dict:
    """``HookedTransformerConfig`` keyword arguments (JSON-serialisable; ``dtype`` as a name,
    e.g. ``"float64"``) for ``model`` (a compiled model or a ``rasp_model.Transformer``).

    Every field with a TransformerLens name in :data:`rasp_model.config.TL_FIELDS` is copied;
    ``n_heads`` / ``d_mlp`` become the widest layer's; ``pe`` becomes what its registered
    encoding says (:meth:`~rasp_model.pe_names.PositionalEncoding.tl_config`). Raises
    :class:`TransformerLensExportError` for what HookedTransformer cannot compute (the
    encoding's :meth:`~rasp_model.pe_names.PositionalEncoding.tl_refusal`): ``t5`` (no
    decoder-only T5 bias in TransformerLens), ``alibi`` with per-layer head counts or a head
    count that is not a power of two (TransformerLens's slopes are ``2^(-8h/H)`` for the padded
    ``H``), an encoding without a TransformerLens type.
    """
    m = _transformer(model)
    cfg = m.cfg
    enc = cfg.encoding
    refusal = enc.tl_refusal(cfg)
    if refusal:
        raise TransformerLensExportError(refusal)
    heads = [cfg.heads(l) for l in range(cfg.n_layers)]
    out: dict[str, Any] = {}
    for f in TL_FIELDS:
        if f.tl_name and f.tl_value.startswith("same"):
            out[f.tl_name] = getattr(cfg, f.name)
    H = max(heads + [1])
    M = max([cfg.mlp_width(l) for l in range(cfg.n_layers)] + [0])
    out["n_heads"] = H
    if M:
        out["d_mlp"] = M
    else:
        out["attn_only"] = True
    out.update(enc.tl_config(cfg))
    for other in registered_pes():                # the other encodings' own settings
        if other != cfg.pe:
            for k in get_pe(other).own_fields:
                out.pop(k, None)
    out.update(dtype=_dtype_name(m), eps=1e-5, default_prepend_bos=False,
               model_name="rasp-lab", original_architecture="rasp-lab")
    return json.loads(json.dumps(out))


def _padded(t: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    out = torch.zeros(shape, dtype=t.dtype)
    out[tuple(slice(0, s) for s in t.shape)] = t
    return out


@torch.no_grad()
def transformer_lens_state_dict(model, buffers: bool = False) -> dict[str, torch.Tensor]:
    """Every parameter of the equivalent ``HookedTransformer`` (TransformerLens names and
    shapes), padded as the module docstring says.

    Shapes: ``embed.W_E [d_vocab, d_model]``, ``pos_embed.W_pos [n_ctx, d_model]``,
    ``blocks.{l}.attn.W_Q/W_K/W_V [n_heads, d_model, d_head]``, ``b_Q/b_K/b_V [n_heads,
    d_head]``, ``W_O [n_heads, d_head, d_model]``, ``b_O [d_model]``, ``blocks.{l}.mlp.W_in
    [d_model, d_mlp]``, ``b_in [d_mlp]``, ``W_out [d_mlp, d_model]``, ``b_out [d_model]``,
    ``ln1/ln2/ln_final.w/.b [d_model]`` (``normalization_type="LN"``), ``unembed.W_U
    [d_model, d_vocab_out]``, ``b_U [d_vocab_out]``, with ``n_heads`` / ``d_mlp`` the widest
    layer's. ``buffers=True`` adds HookedTransformer 3.x's persistent attention buffers
    (``mask`` empty bool, ``IGNORE`` = -inf) so that a plain ``load_state_dict(strict=True)``
    accepts the file (not for ``rope``, whose sin/cos tables TransformerLens computes itself).
    """
    m = _transformer(model)
    cfg = m.cfg
    tl = transformer_lens_config(m)
    if buffers and tl["positional_embedding_type"] == "rotary":
        raise TransformerLensExportError(
            "rope models are not written as files (TransformerLens computes its rotary tables); "
            "use compiler.export.to_transformer_lens(model)")
    dt = m.embed.W_E.dtype
    d, dh, H, M = cfg.d_model, cfg.d_head, tl["n_heads"], tl.get("d_mlp", 0)
    sd: dict[str, torch.Tensor] = {"embed.W_E": m.embed.W_E.detach().clone()}
    W_pos = cfg.encoding.tl_pos_embed(m, dt)     # what HookedTransformer holds, if anything
    if W_pos is not None:
        sd["pos_embed.W_pos"] = W_pos
    ln = cfg.normalization_type == "LN"

    def ln_params(prefix, mod):
        if ln:
            sd[f"{prefix}.w"] = mod.w.detach().clone() if mod is not None else torch.ones(d, dtype=dt)
            sd[f"{prefix}.b"] = mod.b.detach().clone() if mod is not None else torch.zeros(d, dtype=dt)

    for l, block in enumerate(m.blocks):
        p = f"blocks.{l}"
        ln_params(f"{p}.ln1", block.ln1)
        a = block.attn
        zero_h = torch.zeros(0, d, dh, dtype=dt)
        wm = a.width_mask.to(dt) if a is not None and a.width_mask is not None else None
        for n in ("W_Q", "W_K", "W_V"):   # per-head widths: zero-padded to d_head
            w = getattr(a, n).detach() if a is not None else zero_h
            if wm is not None:
                w = w * wm[:, None, :]
            sd[f"{p}.attn.{n}"] = _padded(w,
                                          (H, d, dh))
        W_O = a.W_O.detach() if a is not None else torch.zeros(0, dh, d, dtype=dt)
        if wm is not None:
            W_O = W_O * wm[:, :, None]
        if a is not None and a.head_mask is not None:
            W_O = W_O * a.head_mask.to(dt)[:, None, None]
        sd[f"{p}.attn.W_O"] = _padded(W_O, (H, dh, d))
        for n in ("b_Q", "b_K", "b_V"):
            b = getattr(a, n).detach() if a is not None and cfg.attn_bias else torch.zeros(
                0, dh, dtype=dt)
            if wm is not None and cfg.attn_bias:
                b = b * wm
            sd[f"{p}.attn.{n}"] = _padded(b, (H, dh))
        sd[f"{p}.attn.b_O"] = (a.b_O.detach().clone() if a is not None and cfg.attn_bias
                               else torch.zeros(d, dtype=dt))
        if buffers:
            sd[f"{p}.attn.mask"] = torch.empty((0, 0), dtype=torch.bool)
            sd[f"{p}.attn.IGNORE"] = torch.tensor(-torch.inf)
        if M:
            ln_params(f"{p}.ln2", block.ln2)
            mlp = block.mlp
            W_in = mlp.W_in.detach() if mlp is not None else torch.zeros(d, 0, dtype=dt)
            W_out = mlp.W_out.detach() if mlp is not None else torch.zeros(0, d, dtype=dt)
            sd[f"{p}.mlp.W_in"] = _padded(W_in, (d, M))
            sd[f"{p}.mlp.W_out"] = _padded(W_out, (M, d))
            sd[f"{p}.mlp.b_in"] = _padded(
                mlp.b_in.detach() if mlp is not None and cfg.mlp_bias
                else torch.zeros(0, dtype=dt), (M,))
            sd[f"{p}.mlp.b_out"] = (mlp.b_out.detach().clone() if mlp is not None and cfg.mlp_bias
                                    else torch.zeros(d, dtype=dt))
    ln_params("ln_final", m.ln_final)
    sd["unembed.W_U"] = (m.embed.W_E.detach().T.clone() if cfg.tied_embeddings
                         else m.unembed.W_U.detach().clone())
    sd["unembed.b_U"] = m.unembed.b_U.detach().clone()
    return {k: v.contiguous() for k, v in sd.items()}


def _tl_model_files(tl_model) -> tuple[dict, dict[str, torch.Tensor]]:
    """Config (JSON-serialisable ``HookedTransformerConfig`` fields, ``dtype`` by name) and
    state dict of a TransformerLens ``HookedTransformer``."""
    cfg = {}
    for f in dataclasses.fields(tl_model.cfg):
        v = getattr(tl_model.cfg, f.name)
        if f.name == "dtype":
            v = str(v).replace("torch.", "")
        elif f.name in ("device", "n_params"):
            continue
        try:
            json.dumps(v)
        except TypeError:
            continue
        cfg[f.name] = v
    return cfg, {k: v.detach().cpu().contiguous() for k, v in tl_model.state_dict().items()}


def save_transformer_lens(model, directory: str | os.PathLike) -> tuple[str, str]:
    """Write ``DIR/tl_config.json`` and ``DIR/tl_model.safetensors`` (atomically) for
    TransformerLens's ``HookedTransformer`` (see the module docstring for the five lines that
    load them). ``model``: a compiled model, a ``rasp_model.Transformer``, or a TransformerLens
    ``HookedTransformer`` (its own config and tensors, e.g. to probe it with ``rasp probe
    DIR``). Returns the two paths. Raises :class:`TransformerLensExportError` for a model
    TransformerLens cannot represent (see :func:`transformer_lens_config`)."""
    if type(model).__name__ == "HookedTransformer":
        cfg, sd = _tl_model_files(model)
    else:
        cfg = transformer_lens_config(model)
        sd = transformer_lens_state_dict(model, buffers=True)
    directory = os.fspath(directory)
    cpath = os.path.join(directory, TL_CONFIG_FILE)
    wpath = os.path.join(directory, TL_WEIGHTS_FILE)
    atomic_write_bytes(wpath, save(sd, metadata={"format": "transformer-lens-hooked-transformer"}))
    atomic_write_bytes(cpath, json.dumps(cfg, indent=1).encode())
    return cpath, wpath


# ------------------------------------------------------------------------------------------
# Building TransformerLens models
# ------------------------------------------------------------------------------------------

def _import_tl():
    try:
        import transformer_lens  # noqa: F401
    except ImportError:
        raise TransformerLensExportError(
            "transformer_lens is not installed; pip install 'rasp-lab[tl]' "
            "(transformer-lens==3.9.0)") from None
    return transformer_lens


def _has_hooked_transformer() -> bool:
    tl = _import_tl()
    return hasattr(tl, "HookedTransformer")


def _tl_config_object(cfg: dict, cls):
    kw = dict(cfg)
    kw["dtype"] = getattr(torch, kw["dtype"])
    return cls(**kw)


def _build_hooked(cfg: dict, sd: dict[str, torch.Tensor]):
    from transformer_lens import (HookedTransformer,   # start-up: TransformerLens costs seconds
                                  HookedTransformerConfig)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)   # 3.x points to TransformerBridge
        tl_model = HookedTransformer(_tl_config_object(cfg, HookedTransformerConfig))
    own = tl_model.state_dict()
    buffers = {n for n, _ in tl_model.named_buffers()}
    missing = [k for k in own if k not in sd and k not in buffers]
    extra = [k for k in sd if k not in own]
    if missing or extra:
        raise TransformerLensExportError(
            f"HookedTransformer tensors do not match the export: missing {missing[:5]}, "
            f"unexpected {extra[:5]}")
    # strict: every parameter comes from the export, TL's own buffers from TL
    tl_model.load_state_dict({**{k: own[k] for k in buffers if k in own}, **sd}, strict=True)
    return tl_model.eval()


def _bridge_state_dict(cfg: dict, sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """HookedTransformer names -> TransformerBridge (native) names: per-head weights become the
    fused ``[out, in]`` linear weights of ``q/k/v/o``, ``mlp.in/out``, ``embed``,
    ``pos_embed``, ``unembed``."""
    out = {"embed.weight": sd["embed.W_E"], "unembed.weight": sd["unembed.W_U"].T,
           "unembed.bias": sd["unembed.b_U"]}
    if "pos_embed.W_pos" in sd:
        out["pos_embed.weight"] = sd["pos_embed.W_pos"]
    for l in range(cfg["n_layers"]):
        p = f"blocks.{l}"
        for n in ("Q", "K", "V"):
            W = sd[f"{p}.attn.W_{n}"]                       # [head, d_model, d_head]
            out[f"{p}.attn.{n.lower()}.weight"] = W.permute(0, 2, 1).reshape(-1, W.shape[1])
            out[f"{p}.attn.{n.lower()}.bias"] = sd[f"{p}.attn.b_{n}"].reshape(-1)
        W_O = sd[f"{p}.attn.W_O"]                           # [head, d_head, d_model]
        out[f"{p}.attn.o.weight"] = W_O.reshape(-1, W_O.shape[2]).T
        out[f"{p}.attn.o.bias"] = sd[f"{p}.attn.b_O"]
        if f"{p}.mlp.W_in" in sd:
            out[f"{p}.mlp.in.weight"] = sd[f"{p}.mlp.W_in"].T
            out[f"{p}.mlp.in.bias"] = sd[f"{p}.mlp.b_in"]
            out[f"{p}.mlp.out.weight"] = sd[f"{p}.mlp.W_out"].T
            out[f"{p}.mlp.out.bias"] = sd[f"{p}.mlp.b_out"]
        for ln in ("ln1", "ln2"):
            if f"{p}.{ln}.w" in sd:
                out[f"{p}.{ln}.weight"] = sd[f"{p}.{ln}.w"]
                out[f"{p}.{ln}.bias"] = sd[f"{p}.{ln}.b"]
    if "ln_final.w" in sd:
        out["ln_final.weight"] = sd["ln_final.w"]
        out["ln_final.bias"] = sd["ln_final.b"]
    return {k: v.contiguous() for k, v in out.items()}


def _build_bridge(cfg: dict, sd: dict[str, torch.Tensor]):
    from transformer_lens.model_bridge import TransformerBridge   # start-up: as above
    kw = {k: v for k, v in cfg.items() if k not in ("dtype", "model_name",
                                                     "original_architecture")}
    kw["init_weights"] = False
    if cfg["positional_embedding_type"] not in ("standard", "rotary"):
        raise TransformerLensExportError(
            f"TransformerBridge's native model has no {cfg['positional_embedding_type']!r} "
            f"positional embedding (it has standard and rotary); use a transformer-lens with "
            f"HookedTransformer (3.9.0)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bridge = TransformerBridge.boot_native(kw, dtype=getattr(torch, cfg["dtype"]))
    bsd = _bridge_state_dict(cfg, sd)
    own = bridge.state_dict()
    missing = [k for k in own if k not in bsd]
    extra = [k for k in bsd if k not in own]
    if missing or extra:
        raise TransformerLensExportError(
            f"TransformerBridge tensors do not match the export: missing {missing[:5]}, "
            f"unexpected {extra[:5]}")
    bridge.load_state_dict(bsd, strict=True)
    return bridge.eval()


def to_transformer_lens(model, kind: str = "auto"):
    """A TransformerLens model with the weights of ``model`` (a compiled model or a
    ``rasp_model.Transformer``): same logits ``[batch, pos, d_vocab_out]`` on the same token ids
    (compiled models: BOS id 0 first, PAD ``len(vocab) + 1``), same hook activations at the
    shared hook names.

    ``kind``: ``"auto"`` (``HookedTransformer`` if the installed transformer_lens has it, else
    ``TransformerBridge``), ``"hooked"`` or ``"bridge"``. Raises
    :class:`TransformerLensExportError` when transformer_lens is missing or the model has no
    TransformerLens equivalent.
    """
    if kind not in ("auto", "hooked", "bridge"):
        raise TransformerLensExportError(f"kind must be auto, hooked or bridge, got {kind!r}")
    cfg = transformer_lens_config(model)
    sd = transformer_lens_state_dict(model)
    if kind == "auto":
        kind = "hooked" if _has_hooked_transformer() else "bridge"
    else:
        _import_tl()
    return _build_hooked(cfg, sd) if kind == "hooked" else _build_bridge(cfg, sd)


#: What a TransformerLens config read from a file may name (``dtype`` becomes a torch
#: attribute, ``act_fn`` a TransformerLens function: only these names reach them).
TL_DTYPES = ("float16", "bfloat16", "float32", "float64")
TL_ACT_FNS = ("relu", "gelu", "gelu_new", "gelu_fast", "silu", "solu_ln")
_TL_SIZES = ("n_layers", "d_model", "n_ctx", "d_head", "n_heads", "d_vocab")


def check_tl_config(cfg, where: str) -> dict:
    """A ``tl_config.json`` read from a file, checked before TransformerLens sees it: a dict,
    positive integer sizes, ``dtype`` and ``act_fn`` from :data:`TL_DTYPES` /
    :data:`TL_ACT_FNS`, and the model it describes (weights plus TransformerLens's
    ``n_ctx x n_ctx`` mask per layer) within the model budget
    (``rasp_model.config.MAX_MODEL_BYTES``) before anything is allocated.
    :class:`TransformerLensExportError` naming the field."""
    def bad(msg):
        raise TransformerLensExportError(f"{where}: {msg}")
    if not isinstance(cfg, dict):
        bad("not a HookedTransformerConfig dict")
    n = {}
    for k in _TL_SIZES + ("d_mlp", "d_vocab_out"):
        v = cfg.get(k, 0 if k == "d_mlp" else -1 if k == "d_vocab_out" else None)
        if k == "d_vocab_out" and v == -1:
            v = cfg.get("d_vocab")
        if not isinstance(v, int) or isinstance(v, bool) or v < (0 if k in ("d_mlp", "n_layers")
                                                                 else 1):
            bad(f"{k} must be a positive integer, got {str(v)[:40]}")
        n[k] = v
    if cfg.get("dtype", "float32") not in TL_DTYPES:
        bad(f"dtype must be one of {', '.join(TL_DTYPES)}, got {str(cfg.get('dtype'))[:40]!r}")
    if cfg.get("act_fn") is not None and cfg.get("act_fn") not in TL_ACT_FNS:
        bad(f"act_fn must be one of {', '.join(TL_ACT_FNS)}, got {str(cfg.get('act_fn'))[:40]!r}")
    params = (n["d_vocab"] + n["d_vocab_out"] + n["n_ctx"]) * n["d_model"] + n["n_layers"] * (
        4 * n["n_heads"] * n["d_head"] * n["d_model"] + 2 * n["d_model"] * n["d_mlp"])
    need = 4 * params + n["n_layers"] * n["n_ctx"] ** 2 + LAYER_OVERHEAD_BYTES * (n["n_layers"] + 1)
    if need > MAX_MODEL_BYTES:
        bad(f"the model it describes would need about {need // 2**20:,} MiB, more than the model "
            f"budget of {MAX_MODEL_BYTES // 2**20:,} MiB (rasp_model.config.MAX_MODEL_BYTES)")
    return cfg


def load_transformer_lens(directory: str | os.PathLike, kind: str = "auto"):
    """Load ``DIR/tl_config.json`` + ``DIR/tl_model.safetensors`` (as written by
    :func:`save_transformer_lens`, or by a TransformerLens user from any ``HookedTransformer``:
    ``json.dump(cfg.to_dict())`` with ``dtype`` as a name, and ``save_file(model.state_dict())``)
    into a TransformerLens model. Raises :class:`TransformerLensExportError` naming the missing
    file or the mismatch."""
    directory = os.fspath(directory)
    cpath = os.path.join(directory, TL_CONFIG_FILE)
    wpath = os.path.join(directory, TL_WEIGHTS_FILE)
    for p in (cpath, wpath):
        if not os.path.exists(p):
            raise TransformerLensExportError(f"{directory}: missing {os.path.basename(p)}")
    try:
        cfg = check_tl_config(read_json(cpath, "TransformerLens config"), cpath)
        sd, _ = read_safetensors(wpath, "TransformerLens weights", buffers=(".mask", ".IGNORE"))
    except FileReadError as e:
        raise TransformerLensExportError(str(e)) from None
    if not sd:
        raise TransformerLensExportError(f"{wpath}: no tensors")
    cfg.setdefault("dtype", str(next(iter(sd.values())).dtype).replace("torch.", ""))
    if kind == "auto":
        kind = "hooked" if _has_hooked_transformer() else "bridge"
    params = {k: v for k, v in sd.items() if not k.endswith((".mask", ".IGNORE"))}
    try:
        return (_build_hooked(cfg, params) if kind == "hooked" else _build_bridge(cfg, params))
    except (TypeError, RuntimeError, ValueError, AssertionError, KeyError, AttributeError,
            IndexError) as e:
        if isinstance(e, TransformerLensExportError):
            raise
        raise TransformerLensExportError(f"{directory}: TransformerLens refuses it "
                                         f"({str(e)[:200]})"
                                         ) from None


# ------------------------------------------------------------------------------------------
# TL models in: attention patterns for probing
# ------------------------------------------------------------------------------------------

def _tl_cfg(tl_model):
    cfg = getattr(tl_model, "cfg", None)
    if cfg is None or not hasattr(cfg, "n_layers") or not hasattr(cfg, "d_vocab"):
        raise TransformerLensExportError(
            f"expected a TransformerLens model (HookedTransformer or TransformerBridge), got "
            f"{type(tl_model).__name__}")
    return cfg


@torch.no_grad()
def attention_patterns_from_transformer_lens(tl_model, tokens, d_vocab: int | None = None
                                             ) -> np.ndarray:
    """Attention probabilities of a TransformerLens model, read through its
    ``blocks.{l}.attn.hook_pattern`` hooks: ``[batch, layer, head, query, key]`` (numpy
    float64).

    ``tokens``: token ids ``[batch, seq]`` (or ``[seq]``). ``d_vocab``: the vocabulary size the
    caller's task uses; a model whose ``cfg.d_vocab`` differs is refused with
    :class:`TransformerLensExportError` naming both sizes (as is a token id the model has no
    embedding for, or a sequence longer than its ``n_ctx``).
    """
    cfg = _tl_cfg(tl_model)
    toks = torch.as_tensor(tokens, dtype=torch.long)
    if toks.dim() == 1:
        toks = toks[None]
    if d_vocab is not None and int(cfg.d_vocab) != int(d_vocab):
        raise TransformerLensExportError(
            f"TransformerLens model has d_vocab={cfg.d_vocab} but the task has {d_vocab} token "
            f"ids: the vocabularies do not match")
    if toks.numel() and (int(toks.max()) >= int(cfg.d_vocab) or int(toks.min()) < 0):
        raise TransformerLensExportError(
            f"token id {int(toks.max())} is outside the TransformerLens model's vocabulary "
            f"(d_vocab={cfg.d_vocab})")
    if cfg.positional_embedding_type == "standard" and toks.shape[1] > int(cfg.n_ctx):
        raise TransformerLensExportError(
            f"sequence of length {toks.shape[1]} is longer than the TransformerLens model's "
            f"n_ctx={cfg.n_ctx}")
    names = [f"blocks.{l}.attn.hook_pattern" for l in range(cfg.n_layers)]
    _, cache = tl_model.run_with_cache(toks, names_filter=lambda n: n in names)
    return np.stack([cache[n].detach().to(torch.float64).cpu().numpy() for n in names], axis=1)


class TransformerLensModel:
    """A TransformerLens model seen through rasp-lab's probing interface.

    ``attention_patterns(tokens)`` returns a list over layers of ``[batch, head, query, key]``
    arrays, like :meth:`rasp_model.Transformer.attention_patterns`, so
    ``analysis.probing.capture.capture_trained`` probes it like a trained model. ``d_vocab`` (optional)
    is checked against the model's (see :func:`attention_patterns_from_transformer_lens`).
    """

    def __init__(self, tl_model, d_vocab: int | None = None):
        self.tl_model = tl_model
        self.cfg = _tl_cfg(tl_model)
        self.d_vocab = d_vocab
        if d_vocab is not None and int(self.cfg.d_vocab) != int(d_vocab):
            raise TransformerLensExportError(
                f"TransformerLens model has d_vocab={self.cfg.d_vocab} but the task has "
                f"{d_vocab} token ids: the vocabularies do not match")

    def attention_patterns(self, tokens, pos_offset=None) -> list[np.ndarray]:
        """List over layers of ``[batch, head, query, key]`` (``pos_offset`` must be None)."""
        if pos_offset is not None:
            raise TransformerLensExportError("TransformerLens models take no position offset")
        pats = attention_patterns_from_transformer_lens(self.tl_model, tokens, self.d_vocab)
        return [pats[:, l] for l in range(pats.shape[1])]
