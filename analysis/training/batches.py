"""Training batches without padding waste, and the position-offset protocol.

One training step draws ``batch_size`` examples ``prompt + answer`` from the task generator
(lengths uniform over the training range, seeded by ``(seed, step)``). Padding them all to the
longest one wastes compute: on lengths 1..10 of ``sort_unique`` about 40% of the tokens of a
padded batch are padding. :func:`make_step` offers three layouts (setting ``batching``):

* ``"packed"`` (default) — examples are packed into rows as long as the longest example
  (first-fit decreasing), each row a concatenation of whole examples; ``segment_ids`` keep a
  token from attending to another example and per-token positions restart at each example (plus
  its offset), so each example is computed exactly as if alone. One forward pass, ~40% fewer
  rows. (Relative encodings read ``query - key`` index differences, which inside one example
  equal the position differences.)
* ``"bucketed"`` — examples sorted by length and split into at most ``length_buckets`` groups
  that minimise the padded token count (exact dynamic programming), one forward pass per group.
  On a CPU the per-pass overhead of a small model outweighs the saved padding (measured in
  ``bench/bench_batches.py``).
* ``"padded"`` — one batch padded to the longest example (the former behaviour).

What the model reads and predicts for one example is the task's
(:func:`tasks.inputs_targets`): next-token tasks predict the next token of ``prompt +
answer`` on the answer; next-set tasks (Huang et al.'s formal languages) predict one label per
string position of the prompt, a class token that names the set of allowed next characters
(cross-entropy over the vocabulary as their ``formal_lang_suite/train_with_ce.py:97-130, 216``).

In every layout the loss of the step is the sum of the answer-token cross-entropies divided by
the number of answer tokens of the whole batch, so the gradient is that of the padded batch (right
padding never reaches a real token under the causal mask; every layer is per-token or causal) —
only the padding's compute is gone (tested).

Position-offset protocol (recorded with every run, ``position_offsets``):

* ``"none"`` — positions 0..n-1 (Kazemnejad et al. 2023): learned absolute position rows past the
  longest training sequence never get a gradient.
* ``"random"`` — Zhou et al. 2023 / Huang et al. 2025 (``lacoco-lab/length_generalization``,
  ``algorithmic/language_modeling_train.py``: ``offset = random.randint(0, max_test_length -
  length)``; ``pos_ids = range(offset, len + offset)``): every training example is shifted by an
  offset drawn uniformly so that it still fits the model's ``n_ctx`` positions, so every position
  row is trained; offset 0 at test time.

Real tokens (the non-padding inputs) are what tokens/s counts.

A stack of M runs (:mod:`analysis.training.stacked`) trains on :func:`stack_micro_batches`:
the members' own micro-batches (each exactly its separate run's) written into one
``[member, rows, cols]`` array, optionally padded up to a fixed set of shapes
(:func:`static_shape`, so that a CUDA graph captured per shape is replayed), in pinned memory on
CUDA; :class:`BatchProducer` makes the next steps' batches in a background thread while the
device trains on the current one.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from tasks import inputs_targets

__all__ = ["OFFSET_PROTOCOLS", "BATCHINGS", "MicroBatch", "Step", "sample_examples",
           "fixed_train_set", "epoch_batch",
           "bucket_groups", "pack_rows", "make_step", "step_loss", "teacher_forced_accuracy",
           "stack_micro_batches", "static_shape", "BatchProducer"]

#: Position-offset protocols (see the module docstring).
OFFSET_PROTOCOLS = ("none", "random")

#: Batch layouts (see the module docstring).
BATCHINGS = ("packed", "bucketed", "padded")


@dataclass
class MicroBatch:
    """One forward pass: ``inputs``/``targets`` ``[batch, seq]`` LongTensor (targets = inputs
    shifted by one for next-token tasks, the per-position labels for next-set tasks:
    :func:`tasks.inputs_targets`), ``mask`` ``[batch, seq]`` float (1 on the scored
    targets: the answer tokens, EOS included, or every string position's label),
    ``offsets`` position offsets, ``[batch]`` or per token ``[batch, seq]`` LongTensor, or None;
    ``segment_ids`` ``[batch, seq]`` LongTensor for packed rows (-1 = padding) or None."""

    inputs: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor
    offsets: torch.Tensor | None
    segment_ids: torch.Tensor | None = None

    def to(self, device) -> "MicroBatch":
        def mv(t):
            return None if t is None else t.to(device)
        return MicroBatch(self.inputs.to(device), self.targets.to(device), self.mask.to(device),
                          mv(self.offsets), mv(self.segment_ids))


@dataclass
class Step:
    """The micro-batches of one optimizer step and its token counts.

    ``real_tokens``: input tokens that are not padding; ``padded_tokens``: input tokens
    including padding (what the forward passes process); ``answer_tokens``: loss targets."""

    micro: list[MicroBatch]
    real_tokens: int
    padded_tokens: int
    answer_tokens: int


def sample_examples(task, lengths, batch_size: int, rng: np.random.Generator
                    ) -> list[tuple[list[int], list[int]]]:
    """``batch_size`` (prompt, answer) pairs, lengths uniform over ``lengths`` (seeded ``rng``)."""
    ns = rng.choice(np.asarray(lengths), size=batch_size)
    return [tuple(map(list, task.sample(int(n), rng))) for n in ns]


def fixed_train_set(task, lengths, size: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """A fixed training set of ``size`` (prompt, answer) pairs, lengths uniform over
    ``lengths``, drawn once from ``numpy.random.default_rng([seed, 3])`` (setting
    ``train_set``: the same set for every run and run seed, as Huang et al.'s formal languages
    train every configuration on one released ``train_src.txt``)."""
    return sample_examples(task, lengths, size, np.random.default_rng([int(seed), 3]))


def epoch_batch(train_set: list, step: int, batch_size: int) -> list:
    """The examples of optimizer step ``step`` (0-based) when a fixed ``train_set`` is read in
    order, ``batch_size`` at a time, epoch after epoch; the last batch of an epoch holds the
    rest (PyTorch's ``DataLoader(dataset, batch_size)`` without shuffling, as their
    ``formal_lang_suite/dataset_utils.py:213``). ``[]`` only for an empty set."""
    if not train_set:
        return []
    per_epoch = -(-len(train_set) // batch_size)
    b = step % per_epoch
    return train_set[b * batch_size:(b + 1) * batch_size]


def bucket_groups(seq_lengths, max_groups: int) -> list[list[int]]:
    """Split examples into at most ``max_groups`` groups of similar length, padding least.

    Sorts by length and chooses the cut points of the sorted order that minimise
    ``sum(group size * longest in group)`` (exact dynamic programming, O(groups * n^2)).

    Args:
        seq_lengths: length of each example.
        max_groups: at most this many groups (>= 1); fewer when there are fewer distinct lengths.

    Returns:
        lists of example indices, shortest group first.

    Raises:
        ValueError: ``max_groups < 1``.
    """
    if max_groups < 1:
        raise ValueError(f"length_buckets must be >= 1, got {max_groups}")
    order = sorted(range(len(seq_lengths)), key=lambda i: (seq_lengths[i], i))
    ls = [int(seq_lengths[i]) for i in order]
    n = len(ls)
    if n == 0:
        return []
    g_max = min(max_groups, len(set(ls)))
    inf = float("inf")
    # cost[g][j]: least padded tokens of the first j sorted examples in g groups
    cost = [[inf] * (n + 1) for _ in range(g_max + 1)]
    cut = [[0] * (n + 1) for _ in range(g_max + 1)]
    cost[0][0] = 0
    for g in range(1, g_max + 1):
        for j in range(1, n + 1):
            for i in range(g - 1, j):          # last group = sorted[i:j], longest = ls[j-1]
                c = cost[g - 1][i] + (j - i) * ls[j - 1]
                if c < cost[g][j]:
                    cost[g][j], cut[g][j] = c, i
    g = min(range(1, g_max + 1), key=lambda k: (cost[k][n], k))
    groups, j = [], n
    while g > 0:
        i = cut[g][j]
        groups.append(order[i:j])
        j, g = i, g - 1
    return groups[::-1]


def pack_rows(sizes, capacity: int) -> list[list[int]]:
    """First-fit-decreasing packing of items of ``sizes`` into rows of ``capacity``.

    Returns lists of item indices per row (items of a row in placement order).

    Raises:
        ValueError: an item larger than ``capacity``.
    """
    rows: list[list[int]] = []
    free: list[int] = []
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        if sizes[i] > capacity:
            raise ValueError(f"an item of size {sizes[i]} does not fit rows of {capacity}")
        for r, f in enumerate(free):
            if sizes[i] <= f:
                rows[r].append(i)
                free[r] -= sizes[i]
                break
        else:
            rows.append([i])
            free.append(capacity - sizes[i])
    return rows


def make_step(task, lengths, batch_size: int, rng: np.random.Generator, n_ctx: int,
              position_offsets: str = "none", batching: str = "packed",
              length_buckets: int = 4, examples: list | None = None,
              offset_range: int | None = None) -> Step:
    """The micro-batches of one training step.

    Args:
        task: a generalization task (``sample``, ``vocab.pad``/``vocab.eos``).
        lengths: the training lengths (drawn uniformly).
        batch_size: examples per step.
        rng: the step's generator (``numpy.random.default_rng([seed, step, 1])``); the examples
            and offsets depend only on it, not on the layout.
        n_ctx: the model's positions; ``"random"`` offsets keep every example inside them.
        position_offsets: ``"none"`` or ``"random"`` (:data:`OFFSET_PROTOCOLS`).
        batching: ``"packed"``, ``"bucketed"`` or ``"padded"`` (:data:`BATCHINGS`).
        length_buckets: at most this many forward passes per step with ``"bucketed"``.
        examples: the step's (prompt, answer) pairs (a fixed training set,
            :func:`epoch_batch`) instead of ``batch_size`` drawn from ``rng``; ``rng`` then
            draws only the offsets.
        offset_range: ``"random"`` offsets uniform in ``[0, offset_range)`` for every example
            (Huang et al.'s formal languages) instead of ``[0, n_ctx - len]``.

    Returns:
        :class:`Step`.

    Raises:
        ValueError: an unknown protocol or layout, ``length_buckets < 1``, an example longer
            than ``n_ctx`` positions, or one that an offset below ``offset_range`` would push
            past them.
    """
    if position_offsets not in OFFSET_PROTOCOLS:
        raise ValueError(f"position_offsets must be one of {OFFSET_PROTOCOLS}, got "
                         f"{position_offsets!r}")
    if batching not in BATCHINGS:
        raise ValueError(f"batching must be one of {BATCHINGS}, got {batching!r}")
    if examples is None:
        examples = sample_examples(task, lengths, batch_size, rng)
    batch_size = len(examples)
    rows_io = [inputs_targets(task, p, a) for p, a in examples]   # (inputs, targets, first)
    n_in = [len(i) for i, _, _ in rows_io]         # input positions of each example
    if max(n_in) > n_ctx:
        raise ValueError(f"a training example needs {max(n_in)} positions, the model has "
                         f"{n_ctx}")
    offsets = np.zeros(batch_size, dtype=np.int64)
    if position_offsets == "random" and offset_range is not None:
        if offset_range - 1 + max(n_in) > n_ctx:
            raise ValueError(f"an offset below {offset_range} pushes a training example of "
                             f"{max(n_in)} positions past the model's {n_ctx}")
        offsets = rng.integers(0, offset_range, size=batch_size, dtype=np.int64)
    elif position_offsets == "random":
        room = np.array([n_ctx - k for k in n_in])  # offsets 0..room keep it inside n_ctx
        offsets = (rng.random(batch_size) * (room + 1)).astype(np.int64)
    pad = task.vocab.pad if task.vocab.pad is not None else task.vocab.eos
    answer = int(sum(k - first for k, (_, _, first) in zip(n_in, rows_io)))
    if batching == "packed":
        cap = max(n_in)
        rows = pack_rows(n_in, cap)
        inp = np.full((len(rows), cap), pad, dtype=np.int64)
        tgt = np.full((len(rows), cap), pad, dtype=np.int64)
        mask = np.zeros((len(rows), cap), dtype=np.float32)
        seg = np.full((len(rows), cap), -1, dtype=np.int64)
        pos = np.zeros((len(rows), cap), dtype=np.int64)
        for r, items in enumerate(rows):
            at = 0
            for j, i in enumerate(items):
                (x, y, first), k = rows_io[i], n_in[i]
                inp[r, at:at + k] = x
                tgt[r, at:at + k] = y
                mask[r, at + first: at + k] = 1.0
                seg[r, at:at + k] = j
                pos[r, at:at + k] = offsets[i] + np.arange(k) - np.arange(at, at + k)
                at += k
        mb = MicroBatch(torch.from_numpy(inp), torch.from_numpy(tgt), torch.from_numpy(mask),
                        torch.from_numpy(pos), torch.from_numpy(seg))
        return Step([mb], int(sum(n_in)), len(rows) * cap, answer)
    groups = ([list(range(batch_size))] if batching == "padded"
              else bucket_groups([k + 1 for k in n_in], length_buckets))
    micro = []
    padded = 0
    for idx in groups:
        width = max(n_in[i] for i in idx)
        inp = np.full((len(idx), width), pad, dtype=np.int64)
        tgt = np.full((len(idx), width), pad, dtype=np.int64)
        mask = np.zeros((len(idx), width), dtype=np.float32)
        for r, i in enumerate(idx):
            (x, y, first), k = rows_io[i], n_in[i]
            inp[r, :k], tgt[r, :k] = x, y
            mask[r, first:k] = 1.0
        off = None
        if position_offsets == "random":     # per token: padding keeps position index < n_ctx
            o = np.zeros((len(idx), width), dtype=np.int64)
            for r, i in enumerate(idx):
                o[r, :n_in[i]] = offsets[i]
            off = torch.from_numpy(o)
        micro.append(MicroBatch(torch.from_numpy(inp), torch.from_numpy(tgt),
                                torch.from_numpy(mask), off))
        padded += len(idx) * width
    return Step(micro, int(sum(n_in)), padded, answer)


def step_loss(model, step: Step, device=None) -> tuple[torch.Tensor, list]:
    """Forward every micro-batch; the mean cross-entropy over the step's answer tokens.

    Returns ``(loss, outputs)`` where ``outputs`` lists ``(logits, micro_batch)`` per group (for
    token accuracy and teacher-forced exact match). The loss equals that of the padded batch.
    """
    total = None
    outs = []
    for mb in step.micro:
        if device is not None:
            mb = mb.to(device)
        logits = model(mb.inputs, pos_offset=mb.offsets, segment_ids=mb.segment_ids)
        ce = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), mb.targets.reshape(-1), reduction="none")
        s = (ce * mb.mask.reshape(-1)).sum()
        total = s if total is None else total + s
        outs.append((logits, mb))
    return total / float(step.answer_tokens), outs


@torch.no_grad()
def teacher_forced_accuracy(outputs: list) -> tuple[float, float]:
    """(token accuracy, teacher-forced exact match) of :func:`step_loss`'s ``outputs``.

    Token accuracy: the share of answer-token targets predicted (argmax) correctly; exact
    match: the share of examples whose every answer token is correct (an example is a row, or a
    segment of a packed row)."""
    hits = total = 0.0
    wrong_per_example: list[np.ndarray] = []
    for logits, mb in outputs:
        hit = (logits.argmax(-1) == mb.targets.to(logits.device)).float().cpu()
        mask = mb.mask.cpu()
        hits += float((hit * mask).sum())
        total += float(mask.sum())
        wrong = ((1 - hit) * mask).numpy()
        ex = np.broadcast_to(np.arange(mask.shape[0])[:, None] * (mask.shape[1] + 1),
                             mask.shape).copy()
        if mb.segment_ids is not None:
            ex += mb.segment_ids.cpu().numpy() + 1
        keys = ex[mask.numpy() > 0]
        uniq, inv = np.unique(keys, return_inverse=True)
        wrong_per_example.append(np.bincount(inv, weights=wrong[mask.numpy() > 0],
                                             minlength=len(uniq)))
    counts = np.concatenate(wrong_per_example) if wrong_per_example else np.zeros(0)
    return (hits / total if total else 0.0,
            float((counts == 0).mean()) if len(counts) else 0.0)


def static_shape(rows: int, cols: int, max_rows: int, max_cols: int) -> tuple[int, int]:
    """The fixed shape a ``[rows, cols]`` batch is padded up to: each side rounded up to the
    next of 8, 12, 16, 24, 32, 48, ... (a factor of at most 1.5 of padding; ~2 shapes per
    doubling), capped at ``max_rows`` / ``max_cols`` (never below ``rows`` / ``cols``)."""
    def up(n: int, cap: int) -> int:
        k = 8
        while True:
            for size in (k, k * 3 // 2):
                if size >= n:
                    return max(n, min(size, cap))
            k *= 2
    return up(int(rows), int(max_rows)), up(int(cols), int(max_cols))


def stack_micro_batches(mbs, pad: int, shape: tuple[int, int] | None = None,
                        pin: bool = False) -> MicroBatch:
    """One :class:`MicroBatch` ``[member, rows, cols]`` from one micro-batch per member (each
    ``[rows_m, cols_m]``), padded to the largest rows and columns or to ``shape`` (rows, cols;
    :func:`static_shape`): token ``pad``, target 0, mask 0, offset 0, segment id -1 (extra
    columns lie beyond every real token's segment or causal mask; extra rows are all padding),
    so each member's real tokens compute as in its own batch. Offsets / segment ids are None
    when every member's are None. ``pin``: in pinned (page-locked) memory, for one
    asynchronous copy to a CUDA device.

    Raises:
        ValueError: ``shape`` smaller than a member's batch.
    """
    R = max(mb.inputs.shape[0] for mb in mbs)
    C = max(mb.inputs.shape[1] for mb in mbs)
    if shape is not None:
        if shape[0] < R or shape[1] < C:
            raise ValueError(f"shape {tuple(shape)} is smaller than a member's batch {R}x{C}")
        R, C = shape
    M = len(mbs)

    def stack(get, fill, dtype):
        ts = [get(mb) for mb in mbs]
        if all(t is None for t in ts):
            return None
        out = torch.empty((M, R, C), dtype=dtype, pin_memory=pin)
        a = out.numpy()
        a.fill(fill)
        for m, t in enumerate(ts):
            if t is None:
                continue
            t = t.numpy()
            if t.ndim == 1:                          # per-row offsets -> per token
                t = np.broadcast_to(t[:, None], mbs[m].inputs.shape)
            a[m, :t.shape[0], :t.shape[1]] = t
        return out

    return MicroBatch(stack(lambda b: b.inputs, pad, torch.long),
                      stack(lambda b: b.targets, 0, torch.long),
                      stack(lambda b: b.mask, 0.0, torch.float32),
                      stack(lambda b: b.offsets, 0, torch.long),
                      stack(lambda b: b.segment_ids, -1, torch.long))


class BatchProducer:
    """The batches of steps ``start, start + 1, ...`` made ahead of use.

    ``make(step)`` runs in a background thread, at most ``depth`` steps ahead; :meth:`get`
    returns step ``step``'s (an exception of ``make`` is raised there, in the caller's
    thread). What a step gets depends only on ``make`` and the step, not on the thread: the
    batches are those made on demand. ``depth`` 0: no thread, ``make`` runs in :meth:`get`.
    """

    def __init__(self, make: Callable[[int], object], start: int, depth: int = 2):
        self.make, self.depth = make, int(depth)
        self._thread = None
        self._next = start
        if self.depth > 0:
            self._start(start)

    def _start(self, start: int) -> None:
        self._stop = threading.Event()
        self._queue: queue.Queue = queue.Queue(maxsize=self.depth)
        self._next = start
        stop, q = self._stop, self._queue

        def work():
            step = start
            while not stop.is_set():
                try:
                    item = (step, self.make(step), None)
                except BaseException as e:          # raised again by get()
                    item = (step, None, e)
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if item[2] is not None:
                    return
                step += 1
        self._thread = threading.Thread(target=work, name="batch-producer", daemon=True)
        self._thread.start()

    def get(self, step: int):
        """Step ``step``'s batch (restarts the producer at ``step`` if it is not the next)."""
        if self.depth <= 0:
            return self.make(step)
        if step != self._next:
            self.close()
            self._start(step)
        got, item, error = self._queue.get()
        self._next = step + 1
        if error is not None:
            self.close()
            raise error
        assert got == step
        return item

    def close(self) -> None:
        """Stop the background thread (batches made ahead are dropped)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
