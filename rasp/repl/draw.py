"""``draw``: the computation flow of an s-op or selector as a picture, as the original RASP REPL
draws it (Weiss et al. 2021: one box per operation, its value on the example, and each
selector's attention matrix).

The graph is the IR DAG. Its layout is a layered (Sugiyama) drawing made by the ``grandalf``
library: inputs at the top, each operation below what it reads, the order within a layer chosen
to reduce crossings, and an edge that spans several layers routed through reserved gaps of the
layers it passes (never across a box); arrows end at box borders. Every box is labelled with
the operation's expression as the REPL writes it (``length - indices``,
``select(indices, opp_index, ==)``; a named operation also shows its name), its kind and its
value on the example; every selector shows its ``[query, key]`` matrix (1 where selected) as a
small heatmap with the example's tokens on both axes. matplotlib draws it, without pyplot (no
window, no global figure list).

:func:`draw` is the entry point (``rasp.draw``, ``sop.draw()``): a :class:`Drawing` that a
notebook shows inline, or a ``.svg`` / ``.png`` file. :func:`svg` gives the SVG text that
notebooks show for an s-op. matplotlib and grandalf are imported when a picture is drawn, never
when ``rasp`` is imported.
"""

from __future__ import annotations

import io
import os
import textwrap
from dataclasses import dataclass
from typing import Any

from ..source import describe_node
from ..errors import RASPTypeError
from ..interpreter import Evaluator
from ..ir import Aggregate, Node, Select, Selector, topological_order
import numpy as np

__all__ = ["draw", "Drawing", "draw_figure", "draw_file", "svg", "flow_layout", "FlowLayout",
           "node_title", "DEFAULT_EXAMPLE"]

#: the example a picture uses when none is given (the REPL's default running example)
DEFAULT_EXAMPLE = "hello"

_MAX_NODES = 60          # larger programs: the picture would be unreadable; say so

# sizes in inches (the figure's data coordinates are inches)
_CHAR_W = 0.066          # one character at 7.5 pt
_LINE_H = 0.15
_WRAP = 40               # characters per line of a box's text
_GAP_X, _GAP_Y = 0.35, 0.5


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


def node_title(n: Node) -> tuple[str, str | None]:
    """How a box names an operation: ``(title, expression)``. The title is the name for a
    named operation (its expression second, ``None`` when it is the name itself, as for
    ``tokens``), else the expression as the REPL's ``draw`` text writes it
    (:func:`rasp.source.describe_node`), e.g. ``("length - indices", None)``."""
    expr = describe_node(n, 3)
    if n.name is not None:
        return n.name, (expr if expr != n.name else None)
    return expr, None


def _kind(n: Node) -> str:
    kind = type(n).__name__
    if isinstance(n, Aggregate):
        kind += f" ({n.reduction})"
    if isinstance(n, Select) and n.causal:
        kind += " [causal]"
    return kind


def _lines(text: str, most: int = 3) -> list[str]:
    """``text`` wrapped at :data:`_WRAP` characters, at most ``most`` lines (the last ending
    in "..." when cut)."""
    lines = textwrap.wrap(text, _WRAP, break_on_hyphens=False) or [""]
    if len(lines) > most:
        lines = lines[:most]
        lines[-1] = lines[-1][: _WRAP - 4] + " ..."
    return lines


class _Box:
    """One operation's box: its text lines and its size in inches (grandalf reads ``w``,
    ``h`` and writes ``xy``, the centre)."""

    def __init__(self, node: Node, value, seq: list):
        self.node = node
        title, expr = node_title(node)
        self.title = _lines(title)
        self.expr = _lines("= " + expr) if expr else []
        self.kind = _kind(node) + (": [query, key]" if isinstance(node, Selector) else "")
        self.selector = isinstance(node, Selector)
        if self.selector:
            self.matrix = value
            self.value = []
            self.heat = 0.55 + 0.16 * len(seq)           # the heatmap's side, tick labels in
        else:
            self.value = _lines("[" + " ".join(_short(v) for v in value.tolist()) + "]")
            self.heat = 0.0
        lines = self.title + self.expr + [self.kind] + self.value
        self.n_lines = len(lines)
        self.w = max(1.3, _CHAR_W * max(map(len, lines)) + 0.3, self.heat + 0.2)
        self.h = _LINE_H * self.n_lines + 0.2 + self.heat
        self.xy = (0.0, 0.0)


