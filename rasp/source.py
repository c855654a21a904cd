"""A program printed in the dialect: one statement per operation, runnable by :func:`rasp.run_source`.

Used by the program search (``rasp search`` prints what it finds), the predictions document and
anyone who builds programs with the Python API and wants them as ``.rasp`` source.
"""

from __future__ import annotations

import itertools

from .ir import (Aggregate, Full, Indices, Length, Map, Node, Select, SelectorAnd, SelectorNot,
                 SelectorOr, SelectorWidth, SequenceMap, Tokens, topological_order)
from .ops import OPS

__all__ = ["program_to_source", "describe_node"]


def program_to_source(sop: Node, name: str = "program") -> str:
    """Render a program as one RASP-L statement per operation (``v1 = ...;``).

    ``aggregate`` with a ``max``/``min`` reduction or a truncated mean is written as the
    RASP-L head ``kqv(keys, queries, values, op, default, reduction)`` where its selector is a
    single select, else as ``aggregate(sel, values, default, "max")``.
    """
    names: dict[int, str] = {}
    lines: list[str] = []
    order = topological_order(sop)
    uses: dict[int, int] = {}
    for n in order:
        for c in n.children:
            uses[c.id] = uses.get(c.id, 0) + 1

    def ref(n: Node) -> str:
        if isinstance(n, Tokens):
            return "tokens"
        if isinstance(n, Indices):
            return "indices"
        if isinstance(n, Full):
            return repr(n.value)
        return names[n.id]

    counter = itertools.count(1)
    for n in order:
        if isinstance(n, (Tokens, Indices, Full)):
            continue
        if isinstance(n, Select) and all(isinstance(p, Aggregate) and p.selector is n
                                         for p in order if n in p.children) \
                and uses.get(n.id, 0) == 1 and _single_agg(order, n):
            continue  # printed inside its kqv
        if isinstance(n, Select):
            expr = (f"select({ref(n.keys)}, {ref(n.queries)}, {n.op})" if n.op != "TRUE"
                    else 'select(indices, indices, "TRUE")')
        elif isinstance(n, Map):
            f = n.fn
            if f.op == "not":
                expr = f"not {ref(n.inner)}"
            else:
                expr = f"{ref(n.inner)} {OPS[f.op].symbol} {f.const!r}"
        elif isinstance(n, SequenceMap) and n.fn.op == "ternary":
            c, a, b = n.inputs
            expr = f"{ref(a)} if {ref(c)} else {ref(b)}"
        elif isinstance(n, SequenceMap):
            a, b = n.inputs[:2]
            expr = f"{ref(a)} {OPS[n.fn.op].symbol} {ref(b)}"
        elif isinstance(n, (SelectorAnd, SelectorOr)):
            word = "and" if isinstance(n, SelectorAnd) else "or"
            expr = f"{ref(n.children[0])} {word} {ref(n.children[1])}"
        elif isinstance(n, SelectorWidth):
            expr = f"selector_width({ref(n.selector)})"
        elif isinstance(n, Aggregate):
            s = n.selector
            if isinstance(s, Select) and s.id not in names and n.truncate == (
                    n.reduction == "mean"):
                op = s.op if s.op != "TRUE" else '"TRUE"'
                expr = (f"kqv({ref(s.keys)}, {ref(s.queries)}, {ref(n.values)}, {op}, "
                        f"{n.default!r}, \"{n.reduction}\")")
            else:
                expr = f"aggregate({ref(s)}, {ref(n.values)}, {n.default!r}, \"{n.reduction}\")"
        else:
            expr = n.label
        nm = name if n is sop else f"v{next(counter)}"
        names[n.id] = nm
        lines.append(f"{nm} = {expr};")
    if sop.id not in names:
        lines.append(f"{name} = {ref(sop)};")
    return "\n".join(lines)


def _single_agg(order, sel) -> bool:
    parents = [p for p in order if sel in p.children]
    return len(parents) == 1 and isinstance(parents[0], Aggregate) and \
        parents[0].truncate == (parents[0].reduction == "mean")


def _ref(n: Node, depth: int = 3) -> str:
    """How an operand is shown: its name, or (unnamed) its own description, nested up to
    ``depth`` levels; deeper unnamed operands show as ``kind_id``."""
    if isinstance(n, Full):
        return repr(n.value)
    if n.name is not None or depth <= 0 or isinstance(n, (Aggregate, SelectorWidth)):
        return n.label
    text = describe_node(n, depth - 1)
    if isinstance(n, (SequenceMap, SelectorAnd, SelectorOr)) or (
            isinstance(n, Map) and n.fn.const_side is not None):
        text = f"({text})"
    return text


def describe_node(n: Node, depth: int = 3) -> str:
    """A one-line readable form of an operation, e.g. ``length - indices``,
    ``select(tokens, tokens, ==)``, ``aggregate(flip, tokens)``, ``selector_width(same)``."""
    if isinstance(n, (Tokens, Indices, Length)):
        return n.label
    if isinstance(n, Full):
        return f"full({n.value!r})"
    if isinstance(n, Map):
        return n.fn.describe(_ref(n.inner, depth))
    if isinstance(n, SequenceMap):
        return n.fn.describe(*[_ref(c, depth) for c in n.inputs])
    if isinstance(n, Select):
        return f"select({_ref(n.keys, depth)}, {_ref(n.queries, depth)}, {n.op})"
    if isinstance(n, SelectorAnd):
        return f"{_ref(n.a, depth)} and {_ref(n.b, depth)}"
    if isinstance(n, SelectorOr):
        return f"{_ref(n.a, depth)} or {_ref(n.b, depth)}"
    if isinstance(n, SelectorNot):
        return f"not {_ref(n.a, depth)}"
    if isinstance(n, Aggregate):
        extra = ""
        if n.default != 0:
            extra += f", default={n.default!r}"
        if n.reduction != "mean":
            extra += f", reduction={n.reduction}"
        return f"aggregate({_ref(n.selector, depth)}, {_ref(n.values, depth)}{extra})"
    if isinstance(n, SelectorWidth):
        return f"selector_width({_ref(n.selector, depth)})"
    return n.label
