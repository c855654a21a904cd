"""Claims computed from runs: labels from the seed-paired rule, never pooling different
protocols or configurations."""

import json

import numpy as np
import pytest

from analysis.evidence.claims import (ClaimError, check_poolable, compare_pes, comparison_groups,
                             distance_claim, prediction_claim, run_record, task_claims)


def _config(pe, seed, task="sort_unique", **train):
    return {"task": task, "pe": pe, "seed": seed, "preset": "demo", "steps": 3000,
            "model": {"pe": pe, "n_layers": 2, "d_model": 64, "embed_init_std": 1.0},
            "train": {"lr": 3e-3, "position_offsets": "none", **train},
            "train_lengths": [1, 10], "git_commit": f"abc{seed}", "created": "now"}


def _acc(id_em, ood_em, n=100):
    """Accuracy rows: 3 ID lengths at ``id_em``, 3 OOD lengths at ``ood_em`` (n samples each)."""
    return ([{"length": L, "split": "id", "em": id_em, "n": n} for L in (4, 7, 10)]
            + [{"length": L, "split": "ood", "em": ood_em, "n": n} for L in (12, 16, 20)])


def _run(pe, seed, id_em, ood_em, n=100, task="sort_unique", **train):
    return run_record(_config(pe, seed, task, **train), _acc(id_em, ood_em, n),
                      f"runs/{task}/{pe}/seed{seed}")


SEEDS = range(5)


def test_a_seed_whose_pair_goes_the_other_way_is_inconclusive():
    # NoPE beats APE by 0.1 on four seeds and loses by 0.01 on the fifth: the exact one-sided
    # sign-flip p is 2/32 = 0.0625 > 0.04 (the patterns at least as extreme: the observed one
    # and the one with all signs +)
    nope = [0.80, 0.70, 0.75, 0.60, 0.50]
    ape = [0.70, 0.60, 0.65, 0.50, 0.51]
    runs = ([_run("nope", s, 1.0, x) for s, x in zip(SEEDS, nope)]
            + [_run("ape_sinusoidal", s, 1.0, x) for s, x in zip(SEEDS, ape)])
    c = compare_pes(runs, "nope", "ape_sinusoidal")
    assert c.label == "inconclusive"
    assert c.numbers["p_value"] == pytest.approx(2 / 32)
    assert c.numbers["better"]["ood_em"] == pytest.approx(nope)
    assert c.numbers["diff"] == pytest.approx(0.078)
    assert c.numbers["paired_seeds"] == list(SEEDS)


def test_five_paired_seeds_support_and_the_reverse_needs_seven():
    runs = ([_run("nope", s, 1.0, 0.95 - 0.01 * s) for s in SEEDS]
            + [_run("ape_sinusoidal", s, 1.0, 0.05 + 0.01 * s) for s in SEEDS])
    c = compare_pes(runs, "nope", "ape_sinusoidal")
    assert c.label == "supported", c.reason
    assert c.numbers["p_value"] == pytest.approx(1 / 32)
    lo, hi = c.numbers["ci"]
    assert 0 < lo < c.numbers["diff"] < hi
    assert sorted(c.runs) == sorted(r.run_dir for r in runs)
    assert c.protocol == "none"
    # the opposite direction is held to one-sided p <= 0.01: 1/32 does not reach it
    rev = compare_pes(runs, "ape_sinusoidal", "nope")
    assert rev.label == "inconclusive" and ">= 7 seeds" in rev.reason
    runs7 = ([_run("nope", s, 1.0, 0.95) for s in range(7)]
             + [_run("ape_sinusoidal", s, 1.0, 0.05) for s in range(7)])
    assert compare_pes(runs7, "ape_sinusoidal", "nope").label == "contradicted"


def test_few_seeds_or_unfit_model_is_inconclusive():
    runs = [_run("nope", s, 1.0, 0.95) for s in range(3)] + \
        [_run("t5", s, 1.0, 0.10) for s in range(3)]
    c = compare_pes(runs, "nope", "t5")
    assert c.label == "inconclusive"
    assert c.reason == "needs >= 5 seeds per compared arm; have 3"
    runs = [_run("nope", s, 1.0, 0.95) for s in SEEDS] + \
        [_run("ape_sinusoidal", s, 0.30, 0.0) for s in SEEDS]
    c = compare_pes(runs, "nope", "ape_sinusoidal")
    assert c.label == "inconclusive" and "does not fit" in c.reason


