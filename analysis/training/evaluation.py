"""Length-generalization evaluation: batched greedy decoding and exact match per length.

Protocol (Kazemnejad et al. 2023; Zhou et al. 2023): for each input length, sample prompts from
the task generator with a fixed evaluation seed (the same test set for every positional encoding
and training seed), decode greedily from the prompt, and count an example as correct when the
whole generated answer (up to and including EOS) equals the reference answer. Next-set tasks
(Huang et al. 2025's formal languages, ``task.kind == "next_set"``) are not decoded: one forward
pass labels every string position (argmax), and an example is correct when every position's
label equals its reference (:func:`label_positions`). Lengths up to the
training maximum are in distribution ("id"), longer ones out of distribution ("ood"). Each length
reports the number of samples and a Wilson 95% confidence interval of the exact match.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from rasp_model import ContextLengthError, Transformer
from rasp.decode import greedy_decode as rasp_greedy_decode
from rasp.repl.progress import progress_bar
from tasks import LengthResult, inputs_targets
from tasks.base import drawn_lengths

EVAL_SEED = 20231016
"""Base seed of the evaluation sets (shared by all runs so that PEs see the same inputs)."""


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for ``k`` successes out of ``n`` (E. B. Wilson 1927).

    Uses ``scipy.stats.binomtest(...).proportion_ci(method="wilson")``. Raises ValueError for
    ``n < 1`` or ``k`` outside ``0..n``.
    """
    from scipy.stats import binomtest   # start-up: scipy.stats costs ~0.3 s; only intervals use it
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
    top = model.cfg.encoding.max_positions(model.cfg)      # a learned APE's n_ctx, else None
    limit = None if top is None else top - pos_offset

    def next_ids(ids: np.ndarray) -> np.ndarray:
        seq = torch.from_numpy(ids).to(device)
        return model(seq, pos_offset=pos_offset or None)[:, -1].argmax(-1).cpu().numpy()

    try:
        return rasp_greedy_decode(next_ids, prompts, max_new_tokens, eos, max_seq_len=limit,
                                  batch_size=batch_size)
    finally:
        model.train(was_training)


@torch.no_grad()
def label_positions(logits_of, prompts: list[list[int]], batch_size: int = 256
                    ) -> list[list[list[int]]]:
    """The per-position labels of next-set tasks (``task.kind == "next_set"``): one forward
    pass per group of equal-length prompts, the argmax at every string position.

    Args:
        logits_of: maps input ids ``[batch, seq]`` (NumPy int64) to logits
            ``[member, batch, seq, d_vocab]`` (one member for a single model).
        prompts: ``BOS w_1 .. w_n`` token-id lists.

    Returns:
        ``[member][prompt]`` the argmax ids at positions ``1 .. n`` (one label per symbol), as
        Huang et al. score them (``formal_lang_suite/train_with_ce.py:122-129``: argmax per
        position, an example correct when all positions are).
    """
    by_len: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        by_len.setdefault(len(p), []).append(i)
    out: list[list] = []
    for _, idx in sorted(by_len.items()):
        for s in range(0, len(idx), batch_size):
            chunk = idx[s:s + batch_size]
            ids = np.asarray([prompts[i] for i in chunk], dtype=np.int64)
            pred = logits_of(ids).argmax(-1)[:, :, 1:].cpu().numpy()    # [member, batch, n]
            if not out:
                out = [[None] * len(prompts) for _ in range(pred.shape[0])]
            for m in range(pred.shape[0]):
                for j, i in enumerate(chunk):
                    out[m][i] = pred[m, j].tolist()
    return out


