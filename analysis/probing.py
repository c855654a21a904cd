"""Attention probing: compare the attention of trained and compiled transformers.

What this module computes (see ``docs/probing.md`` for the methods and their sources):

* :func:`jsd` — Jensen–Shannon divergence between attention distributions, base 2, in [0, 1]
  (Lin 1991). ``variant="kazemnejad"`` gives the non-standard ½[KL(M‖P) + KL(M‖Q)] used by the
  code of Kazemnejad et al. 2023 (arXiv 2305.19466, §6 / App. F) for comparability; it is never
  the default.
* :func:`head_distance` — JSD between two heads' patterns, averaged over query positions and
  examples.
* :func:`kazemnejad_distance` — model A vs model B: per layer, the minimum over head pairs; then
  the mean over layers (Kazemnejad et al. 2023, Fig. 4).
* :func:`match_heads` — one-to-one assignment of trained heads to compiled heads that minimises
  the total JSD (Hungarian algorithm, ``scipy.optimize.linear_sum_assignment``).
* :func:`relative_position_fit` — the best pattern whose logits depend only on the T5 bucket of
  (query - key) (Raffel et al. 2020, T5 relative attention bias), fitted by minimising the
  cross-entropy to the head's pattern (a convex problem in the 32 bucket logits), and its JSD.
* :func:`capture_trained` / :func:`capture_compiled` / :func:`probe` — capture patterns from
  models on the same token sequences and run all of the above.

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

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

__all__ = [
    "ProbingError", "jsd", "head_distance", "as_layer_list", "head_labels",
    "head_distance_matrix", "kazemnejad_distance", "KazemnejadDistance", "match_heads",
    "HeadMatching", "t5_bucket", "relative_position_fit", "RelativePositionFit",
    "pad_patterns", "capture_trained", "capture_compiled", "probe_sequences", "probe",
    "ProbeResult", "JSD_VARIANTS",
]

JSD_VARIANTS = ("standard", "kazemnejad")

#: Smoothing added to probabilities inside logarithms of the ``kazemnejad`` variant (whose
#: KL(M‖P) is infinite where P has zeros, as the paper's code smoothed them).
_EPS = 1e-10


class ProbingError(ValueError):
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
    """Jensen–Shannon divergence between distributions along ``axis`` (base 2).

    Args:
        p, q: arrays of probabilities of broadcastable shapes (e.g. ``[example, query, key]``);
            each slice along ``axis`` is one distribution. They are not renormalised.
        axis: the axis holding the distribution (the key axis of attention patterns).
        variant: ``"standard"`` (default): ½KL(P‖M) + ½KL(Q‖M) with M = ½(P + Q); bounded in
            [0, 1] bits (Lin 1991). ``"kazemnejad"``: ½[KL(M‖P) + KL(M‖Q)], the variant in the
            code of Kazemnejad et al. 2023; unbounded, zeros smoothed by 1e-10. Offered only for
            comparability with their numbers.

    Returns:
        The divergence per distribution: the input shape without ``axis``, in bits.

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
    ms = m + _EPS
    d = 0.5 * (_xlogy_ratio(ms, p + _EPS).sum(axis=axis) + _xlogy_ratio(ms, q + _EPS).sum(axis=axis))
    return np.maximum(d, 0.0)


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
            arr = _to_numpy(layer)
            if arr.ndim != 4:
                raise ProbingError(f"layer {i}: expected [example, head, query, key], got shape "
                                   f"{arr.shape}")
            out.append(arr)
        return out
    arr = _to_numpy(patterns)
    if arr.ndim != 5:
        raise ProbingError("expected patterns [example, layer, head, query, key] or a list of "
                           f"[example, head, query, key] per layer, got shape {arr.shape}")
    return [arr[:, i] for i in range(arr.shape[1])]


def _to_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
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
    """Model-vs-model distance of Kazemnejad et al. 2023 (Fig. 4).

    ``per_layer[l]`` = min over head pairs (h_a, h_b) of layer l of the head JSD;
    ``mean`` = mean of ``per_layer``; ``argmin[l]`` = the (h_a, h_b) achieving it.
    """

    per_layer: list[float]
    mean: float
    argmin: list[tuple[int, int]]
    variant: str = "standard"

    def to_dict(self) -> dict:
        return {"per_layer": [float(x) for x in self.per_layer], "mean": float(self.mean),
                "argmin": [list(x) for x in self.argmin], "variant": self.variant}