def test_unpaired_seeds_are_reported_and_left_out():
    runs = [_run("nope", s, 1.0, 0.95) for s in range(7)] + \
        [_run("alibi", s, 1.0, 0.2) for s in range(2, 6)]
    c = compare_pes(runs, "nope", "alibi")
    assert c.numbers["paired_seeds"] == [2, 3, 4, 5]
    assert c.numbers["unpaired"] == {"nope": [0, 1, 6], "alibi": []}
    assert c.label == "inconclusive" and "have 4" in c.reason and "nope seed6" in c.reason


def test_few_test_samples_make_a_separation_inconclusive():
    # every seed 0.6 vs 0.4 (p = 1/32) but 5 test samples per length: the bootstrap over test
    # samples puts 0 inside the 95% interval
    runs = [_run("nope", s, 1.0, 0.6, n=5) for s in SEEDS] + \
        [_run("rope", s, 1.0, 0.4, n=5) for s in SEEDS]
    c = compare_pes(runs, "nope", "rope")
    assert c.label == "inconclusive" and c.numbers["ci"][0] <= 0
    assert "interval contains 0" in c.reason


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
    gen = [_run("nope", s, 1.0, 0.9 + 0.01 * s) for s in SEEDS]
    c = prediction_claim(gen, "generalizes")
    assert c.label == "supported", c.reason
    # "some PE is above" over two eligible PEs is tested at 0.05 / 2 (Bonferroni): 5 seeds
    # (sign test p = 1/32) are not enough, 7 (1/128) are
    two = gen + [_run("ape_learned", s, 1.0, 0.0) for s in SEEDS]
    assert prediction_claim(two, "generalizes").label == "inconclusive"
    gen = [_run("nope", s, 1.0, 0.9 + 0.01 * s) for s in range(7)] + \
        [_run("ape_learned", s, 1.0, 0.0) for s in range(7)]
    c = prediction_claim(gen, "generalizes")
    assert c.label == "supported", c.reason
    # sort_unique's answers almost never repeat: chance ~0, the threshold is OOD_GENERALIZES
    assert c.numbers["thresholds"]["chance"] < 0.01 and c.numbers["thresholds"]["ood"] == 0.5
    assert prediction_claim(gen, "fails").label == "contradicted"
    fail = [_run("nope", s, 1.0, 0.02 + 0.01 * s) for s in SEEDS]
    assert prediction_claim(fail, "fails").label == "supported"
    # three seeds: never decided
    c = prediction_claim(fail[:3], "fails")
    assert c.label == "inconclusive" and ">= 5 seeds" in c.reason
    # no PE fits in distribution: never "fails", inconclusive
    unfit = [_run("nope", s, 0.5, 0.0) for s in SEEDS]
    c = prediction_claim(unfit, "fails")
    assert c.label == "inconclusive" and c.numbers["measured"] == "inconclusive"


def _task_run(task, seed, ood):
    """A NoPE run of ``task`` that fits its training lengths, with OOD exact match ``ood``."""
    cfg = _config("nope", seed)
    cfg["task"] = task
    return run_record(cfg, _acc(1.0, ood, n=1000), f"runs/{task}/nope/seed{seed}")


def test_generalizing_means_above_chance():
    # parity's answer is one bit: a model that guesses scores ~0.5, so 0.55 on every seed is
    # below the threshold (chance 0.5 + margin 0.1): "fails", where the bare 0.5 said
    # "generalizes"
    def run(s, ood):
        return _task_run("parity", s, ood)

    c = prediction_claim([run(s, 0.55) for s in SEEDS], "generalizes")
    assert c.numbers["thresholds"]["chance"] == pytest.approx(0.5, abs=0.03)
    assert c.numbers["thresholds"]["ood"] == pytest.approx(0.6, abs=0.03)
    assert c.numbers["measured"] == "fails" and c.label == "contradicted"
    assert prediction_claim([run(s, 0.95) for s in SEEDS], "generalizes").label == "supported"


