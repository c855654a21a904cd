"""The HTML report on synthetic data: self-contained, opens in headless Chromium without errors,
every figure loads, and the numbers shown are the probe's."""

import re
from pathlib import Path

import numpy as np
import pytest

from analysis.evidence import claims
from analysis.probing import metrics
from analysis.reporting import report

from test_report_cdp import find_chromium, open_page


def _causal(rng, n, heads, ex, temp=3.0):
    logits = rng.normal(size=(ex, heads, n, n)) * temp
    logits = np.where(np.tril(np.ones((n, n), bool)), logits, -np.inf)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


def _acc_rows(em_id, em_ood, lo=1, hi=8):
    rows = []
    for n in range(lo, 2 * hi + 1):
        em = em_id if n <= hi else em_ood
        rows.append({"length": n, "split": "id" if n <= hi else "ood", "em": em, "n": 32,
                     "ci_low": max(0.0, em - 0.1), "ci_high": min(1.0, em + 0.1)})
    return rows


def _synthetic_section(rng):
    n, ex = 10, 3
    seqs = [list(range(n))] * ex
    compiled = [_causal(rng, n, 1, ex), _causal(rng, n, 1, ex)]
    trained = {
        "nope/seed0": [_causal(rng, n, 2, ex), _causal(rng, n, 2, ex)],
        "nope/seed1": [_causal(rng, n, 2, ex), _causal(rng, n, 2, ex)],
        "t5/seed0": [_causal(rng, n, 2, ex), _causal(rng, n, 2, ex)],
        # a model that carries the compiled heads exactly (head 1 of each layer)
        "alibi/seed0": [np.concatenate([_causal(rng, n, 1, ex), compiled[0]], axis=1),
                        np.concatenate([_causal(rng, n, 1, ex), compiled[1]], axis=1)],
    }
    res = metrics.probe("synthetic", seqs, trained, compiled)
    return {
        "name": "synthetic", "description": "synthetic patterns <b>escaped</b>",
        "problems": ["run rope/seed0 is missing (runs/x); nothing trained in this test"],
        "program": {"file": "tasks/programs/x.rasp", "name": "copy",
                    "listing": "out = aggregate(select(indices, indices, ==), tokens);",
                    "causal": True},
        "measures": {"length": 3, "layers": 1, "max_heads": 1, "attention_ops": 1,
                     "mlp_ops": 0, "selects": 1, "aggregates": 1, "selector_widths": 0,
                     "maps": 0, "sequence_maps": 0},
        "raspl": {"valid": False, "violations": [{"rule": "2 index rule", "operation": "x",
                                                  "span": "1:5", "message": "index arithmetic"}]},
        "prediction": {"prediction": "generalizes"},
        "accuracy": {"nope": _acc_rows(1.0, 0.8), "t5": _acc_rows(1.0, 0.6),
                     "alibi": _acc_rows(0.95, 0.1)},
        "train_range": (1, 8),
        "measured": claims.measured_outcome(
            [claims.run_record(_synthetic_config("nope", s), _acc_rows(1.0, 0.8), f"runs/x{s}")
             for s in range(5)]),
        "runs": [{"pe": "nope", "seed": 0, "dir": "runs/x", "status": "reused",
                  "id_em": 1.0, "ood_em": 0.8}],
        "compiled": {"stats": {"layers": 2, "heads": 2, "d_model": 20}, "heads": [1, 1],
                     "mlp": [4, 0]},
        "probe": res,
        "token_names": [[f"t{i}" for i in range(n)]] * ex,
    }


def _synthetic_config(pe, seed, task="synthetic"):
    return {"task": task, "pe": pe, "seed": seed, "preset": "demo", "steps": 3000,
            "model": {"pe": pe, "n_layers": 2, "d_model": 64, "n_heads": 4, "d_head": 16,
                      "d_mlp": 128, "embed_init_std": 1.0},
            "train": {"batch_size": 64, "lr": 3e-3, "position_offsets": "none",
                      "eval_samples": 64},
            "train_lengths": [1, 8], "eval_lengths": [[4, "id"], [12, "ood"]]}


