"""`draw` as a picture (rasp.draw): the computation flow with values and selector matrices."""

import pytest

import rasp
from rasp.draw import draw_figure, draw_file, svg
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
    import matplotlib.pyplot as plt
    fig = draw_figure(env["reverse"], "hello")
    texts = " | ".join(_texts(fig))
    assert "[o l l e h]" in texts and "[h e l l o]" in texts          # reverse, tokens
    assert "reverse" in texts and "Aggregate (mean)" in texts
    heat = [ax for ax in fig.axes if ax.images]                       # the selector
    assert len(heat) == 1 and "flip" in heat[0].get_title()
    # the flip selector's matrix is the anti-diagonal (query q selects key 4 - q)
    mat = heat[0].images[0].get_array()
    assert [[int(x) for x in row] for row in mat] == \
        [[1 if k == 4 - q else 0 for k in range(5)] for q in range(5)]
    plt.close(fig)


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