def test_distance_claim_and_task_claims():
    # paired by seed; 5 seeds: every paired difference positive gives one-sided p = 1/32
    d = {"t5": [0.10, 0.12, 0.11, 0.13, 0.10], "alibi": [0.20, 0.25, 0.22, 0.21, 0.24],
         "ape_sinusoidal": [0.5, 0.6, 0.55, 0.52, 0.58]}
    assert distance_claim("sort_unique", d, "standard").label == "supported"
    d2 = {"t5": [0.10, 0.30, 0.10, 0.30, 0.10], "alibi": [0.20, 0.25, 0.20, 0.25, 0.20]}
    assert distance_claim("sort_unique", d2, "standard").label == "inconclusive"
    # "contradicted" is a union over the other PEs (Bonferroni) at 0.01: 7 seeds, p = 1/128
    d3 = {"t5": [0.40] * 7, "alibi": [0.20, 0.25, 0.21, 0.22, 0.23, 0.24, 0.2]}
    assert distance_claim("sort_unique", d3, "released").label == "contradicted"
    # two seeds (the old rule decided from "every seed"): inconclusive, with the reason
    two = distance_claim("sort_unique", {"t5": [0.4, 0.45], "alibi": [0.2, 0.25]}, "standard")
    assert two.label == "inconclusive" and "needs >= 5 seeds" in two.reason
    runs = [_run(pe, s, 1.0, 0.9 if pe == "nope" else 0.1) for pe in ("nope", "t5")
            for s in SEEDS]
    claims = task_claims(runs, "generalizes", {"standard": d}, {"standard": [0.05]})
    assert [c.id for c in claims] == ["sort_unique:nope>t5", "sort_unique:prediction",
                                      "sort_unique:closest:standard"]
    assert all(c.label in ("supported", "contradicted", "inconclusive") for c in claims)


def test_a_task_with_two_protocols_is_compared_within_each_and_says_so():
    from analysis.evidence.claims import claims_for_task
    runs = [_run("nope", s, 1.0, 0.95) for s in SEEDS] + \
           [_run("ape_sinusoidal", s, 1.0, 0.0) for s in SEEDS] + \
           [_run(pe, s, 1.0, 0.9, position_offsets="random")
            for pe in ("nope", "ape_sinusoidal") for s in SEEDS]
    out = claims_for_task(runs, "generalizes")
    assert "2 groups" in out["note"] and "protocol random" in out["note"]
    assert {g["protocol"] for g in out["groups"]} == {"none", "random"}
    ape = [c for c in out["claims"] if c["id"] == "sort_unique:nope>ape_sinusoidal"]
    # one claim per protocol, each comparing only its own runs
    assert sorted((c["protocol"], c["label"]) for c in ape) == [("none", "supported"),
                                                               ("random", "inconclusive")]
    for c in ape:
        assert len(c["runs"]) == 10


def test_every_paper_claim_names_a_paper_that_trained_both_encodings():
    """Kazemnejad et al. 2023 trained NoPE, T5, ALiBi, Rotary and a sinusoidal APE (no learned
    APE): no pairwise claim may put a learned APE under their name, or any name."""
    from analysis.evidence.claims import PAPER_PE_CLAIMS
    kazemnejad = {"nope", "t5", "alibi", "rope", "ape_sinusoidal"}
    for better, worse, source in PAPER_PE_CLAIMS:
        assert source.startswith("Kazemnejad et al. 2023")
        assert {better, worse} <= kazemnejad


def test_fingerprint_is_over_the_resolved_configuration():
    from analysis.evidence.claims import config_fingerprint
    from analysis.training.configs import RunSpec, TrainConfig, resolve
    from rasp_model import TransformerConfig

    model, train = resolve("demo")
    spec = RunSpec(task="sort_unique", pe="nope", seed=0, preset="demo",
                   model=TransformerConfig(**model, pe="nope", d_vocab=20, n_ctx=48),
                   train=train.replace(train_max_len=10), train_lengths=(1, 10),
                   eval_lengths=((10, "id"), (20, "ood")))
    new = {**spec.to_dict(), "git_commit": "abc", "created": "now"}
    # a run written before torch_compile / autocast existed: the keys are absent
    old = json.loads(json.dumps(new))
    for key in ("torch_compile", "autocast"):
        del old["train"][key]
    assert new["train"]["torch_compile"] is False and new["train"]["autocast"] == "none"
    assert config_fingerprint(old) == config_fingerprint(new)
    check_poolable([run_record(old, _acc(1, 1)), run_record({**new, "pe": "t5", "seed": 1},
                                                            _acc(1, 1))])
    # a real setting differs: another fingerprint, and the runs are not pooled
    other = json.loads(json.dumps(new))
    other["train"]["lr"] = 1e-3
    assert config_fingerprint(other) != config_fingerprint(new)
    changed = json.loads(json.dumps(new))
    changed["train"]["autocast"] = "bfloat16"
    assert config_fingerprint(changed) != config_fingerprint(old)
    assert TrainConfig.from_dict(old["train"]) == TrainConfig.from_dict(new["train"])