class _View:
    """A vertex's or an edge's view for grandalf, in hundredths of an inch (grandalf's
    routing rounds box sizes to whole units): ``w``, ``h``, ``xy`` (the centre); an edge's
    route arrives through :meth:`setpath`."""

    def __init__(self, w: float = 0.0, h: float = 0.0):
        self.w, self.h, self.xy = w * _UNITS, h * _UNITS, (0.0, 0.0)
        self.points: list = []

    def setpath(self, pts):
        self.points = [(x / _UNITS, y / _UNITS) for x, y in pts]


_UNITS = 100


def _layout(boxes: dict[int, _Box], edges: list[tuple[int, int]]) -> dict:
    """Sugiyama layout (grandalf): sets each box's centre ``xy`` (inches, y downwards by
    layer) and returns each edge's route ``{(a, b): [(x, y), ...]}`` (inches). A route leaves
    its box straight down to the bottom of the box's layer, crosses the gap between two layers
    in a straight line, passes a layer it spans straight down through the slot grandalf
    reserved there, and enters its target straight down from the top of the target's layer:
    its slanted parts lie in the gaps between layers, where no box is."""
    # start-up: grandalf loads only when this runs
    from grandalf.graphs import Edge, Graph, Vertex
    from grandalf.layouts import SugiyamaLayout

    verts = {i: Vertex(i) for i in boxes}
    for i, v in verts.items():
        v.view = _View(boxes[i].w, boxes[i].h)
    es = {}
    for a, b in edges:
        e = es[(a, b)] = Edge(verts[a], verts[b])
        e.view = _View()
    g = Graph(list(verts.values()), list(es.values()))
    x_off = 0.0
    for comp in g.C:                     # one component per output (normally one)
        sug = SugiyamaLayout(comp)
        sug.xspace, sug.yspace = _GAP_X * _UNITS, _GAP_Y * _UNITS
        sug.route_edge = lambda e, pts: None          # routed below
        sug.init_all(roots=[v for v in comp.sV if not v.e_in()], inverted_edges=[])
        sug.draw(3)
        left = min(v.view.xy[0] - v.view.w / 2 for v in comp.sV) / _UNITS
        for v in comp.sV:
            boxes[v.data].xy = (v.view.xy[0] / _UNITS - left + x_off, v.view.xy[1] / _UNITS)
        for e in comp.sE:
            e.view.points = [(x - left + x_off, y) for x, y in e.view.points]
        x_off = max(b.xy[0] + b.w / 2 for b in boxes.values()) + _GAP_X
    half: dict[float, float] = {}        # a layer's centre line -> half its height
    for b in boxes.values():
        key = round(b.xy[1], 6)
        half[key] = max(half.get(key, 0.0), b.h / 2)
    # ports: a box's edges leave (enter) it side by side along its bottom (top), in the
    # order of the x of the next (previous) point of their routes, so they do not cross there
    def ports(ends, box, nxt):
        ends = sorted(ends, key=nxt)
        step = min(0.22, box.w / (len(ends) + 1))
        return {k: box.xy[0] + (i - (len(ends) - 1) / 2) * step for i, k in enumerate(ends)}
    out_x, in_x = {}, {}
    for i, box in boxes.items():
        outs = [k for k in es if k[0] == i]
        ins = [k for k in es if k[1] == i]
        out_x.update(ports(outs, box, lambda k: es[k].view.points[1][0]))
        in_x.update(ports(ins, box, lambda k: es[k].view.points[-2][0]))
    routes = {}
    for (a, b), e in es.items():
        pts = e.view.points
        src, dst = boxes[a], boxes[b]
        sx, tx = out_x[(a, b)], in_x[(a, b)]
        route = [(sx, src.xy[1] + src.h / 2), (sx, src.xy[1] + half[round(src.xy[1], 6)])]
        for x, y in pts[1:-1]:           # grandalf's slots in the layers the edge spans
            h = half.get(round(y, 6), 0.0)
            route += [(x, y - h), (x, y + h)]
        route += [(tx, dst.xy[1] - half[round(dst.xy[1], 6)]), (tx, dst.xy[1] - dst.h / 2)]
        routes[(a, b)] = list(dict.fromkeys(route))
    return routes


@dataclass
class FlowLayout:
    """Where a picture puts everything, in inches, y upwards (the figure's coordinates).

    Attributes:
        size: ``(width, height)`` of the figure.
        boxes: ``{node id: (x0, y0, x1, y1)}``, one rectangle per operation.
        routes: ``{(from id, to id): [(x, y), ...]}``, one polyline per edge of the DAG (an
            operation's input to the operation), from the border of one box to the other's.
        nodes: ``{node id: Node}``, in dependency order.
    """

    size: tuple[float, float]
    boxes: dict[int, tuple[float, float, float, float]]
    routes: dict[tuple[int, int], list[tuple[float, float]]]
    nodes: dict[int, Node]


