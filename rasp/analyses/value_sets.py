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
  :func:`token_values`, :func:`selects_at_most_one`, :func:`selects_at_least_one`,
  :func:`float_mean_spread` (the float64 values the interpreter may compute for one exact
  mean), :func:`same_result`, :func:`simplest_float`.
* :class:`ValueSetError` when a set cannot be decided or would be too large;
  :class:`PrecisionError` (with ``float_spreads``) for an operation whose result depends on
  how float64 rounds a mean.

Size: one pass computes, per node, its values and (for the compiler) their float spreads, and
the two share each rule (a mean's set and its roundings, a map's outputs and their spreads):
split, every rule would exist twice.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..ir import (Aggregate, Elementwise, Full, Indices, Length, Map, Node, RASPError, Select,
                 SelectorAnd, SelectorOr, SelectorWidth, SequenceMap, SOp, Tokens,
                 topological_order)

__all__ = ["ValueSetError", "ValueSets", "infer_value_sets", "value_set_pass",
           "apply_elementwise_table", "mean_values", "token_values", "selects_at_most_one",
           "selects_at_least_one", "selects_equal_values", "sequence_kind", "kind_groups",
           "values_array", "MAX_VALUE_SET", "sort_values", "PrecisionError",
           "float_mean_spread", "same_result", "simplest_float", "SPREAD_TOL", "MAX_SPREAD"]

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
    from ..interpreter import convert_tokens, to_batch
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


def sequence_kind(v: Any) -> Any:
    """The dialect's type of one value, as a sequence of the interpreter holds it: ``"bool"``,
    ``"num"`` (ints and floats share arrays), ``"str"``; a tuple (of a combined key/query
    space) gives the tuple of its components' kinds. Values of different kinds never share an
    interpreter array, so they are evaluated apart (:func:`apply_elementwise_table`)."""
    if isinstance(v, tuple):
        return tuple(sequence_kind(x) for x in v)
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, (int, float, np.integer, np.floating)):
        return "num"
    if isinstance(v, str):
        return "str"
    return type(v).__name__


def kind_groups(values: Sequence[Any]) -> list[list[int]]:
    """Positions of ``values`` grouped by :func:`sequence_kind` (first-occurrence order)."""
    groups: dict[Any, list[int]] = {}
    for i, v in enumerate(values):
        groups.setdefault(sequence_kind(v), []).append(i)
    return list(groups.values())


def values_array(vals: Sequence[Any]) -> np.ndarray:
    """A 1-D array of values of one kind as the interpreter builds it (``[k]``); tuples (of a
    combined key/query space) as an object array. Raises :class:`~rasp.ir.RASPTypeError` for
    mixed kinds: group them with :func:`kind_groups` first."""
    from ..ops import homogeneous_array
    vals = [_py(v) for v in vals]
    if vals and isinstance(vals[0], tuple):
        arr = np.empty(len(vals), dtype=object)
        for i, v in enumerate(vals):
            arr[i] = v
        return arr
    return homogeneous_array(vals)


#: the errors an elementwise function of the dialect raises on values it is not defined for
#: what an element's evaluation may raise: a Python callable of the program (``map_sop``,
#: ``sequence_map``) is user code and may raise anything (AttributeError, NameError,
#: StopIteration, ...); any such exception means "the interpreter raises on this value", which
#: the compiled model then reproduces (KeyboardInterrupt and SystemExit still stop everything)
_EVAL_ERRORS = (Exception,)


def apply_elementwise_table(fn: Callable[..., np.ndarray], columns: Sequence[Sequence[Any]]
                            ) -> list[tuple[bool, Any]]:
    """Apply ``fn`` (arrays -> array, elementwise) to the rows of ``columns`` (one list per
    input, equal length), with the interpreter's semantics *per value*.

    Rows are grouped by the kinds of their values (:func:`sequence_kind`): each group is evaluated
    as one batch of homogeneous ``[1, rows]`` arrays, as the interpreter would see those values
    in a sequence, so a mixed set such as ``{0, "a"}`` (a string aggregate with the default 0)
    is never evaluated as one mixed NumPy array.

    Returns one ``(ok, value)`` per row; a row on which the function raises (division by zero,
    failed lookup, a type error, ...) gives ``(False, message)``. When a group's batched call
    raises, its rows are evaluated one by one.
    """
    n = len(columns[0]) if columns else 0
    if n == 0:
        return []
    cols = [[_py(c) for c in col] for col in columns]
    groups: dict[Any, list[int]] = {}
    for i in range(n):
        groups.setdefault(tuple(sequence_kind(c[i]) for c in cols), []).append(i)
    res: list = [None] * n
    for rows in groups.values():
        arrays = [values_array([c[i] for i in rows])[None, :] for c in cols]
        try:
            with np.errstate(all="ignore"):
                out = np.asarray(fn(*arrays)).reshape(-1)
            if out.shape[0] == len(rows):
                for i, v in zip(rows, out.tolist()):
                    res[i] = (True, _py(v))
                continue
        except _EVAL_ERRORS:
            pass
        for j, i in enumerate(rows):
            try:
                with np.errstate(all="ignore"):
                    o = np.asarray(fn(*[a[:, j:j + 1] for a in arrays])).reshape(-1)
                res[i] = (True, _py(o[0]))
            except _EVAL_ERRORS as e:
                res[i] = (False, (e.message if isinstance(e, RASPError) else str(e)) or type(e).__name__)
    return res


def _elementwise_fn(fn: Elementwise) -> Callable[..., np.ndarray]:
    return fn.apply


#: enumerating the means stops (refusal) once one level of sums would need more additions
MEAN_WORK_LIMIT = 40_000_000


def mean_values(values: Iterable[Any], max_count: int, limit: int = MAX_VALUE_SET) -> list:
    """Every arithmetic mean of a multiset of ``1..max_count`` elements of ``values``.

    Exact: the values are scaled to integers by their common denominator, and the sums of
    ``k`` values are enumerated level by level as NumPy integer arrays (Python fractions when
    the scaled integers do not fit in int64). ``{0, 1}`` with ``max_count = 5`` gives every
    ``k/n``, ``0 <= k <= n <= 5``. Integral means are returned as ints, others as floats (as
    the interpreter's ``float`` division gives). Bools count as 0/1.

    Growth is bounded before it is enumerated: the distinct sums of ``k`` values give
    distinct means, so a level with more than ``limit`` sums refuses at once, and a level whose
    enumeration would need more than :data:`MEAN_WORK_LIMIT` additions refuses with that
    estimate (seconds, not minutes).

    Raises:
        ValueSetError: more than ``limit`` values would result (or, estimated, too much work);
            a string value.
    """
    vals = []
    for v in values:
        v = _py(v)
        if isinstance(v, str):
            raise ValueSetError(f"cannot average string values ({v!r})")
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueSetError(f"cannot average the non-finite value {v!r}")
        vals.append(Fraction(v) if not isinstance(v, bool) else Fraction(int(v)))
    vals = sorted(set(vals))
    if not vals:
        return []
    if len(vals) == 1:
        return [_frac_out(vals[0])]
    D = 1
    for v in vals:
        D = D * v.denominator // math.gcd(D, v.denominator)
    ints = [int(v * D) for v in vals]
    big = max(abs(i) for i in ints) * max_count * max(D, max_count)
    if big < 2 ** 62:
        return _int_means(ints, D, max_count, limit)
    return _fraction_means(vals, max_count, limit)


