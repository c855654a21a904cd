"""Structured-sparse inference for the one Transformer (:mod:`rasp_model.transformer`).

A compiled model's weights are structured-sparse: each head reads a few residual directions and
writes a few, each MLP reads and writes a few. Without gradients (and without biases, RoPE, a
head mask or observers on the hooks a plan skips: the forward file decides that), a sublayer
computes the same products without their all-zero rows and columns — exact up to summation
order. A *plan* is that non-zero structure with the sliced weights; it is built once and cached
on the module until a weight changes (storage or in-place version counter). It is taken when it
keeps at most :data:`SPARSE_KEEP` of the dense product's multiply-adds, so trained (dense)
models are unaffected.

This module imports only torch; :mod:`rasp_model.transformer` calls it.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import torch
from torch import nn

__all__ = ["SPARSE_KEEP", "AttentionPlan", "MLPPlan", "attention_plan", "attention_forward",
           "mlp_plan", "mlp_forward", "hooked"]

#: the structured-sparse path is taken when it keeps at most this fraction of a product's
#: multiply-adds (see :func:`_nonzero_index`)
SPARSE_KEEP = 0.5


class AttentionPlan(NamedTuple):
    """The residual rows q, k, v read and the columns the output writes, the ``d_head``
    columns of the QK and OV circuits that are used, and the weights sliced to them."""

    q_rows: torch.Tensor
    k_rows: torch.Tensor
    v_rows: torch.Tensor
    o_cols: torch.Tensor
    qk_cols: torch.Tensor
    ov_cols: torch.Tensor
    wq: torch.Tensor
    wk: torch.Tensor
    wv: torch.Tensor
    wo: torch.Tensor


class MLPPlan(NamedTuple):
    """The residual rows ``W_in`` reads, the columns ``W_out`` writes, the sliced weights."""

    rows: torch.Tensor
    cols: torch.Tensor
    w_in: torch.Tensor
    w_out: torch.Tensor


def _nonzero_index(W: torch.Tensor, dims: tuple) -> torch.Tensor:
    """Indices along the one axis of ``W`` not in ``dims`` where some entry is non-zero."""
    return torch.nonzero(W.abs().sum(dim=dims) > 0).reshape(-1)


def _weights_key(*ts) -> tuple:
    """Identifies the current values of tensors (storage and in-place version counters)."""
    return tuple((t.data_ptr(), t._version) for t in ts)


def hooked(*points: nn.Module) -> bool:
    """Whether any of these hook points has an observer (a plan would skip calling it)."""
    return any(p._forward_hooks or p._forward_pre_hooks for p in points)


def _cached(module: nn.Module, weights: tuple, build: Callable[[], object]):
    """``build()``, cached on ``module`` until one of ``weights`` changes."""
    key = _weights_key(*weights)
    cached = getattr(module, "_plan", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    plan = build()
    module._plan = (key, plan)
    return plan


def attention_plan(module: nn.Module, raw: tuple, masked: Callable[[], tuple],
                   d_model: int, d_head: int) -> AttentionPlan | None:
    """The plan of an attention sublayer with weights ``raw = (W_Q, W_K, W_V, W_O)`` (``[H,
    d_model, d_head]``, ``W_O [H, d_head, d_model]``; ``masked()`` gives them with per-head
    width padding zeroed), or None when it would not save enough. Cached on ``module``."""
    def build():
        W_Q, W_K, W_V, W_O = masked()
        qk_cols = torch.nonzero((W_Q.abs().sum(1) > 0) & (W_K.abs().sum(1) > 0)
                                ).reshape(-1, 2)[:, 1].unique()
        ov_cols = torch.nonzero((W_V.abs().sum(1) > 0) & (W_O.abs().sum(2) > 0)
                                ).reshape(-1, 2)[:, 1].unique()
        q_rows, k_rows = _nonzero_index(W_Q, (0, 2)), _nonzero_index(W_K, (0, 2))
        v_rows, o_cols = _nonzero_index(W_V, (0, 2)), _nonzero_index(W_O, (0, 1))
        dense = 4 * d_model * d_head
        kept = (len(q_rows) + len(k_rows)) * len(qk_cols) + (len(v_rows) + len(o_cols)) * len(
            ov_cols)
        if kept > SPARSE_KEEP * dense:
            return None
        return AttentionPlan(q_rows, k_rows, v_rows, o_cols, qk_cols, ov_cols,
                             W_Q[:, q_rows][:, :, qk_cols].contiguous(),
                             W_K[:, k_rows][:, :, qk_cols].contiguous(),
                             W_V[:, v_rows][:, :, ov_cols].contiguous(),
                             W_O[:, ov_cols][:, :, o_cols].contiguous())
    return _cached(module, raw, build)


def attention_forward(x: torch.Tensor, plan: AttentionPlan,
                      pattern: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """The attention sublayer's output ``[batch, seq, d_model]`` by ``plan``; ``pattern``
    turns the raw scores ``[batch, head, query, key]`` into probabilities (scaling, biases,
    masks, hooks and dropout: the forward file's own)."""
    q = torch.einsum("bsd,hde->bshe", x[..., plan.q_rows], plan.wq)
    k = torch.einsum("bsd,hde->bshe", x[..., plan.k_rows], plan.wk)
    v = torch.einsum("bsd,hde->bshe", x[..., plan.v_rows], plan.wv)
    p = pattern(torch.einsum("bqhe,bkhe->bhqk", q, k))
    z = torch.einsum("bhqk,bkhe->bqhe", p, v)
    out = x.new_zeros(x.shape)
    out[..., plan.o_cols] = torch.einsum("bshe,hed->bsd", z, plan.wo)
    return out


def mlp_plan(module: nn.Module, W_in: torch.Tensor, W_out: torch.Tensor,
             d_model: int) -> MLPPlan | None:
    """The plan of an MLP (``W_in [d_model, d_mlp]``, ``W_out [d_mlp, d_model]``), or None
    when it would not save enough. Cached on ``module``."""
    def build():
        rows, cols = _nonzero_index(W_in, (1,)), _nonzero_index(W_out, (0,))
        if len(rows) + len(cols) > SPARSE_KEEP * 2 * d_model:
            return None
        return MLPPlan(rows, cols, W_in[rows].contiguous(), W_out[:, cols].contiguous())
    return _cached(module, (W_in, W_out), build)


def mlp_forward(x: torch.Tensor, plan: MLPPlan,
                act: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """The MLP's output ``[batch, pos, d_model]`` by ``plan`` with the activation ``act``."""
    h = act(x[..., plan.rows] @ plan.w_in)
    out = x.new_zeros(x.shape)
    out[..., plan.cols] = h @ plan.w_out
    return out
