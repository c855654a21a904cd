"""Stage 3: residual-space allocation.

Every compiler node gets its own subspace of the residual stream, labelled as in Tracr:

* ``one``: a constant 1 at every position (written by every token embedding): biases are
  read from it, so the model needs no bias parameters;
* ``bos``: 1 at the BOS token (position 0) only: attention heads put their default on it,
  every MLP unit is switched off by it;
* ``pad``: 1 at PAD tokens only: every head gives PAD keys a large negative logit;
* a categorical s-op ``x`` with values ``v1..vk``: directions ``x:v1`` ... ``x:vk``;
* a numerical s-op ``x``: one direction ``x``;
* a constant s-op (``full``) uses the ``one`` direction itself (no dimension);
* ``x!error``: 1 where the MLP of ``x`` met input values its function fails on (the
  interpreter raises there; the compiled model raises too).

:class:`ResidualSpace` maps ``(node, value)`` to a direction index and keeps the labels.
"""

from __future__ import annotations

from typing import Any

from .encoding import CATEGORICAL
from .graph.nodes import CNode

__all__ = ["ResidualSpace", "value_label"]


def value_label(v: Any) -> str:
    """The text of a value in a residual label (``tokens:a``, ``hist:3``, ``frac:0.5``)."""
    if isinstance(v, float) and v.is_integer():
        return repr(v)
    return str(v)


class ResidualSpace:
    """Residual directions with labels. ``ONE``, ``BOS``, ``PAD`` are directions 0, 1, 2."""

    ONE, BOS, PAD = 0, 1, 2

    def __init__(self, nodes: list[CNode]):
        self.labels: list[str] = ["one", "bos", "pad"]
        self.cat: dict[str, dict[Any, int]] = {}
        self.num: dict[str, int] = {}
        #: ``{name: direction}`` of the error flag of an MLP whose function fails (the
        #: interpreter raises) on some combination of its input values
        self.err: dict[str, int] = {}
        for n in nodes:
            if n.kind == "full":
                self.cat[n.name] = {n.value: self.ONE}
            elif n.encoding == CATEGORICAL:
                d = {}
                for v in n.values:
                    if v in d:   # 1 == 1.0 == True: one direction
                        continue
                    d[v] = len(self.labels)
                    self.labels.append(f"{n.name}:{value_label(v)}")
                self.cat[n.name] = d
            else:
                self.num[n.name] = len(self.labels)
                self.labels.append(n.name)
            if n.kind == "mlp" and n.error is not None:
                self.err[n.name] = len(self.labels)
                self.labels.append(f"{n.name}!error")

    @property
    def d_model(self) -> int:
        return len(self.labels)

    def dirs(self, node: CNode) -> dict[Any, int]:
        """``{value: direction}`` of a categorical node."""
        return self.cat[node.name]

    def dir(self, node: CNode, value: Any = None) -> int:
        """The direction of ``node`` (numerical) or of ``node == value`` (categorical)."""
        if node.name in self.num:
            return self.num[node.name]
        return self.cat[node.name][value]

    def is_categorical(self, node: CNode) -> bool:
        return node.name in self.cat

    def node_slice(self, node: CNode) -> list[int]:
        """All directions of ``node``."""
        if node.name in self.num:
            return [self.num[node.name]]
        return list(self.cat[node.name].values())
