"""Claims about the papers, computed from training runs with their uncertainty across seeds.

Every statement the report or ``docs/results.md`` makes about the papers ("NoPE generalizes
better than APE on sort_unique", "the prediction agrees", "NoPE's attention is closest to T5's")
is a :class:`Claim` computed here from run directories, never written by hand. Each claim
carries the numbers it rests on (per-seed values, the mean paired difference, its 95% bootstrap
interval and p-value), the run directories it compared, their position-offset protocol and
configuration, and one label: ``supported``, ``contradicted`` or ``inconclusive``.

The rules that decide the labels of the PE comparisons and of the prediction (the measured
outcome) have one owner, :mod:`analysis.evidence.statistics` (its docstring states the methods,
their sources and their error rate): runs are paired by seed (a seed's runs share initial
weights and batches across PEs), a decided label needs >= :data:`MIN_SEEDS` paired seeds, every
compared run fitting its training lengths (mean ID exact match >= :data:`ID_FIT`; a model that
has not learned the task in distribution says nothing about length generalization, so such a
task is never "fails"), an exact sign-flip p-value and a bootstrap interval (seeds as units,
test samples within runs) on the same side of 0; the rule decides under the null at most 5% of
the time (``tests/test_statistics.py``).

Runs are pooled into one claim only when they share the task and the whole configuration apart
from the positional encoding and the seed — including the position-offset protocol
(``position_offsets``: ``none`` as Kazemnejad et al., ``random`` as Zhou et al. / Huang et al.).
The configuration compared is the *resolved* one (:func:`resolved_config`: settings missing
from an older ``config.json`` count as their defaults). :func:`check_poolable` raises
:class:`ClaimError` naming the settings that differ; :func:`comparison_groups` splits a set of
runs into such groups so that a report compares within each and says which.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from analysis.evidence import statistics as _stats
from analysis.evidence.statistics import ID_FIT, MIN_SEEDS, OOD_GENERALIZES
from rasp_model.positional import PE_LABELS
from rasp.errors import RASPError
from analysis.probing.metrics import AGGREGATIONS, JSD_UNITS
from analysis.training.configs import ConfigError, RunSpec, TrainConfig

__all__ = ["LABELS", "ID_FIT", "OOD_GENERALIZES", "MIN_SEEDS", "ClaimError", "RunRecord",
           "Claim", "run_record", "load_runs", "resolved_config", "config_fingerprint",
           "config_differences", "check_poolable", "comparison_groups", "compare_pes",
           "task_chance", "prediction_claim", "trained_max_len", "regime_note",
           "measured_outcome", "distance_claim",
           "PAPER_DISTANCE_SOURCE", "cross_seed_summary", "confirmation",
           "task_claims", "claims_for_task", "PAPER_PE_CLAIMS"]

LABELS = ("supported", "contradicted", "inconclusive")

#: Settings that may differ between runs pooled into one comparison (everything else must match).
_PER_RUN_KEYS = {"pe", "seed", "created", "git_commit", "device", "torch", "run_dir",
                 "threads", "host"}

#: Pairwise statements of the papers: (better PE, worse PE, source). Each is attributed to the
#: paper that made it: Kazemnejad et al. 2023 compared NoPE with T5's bias, ALiBi, Rotary and a
#: *sinusoidal* APE trained without position offsets. No paper states "NoPE generalizes better
#: than a learned APE" in general (Zhou et al. 2023 and Huang et al. 2025 predict per task, for a
#: learned APE with random offsets): the learned APE is judged by its per-PE prediction claim.
PAPER_PE_CLAIMS = [
    ("nope", "ape_sinusoidal", "Kazemnejad et al. 2023: absolute position encodings "
                               "generalize worst; NoPE best (MRR 0.69 vs APE 0.22)"),
    ("nope", "rope", "Kazemnejad et al. 2023: Rotary generalizes poorly (MRR 0.33 vs NoPE 0.69)"),
    ("nope", "t5", "Kazemnejad et al. 2023: NoPE ranks above T5's relative bias (MRR 0.69 vs "
                   "0.55)"),
    ("nope", "alibi", "Kazemnejad et al. 2023: NoPE ranks above ALiBi (MRR 0.69 vs 0.50)"),
]


class ClaimError(RASPError, ValueError):
    """Runs that must not be pooled into one claim (different task, protocol or configuration),
    or no runs at all. The message names the runs and the settings that differ."""


@dataclass
class RunRecord:
    """What a claim needs of one finished run.

    ``accuracy``: rows ``{length, split, em, n, ...}`` of ``accuracy.json``; ``config``: the
    run's ``config.json``; ``protocol``: its ``position_offsets`` setting."""

    task: str
    pe: str
    seed: int
    run_dir: str
    config: dict
    accuracy: list[dict]
    _fingerprint: tuple | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def protocol(self) -> str:
        return str((self.config.get("train") or {}).get("position_offsets", "none"))

    @property
    def id_em(self) -> float | None:
        return _mean_em(self.accuracy, "id")

    @property
    def ood_em(self) -> float | None:
        return _mean_em(self.accuracy, "ood")

    @property
    def fingerprint(self) -> str:
        key = json.dumps(self.config, sort_keys=True, default=str)
        if self._fingerprint is None or self._fingerprint[0] != key:
            self._fingerprint = (key, config_fingerprint(self.config))
        return self._fingerprint[1]


