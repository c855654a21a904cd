"""Attention probing: compare the attention of trained and compiled transformers.

What this module computes (see ``docs/probing.md`` for the methods and their sources):

* :func:`jsd` — Jensen–Shannon divergence between attention distributions, base 2, in [0, 1]
  (Lin 1991). ``variant="kazemnejad"`` gives the non-standard ½[KL(M‖P) + KL(M‖Q)] in **nats**,
  exactly as the code released with Kazemnejad et al. 2023 (arXiv 2305.19466;
  ``src/analyzers/attention_kl_analyzer.py``: ``KLDivLoss(p.log(), m)`` = KL(M‖P), natural log)
  for comparability; it is never the default.
* :func:`head_distance` — JSD between two heads' patterns, averaged over query positions and
  examples.
* :func:`kazemnejad_distance` — model A vs model B (Kazemnejad et al. 2023, §6 and Fig. 4), with
  two aggregations: ``"standard"`` (default: standard JSD in bits, rows from query 1, all H x H
  head pairs, minimum per layer, mean over layers) and ``"released"`` (the released code's:
  their JSD variant in nats, all query rows of each sample, head pairs i < j only, minimum per
  (sample, layer), mean over samples and layers — the scale of the paper's 0.263 / 0.265).
* :func:`match_heads` — one-to-one assignment of trained heads to compiled heads that minimises
  the total JSD (Hungarian algorithm, ``scipy.optimize.linear_sum_assignment``).
* :func:`relative_position_fit` — the best pattern whose logits depend only on the T5 bucket of
  (query - key) (Raffel et al. 2020, T5 relative attention bias), fitted by minimising the
  cross-entropy to the head's pattern (a convex problem in the 32 bucket logits), and its JSD.
* :func:`probe` — run all of the above on patterns captured from models on the same token
  sequences (:mod:`analysis.probing.capture`).

Pattern formats. A *head pattern* is an array ``[example, query, key]`` of attention
probabilities (each valid row sums to 1). A *model's patterns* are either one array
``[example, layer, head, query, key]`` or a list over layers of ``[example, head, query, key]``
arrays (heads may differ per layer). Examples of different lengths are padded with zeros to one
common ``seq``: rows whose probabilities are all zero (padding queries) are left out of every
average. Query position 0 is the BOS token; under the causal mask it can only attend to itself
(every head agrees trivially), so the model-level functions leave it out by default
(``first_query=1``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np
import torch

from rasp_model.positional import t5_bucket
from rasp.errors import RASPError

__all__ = [
    "ProbingError", "jsd", "head_distance", "as_layer_list", "head_labels",
    "head_distance_matrix", "kazemnejad_distance", "KazemnejadDistance", "match_heads",
    "HeadMatching", "relative_position_fit", "RelativePositionFit",
    "probe", "to_numpy",
    "ProbeResult", "reference_pairs", "cross_seed_pairs", "CrossSeedDistances",
    "sequence_bootstrap_weights", "JSD_VARIANTS", "AGGREGATIONS", "JSD_UNITS",
]

JSD_VARIANTS = ("standard", "kazemnejad")

#: Units of each JSD variant: the standard JSD uses log base 2 (bounded by 1), the released code
#: of Kazemnejad et al. the natural log (``torch.nn.KLDivLoss``).
JSD_UNITS = {"standard": "bits", "kazemnejad": "nats"}

#: Aggregations of :func:`kazemnejad_distance` (see its docstring).
AGGREGATIONS = ("standard", "released")

#: Floor for P inside log P of the ``kazemnejad`` variant where M > 0 but P underflowed to 0
#: (the released code would give inf there; softmax rows over causal keys are never exactly 0
#: unless they underflow, so on trained models this floor never acts).
_TINY = 1e-300


class ProbingError(RASPError, ValueError):
    """Bad patterns or models given to the probing functions (shapes, models that cannot be
    compared). The message says what is wrong."""


# --------------------------------------------------------------------------------------------
# Distances
# --------------------------------------------------------------------------------------------

def _xlogy_ratio(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x * log2(x / y) with 0 log 0 = 0 (y > 0 wherever x > 0 for the standard JSD)."""
    out = np.zeros(np.broadcast(x, y).shape, dtype=np.float64)
    xb, yb = np.broadcast_arrays(x, y)
    pos = xb > 0
    out[pos] = xb[pos] * np.log2(xb[pos] / yb[pos])
    return out


