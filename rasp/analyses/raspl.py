"""The RASP-L check: is a program valid RASP-L (Zhou et al. 2023, "What Algorithms can
Transformers Learn? A Study in Length Generalization", arXiv 2310.16028, §3 and Appendix)?

A program is valid RASP-L when (``docs/language.md``, "RASP-L rules and measures"):

1. **causal** — every selector is causal: a select made in causal mode (``causal=True``), the
   whole program checked with ``causal=True``, or a selector that is causal by its comparison
   (``select(indices, indices, <=)``, ``select(indices, indices - 1, ==)``, an ``and`` with a
   causal part, ...);
2. **int8 values** — every s-op's values are integers in [-128, 127] over the given vocabulary
   and lengths (value-set inference, :mod:`rasp.analyses.value_sets`). Booleans count as 0/1; strings are
   token symbols (a categorical value standing for a token id) and pass. Where inference cannot
   decide, or ``vocab`` / ``max_seq_len`` are not given, the rule is reported *undecided*, not
   violated;
3. **index arithmetic** — values derived from ``indices`` (``indices`` itself, constant shifts
   ``indices + c`` / ``indices - c``, values moved by an aggregate from index-valued s-ops, and
   selector widths: a count of positions is a position, as the causal prefix length
   ``selector_width(select(all))`` is ``indices + 1``) are used only by comparison (in a ``select`` or an elementwise comparison) or shifted
   by an integer constant. Any other arithmetic on them (``length - indices``, ``c - indices``,
   ``indices * 2``, ``indices % 2``, ``indices + tokens``, a lookup table or Python function of
   them) is a violation;
4. **length** — no value depends on the total input length: the built-in ``length`` is a
   violation (in causal mode the prefix length ``selector_width(select(tokens, tokens, "TRUE"))``
   is fine);
5. **no loops, recursion or length-dependent constants** — the IR is a finite DAG, so loops and
   recursion cannot reach it (a loop in the source is unrolled to a fixed program). What can be
   seen statically is reported: a position compared with, or shifted by, a constant at least
   ``max_seq_len`` (a constant only meaningful for one input length).

Public API: :func:`check` -> :class:`RASPLReport` (``.valid``, ``.violations`` of
:class:`Violation`, ``.undecided``, ``.to_dict()``, ``.format()``), :data:`RULES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from . import value_sets

from ..ir import (Aggregate, Full, Indices, Length, Map, Node, RASPError, RASPTypeError, Select,
                 Selector, SelectorAnd, SelectorNot, SelectorOr, SelectorWidth, SequenceMap,
                 SOp, Span, Tokens, topological_order)
from ..source import describe_node
from ..interpreter import evaluate

__all__ = ["check", "RASPLReport", "Violation", "RULES", "INT8_MIN", "INT8_MAX", "violation_at",
           "provably_causal", "index_offset", "reads_only_prefix", "noncausal_readers",
           "is_prefix_causal"]

RULES = {
    1: "causal",
    2: "int8 values",
    3: "index arithmetic",
    4: "length",
    5: "length-dependent constants",
}
INT8_MIN, INT8_MAX = -128, 127


@dataclass
class Violation:
    """One broken RASP-L rule.

    ``rule`` (1..5), ``rule_name`` (short name, :data:`RULES`), ``operation`` (the offending
    operation, readable: ``length - indices``), ``node`` (its label), ``span`` (the source
    position, :class:`~rasp.ir.Span`, or None for Python-API programs), ``message``.
    """

    rule: int
    operation: str
    message: str
    node: str = ""
    span: Span | None = None

    @property
    def rule_name(self) -> str:
        """The RASP-L rule's name (a C-RASP violation's name is in ``rasp.analyses.crasp.RULES``:
        :meth:`rasp.analyses.crasp.CRASPReport.to_dict` writes it)."""
        return RULES.get(self.rule, f"rule {self.rule}")

    @property
    def location(self) -> str:
        """``line:column`` of the operation, or ``?`` when unknown."""
        return f"{self.span.line}:{self.span.column}" if self.span is not None else "?"

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "rule_name": self.rule_name, "operation": self.operation,
                "node": self.node, "message": self.message,
                "span": self.location if self.span is not None else None,
                "file": self.span.file if self.span is not None else None}

    def __str__(self) -> str:
        where = f"{self.span}: " if self.span is not None else ""
        return f"{where}rule {self.rule} ({self.rule_name}): {self.message} [{self.operation}]"


@dataclass
class RASPLReport:
    """The result of :func:`check`.

    ``valid`` is True when no rule is violated (undecided rules do not invalidate);
    ``violations`` (list of :class:`Violation`, sorted by rule and position); ``undecided``
    (readable notes on what could not be decided, e.g. rule 2 without a vocabulary);
    ``causal`` (whether the whole program was checked in causal mode).
    """

    valid: bool
    violations: list[Violation] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)
    causal: bool | None = None

    @property
    def rules_violated(self) -> list[int]:
        return sorted({v.rule for v in self.violations})

    def to_dict(self) -> dict[str, Any]:
        return {"valid": self.valid, "violations": [v.to_dict() for v in self.violations],
                "rules_violated": self.rules_violated, "undecided": list(self.undecided),
                "causal": self.causal}

    def format(self) -> str:
        """A readable multi-line summary."""
        if self.valid:
            head = "valid RASP-L"
        else:
            n = len(self.violations)
            head = f"not RASP-L: {n} violation{'s' if n != 1 else ''}"
        lines = [head] + [f"  {v}" for v in self.violations]
        lines += [f"  undecided: {u}" for u in self.undecided]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


# --------------------------------------------------------------------------------------------
# Index offsets and provable causality
# --------------------------------------------------------------------------------------------

def _int_const(c) -> int | None:
    if isinstance(c, bool):
        return None
    if isinstance(c, int):
        return c
    if isinstance(c, float) and c.is_integer():
        return int(c)
    if isinstance(c, np.integer):
        return int(c)
    return None


def index_offset(sop: Node) -> int | None:
    """``c`` when ``sop`` is provably ``indices + c`` (constant integer shifts, identity),
    else None."""
    offset = 0
    n = sop
    for _ in range(1000):
        if isinstance(n, Indices):
            return offset
        if isinstance(n, Map):
            fn = n.fn
            if fn.op in ("identity", "pos", "round"):
                n = n.inner
                continue
            c = _int_const(fn.const)
            if c is not None and fn.op == "add" and fn.const_side in ("left", "right"):
                offset += c
                n = n.inner
                continue
            if c is not None and fn.op == "sub" and fn.const_side == "right":
                offset -= c
                n = n.inner
                continue
        return None
    return None


def _select_relation(sel: Select) -> tuple[str, int] | None:
    """``(op, d)`` when ``sel`` is ``key_index op query_index + d`` (a comparison, not a
    Python predicate), else None."""
    if sel.op == "python":
        return None
    ka = index_offset(sel.keys)
    qb = index_offset(sel.queries)
    if ka is None or qb is None:
        return None
    return sel.op, qb - ka


def provably_causal(sel: Selector) -> bool:
    """Whether a selector selects only keys at or before the query (``k <= q``) on every
    input, by its comparisons alone (ignoring its causal flag).

    ``select(indices + a, indices + b, op)`` compares ``k + a op q + b``; it is causal for
    ``==`` when ``b <= a``, for ``<=`` when ``b <= a``, for ``<`` when ``b <= a + 1``, and
    ``FALSE`` always. ``and`` is causal when either part is, ``or`` when both are, ``not s``
    when ``s`` selects every later key.
    """
    return _causal(sel, {})


def _causal(sel: Selector, memo: dict) -> bool:
    key = ("c", sel.id)
    if key in memo:
        return memo[key]
    if isinstance(sel, Select):
        if sel.op == "FALSE":
            res = True
        else:
            rel = _select_relation(sel)
            if rel is None:
                table = _positional_table(sel, memo)
                res = table is not None and not np.triu(table, 1).any()
            else:
                op, d = rel
                res = (op in ("==", "<=") and d <= 0) or (op == "<" and d <= 1)
    elif isinstance(sel, SelectorAnd):
        res = _causal(sel.a, memo) or _causal(sel.b, memo)
    elif isinstance(sel, SelectorOr):
        res = _causal(sel.a, memo) and _causal(sel.b, memo)
    elif isinstance(sel, SelectorNot):
        res = _covers_future(sel.a, memo)
    else:
        res = False
    memo[key] = res
    return res


def _covers_future(sel: Selector, memo: dict) -> bool:
    """Whether a selector selects every key after the query (``k > q``) on every input."""
    key = ("f", sel.id)
    if key in memo:
        return memo[key]
    if isinstance(sel, Select):
        if sel.op == "TRUE":
            res = True
        else:
            rel = _select_relation(sel)
            if rel is None:
                table = _positional_table(sel, memo)
                res = table is not None and bool(table[np.triu_indices(len(table), 1)].all())
            else:
                op, d = rel      # need: for all k >= q + 1, (k op q + d)
                res = (op == ">" and d <= 0) or (op == ">=" and d <= 1) or (
                    op == "!=" and d <= 0)
    elif isinstance(sel, SelectorAnd):
        res = _covers_future(sel.a, memo) and _covers_future(sel.b, memo)
    elif isinstance(sel, SelectorOr):
        res = _covers_future(sel.a, memo) or _covers_future(sel.b, memo)
    elif isinstance(sel, SelectorNot):
        res = _causal(sel.a, memo)
    else:
        res = False
    memo[key] = res
    return res


_N_KEY = ("max_seq_len",)   # where a causality memo holds the length bound, when given


def _positional(sop: Node, memo: dict) -> bool:
    """Whether ``sop``'s value at a position is a function of that position alone: only
    ``indices``, constants and (sequence) maps of them above it (no tokens, ``length``,
    aggregate or selector width, whose values depend on other positions or the length)."""
    key = ("p", sop.id)
    if key not in memo:
        if isinstance(sop, (Indices, Full)):
            memo[key] = True
        elif isinstance(sop, Map):
            memo[key] = _positional(sop.inner, memo)
        elif isinstance(sop, SequenceMap):
            memo[key] = all(_positional(x, memo) for x in sop.inputs)
        else:
            memo[key] = False
    return memo[key]


def _positional_table(sel: Select, memo: dict) -> np.ndarray | None:
    """``[query, key]`` selection matrix of a select of positional keys and queries at the
    memo's length bound (None without a bound, for other selects, or where evaluating it
    raises: then nothing is proved)."""
    n = memo.get(_N_KEY)
    if n is None or not (_positional(sel.keys, memo) and _positional(sel.queries, memo)):
        return None
    key = ("t", sel.id)
    if key not in memo:
        try:
            memo[key] = np.asarray(evaluate(sel, [[0] * n], causal=False)[0], dtype=bool)
        except Exception:  # noqa: BLE001 - a Python predicate may raise anything: no proof
            memo[key] = None
    return memo[key]


def _flag_causal(sel: Selector) -> bool:
    try:
        return bool(sel.causal)
    except NotImplementedError:  # pragma: no cover
        return False


# --------------------------------------------------------------------------------------------
# Prefix causality: the one owner (the RASP-L rule 1 below, ``tasks.decode.is_prefix_causal``
# and ``compiler.compile_program(causal=True)`` all ask it)
# --------------------------------------------------------------------------------------------

def reads_only_prefix(sel: Selector, memo: dict | None = None,
                      max_seq_len: int | None = None) -> bool:
    """Whether a selector selects only keys at or before the query on every input: made
    causal (its causal flag: the interpreter masks it with ``key <= query``) or causal by its
    comparisons alone (:func:`provably_causal`). With ``max_seq_len``, "every input" means
    every input of at most that length, and a select whose keys and queries are functions of
    the position alone (maps of ``indices`` and constants: a Python predicate such as Tracr's
    ``lambda k, q: q == k + 1``, a lookup of ``indices``) is decided by its selection matrix
    at that length, which holds every shorter length's as its top-left block."""
    memo = {} if memo is None else memo
    if max_seq_len is not None:
        memo[_N_KEY] = int(max_seq_len)
    return _flag_causal(sel) or _causal(sel, memo)