def _mean_em(rows: list[dict], split: str) -> float | None:
    v = [float(r["em"]) for r in rows if r.get("split") == split and r.get("em") is not None]
    return float(np.mean(v)) if v else None


def run_record(config: dict, accuracy: list[dict], run_dir: str = "") -> RunRecord:
    """A :class:`RunRecord` from a run's ``config.json`` dict and ``accuracy.json`` rows."""
    return RunRecord(str(config["task"]), str(config["pe"]), int(config["seed"]), str(run_dir),
                     dict(config), list(accuracy))


def load_runs(run_dirs: Iterable[str | Path]) -> list[RunRecord]:
    """Records of finished run directories (``config.json`` + ``accuracy.json`` + ``DONE``).

    Raises:
        ClaimError: a directory is not a finished run.
    """
    out = []
    for d in run_dirs:
        d = Path(d)
        try:
            from rasp_model import files        # the one reader of files we did not write
            cfg = files.read_json(d / "config.json", "run configuration")
            acc = files.read_json(d / "accuracy.json", "accuracy by length")
            if not (d / "DONE").exists():
                raise FileNotFoundError("DONE")
        except (OSError, ValueError, files.FileReadError) as e:
            raise ClaimError(f"{d}: not a finished run directory ({e})") from None
        except RecursionError:
            raise ClaimError(f"{d}: not a finished run directory (a file nested too "
                             f"deeply)") from None
        out.append(run_record(cfg, acc, str(d)))
    return out


def resolved_config(config: dict) -> dict:
    """A run's ``config.json`` with every setting resolved as the trainer resolves it: read with
    :meth:`analysis.training.configs.RunSpec.from_dict` (settings added after the run was
    written take their defaults, legacy keys are translated) and written back with
    ``to_dict``; keys the spec does not know (provenance) are kept. A ``rotary_dim`` left unset
    stays unset (the model fills it for RoPE only, which would make the PE a setting). A configuration the spec
    cannot read (a partial one, e.g. in tests) has its ``train`` section resolved with
    :meth:`~analysis.training.configs.TrainConfig.from_dict` where possible and is otherwise
    kept as it is."""
    try:
        out = {**config, **RunSpec.from_dict(dict(config)).to_dict()}
    except ConfigError:
        pass
    else:
        raw = config.get("model") if isinstance(config.get("model"), dict) else {}
        if raw.get("rotary_dim") is None and "rope_fraction" not in raw:
            # the model fills rotary_dim for pe "rope" only; that is the PE, not a setting
            out["model"] = {**out["model"], "rotary_dim": None}
        return out
    c = dict(config)
    if isinstance(c.get("train"), dict):
        try:
            c["train"] = TrainConfig.from_dict(dict(c["train"])).to_dict()
        except ConfigError:
            pass
    return c


def _comparable(config: dict) -> dict:
    """The resolved configuration without the settings that may differ within a comparison."""
    c = {k: v for k, v in resolved_config(config).items() if k not in _PER_RUN_KEYS}
    if isinstance(c.get("model"), dict):
        c["model"] = {k: v for k, v in c["model"].items() if k != "pe"}
    train = dict(c.get("train") or {})
    train.setdefault("position_offsets", "none")
    c["train"] = train
    return json.loads(json.dumps(c, sort_keys=True, default=str))


def config_fingerprint(config: dict) -> str:
    """A short hash of the resolved configuration (:func:`resolved_config`) except PE and seed
    (and bookkeeping): a run written before a setting existed and a new run of the same
    settings have the same fingerprint."""
    blob = json.dumps(_comparable(config), sort_keys=True, default=str).encode()
    return hashlib.sha1(blob).hexdigest()[:10]


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, dict):
        out = {}
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: d}


def config_differences(a: dict, b: dict) -> list[str]:
    """``key: value_a != value_b`` for every comparable setting that differs."""
    fa, fb = _flatten(_comparable(a)), _flatten(_comparable(b))
    return [f"{k}: {fa.get(k)!r} != {fb.get(k)!r}" for k in sorted(set(fa) | set(fb))
            if fa.get(k) != fb.get(k)]