def test_the_distance_rule_rarely_decides_when_all_pes_are_alike():
    """Null simulation: the target and four other PEs' distances drawn from one distribution
    (with a shared per-seed effect, as same-seed models share the NoPE reference); the paired
    rule decides at most 5% of the time at 5 and at 8 seeds."""
    import numpy as np
    rng = np.random.default_rng(11)
    for seeds in (5, 8):
        decided = 0
        sims = 300
        for _ in range(sims):
            shared = rng.normal(0.15, 0.03, size=seeds)
            d = {pe: list(shared + rng.normal(0, 0.02, size=seeds))
                 for pe in ("t5", "alibi", "rope", "ape_sinusoidal", "ape_learned")}
            decided += distance_claim("t", d, "standard").label != "inconclusive"
        assert decided / sims <= 0.05, (seeds, decided / sims)


def test_distance_claim_needs_the_interval_over_probe_sequences_too():
    """Same per-seed distances, so the same sign-flip p (1/32): with replicates that barely
    move (the probe sequences agree) the claim is supported; when resampling the probe
    sequences swings each seed's distance by far more than the gap, the interval of the
    paired difference contains 0 and the claim is inconclusive."""
    d = {"t5": [0.10, 0.11, 0.10, 0.12, 0.10], "alibi": [0.12, 0.13, 0.12, 0.14, 0.12]}
    rng = np.random.default_rng(0)
    tight = {pe: np.asarray(v)[:, None] + rng.normal(0, 1e-4, (5, 400)) for pe, v in d.items()}
    loose = {pe: np.asarray(v)[:, None] + rng.normal(0, 0.3, (5, 400)) for pe, v in d.items()}
    sup = distance_claim("t", d, "standard", replicates=tight)
    assert sup.label == "supported"
    lo, hi = sup.numbers["difference_interval"]["alibi"]
    assert 0 < lo < 0.02 < hi
    inc = distance_claim("t", d, "standard", replicates=loose)
    assert inc.label == "inconclusive" and "95%" in inc.reason
    assert "SCAN" in sup.source                  # the paper's numbers name their task


def test_confirmation_on_a_task_not_selected_for():
    """A claim supported on the selected task is confirmed only where it is supported on the
    other task too; inconclusive there is "not confirmed", contradicted is "contradicted"."""
    from analysis.evidence.claims import claims_for_task, confirmation
    sel = [_run(pe, s, 1.0, ood) for pe, ood in (("nope", 0.9), ("t5", 0.5), ("alibi", 0.5))
           for s in SEEDS]
    # on "count": NoPE beats T5 again, ALiBi beats NoPE (7 seeds would be needed to contradict)
    other = [_run(pe, s, 1.0, ood, task="count")
             for pe, ood in (("nope", 0.6), ("t5", 0.2), ("alibi", 0.9)) for s in SEEDS]
    claims = claims_for_task(sel)["claims"] + claims_for_task(other)["claims"]
    rows = {r["claim"]: r for r in confirmation(claims, "sort_unique", ["count"])}
    assert rows["nope>t5"]["verdict"] == "confirmed"
    assert rows["nope>alibi"]["verdict"] == "not confirmed"
    assert rows["nope>alibi"]["label"] == "inconclusive"
    # a claim with no runs on the other task is not confirmed, never silently dropped
    rows = confirmation(claims_for_task(sel)["claims"], "sort_unique", ["count"])
    assert {r["verdict"] for r in rows} == {"not confirmed"}


def test_no_exact_match_clears_a_threshold_above_one():
    # (aa)*: one string per even length, so its next-character sets follow from the length
    # alone and chance exact match is ~1: a perfect model is no evidence either way (it once
    # read "fails": 1.00 below a threshold of 1.1)
    def run(s, ood):
        return _task_run("aa_star_nextchar", s, ood)

    c = prediction_claim([run(s, 1.0) for s in SEEDS], "generalizes")
    assert c.numbers["thresholds"]["ood"] >= 1
    assert c.numbers["measured"] == "inconclusive" and c.label == "inconclusive"
    assert "no test" in c.reason
