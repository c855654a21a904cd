"""The page's sentences computed from a report's sections (``analysis.reporting.report``):
the accuracy figure's caption, why a distance chart is missing, the one-sentence finding from
the claims. Text only: no training, no probing, no drawing.
"""

from __future__ import annotations

from typing import Sequence

from analysis.evidence import statistics as _stats
from analysis.reporting import figures
from rasp_model.pe_names import PE_LABELS, PE_NAMES

__all__ = ["accuracy_caption", "curve_caption", "distance_note", "finding"]


def accuracy_caption(curves: dict[str, list[dict]]) -> str:
    """The accuracy figure's caption, saying which band each PE's curve has
    (:func:`analysis.reporting.figures.accuracy_bands`, what the figure draws)."""
    bands = figures.accuracy_bands(curves)
    order = sorted(bands, key=lambda p: PE_NAMES.index(p) if p in PE_NAMES else 99)
    rng = [PE_LABELS.get(p, p) for p in order if bands[p] == "seed range"]
    wil = [PE_LABELS.get(p, p) for p in order if bands[p] == "wilson"]
    parts = []
    if rng:
        parts.append("the range over seeds (min to max) for " + ", ".join(rng))
    if wil:
        parts.append("the 95% Wilson interval of its one seed, dotted, for " + ", ".join(wil))
    band = ("; band: " + "; ".join(parts)) if parts else ""
    return ("Exact match of greedy decoding per input length: line, the mean over seeds"
            f"{band}. Grey: training lengths; right of it, out of distribution.")


def distance_note(sec: dict) -> str:
    """Why a section has no distance chart, from what was probed: the chart compares each
    PE's model with the NoPE models of the other seeds, so it needs a NoPE model and a model
    of another PE of another seed."""
    res = sec.get("probe")       # analysis.probing.metrics.ProbeResult | None
    loaded = [r for r in (sec.get("runs") or [])
              if r.get("status") in ("reused", "trained", "resumed")]
    if res is None:
        return (f"no trained model was probed ({len(loaded)} of "
                f"{len(sec.get('runs') or [])} run(s) of this task finished)")
    labels = [l for l in res.models if l != res.compiled_label]
    by_pe: dict[str, set] = {}
    for l in labels:
        pe, _, seed = l.partition("/")
        by_pe.setdefault(pe, set()).add(seed)
    if "nope" not in by_pe:
        return ("it measures each PE's distance from the NoPE models, and no NoPE model was "
                "probed")
    others = [pe for pe in by_pe if pe != "nope"]
    if not others:
        n = len(by_pe["nope"])
        return (f"only NoPE was probed ({n} seed{'s' if n != 1 else ''}); it needs a model of "
                "another positional encoding")
    return ("it compares each PE's model with the NoPE models of other seeds, and every "
            "probed model of another PE shares its seed with every NoPE model")


def finding(claims: Sequence[dict], most: int = 4) -> str:
    """The page's one-sentence finding, computed from its claims: the decided ones (label,
    seeds per arm), then how many stayed inconclusive and, when no claim has the seeds a
    decision needs, that number."""
    if not claims:
        return "No claim was computed: no finished runs."
    decided = [c for c in claims if c.get("label") in ("supported", "contradicted")]
    undecided = len(claims) - len(decided)
    parts = [f"{c['statement']} ({c['label']}, {_claim_seeds(c)} seeds)"
             for c in decided[:most]]
    if len(decided) > most:
        parts.append(f"{len(decided) - most} more decided")
    if not decided:
        seeds = [n for n in (_claim_seeds(c) for c in claims) if n is not None]
        most_seeds = max(seeds) if seeds else 0
        short = (f"; at most {most_seeds} seed{'s' if most_seeds != 1 else ''} per positional "
                 f"encoding where a decision needs {_stats.MIN_SEEDS}"
                 if seeds and most_seeds < _stats.MIN_SEEDS else "")
        return (f"No claim is decided by these runs: all {len(claims)} "
                f"{'is' if len(claims) == 1 else 'are'} inconclusive{short}.")
    tail = f"; {undecided} other claim{'s' if undecided != 1 else ''} inconclusive" \
        if undecided else ""
    return "; ".join(parts) + tail + "."


def _claim_seeds(c: dict) -> int | None:
    """The seeds a claim compared per positional encoding (the fewest of its arms)."""
    num = c.get("numbers") or {}
    if num.get("paired_seeds") is not None:
        return len(num["paired_seeds"])
    counts = []
    for v in (num.get("per_pe") or {}).values():
        if isinstance(v, dict):
            seeds = v.get("seeds")
            counts.append(len(seeds) if isinstance(seeds, (list, tuple)) else seeds)
        elif isinstance(v, (list, tuple)):
            counts.append(len(v))
    counts = [n for n in counts if isinstance(n, int)]
    return min(counts) if counts else None


def curve_caption(curve: dict, source: str) -> str:
    """The training-length curve's caption: what is plotted, the shortest training length at
    which each PE generalizes by the claims rule (or "not within the lengths tried") and the
    paper's regime, from ``curve`` (``analysis.experiment.curve.Curve.to_dict``) read from
    ``source``."""
    short = curve.get("shortest") or {}
    per = "; ".join(f"{PE_LABELS.get(pe, pe)}: "
                    + (f"from L = {short[pe]}" if short.get(pe) is not None
                       else "not within the lengths tried")
                    for pe in curve.get("pes") or [])
    reg = curve.get("regime")
    regime = (f" The paper's regime: L >= {reg['train_max_len']} ({reg['source']})."
              if reg else "")
    return ("OOD exact match (lengths L+1..2L) against the maximum training length L, per PE: "
            "the mean over seeds, the seeds as dots, the bootstrap 95% interval as a band, "
            f"the claims rule's threshold dashed. Generalizes (the rule): {per or 'no PE'}."
            f"{regime} From {source} (`rasp curve`).")