def check_poolable(records: Sequence[RunRecord]) -> None:
    """Raise :class:`ClaimError` unless all runs share the task, protocol and configuration.

    The message names a pair of runs that differ and the settings in which they differ (the
    position-offset protocol first)."""
    if not records:
        raise ClaimError("no runs to compare")
    first = records[0]
    for r in records[1:]:
        if r.task != first.task:
            raise ClaimError(f"runs of different tasks cannot be pooled: {first.run_dir} "
                             f"({first.task}) and {r.run_dir} ({r.task})")
        if r.fingerprint != first.fingerprint:
            diffs = config_differences(first.config, r.config)
            diffs.sort(key=lambda s: not s.startswith("train.position_offsets"))
            what = ("position-offset protocols " if r.protocol != first.protocol
                    else "configurations ")
            raise ClaimError(f"runs of different {what}are never pooled into one claim: "
                             f"{first.run_dir or first.pe + '/seed' + str(first.seed)} vs "
                             f"{r.run_dir or r.pe + '/seed' + str(r.seed)} differ in "
                             + "; ".join(diffs[:6]) + ("; ..." if len(diffs) > 6 else ""))


def comparison_groups(records: Sequence[RunRecord]) -> list[list[RunRecord]]:
    """Split runs into groups that may be pooled (same task, protocol and configuration),
    largest first."""
    groups: dict[tuple, list[RunRecord]] = {}
    for r in records:
        groups.setdefault((r.task, r.fingerprint), []).append(r)
    return sorted(groups.values(), key=lambda g: (-len(g), g[0].task, g[0].fingerprint))


@dataclass
class Claim:
    """One computed statement and its evidence (see the module docstring for the labels).

    ``numbers``: per-seed values of each side, their means, the difference of the means and
    its 95% bootstrap interval (``ci``), and what the values are (``metric``); ``runs``: the run
    directories compared; ``reason``: why the label is what it is, in one sentence."""

    id: str
    statement: str
    task: str
    label: str
    reason: str
    source: str = ""
    numbers: dict = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)
    protocol: str | None = None
    config: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def compare_pes(records: Sequence[RunRecord], better: str, worse: str, source: str = "",
                min_seeds: int = MIN_SEEDS) -> Claim:
    """Claim "``better`` generalizes better than ``worse``" (OOD exact match) on one task.

    The label is :func:`analysis.evidence.statistics.paired_comparison`'s: runs paired by seed,
    exact sign-flip test of the mean paired difference, bootstrap interval over seeds (as
    units) and test samples, >= :data:`MIN_SEEDS` paired seeds, every paired run fitting its
    training lengths.

    Args:
        records: runs of one comparison group (others raise); runs of other PEs are ignored.
        better, worse: the PEs (``rasp_model.PE_NAMES``).
        source: the paper's statement the claim checks.
        min_seeds: fewer paired seeds make the claim inconclusive (at least :data:`MIN_SEEDS`).

    Returns:
        :class:`Claim` with numbers ``{metric, better: {pe, seeds, ood_em, id_em, mean},
        worse: {...}, diff (mean paired difference), ci (its 95% interval), paired_seeds,
        paired_diffs, unpaired, p_value (one-sided, stated direction), p_reverse, test}``.

    Raises:
        ClaimError: the runs cannot be pooled (:func:`check_poolable`) or a PE has no run.
    """
    check_poolable(records)
    a = sorted((r for r in records if r.pe == better), key=lambda r: r.seed)
    b = sorted((r for r in records if r.pe == worse), key=lambda r: r.seed)
    if not a or not b:
        raise ClaimError(f"no runs of {better if not a else worse} to compare")
    task = records[0].task
    cmp = _stats.paired_comparison(a, b, (better, worse), min_seeds)
    side = lambda pe, rs: {"pe": pe, "seeds": [r.seed for r in rs],  # noqa: E731
                           "ood_em": [r.ood_em for r in rs], "id_em": [r.id_em for r in rs],
                           "mean": _mean([r.ood_em for r in rs])}
    numbers = {"metric": "OOD exact match, paired by seed", "better": side(better, a),
               "worse": side(worse, b), "diff": cmp.diff, "ci": cmp.ci,
               "paired_seeds": cmp.seeds, "paired_diffs": cmp.diffs,
               "unpaired": {better: cmp.unpaired["a"], worse: cmp.unpaired["b"]},
               "p_value": cmp.p_stated, "p_reverse": cmp.p_reverse,
               "test": (f"exact sign-flip test over paired seeds; supported at one-sided p <= "
                        f"{_stats.ALPHA_STATED}, contradicted at <= {_stats.ALPHA_REVERSE}, "
                        f"with the 95% interval excluding 0; >= {MIN_SEEDS} paired seeds")}
    return Claim(id=f"{task}:{better}>{worse}", task=task, label=cmp.label, reason=cmp.reason,
                 statement=f"{PE_LABELS.get(better, better)} generalizes better than "
                           f"{PE_LABELS.get(worse, worse)} on {task}",
                 source=source, numbers=numbers, runs=[r.run_dir for r in a + b],
                 protocol=records[0].protocol, config=records[0].fingerprint)


