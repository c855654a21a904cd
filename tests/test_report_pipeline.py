"""The report pipeline end to end on tiny runs: training what is missing, reusing finished runs,
resuming partial ones, refusing another task's runs, the compiled model probed against itself,
`rasp probe` / `rasp report` on the command line, and the page in headless Chromium."""

import json

import numpy as np
import pytest

from analysis.probing import alignment
from analysis.probing import metrics
from analysis.reporting import report
from analysis.training.runs import default_run_dir
from rasp_cli.main import main as rasp_main
from rasp_model.positional import PE_NAMES

from test_report_cdp import find_chromium, open_page

TASK = "copy_unique"
# A few optimizer steps of a very small model: the pipeline is under test, not the learning.
TINY = {"steps": 4, "n_layers": 2, "d_model": 16, "d_head": 8, "n_heads": 2, "d_mlp": 16,
        "batch_size": 4, "eval_samples": 2, "eval_stride": 3, "train_max_len": 4,
        "probe_every": 0, "warmup_steps": 1, "log_every": 2, "checkpoint_every": 4}


def _opts(root, **kw):
    return report.ReportOptions(pes=kw.pop("pes", ["nope", "t5"]), runs_root=str(root),
                                train_overrides=TINY, progress=False, probe_lengths=[2, 4],
                                **kw)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Two NoPE seeds and one T5 run of the tiny model, and the report on them."""
    root = tmp_path_factory.mktemp("runs")
    out = tmp_path_factory.mktemp("report")
    path = report.generate_report([TASK], out, _opts(root))
    return root, out, path


def test_report_trains_missing_runs_and_compiles(tiny):
    root, out, path = tiny
    doc = json.loads((out / "report.json").read_text())
    data = doc["tasks"][0]
    assert data["task"] == TASK
    # claims computed from the runs, labelled, with the runs and protocol they compared; the
    # tiny models fit nothing in distribution, so nothing may be called supported
    assert doc["claims"] and doc["claims"] == data["claims"]["claims"]
    for c in doc["claims"]:
        assert c["label"] == "inconclusive" and c["protocol"] == "none" and c["runs"]
    assert [(r["pe"], r["seed"], r["status"]) for r in data["runs"]] == [
        ("nope", 0, "trained"), ("nope", 1, "trained"), ("t5", 0, "trained")]
    for r in data["runs"]:
        assert (root / TASK / r["pe"] / f"seed{r['seed']}-quick" / "DONE").exists()
    assert data["compiled"]["layers"] >= 1
    probe = data["probe"]
    # NoPE vs its other seed (the baseline) and NoPE vs T5 are both measured
    pairs = {(p["a"], p["b"]) for p in probe["pairwise"]}
    assert pairs == {("nope/seed0", "nope/seed1"), ("nope/seed0", "t5/seed0")}
    for p in probe["pairwise"]:
        assert 0.0 <= p["mean"] <= 1.0
    assert set(probe["matchings"]) == {"nope/seed0", "nope/seed1", "t5/seed0"}


def test_report_reuses_finished_runs(tiny):
    root, _, _ = tiny
    opts = _opts(root)
    assert all((rd / "DONE").exists() for _, _, rd in report.wanted_runs(TASK, opts))
    mtimes = {rd: (rd / "model.safetensors").stat().st_mtime
              for _, _, rd in report.wanted_runs(TASK, opts)}
    assert report.train_missing([TASK], opts) == {}          # nothing to train again
    assert all((rd / "model.safetensors").stat().st_mtime == t for rd, t in mtimes.items())


def test_report_page_opens_in_chromium(tiny):
    _, _, path = tiny
    exe = find_chromium()
    assert exe, "chromium is required (`make test` installs it: apt-get install -y chromium)"
    page = open_page(exe, path.resolve().as_uri())
    assert page["errors"] == []
    assert len(page["images"]) >= 4
    assert all(complete and width > 0 for complete, width, _ in page["images"])
    html = path.read_text()
    assert "http://" not in html and "https://" not in html


def test_the_page_can_be_mailed_and_says_what_it_drew(tiny):
    """In the page as Chromium shows it: no absolute path (of the runs, the report or the
    checkout), the runs root relative to the report, the finding of report.json's claims,
    the accuracy caption's bands from the seeds that ran, text of at least 9 px."""
    import os
    from pathlib import Path

    from test_report_cdp import Page
    root, out, path = tiny
    doc = json.loads((out / "report.json").read_text())
    with Page(find_chromium(), path.resolve().as_uri(), 1280) as page:
        text = page.eval("document.body.innerText")
        shown = page.eval("Array.from(document.images).map(i => [i.alt, "
                          "parseFloat(i.dataset.textPx), i.getBoundingClientRect().width"
                          " / i.naturalWidth])")
    html = path.read_text()
    checkout = str(Path(__file__).resolve().parents[1])
    for absolute in (str(root), str(out), checkout):
        assert absolute not in text and absolute not in html
    assert f"training runs read from {os.path.relpath(root, out)}" in text
    # all claims inconclusive (a few steps fit nothing): the finding says so, with the count
    assert all(c["label"] == "inconclusive" for c in doc["claims"])
    assert (f"Finding: No claim is decided by these runs: all {len(doc['claims'])} are "
            "inconclusive") in text
    seeds = {}
    for r in doc["tasks"][0]["runs"]:
        if r["status"] in ("trained", "reused"):
            seeds.setdefault(r["pe"], set()).add(r["seed"])
    assert seeds == {"nope": {0, 1}, "t5": {0}}
    assert "the range over seeds (min to max) for NoPE" in text
    assert "the 95% Wilson interval of its one seed, dotted, for T5 bias" in text
    assert len(shown) >= 4
    for alt, px, scale in shown:
        assert px * scale >= 9, (alt, px, scale)


