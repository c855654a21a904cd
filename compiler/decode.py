"""Greedy next-token decoding with a compiled RASP-L program.

A RASP-L program is a next-token function (Zhou et al. 2023): its value at the last position
of a prefix is the next token. :func:`generate` runs the compiled model on the growing prefix
(of program values), appends the value at the last position and stops at ``eos`` — exactly
what ``tasks.decode_with_program`` does with the interpreter. :func:`decode_task` does it on a
task's token ids (duck-typed: the compiler does not import ``tasks``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = ["generate", "decode_task"]


def _eq(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001
        return False


def generate(compiled, prefix: Sequence[Any], max_new_tokens: int, eos: Any = None) -> list:
    """Greedy decoding of program values.

    Args:
        compiled: a :class:`~compiler.compile.CompiledModel` (normally causal).
        prefix: the program values of the prompt (e.g. ``task.program_tokens(prompt)``).
        max_new_tokens: at most this many values are generated.
        eos: stop after generating this value (None: never).

    Returns:
        The generated values (including ``eos`` when reached).

    Raises:
        CompiledRuntimeError: a generated value is not in the compiled vocabulary, or the
            sequence grows beyond ``max_seq_len``.
    """
    seq = list(prefix)
    out: list = []
    for _ in range(max_new_tokens):
        y = compiled.run([seq])[0][-1]
        y = y.item() if isinstance(y, np.generic) else y
        out.append(y)
        if eos is not None and _eq(y, eos):
            break
        seq.append(y)
    return out


def decode_task(task, compiled, prompt: Sequence[int], max_new_tokens: int) -> list[int]:
    """Greedy decoding of a task prompt (token ids, BOS first) with a compiled next-token
    program; returns the generated token ids (ending with EOS when reached), like
    ``tasks.decode_with_program(task, sop, prompt, max_new_tokens)``.

    Uses ``task.program_tokens``, ``task.program_output_to_id`` and ``task.vocab.eos``."""
    ids = list(prompt)
    out: list[int] = []
    for _ in range(max_new_tokens):
        vals = task.program_tokens(ids)
        y = compiled.run([vals])[0][-1]
        y = y.item() if isinstance(y, np.generic) else y
        try:
            tid = task.program_output_to_id(y)
        except (ValueError, TypeError, KeyError):
            break
        out.append(tid)
        ids.append(tid)
        if tid == task.vocab.eos:
            break
    return out
