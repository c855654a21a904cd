"""Huang et al. 2025's protocol (``analysis.experiment.replication``, ``rasp replicate huang``).

The truths: their selection rule applied by hand to a made-up sweep table; their generators'
offset and bin formulas written out here from ``algorithmic/language_modeling_train.py``
(``offset = random.randint(0, max_test_length - length)`` etc.), independently of our code;
greedy decoding (a separate code path) for the teacher-forced exact match; an uninterrupted
replication for the resumed one.
"""

import json
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import tasks
from analysis.experiment import replication as R
from analysis.training.batches import make_step
from analysis.training.evaluation import bin_set, evaluate, teacher_forced_em
from analysis.training.trainer import offset_positions, resolve_spec, train

ROOT = Path(__file__).resolve().parent.parent


def _bins(*ems):
    return [{"bin": [0, 1], "split": "id" if i == 0 else "ood", "n": 10, "em": e}
            for i, e in enumerate(ems)]


C = [R.SweepConfig(l, h, 16, 1e-3) for l in (1, 2) for h in (1, 2)]


# ------------------------------------------------------------------------------------------
# the selection rule and the seeds
# ------------------------------------------------------------------------------------------

def test_selection_picks_the_best_first_ood_bin_among_configs_at_100_percent():
    rows = [(C[0], _bins(0.999, 1.0, 1.0)),     # not 100% in distribution: never chosen
            (C[1], _bins(1.0, 0.60, 0.90)),
            (C[2], None),                        # did not finish
            (C[3], _bins(1.0, 0.75, 0.10))]      # best 51-100 although worse at 101-150
    sel = R.select_config(rows)
    assert sel.config == C[3] and not sel.fallback
    assert sel.fitting_configs == [C[1].tag, C[3].tag]


def test_selection_ties_go_to_the_first_config_in_sweep_order():
    rows = [(C[0], _bins(1.0, 0.5, 0.1)), (C[1], _bins(1.0, 0.8, 0.2)),
            (C[2], _bins(1.0, 0.8, 0.9))]
    assert R.select_config(rows).config == C[1]


def test_selection_when_none_fits_uses_the_fallback():
    sel = R.select_config([(C[0], _bins(0.98, 0.9, 0.9)), (C[1], None)])
    assert sel.config is None and sel.fallback and "none of 2" in sel.reason


def test_first_five_fitting_seeds_in_seed_order():
    per = [(s, _bins(1.0 if s % 3 else 0.99, 0.5)) for s in range(12)]
    assert R.fitting_seeds(per, 5) == [1, 2, 4, 5, 7]            # 0, 3, 6 do not fit
    assert R.fitting_seeds(per, 5, threshold=0.0) == [0, 1, 2, 3, 4]   # the fallback: all count


def test_bin_summary_and_agreement_with_a_published_number():
    per = {s: _bins(1.0, 0.9 + 0.01 * s, 0.2) for s in range(5)}
    summ = R.bin_summary(per, list(range(5)), ((0, 50), (51, 100), (101, 150)))
    assert summ[1]["mean"] == pytest.approx(0.92) and summ[1]["min"] == pytest.approx(0.90)
    assert summ[0]["bin"] == [1, 50]
    ag = R.agreement("majority_binary", "ape_learned", per, list(range(5)),
                     [1.0, 0.9999, 0.9996], ((0, 50), (51, 100), (101, 150)))
    assert [a["threshold"] for a in ag] == [pytest.approx(0.6, abs=0.02)] * 2  # chance 0.5
    assert [a["ours"] for a in ag] == ["generalizes", "fails"]
    assert [a["label"] for a in ag] == ["agrees", "disagrees"]
    few = R.agreement("majority_binary", "ape_learned", per, [0, 1, 2], [1.0, 0.99, 0.98],
                      ((0, 50), (51, 100), (101, 150)))
    assert {a["label"] for a in few} == {"inconclusive"}        # 3 seeds cannot decide


