"""The NumPy kernels of selection over a batch: what the interpreter computes from a selector
matrix ``sel`` (``[batch, query, key]`` bool) and the keys' values ``vals`` (``[batch, key]``).

A matrix shared by the whole batch (stride 0 on its batch axis, as
:class:`rasp.interpreter.Evaluator` builds for a batch-invariant selector) is computed once.
Every function returns ``[batch, query]``; none raises on valid shapes.

Public API: :func:`count_selected`, :func:`first_selected`, :func:`selected_sums`,
:func:`grouped_reduce`, :func:`masked_reduce`, :func:`compact`, :data:`ORDER_SIDE`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ORDER_SIDE", "first_selected", "count_selected", "selected_sums", "compact",
           "grouped_reduce", "masked_reduce"]


#: select comparison -> (searchsorted side, whether the count is of keys below the query)
ORDER_SIDE = {"<": ("left", True), "<=": ("right", True), ">": ("right", False),
               ">=": ("left", False)}


def first_selected(sel: np.ndarray) -> np.ndarray:
    """Index of the first selected key per query (0 where none), ``[B, Q]``."""
    if sel.ndim == 3 and sel.shape[0] > 1 and sel.strides[0] == 0:
        return np.broadcast_to(np.argmax(sel[:1], axis=-1), sel.shape[:2])
    return np.argmax(sel, axis=-1)


def count_selected(sel: np.ndarray) -> np.ndarray:
    """Number of selected keys per query of a ``[B, Q, K]`` bool matrix, as int64 ``[B, Q]``.
    Sums bytes when no count can exceed 255 (several times faster than an int64 sum)."""
    if sel.ndim == 3 and sel.shape[0] > 1 and sel.strides[0] == 0:   # batch-invariant
        one = count_selected(sel[:1])
        return np.broadcast_to(one, sel.shape[:2]).copy()
    if sel.shape[-1] <= 255 and sel.dtype == np.bool_:
        return np.einsum("bqk->bq", sel.view(np.uint8)).astype(np.int64)
    return sel.sum(axis=-1, dtype=np.int64)


def selected_sums(sel: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """``sum_k sel[b, q, k] * vals[b, k]`` as float64 ``[B, Q]``. Small integer values are
    summed in float32, which is exact while ``max |v| * K < 2**24``; others in float64."""
    shared = sel.ndim == 3 and sel.shape[0] > 1 and sel.strides[0] == 0
    if vals.dtype.kind in "iub" and vals.size:
        v = vals.astype(np.int64, copy=False)
        big = max(abs(int(v.min())), abs(int(v.max())))
        if big * sel.shape[-1] < 2 ** 24:
            if shared:      # one [query, key] matrix for the whole batch
                # (einsum's own loop: a BLAS matmul this small is slower when cores are busy)
                return np.einsum("qk,bk->bq", sel[0].astype(np.float32),
                                 v.astype(np.float32)).astype(np.float64)
            return np.einsum("bqk,bk->bq", sel.astype(np.float32),
                             v.astype(np.float32)).astype(np.float64)
    if shared:
        return np.einsum("qk,bk->bq", sel[0].astype(np.float64), vals.astype(np.float64))
    return np.einsum("bqk,bk->bq", sel.astype(np.float64), vals.astype(np.float64))


def compact(keys: np.ndarray, queries: np.ndarray):
    """Integer keys / queries in the smallest common dtype (int8 / int16 / int32) when their
    values fit: a [batch, query, key] comparison then moves less memory. Same results."""
    if keys.dtype.kind in "iu" and queries.dtype.kind in "iu" and keys.size:
        lo = min(int(keys.min()), int(queries.min()))
        hi = max(int(keys.max()), int(queries.max()))
        for dt in (np.int8, np.int16, np.int32):
            info = np.iinfo(dt)
            if info.min <= lo and hi <= info.max:
                if keys.dtype != dt:
                    keys = keys.astype(dt)
                if queries.dtype != dt:
                    queries = queries.astype(dt)
                break
    return keys, queries


def grouped_reduce(flat_codes, n_codes, flat_vals, qc, count, reduction):
    """max / min of the values of each code, read at the queries' codes; 0 where empty."""
    if flat_vals.dtype.kind == "f":
        fill = -np.inf if reduction == "max" else np.inf
    else:
        info = np.iinfo(np.int64)
        fill = info.min if reduction == "max" else info.max
    table = np.full(n_codes, fill, dtype=np.float64 if flat_vals.dtype.kind == "f"
                    else np.int64)
    ufunc = np.maximum if reduction == "max" else np.minimum
    ufunc.at(table, flat_codes, flat_vals)
    return np.where(count == 0, 0, table[qc])


def masked_reduce(sel: np.ndarray, vals: np.ndarray, reduction: str) -> np.ndarray:
    """max / min of ``vals[b, k]`` over selected keys ``sel[b, q, k]``; arbitrary where none."""
    if vals.dtype.kind == "b":
        vals = vals.astype(np.int64)
        back = bool
    else:
        back = None
    if vals.dtype.kind == "f":
        fill = -np.inf if reduction == "max" else np.inf
    else:
        info = np.iinfo(np.int64)
        fill = info.min if reduction == "max" else info.max
    expanded = np.where(sel, vals[:, None, :], fill)
    out = expanded.max(axis=-1) if reduction == "max" else expanded.min(axis=-1)
    count = sel.sum(axis=-1)
    out = np.where(count == 0, 0, out).astype(vals.dtype)
    return out.astype(back) if back is not None else out
