"""Stage 2 of the compiler: the graph (Tracr's ``rasp_to_graph`` and what it is made of).

:func:`build_graph` (:mod:`compiler.graph.rasp_to_graph`) turns the IR, with its value sets
(stage 1), into a :class:`CompilerGraph` of compiler nodes, using:

* :mod:`compiler.graph.nodes` -- the node types (``CNode``, ``Factor``, ``SelectorSpec``,
  ``CompilerGraph``);
* :mod:`compiler.graph.expr` -- ``Expr``, what one MLP computes (its affine form, steps,
  ternary branches);
* :mod:`compiler.graph.lowering` -- ``Lowerer``: IR nodes -> compiler nodes, with the rewrites;
* :mod:`compiler.graph.passes` -- the passes in ``build_graph``'s order: the encoding pass,
  fusion, conversions of extra numerical inputs;
* :mod:`compiler.graph.mlp_pricing` -- the hidden units and non-zero weights an MLP will need,
  a head's size, and the lookup tables' decision tree (``lookup_cubes``) the builder follows.

Imports run one way: ``nodes`` and ``mlp_pricing`` read ``expr``; ``lowering`` and ``passes``
read those three; ``rasp_to_graph`` reads ``lowering`` and ``passes``. Later stages read
``nodes``, ``expr`` and ``mlp_pricing``, never ``rasp_to_graph``.
"""

from .nodes import CNode, CompilerGraph, Factor, SelectorSpec
from .rasp_to_graph import build_graph

__all__ = ["build_graph", "CompilerGraph", "CNode", "Factor", "SelectorSpec"]
