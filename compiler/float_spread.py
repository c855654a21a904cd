"""Float spreads: the float64 roundings the interpreter may hold for each value of an s-op's
value set, as a product domain over the value-set domain (stage 1 of the compiler, with
:mod:`compiler.basis_inference`).

The compiled model computes a mean exactly; the interpreter sums the selected values in float64
(in an order NumPy chooses: it depends on the CPU) and divides once, so one exact mean may be
several floats. A consumer that can tell those floats apart (``round``, ``trunc``, ``%``, a
comparison, a max / min) would then differ between the interpreter and the model: the
compiler refuses it (:class:`PrecisionError`, or records it in ``hazards`` when its
verification gate is exhaustive).

:class:`FloatSpreadDomain` is the product of the value-set domain
(:class:`rasp.analyses.value_sets.ValueSetDomain`) and the spreads: each of its rules calls the
value rule (``super()``) for the values and adds the spreads of those values, over the same
one traversal (:func:`rasp.analyses.value_sets.analyse`). Only the compiler uses it.

Public API: :func:`float_spread_pass` -> :class:`FloatSpreads`; :func:`float_mean_spread`,
:func:`same_result`, :func:`simplest_float`, :data:`SPREAD_TOL`, :data:`MAX_SPREAD`,
:class:`PrecisionError`.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any, Callable, Iterable

import numpy as np

from rasp.analyses.value_sets import (EVAL_ERRORS, MAX_VALUE_SET, Dependent, Outcome,
                                      ValueSetDomain, ValueSetError, ValueSets, analyse,
                                      apply_elementwise_table, as_python, exact_value,
                                      same_kind_equal, sequence_kind, sort_values, where)
from rasp.ir import Aggregate, Map, Node, Select, SequenceMap, SOp
from rasp.ops import compare

__all__ = ["float_spread_pass", "FloatSpreads", "FloatSpreadDomain", "PrecisionError",
           "float_mean_spread", "same_result", "simplest_float", "SPREAD_TOL", "MAX_SPREAD"]


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
        v = as_python(v)
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
        if any(not same_kind_equal(m, c) for m in ms):
            res[c] = tuple(sorted(ms | {float(c)}))
    return res


def _add_member(out: dict, total: list, r: Fraction, members) -> None:
    c = exact_value(r)
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


class FloatSpreads(ValueSets):
    """The value sets (:class:`~rasp.analyses.value_sets.ValueSets`) with their float spreads.

    Attributes (beyond the value sets'):
        spread: ``{node.id: {value: sorted tuple of floats}}``: for a value of the set that
            stands for an exact value the interpreter may hold as other floats (a mean whose
            float64 sum may round, and what is computed from it), every float it may hold
            instead (the value itself included). Values absent from the dict are exact.
        means_spread: the same for the untruncated means of a truncating (``kqv``)
            aggregate (keys: its ``means``).
        wide: ids of s-ops whose spreads are too many floats to enumerate (a mean of
            non-dyadic floats at a long ``max_seq_len``, and what is computed from it): only
            continuous consumers (``+ - *``, division by a constant, the output) may read
            them; any other is precision-sensitive.
        hazards: the messages of the precision-sensitive operations found, in program order,
            when the caller collects them (None: each is raised).
    """

    def __init__(self, hazards: list[str] | None = None):
        super().__init__()
        self.spread: dict[int, dict] = {}
        self.means_spread: dict[int, dict] = {}
        self.wide: set[int] = set()
        self.hazards = hazards


class FloatSpreadDomain(ValueSetDomain):
    """The product domain: values (each rule of the value-set domain, called through
    ``super()``) and their float spreads (added here), in a :class:`FloatSpreads`."""

    def __init__(self, vocab: Iterable[Any], max_seq_len: int,
                 accept_unbounded: Callable[[SOp], bool] | None = None,
                 hazards: list[str] | None = None):
        super().__init__(vocab, max_seq_len, accept_unbounded, FloatSpreads(hazards))
        #: the spreads of the aggregate being computed (filled by join, read by truncated)
        self._spread: dict = {}

    def select(self, sel: Node) -> None:
        """A select comparing values that may be held as several floats: its table must not
        depend on which."""
        if isinstance(sel, Select):
            _check_select_spread(sel, self.vs)

    def accept_dependent(self, node: SequenceMap, dep: Dependent) -> bool:
        """The spreads of ``a +- b`` of two dependent means; declines the rule (the general
        map rule then applies) when they cannot be enumerated."""
        if dep.same:
            # one mean computed twice (the same values, selector and default): the
            # interpreter's two floats are equal, so a - b is exactly 0 and a + b exactly twice
            # the mean
            if dep.sign < 0:
                spread = {}
            else:
                try:
                    one = float_mean_spread(dep.a_values, self.n)
                except ValueSetError:
                    return False
                spread = {2 * k: tuple(2 * m for m in ms) for k, ms in one.items()}
        else:
            spread = _dependent_spread(dep.pairs, dep.sign, self.n)
            if spread is None:
                return False
        if spread:
            self.vs.spread[node.id] = _negated(spread) if dep.negated else spread
        return True

    def map_outputs(self, node: Map | SequenceMap, inputs: list, combos: list,
                    rows: list) -> list:
        """The map's values, and their spreads: the map applied to every float its inputs'
        values may be held as (refused where the results differ)."""
        outs = super().map_outputs(node, inputs, combos, rows)
        vs = self.vs
        wide = [x for x in inputs if x.id in vs.wide]
        if wide:
            if not _continuous(node):
                _hazard(vs, PrecisionError(
                    f"{node.kind} '{node.label}'{where(node)} is precision-sensitive: it needs "
                    f"the values of '{wide[0].label}', a mean (or computed from one) whose "
                    "float64 sum may round in too many ways to check at this max_seq_len (its "
                    "result could depend on the rounding); average exact values (e.g. "
                    "integers) or compile for a shorter max_seq_len", node.span))
            vs.wide.add(node.id)
            return outs
        spreads = [vs.spread.get(x.id) for x in inputs]
        if any(spreads):
            sp = _map_spread(node, combos, rows, spreads, vs)
            if sp:
                vs.spread[node.id] = sp
        return outs

    def aggregate(self, node: Aggregate) -> list:
        """The aggregate's values (the value rule) and their spreads (:meth:`join`)."""
        vs = self.vs
        if node.values.id in vs.wide and node.values.id not in vs.unbounded:
            vs.wide.add(node.id)
            if node.reduction != "mean" or node.truncate:
                _hazard(vs, PrecisionError(
                    f"aggregate '{node.label}'{where(node)} is precision-sensitive: its "
                    f"{'truncation' if node.truncate else node.reduction} reads "
                    f"'{node.values.label}', a mean whose float64 sum may round in too many "
                    "ways to check at this max_seq_len", node.span))
        self._spread = {}
        out = super().aggregate(node)
        if self._spread:
            vs.spread[node.id] = self._spread
        return out

    def join(self, node: Aggregate, outcomes: list[Outcome]) -> list:
        """The union of the outcomes' values, and their spreads: a max / min keeps its
        inputs' (refused when two may swap order), a moved value its own, a mean the floats
        of every summation order (:func:`float_mean_spread`); the numbers of a mean that are
        one value for a model are merged (:func:`_merge_close`)."""
        out = super().join(node, outcomes)
        vs, n = self.vs, self.n
        sp_in = vs.spread.get(node.values.id, {})
        spread: dict = {}
        for o in outcomes:
            if o.kind == "order" and sp_in:
                _check_order_spread(node, o.values, sp_in, vs)
                spread = dict(sp_in)
            elif o.kind == "moved":
                spread.update({v: sp_in[v] for v in o.values if v in sp_in})
            elif o.kind == "same":      # a mean of equal values: k copies summed, then / k
                for v in o.values:
                    spread.update(_spread_or_wide(node, [v], n, sp_in, vs))
            elif o.kind == "mean":
                spread.update(_spread_or_wide(node, o.inputs, n, sp_in, vs))
        if any(o.kind == "mean" for o in outcomes):
            out, spread = _merge_close(out, spread)
        self._spread = spread
        return out

    def truncated(self, node: Aggregate, means: list) -> None:
        """A truncating aggregate: its means' spreads (``means_spread``) must truncate to one
        integer each."""
        spread, self._spread = self._spread, {}
        if not spread:
            return
        self.vs.means_spread[node.id] = spread
        for v, ms in spread.items():
            outs = {int(math.trunc(m)) for m in ms}
            if len(outs) > 1:
                lo, hi = min(ms), max(ms)
                _hazard(self.vs, _precision_error(node, v, lo if math.trunc(lo) != math.trunc(v)
                                                  else hi, min(outs), max(outs)))


def float_spread_pass(sop: SOp, vocab: Iterable[Any], max_seq_len: int, causal: bool = False,
                      accept_unbounded: Callable[[SOp], bool] | None = None,
                      hazards: list[str] | None = None) -> FloatSpreads:
    """The value sets of the program rooted at ``sop`` with their float spreads (one
    traversal over :class:`FloatSpreadDomain`).

    Args:
        sop, vocab, max_seq_len, causal, accept_unbounded: as
            :func:`rasp.analyses.value_sets.value_set_pass`.
        hazards: a list that collects the precision-sensitive operations' messages instead of
            raising (the compiler, when its verification gate is exhaustive: the gate then
            decides on every input); their results' spreads hold every result.

    Raises:
        ValueSetError: as :func:`~rasp.analyses.value_sets.value_set_pass`.
        PrecisionError: a map, comparison, max / min or truncation whose result depends on how
            float64 rounds a mean (without ``hazards``).
    """
    return analyse(sop, FloatSpreadDomain(vocab, max_seq_len, accept_unbounded, hazards)).vs


def _continuous(node: SOp) -> bool:
    """Whether a map is continuous in its numerical inputs (``+``, ``-``, ``*``, unary
    ``-``/``+``, division by a constant): a value near another gives a result near its."""
    op, side = node.fn.op, node.fn.const_side
    return op in ("add", "sub", "mul", "neg", "pos") or (op == "div" and side == "right")


def _precision_error(node: Node, value, member, a, b) -> PrecisionError:
    return PrecisionError(
        f"{node.kind} '{node.label}'{where(node)} is precision-sensitive: the interpreter may "
        f"hold the value {value!r} (an exact mean, or computed from one) as the float "
        f"{member!r}, and the result then differs ({a} vs {b}); the compiled model "
        "computes means exactly and cannot follow float64 rounding (average exact values, "
        "e.g. integers, or compare with a margin)", node.span)


def _hazard(vs: FloatSpreads, err: PrecisionError) -> None:
    """Raise ``err``, or record it in ``vs.hazards`` when the caller collects them."""
    if vs.hazards is None:
        raise err
    vs.hazards.append(err.message)


def _map_spread(node: SOp, combos: list, rows: list, spreads: list, vs: FloatSpreads) -> dict:
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
                f"{node.kind} '{node.label}'{where(node)} reads values whose float64 roundings "
                f"are too many to check (more than {MAX_SPREAD:,})", node.span))
            return {}
        for t in itertools.product(*choices):
            for j, x in enumerate(t):
                cols[j].append(x)
            owner.append((ci, t))
    res = apply_elementwise_table(node.fn.apply, cols) if owner else []
    out: dict[Any, set] = {}
    for (ci, t), r in zip(owner, res):
        if not same_result(rows[ci], r):
            k = next(j for j, (x, y) in enumerate(zip(combos[ci], t)) if not same_kind_equal(x, y))
            _hazard(vs, _precision_error(node, combos[ci][k], t[k],
                                         repr(rows[ci][1]) if rows[ci][0] else "an error",
                                         repr(r[1]) if r[0] else "an error"))
        if rows[ci][0] and r[0]:
            out.setdefault(rows[ci][1], set()).add(r[1])
    return {y: tuple(sort_values(ms | {y})) for y, ms in out.items()
            if any(not same_kind_equal(m, y) for m in ms)}