def noncausal_readers(sop: Node, max_seq_len: int | None = None) -> list[Node]:
    """The nodes through which ``sop``'s value at position ``i`` may depend on a position
    after ``i``, in topological order: ``length`` (the total input length), and every
    aggregate and selector width whose selector does not :func:`reads_only_prefix` (on every
    input, or with ``max_seq_len`` on every input of at most that length). Empty for a
    prefix-causal program (one a decoder-only model computes exactly, token by token)."""
    memo: dict = {} if max_seq_len is None else {_N_KEY: int(max_seq_len)}
    return [n for n in topological_order(sop)
            if isinstance(n, Length) or (isinstance(n, (Aggregate, SelectorWidth))
                                         and not reads_only_prefix(n.selector, memo))]


def is_prefix_causal(sop: Node) -> bool:
    """Whether ``sop``'s value at position ``i`` depends only on positions ``0..i``
    (:func:`noncausal_readers` is empty)."""
    return not noncausal_readers(sop)


# --------------------------------------------------------------------------------------------
# The check
# --------------------------------------------------------------------------------------------

_COMPARE = {"eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not", "indicator", "in"}
_PASS = {"identity", "pos", "round"}


def violation_at(rule: int, n: Node, message: str, users: dict,
                 span_from: Node | None = None) -> Violation:
    """A :class:`Violation` of ``rule`` at node ``n``, located at its own source span, else
    ``span_from``'s, else the first user's (``users``: node id -> nodes reading it); shared
    with the C-RASP check (:mod:`rasp.analyses.crasp`)."""
    span = _span(n, span_from)
    if span is None:
        for u in users.get(n.id, []):
            if u.span is not None:
                span = u.span
                break
    return Violation(rule=rule, operation=describe_node(n), message=message, node=n.label,
                     span=span)


