"""The statistics of a claim: one owner of the comparison rule and the outcome rule.

Every label :mod:`analysis.evidence.claims` gives (and the report's measured outcome) is decided
here, by rules whose false-decision rate is a test of the suite (``tests/test_statistics.py``:
a null simulation through the real :func:`analysis.evidence.claims.compare_pes`).

**What a seed is.** Runs of one seed share their initial weights (ALiBi, RoPE and sinusoidal APE
start from NoPE's exact tensors for that seed) and their batches (the data order of a seed is
the same for every PE). Two PEs are therefore compared *within* seed (paired), and the unit of
replication is the seed, never the run or the test sample.

**Comparison of two PEs on one task** (:func:`paired_comparison`).

* Statistic: the mean over paired seeds of ``OOD EM(a) - OOD EM(b)`` (a run's OOD EM is the
  mean over its OOD lengths of the exact match). A seed present for only one PE is reported
  (``unpaired``) and left out.
* p-value: the exact sign-flip (randomization) test of the paired differences (Fisher 1935,
  *The Design of Experiments* §21; Good, *Permutation, Parametric and Bootstrap Tests of
  Hypotheses*, 3rd ed., §3.1). Under the null "within a seed, the two PEs' runs are
  exchangeable" each difference is as likely to have either sign, so the mean's distribution
  is that over all ``2^n`` sign patterns. All patterns are enumerated for ``n <= 16``
  (:data:`EXACT_MAX`); beyond, a seeded Monte Carlo sample of patterns (p = (1 + hits) /
  (1 + draws), which keeps the test valid; Phipson & Smyth 2010).
* Interval: a percentile bootstrap (Efron & Tibshirani 1993, ch. 13) that resamples *seeds as
  units* (a seed's pair of runs stays together) and, within each run, its test samples (each
  length's ``k* ~ Bin(n, em)``: the run's evaluation is a sample of ``n`` prompts per length);
  the 95% interval of the mean paired difference, from 2,000 seeded replicates (Efron &
  Tibshirani recommend >= 1,000 for percentile intervals).
* Decision (:data:`MIN_SEEDS`, :data:`ALPHA_STATED`, :data:`ALPHA_REVERSE`): a label is decided
  only when there are >= 5 paired seeds and every paired run fits its training lengths (ID EM
  >= :data:`ID_FIT`; a model that has not learned the task in distribution says nothing about
  length generalization). *supported*: the one-sided p-value in the direction the claim states
  is <= 0.04 **and** the 95% interval lies above 0; *contradicted*: the one-sided p-value in the
  opposite direction is <= 0.01 **and** the 95% interval lies below 0; otherwise
  *inconclusive*, with the reason.

  Why these levels. With ``n`` pairs the smallest one-sided exact p is ``2^-n`` and the
  smallest two-sided one ``2^(1-n)``: at 5 pairs 1/32 = 0.031 and 2/32 = 0.0625, so a
  two-sided 5% test cannot decide anything with 5 seeds, and two one-sided 5% tests would
  decide 2/32 = 6.25% of the time under the null (10% for larger ``n``). The claims are
  directional statements of the papers ("NoPE generalizes better than APE"), so the error
  budget of 5% is split unequally between the two labels: 4% for the stated direction
  (reachable at 5 pairs: 1/32 <= 0.04) and 1% for the reverse (reachable from 7 pairs: 1/128).
  By the union bound the probability that the rule decides *anything* when the two PEs do not
  differ is <= 0.04 + 0.01 = 0.05 at every number of seeds; the interval condition only lowers
  it. With 5 or 6 seeds the rule can support a claim but not contradict it — it says so in
  the reason.

**Outcome of a task** (:func:`task_outcome`): does some PE length-generalize?

* Threshold: a PE generalizes when its OOD EM is >= :func:`generalization_threshold` =
  ``max(OOD_GENERALIZES, chance + CHANCE_MARGIN)``, where ``chance`` is :func:`chance_em`, the
  exact match of a guess drawn from the task's own answer distribution at the evaluated OOD
  lengths (parity: 0.5, so the threshold is 0.6; sort_unique: ~0, so 0.5).
  :data:`CHANCE_MARGIN` = 0.1: a run's OOD EM is measured on ~6 lengths x 64 prompts (the
  demo), whose sampling standard deviation near 0.5 is sqrt(0.25 / 384) = 0.026, so 0.1 is
  ~4 standard deviations: a model at chance does not cross the threshold by sampling alone.
* Per PE with >= :data:`MIN_SEEDS` seeds that all fit: *above* when the exact one-sided sign
  test (median of the seeds' OOD EM > threshold; Conover, *Practical Nonparametric
  Statistics*, §3.4; no symmetry assumed) gives p <= the PE's level and the 95% bootstrap
  interval (seeds as units, test samples within runs) lies above the threshold; *below* likewise
  in the other direction at level 0.05.
* Task: *generalizes* when some eligible PE is above at level 0.05 / k (Bonferroni over the k
  eligible PEs: "some PE is above" is a union of k tests); *fails* when every PE that fits is
  eligible and below at 0.05 (an intersection: no correction needed); otherwise
  *inconclusive* — also when no PE fits with >= 5 seeds. One PE at 5 seeds decides (1/32);
  with k eligible PEs "generalizes" needs one PE with ``2^-n <= 0.05 / k`` (6 PEs: 7 seeds).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

__all__ = ["MIN_SEEDS", "ALPHA", "ALPHA_STATED", "ALPHA_REVERSE", "ID_FIT", "OOD_GENERALIZES",
           "CHANCE_MARGIN", "EXACT_MAX", "sign_flip_pvalue", "sign_test_pvalue",
           "ood_replicates", "resample_seeds", "percentile_interval", "seed_bootstrap", "paired_bootstrap", "PairedComparison",
           "paired_comparison", "fits", "chance_em", "generalization_threshold",
           "pe_against_threshold", "task_outcome", "decidable_with"]

#: A decided label needs at least this many paired seeds (seeds per compared arm).
MIN_SEEDS = 5
#: The rule's false-decision rate under the null (both labels together).
ALPHA = 0.05
#: One-sided level of the direction the claim states ("supported").
ALPHA_STATED = 0.04
#: One-sided level of the opposite direction ("contradicted"); ALPHA_STATED + this = ALPHA.
ALPHA_REVERSE = 0.01
#: A run fits its training lengths when its mean ID exact match is at least this.
ID_FIT = 0.9
#: A PE "generalizes" when its OOD exact match reaches this (and chance + CHANCE_MARGIN).
OOD_GENERALIZES = 0.5
#: How far above the task's chance exact match the "generalizes" threshold sits at least.
CHANCE_MARGIN = 0.1
#: Sign-flip tests over at most this many pairs enumerate all 2^n patterns.
EXACT_MAX = 16

_BOOTSTRAP = 2000
_BOOTSTRAP_SEED = 20231016
_MC_DRAWS = 200_000
_CHANCE_SAMPLES = 2000
_CHANCE_SEED = 7919


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------

def sign_flip_pvalue(diffs: Sequence[float], alternative: str = "greater",
                     seed: int = _BOOTSTRAP_SEED) -> float:
    """Exact sign-flip (paired randomization) p-value of the mean of ``diffs``.

    Args:
        diffs: per-pair differences (a - b).
        alternative: ``"greater"`` (mean > 0), ``"less"`` or ``"two-sided"`` (|mean|).
        seed: of the Monte Carlo patterns when ``len(diffs) > EXACT_MAX``.

    Returns:
        the fraction of the ``2^n`` sign patterns whose mean is at least as extreme as the
        observed one (the observed pattern included, so p >= 2^-n); 1.0 for no pairs.
    """
    d = np.asarray(diffs, dtype=float)
    n = d.size
    if n == 0:
        return 1.0
    if alternative not in ("greater", "less", "two-sided"):
        raise ValueError(f"alternative must be greater, less or two-sided, got {alternative!r}")
    obs = d.mean()
    if n <= EXACT_MAX:
        bits = (np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1
        signs = 1.0 - 2.0 * bits
        extra = 0
    else:
        signs = np.random.default_rng(seed).choice([-1.0, 1.0], size=(_MC_DRAWS, n))
        extra = 1                                      # the observed pattern itself
    stats = signs @ d / n
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))
    if alternative == "greater":
        hits = np.count_nonzero(stats >= obs - tol)
    elif alternative == "less":
        hits = np.count_nonzero(stats <= obs + tol)
    else:
        hits = np.count_nonzero(np.abs(stats) >= abs(obs) - tol)
    return float((hits + extra) / (len(stats) + extra))


def decidable_with(n_seeds: int) -> dict:
    """What ``n_seeds`` seeds per PE can decide, before any run: the smallest one-sided p an
    exact sign-flip (or sign) test over ``n`` pairs can reach is ``2**-n`` (every difference
    on one side), so a paired claim can be *supported* when ``n >= MIN_SEEDS`` and ``2**-n <=
    ALPHA_STATED`` (from 5 seeds), *contradicted* when ``2**-n <= ALPHA_REVERSE`` too (from 7),
    and a PE's outcome (generalizes / fails, a prediction's label) decided when ``2**-n <=
    ALPHA`` and ``n >= MIN_SEEDS`` (from 5).

    Returns:
        ``{"seeds", "supported", "contradicted", "outcome"}`` (booleans) and ``"sentence"``:
        one line to print before training.
    """
    n = int(n_seeds)
    best = 0.5 ** n if n > 0 else 1.0
    enough = n >= MIN_SEEDS
    out = {"seeds": n, "supported": enough and best <= ALPHA_STATED,
           "contradicted": enough and best <= ALPHA_REVERSE,
           "outcome": enough and best <= ALPHA}
    need_c = next(k for k in range(MIN_SEEDS, 64) if 0.5 ** k <= ALPHA_REVERSE)
    if not out["supported"]:
        out["sentence"] = (f"{n} seed(s) per PE: every claim will be inconclusive (a label "
                           f"needs >= {MIN_SEEDS} seeds; >= {need_c} for 'contradicted')")
    elif not out["contradicted"]:
        out["sentence"] = (f"{n} seeds per PE: a comparison of two PEs can be supported, not "
                           f"contradicted (its smallest p, 2^-{n} = {best:.3g}, is above "
                           f"{ALPHA_REVERSE}: that needs >= {need_c} seeds); a prediction can "
                           "be supported or contradicted")
    else:
        out["sentence"] = (f"{n} seeds per PE: comparisons of PEs and predictions can be "
                           "supported or contradicted")
    return out


def sign_test_pvalue(values: Sequence[float], threshold: float,
                     alternative: str = "greater") -> float:
    """Exact one-sided sign test of the median of ``values`` against ``threshold``.

    ``"greater"``: p = P(Bin(n, 1/2) >= #values above the threshold); ``"less"``: the same with
    the values below. Values equal to the threshold count against the alternative
    (conservative). 1.0 for no values."""
    v = [float(x) for x in values]
    n = len(v)
    if n == 0:
        return 1.0
    if alternative == "greater":
        k = sum(x > threshold for x in v)
    elif alternative == "less":
        k = sum(x < threshold for x in v)
    else:
        raise ValueError(f"alternative must be greater or less, got {alternative!r}")
    return float(sum(math.comb(n, j) for j in range(k, n + 1)) / 2 ** n)


# --------------------------------------------------------------------------------------------
# Bootstrap
# --------------------------------------------------------------------------------------------

def ood_replicates(rows: Sequence[dict], rng: np.random.Generator,
                   size: int = _BOOTSTRAP) -> np.ndarray:
    """Bootstrap replicates ``[size]`` of one run's mean OOD exact match: each OOD length's
    ``n`` test samples are resampled (``k* ~ Bin(n, em)``); a length without ``n`` is kept
    fixed. NaN when the run has no OOD rows."""
    rows = [x for x in rows if x.get("split") == "ood" and x.get("em") is not None]
    if not rows:
        return np.full(size, np.nan)
    n = np.array([int(x.get("n") or 0) for x in rows])
    em = np.clip(np.array([float(x["em"]) for x in rows]), 0.0, 1.0)
    k = rng.binomial(np.maximum(n, 1)[:, None], em[:, None], size=(len(rows), size))
    reps = np.where(n[:, None] > 0, k / np.maximum(n, 1)[:, None], em[:, None])
    return reps.mean(axis=0)


def resample_seeds(per_run: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Replicates ``[size]`` of the mean over seeds, seeds resampled with replacement (as
    units); ``per_run`` is ``[seeds, size]`` of within-run replicates (each seed's own
    resampling: test samples, probe sequences)."""
    k, size = per_run.shape
    pick = rng.integers(0, k, size=(k, size))
    return per_run[pick, np.arange(size)[None, :]].mean(0)


def seed_bootstrap(runs: Sequence[Any], rng: np.random.Generator,
                   size: int = _BOOTSTRAP) -> np.ndarray:
    """Replicates of the mean over seeds of one PE's OOD exact match: seeds resampled as
    units, test samples within each run. ``runs``: objects with ``accuracy`` rows
    (:class:`analysis.evidence.claims.RunRecord`), one per seed."""
    if not runs:
        return np.full(size, np.nan)
    return resample_seeds(np.stack([ood_replicates(r.accuracy, rng, size) for r in runs]), rng)


def paired_bootstrap(pairs: Sequence[tuple[Any, Any]], rng: np.random.Generator,
                     size: int = _BOOTSTRAP) -> np.ndarray:
    """Replicates of the mean paired difference ``OOD EM(a) - OOD EM(b)``: pairs (seeds)
    resampled as units, test samples resampled within each of the two runs of a pair."""
    if not pairs:
        return np.full(size, np.nan)
    diffs = np.stack([ood_replicates(a.accuracy, rng, size) - ood_replicates(b.accuracy, rng, size)
                      for a, b in pairs])
    return resample_seeds(diffs, rng)


def percentile_interval(reps: np.ndarray) -> list[float]:
    """The 95% percentile interval ``[2.5%, 97.5%]`` of bootstrap replicates (NaNs left out;
    both ends NaN when every replicate is)."""
    if np.all(np.isnan(reps)):
        return [float("nan"), float("nan")]
    return [float(np.nanpercentile(reps, 2.5)), float(np.nanpercentile(reps, 97.5))]


def fits(run: Any) -> bool:
    """Whether a run fits its training lengths (mean ID EM >= :data:`ID_FIT`)."""
    return run.id_em is not None and run.id_em >= ID_FIT


# --------------------------------------------------------------------------------------------
# Comparison of two PEs
# --------------------------------------------------------------------------------------------

@dataclass
class PairedComparison:
    """The seed-paired comparison of arm ``a`` (the side the claim says is better) with ``b``.

    ``seeds``: the paired seeds; ``unpaired``: ``{"a": [...], "b": [...]}`` seeds of one arm
    only (left out); ``diffs``: per paired seed ``OOD EM(a) - OOD EM(b)``; ``diff``: their mean;
    ``ci``: its 95% bootstrap interval; ``p_stated`` / ``p_reverse``: one-sided sign-flip
    p-values for a > b and a < b; ``label`` and ``reason``: the decision (module docstring)."""

    seeds: list[int]
    unpaired: dict[str, list[int]]
    diffs: list[float]
    diff: float
    ci: list[float]
    p_stated: float
    p_reverse: float
    label: str
    reason: str
    levels: dict = field(default_factory=lambda: {"stated": ALPHA_STATED,
                                                  "reverse": ALPHA_REVERSE,
                                                  "min_seeds": MIN_SEEDS})

    def to_dict(self) -> dict:
        return asdict(self)


def paired_comparison(a_runs: Sequence[Any], b_runs: Sequence[Any], names: tuple[str, str] = ("a", "b"),
                      min_seeds: int = MIN_SEEDS) -> PairedComparison:
    """Compare two PEs' runs of one task, paired by seed (module docstring).

    Args:
        a_runs, b_runs: run records (``seed``, ``id_em``, ``ood_em``, ``accuracy``) of the PE
            the claim says is better and of the other one.
        names: the two PEs' names, for the reason.
        min_seeds: fewer paired seeds leave the label inconclusive (never below
            :data:`MIN_SEEDS` in effect: below it the test cannot reach its level anyway).
    """
    by_a = {r.seed: r for r in a_runs}
    by_b = {r.seed: r for r in b_runs}
    seeds = sorted(set(by_a) & set(by_b))
    unpaired = {"a": sorted(set(by_a) - set(by_b)), "b": sorted(set(by_b) - set(by_a))}
    pairs = [(by_a[s], by_b[s]) for s in seeds]
    diffs = [float(a.ood_em - b.ood_em) for a, b in pairs
             if a.ood_em is not None and b.ood_em is not None]
    rng = np.random.default_rng(_BOOTSTRAP_SEED)
    ci = percentile_interval(paired_bootstrap(pairs, rng))
    diff = float(np.mean(diffs)) if diffs else float("nan")
    p_stated = sign_flip_pvalue(diffs, "greater")
    p_reverse = sign_flip_pvalue(diffs, "less")
    an, bn = names
    left_out = ""
    if unpaired["a"] or unpaired["b"]:
        left_out = (" (left out, unpaired: " + ", ".join(
            f"{nm} seed{s}" for nm, key in ((an, "a"), (bn, "b")) for s in unpaired[key]) + ")")
    unfit = [f"{nm}/seed{r.seed} (ID EM {r.id_em if r.id_em is None else round(r.id_em, 2)})"
             for a, b in pairs for nm, r in ((an, a), (bn, b)) if not fits(r)]
    need = max(int(min_seeds), MIN_SEEDS)
    stats = (f"mean paired difference {diff:+.3f} over {len(seeds)} seeds, 95% interval "
             f"[{ci[0]:+.3f}, {ci[1]:+.3f}], sign-flip p = {p_stated:.3g} ({an} > {bn}) / "
             f"{p_reverse:.3g} ({bn} > {an})")
    if unfit:
        label, reason = "inconclusive", (f"does not fit its training lengths (ID EM < {ID_FIT}): "
                                         + ", ".join(unfit))
    elif len(seeds) < need or len(diffs) < len(seeds):
        label, reason = "inconclusive", (f"needs >= {need} seeds per compared arm; have "
                                         f"{len(diffs)}" + left_out)
    elif p_stated <= ALPHA_STATED and ci[0] > 0:
        label, reason = "supported", (f"{stats}: p <= {ALPHA_STATED} (one-sided, the stated "
                                      "direction) and the interval above 0" + left_out)
    elif p_reverse <= ALPHA_REVERSE and ci[1] < 0:
        label, reason = "contradicted", (f"{stats}: p <= {ALPHA_REVERSE} (one-sided, the "
                                         "opposite direction) and the interval below 0"
                                         + left_out)
    else:
        why = []
        if not (p_stated <= ALPHA_STATED or p_reverse <= ALPHA_REVERSE):
            why.append(f"neither p reaches its level ({ALPHA_STATED} stated, {ALPHA_REVERSE} "
                       "opposite"
                       + ("; the opposite direction needs >= 7 seeds" if len(seeds) < 7
                          else "") + ")")
        if ci[0] <= 0 <= ci[1]:
            why.append("the 95% interval contains 0")
        label, reason = "inconclusive", f"{stats}: " + ("; ".join(why) or
                                                        "p and interval disagree") + left_out
    return PairedComparison(seeds=seeds, unpaired=unpaired, diffs=diffs, diff=diff, ci=ci,
                            p_stated=p_stated, p_reverse=p_reverse, label=label, reason=reason)


# --------------------------------------------------------------------------------------------
# Chance and the outcome of a task
# --------------------------------------------------------------------------------------------

@lru_cache(maxsize=256)
def _chance_at(task_name: str, length: int, samples: int, seed: int) -> float:
    # start-up: lark loads only when this runs
    import tasks
    task = tasks.get_task(task_name)
    rng = np.random.default_rng([seed, length])
    counts = Counter(tuple(task.sample(length, rng)[1]) for _ in range(samples))
    n = sum(counts.values())
    return float(sum(c * (c - 1) for c in counts.values()) / (n * (n - 1)))


def chance_em(task: Any, lengths: Sequence[int], samples: int = _CHANCE_SAMPLES,
              seed: int = _CHANCE_SEED) -> float:
    """Exact match of a guess drawn from the task's own answer distribution, averaged over
    ``lengths``: per length ``sum_answer p(answer)^2`` (the probability that two independent
    answers coincide), estimated from ``samples`` answers of the task's generator seeded by
    ``(seed, length)`` with the unbiased collision estimator ``sum c(c-1) / (N(N-1))``.

    Args:
        task: a task name or :class:`tasks.Task`.
        lengths: input lengths (those the task cannot produce are skipped).

    Raises:
        KeyError: an unknown task (``tasks.UnknownTaskError``); ValueError: no usable length.
    """
    # start-up: lark loads only when this runs
    import tasks
    t = tasks.get_task(task) if isinstance(task, str) else task
    ls = sorted({int(n) for n in lengths if t.length_ok(int(n))})
    if not ls:
        raise ValueError(f"no length of {list(lengths)!r} is valid for task {t.name!r}")
    return float(np.mean([_chance_at(t.name, n, int(samples), int(seed)) for n in ls]))


def generalization_threshold(chance: float | None) -> float:
    """The OOD EM a PE must reach to "generalize": ``max(OOD_GENERALIZES, chance +
    CHANCE_MARGIN)`` (:data:`OOD_GENERALIZES` when chance is unknown)."""
    if chance is None or not np.isfinite(chance):
        return OOD_GENERALIZES
    return float(max(OOD_GENERALIZES, chance + CHANCE_MARGIN))


def pe_against_threshold(runs: Sequence[Any], threshold: float,
                         rng: np.random.Generator) -> dict:
    """One PE's seeds against the threshold: ``{seeds, ood_em, id_em, fits, mean, ci,
    p_above, p_below}`` (sign-test p-values, 95% bootstrap interval of the mean over seeds)."""
    rs = sorted(runs, key=lambda r: r.seed)
    oods = [r.ood_em for r in rs]
    known = [x for x in oods if x is not None]
    return {"seeds": [r.seed for r in rs], "ood_em": oods, "id_em": [r.id_em for r in rs],
            "fits": all(fits(r) for r in rs),
            "mean": float(np.mean(known)) if known else None,
            "ci": percentile_interval(seed_bootstrap(rs, rng)),
            "p_above": sign_test_pvalue(known, threshold, "greater") if len(known) == len(rs)
            else 1.0,
            "p_below": sign_test_pvalue(known, threshold, "less") if len(known) == len(rs)
            else 1.0}


def task_outcome(per_pe_runs: dict[str, Sequence[Any]], threshold: float,
                 min_seeds: int = MIN_SEEDS) -> tuple[str, str, dict]:
    """The measured outcome of a task (module docstring): ``(outcome, why, per_pe)`` with
    outcome ``"generalizes"``, ``"fails"`` or ``"inconclusive"`` and ``per_pe`` the
    :func:`pe_against_threshold` numbers of each PE (plus ``eligible`` and ``level``)."""
    rng = np.random.default_rng(_BOOTSTRAP_SEED)
    need = max(int(min_seeds), MIN_SEEDS)
    per_pe = {pe: pe_against_threshold(rs, threshold, rng)
              for pe, rs in sorted(per_pe_runs.items()) if rs}
    for v in per_pe.values():
        v["eligible"] = v["fits"] and len(v["seeds"]) >= need
    eligible = [pe for pe, v in per_pe.items() if v["eligible"]]
    fitted = [pe for pe, v in per_pe.items() if v["fits"]]
    level = ALPHA / len(eligible) if eligible else ALPHA
    for pe in eligible:
        per_pe[pe]["level"] = level
    above = [pe for pe in eligible if per_pe[pe]["p_above"] <= level
             and per_pe[pe]["ci"][0] > threshold]
    below = [pe for pe in eligible if per_pe[pe]["p_below"] <= ALPHA
             and per_pe[pe]["ci"][1] < threshold]
    few = [f"{pe} ({len(per_pe[pe]['seeds'])})" for pe in fitted if pe not in eligible]
    if threshold >= 1:
        # chance is within the margin of a perfect score (e.g. a language with one string per
        # length: the answer distribution already gives every next-character set): no exact
        # match can clear the threshold, so the runs cannot test generalization either way
        return "inconclusive", (f"no test: the threshold max({OOD_GENERALIZES}, chance + "
                                f"{CHANCE_MARGIN}) is {threshold:.2f}, which no exact match "
                                "can clear"), per_pe
    if not eligible:
        return "inconclusive", (f"no PE fits its training lengths (ID EM >= {ID_FIT}) on "
                                f">= {need} seeds" + ("; fitted PEs with fewer seeds: "
                                                      + ", ".join(few) if few else "")), per_pe
    if above:
        return "generalizes", (f"{', '.join(above)}: OOD EM above {threshold:.2f} on the seeds "
                               f"(sign test p <= {level:.3g}, 0.05 over {len(eligible)} PEs) "
                               "and the 95% interval above it"), per_pe
    if not few and set(below) == set(fitted):
        return "fails", (f"every fitted PE ({', '.join(fitted)}) below {threshold:.2f} OOD EM "
                         f"(sign test p <= {ALPHA}) and its 95% interval below it"), per_pe
    why = [f"{pe}: p above {per_pe[pe]['p_above']:.3g}, p below {per_pe[pe]['p_below']:.3g}, "
           f"interval [{per_pe[pe]['ci'][0]:.2f}, {per_pe[pe]['ci'][1]:.2f}]"
           for pe in eligible if pe not in below]
    if few:
        why.append("fitted PEs with fewer than " f"{need} seeds: " + ", ".join(few))
    return "inconclusive", (f"no PE clearly above or every fitted PE clearly below "
                            f"{threshold:.2f}: " + "; ".join(why)), per_pe
