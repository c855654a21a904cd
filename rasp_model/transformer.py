"""The one decoder Transformer of rasp-lab, shared by compiled and trained models.

The forward pass in one file; inference on structured-sparse (compiled) weights is planned in
:mod:`rasp_model.sparse`, which the sublayers call. Parameter names and shapes follow TransformerLens so the
compiler can write weights by name and probing tools read them the same way::

    embed.W_E               [d_vocab, d_model]
    pos_embed.W_pos         [n_ctx, d_model]                (pe = "ape_learned" only)
    t5_bias.rel_bias.weight [32, max_heads]                 (pe = "t5" only; shared by layers)

(an encoding's learned parameters are its :meth:`~rasp_model.pe_names.PositionalEncoding.build`
module, set as its ``module_name`` right after ``embed``)
    blocks.{l}.ln1.w / .b   [d_model]                       (normalization_type "LN" only)
    blocks.{l}.attn.W_Q/W_K/W_V [n_heads_l, d_model, d_head]
    blocks.{l}.attn.b_Q/b_K/b_V [n_heads_l, d_head]         (attn_bias only)
    blocks.{l}.attn.W_O     [n_heads_l, d_head, d_model]
    blocks.{l}.attn.b_O     [d_model]                       (attn_bias only)
    blocks.{l}.ln2.w / .b   [d_model]                       ("LN" only)
    blocks.{l}.mlp.W_in     [d_model, d_mlp_l]
    blocks.{l}.mlp.b_in     [d_mlp_l]                       (mlp_bias only)
    blocks.{l}.mlp.W_out    [d_mlp_l, d_model]
    blocks.{l}.mlp.b_out    [d_model]                       (mlp_bias only)
    ln_final.w / .b         [d_model]                       ("LN" only)
    unembed.W_U             [d_model, d_vocab_out]          (absent when tied_embeddings)
    unembed.b_U             [d_vocab_out]

With ``d_head_widths`` (per-head widths) the attention tensors above stay padded to ``d_head``
in memory (columns/rows beyond a head's width are zero and kept zero in the forward pass);
:meth:`Transformer.packed_state_dict` and safetensors files hold them unpadded, heads
concatenated: ``W_Q/W_K/W_V [d_model, sum_h w_h]``, ``b_Q/b_K/b_V [sum_h w_h]``,
``W_O [sum_h w_h, d_model]``.

A layer with 0 heads has no attention sublayer (``blocks.{l}.attn`` is None) and a layer with
``d_mlp_l = 0`` has no MLP.

Hook points have TransformerLens's names and layouts; they are identity modules, so observing
never changes the forward pass (``pos`` = query position; ``head`` = the layer's heads; with
``d_head_widths`` the ``d_head`` axis of q/k/v/z is padded: entries beyond a head's width are 0)::

    hook_embed                      [batch, pos, d_model]
    hook_pos_embed                  [batch, pos, d_model]    (ape_learned, ape_sinusoidal)
    blocks.{l}.hook_resid_pre       [batch, pos, d_model]
    blocks.{l}.ln1.hook_normalized  [batch, pos, d_model]    (normalization_type "LN")
    blocks.{l}.attn.hook_q / hook_k / hook_v   [batch, pos, head, d_head]
    blocks.{l}.attn.hook_rot_q / hook_rot_k    [batch, pos, head, d_head]   (rope)
    blocks.{l}.attn.hook_attn_scores [batch, head, query, key] (scaled, biased, masked -inf)
    blocks.{l}.attn.hook_pattern    [batch, head, query, key] (softmax probabilities)
    blocks.{l}.attn.hook_z          [batch, pos, head, d_head]
    blocks.{l}.hook_attn_out        [batch, pos, d_model]
    blocks.{l}.hook_resid_mid       [batch, pos, d_model]
    blocks.{l}.ln2.hook_normalized  [batch, pos, d_model]    (normalization_type "LN")
    blocks.{l}.mlp.hook_pre / hook_post        [batch, pos, d_mlp_l]
    blocks.{l}.hook_mlp_out         [batch, pos, d_model]
    blocks.{l}.hook_resid_post      [batch, pos, d_model]
    ln_final.hook_normalized        [batch, pos, d_model]    (normalization_type "LN")

The hooks of an absent sublayer are not called.

The positional encoding is the registered object ``cfg.encoding``
(:mod:`rasp_model.pe_names`): the model calls the hooks of where it ``applies`` (an added
embedding, an attention bias, a rotation of q and k) and names no encoding itself.

The config is :class:`rasp_model.config.TransformerConfig`; weights are stored with safetensors only
(:func:`rasp_model.io.save_safetensors`, :func:`rasp_model.io.load_safetensors`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from rasp_model import sparse
from rasp_model.config import TransformerConfig
from rasp_model.pe_names import BIAS, EMBEDDING, ROTATION
from rasp_model.positional import ContextLengthError, concrete

__all__ = ["Transformer", "HookPoint", "ContextLengthError"]


class HookPoint(nn.Module):
    """Identity module marking an activation; forward hooks on it observe that activation."""

    def forward(self, x):
        return x


class Embed(nn.Module):
    """Token embedding ``W_E [d_vocab, d_model]``."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.W_E = nn.Parameter(torch.empty(cfg.d_vocab, cfg.d_model))

    def forward(self, tokens):
        return self.W_E[tokens]