# ------------------------------------------------------------------------------------------
# their generators: offsets and bins
# ------------------------------------------------------------------------------------------

#: Their offset range per example, from language_modeling_train.py (max_test_length = 150):
#: the majority/parity datasets ``randint(0, max_test - n)``, copy and sort
#: ``randint(0, (max_test - n) * 2)``.
THEIRS = {"majority_binary": lambda n: 150 - n, "parity_bits": lambda n: 150 - n,
          "copy_unique_150": lambda n: 2 * (150 - n), "sort_150": lambda n: 2 * (150 - n)}


@pytest.mark.parametrize("name", sorted(THEIRS))
def test_random_offsets_span_exactly_their_generators_range(name):
    task = tasks.get_task(name)
    cfg = R.SweepConfig(1, 1, 16, 1e-3)
    spec = resolve_spec(task, "ape_learned", 0, "default",
                        config_overrides=R.run_overrides(name, "ape_learned", cfg, R.FULL))
    # their range_min: max(1, 0) (lines 118, 246, 313), parity's as given (line 346)
    assert spec.train_lengths == ((0 if name == "parity_bits" else 1), 50)
    hi_off: dict[int, int] = {}
    for s in range(60):
        rng = np.random.default_rng([0, s, 1])
        step = make_step(task, [1, 2, 50], 64, rng, offset_positions(spec), "random", "padded")
        mb = step.micro[0]
        for r in range(mb.inputs.shape[0]):
            n_real = int((mb.mask[r] > 0).nonzero().max()) + 1 if mb.mask[r].any() else 0
            off = int(mb.offsets[r, 0])
            ex_len = n_real + 1                            # their instance: our inputs + 1
            n = {"majority_binary": ex_len - 4, "parity_bits": ex_len - 4,
                 "copy_unique_150": (ex_len - 3) // 2, "sort_150": (ex_len - 3) // 2}[name]
            assert 0 <= off <= THEIRS[name](n), (n, off)
            hi_off[n] = max(hi_off.get(n, 0), off)
            assert off + n_real <= spec.model.n_ctx
    # the top of their range is reached for the shortest length (64 x 60 draws at 3 lengths)
    assert hi_off[1] >= 0.97 * THEIRS[name](1)
    assert hi_off[50] >= 0.97 * THEIRS[name](50)


def test_nope_cells_have_no_offsets_and_bins_are_uniform_over_their_lengths():
    task = tasks.get_task("majority_binary")
    ov = R.run_overrides("majority_binary", "nope", C[0], R.FULL)
    assert ov["position_offsets"] == "none" and "offset_span" not in ov
    assert ov["eval_bins"] == [[0, 50], [51, 100], [101, 150]] and ov["bin_samples"] == 2000
    data = bin_set(task, 51, 100, 2000)
    ns = Counter(len(p) - 2 for p, _ in data)             # BOS body SEP
    assert set(ns) == set(range(51, 101))                  # randint(51, 100): every length
    assert max(ns.values()) < 70 and min(ns.values()) > 15  # ~40 each
    assert bin_set(task, 51, 100, 2000) == data            # the same examples for every run
    ids = Counter(len(p) - 2 for p, _ in bin_set(task, 0, 50, 2000))
    assert min(ids) == 1                                   # their max(1, 0)


def test_teacher_forced_exact_match_equals_greedy_decoding(tmp_path):
    """Per example: every answer position right under teacher forcing <=> greedy decoding
    reproduces the answer (a partly trained model, so both outcomes occur)."""
    tiny = {"n_layers": 1, "d_model": 32, "d_head": 16, "n_heads": 2, "d_mlp": 64,
            "batch_size": 32, "train_max_len": 4, "eval_samples": 4, "warmup_steps": 5,
            "probe_every": 0, "lr": 3e-3}
    res = train("majority_binary", "nope", seed=0, steps=30, out_dir=tmp_path / "r",
                config_overrides=tiny, progress=False, verbose=False)
    from analysis.training.runs import load_run
    model = load_run(res.run_dir)[0]
    task = tasks.get_task("majority_binary")
    outcomes = 0
    for n in (3, 7, 9, 13):
        from analysis.training.evaluation import eval_set
        data = eval_set(task, n, 40)
        greedy = evaluate(model, task, [(n, "id")], samples=40)[0].correct
        tf, total = teacher_forced_em(model, task, data)
        assert (tf, total) == (greedy, 40), n
        outcomes += 0 < greedy < 40
    assert outcomes >= 1, "the model should be partly right at some length"


# ------------------------------------------------------------------------------------------
# a cell, interrupted and resumed
# ------------------------------------------------------------------------------------------

TINY = replace(R.SMALL, name="tiny", train_lengths=(0, 3), bins=((0, 3), (4, 6)),
               configs=(R.SweepConfig(1, 1, 16, 1e-3), R.SweepConfig(1, 2, 16, 1e-3)),
               steps=40, fit_every=20, bin_samples=16, batch_size=8, fitting=2, max_seeds=3,
               fallback=R.SweepConfig(1, 2, 16, 1e-3), fallback_steps=40, eval_stride=2,
               eval_samples=4)


def _cell(tmp_path, **kw):
    return R.replicate_cell("majority_binary", "nope", TINY, tmp_path / "runs",
                            tmp_path / "cells", grid_kwargs={"serial": True}, waves=1,
                            log=lambda s: None, **kw)


def test_an_interrupted_cell_resumes_and_equals_an_uninterrupted_one(tmp_path):
    ref = _cell(tmp_path / "a", prediction={"prediction": "generalizes", "label": "g"})
    assert ref["status"] in ("done", "incomplete") and ref["sweep"]
    assert ref["prediction"]["prediction"] == "generalizes"

    calls = []

    def stop(line):
        calls.append(line)
        if "sweep 2-2" in line:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        R.replicate_cell("majority_binary", "nope", TINY, tmp_path / "b" / "runs",
                         tmp_path / "b" / "cells", prediction={"prediction": "fails"},
                         grid_kwargs={"serial": True}, waves=1, log=stop)
    path = R.cell_path(tmp_path / "b" / "cells", "majority_binary", "nope", TINY)
    assert json.loads(path.read_text())["status"] == "running"   # registered before the runs
    # the rerun keeps the prediction registered first and reuses the finished sweep run
    got = _cell(tmp_path / "b", prediction={"prediction": "generalizes"})
    assert got["prediction"]["prediction"] == "fails"
    for key in ("sweep", "selection", "seeds_tried", "fitting_seeds", "bins", "status"):
        assert got[key] == ref[key], key


# ------------------------------------------------------------------------------------------
# the command line
# ------------------------------------------------------------------------------------------

def _rasp(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "rasp_cli.main", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args, says", [
    (["replicate", "huang", "count", "--pe", "nope"], "not one of Huang et al.'s"),
    (["replicate", "huang", "majority", "--pe", "t5"], "trained ape_learned and nope"),
    (["replicate", "huang", "majority", "--pe", "nope", "--waves", "0"], "--waves"),
    (["replicate", "zhou", "majority"], "invalid choice"),
])
def test_bad_input_is_one_line_and_exit_2(args, says):
    p = _rasp(*args)
    assert p.returncode == 2 and says in p.stderr and "Traceback" not in p.stderr


