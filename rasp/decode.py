"""Greedy next-token decoding: the one decoder for RASP programs, compiled and trained models.

A RASP-L program is a next-token function (Zhou et al. 2023): run on a prefix, its value at the
last position is the next token; a decoder-only transformer is the same kind of function. Every
greedy decoding in rasp-lab goes through :func:`greedy_decode`, which owns the loop (grouping
prompts by length, appending, stopping at EOS, dropping finished rows); the caller supplies only
``next_ids``, the model's next token for a batch of equal-length prefixes:

* a RASP program: ``tasks.decode_batch`` (``rasp.evaluate`` on the program values);
* a compiled model: ``compiler.decode.decode_task`` / ``generate`` (``CompiledModel.run``);
* a trained model: ``analysis.training.evaluation.greedy_decode`` (argmax of the last logits).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

__all__ = ["greedy_decode", "NO_TOKEN"]

NO_TOKEN = -1
"""What ``next_ids`` returns for a row whose output is not a token: that row stops there."""


def greedy_decode(next_ids: Callable[[np.ndarray], Sequence[int]],
                  prompts: Sequence[Sequence[int]], max_new_tokens: int, eos: int | None,
                  max_seq_len: int | None = None, batch_size: int | None = None,
                  with_rows: bool = False) -> list[list[int]]:
    """Greedy decoding of many prompts with a next-token function.

    Prompts of equal length are decoded together (a causal model needs no padding); rows that
    reach ``eos`` or :data:`NO_TOKEN` leave the batch.

    Args:
        next_ids: ``ids [batch, seq] (int64) -> [batch]`` next token ids (:data:`NO_TOKEN`
            where the output is no token). It may raise to abort decoding.
        prompts: token-id lists (non-empty).
        max_new_tokens: at most this many tokens are generated per prompt.
        eos: generation of a row stops after this id (included in its output); None: never.
        max_seq_len: a row also stops when its sequence (prompt + generated) would exceed this
            length (e.g. the learned positions of ``ape_learned``); None: no limit.
        batch_size: at most this many rows per ``next_ids`` call (None: all rows of a length).
        with_rows: call ``next_ids(ids, rows)`` with the prompt index of each row (a caller
            that runs several models at once tells their rows apart by it).

    Returns:
        the generated ids per prompt, in the order of ``prompts`` (ending with ``eos`` when
        reached; without it when stopped by a limit or :data:`NO_TOKEN`).

    Raises:
        ValueError: an empty prompt.
    """
    outs: list[list[int]] = [[] for _ in prompts]
    by_len: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        if len(p) == 0:
            raise ValueError("empty prompt: decoding needs at least one token (BOS)")
        by_len.setdefault(len(p), []).append(i)
    step = batch_size or max(1, len(prompts))
    for plen, group in sorted(by_len.items()):
        for s in range(0, len(group), step):
            rows = group[s:s + step]
            seq = np.asarray([[int(t) for t in prompts[i]] for i in rows], dtype=np.int64)
            for _ in range(max_new_tokens):
                if not rows or (max_seq_len is not None and seq.shape[1] > max_seq_len):
                    break
                nxt = np.asarray(next_ids(seq, rows) if with_rows else next_ids(seq),
                                 dtype=np.int64).reshape(-1)
                keep = []
                for j, i in enumerate(rows):
                    tok = int(nxt[j])
                    if tok == NO_TOKEN:
                        continue
                    outs[i].append(tok)
                    if tok != eos:
                        keep.append(j)
                rows = [rows[j] for j in keep]
                seq = np.concatenate([seq[keep], nxt[keep, None]], axis=1)
    return outs