def test_measured_outcome_is_the_claims_rule():
    """The report's measured outcome is claims.measured_outcome (the prediction claim's rule):
    >= 5 seeds that fit, a sign test and an interval against the threshold."""
    def runs(id_em, ood_em, k=5, pe="nope"):
        return [claims.run_record(_synthetic_config(pe, s), _acc_rows(id_em, ood_em), f"r/{s}")
                for s in range(k)]

    m = claims.measured_outcome(runs(1.0, 0.8))
    assert m["outcome"] == "generalizes" and m["best_pe"] == "nope"
    assert m["per_pe"]["nope"]["ood_em"] == pytest.approx(0.8)
    assert m["per_pe"]["nope"]["id_em"] == pytest.approx(1.0)
    assert claims.measured_outcome(runs(1.0, 0.1))["outcome"] == "fails"
    assert claims.measured_outcome(runs(0.3, 0.0))["outcome"] == "inconclusive"
    # two seeds: what the pooled means called "generalizes" is inconclusive now
    assert claims.measured_outcome(runs(1.0, 0.8, k=2))["outcome"] == "inconclusive"
    assert claims.measured_outcome([])["outcome"] == "no runs"
    # the same outcome as the prediction claim of the same runs
    rs = runs(1.0, 0.8) + runs(1.0, 0.1, pe="t5")
    assert claims.prediction_claim(rs, "generalizes").numbers["measured"] == \
        claims.measured_outcome(rs)["outcome"]


def test_report_is_self_contained_and_shows_the_probe(tmp_path):
    rng = np.random.default_rng(0)
    sec = _synthetic_section(rng)
    path = report.render_report([sec], tmp_path / "out")
    html = path.read_text()
    # self-contained: no network references, figures inline
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "<script src" not in html and "<link" not in html
    imgs = re.findall(r'<img src="([^"]+)"', html)
    assert imgs and all(u.startswith("data:image/png;base64,") for u in imgs)
    assert len(list((tmp_path / "out").glob("*.png"))) == len(imgs)
    # user text is escaped
    assert "<b>escaped</b>" not in html and "&lt;b&gt;escaped" in html
    # the alibi model carries the compiled heads: it matches with JSD 0 -> "perfect match"
    m = sec["probe"].matchings["alibi/seed0"]
    assert m.mean == pytest.approx(0.0, abs=1e-9)
    assert "perfect match" in html
    # the pairwise distances printed are the probe's
    d = sec["probe"].pairwise[("nope/seed0", "t5/seed0")].mean
    assert f"{d:.3f}" in html
    assert (tmp_path / "out" / "report.json").exists()


def test_report_renders_in_headless_chromium(tmp_path):
    exe = find_chromium()
    assert exe, "chromium is required (`make test` installs it: apt-get install -y chromium)"
    rng = np.random.default_rng(1)
    path = report.render_report([_synthetic_section(rng)], tmp_path)
    page = open_page(exe, path.resolve().as_uri())
    assert page["errors"] == []
    assert len(page["images"]) >= 5
    assert all(complete and width > 0 for complete, width, _ in page["images"])
    assert "synthetic" in page["text"] and "perfect match" in page["text"]


def test_unwritable_output_directory_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a directory")
    with pytest.raises(report.ReportError, match="cannot write the report"):
        report.render_report([], blocker / "sub")


def test_missing_sections_render_as_not_available(tmp_path):
    path = report.render_report([{"name": "bare", "problems": ["no trained run available"]}],
                                tmp_path)
    html = path.read_text()
    assert "no trained run available" in html and "not available" in html