def jsd(p: Any, q: Any, axis: int = -1, variant: str = "standard") -> np.ndarray:
    """Jensen–Shannon divergence between distributions along ``axis``.

    Args:
        p, q: arrays of probabilities of broadcastable shapes (e.g. ``[example, query, key]``);
            each slice along ``axis`` is one distribution. They are not renormalised.
        axis: the axis holding the distribution (the key axis of attention patterns).
        variant: ``"standard"`` (default): ½KL(P‖M) + ½KL(Q‖M) with M = ½(P + Q), log base 2,
            bounded in [0, 1] bits (Lin 1991). ``"kazemnejad"``: ½[KL(M‖P) + KL(M‖Q)] with the
            natural log (nats), exactly ``0.5 * (KLDivLoss(p.log(), m) + KLDivLoss(q.log(), m))``
            of the code released with Kazemnejad et al. 2023; terms with M = 0 are 0 (so keys
            masked in both patterns drop out, as the released code's slice ``[:l + 1]``); a P
            that underflowed to 0 where M > 0 is floored at 1e-300 instead of giving inf.
            Offered only for comparability with their numbers.

    Returns:
        The divergence per distribution: the input shape without ``axis``, in bits
        (``"standard"``) or nats (``"kazemnejad"``), see :data:`JSD_UNITS`.

    Raises:
        ProbingError: unknown variant or shapes that do not broadcast.
    """
    if variant not in JSD_VARIANTS:
        raise ProbingError(f"unknown JSD variant {variant!r}; choose one of {JSD_VARIANTS}")
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    try:
        np.broadcast(p, q)
    except ValueError:
        raise ProbingError(f"patterns of shapes {p.shape} and {q.shape} cannot be compared")
    m = 0.5 * (p + q)
    if variant == "standard":
        d = 0.5 * _xlogy_ratio(p, m).sum(axis=axis) + 0.5 * _xlogy_ratio(q, m).sum(axis=axis)
        return np.clip(d, 0.0, 1.0)
    d = 0.5 * (_kl_nats(m, p).sum(axis=axis) + _kl_nats(m, q).sum(axis=axis))
    return np.maximum(d, 0.0)


