"""Stage 2 (graph), its node types: what a compiler graph is made of.

A :class:`CNode` is one s-op living in the residual stream, computed by one block of the
transformer:

==============  =====================================================================
kind            computed by
==============  =====================================================================
``tokens``      the token embedding ``W_E`` (one per token conversion)
``indices``     the position embedding ``W_pos`` (BOS at position 0, so index ``p - 1``)
``full``        the constant ``one`` direction (a constant s-op costs nothing)
``mlp``         an MLP: a fused expression (:class:`compiler.graph.expr.Expr`) of its leaf nodes
``aggregate``   an attention head (mean / max / min), default from the BOS token
``sw_attn``     the attention half of a selector width: ``1/(w+1)`` in one direction
==============  =====================================================================

A selector is a :class:`SelectorSpec`: a conjunction of :class:`Factor` (one key node, one
query node, a boolean table over their values). :class:`CompilerGraph` is what
:func:`compiler.graph.rasp_to_graph.build_graph` returns. This module imports only
:mod:`compiler.encoding` and :mod:`compiler.graph.expr`; every later stage reads these types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import networkx as nx
import numpy as np

from rasp.ir import Node
from rasp.analyses.value_sets import kind_groups, values_array

from ..encoding import CATEGORICAL
from .expr import Expr

__all__ = ["CNode", "Factor", "SelectorSpec", "CompilerGraph"]


@dataclass(eq=False)
class Factor:
    """One conjunct of a selector: ``table[q_value_index, k_value_index]`` over the values of
    ``query`` and ``key`` (None: a constant side, read from the ``one`` direction)."""

    key: "CNode | None"
    query: "CNode | None"
    pred: Callable[[np.ndarray, np.ndarray], np.ndarray]   # (keys [K], queries [Q]) -> [Q, K]
    desc: str = ""

    def table(self) -> np.ndarray:
        """``[Q, K]`` booleans over the query's and key's values. The predicate is applied per
        kind of value (bools, numbers, strings, tuples by their components' kinds), as the
        interpreter compares sequences of one kind: never to a mixed array as a whole."""
        kv = list(self.key.values) if self.key is not None else [0]
        qv = list(self.query.values) if self.query is not None else [0]
        out = np.zeros((len(qv), len(kv)), dtype=bool)
        for qi in kind_groups(qv):
            Q = values_array([qv[i] for i in qi])
            for ki in kind_groups(kv):
                K = values_array([kv[i] for i in ki])
                block = np.asarray(self.pred(K, Q), dtype=bool).reshape(len(qi), len(ki))
                out[np.ix_(qi, ki)] = block
        return out


@dataclass(eq=False)
class SelectorSpec:
    """A selector as a conjunction of :class:`Factor` (empty: always true)."""

    factors: list
    ir: Node | None = None


@dataclass(eq=False)
class CNode:
    """A compiler node: one s-op living in the residual stream (see module docstring)."""

    kind: str
    name: str
    ir: Node | None = None
    encoding: str = CATEGORICAL
    values: list = field(default_factory=list)
    conversion: str | None = None          # tokens
    value: Any = None                      # full
    expr: Expr | None = None               # mlp
    selector: SelectorSpec | None = None   # aggregate / sw_attn
    values_node: "CNode | None" = None     # aggregate
    default: Any = 0                       # aggregate
    reduction: str = "mean"                # aggregate
    may_average: bool = False              # aggregate: several different values may be averaged
    internal: bool = False                 # created by the compiler (conversion, sw/trunc MLP)
    unbounded: bool = False                # numerical, value set too large to enumerate
    error: str | None = None               # mlp: the interpreter's error on some input values
    count_check: "CNode | None" = None     # aggregate of strings: its selector width head
    is_check: bool = False                 # a head only read by the runtime checks
    #: ``{value: floats}``: the floats the interpreter may hold for a value of ``values`` (an
    #: exact mean whose float64 sum may round; ``rasp.analyses.value_sets.ValueSets.spread``)
    spread: dict = field(default_factory=dict)

    def deps(self) -> list["CNode"]:
        """The nodes this node reads."""
        out: list[CNode] = []
        if self.kind == "mlp":
            out.extend(self.expr.leaves())
        if self.selector is not None:
            for f in self.selector.factors:
                for x in (f.key, f.query):
                    if x is not None:
                        out.append(x)
        if self.values_node is not None:
            out.append(self.values_node)
        uniq, seen = [], set()
        for x in out:
            if id(x) not in seen:
                seen.add(id(x))
                uniq.append(x)
        return uniq

    @property
    def is_attention(self) -> bool:
        return self.kind in ("aggregate", "sw_attn")

    @property
    def is_embedded(self) -> bool:
        return self.kind in ("tokens", "indices", "full")

    @property
    def span(self):
        return self.ir.span if self.ir is not None else None

    def __repr__(self) -> str:
        return f"<CNode {self.kind} {self.name} {self.encoding} |{len(self.values)}|>"


@dataclass
class CompilerGraph:
    """The lowered program: ``graph`` (``networkx.DiGraph`` child -> parent, attribute
    ``cnode``), ``nodes`` in topological order, the ``output`` node, ``causal``."""

    graph: nx.DiGraph
    nodes: list
    output: CNode
    causal: bool
    max_seq_len: int
    warnings: list
    #: the output is a mean of bools, or a chain of means down to one (issue 51, D3):
    #: ``[(count head, mean node, IR default, truncated)]``, innermost first, read by
    #: :mod:`compiler.bool_typing` to type the output as the interpreter does
    typing: list = field(default_factory=list)