@torch.no_grad()
def predict_labels(model: Transformer, prompts: list[list[int]], batch_size: int = 256,
                   pos_offset: int = 0) -> list[list[int]]:
    """:func:`label_positions` of one trained model: per prompt, the argmax label ids at its
    string positions (the model restored to its train/eval mode afterwards)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    try:
        out = label_positions(lambda ids: model(torch.from_numpy(ids).to(device),
                                                pos_offset=pos_offset or None)[None],
                              prompts, batch_size)
        return out[0] if out else []
    finally:
        model.train(was_training)


def model_answers(model: Transformer, task, prompts: list[list[int]], max_new_tokens: int,
                  batch_size: int = 256) -> list[list[int]]:
    """A trained model's answers to ``prompts``, compared with ``task``'s answers for exact
    match: greedy decoding (:func:`greedy_decode`) for next-token tasks, the per-position
    labels (:func:`predict_labels`) for next-set tasks."""
    if task.kind == "next_set":
        return predict_labels(model, prompts, batch_size)
    return greedy_decode(model, prompts, max_new_tokens, task.vocab.eos, batch_size)


def eval_lengths(task, train_max_len: int, train_min_len: int = 1, max_factor: float = 2.0,
                 stride: int = 1) -> list[tuple[int, str]]:
    """The evaluated ``(length, split)`` pairs: ID lengths ``train_min_len..train_max_len``,
    OOD lengths up to ``max_factor * train_max_len`` (bounded by ``task.max_length``); only
    lengths the task accepts (``task.length_ok``), and of those every ``stride``-th (counted
    over the accepted lengths, so a task with even lengths only, e.g. a Dyck language, keeps
    every other even length), the longest accepted training length and the largest OOD length
    always included."""
    top = int(math.floor(max_factor * train_max_len))
    if task.max_length is not None:
        top = min(top, task.max_length)
    valid = [n for n in range(max(0, train_min_len), top + 1) if task.length_ok(n)]
    last_id = max((n for n in valid if n <= train_max_len), default=None)
    return [(n, "id" if n <= train_max_len else "ood") for i, n in enumerate(valid)
            if i % stride == 0 or n in (last_id, top)]


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
    :class:`LengthResult` per length. A model asked for positions past its encoding's
    ``max_positions`` (a learned APE's ``n_ctx``) gets ``em=None`` with a note instead of an
    exception.
    """
    def decode(prompts, max_new):
        return [model_answers(model, task, prompts, max_new, batch_size)]
    return evaluate_with(decode, model.cfg, 1, task, lengths, samples, seed, progress,
                         max_answer_slack)[0]


def evaluate_with(decode, cfg, members: int, task, lengths: list[tuple[int, str]],
                  samples: int = 100, seed: int = EVAL_SEED, progress: bool = False,
                  max_answer_slack: int = 2) -> list[list[LengthResult]]:
    """:func:`evaluate` of ``members`` models of one config ``cfg`` at once:
    ``decode(prompts, max_new_tokens)`` returns the generated ids ``[member][prompt]`` (one
    member: :func:`greedy_decode`; a stack: :func:`analysis.training.stacked.greedy_decode_stacked`).
    Returns ``[member][length]`` results."""
    results: list[list[LengthResult]] = [[] for _ in range(members)]
    it = progress_bar(lengths, show=progress, desc="eval", leave=False)
    for length, split in it:
        data = eval_set(task, length, samples, seed)
        prompts = [p for p, _ in data]
        longest = max(len(inputs_targets(task, p, a)[0]) for p, a in data)   # input positions
        n_ctx = cfg.encoding.max_positions(cfg)               # a learned APE's n_ctx
        if n_ctx is not None and longest > n_ctx:
            for r in results:
                r.append(LengthResult(
                    length, len(data), None, split,
                    note=f"{cfg.pe} has {n_ctx} learned positions; sequences of length "
                         f"{length} need {longest}: not evaluated"))
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


def bin_set(task, lo: int, hi: int, samples: int, seed: int = EVAL_SEED) -> list:
    """``samples`` (prompt, answer) pairs whose lengths are uniform over the lengths of the bin
    ``lo..hi`` that the task accepts (Huang et al. 2025, ``algorithmic/
    language_modeling_train.py``: ``EvalDataset`` over a dataset with ``length_range`` = the bin,
    ``random.randint(max(1, lo), hi)`` per example; parity from ``lo`` itself, interleave by
    its rounding: :meth:`tasks.base.Task.drawn_lengths`), seeded by ``(seed, lo, hi)`` so every
    run sees the same examples. Raises ValueError when the task has no length in the bin."""
    valid = drawn_lengths(task, lo, hi)
    if not valid:
        raise ValueError(f"task {task.name!r} has no valid length in {lo}..{hi}")
    rng = np.random.default_rng([seed, lo, hi, 3])
    ns = rng.choice(np.asarray(valid), size=samples)
    return [task.sample(int(n), rng) for n in ns]


