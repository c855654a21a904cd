"""The statistics of a claim state truths that do not depend on the code under test: p-values
equal a brute-force enumeration, the rule decides at most 5% of the time when the two PEs do not
differ (a null simulation through the real ``compare_pes``), it has power against the demo's
difference, and fewer than 5 seeds never decide."""

import itertools
import math

import numpy as np
import pytest

from analysis.evidence import statistics as st
from analysis.evidence.claims import compare_pes, run_record

#: The demo's evaluation (analysis.training.configs.TRAIN_PRESETS["demo"]: eval_samples 64,
#: eval_stride 2, training lengths 1..10, OOD up to 2x): OOD lengths 11, 13, .., 19 and 20,
#: 64 test samples each (analysis.training.evaluation.eval_lengths).
DEMO_OOD_LENGTHS = (11, 13, 15, 17, 19, 20)
DEMO_SAMPLES = 64


def _brute_force(diffs, alternative):
    """p by listing every sign pattern with itertools (no vectorisation, no shortcuts)."""
    obs = sum(diffs) / len(diffs)
    hits = total = 0
    for signs in itertools.product((1, -1), repeat=len(diffs)):
        m = sum(s * d for s, d in zip(signs, diffs)) / len(diffs)
        total += 1
        if alternative == "greater":
            hits += m >= obs - 1e-12
        elif alternative == "less":
            hits += m <= obs + 1e-12
        else:
            hits += abs(m) >= abs(obs) - 1e-12
    return hits / total


@pytest.mark.parametrize("diffs", [
    [0.1, 0.2, 0.3, 0.05, 0.4],            # 5 pairs all positive: one-sided p = 1/32
    [0.1, 0.1, 0.1, 0.1, -0.01],           # the observed pattern and all-positive: 2/32
    [0.3, -0.2, 0.1, 0.05, -0.4, 0.25],
    [0.0, 0.2, 0.2, -0.1],                 # a zero difference and ties in |d|
    [0.5, 0.4, 0.3, 0.2, 0.1, 0.05, 0.02],
])
def test_sign_flip_p_equals_brute_force_enumeration(diffs):
    for alt in ("greater", "less", "two-sided"):
        assert st.sign_flip_pvalue(diffs, alt) == pytest.approx(_brute_force(diffs, alt))


def test_sign_flip_hand_values():
    assert st.sign_flip_pvalue([0.1] * 5, "greater") == pytest.approx(1 / 32)
    assert st.sign_flip_pvalue([0.1] * 5, "two-sided") == pytest.approx(2 / 32)
    assert st.sign_flip_pvalue([0.1] * 5, "less") == 1.0
    assert st.sign_flip_pvalue([0.1, 0.1, 0.1, 0.1, -0.01], "greater") == pytest.approx(2 / 32)
    assert st.sign_flip_pvalue([0.2] * 7, "greater") == pytest.approx(1 / 128)
    assert st.sign_flip_pvalue([], "greater") == 1.0
    # beyond EXACT_MAX pairs: Monte Carlo, close to the exact 2^-20 floor, never below it
    p = st.sign_flip_pvalue([0.1] * 20, "greater")
    assert 2 ** -20 <= p < 1e-4


def test_sign_test_hand_values():
    # all 5 above: 1/32; 4 of 5 above: (1 + 5) / 32; a tie counts against the alternative
    assert st.sign_test_pvalue([0.9] * 5, 0.5) == pytest.approx(1 / 32)
    assert st.sign_test_pvalue([0.9] * 4 + [0.1], 0.5) == pytest.approx(6 / 32)
    assert st.sign_test_pvalue([0.9] * 4 + [0.5], 0.5) == pytest.approx(6 / 32)
    assert st.sign_test_pvalue([0.1] * 5, 0.5, "less") == pytest.approx(1 / 32)
    assert st.sign_test_pvalue([], 0.5) == 1.0


def test_chance_em_from_the_answer_distribution():
    # parity: one answer bit, equally likely -> 1/2; sort_unique: answers almost never repeat
    assert st.chance_em("parity", [11, 15, 20]) == pytest.approx(0.5, abs=0.03)
    assert st.chance_em("sort_unique", [11, 20]) < 0.01
    assert st.generalization_threshold(0.5) == pytest.approx(0.6)
    assert st.generalization_threshold(0.0) == st.OOD_GENERALIZES
    assert st.generalization_threshold(None) == st.OOD_GENERALIZES


def _config(pe, seed):
    return {"task": "sort_unique", "pe": pe, "seed": seed, "preset": "demo",
            "model": {"pe": pe, "n_layers": 2, "d_model": 64},
            "train": {"lr": 3e-3, "eval_samples": DEMO_SAMPLES}, "train_lengths": [1, 10]}