def _span(n: Node, fallback: Node | None = None) -> Span | None:
    if n.span is not None:
        return n.span
    return fallback.span if fallback is not None else None


def check(sop: Node, vocab: Iterable | None = None, max_seq_len: int | None = None,
          causal: bool | None = None) -> RASPLReport:
    """Check that a program is valid RASP-L (rules 1-5, see the module docstring).

    Args:
        sop: the program's output s-op (or a selector).
        vocab: the token values the program sees (for rule 2's value-set inference); None
            leaves rule 2 undecided.
        max_seq_len: the largest input length (rules 2 and 5); None leaves rule 2 undecided.
        causal: True checks the program as run in causal mode (every selector causal); None or
            False uses each select's own causal flag.
    Returns:
        :class:`RASPLReport`.
    Raises:
        RASPTypeError: ``sop`` is not an IR node.
    """
    if not isinstance(sop, Node):
        raise RASPTypeError(f"check expects an s-op, got {type(sop).__name__}")
    nodes = topological_order(sop)
    violations: list[Violation] = []
    undecided: list[str] = []
    memo: dict = {}

    # users of each node (for locating a violation when the node itself has no span)
    users: dict[int, list[Node]] = {}
    for n in nodes:
        for c in n.children:
            users.setdefault(c.id, []).append(n)

    def add(rule: int, n: Node, message: str, span_from: Node | None = None):
        violations.append(violation_at(rule, n, message, users, span_from))

    # ---- rule 1: causal selectors --------------------------------------------------------
    if not causal:
        seen: set[int] = set()
        readers = [n for n in nodes if isinstance(n, (Aggregate, SelectorWidth))]
        if isinstance(sop, Selector):       # a selector checked on its own
            readers.append(sop)
        for n in readers:
            sel = n if isinstance(n, Selector) else n.selector
            if sel.id in seen:
                continue
            seen.add(sel.id)
            if reads_only_prefix(sel, memo):
                continue
            add(1, sel, f"selector '{sel.label}' is not causal: a query can attend to later "
                        "keys (make it causal, or check the program in causal mode)",
                span_from=n)

    # ---- rule 3 (index arithmetic) and rule 5 (length-dependent constants) ----------------
    # taint: node id -> True when the s-op's values are positions (indices, shifts of them,
    # or moved from index-valued s-ops by an aggregate)
    idx: dict[int, bool] = {}

    def big(c) -> bool:
        ci = _int_const(c) if not isinstance(c, float) else c
        return (max_seq_len is not None and isinstance(ci, (int, float))
                and not isinstance(ci, bool) and abs(ci) >= max_seq_len)

    for n in nodes:
        if not isinstance(n, SOp):
            if isinstance(n, Select) and max_seq_len is not None:
                for a, b in ((n.keys, n.queries), (n.queries, n.keys)):
                    if idx.get(a.id) and isinstance(b, Full) and big(b.value):
                        add(5, n, f"compares a position with the constant {b.value!r}, "
                                  f"at least the maximum length {max_seq_len}: a constant "
                                  "that depends on the input length")
            continue
        if isinstance(n, Indices):
            idx[n.id] = True
            continue
        if isinstance(n, SelectorWidth):
            # a count of positions is a position: in causal mode the prefix length
            # selector_width(select(all)) is indices + 1
            idx[n.id] = True
            continue
        if isinstance(n, (Tokens, Full, Length)):
            idx[n.id] = False
            continue
        if isinstance(n, Aggregate):
            idx[n.id] = bool(idx.get(n.values.id))
            continue
        if isinstance(n, Map):
            if not idx.get(n.inner.id):
                idx[n.id] = False
                continue
            fn = n.fn
            op = fn.op
            if op in _PASS:
                idx[n.id] = True
            elif op in _COMPARE:
                idx[n.id] = False
                if fn.const_side is not None and big(fn.const):
                    add(5, n, f"compares a position with the constant {fn.const!r}, at least "
                              f"the maximum length {max_seq_len}")
            elif op in ("add", "sub") and _int_const(fn.const) is not None and (
                    op == "add" or fn.const_side == "right"):
                idx[n.id] = True
                if big(fn.const):
                    add(5, n, f"shifts a position by {fn.const!r}, at least the maximum length "
                              f"{max_seq_len}")
            elif op == "ternary":
                idx[n.id] = True
            else:
                idx[n.id] = False
                add(3, n, _arith_message(n, op))
            continue
        if isinstance(n, SequenceMap):
            tainted = [bool(idx.get(c.id)) for c in n.inputs]
            if not any(tainted):
                idx[n.id] = False
                continue
            op = n.fn.op
            if op in _COMPARE:
                idx[n.id] = False
            elif op == "ternary":
                idx[n.id] = any(tainted[1:])
            elif op in ("add", "sub") and len(n.inputs) == 2 and tainted[0] and not tainted[1] \
                    and isinstance(n.inputs[1], Full) and _int_const(n.inputs[1].value) is not None:
                idx[n.id] = True
            elif op == "add" and len(n.inputs) == 2 and tainted[1] and not tainted[0] \
                    and isinstance(n.inputs[0], Full) and _int_const(n.inputs[0].value) is not None:
                idx[n.id] = True
            else:
                idx[n.id] = False
                add(3, n, _arith_message(n, op))
            continue
        idx[n.id] = False

    # ---- rule 4: the built-in length ------------------------------------------------------
    for n in nodes:
        if isinstance(n, Length):
            consumers = users.get(n.id, [])
            if not consumers:
                add(4, n, "uses the total input length (built-in 'length'); a causal model "
                          "sees only a prefix: use the prefix length "
                          'selector_width(select(tokens, tokens, "TRUE")) in causal mode')
            for u in consumers:
                add(4, u, "uses the total input length (built-in 'length'); a causal model "
                          "sees only a prefix: use the prefix length "
                          'selector_width(select(tokens, tokens, "TRUE")) in causal mode')

    # ---- rule 2: int8 values ---------------------------------------------------------------
    if vocab is None or max_seq_len is None:
        undecided.append("rule 2 (int8 values): not checked; give the vocabulary and the "
                         "maximum length")
    else:
        _check_values(sop, nodes, vocab, max_seq_len, bool(causal), add, undecided)

    violations.sort(key=lambda v: (v.rule, v.span.line if v.span else 0,
                                   v.span.column if v.span else 0))
    return RASPLReport(valid=not violations, violations=violations, undecided=undecided,
                       causal=causal)


