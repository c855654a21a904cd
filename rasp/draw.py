"""``draw``: the computation flow of an s-op or selector as a picture, as the original RASP REPL
draws it (Weiss et al. 2021: one box per operation, its value on the example, and each
selector's attention matrix).

The graph is the IR DAG (networkx), laid out left to right by depth (the longest path from an
input: ``networkx.topological_generations``); every s-op box shows its value on the example,
every selector its ``[query, key]`` matrix (1 where selected) as a small heatmap with the
example's tokens on both axes, and every aggregate its reduction. matplotlib draws it; the
result is an SVG or PNG file, and :func:`svg` gives the SVG text that notebooks show inline
(``SOp._repr_svg_`` / ``Selector._repr_svg_`` call it).

matplotlib and networkx are imported when a picture is drawn, never when ``rasp`` is imported.
"""

from __future__ import annotations

import io
import os
from typing import Any

from .errors import RASPTypeError
from .interpreter import Evaluator
from .ir import Aggregate, Node, Select, Selector, topological_order

__all__ = ["draw_figure", "draw_file", "svg", "DEFAULT_EXAMPLE"]

#: the example a picture uses when none is given (the REPL's default running example)
DEFAULT_EXAMPLE = "hello"

_MAX_NODES = 60          # larger programs: the picture would be unreadable; say so


def _sequence(example: Any) -> list:
    if isinstance(example, str):
        return list(example)
    if isinstance(example, (list, tuple)):
        return list(example)
    raise RASPTypeError(f"draw input must be a string or a list, got {type(example).__name__}")


def _short(v) -> str:
    if isinstance(v, bool):
        return "T" if v else "F"
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def draw_figure(node: Node, example: Any = DEFAULT_EXAMPLE):
    """A matplotlib figure of ``node``'s computation flow on ``example``.

    Args:
        node: an s-op or selector (an IR node).
        example: one input sequence (a string or a list of atoms).

    Returns:
        a ``matplotlib.figure.Figure`` (the caller saves or closes it).

    Raises:
        RASPTypeError: ``node`` is not an IR node, or the example is not a sequence.
        RASPError: the program fails on the example (as the interpreter raises).
    """
    import matplotlib
    if "inline" not in matplotlib.get_backend().lower():
        matplotlib.use("Agg")          # files only: never open a window
    import matplotlib.pyplot as plt
    import networkx as nx
    import numpy as np

    if not isinstance(node, Node):
        raise RASPTypeError(f"draw expects an s-op or selector, got {type(node).__name__}")
    seq = _sequence(example)
    ev = Evaluator([seq])
    ev(node)
    order = topological_order(node)
    if len(order) > _MAX_NODES:
        raise RASPTypeError(f"draw: {len(order)} operations are too many for one picture "
                            f"(at most {_MAX_NODES}); draw a sub-expression, or use "
                            "rasp.display.draw_text")
    g = nx.DiGraph()
    for n in order:
        g.add_node(n.id)
        for c in n.children:
            g.add_edge(c.id, n.id)
    depth = {}
    for d, layer in enumerate(nx.topological_generations(g)):
        for i in layer:
            depth[i] = d
    columns: dict[int, list[Node]] = {}
    for n in order:
        columns.setdefault(depth[n.id], []).append(n)
    ncol, nrow = len(columns), max(len(c) for c in columns.values())
    cell_w, cell_h = 3.2, 2.0
    fig = plt.figure(figsize=(max(4.0, cell_w * ncol), max(2.5, cell_h * nrow)))
    pos = {}
    for d, col in columns.items():
        for r, n in enumerate(col):
            # centre of the box in figure fractions
            pos[n.id] = ((d + 0.5) / ncol, 1.0 - (r + 0.5) / nrow)
    bw, bh = 0.8 / ncol, 0.7 / nrow
    overlay = fig.add_axes([0, 0, 1, 1])
    overlay.set_axis_off()
    overlay.set_xlim(0, 1)
    overlay.set_ylim(0, 1)
    for a, b in g.edges():
        (x0, y0), (x1, y1) = pos[a], pos[b]
        overlay.annotate("", xy=(x1 - bw / 2, y1), xytext=(x0 + bw / 2, y0),
                         arrowprops={"arrowstyle": "->", "color": "#888888", "lw": 0.8},
                         zorder=0)
    for n in order:
        x, y = pos[n.id]
        val = ev.values[n.id][0]
        title = n.label if len(n.label) <= 28 else n.label[:25] + "..."
        kind = type(n).__name__
        if isinstance(n, Aggregate):
            kind += f" ({n.reduction})"
        if isinstance(n, Select) and n.causal:
            kind += " [causal]"
        if isinstance(n, Selector):
            ax = fig.add_axes([x - bw / 2, y - bh / 2, bw, bh * 0.78])
            mat = np.asarray(val, dtype=float)
            ax.imshow(mat, cmap="Greens", vmin=0, vmax=1, interpolation="nearest")
            ticks = [_short(t) for t in seq]
            size = 7 if len(seq) <= 12 else 5
            ax.set_xticks(range(len(seq)))
            ax.set_xticklabels(ticks, fontsize=size)
            ax.set_yticks(range(len(seq)))
            ax.set_yticklabels(ticks, fontsize=size)
            ax.set_title(f"{title}\n{kind}: [query, key]", fontsize=8)
        else:
            text = " ".join(_short(v) for v in np.asarray(val).tolist())
            if len(text) > 40:
                text = text[:37] + "..."
            colour = "#fde0c5" if kind.startswith(("Aggregate", "SelectorWidth")) else \
                "#dbe9f6" if kind in ("Map", "SequenceMap") else "#eeeeee"
            overlay.add_patch(matplotlib.patches.FancyBboxPatch(
                (x - bw / 2, y - bh / 2), bw, bh, boxstyle="round,pad=0.005", fc=colour,
                ec="#555555", lw=0.8, zorder=2))
            overlay.text(x, y + bh * 0.22, title, ha="center", va="center", fontsize=8,
                         weight="bold", zorder=3)
            overlay.text(x, y, kind, ha="center", va="center", fontsize=7, color="#444444",
                         zorder=3)
            overlay.text(x, y - bh * 0.25, f"[{text}]", ha="center", va="center",
                         fontsize=7, family="monospace", zorder=3)
    fig.suptitle(f"{node.label} on {''.join(map(str, seq)) if isinstance(example, str) else seq}",
                 fontsize=9, y=0.995)
    return fig


def draw_file(node: Node, path: str | os.PathLike, example: Any = DEFAULT_EXAMPLE) -> str:
    """Write the picture to ``path`` (``.svg`` or ``.png``, by its suffix) and return the path.

    Raises:
        RASPTypeError: as :func:`draw_figure`, or a suffix other than .svg / .png.
        OSError: the file cannot be written.
    """
    import matplotlib.pyplot as plt
    path = os.fspath(path)
    if not path.endswith((".svg", ".png")):
        raise RASPTypeError(f"draw: write a .svg or .png file, not {path!r}")
    fig = draw_figure(node, example)
    try:
        fig.savefig(path, dpi=110, bbox_inches="tight")
    finally:
        plt.close(fig)
    return path


def svg(node: Node, example: Any = DEFAULT_EXAMPLE) -> str:
    """The picture as SVG text (what a notebook shows inline)."""
    import matplotlib.pyplot as plt
    fig = draw_figure(node, example)
    buf = io.StringIO()
    try:
        fig.savefig(buf, format="svg", bbox_inches="tight")
    finally:
        plt.close(fig)
    return buf.getvalue()