def test_claims_table_and_results_document_from_the_runs(tmp_path):
    import json

    from analysis.reporting.results import results_markdown

    def run(pe, seed, id_em, ood_em):
        return claims.run_record(_synthetic_config(pe, seed), _acc_rows(id_em, ood_em),
                                 f"runs/synthetic/{pe}/s{seed}")

    # 7 seeds: the prediction's "some PE generalizes" is tested over 2 PEs at 0.05 / 2
    records = ([run("nope", s, 1.0, 0.9 + 0.01 * s) for s in range(7)]
               + [run("ape_sinusoidal", s, 1.0, 0.03 * s) for s in range(7)])
    sec = _synthetic_section(np.random.default_rng(2))
    sec["claims"] = claims.claims_for_task(records, "generalizes", None)
    sec["runs"] = [{"pe": r.pe, "seed": r.seed, "dir": r.run_dir, "status": "reused",
                    "id_em": r.id_em, "ood_em": r.ood_em, "protocol": r.protocol,
                    "config": r.config} for r in records]
    path = report.render_report([sec], tmp_path, meta={"demo_wall_seconds": 12.0})
    html = path.read_text()
    top = html[:html.index('<section class="task"')]
    assert "NoPE generalizes better than APE (sinusoidal) on synthetic" in top
    assert '<td class="supported">supported</td>' in top
    doc = json.loads((tmp_path / "report.json").read_text())
    assert [c["label"] for c in doc["claims"]] == ["supported", "supported"]
    md = results_markdown(doc, "rasp demo --results docs/results.md")
    assert md.splitlines()[2].startswith("**Generated by `rasp demo --results docs/results.md`**")
    assert "| **supported** | NoPE generalizes better than APE (sinusoidal) on synthetic |" in md
    assert "0.90, 0.91, 0.92, 0.93, 0.94, 0.95, 0.96" in md and "position offsets `none`" in md
    assert "p = 0.00781" in md and "needs >= 5 paired seeds" in md


def test_prediction_claims_are_per_pe_and_only_for_decided_predictions(tmp_path):
    """The report predicts per PE with the same call as docs/predictions.md and tests each
    decided prediction on that PE's runs alone; a PE without a theory gets no claim."""
    def run(pe, seed, ood_em):
        return claims.run_record(_synthetic_config(pe, seed), _acc_rows(1.0, ood_em),
                                 f"runs/synthetic/{pe}/s{seed}")
    records = ([run("nope", s, 0.9 + 0.01 * s) for s in range(5)]
               + [run("t5", s, 0.02 * s) for s in range(5)])
    predictions = {
        "nope": {"prediction": "generalizes", "theory": "C-RASP[] (Huang et al. 2025, NoPE)",
                 "theories": {"crasp": {"key": "crasp", "prediction": "generalizes",
                                        "reason": "a verified C-RASP[] program of size 9"}}},
        "t5": {"prediction": "no theory", "theory": "none: no paper predicts for t5",
               "theories": {}}}
    got = claims.claims_for_task(records, predictions, None)
    ids = {c["id"]: c for c in got["claims"]}
    assert "synthetic:prediction:nope" in ids and "synthetic:prediction:t5" not in ids
    assert ids["synthetic:prediction:nope"]["label"] == "supported"     # 5 seeds all >= 0.9
    assert "C-RASP[]" in ids["synthetic:prediction:nope"]["statement"]
    sec = _synthetic_section(np.random.default_rng(3))
    sec["predictions"], sec["claims"] = predictions, got
    html = report.render_report([sec], tmp_path, meta={}).read_text()
    assert "a verified C-RASP[] program of size 9" in html
    assert "no decided prediction to test" in html                   # the t5 row


def test_the_page_a_researcher_mails(tmp_path):
    """Rounded numbers, no absolute run paths, world-readable files, one head-matching table."""
    import os
    import stat
    sec = _synthetic_section(np.random.default_rng(4))
    sec["compiled"]["stats"]["compile_seconds"] = 0.4089306480000232
    sec["runs"][0]["dir"] = "/very/long/absolute/prefix/runs/x/nope/seed0"
    path = report.render_report([sec], tmp_path, meta={})
    html = path.read_text()
    assert "0.409" in html and "0.4089306" not in html
    assert "/very/long/absolute/prefix" not in html and "runs/x/nope/seed0" in html
    for name in ("report.html", "report.json"):
        mode = stat.S_IMODE(os.stat(tmp_path / name).st_mode)
        assert mode & stat.S_IROTH and mode & stat.S_IRGRP, oct(mode)
    assert html.count("one-to-one") <= 1                      # one matching table, not one per model


