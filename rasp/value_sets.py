"""Value-set inference: the finite set of values each s-op can take.

Given the input vocabulary and the maximum sequence length, every s-op of a RASP program takes
values in a finite set. The compiler needs these sets to size the residual stream (one direction
per value of a categorical s-op) and to build lookup-table and discretising MLPs; the RASP-L
checker needs them for the int8 rule (Zhou et al. 2023, RASP-L restriction 2).

The sets are *exact over-approximations*: they contain every value the interpreter can produce
(for inputs over ``vocab`` of length ``1..max_seq_len``) and are computed operation by operation
(a sequence map takes the product of its inputs' sets, so it may contain combinations that never
occur together). Unlike Tracr, the mean of numbers yields *every* ``k/n`` that can occur: the
means of all multisets of ``1..max_seq_len`` values (Tracr assumed ``{0, 1/n}``; its failure
mode 2 in ``docs/compiler.md``).

Public API:

* :func:`infer_value_sets(sop, vocab, max_seq_len, causal=False, input_conversion=None)
  <infer_value_sets>` -> ``dict[node_id, frozenset]`` (s-ops only).
* helpers used by the compiler: :func:`apply_elementwise_table`, :func:`mean_values`,
  :func:`token_values`, :func:`selects_at_most_one`, :func:`selects_at_least_one`.
* :class:`ValueSetError` when a set cannot be decided or would be too large.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .ir import (Aggregate, Elementwise, Full, Indices, Length, Map, Node, RASPError, Select,
                 SelectorAnd, SelectorOr, SelectorWidth, SequenceMap, SOp, Tokens,
                 topological_order)

__all__ = ["ValueSetError", "infer_value_sets", "apply_elementwise_table", "mean_values",
           "token_values", "selects_at_most_one", "selects_at_least_one", "selects_equal_values",
           "MAX_VALUE_SET",
           "sort_values"]

#: the largest value set (and the largest product of input sets of a sequence map) inferred.
MAX_VALUE_SET = 200_000


class ValueSetError(RASPError):
    """A value set cannot be decided (e.g. a Python callable failing on every value) or would
    be larger than :data:`MAX_VALUE_SET`."""


def sort_values(values: Iterable[Any]) -> list:
    """Values in a stable order: numbers ascending (bools as numbers), then strings, then other
    values by ``repr``."""
    def key(v):
        if isinstance(v, (bool, np.bool_)):
            return (0, float(v), "")
        if isinstance(v, (int, float, np.integer, np.floating)):
            return (0, float(v), "")
        if isinstance(v, str):
            return (1, 0.0, v)
        return (2, 0.0, repr(v))
    return sorted(set(values), key=key)


def _py(v: Any) -> Any:
    """A NumPy scalar as the equivalent Python scalar."""
    if isinstance(v, np.generic):
        return v.item()
    return v


def token_values(vocab: Iterable[Any], conversion: str) -> list:
    """The values of ``tokens_<conversion>`` for input tokens drawn from ``vocab``.

    Uses the interpreter's conversion, so ``tokens_int`` of ``"3"`` is ``3``; raises
    :class:`ValueSetError` when a vocabulary item cannot be converted."""
    from .interpreter import convert_tokens, to_batch
    vocab = list(vocab)
    if not vocab:
        raise ValueSetError("empty vocabulary")
    try:
        arr = to_batch([list(vocab)])
        conv = convert_tokens(arr, conversion)
    except RASPError as e:
        raise ValueSetError(f"cannot convert the vocabulary for tokens_{conversion}: "
                            f"{e.message}") from None
    return sort_values(_py(v) for v in conv.reshape(-1).tolist())


def apply_elementwise_table(fn: Callable[..., np.ndarray], columns: Sequence[Sequence[Any]]
                            ) -> list[tuple[bool, Any]]:
    """Apply ``fn`` (arrays -> array) to rows of ``columns`` (one list per input, equal length).

    Returns one ``(ok, value)`` per row; rows on which the function raises a
    :class:`~rasp.ir.RASPError` (division by zero, failed lookup, ...) give ``(False, None)``.
    The batched call is tried first; on an error every row is evaluated on its own.
    """
    from .ops import homogeneous_array
    n = len(columns[0]) if columns else 0
    if n == 0:
        return []
    arrays = []
    for col in columns:
        try:
            arrays.append(homogeneous_array([_py(c) for c in col])[None, :])
        except RASPError:
            arrays.append(np.array([_py(c) for c in col], dtype=object)[None, :])
    try:
        with np.errstate(all="ignore"):
            out = np.asarray(fn(*arrays)).reshape(-1)
        if out.shape[0] == n:
            return [(True, _py(v)) for v in out.tolist()]
    except (RASPError, TypeError, ValueError, ZeroDivisionError, KeyError, IndexError):
        pass
    res = []
    for i in range(n):
        try:
            with np.errstate(all="ignore"):
                o = np.asarray(fn(*[a[:, i:i + 1] for a in arrays])).reshape(-1)
            res.append((True, _py(o[0])))
        except (RASPError, TypeError, ValueError, ZeroDivisionError, KeyError, IndexError):
            res.append((False, None))
    return res


def _elementwise_fn(fn: Elementwise) -> Callable[..., np.ndarray]:
    return fn.apply


def mean_values(values: Iterable[Any], max_count: int, limit: int = MAX_VALUE_SET) -> list:
    """Every arithmetic mean of a multiset of ``1..max_count`` elements of ``values``.

    Exact (computed with fractions): ``{0, 1}`` with ``max_count = 5`` gives every ``k/n``,
    ``0 <= k <= n <= 5``. Integral means are returned as ints, others as floats (as the
    interpreter's ``float`` division gives). Bools count as 0/1. Raises :class:`ValueSetError`
    when more than ``limit`` values would result.
    """
    vals = []
    for v in values:
        v = _py(v)
        if isinstance(v, str):
            raise ValueSetError(f"cannot average string values ({v!r})")
        vals.append(Fraction(v) if not isinstance(v, bool) else Fraction(int(v)))
    vals = sorted(set(vals))
    if not vals:
        return []
    if len(vals) == 1:
        return [_frac_out(vals[0])]
    all_int = all(v.denominator == 1 for v in vals)
    means: set = set()
    if all_int:
        ints = [int(v) for v in vals]
        sums = set(ints)
        for k in range(1, max_count + 1):
            if k > 1:
                sums = {s + v for s in sums for v in ints}
            for s in sums:
                means.add(Fraction(s, k))
            if len(means) > limit:
                raise ValueSetError(f"more than {limit} possible means")
    else:
        sums = set(vals)
        for k in range(1, max_count + 1):
            if k > 1:
                sums = {s + v for s in sums for v in vals}
            for s in sums:
                means.add(s / k)
            if len(means) > limit:
                raise ValueSetError(f"more than {limit} possible means")
    return sort_values(_frac_out(m) for m in means)


def _frac_out(f: Fraction):
    if f.denominator == 1:
        return int(f)
    return f.numerator / f.denominator


def _keys_injective(node: SOp, sets: dict[int, frozenset] | None) -> bool:
    """Whether ``node`` takes distinct values at distinct positions (``indices`` or an
    injective map of it)."""
    while True:
        if isinstance(node, Indices):
            return True
        if isinstance(node, Map) and sets is not None and node.inner.id in sets:
            inner = sorted(sets[node.inner.id], key=repr)
            rows = apply_elementwise_table(_elementwise_fn(node.fn), [inner])
            outs = [v for ok, v in rows if ok]
            if len(outs) != len(inner) or len(set(map(repr, outs))) != len(outs):
                return False
            node = node.inner
            continue
        return False


def selects_at_most_one(sel: Node, sets: dict[int, frozenset] | None = None) -> bool:
    """Whether ``sel`` provably selects at most one key per query (``select(indices, q, ==)``
    and injective maps of ``indices`` as keys; ``and`` with such a selector)."""
    if isinstance(sel, Select):
        return sel.op == "FALSE" or (sel.op == "==" and _keys_injective(sel.keys, sets))
    if isinstance(sel, SelectorAnd):
        return selects_at_most_one(sel.a, sets) or selects_at_most_one(sel.b, sets)
    return False


def selects_equal_values(sel: Node, values: SOp) -> bool:
    """Whether every key ``sel`` selects for a query has the same value of ``values``
    (``select(values, q, ==)``, possibly inside an ``and``): a mean then never averages
    different values."""
    if isinstance(sel, Select):
        return sel.op == "==" and sel.keys is values
    if isinstance(sel, SelectorAnd):
        return selects_equal_values(sel.a, values) or selects_equal_values(sel.b, values)
    return False


def selects_at_least_one(sel: Node) -> bool:
    """Whether ``sel`` provably selects at least one key per query (``TRUE``, or the same
    s-op as keys and queries with ``==``, ``<=`` or ``>=``: the query's own position)."""
    if isinstance(sel, Select):
        if sel.op == "TRUE":
            return True
        return sel.keys is sel.queries and sel.op in ("==", "<=", ">=")
    if isinstance(sel, SelectorOr):
        return selects_at_least_one(sel.a) or selects_at_least_one(sel.b)
    return False


def _check_size(node: Node, n: int):
    if n > MAX_VALUE_SET:
        raise ValueSetError(f"the value set of '{node.label}' would have {n} values "
                            f"(limit {MAX_VALUE_SET})", node.span)


def infer_value_sets(sop: SOp, vocab: Iterable[Any], max_seq_len: int, causal: bool = False,
                     input_conversion: Callable[[Any], Any] | None = None
                     ) -> dict[int, frozenset]:
    """The set of values of every s-op reachable from ``sop``.

    Args:
        sop: the program's output s-op.
        vocab: the input token values (what ``rasp.evaluate`` receives, e.g. characters).
        max_seq_len: the largest input length ``n``; lengths ``1..n`` are covered.
        causal: RASP-L causal mode (selector widths and mean counts bounded by the query's
            prefix length: the same sets over all positions).
        input_conversion: optional callable applied to every vocabulary item before the
            ``tokens`` conversion (e.g. a task's ``program_tokens``).

    Returns:
        ``{node.id: frozenset(values)}`` for every s-op (selectors are not included).

    Raises:
        ValueSetError: a set larger than :data:`MAX_VALUE_SET`, a map failing on every input
            value, or a length below 1.
    """
    if not isinstance(max_seq_len, int) or max_seq_len < 1:
        raise ValueSetError(f"max_seq_len must be a positive int, got {max_seq_len!r}")
    vocab = list(vocab)
    if input_conversion is not None:
        vocab = [input_conversion(v) for v in vocab]
    n = max_seq_len
    sets: dict[int, frozenset] = {}
    for node in topological_order(sop):
        if not isinstance(node, SOp):
            continue
        sets[node.id] = frozenset(_node_values(node, sets, vocab, n))
    return sets


def _node_values(node: SOp, sets, vocab, n) -> list:
    if isinstance(node, Tokens):
        return token_values(vocab, node.conversion)
    if isinstance(node, Indices):
        return list(range(n))
    if isinstance(node, Length):
        return list(range(1, n + 1))
    if isinstance(node, Full):
        return [_py(node.value)]
    if isinstance(node, (Map, SequenceMap)):
        inputs = [node.inner] if isinstance(node, Map) else list(node.inputs)
        cols_in = [sort_values(sets[x.id]) for x in inputs]
        total = math.prod(len(c) for c in cols_in)
        _check_size(node, total)
        combos = list(itertools.product(*cols_in))
        columns = [[c[i] for c in combos] for i in range(len(inputs))]
        rows = apply_elementwise_table(_elementwise_fn(node.fn), columns)
        outs = [v for ok, v in rows if ok]
        if not outs and combos:
            raise ValueSetError(f"'{node.label}' fails on every possible input value",
                                node.span)
        return sort_values(outs)
    if isinstance(node, SelectorWidth):
        lo = 1 if selects_at_least_one(node.selector) else 0
        hi = 1 if selects_at_most_one(node.selector, sets) else n
        return list(range(lo, hi + 1))
    if isinstance(node, Aggregate):
        vals = sort_values(sets[node.values.id])
        out: list = []
        if not selects_at_least_one(node.selector):
            out.append(_py(node.default))
        if node.reduction in ("max", "min") or any(isinstance(v, str) for v in vals) \
                or len(vals) <= 1 or selects_at_most_one(node.selector, sets) \
                or selects_equal_values(node.selector, node.values):
            out.extend(vals)
        else:
            try:
                means = mean_values(vals, n)
            except ValueSetError as e:
                raise ValueSetError(f"'{node.label}': {e.message}", node.span) from None
            out.extend(means)
        if node.truncate:
            out = [int(math.trunc(v)) if not isinstance(v, str) else v for v in out]
        _check_size(node, len(out))
        return sort_values(out)
    raise ValueSetError(f"no value-set rule for node kind {node.kind}", node.span)
