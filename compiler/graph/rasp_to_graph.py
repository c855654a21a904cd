"""Stage 2: the IR as a compiler graph (a ``networkx.DiGraph``).

:func:`build_graph` chains the parts of this stage, each in its own module (imports run one
way, from the later to the earlier):

* :mod:`compiler.graph.nodes` -- the node types (:class:`~compiler.graph.nodes.CNode`, factors,
  selectors, :class:`~compiler.graph.nodes.CompilerGraph`);
* :mod:`compiler.graph.expr` -- the expression an MLP computes, its affine form and steps;
* :mod:`compiler.graph.mlp_pricing` -- the hidden units an MLP will need;
* :mod:`compiler.graph.lowering` -- IR -> compiler nodes, with the rewrites of ``length``, selector
  width, ``kqv``, selectors and absorbed maps (Tracr's shape, plus fixes of its failure modes,
  ``docs/compiler.md``);
* :mod:`compiler.graph.passes` -- the encoding pass, fusion, conversions.

The value sets are an input (:func:`compiler.basis_inference.infer_bases`, computed once per
compilation); nothing here recomputes them. :func:`build_graph` returns a
:class:`~compiler.graph.nodes.CompilerGraph` with ``.graph`` (``networkx.DiGraph``, edges child ->
parent, node attribute ``cnode``), ``.nodes`` (topological order), ``.output``.
"""

from __future__ import annotations

import networkx as nx

from rasp.ir import SOp
from rasp.analyses.value_sets import ValueSets

from ..errors import CompilerError
from .passes import convert_extra_numericals, fuse, numerical_where_smaller, reachable
from .lowering import Lowerer
from .nodes import CompilerGraph

__all__ = ["build_graph"]


def build_graph(sop: SOp, vocab, max_seq_len: int, causal: bool = False, *,
                value_sets: ValueSets) -> CompilerGraph:
    """Lower the IR rooted at ``sop`` to a :class:`~compiler.graph.nodes.CompilerGraph`.

    Args:
        value_sets: the result of the value-set pass
            (:func:`compiler.basis_inference.infer_bases` for the same ``sop``, ``vocab``,
            ``max_seq_len`` and ``causal``); required, never recomputed here.

    Raises :class:`~compiler.errors.UnsupportedError` naming the operation, its
    ``line:column`` and why, or :class:`~compiler.errors.CompilerError`."""
    if not isinstance(sop, SOp):
        raise CompilerError(f"compile_program expects an s-op, got {type(sop).__name__}")
    if not isinstance(value_sets, ValueSets):
        raise CompilerError("build_graph needs the value sets of the program "
                            "(compiler.basis_inference.infer_bases)")
    low = Lowerer(vocab, max_seq_len, causal, value_sets)
    out = low.lower(sop)
    extra = tuple(low.extra_roots)
    nodes = reachable(out, extra)
    numerical_where_smaller(nodes, out, extra)
    fuse(nodes, out, extra)
    convert_extra_numericals(low.categorical, nodes)
    nodes = reachable(out, extra)
    g = nx.DiGraph()
    for n in nodes:
        g.add_node(n.name, cnode=n)
    for n in nodes:
        for d in n.deps():
            g.add_edge(d.name, n.name)
    order = [g.nodes[x]["cnode"] for x in nx.topological_sort(g)]
    return CompilerGraph(g, order, out, causal, max_seq_len, low.warnings, low.typing)