class LayerNorm(nn.Module):
    """LayerNorm with TransformerLens names ``w`` and ``b`` ``[d_model]`` (eps 1e-5)."""

    def __init__(self, d_model: int):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d_model))
        self.b = nn.Parameter(torch.zeros(d_model))
        self.hook_normalized = HookPoint()  # [batch, pos, d_model]

    def forward(self, x):
        return self.hook_normalized(F.layer_norm(x, x.shape[-1:], self.w, self.b, 1e-5))


class Attention(nn.Module):
    """Multi-head attention with per-head weights ``W_Q/W_K/W_V [H, d_model, d_head]``.

    Inference on structured-sparse weights (compiled models: each head reads a few residual
    directions and writes a few): without gradients, biases, RoPE, a head mask or observers on
    ``hook_q/k/v/z``, q, k and v are computed from the residual directions their weights read
    and the ``d_head`` columns they use, and the output written only to the directions ``W_O``
    writes — the same products without their all-zero rows and columns (exact up to summation
    order). Taken when it saves at least half the multiply-adds; trained (dense) models are
    unaffected.
    """

    def __init__(self, cfg: TransformerConfig, layer: int):
        super().__init__()
        self.cfg, self.layer = cfg, layer
        self.encoding = cfg.encoding
        H, d, dh = cfg.heads(layer), cfg.d_model, cfg.d_head
        self.n_heads = H
        for n in ("W_Q", "W_K", "W_V"):
            setattr(self, n, nn.Parameter(torch.empty(H, d, dh)))
        self.W_O = nn.Parameter(torch.empty(H, dh, d))
        if cfg.attn_bias:
            for n in ("b_Q", "b_K", "b_V"):
                setattr(self, n, nn.Parameter(torch.zeros(H, dh)))
            self.b_O = nn.Parameter(torch.zeros(d))
        mask = cfg.n_heads_mask[layer] if cfg.n_heads_mask is not None else None
        self.register_buffer("head_mask", None if mask is None
                             else torch.tensor(mask, dtype=torch.float32), persistent=False)
        widths = None
        if cfg.d_head_widths is not None:
            widths = (torch.arange(dh)[None, :] < torch.tensor(cfg.head_widths(layer))[:, None])
            widths = widths.to(torch.float32)        # [head, d_head] 1 inside a head's width
        self.register_buffer("width_mask", widths, persistent=False)
        self.hook_q = HookPoint()            # [batch, pos, head, d_head] (before rotary)
        self.hook_k = HookPoint()            # [batch, pos, head, d_head] (before rotary)
        self.hook_v = HookPoint()            # [batch, pos, head, d_head]
        self.hook_rot_q = HookPoint()        # [batch, pos, head, d_head] (a rotation: rope)
        self.hook_rot_k = HookPoint()        # [batch, pos, head, d_head] (a rotation: rope)
        self.hook_attn_scores = HookPoint()  # [batch, head, query, key] (scaled, biased, masked)
        self.hook_pattern = HookPoint()      # [batch, head, query, key] (probabilities)
        self.hook_z = HookPoint()            # [batch, pos, head, d_head] (pattern @ v)
        self.attn_dropout = nn.Dropout(cfg.dropout)

    def forward(self, x, positions, rel_bias=None, segment_ids=None):
        """``x [batch, seq, d_model]``, ``positions [batch, seq]`` absolute positions,
        ``rel_bias``: the encoding's :meth:`~rasp_model.pe_names.PositionalEncoding.shared_bias`
        of this forward pass (None for most), ``segment_ids [batch, seq]`` or None (packed rows: a
        query attends only to keys of its own segment). Returns ``[batch, seq, d_model]``.

        Activations are laid out as in TransformerLens: q, k, v and z ``[batch, pos, head,
        d_head]``, scores and pattern ``[batch, head, query, key]``. A head silenced by
        ``n_heads_mask`` still shows its ``z``; it writes nothing to the residual stream.
        """
        cfg = self.cfg
        plan = self._sparse_plan()
        if plan is not None:
            return sparse.attention_forward(
                x, plan, lambda scores: self.attn_dropout(
                    self._pattern(scores, x, rel_bias, segment_ids)))
        W_Q, W_K, W_V, W_O = self._masked_weights()
        q = torch.einsum("bsd,hde->bshe", x, W_Q)
        k = torch.einsum("bsd,hde->bshe", x, W_K)
        v = torch.einsum("bsd,hde->bshe", x, W_V)
        if cfg.attn_bias:
            m = self.width_mask
            bq, bk, bv = ((self.b_Q, self.b_K, self.b_V) if m is None
                          else (self.b_Q * m, self.b_K * m, self.b_V * m))
            q, k, v = q + bq, k + bk, v + bv
        q, k, v = self.hook_q(q), self.hook_k(k), self.hook_v(v)
        if self.encoding.applies == ROTATION:
            rotate = self.encoding.rotate
            q = self.hook_rot_q(rotate(cfg, q.transpose(1, 2), positions).transpose(1, 2))
            k = self.hook_rot_k(rotate(cfg, k.transpose(1, 2), positions).transpose(1, 2))
        pattern = self._pattern(torch.einsum("bqhe,bkhe->bhqk", q, k), x, rel_bias,
                                segment_ids)
        z = self.hook_z(torch.einsum("bhqk,bkhe->bqhe", self.attn_dropout(pattern), v))
        W_O = W_O if self.head_mask is None else W_O * self.head_mask[:, None, None]
        out = torch.einsum("bshe,hed->bsd", z, W_O)
        if cfg.attn_bias:
            out = out + self.b_O
        return out

    def _masked_weights(self):
        W_Q, W_K, W_V, W_O = self.W_Q, self.W_K, self.W_V, self.W_O
        m = self.width_mask
        if m is not None:      # per-head widths: keep the padding exactly zero
            W_Q, W_K, W_V = W_Q * m[:, None, :], W_K * m[:, None, :], W_V * m[:, None, :]
            W_O = W_O * m[:, :, None]
        return W_Q, W_K, W_V, W_O

    def _pattern(self, scores, x, rel_bias, segment_ids):
        """Scaled, biased, masked scores -> ``hook_attn_scores``; their softmax ->
        ``hook_pattern`` ``[batch, head, query, key]``."""
        cfg = self.cfg
        if cfg.use_attn_scale:
            scores = scores / math.sqrt(cfg.d_head)
        seq = x.shape[1]
        if self.encoding.applies == BIAS:
            scores = scores + self.encoding.attention_bias(rel_bias, self.n_heads, seq,
                                                           x.device)[None]
        if cfg.attention_dir == "causal":
            future = torch.ones(seq, seq, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        if segment_ids is not None:
            other = segment_ids[:, None, :, None] != segment_ids[:, None, None, :]
            scores = scores.masked_fill(other, float("-inf"))
        scores = self.hook_attn_scores(scores)
        return self.hook_pattern(torch.softmax(scores, dim=-1))

    def _sparse_plan(self):
        """The structured-sparse plan (:mod:`rasp_model.sparse`), or None for the dense path:
        with gradients, biases, a rotary encoding, a head mask, in training, or with observers on
        ``hook_q/k/v/z`` (which the plan does not compute)."""
        cfg = self.cfg
        if (torch.is_grad_enabled() or cfg.attn_bias or self.encoding.applies == ROTATION
                or self.head_mask is not None or self.training
                or sparse.hooked(self.hook_q, self.hook_k, self.hook_v, self.hook_z)):
            return None
        return sparse.attention_plan(self, (self.W_Q, self.W_K, self.W_V, self.W_O),
                                     self._masked_weights, cfg.d_model, cfg.d_head)

class MLP(nn.Module):
    """Two-layer MLP ``W_in [d_model, d_mlp]``, ``W_out [d_mlp, d_model]`` (ReLU or GELU)."""

    def __init__(self, cfg: TransformerConfig, layer: int):
        super().__init__()
        self.cfg = cfg
        w = cfg.mlp_width(layer)
        self.W_in = nn.Parameter(torch.empty(cfg.d_model, w))
        self.W_out = nn.Parameter(torch.empty(w, cfg.d_model))
        if cfg.mlp_bias:
            self.b_in = nn.Parameter(torch.zeros(w))
            self.b_out = nn.Parameter(torch.zeros(cfg.d_model))
        self.hook_pre = HookPoint()   # [batch, pos, d_mlp] (before the activation)
        self.hook_post = HookPoint()  # [batch, pos, d_mlp] (after the activation)

    def forward(self, x):
        """``x [batch, pos, d_model]`` -> ``[batch, pos, d_model]``. Without gradients, biases
        or observers on its hooks, an MLP whose ``W_in`` reads few residual directions and
        whose ``W_out`` writes few computes only those (as :class:`Attention`)."""
        plan = self._sparse_plan()
        if plan is not None:
            return sparse.mlp_forward(x, plan, F.relu if self.cfg.act_fn == "relu" else F.gelu)
        h = x @ self.W_in
        if self.cfg.mlp_bias:
            h = h + self.b_in
        h = self.hook_pre(h)
        h = self.hook_post(F.relu(h) if self.cfg.act_fn == "relu" else F.gelu(h))
        out = h @ self.W_out
        if self.cfg.mlp_bias:
            out = out + self.b_out
        return out

    def _sparse_plan(self):
        """The structured-sparse plan (:mod:`rasp_model.sparse`), or None for the dense path
        (gradients, biases, training, observers on ``hook_pre/post``)."""
        if (torch.is_grad_enabled() or self.cfg.mlp_bias or self.training
                or sparse.hooked(self.hook_pre, self.hook_post)):
            return None
        return sparse.mlp_plan(self, self.W_in, self.W_out, self.cfg.d_model)


class Block(nn.Module):
    """One layer: (pre-LN) attention then (pre-LN) MLP, each added to the residual stream."""

    def __init__(self, cfg: TransformerConfig, layer: int):
        super().__init__()
        pre_ln = cfg.normalization_type == "LN"
        has_attn, has_mlp = cfg.heads(layer) > 0, cfg.mlp_width(layer) > 0
        self.ln1 = LayerNorm(cfg.d_model) if pre_ln and has_attn else None
        self.attn = Attention(cfg, layer) if has_attn else None
        self.ln2 = LayerNorm(cfg.d_model) if pre_ln and has_mlp else None
        self.mlp = MLP(cfg, layer) if has_mlp else None
        self.drop = nn.Dropout(cfg.dropout)
        self.hook_resid_pre = HookPoint()   # [batch, pos, d_model]
        self.hook_attn_out = HookPoint()    # [batch, pos, d_model] (layers with heads only)
        self.hook_resid_mid = HookPoint()   # [batch, pos, d_model]
        self.hook_mlp_out = HookPoint()     # [batch, pos, d_model] (layers with an MLP only)
        self.hook_resid_post = HookPoint()  # [batch, pos, d_model]

    def forward(self, x, positions, rel_bias=None, segment_ids=None):
        x = self.hook_resid_pre(x)
        if self.attn is not None:
            h = self.ln1(x) if self.ln1 is not None else x
            x = x + self.drop(self.hook_attn_out(self.attn(h, positions, rel_bias, segment_ids)))
        x = self.hook_resid_mid(x)
        if self.mlp is not None:
            h = self.ln2(x) if self.ln2 is not None else x
            x = x + self.drop(self.hook_mlp_out(self.mlp(h)))
        return self.hook_resid_post(x)


class Unembed(nn.Module):
    """Unembedding ``W_U [d_model, d_vocab_out]`` (absent when tied) and ``b_U``."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        if not cfg.tied_embeddings:
            self.W_U = nn.Parameter(torch.empty(cfg.d_model, cfg.d_vocab_out))
        self.b_U = nn.Parameter(torch.zeros(cfg.d_vocab_out))


class Transformer(nn.Module):
    """Decoder transformer with a configurable positional encoding (see module docstring).

    ``forward(tokens [batch, seq] LongTensor, pos_offset=None, segment_ids=None) -> logits
    [batch, seq, d_vocab_out]``. ``pos_offset`` (int, LongTensor ``[batch]`` or ``[batch, seq]``)
    shifts the absolute positions seen by an absolute encoding (``ape_learned`` /
    ``ape_sinusoidal`` / ``rope``: Zhou et al.'s random position offsets; per token for packed
    rows); relative encodings ignore it.
    ``segment_ids`` (``[batch, seq]``) packs several sequences into one row: a query attends only
    to keys with its own segment id (besides the causal mask), so each sequence is computed as if
    alone when its positions restart at its start (``analysis.training.batches``). Raises :class:`ContextLengthError`
    when ``ape_learned`` is asked for a position >= n_ctx, ValueError for bad token ids.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        if isinstance(config, dict):
            config = TransformerConfig.from_dict(config)
        config.validate()
        self.cfg = config
        cfg = config
        self.embed = Embed(cfg)
        self.hook_embed = HookPoint()      # [batch, pos, d_model]
        self.encoding = enc = cfg.encoding
        if enc.module_name is not None:        # its learned parameters, after W_E (init order)
            setattr(self, enc.module_name, enc.build(cfg))
        self.hook_pos_embed = HookPoint()  # [batch, pos, d_model] (an added embedding: APEs)
        self.blocks = nn.ModuleList(Block(cfg, l) for l in range(cfg.n_layers))
        self.ln_final = LayerNorm(cfg.d_model) if cfg.normalization_type == "LN" else None
        self.unembed = Unembed(cfg)
        self.drop = nn.Dropout(cfg.dropout)
        self.reset_parameters()

    @property
    def config(self) -> TransformerConfig:
        return self.cfg

    def reset_parameters(self, seed: int | None = None) -> None:
        """GPT-2 style init: normal(0, init_std) (``W_E``: ``embed_init_std`` when set);
        output projections scaled by 1/sqrt(2 n_layers); biases zero; LayerNorm w=1, b=0."""
        gen = None
        if seed is not None:
            gen = torch.Generator().manual_seed(seed)
        std = self.cfg.initializer_range
        proj_std = std / math.sqrt(2 * max(self.cfg.n_layers, 1))
        embed_std = std if self.cfg.embed_init_std is None else self.cfg.embed_init_std
        for name, p in self.named_parameters():
            last = name.rsplit(".", 1)[-1]
            with torch.no_grad():
                if name == "embed.W_E":
                    p.copy_(torch.randn(p.shape, generator=gen) * embed_std)
                elif last in ("w",):
                    p.fill_(1.0)
                elif last.startswith("b_") or last == "b":
                    p.zero_()
                elif last in ("W_O", "W_out"):
                    p.copy_(torch.randn(p.shape, generator=gen) * proj_std)
                else:
                    p.copy_(torch.randn(p.shape, generator=gen) * std)

    def positions(self, batch: int, seq: int, pos_offset=None, device=None) -> torch.Tensor:
        """Absolute positions ``[batch, seq]`` = ``arange(seq) + pos_offset``."""
        pos = torch.arange(seq, device=device)[None, :].expand(batch, seq)
        if pos_offset is not None:
            off = torch.as_tensor(pos_offset, device=device, dtype=torch.long)
            pos = pos + (off[:, None] if off.dim() == 1 else off)
        return pos

    def forward(self, tokens: torch.Tensor, pos_offset=None, segment_ids=None) -> torch.Tensor:
        cfg = self.cfg
        tokens = torch.as_tensor(tokens)
        if tokens.dim() == 1:
            tokens = tokens[None]
        if tokens.dim() != 2 or tokens.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"tokens must be an integer tensor [batch, seq], got "
                             f"{tuple(tokens.shape)} {tokens.dtype}")
        # (skipped inside torch.compile: reading the range back is a graph break; the training
        # loop's batches are built from the task's vocabulary)
        if concrete(tokens) and tokens.numel() and (
                int(tokens.min()) < 0 or int(tokens.max()) >= cfg.d_vocab):
            raise ValueError(f"token ids must be in 0..{cfg.d_vocab - 1}, got "
                             f"{int(tokens.min())}..{int(tokens.max())}")
        device = self.embed.W_E.device
        tokens = tokens.to(device).long()
        batch, seq = tokens.shape
        positions = self.positions(batch, seq, pos_offset, device)
        x = self.hook_embed(self.embed(tokens))
        enc = self.encoding
        if enc.applies == EMBEDDING:
            x = x + self.hook_pos_embed(enc.embedding(self, positions))
        x = self.drop(x)
        rel_bias = enc.shared_bias(self, seq) if enc.applies == BIAS else None
        if segment_ids is not None:
            segment_ids = torch.as_tensor(segment_ids, device=device)
            if segment_ids.shape != tokens.shape:
                raise ValueError(f"segment_ids must have the tokens' shape {tuple(tokens.shape)}, "
                                 f"got {tuple(segment_ids.shape)}")
        for block in self.blocks:
            x = block(x, positions, rel_bias, segment_ids)
        if self.ln_final is not None:
            x = self.ln_final(x)
        W_U = self.embed.W_E.T if cfg.tied_embeddings else self.unembed.W_U
        return x @ W_U + self.unembed.b_U

    # -- observation ----------------------------------------------------------------------
    def hook_names(self) -> list[str]:
        """Names of all hook points (TransformerLens style)."""
        return [n for n, m in self.named_modules() if isinstance(m, HookPoint)]

    def run_with_cache(self, tokens, names=None, pos_offset=None):
        """Run the model and record activations: ``(logits, cache)``.

        ``cache`` maps hook names (e.g. ``"blocks.0.attn.hook_pattern"`` -> ``[batch, head,
        query, key]`` probabilities) to detached tensors. ``names``: an iterable of hook names
        or a predicate on names (default: all). The forward pass is unchanged.
        """
        cache: dict[str, torch.Tensor] = {}
        if names is None:
            want = lambda n: True  # noqa: E731
        elif callable(names):
            want = names
        else:
            points = {}
            for name in set(names):           # named hooks: looked up, not searched for
                try:
                    mod = self.get_submodule(name)
                except AttributeError:
                    mod = None
                if not isinstance(mod, HookPoint):
                    unknown = sorted(set(names) - set(self.hook_names()))
                    raise KeyError(f"unknown hook names: {unknown}")
                points[name] = mod
        if callable(names) or names is None:
            points = {name: mod for name, mod in self.named_modules()
                      if isinstance(mod, HookPoint) and want(name)}
        handles = [mod.register_forward_hook(
            lambda m, i, o, name=name: cache.__setitem__(name, o.detach()))
            for name, mod in points.items()]
        try:
            logits = self(tokens, pos_offset=pos_offset)
        finally:
            for h in handles:
                h.remove()
        return logits, cache

    @torch.no_grad()
    def attention_patterns(self, tokens, pos_offset=None) -> list:
        """Attention probabilities per layer: a list over layers of numpy arrays
        ``[batch, head, query, key]`` (a layer without attention gives ``[batch, 0, seq, seq]``).
        """
        tokens = torch.as_tensor(tokens)
        if tokens.dim() == 1:
            tokens = tokens[None]
        was_training = self.training
        self.eval()
        try:
            _, cache = self.run_with_cache(tokens, names=lambda n: n.endswith("hook_pattern"),
                                           pos_offset=pos_offset)
        finally:
            self.train(was_training)
        b, s = tokens.shape
        out = []
        for l in range(self.cfg.n_layers):
            key = f"blocks.{l}.attn.hook_pattern"
            out.append(cache[key].cpu().numpy() if key in cache
                       else torch.zeros(b, 0, s, s).numpy())
        return out

    def num_parameters(self) -> int:
        """Number of trainable parameters (per-head widths counted unpadded, as stored)."""
        return sum(t.numel() for t in self.packed_state_dict().values())

    def num_nonzero_parameters(self) -> int:
        """Number of parameters that are not exactly 0 (unpadded)."""
        return sum(int(torch.count_nonzero(t)) for t in self.packed_state_dict().values())

    _PACK_AXIS = {"W_Q": 2, "W_K": 2, "W_V": 2, "W_O": 1, "b_Q": 1, "b_K": 1, "b_V": 1}

    def packed_state_dict(self) -> dict:
        """``state_dict()`` with per-head-width attention tensors unpadded (module docstring):
        head ``h``'s first ``w_h`` dimensions, heads concatenated. Equal to ``state_dict()``
        when ``d_head_widths`` is None."""
        state = self.state_dict()
        if self.cfg.d_head_widths is None:
            return state
        out = {}
        for k, t in state.items():
            parts = k.split(".")
            if len(parts) == 4 and parts[0] == "blocks" and parts[2] == "attn" \
                    and parts[3] in self._PACK_AXIS:
                ws = self.cfg.head_widths(int(parts[1]))
                ax = self._PACK_AXIS[parts[3]]
                t = torch.cat([t[h].narrow(ax - 1, 0, w) for h, w in enumerate(ws)], dim=ax - 1)
            out[k] = t
        return out

    def unpack_state_dict(self, packed: dict) -> dict:
        """Inverse of :meth:`packed_state_dict` (zero padding to ``d_head``); ValueError for a
        tensor whose shape does not match the config."""
        if self.cfg.d_head_widths is None:
            return packed
        out = dict(packed)
        dh = self.cfg.d_head
        for k, t in packed.items():
            parts = k.split(".")
            if len(parts) == 4 and parts[0] == "blocks" and parts[2] == "attn" \
                    and parts[3] in self._PACK_AXIS:
                ws = self.cfg.head_widths(int(parts[1]))
                ax = self._PACK_AXIS[parts[3]] - 1
                if t.shape[ax] != sum(ws):
                    raise ValueError(f"{k}: packed width {t.shape[ax]} != sum of head widths "
                                     f"{sum(ws)}")
                shape = list(t.shape)
                shape[ax] = dh
                full = torch.zeros([len(ws)] + shape, dtype=t.dtype)
                c = 0
                for h, w in enumerate(ws):
                    full[h].narrow(ax, 0, w).copy_(t.narrow(ax, c, w))
                    c += w
                out[k] = full
        return out
