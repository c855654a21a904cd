"""Program measures: length, attention / MLP operations, layers and heads per layer.

Every measure is computed on the IR after common-subexpression elimination (:func:`cse`), with
library calls already expanded (the IR holds no calls).

* **length** (Zhou et al. 2023, "What Algorithms can Transformers Learn?", the RASP-Generalization
  Conjecture): the number of operation nodes reachable from the output: selects (and selector
  combinations ``and`` / ``or`` / ``not``), aggregates (any reduction), selector widths, maps,
  sequence maps and constant s-ops (:class:`~rasp.ir.Full`, one per distinct constant: an atom
  broadcast into a ``select`` such as ``select(indices, 0, ==)`` is a constant s-op).
  ``tokens``, ``indices`` and literals inside elementwise functions or defaults do not count.
  The built-in ``length`` counts as it costs in the original RASP library: one select (all
  true) plus one selector width, i.e. 2 operations, 1 attention op, 1 head in layer 1.
* **attention ops** = aggregates + selector widths (+1 for the built-in ``length``);
  **MLP ops** = maps + sequence maps.
* **layers** and **heads per layer** as the original RASP analyser computes them (Weiss et al.
  2021; tech-srl/RASP ``RASP_support/analyse.py`` with the depths of ``FunctionalSupport.py``):
  ``tokens``, ``indices`` and constants are at depth 0; a select is one deeper than the deepest
  s-op it compares; a selector combination is a select of all its parts' s-ops (so its depth is
  the deepest part's); an aggregate is at ``max(depth(select), depth(values) + 1)``; a selector
  width (a primitive here) at the depth of its select; elementwise work (maps, sequence maps)
  folds into the layer of its deepest input (the MLP after that layer's attention, or the
  embedding for depth 0). ``layers`` is the largest depth; the heads of a layer are the distinct
  selectors (after CSE) read by the aggregates and selector widths at that depth.

Public API: :func:`cse`, :func:`measure` (-> :class:`Measures`), :func:`depths`,
:func:`layer_table` (-> list of :class:`LayerInfo`), :func:`format_layer_table`,
and :func:`rasp.source.describe_node` (an operation in one line).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..source import describe_node
from ..ir import (Aggregate, Full, Indices, Length, Map, Node, RASPTypeError, Select,
                 SelectorAnd, SelectorNot, SelectorOr, SelectorWidth, SequenceMap, SOp, Tokens,
                 topological_order)

__all__ = ["cse", "measure", "Measures", "depths", "layer_table", "LayerInfo", "HeadInfo",
           "format_layer_table"]


# --------------------------------------------------------------------------------------------
# Common-subexpression elimination
# --------------------------------------------------------------------------------------------

def _child_attrs(node: Node) -> list[str]:
    """Names of the attributes holding a node's children (in ``children`` order)."""
    if isinstance(node, Map):
        return ["inner"]
    if isinstance(node, Select):
        return ["keys", "queries"]
    if isinstance(node, (SelectorAnd, SelectorOr)):
        return ["a", "b"]
    if isinstance(node, SelectorNot):
        return ["a"]
    if isinstance(node, Aggregate):
        return ["selector", "values"]
    if isinstance(node, SelectorWidth):
        return ["selector"]
    return []


def _node_key(node: Node) -> tuple:
    key = node.key()
    # `key()` of s-ops of the same structure may collide across node classes only when the
    # kinds agree; prefix the class to be safe.
    return (type(node).__name__,) + tuple(key)


def cse(sop: Node) -> Node:
    """Common-subexpression elimination: an equivalent DAG where structurally equal nodes are
    one node.

    Two nodes are equal when their :meth:`~rasp.ir.Node.key` agree after their children have
    been canonicalised (so ``select(tokens, tokens, ==)`` written twice is one select, and the
    two ``tokens`` objects ``tokens_str`` / a parser's ``tokens`` are one node). Nodes whose
    children are already canonical are reused as they are (same object, name and span); others
    are shallow copies with a fresh id, keeping name, span and annotations. The input DAG is
    not modified.

    Args:
        sop: an s-op or selector (the output of the program).
    Returns:
        the canonical node for ``sop`` (an s-op or selector of the same value on every input).
    Raises:
        RASPTypeError: ``sop`` is not an IR node.
    """
    if not isinstance(sop, Node):
        raise RASPTypeError(f"cse expects an s-op or selector, got {type(sop).__name__}")
    canon: dict[int, Node] = {}          # original id -> canonical node
    by_key: dict[tuple, Node] = {}
    for n in topological_order(sop):
        attrs = _child_attrs(n)
        if isinstance(n, SequenceMap):
            new_inputs = tuple(canon[c.id] for c in n.inputs)
            changed = any(a is not b for a, b in zip(new_inputs, n.inputs))
        else:
            new_children = [canon[getattr(n, a).id] for a in attrs]
            changed = any(c is not getattr(n, a) for c, a in zip(new_children, attrs))
        cand = n
        if changed:
            cand = n.copy()
            if isinstance(n, SequenceMap):
                cand.inputs = new_inputs
            else:
                for a, c in zip(attrs, new_children):
                    setattr(cand, a, c)
        k = _node_key(cand)
        existing = by_key.get(k)
        if existing is None:
            by_key[k] = cand
            canon[n.id] = cand
        else:
            canon[n.id] = existing   # the first occurrence keeps its name and span
    return canon[sop.id]


