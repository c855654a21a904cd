"""The report at a laptop's width in real headless Chromium: no table, figure or image runs past
the page's width (the page never scrolls sideways), and a screenshot of the whole page has a
sensible size and is not blank."""

import io
import struct

import numpy as np
import pytest

from analysis.evidence import claims
from analysis.reporting import report

from test_report_cdp import find_chromium, layout_and_screenshot
from test_report_render import _acc_rows, _synthetic_config, _synthetic_section

WIDTH = 1280          # a typical laptop window, in CSS pixels


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    exe = find_chromium()
    assert exe, "chromium is required (`make chromium` installs it)"
    out = tmp_path_factory.mktemp("report")
    records = []
    for pe, ood in (("nope", 0.9), ("ape_sinusoidal", 0.1)):
        for s in range(5):
            records.append(claims.run_record(_synthetic_config(pe, s), _acc_rows(1.0, ood + 0.01 * s),
                                             f"runs/synthetic/{pe}/seed{s}"))
    sec = _synthetic_section(np.random.default_rng(5))
    sec["claims"] = claims.claims_for_task(records, "generalizes", None)
    sec["runs"] = [{"pe": r.pe, "seed": r.seed, "status": "reused", "id_em": r.id_em,
                    "ood_em": r.ood_em, "protocol": r.protocol, "config": r.config,
                    # a long unbroken name, as run directories of sweeps have
                    "dir": f"runs/synthetic/{r.pe}/seed{r.seed}-" + "x" * 120}
                   for r in records]
    sec["program"]["listing"] = "out = " + " + ".join(["tokens"] * 60) + ";"   # a long line
    path = report.render_report([sec], out, meta={"demo_wall_seconds": 3.0})
    return layout_and_screenshot(exe, path.resolve().as_uri(), width=WIDTH)


def test_nothing_overflows_the_page_width(page):
    assert WIDTH - 20 <= page["page"] <= WIDTH               # less the vertical scrollbar
    assert page["counts"]["table"] >= 5 and page["counts"]["img"] >= 5
    assert page["overflowing"] == [], page["overflowing"]
    assert page["scrollWidth"] <= page["page"], "the page scrolls sideways"
    assert page["bodyScrollWidth"] <= page["page"]


def _png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    return struct.unpack(">II", png[16:24])


def test_the_screenshot_has_a_sensible_size(page):
    w, h = _png_size(page["png"])
    assert w == WIDTH and h == page["height"]
    # a task section with its figures: taller than a window, shorter than 40 windows
    assert 800 < h < 40 * 800, h
    import matplotlib.image
    pixels = matplotlib.image.imread(io.BytesIO(page["png"]), format="png")
    assert pixels.shape[:2] == (h, w)
    colours = np.unique((pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 50                                  # figures and text, not blank
    # the page's header bar (#23374d) runs across the top, the rest is drawn below it
    assert np.allclose(pixels[5, 5:page["page"] - 5, :3], [0x23 / 255, 0x37 / 255, 0x4d / 255],
                       atol=0.02)


def test_the_measure_sees_an_overflow(tmp_path):
    """The check is real: a table wider than the window is reported, and the page scrolls."""
    exe = find_chromium()
    assert exe, "chromium is required (`make chromium` installs it)"
    page = tmp_path / "wide.html"
    page.write_text('<!DOCTYPE html><html><body><p>fits</p><table><tr><td><div style="'
                    f'min-width:{2 * WIDTH}px">wide</div></td></tr></table></body></html>')
    got = layout_and_screenshot(exe, page.resolve().as_uri(), width=WIDTH)
    assert [o[0] for o in got["overflowing"]] == ["table"]
    assert got["scrollWidth"] > got["page"]
