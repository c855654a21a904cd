"""The positional encodings' formulas (PyTorch): what the registered encodings of
:mod:`rasp_model.pe_names` compute when the one :class:`rasp_model.transformer.Transformer`
applies them (their names, docs, config rules, limits and export live there, one object per
encoding).

==================  ======================================================================
``nope``            nothing positional; only the causal mask.
``ape_learned``     :class:`PosEmbed`: learned absolute embedding ``W_pos [n_ctx, d_model]``
                    added at the input (GPT-2). Cannot represent positions >= n_ctx
                    (:class:`ContextLengthError`).
``ape_sinusoidal``  :func:`sinusoidal_table` / :func:`sinusoidal_embedding`: fixed sinusoids
                    added at the input (Vaswani et al. 2017): a sin block and a cos block
                    concatenated, frequency of column i = 10000^(-2i/d_model).
``t5``              :class:`T5RelativeBias`: learned scalar bias per (bucket, head) added to the
                    attention logits (Raffel et al. 2020); unidirectional buckets of the
                    distance q - k (:func:`t5_bucket`): n < 16 -> n, else 16 + floor(log(n/16)
                    / log(128/16) * 16), capped at 31 (32 buckets, max distance 128). Computed
                    once, shared by all layers.
``alibi``           :func:`alibi_bias`: bias -slope_h * |q - k| in every layer (Press et al.
                    2022); slopes 2^(-8/H * h), h = 1..H, with the standard interleaving when
                    H is not a power of two.
``rope``            :func:`apply_rotary`: rotary embedding of q and k (Su et al. 2021), base
                    10000, applied to the first ``rotary_dim`` of each head's dimensions
                    (GPT-J style, interleaved pairs); the paper rotated 25%.
==================  ======================================================================

Everything here is plain PyTorch and independent of the rest of the model, so each formula can be
tested on its own (``tests/test_positional_formulas.py``). Re-exports the registry's names
(:data:`PE_NAMES`, :data:`PE_LABELS`, ...).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

# the names, the papers' names, the error and the rotary dimensions live in the torch-free
# registry rasp_model.pe_names (a usage error must not wait for torch); re-exported here
from rasp_model.pe_names import (  # noqa: E402,F401
    DEFAULT_ROTARY_FRACTION, PE_LABELS, PE_NAMES, PositionalEncodingError, check_pe,
    default_rotary_dim, rotary_dim_from_fraction)


class ContextLengthError(PositionalEncodingError):
    """Input longer than a learned absolute embedding (``ape_learned``) can represent."""


def concrete(t: torch.Tensor) -> bool:
    """Whether ``t``'s values can be read back (``int(t.max())``): not inside
    ``torch.compile`` (a graph break) nor inside ``torch.func.vmap`` (a batched tensor: the
    stacked trainer, :mod:`analysis.training.stacked`, checks its inputs before the call)."""
    return not torch.compiler.is_compiling() and not torch._C._functorch.is_batchedtensor(t)


def zero_table(n_positions: int, d_model: int, dtype) -> torch.Tensor:
    """An all-zero position table ``[n_positions, d_model]`` (TransformerLens's ``W_pos`` for
    an encoding that adds nothing at the input)."""
    return torch.zeros(n_positions, d_model, dtype=dtype)


# --------------------------------------------------------------------------------------------
# Absolute encodings
# --------------------------------------------------------------------------------------------

def sinusoidal_table(n_positions: int, d_model: int, base: float = 10000.0,
                     offset: int = 0) -> torch.Tensor:
    """Fixed sinusoidal table ``[n_positions, d_model]`` (float32).

    Row p (absolute position ``p + offset``) is ``[sin(p w_0) .. sin(p w_{h-1}),
    cos(p w_0) .. cos(p w_{h-1})]`` with ``h = d_model // 2`` and ``w_i = base^(-2i/d_model)``:
    the sin and cos blocks are concatenated (not interleaved), as in Kazemnejad et al.'s code.
    An odd ``d_model`` leaves the last column zero. Source: Vaswani et al. 2017, sec. 3.5.
    """
    if d_model < 2:
        raise PositionalEncodingError("ape_sinusoidal needs d_model >= 2")
    half = d_model // 2
    pos = torch.arange(offset, offset + n_positions, dtype=torch.float64)[:, None]
    freq = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / d_model)
    angles = pos * freq[None, :]
    table = torch.zeros(n_positions, d_model, dtype=torch.float64)
    table[:, :half] = torch.sin(angles)
    table[:, half:2 * half] = torch.cos(angles)
    return table.float()


def sinusoidal_embedding(positions: torch.Tensor, cfg, dtype) -> torch.Tensor:
    """The sinusoidal embedding ``[batch, seq, d_model]`` of ``positions [batch, seq]``: rows
    of :func:`sinusoidal_table` (computed up to the largest position, in ``dtype`` on the
    positions' device). Inside vmap the positions cannot be read: the table then covers
    ``cfg.n_ctx`` (the stacked trainer's positions are < n_ctx, as ``make_step`` guarantees)."""
    top = ((int(positions.max()) + 1 if positions.numel() else 1)
           if concrete(positions) else cfg.n_ctx)
    table = sinusoidal_table(top, cfg.d_model).to(positions.device, dtype)
    return table[positions]


class PosEmbed(nn.Module):
    """Learned absolute position embedding ``W_pos [n_ctx, d_model]``; ``forward(positions
    [batch, seq])`` -> ``[batch, seq, d_model]``. Raises :class:`ContextLengthError` for a
    position >= n_ctx."""

    def __init__(self, cfg):
        super().__init__()
        self.W_pos = nn.Parameter(torch.empty(cfg.n_ctx, cfg.d_model))

    def forward(self, positions):
        n_ctx = self.W_pos.shape[0]
        top = int(positions.max()) if positions.numel() and concrete(positions) else 0
        if top >= n_ctx:
            raise ContextLengthError(
                f"position {top} is beyond the learned absolute position embedding "
                f"(ape_learned has n_ctx={n_ctx} positions, 0..{n_ctx - 1}); it cannot "
                f"represent unseen positions")
        return self.W_pos[positions]


# --------------------------------------------------------------------------------------------
# T5 relative bias
# --------------------------------------------------------------------------------------------

def t5_bucket(distance, num_buckets: int = 32, max_distance: int = 128,
              bidirectional: bool = False):
    """T5 relative-position bucket of ``distance = query_pos - key_pos`` (the one owner: the
    T5 bias of the model and the relative-position reference of probing both call it).

    Unidirectional (decoder, the default): negative distances (keys in the future) map to
    bucket 0; with the defaults ``n < 16 -> n``, else ``16 + floor(log(n/16) / log(128/16) *
    16)`` capped at 31. Bidirectional: half the buckets per direction, keys after the query
    offset by ``num_buckets/2``. Source: Raffel et al. 2020; HF
    ``T5Attention._relative_position_bucket``.

    Accepts an int, a NumPy int array or a LongTensor (any shape) and returns the same kind
    (an int array for a NumPy input, an ``int`` for a Python int).
    """
    is_tensor = torch.is_tensor(distance)
    scalar = not is_tensor and np.ndim(distance) == 0
    n = torch.as_tensor(distance if is_tensor else np.asarray(distance, dtype=np.int64),
                        dtype=torch.long)
    offset = torch.zeros_like(n)
    if bidirectional:
        num_buckets //= 2
        offset = torch.where(n < 0, num_buckets, 0)
        n = n.abs()
    else:
        n = n.clamp(min=0)
    max_exact = num_buckets // 2
    is_small = n < max_exact
    # float64 so the floor is exact at bucket edges; n.clamp(min=1) avoids log(0) (unused there)
    large = max_exact + (
        torch.log(n.clamp(min=1).double() / max_exact)
        / math.log(max_distance / max_exact) * (num_buckets - max_exact)).floor().long()
    large = large.clamp(max=num_buckets - 1)
    out = offset + torch.where(is_small, n, large)
    if is_tensor:
        return out
    return int(out) if scalar else out.numpy()


class T5RelativeBias(nn.Module):
    """Learned scalar per (bucket, head): ``rel_bias.weight [num_buckets, n_heads]``.

    ``forward(q_len, k_len, q_offset=0)`` returns the bias ``[head, query, key]`` added to the
    attention logits. One instance is shared by all layers (a layer with fewer heads uses the
    first ones). Initialised normal(0, 0.02); the values are learned.
    """

    def __init__(self, n_heads: int, num_buckets: int = 32, max_distance: int = 128):
        super().__init__()
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.rel_bias = nn.Embedding(num_buckets, n_heads)
        nn.init.normal_(self.rel_bias.weight, std=0.02)

    def forward(self, q_len: int, k_len: int, q_offset: int = 0) -> torch.Tensor:
        device = self.rel_bias.weight.device
        q = torch.arange(q_len, device=device)[:, None] + q_offset
        k = torch.arange(k_len, device=device)[None, :]
        buckets = t5_bucket(q - k, self.num_buckets, self.max_distance)
        return self.rel_bias(buckets).permute(2, 0, 1)  # [head, q, k]


# --------------------------------------------------------------------------------------------
# ALiBi
# --------------------------------------------------------------------------------------------

def alibi_slopes(n_heads: int) -> list[float]:
    """ALiBi head slopes (Press et al. 2022, and their reference implementation).

    For H a power of two: ``2^(-8/H * h)`` for h = 1..H. Otherwise, with ``P`` the largest power
    of two below H: the P slopes of ``P`` heads followed by every other slope of ``2P`` heads
    (``[0::2]``) up to H in total.
    """
    if n_heads < 1:
        raise PositionalEncodingError("alibi needs at least one head")

    def power_of_2(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(n_heads).is_integer():
        return power_of_2(n_heads)
    p = 2 ** math.floor(math.log2(n_heads))
    return power_of_2(p) + power_of_2(2 * p)[0::2][: n_heads - p]


def alibi_bias(n_heads: int, q_len: int, k_len: int, q_offset: int = 0,
               device=None) -> torch.Tensor:
    """ALiBi bias ``[head, query, key]`` = ``-slope_h * |q - k|`` (float32).

    In a causal model only keys ``k <= q`` count, where this is ``-slope_h * (q - k)``.
    """
    slopes = torch.tensor(alibi_slopes(n_heads), dtype=torch.float32, device=device)
    q = torch.arange(q_len, device=device)[:, None] + q_offset
    k = torch.arange(k_len, device=device)[None, :]
    dist = (q - k).abs().float()
    return -slopes[:, None, None] * dist[None]


# --------------------------------------------------------------------------------------------
# Rotary
# --------------------------------------------------------------------------------------------

def apply_rotary(x: torch.Tensor, positions: torch.Tensor, rot_dim: int,
                 base: float = 10000.0) -> torch.Tensor:
    """Rotate pairs ``(x[..., 2i], x[..., 2i+1])``, i < rot_dim/2, by ``pos * base^(-2i/rot_dim)``.

    ``x`` is ``[batch, head, seq, d_head]``; ``positions`` is ``[seq]`` or ``[batch, seq]``
    (absolute positions). Dimensions ``>= rot_dim`` pass through (GPT-J style partial rotary).
    Angles are computed in float64 for a float64 ``x``, else float32 (as TransformerLens).
    The dot product of a rotated query at position m and key at n depends on m - n only.
    """
    prec = torch.float64 if x.dtype == torch.float64 else torch.float32
    inv_freq = base ** (-torch.arange(0, rot_dim, 2, device=x.device, dtype=prec) / rot_dim)
    pos = positions.to(x.device, prec)
    angles = pos[..., None] * inv_freq  # [seq, rot/2] or [batch, seq, rot/2]
    if angles.dim() == 3:
        angles = angles[:, None]  # [batch, 1, seq, rot/2]
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    x_rot, x_pass = x[..., :rot_dim], x[..., rot_dim:]
    x1, x2 = x_rot[..., 0::2], x_rot[..., 1::2]
    r1 = x1 * cos - x2 * sin
    r2 = x1 * sin + x2 * cos
    rotated = torch.stack((r1, r2), dim=-1).flatten(-2)
    return torch.cat((rotated, x_pass), dim=-1)