# --------------------------------------------------------------------------------------------
# Depths (the original analyser's min_poss_depth)
# --------------------------------------------------------------------------------------------

def depths(sop: Node, *, already_cse: bool = False) -> dict[int, int]:
    """The layer of every node, as the original RASP analyser schedules it (greedy, earliest).

    Returns ``{node id: depth}`` for the nodes of ``cse(sop)`` (or of ``sop`` itself when
    ``already_cse``). Depth 0 is the input embedding (``tokens``, ``indices``, constants and
    elementwise work on them); depth ``d >= 1`` is transformer layer ``d`` (its attention, then
    its MLP).
    """
    root = sop if already_cse else cse(sop)
    d: dict[int, int] = {}
    for n in topological_order(root):
        if isinstance(n, (Tokens, Indices, Full)):
            d[n.id] = 0
        elif isinstance(n, Length):
            d[n.id] = 1
        elif isinstance(n, (Map, SequenceMap)):
            d[n.id] = max((d[c.id] for c in n.children), default=0)
        elif isinstance(n, Select):
            d[n.id] = max(d[n.keys.id], d[n.queries.id]) + 1
        elif isinstance(n, (SelectorAnd, SelectorOr, SelectorNot)):
            d[n.id] = max(d[c.id] for c in n.children)
        elif isinstance(n, Aggregate):
            d[n.id] = max(d[n.selector.id], d[n.values.id] + 1)
        elif isinstance(n, SelectorWidth):
            d[n.id] = d[n.selector.id]
        else:  # unknown node kinds: no extra layer
            d[n.id] = max((d[c.id] for c in n.children), default=0)
    return d


# --------------------------------------------------------------------------------------------
# Descriptions
# --------------------------------------------------------------------------------------------

# --------------------------------------------------------------------------------------------
# Measures
# --------------------------------------------------------------------------------------------

