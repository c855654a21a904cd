"""Stage 5: layer allocation.

Each compiler node gets a *slot*: slot ``2l`` is the attention sublayer of layer ``l``, slot
``2l + 1`` its MLP. Embedded nodes (tokens, indices, constants) have slot -1. A node is placed
in the earliest slot of its kind after all the nodes it reads (longest path from the inputs,
computed with ``networkx``), so attention comes before the MLP within a layer, independent ops
share a layer, and a layer holds only the heads and MLP units it needs (no padding to the
widest layer: Tracr's failure mode 10).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from .graph.nodes import CNode, CompilerGraph

__all__ = ["LayerPlan", "allocate_layers"]


@dataclass
class LayerPlan:
    """``heads[l]`` and ``mlps[l]``: the nodes computed by layer ``l``; ``slot[name]``."""

    n_layers: int
    heads: list = field(default_factory=list)
    mlps: list = field(default_factory=list)
    slot: dict = field(default_factory=dict)


def allocate_layers(cg: CompilerGraph) -> LayerPlan:
    """Assign every node of ``cg`` to a layer (see module docstring)."""
    slot: dict[str, int] = {}
    g = cg.graph
    for name in nx.topological_sort(g):
        n: CNode = g.nodes[name]["cnode"]
        if n.is_embedded:
            slot[name] = -1
            continue
        after = max([slot[p] for p in g.predecessors(name)] + [-1])
        s = after + 1
        want_even = n.is_attention
        if (s % 2 == 0) != want_even:
            s += 1
        slot[name] = s
    top = max(slot.values()) if slot else -1
    n_layers = max((top + 2) // 2, 1 if top >= 0 else 0)
    heads = [[] for _ in range(n_layers)]
    mlps = [[] for _ in range(n_layers)]
    for name, s in slot.items():
        if s < 0:
            continue
        n = g.nodes[name]["cnode"]
        (heads if s % 2 == 0 else mlps)[s // 2].append(n)
    for hs in heads:            # check heads (read only by the runtime checks) last
        hs.sort(key=lambda n: n.is_check)
    return LayerPlan(n_layers, heads, mlps, slot)
