"""The C-RASP check: is a program in C-RASP (Huang et al. 2025, "A Formal Framework for
Understanding Length Generalization in Transformers", ICLR 2025, arXiv 2410.02140, §3-4)?

C-RASP is a fragment of our IR. Each s-op gets one of these kinds:

* **symbol** — a finite-valued function of the current position's token and of earlier
  Booleans: ``tokens``, constants, Booleans, and any map / sequence map of symbols (C-RASP spells
  such logic out over the finite alphabet: ``Q_sigma(i)``, ``not``, ``and``; a ternary over
  constants is one Boolean per value). Booleans are symbols with values 0/1.
* **count** — ``#[j <= i, psi(i, j)] P(j)``: ``selector_width`` of a causal selector whose
  predicate is a Boolean of the key (``select(P, c, op)`` with a symbol ``P`` and a constant or
  a symbol query: a symbol query is a finite case split over the query's value), the always-true
  selector, ``and`` / ``or`` / ``not`` of such selectors and — only in ``C-RASP[periodic,
  local]`` — the local selector ``select(indices, indices - c, ==)`` (``psi(i, j)``: ``j = i - c``).
  Counts combine by ``+``, ``-``, multiplication by an integer constant, constants and
  conditionals (``c1 if B else c2``); a comparison of counts (or of a count with a constant) is
  a Boolean.
* **periodic** — ``indices % p`` compared with a constant (``phi(i)``: ``i mod p = r``), a
  Boolean allowed only in ``C-RASP[periodic, local]``.

Everything else is a **violation**, named with the operation and its source ``line:column``:
value aggregation (``aggregate``/``kqv``: C-RASP has counts, not value moves), a selector that
compares counts or positions (other than the local one), a non-causal selector, arithmetic on
positions (other than the periodic predicate), a product of two counts or any non-linear map of a
count, and the built-in ``length``.

Variants (:data:`VARIANTS`): ``"crasp"`` = ``C-RASP[]`` (Huang et al.: the NoPE theory),
``"crasp_pl"`` = ``C-RASP[periodic, local]`` (learned absolute positions with random offsets).

Public API: :func:`check_crasp` -> :class:`CRASPReport` (``.valid``, ``.violations`` of
:class:`rasp.analyses.raspl.Violation` with ``rule`` = the C-RASP rule number of :data:`RULES`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir import (Aggregate, Full, Indices, Length, Map, Node, RASPTypeError, Select, Selector,
                 SelectorAnd, SelectorNot, SelectorOr, SelectorWidth, SequenceMap, Tokens,
                 topological_order)
from .raspl import index_offset, violation_at

__all__ = ["check_crasp", "CRASPReport", "RULES", "VARIANTS"]

#: C-RASP rules (numbers used in :class:`rasp.analyses.raspl.Violation` ``rule``).
RULES = {
    1: "value aggregation",
    2: "selector predicate",
    3: "causal counts",
    4: "position arithmetic",
    5: "count arithmetic",
    6: "length",
}

#: The two variants of Huang et al.: name -> (description, periodic/local allowed).
VARIANTS = {"crasp": ("C-RASP[] (NoPE)", False),
            "crasp_pl": ("C-RASP[periodic, local] (learned APE)", True)}

_COMPARE = {"eq", "ne", "lt", "le", "gt", "ge"}


@dataclass
class CRASPReport:
    """Result of :func:`check_crasp`: ``valid``, ``violations`` (list of
    :class:`rasp.analyses.raspl.Violation`; ``rule`` indexes :data:`RULES`), ``variant``."""

    valid: bool
    variant: str
    violations: list = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = []
        for v in self.violations:
            d = v.to_dict()
            d["rule_name"] = RULES[v.rule]
            out.append(d)
        return {"valid": self.valid, "variant": self.variant, "violations": out}

    def format(self) -> str:
        head = (f"valid {VARIANTS[self.variant][0]}" if self.valid else
                f"not {VARIANTS[self.variant][0]}: {len(self.violations)} violation"
                f"{'s' if len(self.violations) != 1 else ''}")
        lines = [head]
        for v in self.violations:
            lines.append(f"  {v.location}: {RULES[v.rule]}: {v.message} [{v.operation}]")
        return "\n".join(lines)


def _int_const(c) -> bool:
    return isinstance(c, int) and not isinstance(c, bool) or (
        isinstance(c, float) and c.is_integer())


def check_crasp(sop: Node, variant: str = "crasp", causal: bool | None = True) -> CRASPReport:
    """Check that ``sop`` is a C-RASP program (module docstring).

    Args:
        sop: the program's output s-op.
        variant: ``"crasp"`` (C-RASP[], no positional predicates) or ``"crasp_pl"``
            (C-RASP[periodic, local]).
        causal: True when the program runs in causal mode (every select is ANDed with
            ``key <= query``, as for RASP-L next-token programs); otherwise each select's own
            flag decides.

    Returns:
        :class:`CRASPReport`; each violation names the offending operation and its source
        ``line:column`` (``?`` for Python-API programs).

    Raises:
        RASPTypeError: ``sop`` is not an IR node; ValueError: unknown variant.
    """
    if not isinstance(sop, Node):
        raise RASPTypeError(f"check_crasp expects an s-op, got {type(sop).__name__}")
    if variant not in VARIANTS:
        raise ValueError(f"unknown C-RASP variant {variant!r}; expected one of "
                         f"{', '.join(VARIANTS)}")
    positional = VARIANTS[variant][1]
    nodes = topological_order(sop)
    users: dict[int, list[Node]] = {}
    for n in nodes:
        for c in n.children:
            users.setdefault(c.id, []).append(n)
    violations: list = []

    def add(rule, n, message):
        violations.append(violation_at(rule, n, message, users))

    kind: dict[int, str] = {}     # sym | count | index | mod | bad
    sel_ok: dict[int, bool] = {}

    def k(n):
        return kind.get(n.id, "bad")

    for n in nodes:
        if isinstance(n, Selector):
            sel_ok[n.id] = _check_selector(n, kind, sel_ok, positional, causal, add)
            continue
        if isinstance(n, Tokens):
            kind[n.id] = "sym"
        elif isinstance(n, Full):
            kind[n.id] = "sym"
        elif isinstance(n, Indices):
            kind[n.id] = "index"
        elif isinstance(n, Length):
            add(6, n, "the whole input's length is not a count #[j <= i] (a causal model "
                      "does not know it)")
            kind[n.id] = "bad"
        elif isinstance(n, Aggregate):
            add(1, n, "C-RASP has counts of positions, not aggregates of "
                      "values (spell the symbol logic out over the alphabet)")
            kind[n.id] = "bad"
        elif isinstance(n, SelectorWidth):
            kind[n.id] = "count" if sel_ok.get(n.selector.id, False) else "bad"
        elif isinstance(n, Map):
            kind[n.id] = _map_kind(n, k(n.inner), positional, add)
        elif isinstance(n, SequenceMap):
            kind[n.id] = _seqmap_kind(n, [k(c) for c in n.inputs], add)
        else:
            kind[n.id] = "bad"
    out = k(sop) if not isinstance(sop, Selector) else ("sym" if sel_ok[sop.id] else "bad")
    if out in ("index", "mod"):
        add(4, sop, "the output is a position: C-RASP outputs Booleans (one per symbol)")
    return CRASPReport(valid=not violations, variant=variant, violations=violations)


def _map_kind(n: Map, inner: str, positional: bool, add) -> str:
    op = n.fn.op
    if inner == "bad":
        return "bad"
    if inner == "sym":
        return "sym"                      # a finite function of a symbol
    if inner == "count":
        if op in _COMPARE and n.fn.const_side is not None:
            return "sym"                  # comparison of a count with a constant: a Boolean
        if op in ("add", "sub") and _int_const(n.fn.const):
            return "count"
        if op == "mul" and _int_const(n.fn.const):
            return "count"
        if op in ("neg", "pos", "identity"):
            return "count"
        add(5, n, f"'{op}' of a count: counts combine only by +, -, integer constants, "
                  "comparisons and conditionals")
        return "bad"
    if inner == "index":
        if op == "mod" and n.fn.const_side == "right" and _int_const(n.fn.const):
            if not positional:
                add(4, n, "periodic positional predicate (i mod p): only in "
                          "C-RASP[periodic, local], not in C-RASP[] (NoPE)")
                return "bad"
            return "mod"
        if op in ("add", "sub") and _int_const(n.fn.const):
            return "index"                # only usable by a local selector
        add(4, n, f"'{op}' of a position: C-RASP uses positions only in periodic predicates "
                  "(i mod p = r) and local selectors (j = i - c)")
        return "bad"
    if inner == "mod":
        if op in _COMPARE and n.fn.const_side is not None:
            return "sym"
        add(4, n, f"'{op}' of i mod p: only compared with a constant")
        return "bad"
    return "bad"


def _seqmap_kind(n: SequenceMap, kinds: list[str], add) -> str:
    op = n.fn.op
    if "bad" in kinds:
        return "bad"
    if any(k_ in ("index", "mod") for k_ in kinds):
        add(4, n, f"'{op}' on a position: C-RASP compares positions only in periodic "
                  "predicates and local selectors")
        return "bad"
    if all(k_ == "sym" for k_ in kinds):
        return "sym"
    # at least one count
    if op == "ternary":
        if kinds[0] != "sym":
            add(5, n, "the condition of a conditional must be a Boolean, not a count")
            return "bad"
        return "count"
    if op in _COMPARE:
        return "sym"                      # comparison of counts: a Boolean
    if op in ("add", "sub"):
        return "count"
    add(5, n, f"'{op}' of counts: counts combine only by +, -, integer constants, "
              "comparisons and conditionals")
    return "bad"


def _check_selector(sel, kind, sel_ok, positional, causal, add) -> bool:
    if isinstance(sel, (SelectorAnd, SelectorOr)):
        return all(sel_ok.get(c.id, False) for c in sel.children)
    if isinstance(sel, SelectorNot):
        return sel_ok.get(sel.children[0].id, False)
    if not isinstance(sel, Select):
        return False
    if not (causal or sel.causal):
        add(3, sel, "a count #[j <= i] ranges over earlier positions: the selector must be "
                    "causal")
        return False
    if sel.op in ("TRUE", "FALSE"):
        return True
    kk, kq = kind.get(sel.keys.id, "bad"), kind.get(sel.queries.id, "bad")
    if "bad" in (kk, kq):
        return False
    if kk == "sym" and kq == "sym":
        return True               # a Boolean of the key (case split over the query's symbol)
    if kk == "index" and kq == "index" and sel.op == "==":
        a, b = index_offset(sel.keys), index_offset(sel.queries)
        if a is not None and b is not None and b <= a:
            if not positional:
                add(2, sel, f"local selector (j = i - {a - b}): only in "
                            "C-RASP[periodic, local], not in C-RASP[] (NoPE)")
                return False
            return True
    if "count" in (kk, kq):
        add(2, sel, "a selector comparing counts: C-RASP's psi(i, j) depends only on i - j "
                    "and P on the key's Booleans")
    else:
        add(2, sel, "a selector comparing positions: only the local j = i - c is C-RASP")
    return False