def test_compiled_model_probed_against_itself_is_a_perfect_match(tmp_path):
    import tasks
    task = tasks.get_task(TASK)
    compiled = alignment.compile_reference(task, task.load_reference(), 16)
    res = alignment.probe_task_runs(task, {"compiled-self": compiled}, compiled, lengths=[2, 3],
                                 per_length=2)
    m = res.matchings["compiled-self"]
    assert len(m.pairs) == sum(a.shape[1] for a in res.models["compiled"])
    assert all(t == c and d == pytest.approx(0.0, abs=1e-9) for t, c, d in m.pairs)
    sec = {"name": TASK, "probe": res, "problems": []}
    html = report.render_report([sec], tmp_path).read_text()
    assert "perfect match" in html and "<strong>0.000</strong>" in html


def test_compiled_patterns_align_with_token_positions():
    """The compiled induction head, at the SEP position, attends to the first prompt token."""
    import tasks
    task = tasks.get_task(TASK)
    compiled = alignment.compile_reference(task, task.load_reference(), 16)
    rng = np.random.default_rng(0)
    prompt, answer = task.sample(4, rng)           # BOS x1 x2 x3 x4 SEP
    seq = (prompt + answer)[:-1]
    pats = alignment.capture_compiled_aligned(task, compiled, [seq])
    sep = prompt.index(task.vocab.sep)
    assert all(a.shape[-1] == len(seq) for a in pats)
    rows = [a[0, h, sep] for a in pats for h in range(a.shape[1])]
    assert any(r[1] > 0.99 for r in rows)          # key 1 holds x1, the token after BOS
    for a in pats:                                 # every valid row is a distribution
        np.testing.assert_allclose(a[0].sum(-1)[:, : len(seq)], 1.0, atol=1e-6)


def test_runs_of_another_task_are_refused(tmp_path):
    rd = default_run_dir(TASK, "nope", 0, "quick", tmp_path)
    rd.mkdir(parents=True)
    (rd / "config.json").write_text(json.dumps({"task": "copy_repeat", "pe": "nope"}))
    with pytest.raises(report.ReportError, match="copy_repeat"):
        report.collect_task(TASK, _opts(tmp_path, pes=["nope"], nope_seeds=1))


def test_missing_runs_are_named_when_not_training(tmp_path):
    opts = _opts(tmp_path / "runs", pes=["alibi"], train_missing=False)
    path = report.generate_report([TASK], tmp_path / "out", opts)
    html = path.read_text()
    assert "1 run(s) alibi/seed0 missing" in html and "without --no-train" in html
    assert "no trained run available" in html


def test_partial_run_is_resumed(tmp_path):
    from analysis.training import trainer
    rd = default_run_dir(TASK, "alibi", 0, "quick", tmp_path)
    longer = {**TINY, "steps": 8}
    res = trainer.train(TASK, "alibi", seed=0, out_dir=str(rd), preset="quick",
                         config_overrides=longer, progress=False, verbose=False, stop_after=4)
    assert not res.finished and not (rd / "DONE").exists()
    opts = _opts(tmp_path, pes=["alibi"], jobs=1)
    opts.train_overrides = longer
    done = report.train_missing([TASK], opts)
    assert done[str(rd)].status == "resumed", done
    assert (rd / "DONE").exists()
    assert json.loads((rd / "DONE").read_text())["steps"] == 8