def _mean(values: Sequence[float | None]) -> float | None:
    v = [x for x in values if x is not None]
    return float(np.mean(v)) if v else None


def task_chance(records: Sequence[RunRecord]) -> float | None:
    """The task's chance exact match at the runs' OOD lengths
    (:func:`analysis.evidence.statistics.chance_em`); None for a task outside the catalogue
    or runs without OOD lengths."""
    lengths = sorted({int(x["length"]) for r in records for x in r.accuracy
                      if x.get("split") == "ood" and x.get("length") is not None})
    if not records or not lengths:
        return None
    try:
        return _stats.chance_em(records[0].task, lengths)
    except (KeyError, ValueError):
        return None


def _outcome(records: Sequence[RunRecord], min_seeds: int) -> dict:
    """The measured outcome of one comparison group (the rule of
    :func:`analysis.evidence.statistics.task_outcome`) with its threshold and chance."""
    chance = task_chance(records)
    threshold = _stats.generalization_threshold(chance)
    by_pe: dict[str, list[RunRecord]] = {}
    for r in records:
        by_pe.setdefault(r.pe, []).append(r)
    measured, why, per_pe = _stats.task_outcome(by_pe, threshold, min_seeds)
    return {"measured": measured, "why": why, "per_pe": per_pe, "chance": chance,
            "threshold": threshold}


def trained_max_len(records: Sequence[RunRecord]) -> int | None:
    """The longest training length of ``records`` (their ``config.json``'s
    ``train.train_max_len``; None when no run records it)."""
    lens = [(r.config.get("train") or {}).get("train_max_len") for r in records]
    lens = [int(x) for x in lens if x is not None]
    return max(lens) if lens else None


def regime_note(regime: Any, trained: int | None) -> dict | None:
    """``{"train_max_len", "source", "trained_max_len", "inside"}`` of a task's
    :class:`tasks.base.Regime` against runs trained up to ``trained`` (None: no regime)."""
    if regime is None:
        return None
    return {**regime.to_dict(), "trained_max_len": trained, "inside": regime.covers(trained)}


def prediction_claim(records: Sequence[RunRecord], predicted: str | None,
                     min_seeds: int = MIN_SEEDS, regime: Any = None) -> Claim:
    """Claim "the prediction (generalizes / fails) agrees with the runs" on one task.

    The measured outcome is :func:`analysis.evidence.statistics.task_outcome`'s (module
    docstring there): ``generalizes`` when some PE with >= :data:`MIN_SEEDS` seeds that all fit
    is above the threshold ``max(OOD_GENERALIZES, chance + CHANCE_MARGIN)`` by an exact sign
    test (Bonferroni over the eligible PEs) and its 95% bootstrap interval; ``fails`` when every
    fitted PE is below by the same test and interval; otherwise ``inconclusive`` (no PE fits,
    fewer seeds, or a PE near the threshold). The claim is supported when the measured outcome
    equals the prediction, contradicted when it is the other one, inconclusive otherwise.

    **The theory's regime.** The theories are limits (Zhou et al. 2023; Huang et al. 2025:
    "sufficiently long training lengths"); a task's paper states the training length its outcome
    holds from (``regime``, a :class:`tasks.base.Regime`: Zhou et al.'s count from 60, Huang et
    al.'s tasks 0-50). Runs trained on shorter lengths are outside it: the claim is
    **inconclusive: outside the theory's regime** whatever was measured (a failure there is not
    evidence against the theory, and a success not evidence for it); the measured outcome is
    still in ``numbers``. ``regime`` None: the paper states no training length, the claim is
    read at the runs' lengths (``numbers["regime"]`` None says so).

    Raises:
        ClaimError: the runs cannot be pooled.
    """
    check_poolable(records)
    task = records[0].task
    out = _outcome(records, min_seeds)
    measured, why = out["measured"], out["why"]
    pred = (predicted or "").split()[0].lower() if predicted else None
    if pred not in ("generalizes", "fails"):
        label, reason = "inconclusive", f"no prediction ({predicted!r}); measured {measured}: {why}"
    elif measured == "inconclusive":
        label, reason = "inconclusive", f"measured outcome inconclusive: {why}"
    elif measured == pred:
        label, reason = "supported", f"predicted {pred}, measured {measured}: {why}"
    else:
        label, reason = "contradicted", f"predicted {pred}, measured {measured}: {why}"
    trained = trained_max_len(records)
    in_regime = regime_note(regime, trained)
    if in_regime is not None and not in_regime["inside"] and pred in ("generalizes", "fails"):
        label, reason = "inconclusive", (
            f"outside the theory's regime: trained on lengths up to {trained}, the paper's "
            f"outcome holds from training length {regime.train_max_len} ({regime.source}); "
            f"predicted {pred}, measured {measured} (would read {label}): {why}")
    return Claim(id=f"{task}:prediction", task=task, label=label, reason=reason,
                 statement=f"the RASP-Generalization Conjecture's prediction for {task} "
                           f"({pred or 'none'}) agrees with the runs",
                 source="Zhou et al. 2023 (RASP-L); Huang et al. 2025 (C-RASP)",
                 numbers={"predicted": pred, "measured": measured, "per_pe": out["per_pe"],
                          "thresholds": {"id_fit": ID_FIT, "ood": out["threshold"],
                                         "chance": out["chance"],
                                         "chance_margin": _stats.CHANCE_MARGIN,
                                         "min_seeds": MIN_SEEDS},
                          "regime": in_regime, "trained_max_len": trained},
                 runs=[r.run_dir for r in records], protocol=records[0].protocol,
                 config=records[0].fingerprint)