def _members(vs: FloatSpreads, node: SOp, values: list) -> list[tuple[int, Any]]:
    """``(index of the value, float it may be held as)`` for the numbers of ``values``."""
    sp = vs.spread.get(node.id, {})
    out = []
    for i, v in enumerate(values):
        if sequence_kind(v) == "num":
            out.extend((i, m) for m in sp.get(v, (v,)))
    return out


def _check_select_spread(sel: Select, vs: FloatSpreads) -> None:
    """A select comparing values that may be held as several floats: its table must not depend
    on which (else :class:`PrecisionError`)."""
    if sel.op in ("TRUE", "FALSE"):
        return
    wide = [x for x in (sel.keys, sel.queries) if x.id in vs.wide]
    if wide:
        _hazard(vs, PrecisionError(
            f"select '{sel.label}'{where(sel)} is precision-sensitive: it compares "
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
        _hazard(vs, PrecisionError(f"select '{sel.label}'{where(sel)} compares values whose "
                                   "float64 roundings are too many to check", sel.span))
        return
    K = np.asarray([m for _, m in km], dtype=np.float64)
    Q = np.asarray([m for _, m in qm], dtype=np.float64)
    if sel.op == "python":
        f = np.frompyfunc(lambda k, q: bool(sel.predicate(k, q)), 2, 1)
        try:
            table = f(K[None, :], Q[:, None]).astype(bool)
        except EVAL_ERRORS:
            return            # the interpreter raises: the compiler reports it
    else:
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
            f"select '{sel.label}'{where(sel)} is precision-sensitive: comparing the keys "
            f"{kv[ki[ks[b]]]!r} and queries {qv[qi[qs[a]]]!r} (exact means, or computed from "
            "them) gives True or False depending on how the interpreter's float64 arithmetic "
            "rounds them; the compiled model cannot follow float64 rounding", sel.span))