def _too_many(limit: int, k: int, found: int) -> ValueSetError:
    return ValueSetError(f"more than {limit} possible means (already {found} distinct sums of "
                         f"{k} values)")


def _int_means(ints: list[int], D: int, max_count: int, limit: int) -> list:
    a = np.asarray(sorted(set(ints)), dtype=np.int64)
    m = len(a)
    keys: np.ndarray = np.zeros(0, dtype=np.int64)
    Q = max_count * D + 1
    sums = a
    nums, dens = [], []
    for k in range(1, max_count + 1):
        if k > 1:
            work = len(sums) * m
            if work > MEAN_WORK_LIMIT:
                raise ValueSetError(
                    f"more than {limit} possible means (estimated: {len(sums)} distinct sums "
                    f"of {k - 1} values x {m} values; enumerating would take more than "
                    f"{MEAN_WORK_LIMIT:,} additions)")
            chunk = max(1, 4_000_000 // m)
            parts = [np.unique((sums[i:i + chunk, None] + a[None, :]).reshape(-1))
                     for i in range(0, len(sums), chunk)]
            sums = np.unique(np.concatenate(parts))
        if len(sums) > limit:
            raise _too_many(limit, k, len(sums))
        den = np.full(len(sums), k * D, dtype=np.int64)
        g = np.gcd(sums, den)
        p, q = sums // g, den // g
        keys = np.unique(np.concatenate([keys, p * Q + q]))
        if len(keys) > limit:
            raise ValueSetError(f"more than {limit} possible means")
    p, q = np.divmod(keys, Q)
    if np.all(np.abs(p) < 2 ** 53):
        # correctly rounded like Python's int / int: both operands are exact in float64
        fl = p.astype(np.float64) / q.astype(np.float64)
        order = np.argsort(fl, kind="stable")
        return [int(p[i]) if q[i] == 1 else float(fl[i]) for i in order.tolist()]
    out = [_frac_out(Fraction(int(pp), int(qq))) for pp, qq in zip(p.tolist(), q.tolist())]
    return sort_values(out)


def _fraction_means(vals: list[Fraction], max_count: int, limit: int) -> list:
    """The means when the scaled integers exceed int64 (floats such as 1/3 have denominators
    up to 2^60): Python integers scaled by the common denominator, level by level."""
    D = 1
    for v in vals:
        D = D * v.denominator // math.gcd(D, v.denominator)
    ints = sorted({int(v * D) for v in vals})
    m = len(ints)
    means: set = {Fraction(i, D) for i in ints}
    sums = set(ints)
    for k in range(2, max_count + 1):
        if len(sums) * m > MEAN_WORK_LIMIT // 10:
            raise ValueSetError(
                f"more than {limit} possible means (estimated: {len(sums)} distinct sums of "
                f"{k - 1} values x {m} values)")
        sums = {s + v for s in sums for v in ints}
        if len(sums) > limit:
            raise _too_many(limit, k, len(sums))
        means.update(Fraction(s, k * D) for s in sums)
        if len(means) > limit:
            raise ValueSetError(f"more than {limit} possible means")
    return sort_values(_frac_out(x) for x in means)


def _frac_out(f: Fraction):
    if f.denominator == 1:
        return int(f)
    return f.numerator / f.denominator


# --------------------------------------------------------------------------------------------
# Float spreads: the interpreter's float64 roundings of one exact value
# --------------------------------------------------------------------------------------------
#
# The value set of a mean holds one value per exact rational (the mean of a multiset of
# values); the interpreter computes it in float64: the sum of the selected values in an order
# chosen by NumPy (``np.einsum``'s SIMD lanes, ``np.bincount``'s key order: it depends on the
# CPU), then one division. Where those sums may round, one exact mean is several floats, which
# a discontinuous consumer (``round``, ``trunc``, ``%``, a comparison) can tell apart while the
# compiled model, which computes the exact mean, cannot. A *spread* lists, per value of an
# s-op's set, every float the interpreter may hold in its place; a consumer whose result
# differs between them is refused (:class:`PrecisionError`).

#: values of one spread (roundings of one exact value) count as one when within this, relative
#: to ``max(1, |value|)``; a consumer's results on one spread must agree within it
SPREAD_TOL = 1e-10
#: the most floats the spreads of one s-op may hold (else it is too imprecise to enumerate)
MAX_SPREAD = 200_000
#: the most sub-multiset splits enumerated for the sums of every summation order
TREE_WORK_LIMIT = 100_000
#: the most exact sums (all counts together) whose rounding error bounds are enumerated
BOUND_SUMS_LIMIT = 20_000
_U = 2.0 ** -53                       # float64 unit roundoff


class PrecisionError(ValueSetError):
    """An operation whose result depends on how float64 rounds a mean (or a value computed
    from one): the interpreter may give different results for one exact value, which a
    compiled model cannot reproduce."""


def same_result(a: tuple[bool, Any], b: tuple[bool, Any]) -> bool:
    """Whether two ``(ok, value)`` results of one operation are one result up to float
    rounding: both fail, or equal values of one kind (numbers within :data:`SPREAD_TOL`)."""
    (ok_a, x), (ok_b, y) = a, b
    if not ok_a or not ok_b:
        return ok_a == ok_b
    if sequence_kind(x) != sequence_kind(y):
        return False
    if sequence_kind(x) == "num":
        x, y = float(x), float(y)
        if x == y or (math.isnan(x) and math.isnan(y)):
            return True
        return math.isfinite(x) and math.isfinite(y) and \
            abs(x - y) <= SPREAD_TOL * max(1.0, abs(x), abs(y))
    try:
        return bool(x == y)
    except Exception:                 # noqa: BLE001 (user values compared)
        return False


def _identical(x: Any, y: Any) -> bool:
    """Equal values of one kind (an int and the equal float count as one)."""
    return sequence_kind(x) == sequence_kind(y) and x == y


def _float_ord(x: float) -> int:
    """A monotone integer for a float64 (consecutive floats: consecutive integers)."""
    i = int(np.float64(x).view(np.int64))
    return i if i >= 0 else -(i & 0x7FFFFFFFFFFFFFFF)


def _ord_floats(a: int, b: int) -> list[float]:
    o = np.arange(a, b + 1, dtype=np.int64)
    bits = np.where(o >= 0, o, (-o) | np.int64(-0x8000000000000000))
    return bits.view(np.float64).tolist()


def _floats_between(lo: Fraction, hi: Fraction) -> tuple[float, float]:
    """The largest float <= ``lo`` and the smallest float >= ``hi``."""
    a, b = float(lo), float(hi)
    if Fraction(a) > lo:
        a = math.nextafter(a, -math.inf)
    if Fraction(b) < hi:
        b = math.nextafter(b, math.inf)
    return a, b


def _grid_exp(fracs: Iterable[Fraction]) -> int:
    """``E`` such that every value is a multiple of ``2**-E`` (floats are dyadic)."""
    return max((f.denominator.bit_length() - 1 for f in fracs), default=0)


def float_mean_spread(values: Iterable[Any], max_count: int,
                      spread: dict | None = None) -> dict:
    """The float64 values the interpreter may give for each mean of :func:`mean_values`.

    Args:
        values: the numbers averaged (bools count as 0/1).
        max_count: the most keys one query selects.
        spread: the spreads of ``values`` themselves (``{value: floats}``), if any.

    Returns:
        ``{mean: sorted tuple of floats}`` for the means (keys as :func:`mean_values` returns
        them) that the interpreter may hold as another float; empty when every sum is exact
        (integers, or dyadic values small enough: one correctly rounded division).
        Every summation order is covered (NumPy's is CPU-dependent): exactly, by the sums of
        every binary tree over each multiset, while that takes at most
        :data:`TREE_WORK_LIMIT` splits; otherwise by the floats within the error bound
        ``gamma_(k-1) * sum |v|`` of the exact sum (Higham, Accuracy and Stability of
        Numerical Algorithms, 2002, eq. 4.4), a superset.

    Raises:
        ValueSetError: the spreads would hold more than :data:`MAX_SPREAD` floats, or come
            from more than :data:`BOUND_SUMS_LIMIT` exact sums (checked as they grow).
    """
    spread = spread or {}
    vals: list[tuple[Any, Fraction, list[float]]] = []
    seen: set = set()
    for v in values:
        v = _py(v)
        v = int(v) if isinstance(v, bool) else v
        if v in seen:
            continue
        seen.add(v)
        members = sorted({float(m) for m in spread.get(v, (v,))} | {float(v)})
        vals.append((v, Fraction(v), members))
    if not vals:
        return {}
    fr = [f for _, f, _ in vals] + [Fraction(m) for _, _, ms in vals for m in ms]
    big = max(abs(f) for f in fr)
    exact = all(len(ms) == 1 for _, _, ms in vals) and \
        big * max_count * 2 ** _grid_exp(fr) <= 2 ** 53
    if exact:
        return {}
    out: dict[Any, set] = {}
    if not _tree_spread(vals, max_count, out):
        _bound_spread(vals, max_count, out)
    res = {}
    for c, ms in out.items():
        if any(not _identical(m, c) for m in ms):
            res[c] = tuple(sorted(ms | {float(c)}))
    return res


def _add_member(out: dict, total: list, r: Fraction, members) -> None:
    c = _frac_out(r)
    s = out.setdefault(c, set())
    before = len(s)
    s.update(members)
    total[0] += len(s) - before
    if total[0] > MAX_SPREAD:
        raise ValueSetError(f"its float64 roundings would hold more than {MAX_SPREAD:,} "
                            "values to check")


def _tree_spread(vals, n: int, out: dict) -> bool:
    """Every summation tree's float sum per multiset (exact zeros left out: adding 0 is
    exact), divided by every count; False (nothing done) when it would take more than
    :data:`TREE_WORK_LIMIT` splits."""
    nz = [(f, ms) for _, f, ms in vals if not (f == 0 and ms == [0.0])]
    has_zero = len(nz) < len(vals)
    m = len(nz)
    work = 0
    for s in range(2, n + 1):
        work += math.comb(m + s - 1, s) * min(2 ** s, int((s / max(m, 1) + 1) ** m) + 1)
        if work > TREE_WORK_LIMIT:
            return False
    total = [0]
    sums: dict[tuple, set] = {}
    exact: dict[tuple, Fraction] = {}
    for s in range(1, n + 1):
        for combo in itertools.combinations_with_replacement(range(m), s):
            counts = [0] * m
            for i in combo:
                counts[i] += 1
            key = tuple(counts)
            if s == 1:
                f, ms = nz[combo[0]]
                got, S = set(ms), f
            else:
                got = set()
                for sub in itertools.product(*[range(c + 1) for c in counts]):
                    size = sum(sub)
                    if size == 0 or 2 * size > s:
                        continue
                    rest = tuple(c - a for c, a in zip(counts, sub))
                    for x in sums[sub]:
                        for y in sums[rest]:
                            got.add(x + y)
                first = combo[0]
                less = list(counts)
                less[first] -= 1
                S = exact[tuple(less)] + nz[first][0]
            sums[key], exact[key] = got, S
            for k in range(s, (n if has_zero else s) + 1):
                _add_member(out, total, S / k, [x / k for x in got])
    return True


def _bound_spread(vals, n: int, out: dict) -> None:
    """Every float within the rounding error bound of each exact sum, divided by its count
    (the floats of the interval, or the sums on the values' grid, whichever are fewer)."""
    fr = [f for _, f, _ in vals]
    members = [Fraction(x) for _, _, ms in vals for x in ms]
    E = _grid_exp(fr + members)
    g = Fraction(1, 2 ** E)
    M = max(abs(x) for x in members)
    delta = max(abs(Fraction(x) - f) for _, f, ms in vals for x in ms)
    same_sign = all(x >= 0 for x in members) or all(x <= 0 for x in members)
    D = 2 ** E
    ints = sorted({int(f * D) for f in fr})
    total = [0]
    for _, f, ms in vals:
        _add_member(out, total, f, ms)
    sums = set(ints)
    seen = len(sums)
    for k in range(2, n + 1):
        if len(sums) * len(ints) > BOUND_SUMS_LIMIT * 4:
            raise ValueSetError("its float64 roundings are too many to enumerate")
        sums = {a + b for a in sums for b in ints}
        seen += len(sums)
        if seen > BOUND_SUMS_LIMIT:
            raise ValueSetError("its float64 roundings are too many to enumerate")
        gamma = Fraction((k - 1), 2 ** 53 - (k - 1))
        for S in sums:
            exact_sum = Fraction(S, D)
            A = (abs(exact_sum) + k * delta) if same_sign else k * M
            e = k * delta + gamma * A
            lo, hi = _floats_between((exact_sum - e) / k, (exact_sum + e) / k)
            oa, ob = _float_ord(lo), _float_ord(hi)
            j0 = math.ceil((exact_sum - e) / g)
            j1 = math.floor((exact_sum + e) / g)
            if ob - oa <= j1 - j0:
                if total[0] + ob - oa + 1 > MAX_SPREAD:
                    raise ValueSetError(f"its float64 roundings would hold more than "
                                        f"{MAX_SPREAD:,} values to check")
                cands = _ord_floats(oa, ob)
            else:
                if total[0] + j1 - j0 + 1 > MAX_SPREAD:
                    raise ValueSetError(f"its float64 roundings would hold more than "
                                        f"{MAX_SPREAD:,} values to check")
                cands = [float(Fraction(j, D * k)) for j in range(j0, j1 + 1)]
            _add_member(out, total, exact_sum / k, cands)


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


#: the most (query value, key value) pairs :func:`selects_at_most_one` compares
_AT_MOST_ONE_PAIRS = 1_000_000


def selects_at_most_one(sel: Node, sets: dict[int, frozenset] | None = None) -> bool:
    """Whether ``sel`` provably selects at most one key per query: keys that take distinct
    values at distinct positions (``indices`` or an injective map of it) and a comparison
    that matches each query value with at most one key value — ``==``, or any comparison or
    Python predicate (Tracr's ``lambda k, q: q == k + 1``) checked on every pair of the key
    and query value sets in ``sets``; ``and`` with such a selector."""
    if isinstance(sel, Select):
        if sel.op == "FALSE":
            return True
        if not _keys_injective(sel.keys, sets):
            return False
        return sel.op == "==" or _one_key_value_per_query(sel, sets)
    if isinstance(sel, SelectorAnd):
        return selects_at_most_one(sel.a, sets) or selects_at_most_one(sel.b, sets)
    return False


def _one_key_value_per_query(sel: Select, sets: dict[int, frozenset] | None) -> bool:
    """Whether every query value of ``sel`` selects at most one key value (both value sets
    known; a comparison that raises on some pair proves nothing)."""
    if sets is None or sel.keys.id not in sets or sel.queries.id not in sets:
        return False
    K, Q = list(sets[sel.keys.id]), list(sets[sel.queries.id])
    if not K or not Q or len(K) * len(Q) > _AT_MOST_ONE_PAIRS:
        return False
    try:
        if sel.op == "python":
            f = np.frompyfunc(lambda k, q: bool(sel.predicate(k, q)), 2, 1)
            table = f(np.asarray(K, dtype=object)[None, :],
                      np.asarray(Q, dtype=object)[:, None]).astype(bool)
        else:
            from ..ops import compare
            table = np.asarray(compare(values_array(K)[None, :], values_array(Q)[:, None],
                                       sel.op), dtype=bool)
    except _EVAL_ERRORS:
        return False
    return bool((table.sum(axis=1) <= 1).all())


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


def _check_size(node: Node, n: int, what: str = "value set"):
    if n > MAX_VALUE_SET:
        raise ValueSetError(f"the {what} of {node.kind} '{node.label}' would have {n:,} values "
                            f"(limit {MAX_VALUE_SET:,})", node.span)


class ValueSets:
    """The result of the value-set pass over a program (:func:`value_set_pass`).

    Attributes:
        sets: ``{node.id: sorted list of values}`` for every s-op whose set was enumerated.
        unbounded: ids of numerical s-ops whose set is too large to enumerate and that the
            caller accepted as unbounded (an affine map or a mean of such values).
        means: ``{node.id: sorted list}`` for a truncating (``kqv``) aggregate: its means
            before truncation.
        errors: ``{node.id: message}`` for a map that fails (the interpreter raises) on some
            combination of possible input values.
        rounded: ids of s-ops whose set holds the exact values while the interpreter's floats
            may differ from them by an ulp (a sum or difference of dependent means): a
            consumer must compare them with a tolerance, never by equality.
        spread: (only with ``float_spreads``) ``{node.id: {value: sorted tuple of floats}}``:
            for a value of the set that stands for an exact value the interpreter may hold
            as other floats (a mean whose float64 sum may round, and what is computed from
            it), every float it may hold instead (the value itself included). Values absent
            from the dict are exact.
        means_spread: the same for the untruncated means of a truncating (``kqv``)
            aggregate (keys: its ``means``).
        wide: (``float_spreads``) ids of s-ops whose spreads are too many floats to
            enumerate (a mean of non-dyadic floats at a long ``max_seq_len``, and what is
            computed from it): only continuous consumers (``+ - *``, division by a
            constant, the output) may read them; any other is precision-sensitive.
        hazards: (``float_spreads`` with a ``hazards`` list) the messages of the
            precision-sensitive operations found, in program order.
    """

    def __init__(self):
        self.sets: dict[int, list] = {}
        self.unbounded: set[int] = set()
        self.means: dict[int, list] = {}
        self.errors: dict[int, str] = {}
        self.rounded: set[int] = set()
        self.spread: dict[int, dict] = {}
        self.means_spread: dict[int, dict] = {}
        self.wide: set[int] = set()
        self.float_spreads = False
        #: where a precision-sensitive operation is recorded instead of refused (None: raise)
        self.hazards: list[str] | None = None

    def values(self, node: Node) -> list | None:
        """The sorted values of ``node``; None when it is unbounded."""
        return None if node.id in self.unbounded else self.sets[node.id]


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
    vocab = list(vocab)
    if input_conversion is not None:
        vocab = [input_conversion(v) for v in vocab]
    vs = value_set_pass(sop, vocab, max_seq_len, causal)
    return {k: frozenset(v) for k, v in vs.sets.items()}


def value_set_pass(sop: SOp, vocab: Iterable[Any], max_seq_len: int, causal: bool = False,
                   accept_unbounded: Callable[[SOp], bool] | None = None,
                   float_spreads: bool = False,
                   hazards: list[str] | None = None) -> ValueSets:
    """Value-set inference over the program rooted at ``sop``, once, in topological order.

    Values are kept per value with the dialect's semantics: a default of another type is its
    own value (``{0, "a", "b"}`` for a string aggregate whose default is 0), and maps and
    comparisons are applied per kind of value (:func:`apply_elementwise_table`), never to a
    mixed NumPy array as a whole. A mean of bools with a non-bool default, or one that may
    average, takes ints and floats as the interpreter returns them.

    Args:
        sop, vocab, max_seq_len, causal: as :func:`infer_value_sets`.
        accept_unbounded: called for a numerical s-op whose set is too large to enumerate (a
            map over too many input combinations, a mean with too many possible results, or a
            map / mean of an unbounded s-op); when it returns True the node is recorded in
            ``ValueSets.unbounded`` instead of refusing. Only the compiler uses it (an affine
            map is computed exactly without its values).
        float_spreads: also compute ``ValueSets.spread`` (the floats the interpreter may
            hold for each value, see :func:`float_mean_spread`) and refuse an operation whose
            result differs between them (the compiler: its model computes exact means).
        hazards: with ``float_spreads``, a list that collects those operations' messages
            instead of raising (the compiler, when its verification gate is exhaustive: the
            gate then decides on every input); their results' spreads hold every result.

    Raises:
        ValueSetError: naming the operation and its position, when a set would be larger than
            :data:`MAX_VALUE_SET` (estimated before enumerating), a map fails on every
            possible input value, or ``max_seq_len < 1``.
        PrecisionError: (``float_spreads``) a map, comparison, max / min or truncation whose
            result depends on how float64 rounds a mean.
    """
    if not isinstance(max_seq_len, int) or isinstance(max_seq_len, bool) or max_seq_len < 1:
        raise ValueSetError(f"max_seq_len must be a positive int, got {max_seq_len!r}")
    vocab = list(vocab)
    vs = ValueSets()
    vs.float_spreads = float_spreads
    vs.hazards = hazards
    for node in topological_order(sop):
        if isinstance(node, Select) and float_spreads:
            _check_select_spread(node, vs)
        if not isinstance(node, SOp):
            continue
        try:
            vals = _node_values(node, vs, vocab, max_seq_len)
        except _Unbounded as u:
            if accept_unbounded is None or not accept_unbounded(node):
                raise ValueSetError(f"{node.kind} '{node.label}'"
                                    f"{_where(node)}: {u.reason}", node.span) from None
            vs.unbounded.add(node.id)
            continue
        except ValueSetError as e:
            if e.span is None and node.span is not None:
                raise ValueSetError(f"{node.kind} '{node.label}'{_where(node)}: {e.message}",
                                    node.span) from None
            raise
        vs.sets[node.id] = sort_values(vals)
    return vs


def _where(node: Node) -> str:
    return f" at {node.span.line}:{node.span.column}" if node.span else ""


class _Unbounded(Exception):
    """A numerical set too large to enumerate (the caller may accept it as unbounded)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _is_number(v) -> bool:
    return isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating))


def _node_values(node: SOp, vs: ValueSets, vocab, n) -> list:
    if isinstance(node, Tokens):
        return token_values(vocab, node.conversion)
    if isinstance(node, Indices):
        return list(range(n))
    if isinstance(node, Length):
        return list(range(1, n + 1))
    if isinstance(node, Full):
        return [_py(node.value)]
    if isinstance(node, SequenceMap):
        dep = _dependent_means(node, vs, n)
        if dep is not None:
            vs.rounded.add(node.id)
            return dep
    if isinstance(node, (Map, SequenceMap)):
        inputs = [node.inner] if isinstance(node, Map) else list(node.inputs)
        unb = [x for x in inputs if x.id in vs.unbounded]
        if unb:
            raise _Unbounded(f"it needs the individual values of '{unb[0].label}', whose value "
                             f"set is too large to enumerate (more than {MAX_VALUE_SET:,})")
        cols_in = [vs.sets[x.id] for x in inputs]
        total = math.prod(len(c) for c in cols_in)
        if total > MAX_VALUE_SET:
            if all(_is_number(v) for c in cols_in for v in c):
                raise _Unbounded(f"its inputs' value sets give {total:,} combinations (limit "
                                 f"{MAX_VALUE_SET:,})")
            _check_size(node, total, "input table")
        combos = list(itertools.product(*cols_in))
        columns = [[c[i] for c in combos] for i in range(len(inputs))]
        rows = apply_elementwise_table(_elementwise_fn(node.fn), columns)
        outs = [v for ok, v in rows if ok]
        if not outs and combos:
            raise ValueSetError(f"{node.kind} '{node.label}'{_where(node)} fails on every "
                                f"possible input value ({rows[0][1]})", node.span)
        if len(outs) < len(rows):
            vs.errors[node.id] = next(v for ok, v in rows if not ok)
        wide = [x for x in inputs if x.id in vs.wide]
        if wide:
            if not _continuous(node):
                _hazard(vs, PrecisionError(
                    f"{node.kind} '{node.label}'{_where(node)} is precision-sensitive: it needs "
                    f"the values of '{wide[0].label}', a mean (or computed from one) whose "
                    "float64 sum may round in too many ways to check at this max_seq_len (its "
                    "result could depend on the rounding); average exact values (e.g. "
                    "integers) or compile for a shorter max_seq_len", node.span))
            vs.wide.add(node.id)
            return outs
        spreads = [vs.spread.get(x.id) for x in inputs]
        if vs.float_spreads and any(spreads):
            sp = _map_spread(node, combos, rows, spreads, vs)
            if sp:
                vs.spread[node.id] = sp
        return outs
    if isinstance(node, SelectorWidth):
        lo = 1 if selects_at_least_one(node.selector) else 0
        hi = 1 if selects_at_most_one(node.selector, vs.sets) else n
        return list(range(lo, hi + 1))
    if isinstance(node, Aggregate):
        return _aggregate_values(node, vs, n)
    raise ValueSetError(f"no value-set rule for node kind {node.kind}", node.span)


def _continuous(node: SOp) -> bool:
    """Whether a map is continuous in its numerical inputs (``+``, ``-``, ``*``, unary
    ``-``/``+``, division by a constant): a value near another gives a result near its."""
    op, side = node.fn.op, node.fn.const_side
    return op in ("add", "sub", "mul", "neg", "pos") or (op == "div" and side == "right")


def _precision_error(node: Node, value, member, a, b) -> PrecisionError:
    return PrecisionError(
        f"{node.kind} '{node.label}'{_where(node)} is precision-sensitive: the interpreter may "
        f"hold the value {value!r} (an exact mean, or computed from one) as the float "
        f"{member!r}, and the result then differs ({a} vs {b}); the compiled model "
        "computes means exactly and cannot follow float64 rounding (average exact values, "
        "e.g. integers, or compare with a margin)", node.span)


def _hazard(vs: ValueSets, err: PrecisionError) -> None:
    """Raise ``err``, or record it in ``vs.hazards`` when the caller collects them."""
    if vs.hazards is None:
        raise err
    vs.hazards.append(err.message)


def _map_spread(node: SOp, combos: list, rows: list, spreads: list, vs: ValueSets) -> dict:
    """The spreads of a map's outputs: the map applied to every float its inputs' values may
    be held as. Raises :class:`PrecisionError` where the results differ."""
    cols: list[list] = [[] for _ in spreads]
    owner: list[tuple[int, tuple]] = []
    for ci, combo in enumerate(combos):
        choices = [(sp or {}).get(v) for v, sp in zip(combo, spreads)]
        if all(c is None for c in choices):
            continue
        choices = [c if c is not None else (v,) for v, c in zip(combo, choices)]
        if len(owner) + math.prod(len(c) for c in choices) > MAX_SPREAD:
            _hazard(vs, PrecisionError(
                f"{node.kind} '{node.label}'{_where(node)} reads values whose float64 roundings "
                f"are too many to check (more than {MAX_SPREAD:,})", node.span))
            return {}
        for t in itertools.product(*choices):
            for j, x in enumerate(t):
                cols[j].append(x)
            owner.append((ci, t))
    res = apply_elementwise_table(_elementwise_fn(node.fn), cols) if owner else []
    out: dict[Any, set] = {}
    for (ci, t), r in zip(owner, res):
        if not same_result(rows[ci], r):
            k = next(j for j, (x, y) in enumerate(zip(combos[ci], t)) if not _identical(x, y))
            _hazard(vs, _precision_error(node, combos[ci][k], t[k],
                                         repr(rows[ci][1]) if rows[ci][0] else "an error",
                                         repr(r[1]) if r[0] else "an error"))
        if rows[ci][0] and r[0]:
            out.setdefault(rows[ci][1], set()).add(r[1])
    return {y: tuple(sort_values(ms | {y})) for y, ms in out.items()
            if any(not _identical(m, y) for m in ms)}


def _members(vs: ValueSets, node: SOp, values: list) -> list[tuple[int, Any]]:
    """``(index of the value, float it may be held as)`` for the numbers of ``values``."""
    sp = vs.spread.get(node.id, {})
    out = []
    for i, v in enumerate(values):
        if sequence_kind(v) == "num":
            out.extend((i, m) for m in sp.get(v, (v,)))
    return out


def _check_select_spread(sel: Select, vs: ValueSets) -> None:
    """A select comparing values that may be held as several floats: its table must not depend
    on which (else :class:`PrecisionError`)."""
    if sel.op in ("TRUE", "FALSE"):
        return
    wide = [x for x in (sel.keys, sel.queries) if x.id in vs.wide]
    if wide:
        _hazard(vs, PrecisionError(
            f"select '{sel.label}'{_where(sel)} is precision-sensitive: it compares "
            f"'{wide[0].label}', a mean whose float64 sum may round in too many ways to check "
            "at this max_seq_len", sel.span))
        return
    if not (vs.spread.get(sel.keys.id) or vs.spread.get(sel.queries.id)):
        return
    if sel.keys.id not in vs.sets or sel.queries.id not in vs.sets:
        return
    kv, qv = vs.sets[sel.keys.id], vs.sets[sel.queries.id]
    km, qm = _members(vs, sel.keys, kv), _members(vs, sel.queries, qv)
    if not km or not qm:
        return
    if len(km) * len(qm) > 20 * MAX_SPREAD:
        _hazard(vs, PrecisionError(f"select '{sel.label}'{_where(sel)} compares values whose "
                                   "float64 roundings are too many to check", sel.span))
        return
    K = np.asarray([m for _, m in km], dtype=np.float64)
    Q = np.asarray([m for _, m in qm], dtype=np.float64)
    if sel.op == "python":
        f = np.frompyfunc(lambda k, q: bool(sel.predicate(k, q)), 2, 1)
        try:
            table = f(K[None, :], Q[:, None]).astype(bool)
        except _EVAL_ERRORS:
            return            # the interpreter raises: the compiler reports it
    else:
        from ..ops import compare
        table = np.asarray(compare(K[None, :], Q[:, None], sel.op), dtype=bool)
    ki = np.asarray([i for i, _ in km])
    qi = np.asarray([i for i, _ in qm])
    ks = np.flatnonzero(np.r_[True, ki[1:] != ki[:-1]])
    qs = np.flatnonzero(np.r_[True, qi[1:] != qi[:-1]])
    anyt = np.logical_or.reduceat(np.logical_or.reduceat(table, ks, axis=1), qs, axis=0)
    allt = np.logical_and.reduceat(np.logical_and.reduceat(table, ks, axis=1), qs, axis=0)
    bad = np.argwhere(anyt != allt)
    if len(bad):
        a, b = bad[0]
        _hazard(vs, PrecisionError(
            f"select '{sel.label}'{_where(sel)} is precision-sensitive: comparing the keys "
            f"{kv[ki[ks[b]]]!r} and queries {qv[qi[qs[a]]]!r} (exact means, or computed from "
            "them) gives True or False depending on how the interpreter's float64 arithmetic "
            "rounds them; the compiled model cannot follow float64 rounding", sel.span))


def _check_order_spread(node: Aggregate, V: list, sp: dict, vs: ValueSets) -> None:
    """A max / min over values that may be held as other floats: their ranges must not
    overlap (else which one is largest depends on rounding)."""
    spans = sorted((min(sp.get(v, (v,))), max(sp.get(v, (v,))), v) for v in V
                   if sequence_kind(v) == "num")
    for (_, hi, a), (lo, _, b) in zip(spans, spans[1:]):
        if lo <= hi:
            _hazard(vs, PrecisionError(
                f"aggregate '{node.label}'{_where(node)} is precision-sensitive: its values "
                f"{a!r} and {b!r} may be held as floats in either order by the interpreter's "
                "float64 arithmetic, so its max / min depends on rounding", node.span))
            return


def _structure(node: Node, memo: dict) -> tuple:
    """A hashable description of the computation of ``node`` (equal for structurally equal
    programs built as different nodes, e.g. two calls of ``frac_prevs``)."""
    if node.id in memo:
        return memo[node.id]
    if isinstance(node, Select):
        local = (node.op, node.causal)
    elif isinstance(node, Tokens):
        local = (node.conversion,)
    elif isinstance(node, Full):
        local = (type(node.value).__name__, repr(node.value))
    elif isinstance(node, (Map, SequenceMap)):
        local = node.fn.key()
    elif isinstance(node, Aggregate):
        local = (node.reduction, repr(node.default), node.truncate)
    else:
        local = ()
    out = (type(node).__name__, local, tuple(_structure(c, memo) for c in node.children))
    memo[node.id] = out
    return out


def _dependent_means(node: SequenceMap, vs: ValueSets, n: int) -> list | None:
    """``a + b`` / ``a - b`` of two means over the same selector (``opens - closes`` of
    ``pair_balance``): one mean over that selector of the elementwise ``va +- vb``, whose values
    are computed from the values of the one s-op both ``va`` and ``vb`` are maps of. Exact
    where the independent product would be (the product of the two mean sets), and far
    smaller: 2,521 values for ``pair_balance`` at length 64, not ~1.6 million. None when the
    rule does not apply."""
    fn = node.fn
    if fn.op not in ("add", "sub") or fn.const_side is not None or len(node.inputs) != 2:
        return None
    (a, sa), (b, sb) = _unit_scaled(node.inputs[0]), _unit_scaled(node.inputs[1])
    if not (isinstance(a, Aggregate) and isinstance(b, Aggregate)):
        return None
    # sa * a +- sb * b == sa * (a + sign * b): negating a float is exact, so the interpreter's
    # float of ``-1 * a - b`` is exactly minus its float of ``a + b`` (Tracr's
    # ``LinearSequenceMap(opens, closes, 1, -1)`` arrives as ``1 * opens + -1 * closes``)
    sign = (1 if fn.op == "add" else -1) * sa * sb
    if a.reduction != "mean" or b.reduction != "mean" or a.truncate or b.truncate:
        return None
    da, db = _py(a.default), _py(b.default)
    if not (_is_number(da) and _is_number(db)):
        return None
    memo: dict = {}
    if _structure(a.selector, memo) != _structure(b.selector, memo):
        return None
    chain_a, chain_b = _map_chain(a.values), _map_chain(b.values)
    keys_b = {_structure(x, memo): i for i, x in enumerate(chain_b)}
    common = next(((i, keys_b[_structure(x, memo)]) for i, x in enumerate(chain_a)
                   if i > 0 and keys_b.get(_structure(x, memo), 0) > 0), None)
    if common is None:
        return None
    ia, ib = common
    src = chain_a[ia]
    if src.id in vs.unbounded or a.id in vs.unbounded or b.id in vs.unbounded:
        return None
    base = vs.sets[src.id]
    ra = _apply_chain(chain_a[:ia], base)
    rb = _apply_chain(chain_b[:ib], base)
    if ra is None or rb is None:
        return None
    if not all(_is_number(x) for _, x in ra + rb):
        return None
    diffs = sort_values(_num(x) + sign * _num(y) for (_, x), (_, y) in zip(ra, rb))
    try:
        out = mean_values(diffs, n)
    except ValueSetError:
        return None
    if vs.float_spreads and _structure(a, memo) == _structure(b, memo):
        # one mean computed twice (the same values, selector and default): the interpreter's
        # two floats are equal, so a - b is exactly 0 and a + b exactly twice the mean
        if sign < 0:
            spread = {}
        else:
            try:
                one = float_mean_spread([x for _, x in ra], n)
            except ValueSetError:
                return None
            spread = {2 * k: tuple(2 * m for m in ms) for k, ms in one.items()}
        if spread:
            vs.spread[node.id] = _negated(spread) if sa < 0 else spread
    elif vs.float_spreads:
        spread = _dependent_spread([(_num(x), _num(y)) for (_, x), (_, y) in zip(ra, rb)],
                                   sign, n)
        if spread is None:
            return None
        if spread:
            vs.spread[node.id] = _negated(spread) if sa < 0 else spread
    if not selects_at_least_one(a.selector):
        out.append(_num(da) + sign * _num(db))
    if sa < 0:
        out = sort_values(-v for v in out)
    # the two means' own sets must have been within reach (the interpreter's float rounding of
    # each mean differs from the mean of the differences by an ulp: ``float_spreads`` lists
    # those floats, :func:`_dependent_spread`)
    return out


def _dependent_spread(pairs: list, sign: int, n: int) -> dict | None:
    """The floats ``fl(fl(Sa / k) + sign * fl(Sb / k))`` the interpreter computes for ``a +- b``
    of two dependent means, per exact value ``(Sa + sign * Sb) / k``, from the joint sums of
    every multiset of the ``(a, b)`` value pairs: ``{value: floats}`` where they differ. None
    when a mean's own sums may round or the joint sums are too many."""
    fa = [Fraction(a) for a, _ in pairs]
    fb = [Fraction(b) for _, b in pairs]
    if not fa:
        return {}
    Da, Db = 2 ** _grid_exp(fa), 2 ** _grid_exp(fb)
    Ma, Mb = max(abs(x) for x in fa), max(abs(x) for x in fb)
    if (Ma + Mb + 1) * n * Da * Db > 2 ** 52:
        return None
    base = sorted({(int(x * Da), int(y * Db)) for x, y in zip(fa, fb)})
    level = set(base)
    out: dict[Any, set] = {}
    for k in range(1, n + 1):
        if k > 1:
            level = {(x + p, y + q) for x, y in level for p, q in base}
            if len(level) > MAX_VALUE_SET:
                return None
        arr = np.asarray(sorted(level), dtype=np.int64).reshape(-1, 2)
        SA, SB = arr[:, 0], arr[:, 1]
        ma = SA.astype(np.float64) / float(Da * k)
        mb = SB.astype(np.float64) / float(Db * k)
        got = ma + mb if sign > 0 else ma - mb
        num = SA * Db + sign * SB * Da
        den = Da * Db * k
        exact = num.astype(np.float64) / float(den)      # correctly rounded: |num|, den < 2^53
        for i in np.flatnonzero(got != exact).tolist():
            r = Fraction(int(num[i]), den)
            out.setdefault(_frac_out(r), set()).add(float(got[i]))
        if sum(len(v) for v in out.values()) > MAX_SPREAD:
            return None
    return {c: tuple(sorted(ms | {float(c)})) for c, ms in out.items()}


def _unit_scaled(sop: SOp) -> tuple[SOp, int]:
    """``(x, s)`` with ``sop`` computing ``s * x`` exactly, ``s`` = +-1: ``x * 1``, ``1 * x``,
    ``x * -1``, ``-1 * x``, ``-x``, ``+x`` (nested); ``(sop, 1)`` otherwise."""
    s = 1
    while isinstance(sop, Map):
        fn = sop.fn
        if fn.op in ("neg", "pos"):
            s *= -1 if fn.op == "neg" else 1
        elif (fn.op == "mul" and fn.const_side in ("left", "right")
              and type(fn.const) is int and fn.const in (1, -1)):
            s *= fn.const
        else:
            break
        sop = sop.inner
    return sop, s


def _negated(spread: dict) -> dict:
    return {-k: tuple(-m for m in ms) for k, ms in spread.items()}


def _map_chain(sop: SOp) -> list:
    """``[sop, its inner s-op, ...]`` down a chain of one-input maps (``indicator(tokens ==
    "(")`` -> the indicator map, the comparison map, ``tokens``)."""
    out = [sop]
    while isinstance(out[-1], Map) and len(out) <= 64:
        out.append(out[-1].inner)
    return out


def _apply_chain(maps: list, base: list) -> list | None:
    """``[(True, value)]`` of the maps ``maps`` (outermost first) applied to every value of
    ``base``, in order; None when one fails on some value."""
    rows = [(True, v) for v in base]
    for m in reversed(maps):
        rows = apply_elementwise_table(_elementwise_fn(m.fn), [[v for _, v in rows]])
        if not all(ok for ok, _ in rows):
            return None
    return rows


def _num(v):
    return int(v) if isinstance(v, (bool, np.bool_)) else v


def _aggregate_values(node: Aggregate, vs: ValueSets, n: int) -> list:
    default = _py(node.default)
    empty = not selects_at_least_one(node.selector)
    if node.values.id in vs.unbounded:
        if node.reduction == "mean" and not node.truncate and _is_number(default):
            raise _Unbounded(f"it averages '{node.values.label}', whose value set is too large "
                             "to enumerate")
        raise ValueSetError(f"aggregate '{node.label}'{_where(node)} needs the individual "
                            f"values of '{node.values.label}', whose value set is too large "
                            f"to enumerate (more than {MAX_VALUE_SET:,})", node.span)
    V = vs.sets[node.values.id]
    sp_in = vs.spread.get(node.values.id, {})
    out: list = [default] if empty else []
    if node.values.id in vs.wide:
        vs.wide.add(node.id)
        if node.reduction != "mean" or node.truncate:
            _hazard(vs, PrecisionError(
                f"aggregate '{node.label}'{_where(node)} is precision-sensitive: its "
                f"{'truncation' if node.truncate else node.reduction} reads "
                f"'{node.values.label}', a mean whose float64 sum may round in too many ways "
                "to check at this max_seq_len", node.span))
    if node.reduction in ("max", "min"):
        if empty and isinstance(default, (bool, np.bool_)) and V and all(
                _is_number(v) and not isinstance(v, (bool, np.bool_)) for v in V):
            # the interpreter fills empty rows of a max / min over numbers with the default in
            # their array: False / True become 0 / 1 (0.0 / 1.0 among floats)
            out[0] = float(default) if any(isinstance(v, float) for v in V) else int(default)
        out.extend(V)
        if sp_in:
            _check_order_spread(node, V, sp_in, vs)
            vs.spread[node.id] = dict(sp_in)
        return out
    strs = [v for v in V if isinstance(v, str)]
    # None is a value like any other (issue 38): a None default is the value of an empty row
    # (above); a None among the values moves when one key is selected (the interpreter raises
    # when it is among several, as for a string). Numbers average whatever the default is: the
    # interpreter computes the mean of a None-default aggregate as with any other default.
    nums = [v for v in V if not isinstance(v, str) and v is not None]
    moves = selects_at_most_one(node.selector, vs.sets)
    single = moves or len(V) <= 1 or selects_equal_values(node.selector, node.values)
    spread: dict = {}
    # strings move (a mean of several raises in the interpreter); numbers move or average
    out.extend(strs)
    if any(v is None for v in V):
        out.append(None)
    if nums:
        bools = all(isinstance(v, (bool, np.bool_)) for v in nums)
        if empty and isinstance(default, (bool, np.bool_)) and not (bools and single):
            # a mean of numbers gives an empty row float(default): 0 / 1, not a bool
            out[0] = int(default)
        if single:
            if bools and not isinstance(default, (bool, np.bool_)) and default is not None:
                # the interpreter returns a moved bool with a non-bool default as 0/1 ints
                nums = [int(v) for v in nums]
            out.extend(nums)
            if vs.float_spreads and moves:
                spread = {v: sp_in[v] for v in nums if v in sp_in}
            elif vs.float_spreads:      # a mean of equal values: k copies summed, then / k
                for v in nums:
                    spread.update(_spread_or_wide(node, [v], n, sp_in, vs))
        else:
            try:
                means = mean_values(nums, n)
            except ValueSetError as e:
                raise _Unbounded(e.message) from None
            out.extend(means)
            if vs.float_spreads:
                spread = _spread_or_wide(node, nums, n, sp_in, vs)
    if vs.float_spreads and not single:
        out, spread = _merge_close(out, spread)
    if node.truncate:
        vs.means[node.id] = sort_values(out)
        if spread:
            vs.means_spread[node.id] = spread
            for v, ms in spread.items():
                outs = {int(math.trunc(m)) for m in ms}
                if len(outs) > 1:
                    lo, hi = min(ms), max(ms)
                    _hazard(vs, _precision_error(node, v, lo if math.trunc(lo) != math.trunc(v)
                                                 else hi, min(outs), max(outs)))
            spread = {}
        out = [v if isinstance(v, str) or v is None else int(math.trunc(v)) for v in out]
    if spread:
        vs.spread[node.id] = spread
    _check_size(node, len(set(map(repr, out))))
    return out


def simplest_float(lo: float, hi: float, tol: float = SPREAD_TOL,
                   max_denominator: int = 10 ** 9) -> float | None:
    """The float of the simplest rational within ``tol`` (relative to ``max(1, |x|)``) of
    ``lo..hi``: the first continued-fraction convergent of their middle in that range,
    denominator at most ``max_denominator`` (1 for ``0.9999999999999999..1``, 7/6 for
    ``1.1666666666666665..1.1666666666666667``); None when there is none."""
    tol = tol * max(1.0, abs(lo), abs(hi))
    mid = (lo + hi) / 2.0
    if not math.isfinite(mid):
        return None
    p, q = mid.as_integer_ratio()
    h0, h1, k0, k1 = 0, 1, 1, 0
    while q:
        a = p // q
        h0, h1, k0, k1 = h1, a * h1 + h0, k1, a * k1 + k0
        if k1 > max_denominator:
            break
        x = h1 / k1                      # correctly rounded
        if lo - tol <= x <= hi + tol:
            return x
        p, q = q, p - a * q
    return None


def _merge_close(values: list, spread: dict) -> tuple[list, dict]:
    """Numbers of a mean's set that are one value for a model (within :data:`SPREAD_TOL`, or
    whose spreads meet) become one: the one nearest their simplest rational, whose spread
    holds the others and their floats (``0.5`` and ``0.49999999999999994``, the exact means
    of ``{0.5, 0.5}`` and of ``{0.3, 0.6, 0.6}`` as floats)."""
    nums = sorted({v for v in values if sequence_kind(v) == "num"}, key=float)
    if len(nums) < 2:
        return values, spread
    groups: list[list] = []
    hi = -math.inf
    for v in nums:
        ms = spread.get(v, (v,))
        lo = min(float(m) for m in ms)
        if groups and lo - hi <= SPREAD_TOL * max(1.0, abs(lo)):
            groups[-1].append(v)
        else:
            groups.append([v])
        hi = max(hi, max(float(m) for m in ms)) if len(groups[-1]) > 1 else \
            max(float(m) for m in ms)
    if all(len(g) == 1 for g in groups):
        return values, spread
    spread = dict(spread)
    drop: set = set()
    for g in groups:
        if len(g) == 1:
            continue
        s = simplest_float(float(g[0]), float(g[-1]))
        keep = min(g, key=lambda v: (abs(float(v) - s) if s is not None else 0,
                                     not isinstance(v, int), float(v)))
        members = {float(m) for v in g for m in spread.get(v, (v,))} | {float(v) for v in g}
        for v in g:
            spread.pop(v, None)
            if not _identical(v, keep):
                drop.add(v)
        spread[keep] = tuple(sorted(members))
    return [v for v in values if sequence_kind(v) != "num" or v not in drop], spread


def _spread_or_wide(node: Aggregate, nums: list, n: int, sp_in: dict, vs: ValueSets) -> dict:
    """:func:`float_mean_spread` of a mean; a mean whose roundings are too many to enumerate
    is recorded in ``vs.wide`` (only continuous consumers may read it)."""
    if node.id in vs.wide:
        return {}
    try:
        return float_mean_spread(nums, n, {v: sp_in[v] for v in nums if v in sp_in})
    except ValueSetError:
        vs.wide.add(node.id)
        return {}