def measured_outcome(records: Sequence[RunRecord], min_seeds: int = MIN_SEEDS) -> dict:
    """A task's measured outcome for the report, by the rule of :func:`prediction_claim`, on
    the largest comparison group (:func:`comparison_groups`) of ``records``.

    Returns:
        ``{"per_pe": {pe: {"id_em", "ood_em" (means over seeds), "seeds", "fits", "ci",
        "eligible"}}, "best_pe", "outcome", "reason", "threshold", "chance", "note"}``;
        ``outcome`` is ``"generalizes"``, ``"fails"``, ``"inconclusive"`` or ``"no runs"``.
    """
    if not records:
        return {"per_pe": {}, "best_pe": None, "outcome": "no runs", "reason": "no runs",
                "threshold": None, "chance": None, "note": None}
    groups = comparison_groups(records)
    group = groups[0]
    out = _outcome(group, min_seeds)
    per_pe = {pe: {"id_em": _mean(v["id_em"]), "ood_em": v["mean"], "seeds": v["seeds"],
                   "fits": v["fits"], "ci": v["ci"], "eligible": v["eligible"]}
              for pe, v in out["per_pe"].items()}
    scored = {pe: v["ood_em"] for pe, v in per_pe.items() if v["ood_em"] is not None}
    note = None
    if len(groups) > 1:
        note = (f"measured on the largest of {len(groups)} groups of runs (protocol "
                f"{group[0].protocol}, config {group[0].fingerprint})")
    return {"per_pe": per_pe, "best_pe": max(scored, key=scored.get) if scored else None,
            "outcome": out["measured"], "reason": out["why"], "threshold": out["threshold"],
            "chance": out["chance"], "note": note}


#: Where the paper's distances come from, named whenever they are shown beside ours.
PAPER_DISTANCE_SOURCE = ("Kazemnejad et al. 2023 §6, Fig. 4 (SCAN, 12-layer decoder-only "
                         "models): NoPE vs T5 0.263, NoPE other seed 0.265, ALiBi 0.49, APE "
                         "0.72, Rotary 0.99 (released aggregation, nats)")