def _simulated_runs(rng, seeds, mean_a, mean_b, shared=0.07, own=0.07):
    """Runs of two PEs: a seed's true OOD EM is ``mean + u_seed + e_run`` clipped to [0, 1]
    (``u_seed`` ~ N(0, shared) common to both PEs of the seed, the pairing; ``e_run`` ~ N(0,
    own); total seed spread sqrt(shared^2 + own^2) ~ 0.1), and each OOD length's exact match is
    binomial with the demo's test size. ID EM 1.0 (every run fits)."""
    runs = []
    for s in range(seeds):
        u = rng.normal(0, shared)
        for pe, mean in (("nope", mean_a), ("ape_sinusoidal", mean_b)):
            p = float(np.clip(mean + u + rng.normal(0, own), 0, 1))
            rows = ([{"length": n, "split": "id", "em": 1.0, "n": DEMO_SAMPLES}
                     for n in (1, 5, 9, 10)]
                    + [{"length": n, "split": "ood", "n": DEMO_SAMPLES,
                        "em": rng.binomial(DEMO_SAMPLES, p) / DEMO_SAMPLES}
                       for n in DEMO_OOD_LENGTHS])
            runs.append(run_record(_config(pe, s), rows, f"sim/{pe}/seed{s}"))
    return runs


def test_null_simulation_false_decision_rate_at_most_5_percent():
    """Both PEs drawn from the same distribution (seed mean ~ N(0.5, 0.1)): the rule decides
    (supported or contradicted) in at most 5% of 400 simulations at 5 vs 5 seeds. The bound
    holds by construction (one-sided levels 0.04 + 0.01); measured here through compare_pes:
    2v2 0, 3v3 0, 5v5 0.0325, 8v8 0.025 (400 simulations each, this seed)."""
    rng = np.random.default_rng(20251124)
    sims = 400
    decided = sum(compare_pes(_simulated_runs(rng, 5, 0.5, 0.5), "nope", "ape_sinusoidal").label
                  != "inconclusive" for _ in range(sims))
    rate = decided / sims
    assert rate <= st.ALPHA, f"false-decision rate {rate:.3f} at 5 vs 5 seeds"
    # the bound the rule guarantees (union of the two one-sided levels) is 5% too
    assert st.ALPHA_STATED + st.ALPHA_REVERSE == pytest.approx(st.ALPHA)
    # with 5 pairs only the all-positive pattern reaches 0.04: the exact null rate is <= 1/32
    assert rate <= 1 / 32 + 2 * math.sqrt((1 / 32) * (31 / 32) / sims)


@pytest.mark.parametrize("mean_a, mean_b, shared, own, floor", [
    (0.97, 0.15, 0.0, 0.01, 0.95),     # the demo: NoPE 0.97, 0.98, 0.97 vs APE 0.16, 0.14
    (0.65, 0.35, 0.0, 0.1, 0.8),       # a difference of 0.3, seed spread 0.1, no pairing gain
])
def test_power_at_five_seeds(mean_a, mean_b, shared, own, floor):
    rng = np.random.default_rng(7)
    sims = 100
    supported = sum(compare_pes(_simulated_runs(rng, 5, mean_a, mean_b, shared, own), "nope",
                                "ape_sinusoidal").label == "supported" for _ in range(sims))
    assert supported / sims >= floor


def test_fewer_than_five_seeds_are_inconclusive_with_the_reason():
    rng = np.random.default_rng(3)
    for k in (1, 2, 3, 4):
        c = compare_pes(_simulated_runs(rng, k, 0.97, 0.15, 0.0, 0.01), "nope", "ape_sinusoidal")
        assert c.label == "inconclusive"
        assert c.reason == f"needs >= 5 seeds per compared arm; have {k}"


@pytest.mark.parametrize("n", [1, 3, 4, 5, 6, 7, 9])
def test_what_n_seeds_can_decide_is_what_the_rule_decides_at_its_extremes(n):
    """`decidable_with(n)` (said before training by `rasp report/demo`) against the rule itself
    on the most extreme runs n seeds can give: NoPE far above the APE on every seed (the
    smallest p a sign-flip test over n pairs can reach, 2^-n) -- supported iff it says so --
    and the reverse -- contradicted iff it says so."""
    rng = np.random.default_rng(n)
    said = st.decidable_with(n)
    better = compare_pes(_simulated_runs(rng, n, 0.95, 0.05, 0.0, 0.01), "nope",
                         "ape_sinusoidal").label
    worse = compare_pes(_simulated_runs(rng, n, 0.05, 0.95, 0.0, 0.01), "nope",
                        "ape_sinusoidal").label
    assert (better == "supported") == said["supported"]
    assert (worse == "contradicted") == said["contradicted"]
    # by hand: 5 seeds reach 1/32 <= 0.04, 7 reach 1/128 <= 0.01
    assert said["supported"] == (n >= 5) and said["contradicted"] == (n >= 7)
    assert str(n) in said["sentence"]