def test_cli_probe_prints_tables_and_json(tiny, capsys):
    root, _, _ = tiny
    dirs = [str(root / TASK / pe / f"seed{s}-quick") for pe, s in
            [("nope", 0), ("nope", 1), ("t5", 0)]]
    assert rasp_main(["probe", *dirs, "--lengths", "2,4", "--per-length", "1"]) == 0
    out = capsys.readouterr().out
    assert "Kazemnejad distance" in out and "nope/seed1" in out and "t5/seed0" in out
    assert "vs compiled" in out
    assert rasp_main(["probe", dirs[0], "--json", "--lengths", "3", "--no-compile"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["task"] == TASK and data["relpos"]["nope/seed0"]


def test_cli_probe_bad_input(tiny, tmp_path, capsys):
    root, _, _ = tiny
    good = str(root / TASK / "nope" / "seed0-quick")
    assert rasp_main(["probe", str(tmp_path / "nowhere")]) == 2
    assert "no such directory" in capsys.readouterr().err
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"task": "copy_repeat", "model": {}}))
    (other / "DONE").write_text("{}")
    assert rasp_main(["probe", good, str(other)]) == 2
    assert "different tasks" in capsys.readouterr().err
    (other / "config.json").write_text(json.dumps({"task": TASK, "model": {}}))
    assert rasp_main(["probe", good, str(other)]) == 2          # corrupt: no weights, no accuracy
    assert "missing" in capsys.readouterr().err
    (other / "DONE").unlink()
    assert rasp_main(["probe", str(other)]) == 2                # partial: not finished
    assert "not finished" in capsys.readouterr().err
    assert rasp_main(["probe", good, "--task", "copy_repeat"]) == 2
    assert rasp_main(["probe", good, "--lengths", "x"]) == 2


def test_cli_report_writes_the_results_document(tiny, tmp_path, capsys):
    root, _, _ = tiny
    out_md = tmp_path / "results.md"
    assert rasp_main(["report", TASK, "--quick", "--pe", "nope,t5", "--runs", str(root),
                      "--no-train", "-q", "-o", str(tmp_path / "rep"),
                      "--results", str(out_md)]) == 0
    md = out_md.read_text()
    # the command that produced it at the top, the claims with labels, the per-seed numbers
    assert md.splitlines()[2].startswith(f"**Generated by `rasp report {TASK} --quick")
    assert "| **inconclusive** | NoPE generalizes better than T5 bias on copy_unique |" in md
    assert "| NoPE | 0, 1 |" in md
    assert "results written to" in capsys.readouterr().out


def test_cli_report_bad_input(tmp_path, capsys):
    assert rasp_main(["report", "no_such_task", "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no_such_task" in err and "copy_unique" in err
    blocker = tmp_path / "f"
    blocker.write_text("")
    assert rasp_main(["report", TASK, "-o", str(blocker / "x"), "--no-train"]) == 2
    assert "cannot write the report" in capsys.readouterr().err


def test_time_budget_skips_runs_and_says_so(tmp_path):
    opts = _opts(tmp_path / "runs", pes=["rope"], jobs=1)
    done = report.train_missing([TASK], opts, budget_s=0)
    (rd,) = [rd for _, _, rd in report.wanted_runs(TASK, opts)]
    assert done[str(rd)].status == "skipped" and not rd.exists()
    sec = report.collect_task(TASK, opts, trained=done)
    assert sec.runs[0].status == "skipped"
    assert any("time budget" in p for p in sec.problems)


def test_missing_runs_are_trained_nope_and_t5_first():
    opts = report.ReportOptions(pes=list(reversed(PE_NAMES)), runs_root="/x")
    from analysis.training.grid import GridRun, priority
    runs = [GridRun(TASK, pe, s) for pe, s, _ in report.wanted_runs(TASK, opts)]
    order = [(r.pe, r.seed) for r in sorted(runs, key=priority)]
    assert order[:3] == [("nope", 0), ("t5", 0), ("nope", 1)]


def test_cli_probe_of_an_exported_compiled_model_matches_the_reference(tmp_path, capsys):
    """`rasp probe DIR --task T` on the compiled export of T's own program: JSD 0 everywhere."""
    import tasks
    task = tasks.get_task(TASK)
    alignment.compile_reference(task, task.load_reference(), 16).save(tmp_path / "export")
    assert rasp_main(["probe", str(tmp_path / "export"), "--task", TASK, "--lengths", "2,3",
                      "--per-length", "1"]) == 0
    out = capsys.readouterr().out
    assert "vs compiled: one-to-one head matching, mean JSD 0.000" in out
    assert rasp_main(["probe", str(tmp_path / "export")]) == 2     # a compiled dir needs --task
    assert "--task" in capsys.readouterr().err
