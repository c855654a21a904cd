"""The theories' regime (issue 47 item 2): a prediction is tested only where its paper says it
applies. Zhou et al. 2023 (Fig. 1b caption): count generalizes once training reaches length 60;
Huang et al. 2025 train every task on lengths 0-50. Runs trained on shorter lengths give
"inconclusive: outside the theory's regime", never "contradicted"."""

import json
from pathlib import Path

import pytest

from analysis.evidence.claims import prediction_claim, run_record, task_claims
from analysis.training.runs import default_run_dir
from analysis.training.study import Study
from tasks import get_task, regex_task


def _record(seed, ood, train_max_len, task="count", pe="nope"):
    config = {"task": task, "pe": pe, "seed": seed, "preset": "demo",
              "model": {"pe": pe, "n_layers": 2, "d_model": 64},
              "train": {"position_offsets": "none", "train_max_len": train_max_len}}
    lo, hi = train_max_len // 2, train_max_len
    acc = ([{"length": n, "split": "id", "em": 1.0, "n": 64} for n in (lo, hi)]
           + [{"length": n, "split": "ood", "em": ood, "n": 64}
              for n in (hi + 1, 2 * hi)])
    return run_record(config, acc, f"runs/{task}/{pe}/seed{seed}")


def test_papers_regimes_are_the_papers_numbers():
    # Zhou et al. 2023, Fig. 1b caption: "Models trained on sequences of length 60 or more
    # exhibit near perfect length generalization up to length 150"
    assert get_task("count").regime.train_max_len == 60
    assert "Zhou" in get_task("count").regime.source
    # Huang et al. 2025 train on lengths 0-50: their algorithmic tasks, their formal languages
    # (both formats) and every regular expression served by their languages' code
    for name in ("majority_binary", "sort_150", "tomita3", "tomita3_nextchar"):
        assert get_task(name).regime.train_max_len == 50, name
    assert regex_task("(aa)*").regime.train_max_len == 50
    # a task whose paper states no training length has no regime: claims read as measured
    assert get_task("sort_unique").regime is None


def test_a_short_protocol_failure_is_outside_the_regime_not_a_contradiction():
    """The measurement of the demo protocol (count, NoPE, trained on 1-10, OOD 0.11 on 7
    seeds): the same numbers contradict "generalizes" without the regime and inside it
    (trained to 60), and are inconclusive below it."""
    regime = get_task("count").regime
    short = [_record(s, 0.11, 10) for s in range(7)]
    plain = prediction_claim(short, "generalizes")
    assert plain.label == "contradicted"
    below = prediction_claim(short, "generalizes", regime=regime)
    assert below.label == "inconclusive"
    assert below.reason.startswith("outside the theory's regime")
    assert "60" in below.reason and "up to 10" in below.reason
    # the measurement is kept, and the regime is in the claim's numbers
    assert below.numbers["measured"] == "fails"
    assert below.numbers["regime"] == {**regime.to_dict(), "trained_max_len": 10,
                                       "inside": False}
    # inside the regime the rule decides again: a failure at 61-120 after training to 60 is
    # a contradiction, a success supports
    inside = [_record(s, 0.11, 60) for s in range(7)]
    assert prediction_claim(inside, "generalizes", regime=regime).label == "contradicted"
    good = [_record(s, 0.95, 60) for s in range(7)]
    assert prediction_claim(good, "generalizes", regime=regime).label == "supported"
    # below the regime a success is not evidence for the theory either
    early = [_record(s, 0.95, 10) for s in range(7)]
    assert prediction_claim(early, "generalizes", regime=regime).label == "inconclusive"


def test_per_pe_claims_carry_the_regime():
    regime = get_task("count").regime
    runs = [_record(s, 0.11, 10, pe=pe) for s in range(5) for pe in ("nope", "ape_learned")]
    claims = task_claims(runs, {"nope": {"prediction": "generalizes"},
                                "ape_learned": {"prediction": "generalizes"}}, regime=regime)
    pred = [c for c in claims if ":prediction:" in c.id]
    assert len(pred) == 2 and {c.label for c in pred} == {"inconclusive"}


def test_runs_at_another_training_length_have_their_own_directory(tmp_path):
    assert default_run_dir("count", "nope", 0, "demo", tmp_path) == \
        Path(tmp_path) / "count" / "nope" / "seed0-demo"
    assert default_run_dir("count", "nope", 0, "demo", tmp_path, 60) == \
        Path(tmp_path) / "count" / "nope" / "seed0-demo-L60"
    st = Study(tasks=["count", "sort_unique"], pes=["nope"], seeds=[0], train_preset="demo",
               task_train_max_len={"count": 60}, runs_root=str(tmp_path))
    by_task = {r.task_name: r for r in st.runs()}
    assert by_task["count"].train_max_len == 60
    assert by_task["count"].directory(tmp_path).name == "seed0-demo-L60"
    assert by_task["sort_unique"].train_max_len is None
    assert by_task["sort_unique"].directory(tmp_path).name == "seed0-demo"


def test_validate_trains_a_task_where_its_theory_speaks(tmp_path):
    """``validate`` trains count up to 60 (its paper's regime) by default; one step keeps it
    short; the run's config records the length and the run its own directory."""
    from analysis.experiment.validate import validate
    out = validate(["count"], ["nope"], [0], preset="quick", steps=1, runs_root=str(tmp_path),
                   progress=False)
    [row] = out["rows"]
    run_dir = Path(row["run_dirs"][0])
    assert json.loads((run_dir / "config.json").read_text())["train"]["train_max_len"] == 60
    assert run_dir.name == "seed0-quick-L60"
    assert out["settings"]["regime_lengths"] == {"count": 60}
    assert row["label"] == "inconclusive"          # one seed: never decided