def distance_claim(task: str, distances: dict[str, list[float]], aggregation: str,
                   baseline: Sequence[float] = (), target: str = "t5", reference: str = "nope",
                   units: str = "", runs: Sequence[str] = (), protocol: str | None = None,
                   config: str | None = None, min_seeds: int = MIN_SEEDS,
                   replicates: dict[str, Any] | None = None,
                   baseline_replicates: Any = None) -> Claim:
    """Claim "``reference``'s attention is closest to ``target``'s" (Kazemnejad et al. §6).

    Args:
        distances: PE -> per-seed distances from the reference PE (index i = the i-th of the
            seeds every PE shares, so seeds pair); the report passes the cross-seed distances
            (each model against the reference models of the *other* seeds:
            :meth:`analysis.probing.metrics.ProbeResult.cross_seed_distances`).
        aggregation: ``"standard"`` or ``"released"`` (recorded; see
            :func:`analysis.probing.metrics.kazemnejad_distance`).
        baseline: reference vs reference of other seeds (shown, the floor: a PE as close as
            another seed of the reference is as close as training noise allows).
        replicates: PE -> ``[seed, replicate]`` bootstrap replicates of each seed's distance
            over the probe sequences (rows aligned with ``distances``); with them every paired
            difference gets a 95% interval resampling seeds as units and sequences within, and
            a decision needs the interval on its side of 0 as well as the sign-flip test.
        baseline_replicates: the same for ``baseline`` (its interval is shown).

    The paired rule of :mod:`analysis.evidence.statistics`: per other PE, the per-seed
    differences ``d = distance(other) - distance(target)`` (paired by seed) and an exact
    sign-flip test. Supported when, for every other PE, ``d > 0`` at one-sided
    ``ALPHA_STATED`` (an intersection-union test, Berger 1982: "closest" needs every one of the
    k comparisons, so each at the full level keeps the error rate) and its interval above 0;
    contradicted when some other PE is closer at ``ALPHA_REVERSE / k`` (a union of k tests:
    Bonferroni) with its interval below 0; inconclusive otherwise, or with fewer than
    ``min_seeds`` seeds per PE (>= 5, the fewest with which the rule can decide).
    """
    others = {pe: list(v) for pe, v in distances.items()
              if pe not in (target, reference) and v}
    t = list(distances.get(target) or [])
    numbers = {"metric": f"Kazemnejad distance from {reference} ({aggregation} aggregation"
                         + (f", {units}" if units else "") + ")",
               "aggregation": aggregation, "per_pe": {pe: list(v) for pe, v in distances.items()},
               "baseline": list(baseline)}
    rng = np.random.default_rng(_stats._BOOTSTRAP_SEED)
    intervals: dict[str, list[float]] = {}
    if replicates:
        numbers["interval"] = {pe: _stats.percentile_interval(_stats.resample_seeds(
            np.asarray(r, dtype=float), rng)) for pe, r in replicates.items() if len(r)}
        if baseline_replicates is not None and len(baseline_replicates):
            numbers["baseline_interval"] = _stats.percentile_interval(_stats.resample_seeds(
                np.asarray(baseline_replicates, dtype=float), rng))
    if not t or not others:
        label, reason = "inconclusive", f"no {target} distance or no other PE to compare"
    elif len(t) < min_seeds or any(len(v) < min_seeds for v in others.values()):
        have = min([len(t)] + [len(v) for v in others.values()])
        label, reason = "inconclusive", (f"needs >= {min_seeds} seeds per PE (paired by "
                                         f"seed); have {have}")
    else:
        k = len(others)
        p_closer, p_beaten = {}, {}
        mean_diff: dict[str, float] = {}
        for pe, v in others.items():
            n = min(len(v), len(t))
            diffs = [v[i] - t[i] for i in range(n)]
            mean_diff[pe] = float(np.mean(diffs))
            p_closer[pe] = _stats.sign_flip_pvalue(diffs, "greater")
            p_beaten[pe] = _stats.sign_flip_pvalue(diffs, "less")
            if replicates:
                rd = (np.asarray(replicates[pe], float)[:n]
                      - np.asarray(replicates[target], float)[:n])
                intervals[pe] = _stats.percentile_interval(_stats.resample_seeds(rd, rng))
        numbers["p_target_closer"] = p_closer
        numbers["p_other_closer"] = p_beaten
        numbers["mean_difference"] = mean_diff
        if replicates:
            numbers["difference_interval"] = intervals
        # without replicates (a caller with per-seed values only) the test alone decides
        above = {pe: not replicates or intervals[pe][0] > 0 for pe in others}
        below = {pe: not replicates or intervals[pe][1] < 0 for pe in others}
        beaten = [pe for pe, p in p_beaten.items()
                  if p <= _stats.ALPHA_REVERSE / k and below[pe]]

        def iv(pe: str) -> str:
            return (f"{pe} - {target} {mean_diff[pe]:+.3f}" + (
                f" [95% {intervals[pe][0]:+.3f}, {intervals[pe][1]:+.3f}]" if replicates
                else ""))
        if all(p <= _stats.ALPHA_STATED for p in p_closer.values()) and all(above.values()):
            label, reason = "supported", (
                f"{target} closer than each of {', '.join(others)} (paired sign-flip p <= "
                f"{_stats.ALPHA_STATED} each" + (", every interval of the difference above 0"
                                                 if replicates else "") + ")")
        elif beaten:
            label, reason = "contradicted", (
                f"{', '.join(beaten)} closer than {target} (paired sign-flip p <= "
                f"{_stats.ALPHA_REVERSE}/{k}" + (", interval below 0" if replicates else "")
                + "): " + "; ".join(iv(pe) for pe in beaten))
        else:
            label, reason = "inconclusive", ("no decision at the paired test's levels: "
                                             + "; ".join(iv(pe) for pe in others))
    return Claim(id=f"{task}:closest:{aggregation}", task=task, label=label, reason=reason,
                 statement=f"{PE_LABELS.get(reference, reference)}'s attention is closest to "
                           f"{PE_LABELS.get(target, target)}'s on {task} ({aggregation} "
                           "aggregation)",
                 source=PAPER_DISTANCE_SOURCE,
                 numbers=numbers, runs=list(runs), protocol=protocol, config=config)


