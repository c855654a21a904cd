"""Length-generalization evaluation: batched greedy decoding and exact match per length.

Protocol (Kazemnejad et al. 2023; Zhou et al. 2023): for each input length, sample prompts from
the task generator with a fixed evaluation seed (the same test set for every positional encoding
and training seed), decode greedily from the prompt, and count an example as correct when the
whole generated answer (up to and including EOS) equals the reference answer. Lengths up to the
training maximum are in distribution ("id"), longer ones out of distribution ("ood"). Each length
reports the number of samples and a Wilson 95% confidence interval of the exact match.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from rasp_model import ContextLengthError, Transformer
from rasp.decode import greedy_decode as rasp_greedy_decode
from tasks import LengthResult

EVAL_SEED = 20231016
"""Base seed of the evaluation sets (shared by all runs so that PEs see the same inputs)."""


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for ``k`` successes out of ``n`` (E. B. Wilson 1927).

    Uses ``scipy.stats.binomtest(...).proportion_ci(method="wilson")``. Raises ValueError for
    ``n < 1`` or ``k`` outside ``0..n``.
    """
    from scipy.stats import binomtest
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


@torch.no_grad()
def greedy_decode(model: Transformer, prompts: list[list[int]], max_new_tokens: int, eos: int,
                  batch_size: int = 256, pos_offset: int = 0) -> list[list[int]]:
    """Greedy next-token decoding of a trained model from each prompt, batched.

    The loop is the one greedy decoder (:func:`rasp.decode.greedy_decode`): prompts of equal
    length share a batch (the model is causal, so no padding is needed); a sequence stops at
    its first ``eos`` (included in the output) or after ``max_new_tokens``; an ``ape_learned``
    model stops where it would need positions beyond its ``n_ctx`` (answer incomplete).

    Args:
        model: a trained :class:`~rasp_model.Transformer` (restored to its
            train/eval mode afterwards).
        prompts: token-id lists.
        pos_offset: position of the first token (random-offset protocols evaluate at 0).

    Returns:
        the generated tokens per prompt (without the prompt).
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    limit = model.cfg.n_ctx - pos_offset if model.cfg.pe == "ape_learned" else None

    def next_ids(ids: np.ndarray) -> np.ndarray:
        seq = torch.from_numpy(ids).to(device)
        return model(seq, pos_offset=pos_offset or None)[:, -1].argmax(-1).cpu().numpy()

    try:
        return rasp_greedy_decode(next_ids, prompts, max_new_tokens, eos, max_seq_len=limit,
                                  batch_size=batch_size)
    finally:
        model.train(was_training)


def eval_lengths(task, train_max_len: int, train_min_len: int = 1, max_factor: float = 2.0,
                 stride: int = 1) -> list[tuple[int, str]]:
    """The evaluated ``(length, split)`` pairs: ID lengths ``train_min_len..train_max_len``,
    OOD lengths up to ``max_factor * train_max_len`` (bounded by ``task.max_length``), every
    ``stride``-th length (the training maximum and the largest OOD length always included);
    only lengths the task accepts (``task.length_ok``)."""
    top = int(math.floor(max_factor * train_max_len))
    if task.max_length is not None:
        top = min(top, task.max_length)
    lo = max(train_min_len, task.min_length or 1)
    pairs = []
    for n in range(lo, top + 1):
        keep = (n - lo) % stride == 0 or n in (train_max_len, top)
        if keep and task.length_ok(n):
            pairs.append((n, "id" if n <= train_max_len else "ood"))
    return pairs


def eval_set(task, length: int, samples: int, seed: int = EVAL_SEED):
    """``samples`` (prompt, answer) pairs of ``length`` from the task generator, seeded by
    ``(seed, length)`` so every run sees the same evaluation inputs."""
    rng = np.random.default_rng([seed, length])
    return [task.sample(length, rng) for _ in range(samples)]


def evaluate(model: Transformer, task, lengths: list[tuple[int, str]], samples: int = 100,
             batch_size: int = 256, seed: int = EVAL_SEED, progress: bool = False,
             max_answer_slack: int = 2) -> list[LengthResult]:
    """Exact match of greedy decoding per length (see module docstring).

    ``lengths``: ``(length, split)`` pairs, e.g. from :func:`eval_lengths`. Returns one
    :class:`LengthResult` per length. An ``ape_learned`` model asked for positions past its
    ``n_ctx`` gets ``em=None`` with a note instead of an exception.
    """
    def decode(prompts, max_new):
        return [greedy_decode(model, prompts, max_new, task.vocab.eos, batch_size)]
    return evaluate_with(decode, model.cfg, 1, task, lengths, samples, seed, progress,
                         max_answer_slack)[0]


def evaluate_with(decode, cfg, members: int, task, lengths: list[tuple[int, str]],
                  samples: int = 100, seed: int = EVAL_SEED, progress: bool = False,
                  max_answer_slack: int = 2) -> list[list[LengthResult]]:
    """:func:`evaluate` of ``members`` models of one config ``cfg`` at once:
    ``decode(prompts, max_new_tokens)`` returns the generated ids ``[member][prompt]`` (one
    member: :func:`greedy_decode`; a stack: :func:`analysis.training.stacked.greedy_decode_stacked`).
    Returns ``[member][length]`` results."""
    from tqdm.auto import tqdm

    results: list[list[LengthResult]] = [[] for _ in range(members)]
    it = tqdm(lengths, desc="eval", leave=False, disable=None if progress else True)
    for length, split in it:
        data = eval_set(task, length, samples, seed)
        prompts = [p for p, _ in data]
        longest = max(len(p) + len(a) for p, a in data)
        n_ctx = cfg.n_ctx
        if cfg.pe == "ape_learned" and longest - 1 > n_ctx:
            for r in results:
                r.append(LengthResult(
                    length, len(data), None, split,
                    note=f"ape_learned has {n_ctx} learned positions; sequences of length "
                         f"{length} need {longest - 1}: not evaluated"))
            continue
        max_new = max(len(a) for _, a in data) + max_answer_slack
        try:
            gens = decode(prompts, max_new)
        except ContextLengthError as e:
            for r in results:
                r.append(LengthResult(length, len(data), None, split, note=str(e)))
            continue
        for r, gen in zip(results, gens):
            k = sum(g == list(a) for g, (_, a) in zip(gen, data))
            lo, hi = wilson_interval(k, len(data))
            r.append(LengthResult(length, len(data), k, split, lo, hi))
        it.set_postfix(length=length, em=f"{results[0][-1].correct / len(data):.2f}")
    return results


def summarize(results) -> dict:
    """Mean exact match over ID and OOD lengths (lengths with em=None are skipped):
    ``{"id_em": float|None, "ood_em": float|None}``."""
    out = {}
    for split in ("id", "ood"):
        vals = [r["em"] if isinstance(r, dict) else r.em for r in results
                if (r["split"] if isinstance(r, dict) else r.split) == split]
        vals = [v for v in vals if v is not None]
        out[f"{split}_em"] = float(np.mean(vals)) if vals else None
    return out