def test_the_page_and_report_json_give_one_wall_time_and_say_what_the_seeds_decide(tmp_path):
    """The page's wall time runs from the command's start (``meta["started"]``, the CLI's
    ``rasp_cli.common.STARTED``) to the page, and report.json (which `rasp demo` prints) holds
    the same number; the header says before any claim what the seeds can decide and links
    the checkout's docs/results.md by a relative path that exists."""
    import json
    import os
    import re
    import time
    from analysis.evidence.statistics import decidable_with
    sec = _synthetic_section(np.random.default_rng(3))
    out = tmp_path / "deep" / "rep"
    started = time.time() - 7.0
    # a page outside the checkout names docs/results.md without a path (it is mailed); one
    # inside links it relatively (reports/ -> ../docs/results.md)
    assert report.results_link(out) is None
    inside = report.CHECKOUT / "reports" / "x"
    assert report.results_link(inside) == "../../docs/results.md"
    assert (inside / report.results_link(inside)).resolve() == \
        (report.CHECKOUT / "docs" / "results.md").resolve()
    path = report.render_report([sec], out, meta={
        "started": started, "decides": decidable_with(1)["sentence"],
        "results_doc": os.path.relpath(report.CHECKOUT / "docs" / "results.md", out)})
    html = path.read_text()
    doc = json.loads((out / "report.json").read_text())
    wall = doc["meta"]["wall_seconds"]
    assert 7.0 <= wall < 7.0 + 120 and "started" not in doc["meta"]
    assert f" · {wall} s" in html
    head = html[:html.index("</header>")]
    assert "1 seed(s) per PE: every claim will be inconclusive" in head
    href = re.search(r'id="decides">.*?<a href="([^"]+)"', head).group(1)
    assert (out / href).resolve() == (report.CHECKOUT / "docs" / "results.md").resolve()
    assert (out / href).exists()


def test_a_training_length_curve_beside_the_report_is_drawn_on_its_task_s_section(tmp_path):
    """`rasp curve` writes <out>/curves/<task>/curve.json by default when the report is in
    reports/: the page shows that curve under the task, with the shortest training length per
    PE read from the file (here written by hand: NoPE from 20, the APE never)."""
    import json
    sec = _synthetic_section(np.random.default_rng(4))
    task = sec["name"]
    curve = {"task": task, "pes": ["nope", "ape_learned"], "lengths": [10, 20],
             "seeds": [0, 1, 2, 3, 4], "threshold": 0.5, "regime": None,
             "shortest": {"nope": 20, "ape_learned": None},
             "points": [{"pe": pe, "train_max_len": L, "ood_em": [m] * 5, "ood_mean": m,
                         "ood_ci": [m - 0.05, m + 0.05]}
                        for pe, ms in (("nope", (0.2, 0.9)), ("ape_learned", (0.1, 0.2)))
                        for L, m in zip((10, 20), ms)]}
    where = tmp_path / "curves" / task
    where.mkdir(parents=True)
    (where / "curve.json").write_text(json.dumps(curve))
    html = report.render_report([sec], tmp_path, meta={}).read_text()
    assert (tmp_path / f"{task}_curve.png").exists()
    cap = html[html.index(f'alt="training-length curve of {task}"'):]
    cap = cap[cap.index("<figcaption>"):cap.index("</figcaption>")]
    assert "NoPE: from L = 20" in cap and "APE (learned): not within the lengths tried" in cap
    # another task's curve is never shown here
    curve["task"] = "other"
    (where / "curve.json").write_text(json.dumps(curve))
    (tmp_path / f"{task}_curve.png").unlink()
    html = report.render_report([sec], tmp_path, meta={}).read_text()
    assert "training-length curve of" not in html
    assert not (tmp_path / f"{task}_curve.png").exists()