def cross_seed_summary(probe: Any) -> dict[str, dict[str, dict]]:
    """The cross-seed distances of a probe with their uncertainty, for tables and figures.

    Args:
        probe: an :class:`analysis.probing.metrics.ProbeResult`.

    Returns:
        aggregation -> PE (NoPE = the other-seed baseline) -> ``{"seeds", "values" (per seed),
        "mean", "interval" (95%, seeds resampled as units and probe sequences within), "units"}``.
    """
    out: dict[str, dict[str, dict]] = {}
    for agg in AGGREGATIONS:
        rng = np.random.default_rng(_stats._BOOTSTRAP_SEED)
        out[agg] = {pe: {**c.to_dict(), "mean": float(np.mean(c.values)),
                         "interval": _stats.percentile_interval(
                             _stats.resample_seeds(c.replicates, rng))}
                    for pe, c in probe.cross_seed_distances(agg).items()}
    return out


def confirmation(claims: Sequence[dict], selected: str, others: Sequence[str]) -> list[dict]:
    """Whether each claim decided on the task a configuration was selected on holds on tasks
    that were not selected for (the same statement, comparison group protocol and rule).

    A claim *supported* on ``selected`` is ``"confirmed"`` on another task where it is
    supported there too, ``"contradicted"`` where it is contradicted there, and
    ``"not confirmed"`` where it is inconclusive there (the reason says why: no decision, or
    the runs do not fit) or did not run. A claim not supported on ``selected`` has nothing to
    confirm (``"nothing to confirm"``). Prediction claims are task-specific (each task has its
    own prediction) and are not carried over.

    Args:
        claims: claim dicts (:meth:`Claim.to_dict`) of every task.
        selected: the task the configuration was chosen on.
        others: the confirmation tasks.

    Returns:
        One row per (claim of ``selected``, other task): ``{"claim", "statement", "protocol",
        "selected_task", "selected_label", "task", "label", "verdict", "reason", "evidence"}``.
    """
    def key(c: dict) -> tuple[str, str | None]:
        return c["id"].split(":", 1)[1], c.get("protocol")

    by_task: dict[str, dict] = {}
    for c in claims:
        if ":prediction" in c["id"]:
            continue
        by_task.setdefault(c["task"], {})[key(c)] = c
    rows = []
    for k, c in (by_task.get(selected) or {}).items():
        for task in others:
            o = (by_task.get(task) or {}).get(k)
            if c["label"] != "supported":
                verdict, reason = "nothing to confirm", f"{c['label']} on {selected}"
            elif o is None:
                verdict, reason = "not confirmed", f"no such claim on {task} (its runs are missing)"
            elif o["label"] == "supported":
                verdict, reason = "confirmed", f"supported on {task} too"
            elif o["label"] == "contradicted":
                verdict, reason = "contradicted", f"contradicted on {task}: {o['reason']}"
            else:
                verdict, reason = "not confirmed", f"inconclusive on {task}: {o['reason']}"
            rows.append({"claim": k[0], "statement": c["statement"], "protocol": k[1],
                         "selected_task": selected, "selected_label": c["label"], "task": task,
                         "label": o["label"] if o else None, "verdict": verdict,
                         "reason": reason, "evidence": o.get("numbers") if o else None})
    return rows


def per_pe_prediction_claims(records: Sequence[RunRecord], predicted: dict,
                             regime: Any = None) -> list[Claim]:
    """One claim per PE that ran and has a decided prediction: "the prediction for this PE
    agrees with its runs" (:func:`prediction_claim` on that PE's runs alone). A PE whose
    prediction is not a decision (``no program``: a bounded search certificate, ``unknown``,
    ``no theory``, ``disagree``) gets no claim: there is nothing to test.

    Args:
        records: runs of one comparison group.
        predicted: PE -> ``{"prediction", "theory"}`` (a :class:`analysis.prediction.predict.
            Prediction` as a dict, or a subset of it).
        regime: the task's :class:`tasks.base.Regime` (:func:`prediction_claim`).
    """
    out = []
    for pe in sorted({r.pe for r in records}):
        pred = (predicted.get(pe) or {})
        verdict = pred.get("prediction")
        if verdict not in ("generalizes", "fails"):
            continue
        c = prediction_claim([r for r in records if r.pe == pe], verdict, regime=regime)
        c.id = f"{c.task}:prediction:{pe}"
        c.statement = (f"the prediction for {PE_LABELS.get(pe, pe)} ({verdict}, from "
                       f"{pred.get('theory') or 'its theory'}) agrees with its runs")
        out.append(c)
    return out


