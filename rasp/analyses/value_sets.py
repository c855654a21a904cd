"""Value-set inference: the finite set of values each s-op can take, as one abstract
interpretation of the IR.

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

The analysis is one traversal (:func:`analyse`: the program's nodes once, in topological order)
over a *domain*: the rules of one abstract value per s-op, one rule per kind of operation
(:class:`ValueSetDomain`: ``leaf``, ``map``, ``sequence_map``, ``aggregate``,
``selector_width``, the ``join`` of an aggregate's outcomes, and ``select`` for selectors, which
carry no value). The compiler's float-spread domain (``compiler/float_spread.py``: the float64
roundings the interpreter may hold for each value) is a product over this one: a subclass whose
every rule calls the value rule here and adds its component.

Public API:

* :func:`infer_value_sets(sop, vocab, max_seq_len, causal=False, input_conversion=None)
  <infer_value_sets>` -> ``dict[node_id, frozenset]`` (s-ops only);
  :func:`value_set_pass` -> :class:`ValueSets` (also unbounded s-ops, truncated means, maps
  that fail on some values).
* the traversal and the domain: :func:`analyse`, :class:`ValueSetDomain`, :class:`Outcome`,
  :class:`Dependent`.
* helpers used by the compiler: :func:`apply_elementwise_table`, :func:`mean_values`,
  :func:`token_values`, :func:`selects_at_most_one`, :func:`selects_at_least_one`.
* :class:`ValueSetError` when a set cannot be decided or would be too large.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..interpreter import convert_tokens, to_batch
from ..ir import (Aggregate, Full, Indices, Length, Map, Node, RASPError, Select, SelectorAnd,
                  SelectorOr, SelectorWidth, SequenceMap, SOp, Tokens,
                  topological_order)
from ..ops import compare, homogeneous_array

__all__ = ["ValueSetError", "ValueSets", "infer_value_sets", "value_set_pass", "analyse",
           "ValueSetDomain", "Outcome", "Dependent", "Unbounded",
           "apply_elementwise_table", "mean_values", "token_values", "selects_at_most_one",
           "selects_at_least_one", "selects_equal_values", "sequence_kind", "kind_groups",
           "values_array", "MAX_VALUE_SET", "sort_values", "as_python", "exact_value",
           "same_kind_equal", "where", "EVAL_ERRORS"]


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


def as_python(v: Any) -> Any:
    """A NumPy scalar as the equivalent Python scalar."""
    if isinstance(v, np.generic):
        return v.item()
    return v


def token_values(vocab: Iterable[Any], conversion: str) -> list:
    """The values of ``tokens_<conversion>`` for input tokens drawn from ``vocab``.

    Uses the interpreter's conversion, so ``tokens_int`` of ``"3"`` is ``3``; raises
    :class:`ValueSetError` when a vocabulary item cannot be converted."""
    vocab = list(vocab)
    if not vocab:
        raise ValueSetError("empty vocabulary")
    try:
        arr = to_batch([list(vocab)])
        conv = convert_tokens(arr, conversion)
    except RASPError as e:
        raise ValueSetError(f"cannot convert the vocabulary for tokens_{conversion}: "
                            f"{e.message}") from None
    return sort_values(as_python(v) for v in conv.reshape(-1).tolist())


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
    vals = [as_python(v) for v in vals]
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
EVAL_ERRORS = (Exception,)


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
    cols = [[as_python(c) for c in col] for col in columns]
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
                    res[i] = (True, as_python(v))
                continue
        except EVAL_ERRORS:
            pass
        for j, i in enumerate(rows):
            try:
                with np.errstate(all="ignore"):
                    o = np.asarray(fn(*[a[:, j:j + 1] for a in arrays])).reshape(-1)
                res[i] = (True, as_python(o[0]))
            except EVAL_ERRORS as e:
                res[i] = (False, (e.message if isinstance(e, RASPError) else str(e))
                          or type(e).__name__)
    return res


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
        v = as_python(v)
        if isinstance(v, str):
            raise ValueSetError(f"cannot average string values ({v!r})")
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueSetError(f"cannot average the non-finite value {v!r}")
        vals.append(Fraction(v) if not isinstance(v, bool) else Fraction(int(v)))
    vals = sorted(set(vals))
    if not vals:
        return []
    if len(vals) == 1:
        return [exact_value(vals[0])]
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
    out = [exact_value(Fraction(int(pp), int(qq))) for pp, qq in zip(p.tolist(), q.tolist())]
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
    return sort_values(exact_value(x) for x in means)


def exact_value(f: Fraction):
    """An exact rational as the interpreter holds it: an int when integral, else the
    correctly rounded float."""
    if f.denominator == 1:
        return int(f)
    return f.numerator / f.denominator


def same_kind_equal(x: Any, y: Any) -> bool:
    """Equal values of one kind (an int and the equal float count as one)."""
    return sequence_kind(x) == sequence_kind(y) and x == y


def _keys_injective(node: SOp, sets: dict[int, frozenset] | None, depth: int = 0) -> bool:
    """Whether ``node`` takes distinct values (numbers as float64) at distinct positions:
    ``indices``; a (sequence) map whose value determines an input that does, checked on the
    value sets (Tracr's ``make_sort`` keys ``x + i / 8``); the rank ``selector_width(select(k,
    k, <))`` (or ``> <= >=``, non-causal) of such numbers or strings (distinct ranks)."""
    if isinstance(node, Indices) or sets is None or depth > 64:
        return isinstance(node, Indices)
    if isinstance(node, (Map, SequenceMap)):
        ins = [node.inner] if isinstance(node, Map) else list(node.inputs)
        if any(x.id not in sets for x in ins) or math.prod(
                len(sets[x.id]) for x in ins) > _AT_MOST_ONE_PAIRS:
            return False
        combos = list(itertools.product(*[sorted(sets[x.id], key=repr) for x in ins]))
        rows = apply_elementwise_table(node.fn.apply, [list(c) for c in zip(*combos)])
        return any(_keys_injective(x, sets, depth + 1) and _determines(combos, rows, i)
                   for i, x in enumerate(ins))
    sel = node.selector if isinstance(node, SelectorWidth) else None
    if (isinstance(sel, Select) and not sel.causal and sel.keys is sel.queries
            and sel.op in ("<", ">", "<=", ">=") and sel.keys.id in sets):
        vals = list(sets[sel.keys.id])
        return bool(vals) and (all(_is_number(v) and math.isfinite(float(v)) for v in vals)
                               or all(isinstance(v, str) for v in vals)) and _keys_injective(
            sel.keys, sets, depth + 1)
    return False


def _determines(combos: list, rows: list, i: int) -> bool:
    """Whether the output (``rows``: ``(ok, value)`` per combination) determines input ``i``
    (as the comparisons tell values apart: numbers as float64, NaN never)."""
    def key(v):
        f = float(v) if _is_number(v) else None
        return (type(v).__name__, repr(v)) if f is None else None if f != f else ("n", f)
    seen: dict = {}
    for c, (ok, v) in zip(combos, rows):
        k, x = key(v), key(c[i])
        if ok and (k is None or x is None or seen.setdefault(k, x) != x):
            return False
    return True


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
            table = np.asarray(compare(values_array(K)[None, :], values_array(Q)[:, None],
                                       sel.op), dtype=bool)
    except EVAL_ERRORS:
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


def selects_at_least_one(sel: Node, sets: dict[int, frozenset] | None = None) -> bool:
    """Whether ``sel`` provably selects at least one key per query (``TRUE``, or the same
    s-op as keys and queries with ``==``, ``<=`` or ``>=``: the query's own position; with
    ``sets``, ``==`` between ``indices`` and the rank by ``<`` / ``>`` of keys distinct at
    every position, a permutation of the positions: Tracr's ``make_sort``)."""
    if isinstance(sel, Select):
        for rank, other in ((sel.keys, sel.queries), (sel.queries, sel.keys)):
            if (sel.op == "==" and not sel.causal and isinstance(other, Indices)
                    and isinstance(rank, SelectorWidth) and isinstance(rank.selector, Select)
                    and rank.selector.op in ("<", ">") and _keys_injective(rank, sets)):
                return True
        return sel.op == "TRUE" or (sel.keys is sel.queries and sel.op in ("==", "<=", ">="))
    if isinstance(sel, SelectorOr):
        return selects_at_least_one(sel.a, sets) or selects_at_least_one(sel.b, sets)
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
    """

    def __init__(self):
        self.sets: dict[int, list] = {}
        self.unbounded: set[int] = set()
        self.means: dict[int, list] = {}
        self.errors: dict[int, str] = {}
        self.rounded: set[int] = set()

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
                   accept_unbounded: Callable[[SOp], bool] | None = None) -> ValueSets:
    """Value-set inference over the program rooted at ``sop``, once, in topological order
    (:func:`analyse` over a :class:`ValueSetDomain`).

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

    Raises:
        ValueSetError: naming the operation and its position, when a set would be larger than
            :data:`MAX_VALUE_SET` (estimated before enumerating), a map fails on every
            possible input value, or ``max_seq_len < 1``.
    """
    return analyse(sop, ValueSetDomain(vocab, max_seq_len, accept_unbounded)).vs


def analyse(sop: SOp, domain: "ValueSetDomain") -> "ValueSetDomain":
    """The one traversal: every node reachable from ``sop`` once, in topological order, each
    s-op through the ``domain``'s rule for its kind (``leaf``, ``map``, ``sequence_map``,
    ``aggregate``, ``selector_width``; :meth:`ValueSetDomain.record` stores the result or
    handles a refusal) and each selector through ``domain.select`` (selectors carry no value;
    a domain may check them). Returns ``domain`` (its result: ``domain.vs``).

    Raises:
        ValueSetError: from a rule, or for a node kind without one.
    """
    for node in topological_order(sop):
        if not isinstance(node, SOp):
            domain.select(node)
            continue
        if isinstance(node, (Tokens, Indices, Length, Full)):
            rule = domain.leaf
        elif isinstance(node, SequenceMap):
            rule = domain.sequence_map
        elif isinstance(node, Map):
            rule = domain.map
        elif isinstance(node, SelectorWidth):
            rule = domain.selector_width
        elif isinstance(node, Aggregate):
            rule = domain.aggregate
        else:
            raise ValueSetError(f"no value-set rule for node kind {node.kind}", node.span)
        domain.record(node, rule)
    return domain


def where(node: Node) -> str:
    """`` at line:column`` of ``node`` for a message (empty without a position)."""
    return f" at {node.span.line}:{node.span.column}" if node.span else ""


class Unbounded(Exception):
    """A numerical set too large to enumerate (the caller may accept it as unbounded)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _is_number(v) -> bool:
    return isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating))