@torch.no_grad()
def teacher_forced_em(model: Transformer, task, data: list, batch_size: int = 256) -> tuple:
    """``(correct, n)``: how many (prompt, answer) pairs of ``data`` have every answer position
    right under teacher forcing (the argmax of one forward pass over prompt + answer, at every
    scored target of :func:`tasks.inputs_targets`; Huang et al.'s ``compute_metrics``). For a
    greedy decoder this equals the exact match of greedy decoding: if every teacher-forced
    prediction is right, decoding reproduces the answer token by token, and the first wrong
    teacher-forced prediction is the first wrong decoded token. ``correct`` is None when an
    ``ape_learned`` model lacks the positions (nothing is evaluated then)."""
    was_training = model.training
    model.eval()
    try:
        return teacher_forced_em_with(lambda x: model(x)[None], model.cfg, 1, task, data,
                                      batch_size, next(model.parameters()).device)[0]
    finally:
        model.train(was_training)


@torch.no_grad()
def teacher_forced_em_with(logits_of, cfg, members: int, task, data: list,
                           batch_size: int = 256, device="cpu") -> list[tuple]:
    """:func:`teacher_forced_em` of ``members`` models of one config ``cfg`` at once:
    ``logits_of(ids)`` maps input ids ``[batch, seq]`` (LongTensor on ``device``) to logits
    ``[member, batch, seq, d_vocab_out]`` (the models in eval mode). Returns ``(correct, n)``
    per member."""
    rows = [inputs_targets(task, p, a) for p, a in data]
    top = cfg.encoding.max_positions(cfg)
    if top is not None and max(len(x) for x, _, _ in rows) > top:
        return [(None, len(rows))] * members
    correct = np.zeros(members, dtype=np.int64)
    by_len: dict[int, list[int]] = {}
    for i, (x, _, _) in enumerate(rows):
        by_len.setdefault(len(x), []).append(i)
    for idx_all in by_len.values():       # equal lengths share a batch: no padding
        for at in range(0, len(idx_all), batch_size):
            idx = idx_all[at:at + batch_size]
            x = torch.tensor([rows[i][0] for i in idx], dtype=torch.long, device=device)
            y = np.asarray([rows[i][1] for i in idx])
            first = np.asarray([rows[i][2] for i in idx])
            pred = logits_of(x).argmax(-1).cpu().numpy()           # [member, batch, seq]
            scored = np.arange(y.shape[1])[None, :] >= first[:, None]
            correct += ((pred == y[None]) | ~scored[None]).all(axis=2).sum(axis=1)
    return [(int(k), len(rows)) for k in correct]


def evaluate_bins(model: Transformer, task, bins, samples: int = 2000, batch_size: int = 256,
                  seed: int = EVAL_SEED) -> list[dict]:
    """Exact match per length bin (Huang et al. 2025's bins; :func:`bin_set`,
    :func:`teacher_forced_em`): one row per bin ``{"bin": [lo, hi], "split": "id" (the first
    bin) | "ood", "n", "correct", "em", "ci_low", "ci_high"}`` with a Wilson 95% interval;
    ``em`` None (and a ``note``) where an ``ape_learned`` model lacks the positions."""
    out = []
    for i, (lo, hi) in enumerate(bins):
        k, n = teacher_forced_em(model, task, bin_set(task, lo, hi, samples, seed), batch_size)
        row = {"bin": [int(lo), int(hi)], "split": "id" if i == 0 else "ood", "n": n,
               "correct": k, "em": None if k is None else k / n, "ci_low": None,
               "ci_high": None}
        if k is None:
            row["note"] = (f"{model.cfg.pe} has {model.cfg.encoding.max_positions(model.cfg)} "
                           f"positions: not evaluated")
        else:
            row["ci_low"], row["ci_high"] = wilson_interval(k, n)
        out.append(row)
    return out


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
