"""Batched NumPy interpreter of the IR.

Evaluates s-ops on a batch of equal-length inputs at once: s-op values are ``[batch, seq]``
arrays, selectors ``[batch, query, key]`` boolean arrays. Semantics follow the original RASP
(Weiss et al. 2021; the reference implementation's ``Support.aggregate``) and RASP-L (Zhou et al.
2023):

* ``aggregate`` with the ``mean`` reduction: a query with no selected key gets the default; with
  exactly one, that key's value (any type: strings can be moved); with several, the arithmetic
  mean (an error for strings). Booleans average as 0/1.
  A mean of integers whose results are all integral stays integer-typed (the original shows
  moved ints as ints); otherwise the result is float.
* ``max`` / ``min`` reductions (RASP-L): the largest / smallest selected value, default for empty
  rows. ``truncate`` (``kqv``) truncates means toward zero to integers.
* ``selector_width``: number of selected keys per query.
* causal selectors are ANDed with ``key_index <= query_index``.

Public entry points: :func:`evaluate` (a batch, returns an array) and :class:`Evaluator`
(memoised evaluation of several nodes on one batch).

The NumPy kernels over a selector matrix (counts, sums, first key, grouped and masked max /
min) are :mod:`rasp.selection`.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from . import limits
from .ir import (Aggregate, Full, Indices, Length, Map, Node, RASPError, RASPResourceError,
                 RASPTypeError, RASPValueError, Select, Selector, SelectorAnd, SelectorNot, SelectorOr,
                 SelectorWidth, SequenceMap, SOp, Tokens, topological_order)
from .ops import compare, homogeneous_array
from .errors import MixedBatchError
from .selection import (ORDER_SIDE, compact, count_selected, first_selected, grouped_reduce,
                        masked_reduce, selected_sums)

__all__ = ["evaluate", "evaluate_one", "ragged_sequences", "Evaluator", "to_batch",
           "convert_tokens", "stack_sequences", "MixedBatchError"]


# --------------------------------------------------------------------------------------------
# Input handling
# --------------------------------------------------------------------------------------------

def to_batch(inputs: Any) -> np.ndarray:
    """Turn inputs into a ``[batch, seq]`` array.

    Accepts a string (one sequence of characters), a list of scalars (one sequence), a list of
    equal-length strings or lists (a batch), or a 2-D NumPy array.

    Raises :class:`RASPValueError` for an empty input or sequences of unequal length, and
    :class:`RASPTypeError` for mixed value types.
    """
    if isinstance(inputs, np.ndarray):
        arr = inputs
        if arr.ndim == 1:
            arr = arr[None, :]
        if arr.ndim != 2:
            raise RASPValueError(f"expected a [batch, seq] array, got shape {arr.shape}")
        if arr.dtype == object:
            arr = homogeneous_array(arr.reshape(-1).tolist()).reshape(arr.shape)
    else:
        if isinstance(inputs, str):
            seqs = [list(inputs)]
        else:
            inputs = list(inputs)
            if not inputs:
                raise RASPValueError("empty input: RASP evaluates non-empty sequences")
            nested = all(isinstance(x, (list, tuple, np.ndarray)) for x in inputs)
            strings = all(isinstance(x, str) for x in inputs)
            if nested or (strings and any(len(x) != 1 for x in inputs)):
                seqs = inputs
            else:
                seqs = [inputs]
        lens = set(map(len, seqs))
        if len(lens) != 1:
            raise RASPValueError(f"sequences of a batch must have equal length, got {sorted(lens)}")
        if all(isinstance(x, np.ndarray) for x in seqs):
            return to_batch(np.stack(seqs))
        # one flat list, converted in one call (vectorised: see homogeneous_array)
        flat = list(itertools.chain.from_iterable(seqs))
        arr = homogeneous_array(flat).reshape(len(seqs), -1)
    if arr.shape[1] == 0:
        raise RASPValueError("empty input: RASP evaluates non-empty sequences")
    return arr


def convert_tokens(arr: np.ndarray, conversion: str) -> np.ndarray:
    """The input ``[batch, seq]`` array as ``tokens_<conversion>`` sees it (``str``, ``int``,
    ``float``, ``bool`` or ``asis``), as the original RASP's ``tokens_str`` ... ``tokens_asis``.
    Raises :class:`RASPTypeError` when a token cannot be converted."""
    try:
        if conversion == "asis":
            return arr
        if conversion == "str":
            if arr.dtype.kind == "b":
                return np.where(arr, "True", "False")
            return arr.astype(str)
        if conversion == "int":
            return _tokens_int(arr)
        if conversion == "float":
            return arr.astype(np.float64)
        if conversion == "bool":
            if arr.dtype.kind == "U":
                table = {"True": True, "False": False, "1": True, "0": False, "T": True,
                         "F": False, "true": True, "false": False}
                return np.vectorize(lambda s: table[s], otypes=[bool])(arr)
            return arr.astype(bool)
    except (ValueError, KeyError, OverflowError) as e:
        raise RASPTypeError(f"cannot read the input as tokens_{conversion}: {e}") from None
    raise AssertionError(conversion)


_INT64 = (-(2 ** 63), 2 ** 63 - 1)


def _int_token(x) -> int:
    """One token as ``tokens_int`` reads it: an integer (``3``, ``"3"``, ``3.0``, ``"3.0"``) in
    the int64 range; anything else (``3.7``, ``1e19``, ``nan``, ``"x"``) raises ValueError."""
    if isinstance(x, (bool, np.bool_)):
        return int(x)
    if isinstance(x, str):
        t = x.strip()
        try:
            v = int(t)
        except ValueError:
            f = float(t)                       # ValueError for text that is no number
            if not (np.isfinite(f) and f == int(f)):
                raise ValueError(f"{x!r} is not an integer") from None
            v = int(f)
    elif isinstance(x, (float, np.floating)):
        if not (np.isfinite(x) and x == int(x)):
            raise ValueError(f"{x!r} is not an integer")
        v = int(x)
    else:
        v = int(x)
    if not _INT64[0] <= v <= _INT64[1]:
        raise ValueError(f"{x!r} is outside the int64 range")
    return v


def _tokens_int(arr: np.ndarray) -> np.ndarray:
    """``tokens_int`` of a ``[batch, seq]`` input: integers in the int64 range, refused
    otherwise (a float that is not a whole number is not silently truncated, 1e19 does not
    wrap). Raises ValueError naming the first bad token."""
    if arr.dtype.kind in "iub":
        if arr.dtype.kind == "u" and arr.size and int(arr.max()) > _INT64[1]:
            raise ValueError(f"{int(arr.max())} is outside the int64 range")
        return arr.astype(np.int64)
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.floor(arr)) | (arr < -2.0 ** 63) | (arr >= 2.0 ** 63)
        if bad.any():
            raise ValueError(f"{arr[bad].flat[0]!r} is not an integer in the int64 range")
        return arr.astype(np.int64)
    return np.vectorize(_int_token, otypes=[np.int64])(arr)


# --------------------------------------------------------------------------------------------
# Defaults of another type than the values
# --------------------------------------------------------------------------------------------

def stack_sequences(parts: list[np.ndarray]) -> np.ndarray:
    """Stack per-sequence results ``[1, seq]`` into ``[batch, seq]``; an object array when
    the sequences hold values of different types (strings in one, numbers in another)."""
    kinds = {("U" if p.dtype.kind == "U" else "n") for p in parts}
    if len(kinds) == 1:
        return np.concatenate(parts, axis=0)
    out = np.empty((sum(p.shape[0] for p in parts),) + parts[0].shape[1:], dtype=object)
    row = 0
    for p in parts:
        for r in p.tolist():
            out[row, ...] = np.array(r, dtype=object) if p.ndim > 1 else r
            row += 1
    return out


def _is_str(x) -> bool:
    return isinstance(x, (str, np.str_))


def _other_type_default(n: Aggregate, vals: np.ndarray, count: np.ndarray):
    """An aggregate whose default is of another type than its values (a number for string
    values, as the implicit 0 of ``tokens[5]``, or a string for numbers), as the original RASP
    (tech-srl/RASP ``Support.py``: a sequence's values must share one type):

    * a sequence where no query selects anything is the default at every position
      (``tokens[5]`` on ``"abc"`` is ``[0, 0, 0]``);
    * a sequence where some queries select nothing and others select values would mix
      strings and numbers: :class:`RASPTypeError`;
    * a sequence where every query selects something never sees the default.

    Returns the ``[batch, seq]`` result when every sequence is all-default, ``None`` when the
    ordinary evaluation applies (no sequence takes the default), and raises
    :class:`MixedBatchError` when the batch holds both kinds of sequences."""
    if _is_str(n.default) == (vals.dtype.kind == "U"):
        return None
    empty = count == 0
    if not empty.any():
        return None
    all_empty = empty.all(axis=1)
    partial = empty.any(axis=1) & ~all_empty
    if partial.any():
        b = int(np.flatnonzero(partial)[0])
        q = int(np.flatnonzero(empty[b])[0])
        got = "strings" if vals.dtype.kind == "U" else "numbers"
        raise RASPTypeError(
            f"aggregate '{n.label}': query position {q} selects no key and gets the default "
            f"{n.default!r} while other positions get {got}; a sequence cannot mix strings and "
            "numbers (give a default of the values' type)")
    if all_empty.all():
        d = n.default
        if _is_str(d):
            return np.full(count.shape, d, dtype=f"<U{max(1, len(d))}")
        return np.full(count.shape, d)
    raise MixedBatchError(f"aggregate '{n.label}': a batch of default-only and value sequences")


# --------------------------------------------------------------------------------------------
# Evaluator
# --------------------------------------------------------------------------------------------

class Evaluator:
    """Evaluates IR nodes on one batch, memoising every node's value.

    ``inputs`` is anything :func:`to_batch` accepts. ``causal=True`` forces every selector to be
    causal (RASP-L mode for the whole program); ``None`` respects each select's own flag.

    ``values[node.id]`` holds ``[batch, seq]`` arrays for s-ops and ``[batch, query, key]``
    boolean arrays for selectors.
    """

    def __init__(self, inputs: Any, causal: bool | None = None, lazy_selectors: bool = False):
        self.raw = to_batch(inputs)
        self.batch, self.n = self.raw.shape
        self.causal = causal
        self.values: dict[int, np.ndarray] = {}
        self._tril = None
        # lazy_selectors: a selector's [batch, query, key] matrix is built only when a consumer
        # needs it; an aggregate / selector width of a plain `==` select is then computed by
        # grouping (O(batch * seq)) without the matrix. `values` then lacks those selectors.
        self.lazy_selectors = lazy_selectors

    @property
    def tril(self) -> np.ndarray:
        if self._tril is None:
            self._tril = np.tril(np.ones((self.n, self.n), dtype=bool))
        return self._tril

    def __call__(self, node: Node) -> np.ndarray:
        if node.id in self.values:
            return self.values[node.id]
        lazy = self.lazy_selectors
        try:
            for n in topological_order(node, known=self.values):
                if n.id not in self.values:
                    if lazy and isinstance(n, Selector):
                        continue
                    try:
                        self.values[n.id] = self.eval_node(n)
                    except RASPError as e:
                        if e.span is None and n.span is not None:
                            e.span = n.span
                        raise
                    except Exception as e:       # noqa: BLE001 - a user callable's own error
                        err = _callable_error(n, e)
                        if err is None:
                            raise
                        raise err from e
        except MixedBatchError:
            # some sequences of the batch take an aggregate's default of another type than
            # the values others take: evaluate each sequence on its own, as the original does
            parts = [Evaluator(self.raw[i:i + 1], causal=self.causal,
                               lazy_selectors=self.lazy_selectors)(node)
                     for i in range(self.batch)]
            return stack_sequences(parts)
        if node.id not in self.values:          # a lazily skipped selector
            out = self._sel(node)
        else:
            out = self.values[node.id]
        if not out.flags.writeable:             # a selector broadcast over the batch
            out = out.copy()
        return out

    def _sel(self, n: Selector) -> np.ndarray:
        """The ``[batch, query, key]`` matrix of a selector, built (and stored) on demand."""
        m = self.values.get(n.id)
        if m is None:
            try:
                m = self._selector(n)
            except RASPError as e:
                if e.span is None and n.span is not None:
                    e.span = n.span
                raise
            except Exception as e:               # noqa: BLE001 - a user predicate's own error
                err = _callable_error(n, e)
                if err is None:
                    raise
                raise err from e
            self.values[n.id] = m
        return m

    # -- per-node evaluation --------------------------------------------------------------
    def eval_node(self, n: Node) -> np.ndarray:
        """The value of one node whose children's values are already in :attr:`values`
        (``[batch, seq]`` for an s-op, ``[batch, query, key]`` for a selector); not stored.
        The program search uses it to evaluate candidates one node at a time."""
        v = self.values
        B, N = self.batch, self.n
        if isinstance(n, Tokens):
            return convert_tokens(self.raw, n.conversion)
        if isinstance(n, Indices):
            return np.broadcast_to(np.arange(N, dtype=np.int64), (B, N)).copy()
        if isinstance(n, Length):
            return np.full((B, N), N, dtype=np.int64)
        if isinstance(n, Full):
            val = n.value
            if isinstance(val, str):
                return np.full((B, N), val, dtype=f"<U{max(1, len(val))}")
            return np.full((B, N), val)
        if isinstance(n, Map):
            return n.fn.apply(v[n.inner.id])
        if isinstance(n, SequenceMap):
            return n.fn.apply(*[v[x.id] for x in n.inputs])
        if isinstance(n, Selector):
            return self._selector(n)
        if isinstance(n, SelectorWidth):
            if n.selector.id not in v:
                fast = self._width_fast(n.selector)
                if fast is not None:
                    return fast
                blocks = self._query_blocks()
                if blocks is not None:
                    return np.concatenate([count_selected(self._selector_rows(n.selector, a, b))
                                           for a, b in blocks], axis=1)
            return count_selected(self._sel(n.selector))
        if isinstance(n, Aggregate):
            if n.default is None:
                return self._aggregate_none_default(n)
            return self._aggregate(n)
        raise RASPTypeError(f"cannot evaluate node of kind {n.kind}")

    def _aggregate_objects(self, n: Aggregate, vals: np.ndarray) -> np.ndarray:
        """An aggregate over values holding ``None`` (an ``object`` array: the output of an
        aggregate with a ``None`` default), reduced per query as the original RASP does
        (tech-srl/RASP ``Support.py``, ``apply_average_select``): no selected key -> the
        default; one -> that value itself (``None`` included); several -> their mean
        ``sum * 1.0 / n`` (max / min: Python's), and :class:`RASPTypeError` naming the query
        when one of them is not a number. Slow (Python per query); such values are rare.

        Returns ``[batch, query]``: ``object`` when a ``None`` remains, else typed as the
        ordinary path types it."""
        sel = self._sel(n.selector)                            # [B or 1, Q, K]
        B, Q = vals.shape[0], sel.shape[1]
        flat = []
        all_ints = True
        for b in range(B):
            rows = sel[b if sel.shape[0] > 1 else 0]
            for q in range(Q):
                picked = [vals[b, k] for k in np.flatnonzero(rows[q])]
                if not picked:
                    flat.append(n.default)
                    continue
                if len(picked) == 1 and n.reduction == "mean":
                    v = picked[0]
                    flat.append(int(np.trunc(v)) if n.truncate and v is not None else v)
                    continue
                if any(v is None or isinstance(v, (str, np.str_)) for v in picked):
                    verb = "average" if n.reduction == "mean" else f"take the {n.reduction} of"
                    raise RASPTypeError(
                        f"aggregate '{n.label}' asked to {verb} several values at query "
                        f"position {q} that are not all numbers: {list(picked)}")
                all_ints &= all(isinstance(v, (int, np.integer, bool, np.bool_)) for v in picked)
                if n.reduction == "mean":
                    v = sum(picked) * 1.0 / len(picked)
                    flat.append(int(np.trunc(v)) if n.truncate else v)
                else:
                    flat.append((max if n.reduction == "max" else min)(picked))
        if all_ints and all(isinstance(v, (int, np.integer, float)) and float(v).is_integer()
                            for v in flat if v is not None):
            flat = [None if v is None else int(v) for v in flat]
        return homogeneous_array(flat).reshape(B, Q)

    def _aggregate_none_default(self, n: Aggregate) -> np.ndarray:
        """An aggregate whose default is ``None`` (Tracr's padding): ``None`` where no key is
        selected (an ``object`` array then), the ordinary result elsewhere."""
        vals = self.values[n.values.id]
        if vals.dtype.kind == "O" and any(v is None for v in vals.reshape(-1)):
            return self._aggregate_objects(n, vals)
        kind = vals.dtype.kind
        neutral = "" if kind == "U" else False if kind == "b" else 0
        stand_in = n.copy()
        stand_in.default = neutral
        out = self._aggregate(stand_in)
        empty = count_selected(self._sel(n.selector)) == 0
        if not np.any(empty):
            return out
        res = np.empty(out.shape, dtype=object)
        res[...] = out.tolist() if out.dtype != object else out
        res[empty] = None
        return res

    def _invariant(self, n: Node) -> bool:
        """Whether a node's value is the same for every sequence of the batch (built from
        ``indices``, constants and ``length`` only). Such selectors are computed once,
        ``[1, query, key]``, and broadcast over the batch (a read-only view)."""
        memo = self.__dict__.setdefault("_inv", {})
        r = memo.get(n.id)
        if r is None:
            if isinstance(n, (Indices, Full, Length)):
                r = True
            elif isinstance(n, Select) and n.op in ("TRUE", "FALSE"):
                r = True
            elif isinstance(n, (Map, SequenceMap, Select, SelectorAnd, SelectorOr,
                                SelectorNot)):
                r = all(self._invariant(c) for c in n.children)
            else:
                r = False
            memo[n.id] = r
        return r

    # -- memory: [batch, query, key] work in blocks of queries ---------------------------------
    def _query_blocks(self) -> list[tuple[int, int]] | None:
        """Query ranges ``[(q0, q1), ...]`` whose ``[batch, q1 - q0, key]`` work (8 bytes an
        entry: float sums, int max/min) fits the memory budget
        (:data:`rasp.limits.MEMORY_BUDGET_BYTES`); ``None`` when the whole matrix fits."""
        per_row = self.batch * self.n * 8
        if per_row * self.n <= limits.MEMORY_BUDGET_BYTES:
            return None
        rows = max(1, limits.MEMORY_BUDGET_BYTES // (4 * per_row))
        return [(q, min(q + rows, self.n)) for q in range(0, self.n, rows)]

    def _check_matrix_budget(self, n: Selector) -> None:
        need = self.batch * self.n * self.n
        if need > limits.MEMORY_BUDGET_BYTES:
            raise RASPResourceError(
                f"selector '{n.label}' on {self.batch} input(s) of length {self.n} needs a "
                f"[batch, query, key] matrix of {need / 2**20:.0f} MiB, more than the memory "
                f"budget of {limits.MEMORY_BUDGET_BYTES / 2**20:.0f} MiB (raise it with "
                "RASP_MEMORY_BUDGET_MB, or evaluate fewer or shorter inputs)")

    def _compared(self, n: Select) -> tuple[np.ndarray, np.ndarray]:
        """A select's keys and queries ``[batch, seq]`` in the smallest integer dtype that
        orders them as the values do (strings as the ranks of their sorted distinct values),
        computed once per select for block-wise evaluation."""
        cache = self.__dict__.setdefault("_compared_cache", {})
        got = cache.get(n.id)
        if got is None:
            keys, queries = self.values[n.keys.id], self.values[n.queries.id]
            if keys.dtype.kind == "U" and queries.dtype.kind == "U":
                _, inv = np.unique(np.concatenate([keys.reshape(-1), queries.reshape(-1)]),
                                   return_inverse=True)
                inv = inv.reshape(-1)
                keys, queries = inv[:keys.size].reshape(keys.shape), \
                    inv[keys.size:].reshape(queries.shape)
            got = cache[n.id] = compact(keys, queries)
        return got

    def _selector_rows(self, n: Selector, q0: int, q1: int) -> np.ndarray:
        """Rows ``q0:q1`` of a selector's matrix, ``[batch, q1 - q0, key]``, without building
        the others (memory ``batch * (q1 - q0) * key``)."""
        full = self.values.get(n.id)
        if full is not None:
            return full[:, q0:q1]
        if isinstance(n, Select):
            shape = (self.batch, q1 - q0, self.n)
            if n.op in ("TRUE", "FALSE"):
                m = np.full(shape, n.op == "TRUE")
            else:
                keys, queries = self._compared(n)
                m = compare(keys[:, None, :], queries[:, q0:q1, None], n.op)
        elif isinstance(n, SelectorAnd):
            m = self._selector_rows(n.a, q0, q1) & self._selector_rows(n.b, q0, q1)
        elif isinstance(n, SelectorOr):
            m = self._selector_rows(n.a, q0, q1) | self._selector_rows(n.b, q0, q1)
        elif isinstance(n, SelectorNot):
            m = ~self._selector_rows(n.a, q0, q1)
        else:
            raise AssertionError(n)
        if self.causal or n.causal:
            m &= np.arange(self.n)[None, :] <= np.arange(q0, q1)[:, None]
        return m

    def _selector(self, n: Selector) -> np.ndarray:
        v = self.values
        self._check_matrix_budget(n)
        # (only for lazy evaluation: callers of `eval_node` / `values` may write into selectors)
        inv = self.lazy_selectors and self.batch > 1 and self._invariant(n)
        b = 1 if inv else self.batch
        if isinstance(n, Select):
            if n.op == "TRUE":
                m = np.ones((b, self.n, self.n), dtype=bool)
            elif n.op == "FALSE":
                m = np.zeros((b, self.n, self.n), dtype=bool)
            elif n.op == "python":        # a Python predicate(key, query) (Tracr's Select)
                pred = np.frompyfunc(lambda k, q: bool(n.predicate(k, q)), 2, 1)
                m = pred(v[n.keys.id][:b][:, None, :], v[n.queries.id][:b][:, :, None]
                         ).astype(bool)
            else:
                keys, queries = compact(v[n.keys.id][:b], v[n.queries.id][:b])
                m = compare(keys[:, None, :], queries[:, :, None], n.op)
        elif isinstance(n, SelectorAnd):
            m = self._sel(n.a)[:b] & self._sel(n.b)[:b]
        elif isinstance(n, SelectorOr):
            m = self._sel(n.a)[:b] | self._sel(n.b)[:b]
        elif isinstance(n, SelectorNot):
            m = ~self._sel(n.a)[:b]
        else:
            raise AssertionError(n)
        if self.causal or n.causal:
            m = m & self.tril
        if inv:
            m = np.broadcast_to(m, (self.batch, self.n, self.n))
        return m

    def _aggregate(self, n: Aggregate) -> np.ndarray:
        vals = self.values[n.values.id]                        # [B, K]
        if vals.dtype.kind == "O" and any(v is None for v in vals.reshape(-1)):
            return self._aggregate_objects(n, vals)
        if n.selector.id not in self.values:
            codes = self._eq_codes(n.selector)
            if codes is not None:
                return self._aggregate_grouped(n, vals, *codes)
            blocks = self._query_blocks()
            if blocks is not None:
                return self._aggregate_blocks(n, vals, blocks)
        sel = self._sel(n.selector)                            # [B, Q, K]
        count = count_selected(sel)                           # [B, Q]
        other = _other_type_default(n, vals, count)
        if other is not None:
            return other
        return self._aggregate_matrix(n, vals, sel, count)

    def _aggregate_blocks(self, n: Aggregate, vals, blocks) -> np.ndarray:
        """An aggregate computed over blocks of queries (memory bounded by the budget)."""
        counts = None
        if _is_str(n.default) != (vals.dtype.kind == "U"):      # needs every row's count
            counts = np.concatenate([count_selected(self._selector_rows(n.selector, a, b))
                                     for a, b in blocks], axis=1)
            other = _other_type_default(n, vals, counts)
            if other is not None:
                return other
        parts = []
        for a, b in blocks:
            sel = self._selector_rows(n.selector, a, b)
            count = counts[:, a:b] if counts is not None else count_selected(sel)
            parts.append(self._aggregate_matrix(n, vals, sel, count, a))
        return np.concatenate(parts, axis=1)

    def _aggregate_matrix(self, n: Aggregate, vals, sel, count, q0: int = 0) -> np.ndarray:
        """An aggregate from its selector's rows ``sel`` ``[B, Q, K]`` (queries from ``q0``)
        and their counts ``[B, Q]``."""
        default = n.default
        kind = vals.dtype.kind
        if n.reduction == "mean" and kind != "U" and count.size and count.max() <= 1:
            # every query selects at most one key: a gather, no [B, Q, K] float product
            moved = np.take_along_axis(vals, first_selected(sel), axis=-1)
            return self._finish_mean(n, vals, count, moved, lambda: self._move_single(
                sel, vals, count, default))
        if n.reduction == "mean":
            if kind == "U":
                if np.any(count > 1):
                    b, q = np.argwhere(count > 1)[0]
                    raise RASPTypeError(
                        f"aggregate '{n.label}' asked to average several string values at "
                        f"query position {q + q0} (selected keys "
                        f"{np.flatnonzero(sel[b, q]).tolist()}); a mean needs numbers")
                return self._move_single(sel, vals, count, default)
            sums = selected_sums(sel, vals)
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = sums / np.maximum(count, 1)
            return self._finish_mean(n, vals, count, mean, lambda: self._move_single(
                sel, vals, count, default))
        # max / min reductions
        if kind == "U":
            uniq, inv = np.unique(vals, return_inverse=True)
            ranks = inv.reshape(vals.shape).astype(np.int64)
            r = masked_reduce(sel, ranks, n.reduction)
            return _with_string_default(n, uniq[np.where(count == 0, 0, r)], count)
        r = masked_reduce(sel, vals, n.reduction)
        if np.any(count == 0):
            r = np.where(count == 0, default, r)
        return r

    # -- grouped evaluation of `==` selects (no [batch, query, key] matrix) -----------------
    def _eq_codes(self, sel: Selector):
        """For a non-causal ``select(keys, queries, ==)``: group codes ``(key_codes,
        query_codes, n_codes)`` (``[B, N]`` int arrays; equal values of one sequence share a
        code, different sequences never do), or None when the fast path does not apply."""
        if not isinstance(sel, Select) or sel.op != "==":
            return None
        causal = bool(self.causal or sel.causal)
        if causal and not _is_index_shift(sel.keys):
            return None       # causal grouping is exact only for distinct keys (positions)
        keys = self.values[sel.keys.id]
        queries = self.values[sel.queries.id]
        kk, qk = keys.dtype.kind, queries.dtype.kind
        if (kk == "U") != (qk == "U") or kk not in "biufU" or qk not in "biufU":
            return None
        B, N = keys.shape
        if kk in "biu" and qk in "biu":
            ki = keys.astype(np.int64, copy=False)
            qi = queries.astype(np.int64, copy=False)
            lo = min(int(ki.min()), int(qi.min()))
            hi = max(int(ki.max()), int(qi.max()))
            u = hi - lo + 1
            if u <= 4 * N + 64:
                kc, qc = ki - lo, qi - lo
            else:
                kc = qc = None
        else:
            kc = qc = None
        if kc is None:
            both = np.concatenate([keys.reshape(-1), queries.reshape(-1)])
            _, inv = np.unique(both, return_inverse=True)
            inv = inv.reshape(-1)
            u = int(inv.max()) + 1
            kc, qc = inv[:B * N].reshape(B, N), inv[B * N:].reshape(B, N)
        rows = (np.arange(B, dtype=np.int64) * u)[:, None]
        return kc + rows, qc + rows, B * u, causal

    def _width_fast(self, sel: Selector):
        if isinstance(sel, Select) and sel.op in ("TRUE", "FALSE"):
            if sel.op == "FALSE":
                return np.zeros((self.batch, self.n), dtype=np.int64)
            if self.causal or sel.causal:
                return np.broadcast_to(np.arange(1, self.n + 1, dtype=np.int64),
                                       (self.batch, self.n)).copy()
            return np.full((self.batch, self.n), self.n, dtype=np.int64)
        if isinstance(sel, Select) and sel.op in ORDER_SIDE and self.n >= 256 and \
                not (self.causal or sel.causal):
            return self._width_sorted(sel)
        codes = self._eq_codes(sel)
        if codes is None:
            return None
        kc, qc, m, causal = codes
        count = np.bincount(kc.reshape(-1), minlength=m)[qc].astype(np.int64)
        if causal:
            count = self._causal_mask_distinct(kc, qc, m, count)[0]
        return count

    def _width_sorted(self, sel: Select):
        """Selector width of a non-causal ordering select by sorting each sequence's keys and
        binary-searching the queries: O(batch * seq log seq) time and memory, no matrix."""
        keys, queries = self.values[sel.keys.id], self.values[sel.queries.id]
        if (keys.dtype.kind == "U") != (queries.dtype.kind == "U") or "O" in (
                keys.dtype.kind, queries.dtype.kind):
            return None          # the matrix path compares these (or reports the type error)
        out = np.empty((self.batch, self.n), dtype=np.int64)
        side, below = ORDER_SIDE[sel.op]
        for b in range(self.batch):
            c = np.searchsorted(np.sort(keys[b]), queries[b], side=side)
            out[b] = c if below else self.n - c
        return out

    def _causal_mask_distinct(self, kc, qc, m, count):
        """Causal ``==`` with distinct keys per sequence (positions): the one matching key
        ``k`` counts only when ``k <= q``. Returns (masked count, key index per code)."""
        flat_k = kc.reshape(-1)
        where_key = np.zeros(m, dtype=np.int64)
        where_key[flat_k] = np.arange(flat_k.size, dtype=np.int64)
        kpos = where_key[qc] % self.n
        qpos = np.arange(self.n, dtype=np.int64)[None, :]
        return np.where(kpos <= qpos, count, 0), where_key

    def _aggregate_grouped(self, n: Aggregate, vals, kc, qc, m, causal=False) -> np.ndarray:
        """An aggregate over an ``==`` select, by grouping keys on their codes (``causal``:
        distinct keys, masked to ``k <= q``)."""
        default = n.default
        kind = vals.dtype.kind
        flat_k = kc.reshape(-1)
        count = np.bincount(flat_k, minlength=m)[qc]
        if causal:
            count, where_key = self._causal_mask_distinct(kc, qc, m, count)
        else:
            # index of (one) key of each code: exact whenever a query selects one key
            where_key = np.zeros(m, dtype=np.int64)
            where_key[flat_k] = np.arange(flat_k.size, dtype=np.int64)
        other = _other_type_default(n, vals, count)
        if other is not None:
            return other
        flat_vals = vals.reshape(-1)

        def moved_values():
            moved = flat_vals[where_key[qc]]
            return np.where(count == 0, default, moved) if np.any(count == 0) else moved

        if n.reduction == "mean":
            if kind == "U":
                if np.any(count > 1):
                    b, q = np.argwhere(count > 1)[0]
                    keys = np.flatnonzero(kc[b] == qc[b, q]).tolist()
                    raise RASPTypeError(
                        f"aggregate '{n.label}' asked to average several string values at "
                        f"query position {q} (selected keys {keys}); a mean needs numbers")
                return moved_values()
            if count.size and count.max() <= 1:
                mean = flat_vals[where_key[qc]]
            else:
                sums = np.bincount(flat_k, weights=flat_vals.astype(np.float64), minlength=m)
                with np.errstate(invalid="ignore", divide="ignore"):
                    mean = sums[qc] / np.maximum(count, 1)
            return self._finish_mean(n, vals, count, mean, moved_values)
        # max / min
        if kind == "U":
            uniq, inv = np.unique(vals, return_inverse=True)
            ranks = inv.reshape(-1).astype(np.int64)
            r = grouped_reduce(flat_k, m, ranks, qc, count, n.reduction)
            return _with_string_default(n, uniq[np.where(count == 0, 0, r)], count)
        back = bool if kind == "b" else None
        work = flat_vals.astype(np.int64) if kind == "b" else flat_vals
        r = grouped_reduce(flat_k, m, work, qc, count, n.reduction).astype(work.dtype)
        if back is not None:
            r = r.astype(back)
        if np.any(count == 0):
            r = np.where(count == 0, default, r)
        return r

    def _finish_mean(self, n: Aggregate, vals, count, mean, moved_values):
        """The mean reduction's result from the per-query ``count`` and ``mean`` (shared by the
        matrix, gather and grouped paths): defaults, truncation, int typing."""
        default = n.default
        kind = vals.dtype.kind
        if kind in "iub" and np.all(count <= 1) and kind == "b" and _is_bool(default):
            return moved_values()
        mean = np.asarray(mean, dtype=np.float64)
        # (a string default never reaches here for an empty row: _other_type_default)
        out = np.where(count == 0, 0.0 if _is_str(default) else float(default), mean)
        if n.truncate:
            res = np.trunc(out).astype(np.int64)
        elif kind in "iub" and isinstance(default, (int, bool, np.integer)) and \
                np.all(out == np.round(out)):
            res = out.astype(np.int64)
        else:
            return out
        if kind in "iu" and np.any(count == 1):
            # one selected key: its value itself, as the original RASP's mean returns it
            # (Support.py: ``if n == 1: return vals[...]``); float64 rounds ints above 2**53
            res = np.where(count == 1, np.asarray(moved_values()).astype(np.int64), res)
        return res

    def _move_single(self, sel, vals, count, default):
        idx = first_selected(sel)                             # [B, Q] first selected key
        moved = np.take_along_axis(vals, idx, axis=-1)
        return np.where(count == 0, default, moved) if np.any(count == 0) else moved


def _callable_error(n: Node, e: Exception) -> RASPError | None:
    """The :class:`RASPError` for an exception ``e`` raised while evaluating ``n``: a Python
    callable of a map / sequence map or a Python predicate of a select (``rasp.map_sop``,
    Tracr's ``Map``, ``Select``) raised its own error (``TypeError`` -> RASPTypeError, any
    other -> RASPValueError), or an elementwise op met values it has no rule for (``None <
    2``: RASPTypeError), named with the operation and its source position; None for any other
    node (the exception propagates as it is)."""
    fn = getattr(n, "fn", None)
    if isinstance(n, (Map, SequenceMap)) and fn.op != "python":
        # an op's own kernel on values it has no rule for (``None < 2``: Python's TypeError)
        return RASPTypeError(f"{n.kind} '{n.label}' ({fn.describe(*['x'] * len(n.children))}) "
                             f"cannot be applied to these values: {e}", n.span)
    if getattr(fn, "op", None) == "python":
        what = f"{n.kind} '{n.label}' ({fn.describe(*['x'] * max(1, len(n.children)))})"
    elif getattr(n, "op", None) == "python":
        what = f"select '{n.label}' (its Python predicate)"
    else:
        return None
    cls = RASPTypeError if isinstance(e, TypeError) else RASPValueError
    return cls(f"{what}: the Python callable raised {type(e).__name__}: {e}", n.span)


def _with_string_default(n: Aggregate, out: np.ndarray, count: np.ndarray) -> np.ndarray:
    """A max/min reduction of strings: ``n.default`` (a string, see
    :func:`_other_type_default`) where no key is selected (``count == 0``)."""
    if not np.any(count == 0):
        return out
    return np.where(count == 0, n.default, out)


def _is_bool(x) -> bool:
    return isinstance(x, (bool, np.bool_))


def _is_index_shift(node: Node) -> bool:
    """Whether an s-op is ``indices + c`` (integer constant shifts): distinct per sequence."""
    for _ in range(64):
        if isinstance(node, Indices):
            return True
        if not isinstance(node, Map):
            return False
        fn = node.fn
        c = fn.const
        if not (isinstance(c, (int, np.integer)) and not isinstance(c, (bool, np.bool_))):
            return False
        if not (fn.op == "add" and fn.const_side in ("left", "right")
                or fn.op == "sub" and fn.const_side == "right"):
            return False
        node = node.inner
    return False


# Batches are evaluated in chunks of about this many selector entries (chunk * seq * seq).
_CHUNK_ELEMENTS = 1 << 20


def ragged_sequences(inputs: Any) -> list | None:
    """The sequences of a ragged batch: ``inputs`` as a list when it is a list or tuple of
    sequences (strings, lists, tuples, 1-D arrays) of different lengths; ``None`` for anything
    else (one sequence, an equal-length batch, an array), which :func:`to_batch` reads."""
    if isinstance(inputs, (list, tuple)) and len(inputs) > 1 and all(
            isinstance(x, (list, tuple, str, np.ndarray)) for x in inputs) and len(
            {len(x) for x in inputs}) > 1:
        return list(inputs)
    return None


def evaluate(sop: Node, inputs: Any, causal: bool | None = None) -> np.ndarray | list:
    """Evaluate an s-op (or selector) on a batch of inputs.

    Args:
        sop: an :class:`~rasp.ir.SOp` or :class:`~rasp.ir.Selector`.
        inputs: a string (one sequence of characters), a list of tokens (one sequence), a list
            of sequences, or a ``[batch, seq]`` array.
        causal: ``True`` evaluates in RASP-L causal mode (every selector ANDed with
            ``key_index <= query_index``); ``None`` (default) respects each select's own flag.

    Returns:
        ``[batch, seq]`` array for an s-op; ``[batch, query, key]`` bool array for a selector.
        For sequences of different lengths (a ragged batch, as ``CompiledModel.run`` takes),
        a list with one result per sequence, in order: a ``[seq]`` array (s-op) or a
        ``[query, key]`` array (selector); sequences of one length are evaluated together.

    Raises:
        RASPTypeError / RASPValueError (subclasses of :class:`~rasp.ir.RASPError`) with the
        offending operation's source position when known.
    """
    seqs = ragged_sequences(inputs)
    if seqs is not None:
        out: list = [None] * len(seqs)
        for n in {len(x) for x in seqs}:         # one batch per length
            idx = [i for i, x in enumerate(seqs) if len(x) == n]
            for i, r in zip(idx, evaluate(sop, [list(seqs[i]) for i in idx], causal)):
                out[i] = r
        return out
    arr = to_batch(inputs)
    batch, n = arr.shape
    chunk = max(1, _CHUNK_ELEMENTS // (n * n))
    if batch <= chunk or not isinstance(sop, SOp):
        return Evaluator(arr, causal=causal, lazy_selectors=True)(sop)
    # Large batches run in chunks whose [chunk, query, key] selectors stay in cache; the
    # results are the same (NumPy concatenation gives the common dtype, as one batch would).
    parts = [Evaluator(arr[i:i + chunk], causal=causal, lazy_selectors=True)(sop)
             for i in range(0, batch, chunk)]
    return np.concatenate(parts, axis=0)


def evaluate_one(node: Node, inp: Any, causal: bool | None = None) -> list:
    """Evaluate an s-op (or selector) on one input, as the dialect's ``sop("hello")`` and the
    Python API's ``sop("hello")`` do.

    ``inp``: a string (its characters) or a list / tuple of atoms; ``causal`` as for
    :func:`evaluate`. Returns a list of ``seq`` values (s-op) or a ``[query][key]`` list of
    bools (selector). Raises RASPTypeError when ``inp`` is not one input (a batch is
    :func:`evaluate`'s), RASPValueError when it is empty, and any error of the evaluation."""
    if isinstance(inp, str):
        seq = list(inp)
    elif isinstance(inp, (list, tuple)) and all(
            isinstance(v, (bool, int, float, str, np.generic)) for v in inp):
        seq = list(inp)
    else:
        what = type(inp).__name__
        if isinstance(inp, (list, tuple)):
            what = "a list of " + ", ".join(sorted({type(v).__name__ for v in inp}))
        raise RASPTypeError(f"an s-op applies to one input, a string or a list of atoms, got "
                            f"{what} (for a batch use rasp.evaluate)")
    if not seq:
        raise RASPValueError("cannot apply an s-op to an empty input")
    return np.asarray(evaluate(node, [seq], causal))[0].tolist()


#: ``sop("hello")``: an s-op or selector called on one input (see :class:`~rasp.ir.Node`)
Node.__call__ = evaluate_one