@dataclass
class Outcome:
    """One way an aggregate's row gets its value, for :meth:`ValueSetDomain.join`.

    ``kind``: ``"empty"`` (the default of a row that selects nothing), ``"order"`` (a max /
    min: one of the values), ``"moved"`` (the one selected key's value moves), ``"same"`` (a
    mean of equal values), ``"mean"`` (a mean of several values: ``inputs`` are the values
    averaged), ``"other"`` (strings and None, which only move). ``values``: the values it
    gives."""
    kind: str
    values: list
    inputs: list


@dataclass
class Dependent:
    """``a +- b`` of two means over one selector (:meth:`ValueSetDomain.dependent_means`):
    ``values`` (its set), ``a_values`` (the values ``a`` averages), ``pairs`` (the ``(a, b)``
    value pairs averaged together), ``sign`` (+1: ``a + b``, -1: ``a - b``), ``same`` (``a``
    and ``b`` are one computation), ``negated`` (the node computes ``-(a +- b)``)."""
    values: list
    a_values: list
    pairs: list
    sign: int
    same: bool
    negated: bool


class ValueSetDomain:
    """The value-set domain: the abstract value of an s-op is the sorted list of the values it
    may take (in ``self.vs``: a :class:`ValueSets`). One method per rule of :func:`analyse`;
    a product domain subclasses it, calls each rule here for the values and adds its own
    component (``compiler/float_spread.py``)."""

    def __init__(self, vocab: Iterable[Any], max_seq_len: int,
                 accept_unbounded: Callable[[SOp], bool] | None = None,
                 result: ValueSets | None = None):
        if not isinstance(max_seq_len, int) or isinstance(max_seq_len, bool) or max_seq_len < 1:
            raise ValueSetError(f"max_seq_len must be a positive int, got {max_seq_len!r}")
        self.vocab = list(vocab)
        self.n = max_seq_len
        self.accept_unbounded = accept_unbounded
        self.vs = result if result is not None else ValueSets()

    # -- storing a rule's result ------------------------------------------------------------
    def record(self, node: SOp, rule: Callable[[SOp], list]) -> None:
        """Run ``rule`` on ``node`` and store its sorted values; a set too large to enumerate
        is recorded as unbounded where ``accept_unbounded`` accepts it, else refused with the
        node's position."""
        try:
            vals = rule(node)
        except Unbounded as u:
            if self.accept_unbounded is None or not self.accept_unbounded(node):
                raise ValueSetError(f"{node.kind} '{node.label}'"
                                    f"{where(node)}: {u.reason}", node.span) from None
            self.vs.unbounded.add(node.id)
            return
        except ValueSetError as e:
            if e.span is None and node.span is not None:
                raise ValueSetError(f"{node.kind} '{node.label}'{where(node)}: {e.message}",
                                    node.span) from None
            raise
        self.vs.sets[node.id] = sort_values(vals)

    # -- the rules ----------------------------------------------------------------------------
    def select(self, sel: Node) -> None:
        """A selector: no value (a product domain may check its comparison)."""

    def leaf(self, node: SOp) -> list:
        """``tokens`` (the vocabulary converted), ``indices`` ``0..n-1``, ``length``
        ``1..n``, ``full(c)``."""
        if isinstance(node, Tokens):
            return token_values(self.vocab, node.conversion)
        if isinstance(node, Indices):
            return list(range(self.n))
        if isinstance(node, Length):
            return list(range(1, self.n + 1))
        return [as_python(node.value)]

    def sequence_map(self, node: SequenceMap) -> list:
        """A sum or difference of two dependent means (:meth:`dependent_means`), else the
        elementwise rule (:meth:`map`)."""
        dep = self.dependent_means(node)
        if dep is not None and self.accept_dependent(node, dep):
            self.vs.rounded.add(node.id)
            return dep.values
        return self.map(node)

    def accept_dependent(self, node: SequenceMap, dep: Dependent) -> bool:
        """Whether the dependent-means rule is used for ``node`` (always here; a product
        domain may decline it when it cannot follow its own component)."""
        return True

    def map(self, node: Map | SequenceMap) -> list:
        """The function applied to every combination of its inputs' values (the product of
        their sets), per kind of value (:func:`apply_elementwise_table`)."""
        inputs = [node.inner] if isinstance(node, Map) else list(node.inputs)
        unb = [x for x in inputs if x.id in self.vs.unbounded]
        if unb:
            raise Unbounded(f"it needs the individual values of '{unb[0].label}', whose value "
                            f"set is too large to enumerate (more than {MAX_VALUE_SET:,})")
        cols_in = [self.vs.sets[x.id] for x in inputs]
        total = math.prod(len(c) for c in cols_in)
        if total > MAX_VALUE_SET:
            if all(_is_number(v) for c in cols_in for v in c):
                raise Unbounded(f"its inputs' value sets give {total:,} combinations (limit "
                                f"{MAX_VALUE_SET:,})")
            _check_size(node, total, "input table")
        combos = list(itertools.product(*cols_in))
        columns = [[c[i] for c in combos] for i in range(len(inputs))]
        rows = apply_elementwise_table(node.fn.apply, columns)
        return self.map_outputs(node, inputs, combos, rows)

    def map_outputs(self, node: Map | SequenceMap, inputs: list, combos: list,
                    rows: list) -> list:
        """The values of a map from its table (``rows``: one ``(ok, value)`` per combination
        of input values); a map failing on some combination records its message in
        ``errors``, one failing on all is refused."""
        outs = [v for ok, v in rows if ok]
        if not outs and combos:
            raise ValueSetError(f"{node.kind} '{node.label}'{where(node)} fails on every "
                                f"possible input value ({rows[0][1]})", node.span)
        if len(outs) < len(rows):
            self.vs.errors[node.id] = next(v for ok, v in rows if not ok)
        return outs

    def selector_width(self, node: SelectorWidth) -> list:
        """``lo..hi``: 1 when the selector provably selects a key per query, at most 1 when it
        provably selects at most one, else ``0..n``."""
        lo = 1 if selects_at_least_one(node.selector, self.vs.sets) else 0
        hi = 1 if selects_at_most_one(node.selector, self.vs.sets) else self.n
        return list(range(lo, hi + 1))

    def aggregate(self, node: Aggregate) -> list:
        """The :meth:`join` of the ways a row gets its value (:class:`Outcome`): the default
        of an empty row, the values that move, the means of several; then truncation
        (``kqv``: the means kept in ``means``)."""
        vs = self.vs
        default = as_python(node.default)
        empty = not selects_at_least_one(node.selector, vs.sets)
        if node.values.id in vs.unbounded:
            if node.reduction == "mean" and not node.truncate and _is_number(default):
                raise Unbounded(f"it averages '{node.values.label}', whose value set is too "
                                "large to enumerate")
            raise ValueSetError(f"aggregate '{node.label}'{where(node)} needs the individual "
                                f"values of '{node.values.label}', whose value set is too large "
                                f"to enumerate (more than {MAX_VALUE_SET:,})", node.span)
        V = vs.sets[node.values.id]
        if node.reduction in ("max", "min"):
            if empty and isinstance(default, (bool, np.bool_)) and V and all(
                    _is_number(v) and not isinstance(v, (bool, np.bool_)) for v in V):
                # the interpreter fills empty rows of a max / min over numbers with the default
                # in their array: False / True become 0 / 1 (0.0 / 1.0 among floats)
                default = float(default) if any(isinstance(v, float) for v in V) else \
                    int(default)
            parts = [Outcome("empty", [default], [])] if empty else []
            return self.join(node, parts + [Outcome("order", list(V), list(V))])
        strs = [v for v in V if isinstance(v, str)]
        # None is a value like any other (issue 38): a None default is the value of an empty
        # row; a None among the values moves when one key is selected (the interpreter raises
        # when it is among several, as for a string). Numbers average whatever the default is:
        # the interpreter computes the mean of a None-default aggregate as with any other
        # default.
        nums = [v for v in V if not isinstance(v, str) and v is not None]
        moves = selects_at_most_one(node.selector, vs.sets)
        single = moves or len(V) <= 1 or selects_equal_values(node.selector, node.values)
        # strings move (a mean of several raises in the interpreter); numbers move or average
        parts = [Outcome("other", strs + ([None] if any(v is None for v in V) else []), [])]
        if nums:
            bools = all(isinstance(v, (bool, np.bool_)) for v in nums)
            if empty and isinstance(default, (bool, np.bool_)) and not (bools and single):
                # a mean of numbers gives an empty row float(default): 0 / 1, not a bool
                default = int(default)
            if single:
                if bools and not isinstance(default, (bool, np.bool_)) and default is not None:
                    # the interpreter returns a moved bool with a non-bool default as 0/1 ints
                    nums = [int(v) for v in nums]
                parts.append(Outcome("moved" if moves else "same", nums, nums))
            else:
                try:
                    means = mean_values(nums, self.n)
                except ValueSetError as e:
                    raise Unbounded(e.message) from None
                parts.append(Outcome("mean", means, nums))
        out = self.join(node, ([Outcome("empty", [default], [])] if empty else []) + parts)
        if node.truncate:
            vs.means[node.id] = sort_values(out)
            self.truncated(node, out)
            out = [v if isinstance(v, str) or v is None else int(math.trunc(v)) for v in out]
        _check_size(node, len(set(map(repr, out))))
        return out

    def join(self, node: Aggregate, outcomes: list[Outcome]) -> list:
        """The values of an aggregate from its outcomes: their union."""
        return [v for o in outcomes for v in o.values]

    def truncated(self, node: Aggregate, means: list) -> None:
        """A truncating aggregate's means, before truncation (a product domain checks its
        component)."""

    # -- the dependent-means rule ----------------------------------------------------------
    def dependent_means(self, node: SequenceMap) -> Dependent | None:
        """``a + b`` / ``a - b`` of two means over the same selector (``opens - closes`` of
        ``pair_balance``): one mean over that selector of the elementwise ``va +- vb``, whose
        values are computed from the values of the one s-op both ``va`` and ``vb`` are maps
        of. Exact where the independent product would be (the product of the two mean sets),
        and far smaller: 2,521 values for ``pair_balance`` at length 64, not ~1.6 million.
        None when the rule does not apply."""
        vs, n = self.vs, self.n
        fn = node.fn
        if fn.op not in ("add", "sub") or fn.const_side is not None or len(node.inputs) != 2:
            return None
        (a, sa), (b, sb) = _unit_scaled(node.inputs[0]), _unit_scaled(node.inputs[1])
        if not (isinstance(a, Aggregate) and isinstance(b, Aggregate)):
            return None
        # sa * a +- sb * b == sa * (a + sign * b): negating a float is exact, so the
        # interpreter's float of ``-1 * a - b`` is exactly minus its float of ``a + b``
        # (Tracr's ``LinearSequenceMap(opens, closes, 1, -1)`` arrives as
        # ``1 * opens + -1 * closes``)
        sign = (1 if fn.op == "add" else -1) * sa * sb
        if a.reduction != "mean" or b.reduction != "mean" or a.truncate or b.truncate:
            return None
        da, db = as_python(a.default), as_python(b.default)
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
        if not selects_at_least_one(a.selector):
            out.append(_num(da) + sign * _num(db))
        if sa < 0:
            out = sort_values(-v for v in out)
        # the two means' own sets must have been within reach (the interpreter's float
        # rounding of each mean differs from the mean of the differences by an ulp: the
        # compiler's float spreads list those floats)
        return Dependent(out, [x for _, x in ra],
                         [(_num(x), _num(y)) for (_, x), (_, y) in zip(ra, rb)], sign,
                         _structure(a, memo) == _structure(b, memo), sa < 0)


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
        rows = apply_elementwise_table(m.fn.apply, [[v for _, v in rows]])
        if not all(ok for ok, _ in rows):
            return None
    return rows


def _num(v):
    return int(v) if isinstance(v, (bool, np.bool_)) else v
