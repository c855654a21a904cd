"""A program printed in the dialect: one statement per operation, runnable by :func:`rasp.run_source`.

Used by the program search (``rasp search`` prints what it finds), the predictions document and
anyone who builds programs with the Python API and wants them as ``.rasp`` source.
"""

from __future__ import annotations

import itertools

from .ir import (Aggregate, Full, Indices, Map, Node, Select, SelectorAnd, SelectorOr,
                 SelectorWidth, SequenceMap, Tokens, topological_order)
from .ops import OPS

__all__ = ["program_to_source"]


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