def kazemnejad_distance(patterns_a: Any, patterns_b: Any, variant: str = "standard",
                        first_query: int = 1) -> KazemnejadDistance:
    """Kazemnejad et al.'s layer-wise distance between two models of the same depth.

    Per layer, the minimum JSD over all (head of A, head of B) pairs of that layer; then the
    mean over layers. In the paper NoPE vs T5 gave 0.263 against 0.265 for NoPE vs NoPE with
    another seed (ALiBi 0.49, APE 0.72, Rotary 0.99).

    Args:
        patterns_a, patterns_b: the two models' patterns on the same inputs
            (``[example, layer, head, query, key]`` or lists per layer).

    Raises:
        ProbingError: different numbers of layers or different inputs.
    """
    la, lb = as_layer_list(patterns_a), as_layer_list(patterns_b)
    if len(la) != len(lb):
        raise ProbingError(f"models with {len(la)} and {len(lb)} layers cannot be compared "
                           "layer by layer")
    per_layer, argmin = [], []
    for a, b in zip(la, lb):
        if a.shape[1] == 0 or b.shape[1] == 0:          # a layer without attention
            continue
        _check_same_inputs(a[:, 0], b[:, 0])
        d = np.array([[head_distance(a[:, i], b[:, j], variant, first_query)
                       for j in range(b.shape[1])] for i in range(a.shape[1])])
        i, j = np.unravel_index(np.nanargmin(d), d.shape)
        per_layer.append(float(d[i, j]))
        argmin.append((int(i), int(j)))
    if not per_layer:
        raise ProbingError("the models have no attention heads to compare")
    return KazemnejadDistance(per_layer, float(np.mean(per_layer)), argmin, variant)


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

