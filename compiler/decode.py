"""Greedy next-token decoding with a compiled RASP-L program.

A RASP-L program is a next-token function (Zhou et al. 2023): its value at the last position
of a prefix is the next token. Both functions here hand the loop to the one greedy decoder,
:func:`rasp.decode.greedy_decode`, with a ``next_ids`` callback that runs the compiled model —
exactly what ``tasks.decode_batch`` does with the interpreter. :func:`decode_task` works on a
task's token ids (the compiler does not import ``tasks``: it reads ``task.program_tokens``,
``task.program_output_to_id`` and ``task.vocab.eos``); :func:`generate` on program values.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from rasp.decode import NO_TOKEN, greedy_decode

__all__ = ["generate", "decode_task"]


def _py(v):
    return v.item() if isinstance(v, np.generic) else v


def generate(compiled, prefix: Sequence[Any], max_new_tokens: int, eos: Any = None) -> list:
    """Greedy decoding of program values.

    Args:
        compiled: a :class:`~compiler.compile.CompiledModel` (normally causal).
        prefix: the program values of the prompt (e.g. ``task.program_tokens(prompt)``).
        max_new_tokens: at most this many values are generated.
        eos: stop after generating this value (None: never).

    Returns:
        The generated values (including ``eos`` when reached); generation stops before a value
        that is not in the compiled vocabulary.

    Raises:
        CompiledRuntimeError: a prefix value is not in the compiled vocabulary, or the
            sequence grows beyond ``max_seq_len``.
        UnsupportedError: the model's program reads later positions (compiled with
            ``allow_noncausal=True``): decoding it would not follow the program.
    """
    compiled.check_decodable()
    vocab = list(compiled.vocab)
    index = {compiled._key(v): i for i, v in enumerate(vocab)}

    def ids_of(values) -> list[int]:
        return [index.get(compiled._key(_py(v)), NO_TOKEN) for v in values]

    def next_ids(ids: np.ndarray) -> list[int]:
        return ids_of(compiled.run([[vocab[i] for i in row] for row in ids.tolist()])[:, -1])

    prompt = ids_of(prefix)
    if NO_TOKEN in prompt:
        compiled.run([list(prefix)])             # raises CompiledRuntimeError naming the value
    eos_id = None if eos is None else index.get(compiled._key(_py(eos)), NO_TOKEN - 1)
    out = greedy_decode(next_ids, [prompt], max_new_tokens, eos_id)[0]
    return [vocab[i] for i in out]


def decode_task(task, compiled, prompt: Sequence[int], max_new_tokens: int) -> list[int]:
    """Greedy decoding of a task prompt (token ids, BOS first) with a compiled next-token
    program; returns the generated token ids (ending with EOS when reached), like
    ``tasks.decode_with_program(task, sop, prompt, max_new_tokens)`` (generation stops at an
    output that is not a token). Raises ``UnsupportedError`` for a model whose program reads
    later positions (compiled with ``allow_noncausal=True``)."""
    compiled.check_decodable()

    def to_id(y) -> int:
        try:
            return int(task.program_output_to_id(_py(y)))
        except (ValueError, TypeError, KeyError):
            return NO_TOKEN

    def next_ids(ids: np.ndarray) -> list[int]:
        ys = compiled.run([task.program_tokens(row) for row in ids.tolist()])[:, -1]
        return [to_id(y) for y in ys]

    return greedy_decode(next_ids, [list(prompt)], max_new_tokens, task.vocab.eos)[0]