@pytest.mark.slow
def test_small_scale_end_to_end_and_the_doc(tmp_path):
    """One cell at --scale small through the command (in-process grid), then the doc."""
    p = _rasp("replicate", "huang", "majority_binary", "--pe", "nope", "--scale", "small",
              "--serial", "--no-predict", "--runs", str(tmp_path / "runs"), "-o",
              str(tmp_path / "cells"), timeout=1800)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "bin 11-20" in p.stdout and "bin 21-30" in p.stdout
    cell = json.loads((tmp_path / "cells" / "small" / "majority_binary--nope.json").read_text())
    assert cell["status"] == "done" and len(cell["fitting_seeds"]) == 5
    doc = tmp_path / "doc.md"
    q = subprocess.run([sys.executable, "-m", "analysis.reporting.replication_doc", "--cells",
                        str(tmp_path / "cells"), "-o", str(doc)], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert q.returncode == 0, q.stderr
    text = doc.read_text()
    assert text.splitlines()[2].startswith("Generated by `python -m analysis.reporting."
                                           "replication_doc")
    assert "| majority_binary | NoPE | done |" in text
    assert "`rasp replicate huang sort_150 --pe nope`" in text       # listed as not run


@pytest.mark.parametrize("pred, far, label", [
    ("generalizes", "generalizes", "supported"), ("generalizes", "fails", "contradicted"),
    ("fails", "fails", "supported"), ("no program", "fails", "inconclusive"),
    ("unknown", "generalizes", "inconclusive"), ("generalizes", "inconclusive", "inconclusive"),
    (None, "fails", "inconclusive")])
def test_a_registered_prediction_is_checked_on_the_farthest_bin(pred, far, label):
    cell = {"task": "t", "pe": "nope", "scale": "full", "status": "done",
            "prediction": {"prediction": pred} if pred else None,
            "agreement": [{"bin": [51, 100], "ours": "generalizes"},
                          {"bin": [101, 150], "ours": far}]}
    got = R.prediction_check(cell)
    assert got["label"] == label and got["measured"] == far


def test_the_report_shows_a_finished_cell_of_the_task(tmp_path):
    """``rasp report``'s rows for a task with a finished replication cell (and none for a task
    without one, or a cell still running)."""
    from analysis.experiment.replication import cell_rows as replication_rows
    cells = tmp_path / "cells" / "full"
    cells.mkdir(parents=True)
    cell = {"task": "majority", "pe": "nope", "scale": "full", "comparable": True,
            "status": "done", "prediction": {"prediction": "generalizes",
                                             "registered": "2026-01-01T00:00:00Z"},
            "selection": {"config": "1l1h64d"},
            "bins": [{"bin": [1, 50], "mean": 1.0}, {"bin": [51, 100], "mean": 0.99},
                     {"bin": [101, 150], "mean": 0.2}],
            "theirs": [1.0, 0.9986, 0.9846],
            "agreement": [{"bin": [51, 100], "ours": "generalizes"},
                          {"bin": [101, 150], "ours": "fails"}]}
    (cells / "majority--nope.json").write_text(json.dumps(cell))
    (cells / "majority--ape_learned.json").write_text(json.dumps(
        {**cell, "pe": "ape_learned", "status": "running"}))
    rows = replication_rows("majority", tmp_path / "cells")
    assert len(rows) == 1 and rows[0]["label"] == "contradicted"
    assert rows[0]["bins"] == "1-50: 1.000 / 51-100: 0.990 / 101-150: 0.200"
    assert rows[0]["their_selected"] == "1l1h64d"                # run_multiple_seeds.py
    assert rows[0]["in_sample"]                       # the page says "in-sample" on the row
    assert replication_rows("sort_unique", tmp_path / "cells") == []
    assert replication_rows("majority_binary", tmp_path / "cells") == []


def test_the_report_searches_where_the_checkers_leave_unknown():
    """``rasp demo`` runs the searches its predictions need (issue 39 item 2): without them
    copy_repeat / NoPE is ``unknown``; with them (tiny budgets here) it is a bounded search
    certificate that names its bound and budgets, not a decision."""
    from analysis.reporting.report import ReportOptions, report_prediction
    task = tasks.get_task("copy_repeat")
    plain = report_prediction(task, "nope", "none", ReportOptions(search=False, progress=False))
    assert plain.prediction == "unknown"
    searched = report_prediction(task, "nope", "none", ReportOptions(
        search=True, search_budget=200_000, crasp_budget=200_000, progress=False))
    assert searched.prediction != "unknown"
    assert searched.budgets["raspl"] == 200_000 and searched.budgets["crasp"] == 200_000
    if searched.prediction == "no program":
        assert searched.prediction_label.startswith("no program <= ")


# ------------------------------------------------------------------------------------------
# their formal languages (formal_lang_suite)
# ------------------------------------------------------------------------------------------

def test_a_fixed_training_set_is_read_as_pytorchs_dataloader_reads_it():
    """Their ``DataLoader(dataset, batch_size=16)`` without shuffling: the same batches in
    the same order every epoch, the last one smaller (PyTorch itself is the truth here)."""
    from torch.utils.data import DataLoader
    from analysis.training.batches import epoch_batch
    data = list(range(37))
    theirs = [list(map(int, b)) for _ in range(3) for b in DataLoader(data, batch_size=16)]
    ours = [epoch_batch(data, s, 16) for s in range(len(theirs))]
    assert ours == theirs and [len(b) for b in ours[:3]] == [16, 16, 5]


def test_the_fixed_training_set_is_the_same_for_every_seed_and_offsets_below_the_range():
    task = tasks.get_task("tomita4_nextchar")
    sc = R.formal_scale("tomita4_nextchar", "small")
    ov = R.run_overrides("tomita4_nextchar", "ape_learned", sc.configs[0], sc)
    from analysis.training.trainer import batch_maker
    makes = [batch_maker(resolve_spec(task, "ape_learned", s, "default", config_overrides=ov),
                         task) for s in (0, 1)]
    per_epoch = -(-sc.train_set // sc.batch_size)
    for step in (0, 5, per_epoch + 5):
        a, b = (m(seed, step).micro[0] for m, seed in zip(makes, (0, 1)))
        assert sorted(map(tuple, a.inputs.tolist())) == sorted(map(tuple, b.inputs.tolist()))
    # epoch 2 re-reads epoch 1's strings
    assert makes[0](0, 5).real_tokens == makes[0](0, per_epoch + 5).real_tokens
    # their offsets: torch.randint(n_positions / 2) for every example, whatever its length;
    # n_positions = 2 x (the last bin's longest string + BOS + EOS) = 2 x 42 at this scale
    assert ov["offset_range"] == 42 and ov["offset_span"] == 84
    task_lengths = list(range(1, 21))
    seen = set()
    for s in range(40):
        step = make_step(task, task_lengths, 16, np.random.default_rng([0, s, 1]), 84, "random",
                         "padded", offset_range=42)
        seen |= set(int(x) for x in step.micro[0].offsets[:, 0])
    assert seen <= set(range(42)) and {0, 41} <= seen
    with pytest.raises(ValueError, match="past the model"):
        make_step(task, [20], 4, np.random.default_rng(0), 50, "random", "padded",
                  offset_range=42)


def test_their_formal_protocol_settings():
    """formal_lang_suite: experiments/tomita-4.yaml (layers {1,2,4,6} x d_model {32,64} x heads
    {1,2,4}, batch 16, 100 epochs), configs/optimizer/adamw.yaml (lr 1e-5, weight decay 0.1),
    10,000 training strings; the lengths of their released Tomita-4 files, measured: train
    1-100, val bins 1-100 / 101-150 / 101-150."""
    sc = R.scale_for("tomita4_nextchar", "full")
    assert sc.train_set == 10_000 and sc.batch_size == 16 and sc.steps == 100 * 625
    assert sc.train_lengths == (1, 100) and sc.bins == ((1, 100), (101, 150), (101, 150))
    assert {(c.n_layers, c.n_heads, c.d_model, c.lr) for c in sc.configs} == {
        (l, h, d, 1e-5) for l in (1, 2, 4, 6) for h in (1, 2, 4) for d in (32, 64)}
    ov = R.run_overrides("tomita4_nextchar", "ape_learned", sc.configs[0], sc)
    assert (ov["weight_decay"], ov["grad_clip"], ov["schedule"], ov["betas"]) == \
        (0.1, 0.0, "constant", [0.9, 0.999])
    assert ov["offset_span"] == 2 * 152 and ov["offset_range"] == 152   # randint(n_pos / 2)
    assert "offset_range" not in R.run_overrides("tomita4_nextchar", "nope", sc.configs[0], sc)
    assert R.their_numbers("tomita4_nextchar", "nope") == pytest.approx([1.0, 0.1645, 0.0])
    assert R.scale_for("majority", "full") is R.FULL


def test_formal_selection_without_a_fallback_model_takes_the_best_in_distribution():
    rows = [(C[0], _bins(0.60, 0.10)), (C[1], _bins(0.70, 0.0)), (C[2], _bins(0.70, 0.05))]
    sel = R.select_config(rows, fallback_model=False)
    assert sel.config == C[2] and sel.fallback          # every seed counts
    assert R.select_config(rows).config is None         # the algorithmic rule: 12 layers


def test_a_language_with_one_string_per_length_is_no_test():
    """Tomita 1 (1*) has one string per length: a guess from the answer distribution is
    always right (chance 1), so no exact match can clear chance + 0.1."""
    per = {s: _bins(1.0, 1.0, 1.0) for s in range(5)}
    ag = R.agreement("tomita1_nextchar", "nope", per, list(range(5)), [1.0, 1.0, 1.0],
                     ((1, 20), (21, 30), (31, 40)))
    assert [a["label"] for a in ag] == ["no test (chance)"] * 2
    assert ag[0]["chance"] == pytest.approx(1.0)


def test_a_formal_cell_end_to_end_at_a_tiny_scale(tmp_path):
    tiny = replace(R.formal_scale("tomita4_nextchar", "small"), name="tiny",
                   train_lengths=(1, 6), bins=((1, 6), (7, 9)),
                   configs=(R.SweepConfig(1, 1, 16, 1e-3),), train_set=40, epochs=2, steps=6,
                   bin_samples=16, fitting=2, max_seeds=3, eval_stride=2, eval_samples=4)
    cell = R.replicate_cell("tomita4_nextchar", "nope", tiny, tmp_path / "runs",
                            tmp_path / "cells", grid_kwargs={"serial": True}, waves=1,
                            log=lambda s: None)
    # a cut of their protocol (not comparable) says first that the notes are full scale's
    assert cell["code_not_paper"][1:] == list(R.FORMAL_NOT_THEIRS)
    assert cell["code_not_paper"][0].startswith("scale tiny is a CPU cut of their protocol")
    assert cell["their_bins"] == ["1-100", "101-150", "101-150"]
    assert len(cell["sweep"]) == 1 and cell["selection"]["config"] == "1l1h16d"
    assert cell["status"] == "done" and len(cell["bins"]) == 2
    cfg = json.loads(next((tmp_path / "runs").rglob("config.json")).read_text())
    assert cfg["train"]["train_set"] == 40 and cfg["steps"] == 6


# ------------------------------------------------------------------------------------------
# issue 47: their per-language grids, fallbacks, seeds, fit before agreement, compute once
# ------------------------------------------------------------------------------------------

#: Copied from github.com/lacoco-lab/length_generalization (commit b39b743),
#: formal_lang_suite/experiments/<file>.yaml: model.num_layers, model.num_heads, model.d_model,
#: dataset.batch_size, train.epochs; and the number of strings in
#: formal_lang_suite/generated_ds/<dataset>/train_src.txt (counted: non-empty lines).
THEIR_EXPERIMENTS = {
    "tomita1": ("tomita-1.yaml", [1, 2, 4], [1, 2, 4], [32], 16, 100, 1000),
    "tomita2": ("tomita-2.yaml", [1, 2, 4, 6], [1, 2, 4], [32, 64], 16, 100, 1000),
    "tomita3": ("tomita-3.yaml", [1, 2, 4, 6], [1, 2, 4], [32, 64], 16, 100, 10000),
    "tomita4": ("tomita-4.yaml", [1, 2, 4, 6], [1, 2, 4], [32, 64], 16, 100, 10000),
    "tomita5": ("tomita-5.yaml", [1, 2, 4, 6], [1, 2, 4], [32, 64], 16, 150, 10000),
    "tomita6": ("tomita-6.yaml", [1, 2, 4, 6], [1, 2, 4], [32, 64], 16, 100, 10000),
    "tomita7": ("tomita-7.yaml", [1, 2, 4, 6], [1, 2, 4], [32, 64], 16, 100, 10000),
    "dyck1_depth2": ("d-2.yaml", [1, 2, 4], [1, 2, 4], [32, 64], 16, 100, 200),
    "dyck1_depth3": ("d-3.yaml", [1, 2, 4], [1, 2, 4], [32, 64], 16, 100, 10000),
    "dyck1_depth4": ("d-4.yaml", [1, 2, 4], [1, 2, 4], [32, 64], 16, 100, 10000),
    "dyck1_depth12": ("d-12.yaml", [1, 2, 4], [1, 2, 4], [32, 64], 16, 100, 10000),
    "aa_star": ("aastar.yaml", [1, 2, 4], [1, 2, 4], [32], 16, 100, 40),
    "aaaa_star": ("aaaastar.yaml", [1, 2, 4, 6], [1, 2, 4], [32, 64], 16, 100, 125),
    "abab_star": ("ababstar.yaml", [4, 6], [2, 4], [32, 64], 4, 150, 125),
    "a_to_e_blocks": ("aastarbbstarccstarddstareestar.yaml", [1, 2, 4], [1, 2, 4], [32, 64],
                      16, 100, 10000),
    "ab_d_bc": ("abstar_d_bcstar.yaml", [1, 2, 4], [1, 2, 4], [32], 16, 100, 10000),
    "ends_02": ("012_star_0_2_star.yaml", [1, 2, 4], [1, 2, 4], [32, 64], 16, 100, 10000),
}


@pytest.mark.parametrize("lang", sorted(THEIR_EXPERIMENTS))
def test_each_formal_language_runs_their_experiment_files_grid(lang):
    exp, layers, heads, dims, batch, epochs, n = THEIR_EXPERIMENTS[lang]
    fp = R.FORMAL_PROTOCOL[lang]
    assert (fp.experiment, list(fp.layers), list(fp.heads), list(fp.d_models), fp.batch_size,
            fp.epochs, fp.train_set) == (exp, layers, heads, dims, batch, epochs, n)
    sc = R.scale_for(f"{lang}_nextchar", "full")
    assert {(c.n_layers, c.n_heads, c.d_model, c.lr) for c in sc.configs} == {
        (l, h, d, 1e-5) for l in layers for h in heads for d in dims}
    assert (sc.batch_size, sc.epochs, sc.train_set) == (batch, epochs, n)
    assert sc.steps == epochs * -(-n // batch)         # their DataLoader: last batch the rest
    ov = R.run_overrides(f"{lang}_nextchar", "nope", sc.configs[0], sc)
    assert (ov["train_set"], ov["batch_size"], ov["steps"]) == (n, batch, sc.steps)


def test_the_fallback_and_seeds_are_theirs():
    """run_multiple_seeds.py: big = 12l12h768d lr 1e-4, bigsmalllr = lr 3e-5 (lines 103-110);
    task_arch names bigsmalllr for NoPE parity, big for APE addition and NoPE interleave and
    addition (lines 52-69); seeds range(1000) (line 118)."""
    assert R.FULL.max_seeds == 1000
    par = R.fallback_config("parity_bits", "nope", R.FULL)
    assert (par.n_layers, par.n_heads, par.d_model, par.lr, par.tag) == \
        (12, 12, 768, 3e-5, "bigsmalllr")
    for task, pe in (("addition_binary", "ape_learned"), ("majority_interleave", "nope"),
                     ("addition_binary", "nope"), ("majority", "nope"),
                     ("parity_bits", "ape_learned")):
        cfg = R.fallback_config(task, pe, R.FULL)
        assert (cfg.n_layers, cfg.lr, cfg.tag) == (12, 1e-4, "big"), (task, pe)
    assert R.fallback_config("parity_bits", "nope", R.SMALL) == R.SMALL.fallback
    assert R.FULL.fallback_steps == 60_000 and R.FULL.fallback_warmup == 3_000


def test_their_model_that_did_not_fit_is_said_before_agreement():
    """Their NoPE interleave (the fallback, ID 0.9616) and ends_02 NoPE (ID 18.2%): 'their model
    did not fit', never agrees / disagrees; a fitting one (ID 1.0) is compared as before."""
    per = {s: _bins(1.0, 0.95, 0.2) for s in range(5)}
    bins = ((0, 50), (51, 100), (101, 150))
    ag = R.agreement("majority_binary", "nope", per, list(range(5)), [0.9616, 0.6881, 0.3947],
                     bins)
    assert [a["label"] for a in ag] == ["their model did not fit (ID 0.962)"] * 2
    ag = R.agreement("majority_binary", "nope", per, list(range(5)), [1.0, 0.99, 0.1], bins)
    assert [a["label"] for a in ag] == ["agrees", "agrees"]
    assert R.their_fit_label(R.their_numbers("ends_02_nextchar", "nope")) == \
        "their model did not fit (ID 0.182)"
    assert R.their_fit_label(R.their_numbers("tomita4_nextchar", "ape_learned")) is None


def _done(d, sec, steps=100):
    d.mkdir(parents=True)
    (d / "DONE").write_text(json.dumps({"task": "majority_binary", "pe": "nope", "seed": 0,
                                        "steps": steps, "id_em": 1.0, "ood_em": 1.0,
                                        "train_seconds": sec, "tokens_per_second": 10.0,
                                        "params": 1000}))


def test_compute_counts_each_run_once(tmp_path):
    """The sweep's seed 0 of the selected configuration is also the cell's seed 0: once."""
    a, b = tmp_path / "1l1h16d" / "seed0", tmp_path / "1l1h16d" / "seed1"
    _done(a, 10.0)
    _done(b, 5.0)
    comp = R.measured_compute([a, tmp_path / "x" / ".." / "1l1h16d" / "seed0", a, b])
    assert (comp["runs"], comp["train_seconds"], comp["steps"]) == (2, 15.0, 200)
    assert comp["counted_once"]
    old = {"compute": {"runs": 7, "train_seconds": 70.0, "steps": 700, "flops": 1.0},
           "selection": {"config": "1l1h16d"}, "sweep": [{"config": "1l1h16d"},
                                                         {"config": "1l1h16dsmalllr"}],
           "seeds_tried": [0, 1, 2, 3, 4]}
    fixed = R.cell_compute(old)
    assert fixed["runs"] == 6 and not fixed["exact"] and "twice" in fixed["note"]
    assert R.cell_compute({**old, "compute": comp})["exact"]


def test_every_prediction_check_is_marked_in_sample():
    for task in ("majority_binary", "tomita4_nextchar"):
        cell = {"task": task, "pe": "nope", "scale": "small", "status": "done",
                "prediction": {"prediction": "generalizes"},
                "agreement": [{"bin": [21, 30], "ours": "generalizes", "label": "agrees"}]}
        chk = R.prediction_check(cell)
        assert chk["label"] == "supported" and chk["in_sample"] and "fit" in chk["caveat"]
    from analysis.reporting.replication_doc import render
    text = render([{**cell, "comparable": False, "registered": None}], "cmd")
    rows = [line for line in text.splitlines() if line.startswith("| tomita4_nextchar | NoPE "
                                                                    "| small")]
    assert rows and all("yes: a fit, not a test" in r for r in rows)
