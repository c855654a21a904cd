"""`rasp validate-predictor`: a tiny real run (few training steps) and the labelling rule."""

import json

from analysis.evidence.claims import run_record
from analysis.experiment.validate import measure
from rasp_cli.main import main


def _runs(id_em, ood_em, n=200):
    """One run record per seed: ID EM and OOD EM at two lengths each, ``n`` test samples."""
    return [run_record({"task": "t", "pe": "nope", "seed": s, "train": {"steps": 10}},
                       [{"length": L, "split": "id", "em": i, "n": n} for L in (1, 2)]
                       + [{"length": L, "split": "ood", "em": o, "n": n} for L in (3, 4)])
            for s, (i, o) in enumerate(zip(id_em, ood_em))]


def test_measurement_and_label_are_the_claims_rule():
    """The rule of analysis.evidence.statistics (one owner, via claims.prediction_claim): >= 5
    seeds that fit, an exact sign test and the bootstrap interval on one side of the threshold
    (0.5, or chance + 0.1 where chance is higher), else inconclusive."""
    high, low = [0.9, 0.95, 0.92, 0.93, 0.91], [0.0, 0.05, 0.02, 0.01, 0.03]
    assert measure(_runs([1.0] * 5, high), "generalizes")[:2] == ("generalizes", "supported")
    assert measure(_runs([1.0] * 5, low), "generalizes")[:2] == ("fails", "contradicted")
    assert measure(_runs([1.0] * 5, low), "fails")[:2] == ("fails", "supported")
    # seeds on both sides of the threshold: inconclusive
    assert measure(_runs([1.0] * 5, [0.1, 0.9, 0.2, 0.8, 0.1]), "fails")[:2] == \
        ("inconclusive", "inconclusive")
    # does not fit the training lengths: inconclusive whatever the OOD number
    assert measure(_runs([0.2, 0.3] * 3, [0.0] * 6), "fails")[:2] == ("inconclusive",
                                                                       "inconclusive")
    # fewer than 5 seeds: inconclusive however clear
    assert measure(_runs([1.0] * 3, high[:3]), "generalizes")[0] == "inconclusive"
    assert measure(_runs([1.0], [0.99]), "generalizes")[0] == "inconclusive"
    # theories that disagree make no prediction
    assert measure(_runs([1.0] * 5, high), "disagree")[1] == "inconclusive"
    lo, hi = measure(_runs([1.0] * 5, high), "generalizes")[4]
    assert lo <= 0.922 <= hi


def test_tiny_validation_run_and_reuse(tmp_path, capsys):
    argv = ["validate-predictor", "sort_unique", "--pe", "nope", "--seeds", "0", "--steps",
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


def test_set_gives_the_theories_protocol_to_a_learned_ape(tmp_path, capsys):
    """Without random offsets a learned APE has no theory; `--set position_offsets=random`
    trains the protocol Zhou et al. and Huang et al. assume, and the prediction then comes from
    RASP-L and C-RASP[periodic, local]."""
    base = ["validate-predictor", "sort_unique", "--pe", "ape_learned", "--seeds", "0",
            "--steps", "3", "--json"]
    assert main(base + ["--runs", str(tmp_path / "a")]) == 0
    (plain,) = json.loads(capsys.readouterr().out)["rows"]
    assert plain["prediction"] == "no theory" and plain["theories"] == {}
    assert main(base + ["--runs", str(tmp_path / "b"), "--set", "position_offsets=random"]) == 0
    out = json.loads(capsys.readouterr().out)
    (row,) = out["rows"]
    assert set(row["theories"]) == {"raspl", "crasp_pl"}
    assert row["prediction"] == "generalizes"            # sort_unique's shipped RASP-L program
    assert out["settings"]["overrides"] == {"position_offsets": "random"}
    cfg = json.loads((tmp_path / "b" / "sort_unique" / "ape_learned").glob("*/config.json")
                     .__next__().read_text())
    assert cfg["train"]["position_offsets"] == "random"


def test_pe_preset_trains_one_pe_under_its_own_preset(tmp_path, capsys):
    """`--pe-preset ape_learned=demo_random_offsets` (the main job's protocol for a learned APE)
    trains that PE's runs under that preset, the others under --preset; a bad pair is a usage
    error."""
    argv = ["validate-predictor", "sort_unique", "--pe", "nope", "--pe", "ape_learned",
            "--seeds", "0", "--steps", "3", "--preset", "quick", "--json",
            "--pe-preset", "ape_learned=demo_random_offsets", "--runs", str(tmp_path)]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["settings"]["pe_presets"] == {"ape_learned": "demo_random_offsets"}
    ape = json.loads(next((tmp_path / "sort_unique" / "ape_learned").glob("*/config.json"))
                     .read_text())
    nope = json.loads(next((tmp_path / "sort_unique" / "nope").glob("*/config.json"))
                      .read_text())
    assert ape["preset"] == "demo_random_offsets" and ape["train"]["position_offsets"] == "random"
    assert nope["preset"] == "quick" and nope["train"]["position_offsets"] == "none"
    rows = {r["pe"]: r for r in out["rows"]}
    assert set(rows["ape_learned"]["theories"]) == {"raspl", "crasp_pl"}
    assert main(["validate-predictor", "sort_unique", "--pe-preset", "ape_learned=nosuch"]) == 2


def test_a_prediction_checked_against_a_replication_says_so(tmp_path):
    """A replication cell (``rasp replicate huang``) holding a registered prediction and five
    fitting seeds far below the threshold on its farthest bin: validate-predictor's
    replication section labels the prediction contradicted, at the paper's scale."""
    from analysis.experiment.validate import format_validation, replication_checks
    bins = [{"bin": [1, 50], "em": 1.0, "n": 2000}, {"bin": [51, 100], "em": 0.1, "n": 2000},
            {"bin": [101, 150], "em": 0.0, "n": 2000}]
    from analysis.experiment.replication import agreement
    per = {s: bins for s in range(5)}
    cell = {"task": "copy_ab", "pe": "nope", "scale": "full", "comparable": True,
            "status": "done", "prediction": {"prediction": "generalizes",
                                             "registered": "2026-11-26T00:00:00Z"},
            "agreement": agreement("copy_ab", "nope", per, list(range(5)), None,
                                   ((0, 50), (51, 100), (101, 150)))}
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "copy_ab--nope.json").write_text(json.dumps(cell))
    (check,) = replication_checks(["copy_ab"], ["nope"], str(tmp_path))
    assert (check["measured"], check["label"]) == ("fails", "contradicted")
    assert replication_checks(["copy_ab"], ["ape_learned"], str(tmp_path)) == []
    from analysis.experiment.validate import _tally
    text = format_validation({"rows": [], "replications": [check], **_tally([])})
    assert "replications of Huang et al.'s experiment" in text and "contradicted" in text
