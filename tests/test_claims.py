"""Claims computed from runs: labels from seed spreads, never pooling different protocols."""

import pytest

from analysis.evidence.claims import (ClaimError, check_poolable, compare_pes, comparison_groups,
                             distance_claim, prediction_claim, run_record, task_claims)


def _config(pe, seed, **train):
    return {"task": "sort_unique", "pe": pe, "seed": seed, "preset": "demo", "steps": 3000,
            "model": {"pe": pe, "n_layers": 2, "d_model": 64, "embed_init_std": 1.0},
            "train": {"lr": 3e-3, "position_offsets": "none", **train},
            "train_lengths": [1, 10], "git_commit": f"abc{seed}", "created": "now"}


def _acc(id_em, ood_em, n=100):
    """Accuracy rows: 3 ID lengths at ``id_em``, 3 OOD lengths at ``ood_em`` (n samples each)."""
    return ([{"length": L, "split": "id", "em": id_em, "n": n} for L in (4, 7, 10)]
            + [{"length": L, "split": "ood", "em": ood_em, "n": n} for L in (12, 16, 20)])


def _run(pe, seed, id_em, ood_em, n=100, **train):
    return run_record(_config(pe, seed, **train), _acc(id_em, ood_em, n),
                      f"runs/sort_unique/{pe}/seed{seed}")


def test_overlapping_seed_ranges_are_inconclusive():
    # NoPE seeds 0.80 and 0.40, APE seeds 0.60 and 0.50: means differ (0.60 vs 0.55) but the
    # seed ranges [0.40, 0.80] and [0.50, 0.60] overlap
    runs = [_run("nope", 0, 1.0, 0.80), _run("nope", 1, 1.0, 0.40),
            _run("ape_sinusoidal", 0, 1.0, 0.60), _run("ape_sinusoidal", 1, 1.0, 0.50)]
    c = compare_pes(runs, "nope", "ape_sinusoidal")
    assert c.label == "inconclusive"
    assert "overlap" in c.reason
    assert c.numbers["better"]["ood_em"] == pytest.approx([0.80, 0.40])
    assert c.numbers["diff"] == pytest.approx(0.05)


def test_separated_seeds_are_supported_and_reversed_contradicted():
    runs = [_run("nope", 0, 1.0, 0.95), _run("nope", 1, 1.0, 0.90), _run("nope", 2, 1.0, 0.97),
            _run("ape_sinusoidal", 0, 1.0, 0.05), _run("ape_sinusoidal", 1, 1.0, 0.10)]
    c = compare_pes(runs, "nope", "ape_sinusoidal")
    assert c.label == "supported"
    lo, hi = c.numbers["ci"]
    assert 0 < lo < c.numbers["diff"] < hi
    assert sorted(c.runs) == sorted(r.run_dir for r in runs)
    assert c.protocol == "none"
    assert compare_pes(runs, "ape_sinusoidal", "nope").label == "contradicted"


def test_one_seed_or_unfit_model_is_inconclusive():
    runs = [_run("nope", 0, 1.0, 0.95), _run("t5", 0, 1.0, 0.10)]
    assert compare_pes(runs, "nope", "t5").label == "inconclusive"          # one seed each
    runs = [_run("nope", 0, 1.0, 0.95), _run("nope", 1, 1.0, 0.96),
            _run("ape_sinusoidal", 0, 0.30, 0.0), _run("ape_sinusoidal", 1, 0.35, 0.0)]
    c = compare_pes(runs, "nope", "ape_sinusoidal")
    assert c.label == "inconclusive" and "does not fit" in c.reason


def test_few_test_samples_make_a_separation_inconclusive():
    # seed ranges separated (0.62, 0.60 vs 0.40, 0.38) but 5 test samples per length: the
    # bootstrap over test samples puts 0 inside the 95% interval
    runs = [_run("nope", 0, 1.0, 0.6, n=5), _run("nope", 1, 1.0, 0.6, n=5),
            _run("rope", 0, 1.0, 0.4, n=5), _run("rope", 1, 1.0, 0.4, n=5)]
    c = compare_pes(runs, "nope", "rope")
    assert c.label == "inconclusive" and c.numbers["ci"][0] <= 0


