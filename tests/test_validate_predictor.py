"""`rasp validate-predictor`: a tiny real run (few training steps) and the labelling rule."""

import json

from analysis.validate import _label, measured_label
from rasp_cli.main import main


def test_measured_label_uses_the_interval_across_seeds():
    assert measured_label([1.0, 1.0, 1.0], [0.9, 0.95, 0.92])[0] == "generalizes"
    assert measured_label([1.0, 1.0, 1.0], [0.0, 0.05, 0.02])[0] == "fails"
    # straddles the 0.5 threshold: inconclusive
    assert measured_label([1.0, 1.0], [0.1, 0.9])[0] == "inconclusive"
    # does not fit the training lengths: inconclusive whatever the OOD number
    assert measured_label([0.2, 0.3], [0.0, 0.0])[0] == "inconclusive"
    assert _label("generalizes", "fails") == "contradicted"
    assert _label("fails", "fails") == "supported"
    assert _label("disagree", "fails") == "inconclusive"


def test_tiny_validation_run_and_reuse(tmp_path, capsys):
    argv = ["validate-predictor", "sort_unique", "--pe", "nope", "--seeds", "1", "--steps",
            "3", "--runs", str(tmp_path), "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    (row,) = out["rows"]
    assert row["task"] == "sort_unique" and row["pe"] == "nope"
    assert row["label"] in ("supported", "contradicted", "inconclusive")
    # 3 training steps do not fit the task: the measurement is inconclusive
    assert row["measured"] == "inconclusive" and row["label"] == "inconclusive"
    assert out["agreement"] is None and sum(out["counts"].values()) == 1
    assert main(argv) == 0          # the second call reuses the finished run
    again = json.loads(capsys.readouterr().out)
    assert again["rows"][0]["run_dirs"] == row["run_dirs"]
    assert main(["validate-predictor", "sort_unique", "--pe", "bogus"]) == 2