def _check_order_spread(node: Aggregate, V: list, sp: dict, vs: FloatSpreads) -> None:
    """A max / min over values that may be held as other floats: their ranges must not
    overlap (else which one is largest depends on rounding)."""
    spans = sorted((min(sp.get(v, (v,))), max(sp.get(v, (v,))), v) for v in V
                   if sequence_kind(v) == "num")
    for (_, hi, a), (lo, _, b) in zip(spans, spans[1:]):
        if lo <= hi:
            _hazard(vs, PrecisionError(
                f"aggregate '{node.label}'{where(node)} is precision-sensitive: its values "
                f"{a!r} and {b!r} may be held as floats in either order by the interpreter's "
                "float64 arithmetic, so its max / min depends on rounding", node.span))
            return


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
            out.setdefault(exact_value(r), set()).add(float(got[i]))
        if sum(len(v) for v in out.values()) > MAX_SPREAD:
            return None
    return {c: tuple(sorted(ms | {float(c)})) for c, ms in out.items()}


def _negated(spread: dict) -> dict:
    return {-k: tuple(-m for m in ms) for k, ms in spread.items()}


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
            if not same_kind_equal(v, keep):
                drop.add(v)
        spread[keep] = tuple(sorted(members))
    return [v for v in values if sequence_kind(v) != "num" or v not in drop], spread


def _spread_or_wide(node: Aggregate, nums: list, n: int, sp_in: dict, vs: FloatSpreads) -> dict:
    """:func:`float_mean_spread` of a mean; a mean whose roundings are too many to enumerate
    is recorded in ``vs.wide`` (only continuous consumers may read it)."""
    if node.id in vs.wide:
        return {}
    try:
        return float_mean_spread(nums, n, {v: sp_in[v] for v in nums if v in sp_in})
    except ValueSetError:
        vs.wide.add(node.id)
        return {}