def _flow(node: Node, example: Any):
    """Evaluate ``node`` on ``example`` and lay its DAG out: ``(seq, boxes, layout)``."""
    if not isinstance(node, Node):
        raise RASPTypeError(f"draw expects an s-op or selector, got {type(node).__name__}")
    seq = _sequence(example)
    ev = Evaluator([seq])
    ev(node)
    order = topological_order(node)
    if len(order) > _MAX_NODES:
        raise RASPTypeError(f"draw: {len(order)} operations are too many for one picture "
                            f"(at most {_MAX_NODES}); draw a sub-expression, or use "
                            "rasp.repl.display.draw_text")
    boxes = {n.id: _Box(n, np.asarray(ev.values[n.id][0]), seq) for n in order}
    edges = list(dict.fromkeys((c.id, n.id) for n in order for c in n.children))
    routes = _layout(boxes, edges)
    # grandalf's layers go down; the figure's y goes up
    margin = 0.25
    x0 = min(b.xy[0] - b.w / 2 for b in boxes.values()) - margin
    x1 = max(b.xy[0] + b.w / 2 for b in boxes.values()) + margin
    y0 = min(b.xy[1] - b.h / 2 for b in boxes.values()) - margin - 0.25    # the caption
    y1 = max(b.xy[1] + b.h / 2 for b in boxes.values()) + margin
    for b in boxes.values():
        b.xy = (b.xy[0] - x0, y1 - b.xy[1])
    layout = FlowLayout(
        size=(x1 - x0, y1 - y0),
        boxes={i: (b.xy[0] - b.w / 2, b.xy[1] - b.h / 2, b.xy[0] + b.w / 2, b.xy[1] + b.h / 2)
               for i, b in boxes.items()},
        routes={k: [(x - x0, y1 - y) for x, y in pts] for k, pts in routes.items()},
        nodes={n.id: n for n in order})
    return seq, boxes, layout


def flow_layout(node: Node, example: Any = DEFAULT_EXAMPLE) -> FlowLayout:
    """The layout :func:`draw_figure` draws for ``node`` on ``example`` (see
    :class:`FlowLayout`). Raises as :func:`draw_figure`."""
    return _flow(node, example)[2]


def draw_figure(node: Node, example: Any = DEFAULT_EXAMPLE):
    """A matplotlib figure of ``node``'s computation flow on ``example``.

    Args:
        node: an s-op or selector (an IR node).
        example: one input sequence (a string or a list of atoms).

    Returns:
        a ``matplotlib.figure.Figure`` (not registered with pyplot: nothing to close).

    Raises:
        RASPTypeError: ``node`` is not an IR node, the example is not a sequence, or the
            program has more than 60 operations.
        RASPError: the program fails on the example (as the interpreter raises).
    """
    # start-up: matplotlib loads only when this runs
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
    from matplotlib.path import Path

    seq, boxes, layout = _flow(node, example)
    W, H = layout.size
    order = list(layout.nodes.values())

    fig = Figure(figsize=(W, H))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    ax.set_xlim(0, W)
    ax.set_ylim(0, H)
    for pts in layout.routes.values():
        codes = [Path.MOVETO] + [Path.LINETO] * (len(pts) - 1)
        ax.add_patch(FancyArrowPatch(path=Path(pts, codes), arrowstyle="-|>",
                                     mutation_scale=9, color="#777777", lw=0.9,
                                     shrinkA=0, shrinkB=1, zorder=1))
    size = 7 if len(seq) <= 12 else 5
    for n in order:
        b = boxes[n.id]
        cx, cy = b.xy
        top = cy + b.h / 2
        colour = ("#e5f2e5" if b.selector else
                  "#fde0c5" if b.kind.startswith(("Aggregate", "SelectorWidth")) else
                  "#dbe9f6" if b.kind.startswith(("Map", "SequenceMap")) else "#eeeeee")
        ax.add_patch(FancyBboxPatch((cx - b.w / 2, cy - b.h / 2), b.w, b.h,
                                    boxstyle="round,pad=0,rounding_size=0.06", fc=colour,
                                    ec="#555555", lw=0.8, zorder=2))
        y = top - 0.1 - _LINE_H / 2
        for line in b.title:
            ax.text(cx, y, line, ha="center", va="center", fontsize=8, weight="bold",
                    zorder=3)
            y -= _LINE_H
        for line in b.expr:
            ax.text(cx, y, line, ha="center", va="center", fontsize=7.5, zorder=3)
            y -= _LINE_H
        ax.text(cx, y, b.kind, ha="center", va="center", fontsize=7, color="#555555",
                style="italic", zorder=3)
        y -= _LINE_H
        for line in b.value:
            ax.text(cx, y, line, ha="center", va="center", fontsize=7.5,
                    family="monospace", zorder=3)
            y -= _LINE_H
        if b.selector:
            side = b.heat - 0.3                          # room for the tick labels
            left = cx - side / 2 + 0.08
            bottom = cy - b.h / 2 + 0.22
            hx = fig.add_axes((left / W, bottom / H, side / W, side / H))
            mat = np.asarray(b.matrix, dtype=float)
            hx.imshow(mat, cmap="Greens", vmin=0, vmax=1, interpolation="nearest",
                      aspect="auto")
            ticks = [_short(t) for t in seq]
            hx.set_xticks(range(len(seq)))
            hx.set_xticklabels(ticks, fontsize=size)
            hx.set_yticks(range(len(seq)))
            hx.set_yticklabels(ticks, fontsize=size)
            hx.tick_params(length=0, pad=1)
            hx.set_label(" ".join(b.title))             # which selector (not drawn)
    shown = "".join(map(str, seq)) if isinstance(example, str) else seq
    ax.text(W / 2, H - 0.2, f"{node_title(node)[0]} on {shown}", ha="center", va="center",
            fontsize=9)
    return fig