def _arith_message(n: Node, op: str) -> str:
    what = {"python": "a Python function", "lookup": "a lookup table", "neg": "negation",
            "sub": "subtraction", "add": "addition", "mul": "multiplication",
            "div": "division", "mod": "modulo", "pow": "a power"}.get(op, f"'{op}'")
    return (f"{what} of values derived from indices (positions or counts of positions): they "
            "may only be compared or shifted by a constant (indices + c)")


def _ok_value(v) -> bool:
    if isinstance(v, (bool, str)):
        return True
    if isinstance(v, (np.bool_, np.str_)):
        return True
    if isinstance(v, (np.integer, np.floating)):
        v = v.item()
    if isinstance(v, int):
        return INT8_MIN <= v <= INT8_MAX
    if isinstance(v, float):
        return v.is_integer() and INT8_MIN <= v <= INT8_MAX
    return False


def _check_values(sop, nodes, vocab, max_seq_len, causal, add, undecided):
    if int(max_seq_len) > value_sets.MAX_VALUE_SET:
        # positions alone would enumerate more values than inference keeps: refuse before
        # allocating (a selector width or an index that large breaks the rule anyway)
        undecided.append(f"rule 2 (int8 values): not checked: max_len {max_seq_len} gives "
                         f"more than {value_sets.MAX_VALUE_SET} positions to enumerate")
        return
    try:
        sets = value_sets.infer_value_sets(sop, set(vocab), int(max_seq_len), causal=causal)
    except RASPError as e:     # ValueSetError included
        undecided.append(f"rule 2 (int8 values): value-set inference could not decide: "
                         f"{e.message}")
        return
    missing = 0
    for n in nodes:
        if not isinstance(n, SOp):
            continue
        values = sets.get(n.id)
        if values is None:
            missing += 1
            continue
        bad = [v for v in values if not _ok_value(v)]
        if bad:
            bad.sort(key=lambda v: (isinstance(v, str), abs(v) if not isinstance(v, str)
                                    else 0, repr(v)))
            shown = ", ".join(repr(v) for v in bad[:4])
            add(2, n, f"values outside the int8 integers [{INT8_MIN}, {INT8_MAX}]: {shown}"
                      f"{' ...' if len(bad) > 4 else ''}")
    if missing:
        undecided.append(f"rule 2 (int8 values): no value set for {missing} s-op(s)")