def task_claims(records: Sequence[RunRecord], predicted: str | dict | None = None,
                distances: dict[str, dict[str, list[float]]] | None = None,
                baselines: dict[str, list[float]] | None = None,
                units: dict[str, str] | None = None,
                replicates: dict[str, dict[str, Any]] | None = None,
                baseline_replicates: dict[str, Any] | None = None,
                regime: Any = None) -> list[Claim]:
    """Every claim about one task's comparison group: the paper's pairwise PE statements
    (:data:`PAPER_PE_CLAIMS`, where both PEs ran), the prediction, and per aggregation the
    attention-distance claim.

    Args:
        records: runs of one comparison group (:func:`comparison_groups`).
        predicted: the prediction for the task (``"generalizes"`` / ``"fails"``) or None, or
            per PE (PE -> prediction dict: :func:`per_pe_prediction_claims`).
        distances: aggregation -> PE -> per-seed distances from NoPE (cross-seed, the seeds
            every PE shares, in one order: :func:`claims_for_task`).
        baselines: aggregation -> NoPE vs NoPE other-seed distances.
        replicates, baseline_replicates: aggregation -> the bootstrap replicates over probe
            sequences of the same (:func:`distance_claim`).
        regime: the task's :class:`tasks.base.Regime` for the prediction claims
            (:func:`prediction_claim`; None: the paper states none).

    Raises:
        ClaimError: the runs cannot be pooled.
    """
    check_poolable(records)
    pes = {r.pe for r in records}
    out = [compare_pes(records, a, b, source) for a, b, source in PAPER_PE_CLAIMS
           if a in pes and b in pes]
    if isinstance(predicted, dict):
        out += per_pe_prediction_claims(records, predicted, regime)
    else:
        out.append(prediction_claim(records, predicted, regime=regime))
    for agg, d in (distances or {}).items():
        if "t5" not in d:                  # the paper's statement is about T5; nothing to test
            continue
        out.append(distance_claim(records[0].task, d, agg, (baselines or {}).get(agg, ()),
                                  units=(units or {}).get(agg, ""),
                                  runs=[r.run_dir for r in records],
                                  protocol=records[0].protocol, config=records[0].fingerprint,
                                  replicates=(replicates or {}).get(agg),
                                  baseline_replicates=(baseline_replicates or {}).get(agg)))
    return out


def claims_for_task(records: Sequence[RunRecord], predicted: str | dict | None = None,
                    probe: Any = None, regime: Any = None) -> dict:
    """All claims of one task, computed separately per comparison group, for the report.

    Args:
        records: every finished run of the task (any protocols / configurations).
        predicted: the prediction for the task (``"generalizes"`` / ``"fails"``), per PE (a
            dict, see :func:`task_claims`), or None.
        probe: an :class:`analysis.probing.metrics.ProbeResult` of (some of) these runs, or None. A
            group's claims use the distances between its own probed runs only.
        regime: the task's :class:`tasks.base.Regime` (``task.regime``; :func:`prediction_claim`).

    Returns:
        ``{"claims": [Claim.to_dict(), ...], "groups": [{"protocol", "config", "runs",
        "pes"}], "note": str or None}`` — the note says when runs of several protocols or
        configurations were found and compared only within each group.
    """
    groups = comparison_groups(records)
    probed = set()
    if probe is not None:
        probed = {l for l in probe.models if l != probe.compiled_label}
    out, info = [], []
    for g in groups:
        labels = {f"{r.pe}/seed{r.seed}" for r in g}
        distances = baselines = units = reps = base_reps = None
        # the cross-seed distances between probed models of this group only (a PE trained
        # under another protocol is another group: its distances are not pooled here)
        if probe is not None and len(probed & labels) > 1:
            distances, baselines, units, reps, base_reps = {}, {}, {}, {}, {}
            for agg in AGGREGATIONS:
                cross = probe.cross_seed_distances(agg, labels=probed & labels)
                ref = cross.pop("nope", None)
                # seeds every compared PE has (paired by seed)
                common = sorted(set.intersection(*[set(c.seeds) for c in cross.values()])
                                ) if cross else []
                distances[agg], reps[agg] = {}, {}
                for pe, c in cross.items():
                    rows = [c.seeds.index(s_) for s_ in common]
                    distances[agg][pe] = [c.values[i] for i in rows]
                    reps[agg][pe] = c.replicates[rows]
                baselines[agg] = list(ref.values) if ref else []
                base_reps[agg] = ref.replicates if ref else None
                units[agg] = JSD_UNITS["kazemnejad" if agg == "released" else probe.variant]
        out += [c.to_dict() for c in task_claims(g, predicted, distances, baselines, units,
                                                 reps, base_reps, regime=regime)]
        info.append({"protocol": g[0].protocol, "config": g[0].fingerprint,
                     "runs": [r.run_dir for r in g], "pes": sorted({r.pe for r in g})})
    note = None
    if len(groups) > 1:
        note = (f"{len(groups)} groups of runs with different protocols or configurations "
                "were found; each claim compares runs of one group only: "
                + "; ".join(f"protocol {i['protocol']}, config {i['config']}: "
                            f"{len(i['runs'])} runs" for i in info))
    return {"claims": out, "groups": info, "note": note}