def test_runs_of_different_protocols_are_never_pooled():
    runs = [_run("nope", 0, 1.0, 0.95), _run("nope", 1, 1.0, 0.90),
            _run("ape_learned", 0, 1.0, 0.05, position_offsets="random"),
            _run("ape_learned", 1, 1.0, 0.10, position_offsets="random")]
    with pytest.raises(ClaimError, match="position-offset protocols.*position_offsets"):
        compare_pes(runs, "nope", "ape_learned")
    with pytest.raises(ClaimError):
        check_poolable(runs)
    with pytest.raises(ClaimError, match="different configurations.*lr"):
        check_poolable([_run("nope", 0, 1.0, 0.9), _run("t5", 0, 1.0, 0.9, lr=1e-3)])
    groups = comparison_groups(runs)
    assert sorted(len(g) for g in groups) == [2, 2]
    assert {g[0].protocol for g in groups} == {"none", "random"}
    # bookkeeping (git commit, creation time), the PE and the seed may differ
    check_poolable([_run("nope", 0, 1.0, 0.9), _run("t5", 3, 1.0, 0.9)])


def test_prediction_claim_labels():
    gen = [_run("nope", 0, 1.0, 0.95), _run("nope", 1, 1.0, 0.9),
           _run("ape_learned", 0, 1.0, 0.0), _run("ape_learned", 1, 1.0, 0.0)]
    assert prediction_claim(gen, "generalizes").label == "supported"
    assert prediction_claim(gen, "fails").label == "contradicted"
    fail = [_run("nope", 0, 1.0, 0.02), _run("nope", 1, 1.0, 0.05)]
    assert prediction_claim(fail, "fails").label == "supported"
    # no PE fits in distribution: never "fails", inconclusive
    unfit = [_run("nope", 0, 0.5, 0.0), _run("nope", 1, 0.6, 0.0)]
    c = prediction_claim(unfit, "fails")
    assert c.label == "inconclusive" and c.numbers["measured"] == "inconclusive"


def test_distance_claim_and_task_claims():
    d = {"t5": [0.10, 0.12], "alibi": [0.20, 0.25], "ape_sinusoidal": [0.5, 0.6]}
    assert distance_claim("sort_unique", d, "standard").label == "supported"
    d2 = {"t5": [0.10, 0.30], "alibi": [0.20, 0.25]}
    assert distance_claim("sort_unique", d2, "standard").label == "inconclusive"
    d3 = {"t5": [0.40, 0.45], "alibi": [0.20, 0.25]}
    assert distance_claim("sort_unique", d3, "released").label == "contradicted"
    runs = [_run(pe, s, 1.0, 0.9 if pe == "nope" else 0.1) for pe in ("nope", "t5")
            for s in (0, 1)]
    claims = task_claims(runs, "generalizes", {"standard": d}, {"standard": [0.05]})
    assert [c.id for c in claims] == ["sort_unique:nope>t5", "sort_unique:prediction",
                                      "sort_unique:closest:standard"]
    assert all(c.label in ("supported", "contradicted", "inconclusive") for c in claims)


def test_a_task_with_two_protocols_is_compared_within_each_and_says_so():
    from analysis.evidence.claims import claims_for_task
    runs = [_run("nope", s, 1.0, 0.95) for s in (0, 1)] + \
           [_run("ape_learned", s, 1.0, 0.0) for s in (0, 1)] + \
           [_run(pe, s, 1.0, 0.9, position_offsets="random")
            for pe in ("nope", "ape_learned") for s in (0, 1)]
    out = claims_for_task(runs, "generalizes")
    assert "2 groups" in out["note"] and "protocol random" in out["note"]
    assert {g["protocol"] for g in out["groups"]} == {"none", "random"}
    ape = [c for c in out["claims"] if c["id"] == "sort_unique:nope>ape_learned"]
    # one claim per protocol, each comparing only its own runs
    assert sorted((c["protocol"], c["label"]) for c in ape) == [("none", "supported"),
                                                               ("random", "inconclusive")]
    for c in ape:
        assert len(c["runs"]) == 4