def _picture_path(path: str | os.PathLike) -> str:
    path = os.fspath(path)
    if not path.endswith((".svg", ".png")):
        raise RASPTypeError(f"draw: write a .svg or .png file, not {path!r}")
    return path


class Drawing:
    """A computation-flow picture: what :func:`draw` returns without a path. A notebook shows
    it inline (``_repr_svg_``); :meth:`save` writes a file; :attr:`figure` is the matplotlib
    figure (built once)."""

    def __init__(self, node: Node, example: Any = DEFAULT_EXAMPLE):
        self.node = node
        self.example = example
        self._figure = None
        self.figure                      # errors (a failing program) surface now

    @property
    def figure(self):
        """The ``matplotlib.figure.Figure``."""
        if self._figure is None:
            self._figure = draw_figure(self.node, self.example)
        return self._figure

    def save(self, path: str | os.PathLike) -> str:
        """Write the picture to ``path`` (``.svg`` or ``.png``); returns the path.

        Raises:
            RASPTypeError: another suffix. OSError: the file cannot be written."""
        path = _picture_path(path)
        self.figure.savefig(path, dpi=110)
        return path

    def svg(self) -> str:
        """The picture as SVG text."""
        buf = io.StringIO()
        self.figure.savefig(buf, format="svg")
        return buf.getvalue()

    _repr_svg_ = svg

    def __repr__(self) -> str:
        n = len(topological_order(self.node))
        return (f"<Drawing of {node_title(self.node)[0]} on {self.example!r}: {n} operations; "
                f"shown inline in a notebook, .save('flow.svg') writes a file>")


def draw(node: Node, example: Any = None, path: str | os.PathLike | None = None):
    """The computation flow of ``node`` on ``example`` as a picture (``rasp.draw``,
    ``sop.draw()``).

    Args:
        node: an s-op or selector.
        example: one input (a string or a list of atoms); ``None``: ``"hello"``.
        path: a ``.svg`` or ``.png`` file to write, or ``None``.

    Returns:
        the path written, when ``path`` is given; else a :class:`Drawing` (a notebook shows
        it inline; ``.save(path)``, ``.figure``).

    Raises:
        RASPTypeError: as :func:`draw_figure`, or a suffix other than .svg / .png.
        RASPError: the program fails on the example. OSError: the file cannot be written.
    """
    if path is not None:
        path = _picture_path(path)
    d = Drawing(node, DEFAULT_EXAMPLE if example is None else example)
    return d if path is None else d.save(path)


def draw_file(node: Node, path: str | os.PathLike, example: Any = DEFAULT_EXAMPLE) -> str:
    """Write the picture to ``path`` (``.svg`` or ``.png``, by its suffix) and return the path.

    Raises:
        RASPTypeError: as :func:`draw_figure`, or a suffix other than .svg / .png.
        OSError: the file cannot be written.
    """
    return draw(node, example, path)


def svg(node: Node, example: Any = DEFAULT_EXAMPLE) -> str:
    """The picture as SVG text (what a notebook shows inline)."""
    return Drawing(node, example).svg()


#: ``sop.draw(example, path)`` (see :class:`~rasp.ir.Node`)
Node.draw = draw