def _kl_nats(m: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Elementwise m * ln(m / p) with 0 ln 0 = 0 and p floored at :data:`_TINY` where m > 0."""
    mb, pb = np.broadcast_arrays(m, p)
    out = np.zeros(mb.shape, dtype=np.float64)
    pos = mb > 0
    out[pos] = mb[pos] * (np.log(mb[pos]) - np.log(np.maximum(pb[pos], _TINY)))
    return out


def _valid_rows(a: np.ndarray, b: np.ndarray, first_query: int) -> np.ndarray:
    """Bool ``[example, query]``: rows where at least one pattern has mass, query >= first."""
    valid = (a.sum(-1) > 0) | (b.sum(-1) > 0)
    valid[..., :first_query] = False
    return valid


def head_distance(a: Any, b: Any, variant: str = "standard", first_query: int = 0) -> float:
    """Distance between two heads: JSD per query position, averaged over queries and examples.

    Args:
        a, b: head patterns ``[example, query, key]`` (or ``[query, key]``) of equal shape,
            padded with all-zero rows where an example is shorter.
        variant: see :func:`jsd`.
        first_query: query positions before this one are left out (1 skips BOS).

    Returns:
        The mean JSD in bits (NaN when no row is valid).

    Raises:
        ProbingError: shapes differ.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ProbingError(f"head patterns differ in shape: {a.shape} vs {b.shape} "
                           "(were both models run on the same token sequences?)")
    if a.ndim == 2:
        a, b = a[None], b[None]
    valid = _valid_rows(a, b, first_query)
    if not valid.any():
        return float("nan")
    return float(jsd(a[valid], b[valid], axis=-1, variant=variant).mean())


def as_layer_list(patterns: Any) -> list[np.ndarray]:
    """Normalise a model's patterns to a list over layers of ``[example, head, query, key]``.

    Accepts ``[example, layer, head, query, key]`` arrays or lists/tuples of per-layer arrays
    (numpy or torch). Raises :class:`ProbingError` on any other shape.
    """
    if isinstance(patterns, (list, tuple)):
        out = []
        for i, layer in enumerate(patterns):
            arr = to_numpy(layer)
            if arr.ndim != 4:
                raise ProbingError(f"layer {i}: expected [example, head, query, key], got shape "
                                   f"{arr.shape}")
            out.append(arr)
        return out
    arr = to_numpy(patterns)
    if arr.ndim != 5:
        raise ProbingError("expected patterns [example, layer, head, query, key] or a list of "
                           f"[example, head, query, key] per layer, got shape {arr.shape}")
    return [arr[:, i] for i in range(arr.shape[1])]


def to_numpy(x: Any) -> np.ndarray:
    """A numpy or torch array (any device) as a float64 numpy array."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def head_labels(patterns: Any) -> list[tuple[int, int]]:
    """(layer, head) of every head of a model's patterns, in layer-major order."""
    layers = as_layer_list(patterns)
    return [(l, h) for l, arr in enumerate(layers) for h in range(arr.shape[1])]


def head_distance_matrix(patterns_a: Any, patterns_b: Any, variant: str = "standard",
                         first_query: int = 1) -> np.ndarray:
    """JSD between every head of model A and every head of model B.

    Returns:
        ``[heads_a, heads_b]`` matrix (heads in :func:`head_labels` order), bits.
    """
    la, lb = as_layer_list(patterns_a), as_layer_list(patterns_b)
    ha = [arr[:, h] for arr in la for h in range(arr.shape[1])]
    hb = [arr[:, h] for arr in lb for h in range(arr.shape[1])]
    if not ha or not hb:
        raise ProbingError("a model without attention heads cannot be compared")
    _check_same_inputs(ha[0], hb[0])
    return np.array([[head_distance(x, y, variant, first_query) for y in hb] for x in ha])


def _check_same_inputs(a: np.ndarray, b: np.ndarray) -> None:
    if a.shape != b.shape:
        raise ProbingError(f"the two models' patterns have different [example, query, key] "
                           f"shapes {a.shape} vs {b.shape}: they were not run on the same "
                           "token sequences")


@dataclass
class KazemnejadDistance:
    """Model-vs-model distance of Kazemnejad et al. 2023 (§6, Fig. 4).

    ``per_layer[l]``: the layer's distance (``"standard"``: min over head pairs of the head JSD;
    ``"released"``: mean over samples of the per-sample minimum); ``mean``: mean of
    ``per_layer`` (for ``"released"`` equal to the mean over samples and layers);
    ``argmin[l]``: the (head of A, head of B) pair achieving the minimum (``"released"``: the
    pair most often minimal over samples); ``per_sample`` (``"released"`` only):
    ``[example][layer]`` minima; ``units``: ``"bits"`` or ``"nats"``.

    ``layer_sums`` / ``layer_counts`` (``"standard"`` only; not serialised): per layer, the
    ``[example, head_a, head_b]`` sums of the row JSDs and the numbers of valid rows, from which
    the distance on a resample of the probe sequences is recomputed (:meth:`replicates`).
    """

    per_layer: list[float]
    mean: float
    argmin: list[tuple[int, int]]
    variant: str = "standard"
    aggregation: str = "standard"
    per_sample: list[list[float]] | None = None
    layer_sums: list[np.ndarray] | None = field(default=None, repr=False, compare=False)
    layer_counts: list[np.ndarray] | None = field(default=None, repr=False, compare=False)

    @property
    def units(self) -> str:
        return JSD_UNITS[self.variant]

    def replicates(self, weights: np.ndarray) -> np.ndarray:
        """The distance recomputed on reweighted probe sequences (a bootstrap over them).

        Args:
            weights: ``[replicate, example]`` non-negative weights of the probe sequences
                (bootstrap counts: :func:`sequence_bootstrap_weights`); all ones gives
                :attr:`mean`, the indicator of a subset gives the distance on that subset.

        Returns:
            ``[replicate]`` distances, computed exactly as :func:`kazemnejad_distance` does on
            the reweighted sequences (the minimum over head pairs taken per replicate).

        Raises:
            ProbingError: a distance made without its per-example parts, or weights whose
                second axis is not the number of probe sequences.
        """
        w = np.asarray(weights, dtype=np.float64)
        if self.aggregation == "released":
            if self.per_sample is None:
                raise ProbingError("this distance kept no per-sample minima to resample")
            ps = np.asarray(self.per_sample, dtype=np.float64)         # [example, layer]
            if w.ndim != 2 or w.shape[1] != ps.shape[0]:
                raise ProbingError(f"weights {w.shape} do not match {ps.shape[0]} sequences")
            ok = ~np.isnan(ps)
            return (w @ np.where(ok, ps, 0.0).sum(1)) / (w @ ok.sum(1))
        if self.layer_sums is None or self.layer_counts is None:
            raise ProbingError("this distance kept no per-example sums to resample")
        per_layer = []
        for sums, counts in zip(self.layer_sums, self.layer_counts):
            if w.ndim != 2 or w.shape[1] != sums.shape[0]:
                raise ProbingError(f"weights {w.shape} do not match {sums.shape[0]} sequences")
            s = np.tensordot(w, sums, axes=(1, 0))                        # [rep, ha, hb]
            c = np.tensordot(w, counts, axes=(1, 0))
            d = np.where(c > 0, s / np.where(c > 0, c, 1), np.inf)
            per_layer.append(d.reshape(len(w), -1).min(1))
        return np.mean(per_layer, axis=0)

    def to_dict(self) -> dict:
        out = {"per_layer": [float(x) for x in self.per_layer], "mean": float(self.mean),
               "argmin": [list(x) for x in self.argmin], "variant": self.variant,
               "aggregation": self.aggregation, "units": self.units}
        return out


def _pair_row_jsd(a: np.ndarray, b: np.ndarray, variant: str) -> np.ndarray:
    """JSD of every (head of A, head of B) pair per example and query row.

    Args:
        a: ``[example, heads_a, query, key]``; b: ``[example, heads_b, query, key]``.

    Returns:
        ``[example, heads_a, heads_b, query]``.
    """
    return jsd(a[:, :, None], b[:, None, :], axis=-1, variant=variant)


def kazemnejad_distance(patterns_a: Any, patterns_b: Any, variant: str | None = None,
                        first_query: int | None = None,
                        aggregation: str = "standard") -> KazemnejadDistance:
    """Kazemnejad et al.'s layer-wise distance between two models of the same depth.

    ``aggregation="standard"`` (the default; variant default ``"standard"``, first_query 1):
    per layer, the head JSD (mean over the valid query rows of all examples, BOS row left out)
    of every (head of A, head of B) pair — all H_A x H_B pairs, so a model against itself
    scores exactly 0 — and its minimum; then the mean over layers. Bits, in [0, 1].

    ``aggregation="released"`` (variant default ``"kazemnejad"``, first_query 0): the
    aggregation of the code released with the paper (``attention_kl_analyzer.py`` and
    ``plot_attention_kl_final.ipynb``): per sample, per layer, per head pair from
    ``itertools.combinations(range(H), 2)`` — head ``i`` of B (the PE model) against head ``j``
    of A (the NoPE reference) with i < j only — the JSD averaged over all query rows of the
    sample including query 0; the minimum over those pairs per (sample, layer); then the mean
    over samples and layers. Because a head is never paired with its own index, a model
    against itself does not score 0. This is the scale of the paper's values (NoPE vs T5 0.263,
    NoPE vs NoPE other seed 0.265, ALiBi 0.49, APE 0.72, Rotary 0.99; nats).

    Args:
        patterns_a, patterns_b: the two models' patterns on the same inputs
            (``[example, layer, head, query, key]`` or lists of ``[example, head, query, key]``
            per layer), zero rows = padding. A is the reference (NoPE in the paper).
        variant: JSD variant (:data:`JSD_VARIANTS`); default per aggregation as above.
        first_query: query rows before this are left out; default per aggregation as above.
        aggregation: ``"standard"`` or ``"released"`` (:data:`AGGREGATIONS`).

    Returns:
        :class:`KazemnejadDistance`.

    Raises:
        ProbingError: different numbers of layers, different inputs, unknown aggregation,
            ``"released"`` with different head counts or fewer than 2 heads per layer.
    """
    if aggregation not in AGGREGATIONS:
        raise ProbingError(f"unknown aggregation {aggregation!r}; choose one of {AGGREGATIONS}")
    released = aggregation == "released"
    if variant is None:
        variant = "kazemnejad" if released else "standard"
    if first_query is None:
        first_query = 0 if released else 1
    la, lb = as_layer_list(patterns_a), as_layer_list(patterns_b)
    if len(la) != len(lb):
        raise ProbingError(f"models with {len(la)} and {len(lb)} layers cannot be compared "
                           "layer by layer")
    per_layer, argmin, per_sample_layers = [], [], []
    layer_sums, layer_counts = [], []
    for l, (a, b) in enumerate(zip(la, lb)):
        if a.shape[1] == 0 or b.shape[1] == 0:          # a layer without attention
            continue
        _check_same_inputs(a[:, 0], b[:, 0])
        rows = _pair_row_jsd(a, b, variant)               # [example, ha, hb, query]
        valid = (a.sum(-1) > 0)[:, :, None] | (b.sum(-1) > 0)[:, None, :]
        valid[..., :first_query] = False                  # [example, ha, hb, query]
        if not released:
            ex_sums = np.where(valid, rows, 0.0).sum(3)       # [example, ha, hb]
            ex_counts = valid.sum(3)
            n = ex_counts.sum(0)
            d = ex_sums.sum(0) / np.where(n > 0, n, 1)
            d = np.where(n > 0, d, np.nan)                # [ha, hb]
            if np.isnan(d).all():
                continue
            layer_sums.append(ex_sums)
            layer_counts.append(ex_counts)
            i, j = np.unravel_index(np.nanargmin(d), d.shape)
            per_layer.append(float(d[i, j]))
            argmin.append((int(i), int(j)))
            continue
        h = a.shape[1]
        if b.shape[1] != h or h < 2:
            raise ProbingError(f"layer {l}: the released aggregation pairs heads i < j of two "
                               f"models with the same number (>= 2) of heads; got {h} and "
                               f"{b.shape[1]}")
        n = valid.sum(3)
        d = np.where(valid, rows, 0.0).sum(3) / np.where(n > 0, n, 1)   # [example, ha, hb]
        # pairs (i of B, j of A) with i < j: entry [example, j, i] of the [A, B] matrix
        pairs = [(j, i) for i, j in itertools.combinations(range(h), 2)]
        cand = np.stack([d[:, ja, ib] for ja, ib in pairs], axis=1)      # [example, pair]
        has = np.stack([n[:, ja, ib] > 0 for ja, ib in pairs], axis=1).any(1)
        if not has.any():
            continue
        mins = cand[has].min(1)
        best = np.bincount(cand[has].argmin(1), minlength=len(pairs)).argmax()
        per_sample_layers.append(np.where(has, cand.min(1), np.nan))
        per_layer.append(float(mins.mean()))
        argmin.append((int(pairs[best][0]), int(pairs[best][1])))
    if not per_layer:
        raise ProbingError("the models have no attention heads to compare")
    per_sample = None
    if released:
        ps = np.stack(per_sample_layers, axis=1)          # [example, layer]
        per_sample = [[float(x) for x in r] for r in ps]
        mean = float(np.nanmean(ps))
    else:
        mean = float(np.mean(per_layer))
    return KazemnejadDistance(per_layer, mean, argmin, variant, aggregation, per_sample,
                              layer_sums=None if released else layer_sums,
                              layer_counts=None if released else layer_counts)


def sequence_bootstrap_weights(n_sequences: int, size: int,
                               rng: np.random.Generator) -> np.ndarray:
    """Bootstrap weights ``[size, n_sequences]`` over probe sequences: each replicate draws
    ``n_sequences`` sequences with replacement (multinomial counts). Every model of one probe
    must be resampled with the same weights, since they saw the same sequences."""
    return rng.multinomial(n_sequences, np.full(n_sequences, 1.0 / n_sequences), size=size)


@dataclass
class HeadMatching:
    """One-to-one matching of trained heads to compiled heads.

    ``pairs``: list of ``(trained (layer, head), compiled (layer, head), jsd)`` of the optimal
    assignment, sorted by distance; ``matrix``: ``[trained_heads, compiled_heads]`` JSD;
    ``nearest``: for every trained head, its closest compiled head (not one-to-one) and the JSD.
    ``mean``: mean JSD of the assigned pairs.
    """

    pairs: list[tuple[tuple[int, int], tuple[int, int], float]]
    matrix: np.ndarray
    trained_heads: list[tuple[int, int]]
    compiled_heads: list[tuple[int, int]]
    nearest: list[tuple[tuple[int, int], tuple[int, int], float]]
    mean: float
    variant: str = "standard"

    def to_dict(self) -> dict:
        return {
            "pairs": [{"trained": list(t), "compiled": list(c), "jsd": float(d)}
                      for t, c, d in self.pairs],
            "nearest": [{"trained": list(t), "compiled": list(c), "jsd": float(d)}
                        for t, c, d in self.nearest],
            "matrix": np.round(self.matrix, 6).tolist(),
            "trained_heads": [list(x) for x in self.trained_heads],
            "compiled_heads": [list(x) for x in self.compiled_heads],
            "mean": float(self.mean), "variant": self.variant,
        }


def match_heads(trained: Any, compiled: Any, variant: str = "standard",
                first_query: int = 1) -> HeadMatching:
    """Match trained heads to compiled heads one-to-one, minimising the total JSD.

    Uses the Hungarian algorithm (``scipy.optimize.linear_sum_assignment``) on the
    ``[trained_heads, compiled_heads]`` JSD matrix; with unequal head counts, min(n, m) pairs
    are formed. Heads of any layers may be matched (trained and compiled depths differ).

    Args:
        trained, compiled: the two models' patterns on the same token sequences.

    Returns:
        :class:`HeadMatching`.

    Raises:
        ProbingError: the patterns come from different inputs.
    """
    # start-up: scipy loads only when this runs
    from scipy.optimize import linear_sum_assignment

    matrix = head_distance_matrix(trained, compiled, variant, first_query)
    tl, cl = head_labels(trained), head_labels(compiled)
    cost = np.where(np.isnan(matrix), 1e6, matrix)
    rows, cols = linear_sum_assignment(cost)
    pairs = sorted(((tl[r], cl[c], float(matrix[r, c])) for r, c in zip(rows, cols)),
                   key=lambda x: x[2])
    nearest = [(tl[r], cl[int(np.argmin(cost[r]))], float(matrix[r, int(np.argmin(cost[r]))]))
               for r in range(len(tl))]
    mean = float(np.mean([d for _, _, d in pairs])) if pairs else float("nan")
    return HeadMatching(pairs, matrix, tl, cl, nearest, mean, variant)


# --------------------------------------------------------------------------------------------
# Relative-position (T5 bucket) reference
# --------------------------------------------------------------------------------------------

@dataclass
class RelativePositionFit:
    """Best relative-position pattern for one head.

    ``bucket_logits [num_buckets]``: the fitted logit per T5 bucket (shift-invariant; buckets
    never seen are 0); ``pattern [example, query, key]``: the fitted pattern under the same
    mask; ``jsd``: mean JSD (bits) between the head and the fit over valid query rows.
    """

    bucket_logits: np.ndarray
    pattern: np.ndarray
    jsd: float
    causal: bool = True

    def to_dict(self) -> dict:
        return {"bucket_logits": np.round(self.bucket_logits, 4).tolist(),
                "jsd": float(self.jsd), "causal": self.causal}


def _key_mask(pattern: np.ndarray, causal: bool) -> np.ndarray:
    """Bool ``[example, query, key]``: the keys a query may attend to."""
    e, nq, nk = pattern.shape
    rows = pattern.sum(-1) > 0                                   # [example, query]
    if causal:
        tri = np.tril(np.ones((nq, nk), dtype=bool))
        return tri[None] & rows[:, :, None]
    lengths = rows.sum(-1)                                       # valid rows = the length
    keys = np.arange(nk)[None, :] < lengths[:, None]             # [example, key]
    return rows[:, :, None] & keys[:, None, :]


def relative_position_fit(pattern: Any, causal: bool = True, num_buckets: int = 32,
                          max_distance: int = 128, first_query: int = 1) -> RelativePositionFit:
    """Fit the best pattern whose logits depend only on the T5 bucket of (query - key).

    The fit minimises the cross-entropy of the fitted softmax to the head's pattern (equivalently
    KL(head ‖ fit)), summed over valid query rows and examples; this is convex in the bucket
    logits and solved with L-BFGS (``scipy.optimize.minimize``) with the analytic gradient. The
    reported distance is the standard JSD between head and fit (averaged as in
    :func:`head_distance`), i.e. how far the head is from a pure relative-position head.

    Args:
        pattern: one head ``[example, query, key]`` (or ``[query, key]``), zero rows = padding.
        causal: keys after the query are masked (decoder); else keys up to the example length.
        num_buckets, max_distance: T5's bucket settings (32, 128).
        first_query: rows before this are left out of the fit and the JSD (1 skips BOS).

    Returns:
        :class:`RelativePositionFit`.

    Raises:
        ProbingError: the pattern is not 2- or 3-dimensional or has no valid row.
    """
    # start-up: scipy loads only when this runs
    from scipy.optimize import minimize

    p = to_numpy(pattern)
    if p.ndim == 2:
        p = p[None]
    if p.ndim != 3:
        raise ProbingError(f"expected a head pattern [example, query, key], got shape {p.shape}")
    e, nq, nk = p.shape
    mask = _key_mask(p, causal)
    mask[:, :first_query] = False
    rows = mask.any(-1)                                          # [example, query]
    if not rows.any():
        raise ProbingError("the pattern has no valid query row to fit")
    rel = np.arange(nq)[:, None] - np.arange(nk)[None, :]
    buckets = t5_bucket(rel, bidirectional=not causal, num_buckets=num_buckets,
                        max_distance=max_distance)               # [query, key]
    onehot = np.eye(num_buckets)[buckets]                        # [query, key, bucket]
    # Sufficient statistics: the target mass per bucket, summed over rows and examples.
    target = np.einsum("eqk,qkb->b", np.where(mask, p, 0.0), onehot)

    def objective(w):
        logits = np.where(mask, w[buckets][None], -np.inf)
        logits = np.where(rows[:, :, None], logits, 0.0)
        mx = logits.max(-1, keepdims=True)
        ex = np.where(mask, np.exp(logits - mx), 0.0)
        z = ex.sum(-1, keepdims=True)
        z = np.where(z > 0, z, 1.0)
        lse = (np.log(z[..., 0]) + mx[..., 0])[rows].sum()
        q = ex / z
        grad = np.einsum("eqk,qkb->b", q, onehot) - target
        return lse - target @ w, grad

    res = minimize(objective, np.zeros(num_buckets), jac=True, method="L-BFGS-B",
                   options={"maxiter": 500, "gtol": 1e-9})
    w = res.x
    used = np.zeros(num_buckets, dtype=bool)
    used[np.unique(buckets[mask.any(0)])] = True
    w = np.where(used, w - (w[used].max() if used.any() else 0.0), 0.0)
    logits = np.where(mask, w[buckets][None], -np.inf)
    logits = np.where(rows[:, :, None], logits, 0.0)
    ex = np.where(mask, np.exp(logits - logits.max(-1, keepdims=True)), 0.0)
    fit = ex / np.where(ex.sum(-1, keepdims=True) > 0, ex.sum(-1, keepdims=True), 1.0)
    fit = np.where(rows[:, :, None], fit, 0.0)
    d = float(jsd(p[rows], fit[rows]).mean())
    return RelativePositionFit(w, fit, d, causal)


# --------------------------------------------------------------------------------------------
# The whole probe
# --------------------------------------------------------------------------------------------

def _split_label(label: str) -> tuple[str, int | None]:
    """``"pe/seed3"`` -> ("pe", 3); a label without a seed -> (label, None)."""
    pe, _, rest = label.partition("/")
    digits = rest[4:].split("-")[0] if rest.startswith("seed") else ""
    return pe, int(digits) if digits.isdigit() else None


def reference_pairs(labels: Sequence[str], reference_pe: str = "nope"
                    ) -> list[tuple[str, str]]:
    """The (reference, other) model pairs of the Kazemnejad comparison, as the released code
    pairs them (``attention_kl_analyzer.py``): a model of PE X and seed s against the NoPE model
    of the same seed s (the first NoPE seed when s has none); a NoPE model of seed s against the
    NoPE model of the next seed (cyclically: the other-seed baseline).

    Args:
        labels: model labels ``"<pe>/seed<k>"``.
    """
    refs = sorted((l for l in labels if _split_label(l)[0] == reference_pe),
                  key=lambda l: (_split_label(l)[1] is None, _split_label(l)[1] or 0, l))
    if not refs:
        return []
    by_seed = {_split_label(l)[1]: l for l in refs}
    pairs = []
    if len(refs) > 1:
        pairs += [(refs[i], refs[(i + 1) % len(refs)]) for i in range(len(refs))]
        if len(refs) == 2:
            pairs = pairs[:1]
    for l in labels:
        pe, seed = _split_label(l)
        if pe == reference_pe:
            continue
        pairs.append((by_seed.get(seed, refs[0]), l))
    return pairs


def cross_seed_pairs(labels: Sequence[str], reference_pe: str = "nope"
                     ) -> list[tuple[str, str]]:
    """The (reference, other) pairs of the cross-seed comparison: every model (NoPE included)
    against every reference model of *another* seed. Runs of one seed share initial weights
    and batches, so a same-seed pair understates the distance of a PE from NoPE as such; the
    cross-seed pairs put every PE, and NoPE itself (the baseline), on one footing
    (``docs/probing.md``, "Cross-seed distances"). Labels without a seed are left out.

    Args:
        labels: model labels ``"<pe>/seed<k>"``.
    """
    refs = [l for l in labels if _split_label(l)[0] == reference_pe
            and _split_label(l)[1] is not None]
    pairs = []
    for l in labels:
        seed = _split_label(l)[1]
        if seed is None:
            continue
        pairs += [(r, l) for r in refs if _split_label(r)[1] != seed]
    return pairs


@dataclass
class CrossSeedDistances:
    """One PE's distances from the reference PE's models of other seeds.

    ``seeds``: the PE's seeds; ``values[i]``: the mean distance of its seed-``seeds[i]`` model
    from the reference models of the other seeds; ``replicates``: ``[seed, replicate]`` the
    same means on bootstrap resamples of the probe sequences (one weight matrix shared by every
    model of the probe, :func:`sequence_bootstrap_weights`), for intervals that resample seeds
    as units and sequences within; ``units``: ``"bits"`` or ``"nats"``."""

    seeds: list[int]
    values: list[float]
    replicates: np.ndarray = field(repr=False)
    units: str = "bits"

    def to_dict(self) -> dict:
        return {"seeds": list(self.seeds), "values": [float(v) for v in self.values],
                "units": self.units}


@dataclass
class ProbeResult:
    """Everything the probe computes for one task.

    ``models``: label -> list over layers of ``[example, head, query, key]``;
    ``pairwise``: (reference, other) -> :class:`KazemnejadDistance` of the standard aggregation,
    for the pairs of :func:`reference_pairs`; ``pairwise_released``: the same pairs with the
    released aggregation (nats); ``matchings``: label -> :class:`HeadMatching` against the
    compiled model (if any); ``relpos``: label -> list of ((layer, head),
    :class:`RelativePositionFit`).
    """

    task: str
    sequences: list[list[int]]
    models: dict[str, list[np.ndarray]]
    pairwise: dict[tuple[str, str], KazemnejadDistance] = field(default_factory=dict)
    matchings: dict[str, HeadMatching] = field(default_factory=dict)
    relpos: dict[str, list[tuple[tuple[int, int], RelativePositionFit]]] = field(
        default_factory=dict)
    compiled_label: str | None = None
    variant: str = "standard"
    notes: list[str] = field(default_factory=list)
    pairwise_released: dict[tuple[str, str], KazemnejadDistance] = field(default_factory=dict)
    cross_pairwise: dict[tuple[str, str], KazemnejadDistance] = field(default_factory=dict)
    cross_pairwise_released: dict[tuple[str, str], KazemnejadDistance] = field(
        default_factory=dict)
    # (aggregation, a, b, size, seed) -> bootstrap replicates of one pair: the claims of each
    # comparison group, the results table and the figure ask for the same pairs
    _replicates: dict = field(default_factory=dict, repr=False, compare=False)

    def cross_seed_distances(self, aggregation: str = "standard", reference_pe: str = "nope",
                             labels=None, size: int = 2000, seed: int = 20230530
                             ) -> dict[str, CrossSeedDistances]:
        """Per PE (the reference PE included: its baseline), each seed's mean distance from
        the reference models of the other seeds (:func:`cross_seed_pairs`), with bootstrap
        replicates over the probe sequences.

        Args:
            aggregation: ``"standard"`` or ``"released"``.
            labels: only models with these labels (``pe/seed<k>``), e.g. one comparison group.
            size: bootstrap replicates; seed: their random generator's seed (fixed, so a
                report regenerated from the same runs prints the same intervals).

        Returns:
            PE -> :class:`CrossSeedDistances`, seeds ascending.
        """
        table = self.cross_pairwise if aggregation == "standard" else self.cross_pairwise_released
        weights = sequence_bootstrap_weights(len(self.sequences), size,
                                             np.random.default_rng(seed))
        grouped: dict[str, dict[int, list]] = {}
        for (a, b), d in table.items():
            if _split_label(a)[0] != reference_pe or (labels is not None and (
                    a not in labels or b not in labels)):
                continue
            pe, s = _split_label(b)
            grouped.setdefault(pe, {}).setdefault(s, []).append(((a, b), d))
        out = {}
        for pe, by_seed in grouped.items():
            seeds = sorted(by_seed)
            values = [float(np.mean([d.mean for _, d in by_seed[s]])) for s in seeds]
            reps = np.stack([np.mean([self._pair_replicates(aggregation, ab, d, weights, size,
                                                            seed)
                                      for ab, d in by_seed[s]], axis=0) for s in seeds])
            units = next(iter(by_seed.values()))[0][1].units
            out[pe] = CrossSeedDistances(seeds, values, reps, units)
        return out

    def _pair_replicates(self, aggregation, pair, d, weights, size, seed) -> np.ndarray:
        key = (aggregation, *pair, size, seed)
        if key not in self._replicates:
            self._replicates[key] = d.replicates(weights)
        return self._replicates[key]

    def distances(self, aggregation: str = "standard", reference_pe: str = "nope",
                  labels=None) -> tuple[dict[str, list[float]], list[float]]:
        """Per-PE distances from the reference PE (one per seed pair) and the reference's
        other-seed baseline, for one aggregation: ``({pe: [d, ...]}, [baseline d, ...])``;
        with ``labels`` (model labels ``pe/seed<k>``) only pairs of two of those models."""
        table = self.pairwise if aggregation == "standard" else self.pairwise_released
        out: dict[str, list[float]] = {}
        base: list[float] = []
        for (a, b), d in table.items():
            pa, pb = _split_label(a)[0], _split_label(b)[0]
            if pa != reference_pe or (labels is not None and (a not in labels
                                                              or b not in labels)):
                continue
            (base if pb == reference_pe else out.setdefault(pb, [])).append(float(d.mean))
        return out, base

    def to_dict(self) -> dict:
        def dist(table):
            return [{"a": a, "b": b, **d.to_dict()} for (a, b), d in table.items()]
        summary = {}
        for agg in AGGREGATIONS:
            per_pe, base = self.distances(agg)
            summary[agg] = {"per_pe": per_pe, "baseline": base}
        return {
            "task": self.task, "variant": self.variant, "n_sequences": len(self.sequences),
            "sequence_lengths": sorted({len(s) for s in self.sequences}),
            "models": {k: [int(a.shape[1]) for a in v] for k, v in self.models.items()},
            "compiled": self.compiled_label,
            "pairwise": dist(self.pairwise),
            "pairwise_released": dist(self.pairwise_released),
            "distances_from_nope": summary,
            "matchings": {k: m.to_dict() for k, m in self.matchings.items()},
            "relpos": {k: [{"head": list(h), **f.to_dict()} for h, f in v]
                       for k, v in self.relpos.items()},
            "notes": list(self.notes),
        }


def probe(task_name: str, sequences: list[list[int]], trained: dict[str, list[np.ndarray]],
          compiled: list[np.ndarray] | None = None, variant: str = "standard",
          reference: str | None = None, relpos: bool = True,
          causal: bool = True) -> ProbeResult:
    """Run every comparison on captured patterns.

    Args:
        task_name: for the record.
        sequences: the token sequences the patterns were captured on.
        trained: label (``"<pe>/seed<k>"``) -> patterns of a trained model.
        compiled: patterns of the compiled reference on the same sequences, or None.
        variant: JSD variant of the standard comparison, the head matching and the fits.
        reference: when given, every other model is compared with this one label; by default
            the pairs of :func:`reference_pairs` (same-seed NoPE, and NoPE's other seed), as
            the released code of Kazemnejad et al.
        relpos: also fit a relative-position pattern to every trained head.

    Returns:
        :class:`ProbeResult` with both aggregations of the Kazemnejad comparison.
    """
    models = dict(trained)
    res = ProbeResult(task_name, sequences, models, variant=variant)
    labels = list(trained)
    if reference is not None:
        pairs = [(reference, l) for l in labels if l != reference]
    else:
        pairs = reference_pairs(labels)
    jobs = [(p, "standard", res.pairwise) for p in pairs]
    jobs += [(p, "released", res.pairwise_released) for p in pairs]
    if reference is None:
        cross = cross_seed_pairs(labels)
        jobs += [(p, "standard", res.cross_pairwise) for p in cross]
        jobs += [(p, "released", res.cross_pairwise_released) for p in cross]
    for (a, b), agg, table in jobs:
        try:
            table[(a, b)] = kazemnejad_distance(
                trained[a], trained[b], variant if agg == "standard" else None,
                aggregation=agg)
        except ProbingError as e:
            res.notes.append(f"{a} vs {b} ({agg} aggregation): {e}")
    if compiled is not None:
        res.compiled_label = "compiled"
        res.models["compiled"] = compiled
        for label in labels:
            try:
                res.matchings[label] = match_heads(trained[label], compiled, variant)
            except ProbingError as e:
                res.notes.append(f"{label} vs compiled: {e}")
    if relpos:
        for label in labels:
            fits = []
            for l, arr in enumerate(as_layer_list(trained[label])):
                for h in range(arr.shape[1]):
                    try:
                        fits.append(((l, h), relative_position_fit(arr[:, h], causal=causal)))
                    except ProbingError as e:
                        res.notes.append(f"{label} L{l}H{h}: {e}")
            res.relpos[label] = fits
    return res