@dataclass
class Measures:
    """The measures of a program (see the module docstring for the definitions).

    Fields: ``length`` (operations), ``attention_ops`` (aggregates + selector widths),
    ``mlp_ops`` (maps + sequence maps), ``selects`` (select nodes, incl. the built-in
    ``length``'s), ``selector_combinations`` (``and``/``or``/``not`` of selectors),
    ``aggregates``, ``selector_widths`` (incl. the built-in ``length``), ``maps``,
    ``sequence_maps``, ``constants`` (constant s-ops), ``layers`` (original analyser's depth),
    ``heads_per_layer`` (one entry per layer 1..layers), ``max_heads``.
    """

    length: int
    attention_ops: int
    mlp_ops: int
    selects: int
    aggregates: int
    selector_widths: int
    maps: int
    sequence_maps: int
    layers: int
    heads_per_layer: list[int] = field(default_factory=list)
    max_heads: int = 0
    selector_combinations: int = 0
    constants: int = 0
    uses_length: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of every field."""
        d = asdict(self)
        d["heads_per_layer"] = list(self.heads_per_layer)
        return d


def measure(sop: Node) -> Measures:
    """Measure a program: length, attention / MLP ops, layers, heads per layer.

    Args:
        sop: the program's output s-op (or a selector).
    Returns:
        :class:`Measures` computed on ``cse(sop)``.
    Raises:
        RASPTypeError: ``sop`` is not an IR node.

    Source: Zhou et al. 2023 (program length), Weiss et al. 2021 / tech-srl/RASP ``analyse.py``
    (layers and heads).
    """
    root = cse(sop)
    nodes = topological_order(root)
    counts = {"select": 0, "comb": 0, "aggregate": 0, "sw": 0, "map": 0, "smap": 0, "full": 0}
    uses_length = False
    for n in nodes:
        if isinstance(n, Select):
            counts["select"] += 1
        elif isinstance(n, (SelectorAnd, SelectorOr, SelectorNot)):
            counts["comb"] += 1
        elif isinstance(n, Aggregate):
            counts["aggregate"] += 1
        elif isinstance(n, SelectorWidth):
            counts["sw"] += 1
        elif isinstance(n, Map):
            counts["map"] += 1
        elif isinstance(n, SequenceMap):
            counts["smap"] += 1
        elif isinstance(n, Full):
            counts["full"] += 1
        elif isinstance(n, Length):
            uses_length = True
    selects = counts["select"] + (1 if uses_length else 0)
    sws = counts["sw"] + (1 if uses_length else 0)
    table = layer_table(root, already_cse=True)
    heads = [len(layer.heads) for layer in table if layer.index >= 1]
    length = (selects + counts["comb"] + counts["aggregate"] + sws + counts["map"]
              + counts["smap"] + counts["full"])
    return Measures(
        length=length,
        attention_ops=counts["aggregate"] + sws,
        mlp_ops=counts["map"] + counts["smap"],
        selects=selects,
        aggregates=counts["aggregate"],
        selector_widths=sws,
        maps=counts["map"],
        sequence_maps=counts["smap"],
        layers=len(heads),
        heads_per_layer=heads,
        max_heads=max(heads, default=0),
        selector_combinations=counts["comb"],
        constants=counts["full"],
        uses_length=uses_length,
    )


# --------------------------------------------------------------------------------------------
# Layer table
# --------------------------------------------------------------------------------------------

@dataclass
class HeadInfo:
    """One attention head: the selector it reads (``selector`` label, ``description``) and the
    s-ops it produces (``outputs``: labels of aggregates / selector widths)."""

    selector: str
    description: str
    outputs: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class LayerInfo:
    """One layer of the schedule: ``index`` (0 = embedding, no heads), ``heads``
    (:class:`HeadInfo`), ``mlps`` (labels of the maps / sequence maps computed in the layer's
    MLP) and ``mlp_descriptions`` (their readable forms)."""

    index: int
    heads: list[HeadInfo] = field(default_factory=list)
    mlps: list[str] = field(default_factory=list)
    mlp_descriptions: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "heads": [h.to_dict() for h in self.heads],
                "mlps": list(self.mlps), "mlp_descriptions": list(self.mlp_descriptions)}


def layer_table(sop: Node, *, already_cse: bool = False) -> list[LayerInfo]:
    """The layer diagram of a program, as the original RASP analyser schedules it.

    Returns a list of :class:`LayerInfo` for layers ``0 .. layers`` (always at least layer 0,
    the embedding: elementwise work on ``tokens`` / ``indices`` / constants, never heads). Layer
    ``d >= 1`` lists its heads (one per distinct selector read by the aggregates and selector
    widths at depth ``d``; the built-in ``length`` is a head of layer 1 named ``length``) and
    the maps / sequence maps in its MLP. Used by the REPL and the HTML report.
    """
    root = sop if already_cse else cse(sop)
    d = depths(root, already_cse=True)
    nodes = topological_order(root)
    n_layers = max((d[n.id] for n in nodes if isinstance(n, SOp)), default=0)
    layers = [LayerInfo(index=i) for i in range(n_layers + 1)]
    head_index: dict[tuple[int, Any], HeadInfo] = {}
    for n in nodes:
        if isinstance(n, (Aggregate, SelectorWidth)):
            layer = d[n.id]
            key = (layer, n.selector.id)
            head = head_index.get(key)
            if head is None:
                head = HeadInfo(selector=n.selector.label, description=describe_node(n.selector))
                head_index[key] = head
                layers[layer].heads.append(head)
            head.outputs.append(n.label)
        elif isinstance(n, Length):
            key = (1, "length")
            head = head_index.get(key)
            if head is None:
                head = HeadInfo(selector="length", description="selector_width(select(TRUE))")
                head_index[key] = head
                layers[1].heads.append(head)
            head.outputs.append(n.label)
        elif isinstance(n, (Map, SequenceMap)):
            layers[d[n.id]].mlps.append(n.label)
            layers[d[n.id]].mlp_descriptions.append(describe_node(n))
    return layers


def format_layer_table(sop: Node) -> str:
    """The layer diagram as text, one line per layer, e.g.::

        layer 0 (embedding): mlp: ...
        layer 1: 1 head: [select(tokens, tokens, ==) -> hist]; mlp: -
    """
    lines = []
    for layer in layer_table(sop):
        mlp = ", ".join(layer.mlp_descriptions) if layer.mlps else "-"
        if layer.index == 0:
            lines.append(f"layer 0 (embedding): mlp: {mlp}")
            continue
        heads = "; ".join(f"{h.description} -> {', '.join(h.outputs)}" for h in layer.heads)
        n = len(layer.heads)
        lines.append(f"layer {layer.index}: {n} head{'s' if n != 1 else ''}: [{heads}]; "
                     f"mlp: {mlp}")
    return "\n".join(lines)
