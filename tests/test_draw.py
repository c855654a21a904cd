"""`draw` as a picture (rasp.draw): the computation flow with values and selector matrices."""

import pytest

import rasp
from rasp.repl.draw import draw_figure, draw_file, svg
from rasp.errors import RASPTypeError


@pytest.fixture(scope="module")
def env():
    return rasp.run_source("flip = select(indices, length - indices - 1, ==);"
                           "reverse = aggregate(flip, tokens);"
                           "hist = selector_width(select(tokens, tokens, ==));")


def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts] + \
        [ax.get_title() for ax in fig.axes]


def test_the_picture_shows_each_operation_with_its_value(env):
    fig = draw_figure(env["reverse"], "hello")
    texts = " | ".join(_texts(fig))
    assert "[o l l e h]" in texts and "[h e l l o]" in texts          # reverse, tokens
    assert "reverse" in texts and "Aggregate (mean)" in texts
    heat = [ax for ax in fig.axes if ax.images]                       # the selector
    assert len(heat) == 1 and heat[0].get_label() == "flip"
    # the flip selector's matrix is the anti-diagonal (query q selects key 4 - q)
    mat = heat[0].images[0].get_array()
    assert [[int(x) for x in row] for row in mat] == \
        [[1 if k == 4 - q else 0 for k in range(5)] for q in range(5)]


def test_files_and_svg(env, tmp_path):
    p = draw_file(env["hist"], tmp_path / "hist.svg", "abcab")
    text = open(p).read()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    assert draw_file(env["hist"], tmp_path / "hist.png", "abcab").endswith(".png")
    assert (tmp_path / "hist.png").stat().st_size > 1000
    assert "<svg" in svg(env["hist"])
    with pytest.raises(RASPTypeError, match=".svg or .png"):
        draw_file(env["hist"], tmp_path / "hist.txt")


def test_the_draw_statement_writes_the_picture(tmp_path):
    out = []
    s = rasp.Session(output=out.append)
    s.execute(f'h = selector_width(select(tokens, tokens, ==)); draw(h, "abca", '
              f'"{tmp_path / "flow.svg"}");')
    assert "picture:" in out[-1] and (tmp_path / "flow.svg").exists()


def test_notebooks_show_the_picture(env):
    """In IPython/Jupyter an s-op's display is its computation-flow picture (SVG)."""
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    rasp._register_notebook_display()
    data, _ = shell.display_formatter.format(env["reverse"])
    assert "<svg" in data["image/svg+xml"]
    assert "text/plain" in data


# ---- issue 39 item 7: edges never behind boxes; boxes named by their expression -------------

PROGRAMS = {"reverse": "hello", "most_freq": "abbca", "dyck1_ptf": "(()",
            "sort_tokens": "dbca", "double_hist": "aabc"}


@pytest.fixture(scope="module")
def examples():
    return rasp.load_library("examples")


def _inside(p, rect, eps=1e-6):
    x, y = p
    x0, y0, x1, y1 = rect
    return x0 + eps < x < x1 - eps and y0 + eps < y < y1 - eps


def _on_border(p, rect, eps=1e-6):
    x, y = p
    x0, y0, x1, y1 = rect
    within = x0 - eps <= x <= x1 + eps and y0 - eps <= y <= y1 + eps
    return within and min(abs(x - x0), abs(x - x1), abs(y - y0), abs(y - y1)) <= eps


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_no_edge_passes_behind_a_box(examples, name):
    """Every route, sampled every 0.01 inch, stays outside every box; it starts on its source
    box's border and ends on its target's; boxes do not overlap; every input of every
    operation (the DAG's edges, read from the nodes' children here) has its route."""
    from rasp.repl.draw import flow_layout
    lay = flow_layout(examples[name], PROGRAMS[name])
    want = {(c.id, n.id) for n in lay.nodes.values() for c in n.children}
    assert set(lay.routes) == want
    rects = list(lay.boxes.values())
    for i, a in enumerate(rects):
        for b in rects[i + 1:]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)
    for (src, dst), pts in lay.routes.items():
        assert _on_border(pts[0], lay.boxes[src]) and _on_border(pts[-1], lay.boxes[dst])
        for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
            steps = max(2, int(((x1 - x0) ** 2 + (y1 - y0) ** 2) ** 0.5 / 0.01))
            for k in range(steps + 1):
                p = (x0 + (x1 - x0) * k / steps, y0 + (y1 - y0) * k / steps)
                assert not any(_inside(p, r) for r in rects), (name, src, dst, p)


def test_each_route_is_drawn_as_an_arrow(examples):
    from matplotlib.patches import FancyArrowPatch
    from rasp.repl.draw import flow_layout
    fig = draw_figure(examples["dyck1_ptf"], "(()")
    arrows = [p for ax in fig.axes for p in ax.patches if isinstance(p, FancyArrowPatch)]
    assert len(arrows) == len(flow_layout(examples["dyck1_ptf"], "(()").routes)


def test_boxes_are_named_by_their_expression():
    """An unnamed operation's box shows its expression as typed, not an id like
    sequence_map_10; a named one shows its name and its expression."""
    import re
    env = rasp.run_source("reverse = aggregate(select(indices, length - indices - 1, ==), "
                          "tokens);")
    texts = _texts(draw_figure(env["reverse"], "abc"))

    def bare(t):                        # the typed source, brackets and spaces aside
        return re.sub(r"[()\s]", "", t)
    joined = bare("".join(texts))       # a long expression is wrapped onto several lines
    assert "length - indices" in texts
    assert bare("select(indices, length - indices - 1, ==)") in joined
    assert "reverse" in texts and bare("= aggregate(select(indices, length - indices - 1, "
                                       "==), tokens)") in joined
    assert not [t for t in texts if re.search(r"(map|select|aggregate)_\d+", t)]


def test_rasp_draw_and_sop_draw_as_a_notebook_user_calls_them(env, tmp_path):
    assert "draw" in rasp.__all__ and callable(rasp.draw)
    d = rasp.draw(env["reverse"])                  # a Drawing: inline SVG in a notebook
    assert "<svg" in d._repr_svg_() and "reverse" in repr(d)
    assert env["hist"].draw("abca", tmp_path / "h.png") == str(tmp_path / "h.png")
    assert (tmp_path / "h.png").stat().st_size > 1000
    with pytest.raises(RASPTypeError, match=".svg or .png"):
        rasp.draw(env["hist"], path=tmp_path / "h.pdf")


def test_an_unnamed_s_op_is_titled_by_its_expression_not_an_internal_id():
    """`rasp.draw` of an s-op built in Python without a name: the title is what the REPL would
    write for it (`rasp.source.describe_node`), never the IR's `aggregate_<id>` label."""
    import re
    from rasp.repl.draw import Drawing
    from rasp.source import describe_node
    env = rasp.run_source("flip = select(indices, length - indices - 1, ==);")
    node = rasp.aggregate(env["flip"], rasp.tokens)
    assert node.name is None and re.fullmatch(r"aggregate_\d+", node.label)
    texts = _texts(draw_figure(node, "abc"))
    title = [t for t in texts if t.endswith(" on abc")]
    assert title == [f"{describe_node(node, 3)} on abc"]
    assert node.label not in " ".join(texts) and node.label not in repr(Drawing(node, "abc"))
