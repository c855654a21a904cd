"""The report page a researcher can show (issue 39 item 6), checked as a reader sees it: figure
text measured in headless Chromium, the flow diagram enlarged and fitted by a click, whole
labels that do not overlap, integer lengths on the axes, captions that say what is drawn, a
finding computed from the claims, no absolute path, the distance chart's absence explained
by what ran, and the annotated screenshot of docs/report.md made by a command."""

import io
import re
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from analysis.evidence import claims
from analysis.probing import metrics
from analysis.reporting import figures, report, screenshot

from test_report_cdp import Page, find_chromium
from test_report_render import _acc_rows, _causal, _synthetic_config, _synthetic_section

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 1280
MIN_TEXT_PX = 9.0          # the smallest text a reader reads without zooming, in CSS pixels

#: every figure of the page: its alt text, the smallest text in its PNG (pixels), and the
#: image's displayed width over its PNG width
_FIGURE_TEXT_JS = ("Array.from(document.images).map(i => [i.alt, parseFloat(i.dataset.textPx),"
                   " i.getBoundingClientRect().width / i.naturalWidth])")


def _chromium():
    exe = find_chromium()
    assert exe, "chromium is required (`make chromium` installs it)"
    return exe


def _texts_overlap(fig, texts):
    """Pairs of the given texts whose drawn boxes (pixels) intersect."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(r)) for t in texts if t.get_text().strip()]
    return [(a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1:]
            if ba.overlaps(bb)]


# --------------------------------------------------------------------------------------------
# the figures
# --------------------------------------------------------------------------------------------

def test_lengths_get_integer_ticks():
    """Lengths 1..20 on matplotlib's default locator give 2.5, 7.5, ...; the page's do not."""
    rows = _acc_rows(1.0, 0.5, lo=1, hi=10)                 # lengths 1..20
    fig = figures.accuracy_figure({"nope": rows}, (1, 10), None)
    fig.canvas.draw()
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    shown = [t.get_text().replace("\u2212", "-") for t in ax.get_xticklabels()
             if lo <= t.get_position()[0] <= hi]
    assert len(shown) >= 4
    assert all(re.fullmatch(r"-?\d+", s) for s in shown), shown
    # the check sees a fractional tick: matplotlib's own choice on the same data
    plain = matplotlib.pyplot.figure().add_subplot()
    plain.plot(range(1, 21), range(20))
    plain.figure.canvas.draw()
    assert any("." in t.get_text() for t in plain.get_xticklabels())
    matplotlib.pyplot.close("all")


def test_the_accuracy_band_is_what_the_caption_says():
    """Two seeds: the band is exactly their min..max per length; one seed: its Wilson
    interval; the caption names each PE with its band."""
    two = ([{**r, "seed": 0} for r in _acc_rows(1.0, 0.8)]
           + [{**r, "seed": 1, "em": r["em"] - 0.3} for r in _acc_rows(1.0, 0.8)])
    one = [{**r, "seed": 0} for r in _acc_rows(1.0, 0.6)]
    fig = figures.accuracy_figure({"nope": two, "t5": one}, (1, 8), None)
    bands = [c for c in fig.axes[0].collections if len(c.get_paths())]
    assert len(bands) == 2
    nope_band = bands[0].get_paths()[0].vertices
    lows = {n: min(r["em"] for r in two if r["length"] == n) for n in range(1, 17)}
    highs = {n: max(r["em"] for r in two if r["length"] == n) for n in range(1, 17)}
    for x, y in nope_band:
        if float(x).is_integer() and 1 <= x <= 16:
            assert y == pytest.approx(lows[int(x)]) or y == pytest.approx(highs[int(x)])
    t5_band = bands[1].get_paths()[0].vertices
    assert t5_band[:, 1].max() == pytest.approx(max(r["ci_high"] for r in one))
    matplotlib.pyplot.close("all")
    cap = report.accuracy_caption({"nope": two, "t5": one})
    assert "range over seeds (min to max) for NoPE" in cap
    assert "Wilson interval of its one seed, dotted, for T5 bias" in cap
    assert "first seed" not in cap
    # docs/report.md says the same of the band
    doc = (ROOT / "docs" / "report.md").read_text()
    assert "range over seeds" in doc and "95% Wilson interval" in doc


def test_layer_diagram_labels_are_whole_and_apart():
    """Long s-op names (the compiled heads' names) are wrapped, not cut; no two texts of the
    diagram overlap; the diagram fits the page's width at 10 pt."""
    name = "aggregate(select(shift_right(tokens_int, 1, -99), indices, ==), tokens)"
    labels = {(l, h): f"{name}_{l}{h}" for l in range(6) for h in range(3)}
    heads, mlp = [3, 1, 2, 1, 3, 1], [123, 0, 40, 8, 0, 1024]
    fig = figures.layer_diagram(heads, mlp, None, title="compiled model", head_labels=labels)
    texts = fig.axes[0].texts
    joined = "".join(t.get_text() for t in texts).replace("\n", "").replace(" ", "")
    for (l, h), label in labels.items():
        if h < heads[l]:
            assert label.replace(" ", "") in joined, label
    assert all(t.get_fontsize() >= 10 for t in texts)
    assert _texts_overlap(fig, texts) == []
    w, _ = fig.get_size_inches() * 96
    assert w <= 1100
    matplotlib.pyplot.close("all")


def test_tick_labels_do_not_overlap():
    """The distance chart's six PE names and a 40-token heatmap's token labels."""
    pes = ["nope", "t5", "alibi", "rope", "ape_sinusoidal", "ape_learned"]
    panels = {agg: ({pe: [0.2, 0.3] for pe in pes[1:]}, [0.1, 0.12])
              for agg in ("standard", "released")}
    fig = figures.distance_chart(panels, None)
    for ax in fig.axes:
        assert len(ax.get_xticklabels()) == 5
        assert _texts_overlap(fig, ax.get_xticklabels()) == []
    rng = np.random.default_rng(0)
    tokens = [f"t{i}" for i in range(40)]
    fig = figures.heatmap_figure([("a", _causal(rng, 40, 1, 1)[0, 0])] * 3, None, tokens=tokens)
    for ax in fig.axes[:3]:
        assert _texts_overlap(fig, ax.get_xticklabels()) == []
        assert _texts_overlap(fig, ax.get_yticklabels()) == []
    matplotlib.pyplot.close("all")


def test_wrap_label_keeps_every_character():
    for text in ["shift_right(tokens_int_,_1_,_-99)", "x" * 50, "a b", ""]:
        lines = figures.wrap_label(text, 12)
        assert all(len(x) <= 12 for x in lines)
        assert "".join(lines).replace(" ", "") == text.replace(" ", "")


# --------------------------------------------------------------------------------------------
# the page
# --------------------------------------------------------------------------------------------

def _supported_section():
    records = []
    for pe, ood in (("nope", 0.9), ("ape_sinusoidal", 0.1)):
        for s in range(5):
            records.append(claims.run_record(_synthetic_config(pe, s),
                                             _acc_rows(1.0, ood + 0.01 * s),
                                             f"runs/synthetic/{pe}/seed{s}"))
    sec = _synthetic_section(np.random.default_rng(7))
    sec["claims"] = claims.claims_for_task(records, "generalizes", None)
    return sec


def test_finding_is_computed_from_the_claims(tmp_path):
    import json
    path = report.render_report([_supported_section()], tmp_path, meta={})
    doc = json.loads((tmp_path / "report.json").read_text())
    decided = [c for c in doc["claims"] if c["label"] in ("supported", "contradicted")]
    assert decided
    with Page(_chromium(), path.resolve().as_uri(), WIDTH) as page:
        header = page.eval("document.querySelector('header').innerText")
    finding = header.split("Finding:", 1)[1].split("\n")[0]
    for c in decided:
        seeds = len(set(c["numbers"]["better"]["seeds"]) & set(c["numbers"]["worse"]["seeds"]))
        assert f"{c['statement']} ({c['label']}, {seeds} seeds)" in finding
    assert finding == " " + doc["finding"]
    # no claim decided: the page says so, with the seeds it would need
    sec = _synthetic_section(np.random.default_rng(8))
    few = [claims.run_record(_synthetic_config(pe, s), _acc_rows(1.0, 0.5), f"r/{pe}{s}")
           for pe in ("nope", "t5") for s in range(2)]
    sec["claims"] = claims.claims_for_task(few, "generalizes", None)
    n = len(sec["claims"]["claims"])
    html = report.render_report([sec], tmp_path / "few", meta={}).read_text()
    assert (f"No claim is decided by these runs: all {n} are inconclusive; at most 2 seeds "
            "per positional encoding where a decision needs 5.") in html


def test_no_distance_chart_says_what_ran(tmp_path):
    """The message counts what was probed, not the runs the preset wanted."""
    wanted = [{"pe": pe, "seed": 0, "dir": f"runs/x/{pe}", "status": "missing"}
              for pe in ("nope", "t5", "alibi", "rope", "ape_sinusoidal", "ape_learned")]
    html = report.render_report([{"name": "none", "problems": [], "runs": wanted}],
                                tmp_path / "a").read_text()
    assert ("No distance chart: no trained model was probed (0 of 6 run(s) of this task "
            "finished).") in html
    assert "ran 6" not in html
    rng = np.random.default_rng(0)
    one = metrics.probe("one", [list(range(6))] * 2, {"nope/seed0": [_causal(rng, 6, 2, 2)]})
    wanted[0]["status"] = "reused"
    html = report.render_report([{"name": "one", "problems": [], "runs": wanted, "probe": one}],
                                tmp_path / "b").read_text()
    assert ("No distance chart: only NoPE was probed (1 seed); it needs a model of another "
            "positional encoding.") in html


def test_diagram_text_is_readable_and_a_click_fits_the_flow(tmp_path):
    """At a laptop's width every figure's smallest text is at least 9 CSS px (the flow at its
    full size in a box that scrolls); a click fits the flow to the page, another restores it."""
    import tasks
    task = tasks.get_task("sort_unique")
    sec = _supported_section()
    sec["program"] = {"file": str(task.reference_path), "name": task.reference_name,
                      "listing": task.reference_source(), "causal": task.causal}
    prompt, answer = task.sample(6, np.random.default_rng(0))
    sec["_draw"] = (task.load_reference(), task.program_tokens(list(prompt) + list(answer)[:-1]))
    sec["compiled"]["head_names"] = {"0,0": "aggregate(select(indices, target_pos, ==), x)",
                                     "1,0": "shift_right(tokens_int, 1, -99)"}
    path = report.render_report([sec], tmp_path, meta={})
    with Page(_chromium(), path.resolve().as_uri(), WIDTH) as page:
        shown = page.eval(_FIGURE_TEXT_JS)
        alts = [a for a, _, _ in shown]
        assert any(a.startswith("computation flow") for a in alts)
        assert any(a.startswith("layer diagram") for a in alts)
        for alt, px, scale in shown:
            assert px * scale >= MIN_TEXT_PX, (alt, px, scale)
        box = ("(() => { const i = document.querySelector('img[alt^=\"computation flow\"]');"
               " const r = i.getBoundingClientRect(); const b = i.parentElement"
               ".getBoundingClientRect(); window.scrollTo(0, r.top + window.scrollY - 100);"
               " const r2 = i.getBoundingClientRect();"
               " return [r.width, i.naturalWidth, b.width, r2.left + 50, r2.top + 50]; })()")
        width, natural, box_width, x, y = page.eval(box)
        assert width == natural > box_width                  # full size, scrolls in its box
        page.click(x, y)
        fitted = page.eval("document.querySelector('img[alt^=\"computation flow\"]')"
                           ".getBoundingClientRect().width")
        assert fitted <= box_width < natural
        page.click(x, y)
        assert page.eval("document.querySelector('img[alt^=\"computation flow\"]')"
                         ".getBoundingClientRect().width") == natural


def test_screenshot_command_marks_every_part(tmp_path, capsys):
    """`python -m analysis.reporting.screenshot PAGE -o PNG` marks the parts docs/report.md
    numbers, in the page's order, at the page's headings; a missing page is a clear error."""
    from PIL import Image
    page = report.render_report([_supported_section()], tmp_path / "rep", meta={})
    out = tmp_path / "annotated.png"
    assert screenshot.main([str(page), "-o", str(out), "--width", "640"]) == 0
    said = capsys.readouterr().out
    assert "parts 0, 1, 2, 3, 4, 5, 6 marked" in said
    img = Image.open(out).convert("RGB")
    assert img.width == 640 + 56
    margin = np.asarray(img)[:, :56]
    red = np.all(np.abs(margin.astype(int) - [0x9b, 0x1c, 0x31]) < 8, axis=-1)
    rows = np.flatnonzero(red.any(axis=1))
    discs = np.split(rows, np.flatnonzero(np.diff(rows) > 1) + 1)
    assert len(discs) == 8                                   # F and 0..6
    # every numbered part of docs/report.md's "How to read it" is one the command marks
    doc = (ROOT / "docs" / "report.md").read_text()
    numbered = re.findall(r"^(\d)\. \*\*", doc.split("## How to read it")[1], re.M)
    assert [int(n) for n in numbered] == [n for _, n in screenshot.PARTS]
    assert "python -m analysis.reporting.screenshot" in doc
    assert screenshot.main([str(tmp_path / "nowhere.html"), "-o", str(out)]) == 2
    assert "no report page at" in capsys.readouterr().err


def test_no_absolute_path_in_the_page(tmp_path):
    """Problems, run directories, the program file and the runs root are shown relative to
    the checkout or the report's directory."""
    sec = _synthetic_section(np.random.default_rng(9))
    root = tmp_path / "deep" / "runs"
    sec["runs"][0]["dir"] = str(root / "synthetic" / "nope" / "seed0-quick")
    sec["runs"][0]["status"] = "failed"
    sec["runs"][0]["error"] = f"cannot read {root}/synthetic/nope/seed0-quick/model.safetensors"
    sec["problems"].append(f"run nope/seed1 is missing ({root}/synthetic/nope/seed1-quick)")
    sec["program"]["file"] = str(ROOT / "tasks" / "programs" / "sort_unique.rasp")
    out = tmp_path / "out"
    html = report.render_report([sec], out, meta={"runs_root": str(root)}).read_text()
    text = re.sub(r"data:image/png;base64,[^\"]+", "", html)
    for p in (str(tmp_path), str(ROOT)):
        assert p not in text
    assert "tasks/programs/sort_unique.rasp" in text
    assert "training runs read from <code>../deep/runs</code>" in text
    assert "../deep/runs/synthetic/nope/seed1-quick" in text