def t5_bucket(relative_position: Any, bidirectional: bool = False, num_buckets: int = 32,
              max_distance: int = 128) -> np.ndarray:
    """T5's relative-position bucket of ``query - key`` (Raffel et al. 2020, the T5 code).

    Unidirectional (decoder): distance n = max(query - key, 0); n < num_buckets/2 -> n, else
    num_buckets/2 + floor(log(n / (num_buckets/2)) / log(max_distance / (num_buckets/2)) *
    num_buckets/2), capped at num_buckets - 1. Bidirectional: half the buckets per direction
    (keys after the query get an offset of num_buckets/2).

    Returns:
        int array of the input's shape.
    """
    n = np.asarray(relative_position, dtype=np.int64)
    offset = np.zeros_like(n)
    if bidirectional:
        num_buckets //= 2
        offset = np.where(n < 0, num_buckets, 0)
        n = np.abs(n)
    else:
        n = np.maximum(n, 0)
    max_exact = num_buckets // 2
    with np.errstate(divide="ignore"):
        large = max_exact + (np.log(np.maximum(n, 1) / max_exact)
                             / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    large = np.minimum(large.astype(np.int64), num_buckets - 1)
    return offset + np.where(n < max_exact, n, large)


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
    from scipy.optimize import minimize

    p = _to_numpy(pattern)
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
# Capture
# --------------------------------------------------------------------------------------------

def pad_patterns(per_example: Sequence[list[np.ndarray]]) -> list[np.ndarray]:
    """Stack per-example patterns of different lengths into padded arrays.

    Args:
        per_example: for each example, a list over layers of ``[head, seq_e, seq_e]``.

    Returns:
        list over layers of ``[example, head, seq_max, seq_max]`` zero-padded.
    """
    if not per_example:
        raise ProbingError("no examples to stack")
    n_layers = len(per_example[0])
    seq = max(ex[0].shape[-1] for ex in per_example)
    out = []
    for l in range(n_layers):
        heads = per_example[0][l].shape[0]
        arr = np.zeros((len(per_example), heads, seq, seq))
        for i, ex in enumerate(per_example):
            n = ex[l].shape[-1]
            arr[i, :, :n, :n] = ex[l]
        out.append(arr)
    return out


def _group_by_length(sequences: Sequence[Sequence[int]]) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for i, s in enumerate(sequences):
        groups.setdefault(len(s), []).append(i)
    return groups


def capture_trained(model: Any, sequences: Sequence[Sequence[int]]) -> list[np.ndarray]:
    """Attention of a trained (or any contract-D) ``Transformer`` on token-id sequences.

    Args:
        model: a ``model.Transformer`` (``attention_patterns(tokens)`` returning
            a list over layers of ``[batch, head, query, key]``).
        sequences: token-id sequences (each starting with BOS), any lengths.

    Returns:
        list over layers of ``[example, head, seq_max, seq_max]`` (zero-padded).
    """
    import torch

    per_example: list = [None] * len(sequences)
    with torch.no_grad():
        for n, idx in _group_by_length(sequences).items():
            toks = torch.tensor([list(sequences[i]) for i in idx], dtype=torch.long)
            pats = [_to_numpy(x) for x in model.attention_patterns(toks)]
            for j, i in enumerate(idx):
                per_example[i] = [p[j] for p in pats]
    return pad_patterns(per_example)


def capture_compiled(compiled: Any, program_inputs: Sequence[Sequence[Any]]) -> list[np.ndarray]:
    """Attention of a compiled model (contract E) on program-token sequences.

    Args:
        compiled: a ``compiler.CompiledModel``; ``compiled.attention(inputs)`` returns
            ``[batch, layer, head, query, key]`` with BOS at position 0 included.
        program_inputs: the token values the program sees (without BOS), any lengths.

    Returns:
        list over layers of ``[example, head, seq_max, seq_max]`` (zero-padded; position 0 BOS).
    """
    per_example: list = [None] * len(program_inputs)
    heads = _compiled_heads_per_layer(compiled)
    for n, idx in _group_by_length(program_inputs).items():
        att = _to_numpy(compiled.attention([list(program_inputs[i]) for i in idx]))
        for j, i in enumerate(idx):
            # layers with fewer heads than the widest are zero-padded: keep the real heads
            per_example[i] = [att[j, l, :heads[l]] if heads is not None else att[j, l]
                              for l in range(att.shape[1])]
    return pad_patterns(per_example)


def _compiled_heads_per_layer(compiled: Any) -> list[int] | None:
    cfg = getattr(getattr(compiled, "model", None), "cfg", None)
    if cfg is not None and hasattr(cfg, "heads"):
        return [int(cfg.heads(l)) for l in range(cfg.n_layers)]
    stats = getattr(compiled, "stats", None) or {}
    hpl = stats.get("heads_per_layer")
    return [int(h) for h in hpl] if hpl else None


def probe_sequences(task: Any, lengths: Iterable[int], per_length: int = 4,
                    seed: int = 0) -> list[list[int]]:
    """Token-id sequences for probing: ``BOS prompt [SEP] answer`` without the final EOS.

    That is exactly what a decoder sees when it predicts every answer token (teacher forcing).
    Uses the task's seeded generator (contract C: ``task.sample(length, rng)``); lengths the
    task does not allow are skipped.
    """
    rng = np.random.default_rng(seed)
    seqs = []
    for n in lengths:
        if hasattr(task, "length_ok") and not task.length_ok(n):
            continue
        for _ in range(per_length):
            prompt, answer = task.sample(n, rng)
            full = list(prompt) + list(answer)
            seqs.append(full[:-1] if full and full[-1] == task.vocab.eos else full)
    if not seqs:
        raise ProbingError(f"task {getattr(task, 'name', task)!r} allows none of the lengths "
                           f"{list(lengths)}")
    return seqs


# --------------------------------------------------------------------------------------------
# The whole probe
# --------------------------------------------------------------------------------------------

@dataclass
class ProbeResult:
    """Everything the probe computes for one task.

    ``models``: label -> list over layers of ``[example, head, query, key]``;
    ``pairwise``: (label_a, label_b) -> :class:`KazemnejadDistance` for same-depth models;
    ``matchings``: label -> :class:`HeadMatching` against the compiled model (if any);
    ``relpos``: label -> list of ((layer, head), :class:`RelativePositionFit`).
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

    def to_dict(self) -> dict:
        return {
            "task": self.task, "variant": self.variant, "n_sequences": len(self.sequences),
            "sequence_lengths": sorted({len(s) for s in self.sequences}),
            "models": {k: [int(a.shape[1]) for a in v] for k, v in self.models.items()},
            "compiled": self.compiled_label,
            "pairwise": [{"a": a, "b": b, **d.to_dict()} for (a, b), d in self.pairwise.items()],
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
        trained: label (e.g. ``"nope/seed0"``) -> patterns of a trained model.
        compiled: patterns of the compiled reference on the same sequences, or None.
        variant: JSD variant (default standard).
        reference: the label every other trained model is compared to with
            :func:`kazemnejad_distance` (default: the first label starting with ``"nope"``, as in
            the paper); all same-depth pairs with the reference are computed.
        relpos: also fit a relative-position pattern to every trained head.

    Returns:
        :class:`ProbeResult`.
    """
    models = dict(trained)
    res = ProbeResult(task_name, sequences, models, variant=variant)
    labels = list(trained)
    if reference is None:
        reference = next((l for l in labels if l.startswith("nope")), labels[0] if labels else None)
    if reference is not None:
        for other in labels:
            if other == reference:
                continue
            try:
                res.pairwise[(reference, other)] = kazemnejad_distance(
                    trained[reference], trained[other], variant)
            except ProbingError as e:
                res.notes.append(f"{reference} vs {other}: {e}")
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
