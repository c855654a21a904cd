"""Greedy next-token decoding with a RASP program, and verification of reference programs.

A part-A RASP-L program is a next-token function (Zhou et al. 2023): run on a prefix, its value
at the last position is the next token. :func:`decode_with_program` appends that token and runs
again until EOS. :func:`decode_batch` does the same for many prompts at once, evaluating all
unfinished prompts of one length in one batched :func:`rasp.evaluate` call.

:func:`verify_program` checks a program against a task's ground truth on sampled inputs at every
requested length. When the program is *prefix-causal* (every attention selector causal and no
``length``), the value at position i depends only on tokens 0..i, so greedy decoding reproduces
the answer iff the program, run once on ``prompt + answer[:-1]`` (teacher forcing), predicts
every answer token: one evaluation per batch instead of one per generated token. Other programs
are decoded step by step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from rasp.equality import values_equal

from .base import Task, TaskInputError

__all__ = ["decode_with_program", "decode_batch", "verify_program", "VerifyReport",
           "is_prefix_causal", "evaluate_sequence_program"]


def is_prefix_causal(sop) -> bool:
    """Whether ``sop``'s value at position i depends only on positions 0..i: every aggregate /
    selector width reads a causal selector and no node is ``length``."""
    from rasp.ir import Aggregate, Length, SelectorWidth, walk
    for n in walk(sop):
        if isinstance(n, Length):
            return False
        if isinstance(n, (Aggregate, SelectorWidth)) and not n.selector.causal:
            return False
    return True


def _to_ids(task: Task, values: np.ndarray) -> np.ndarray:
    """Map program output values to token ids; -1 where a value is not a token."""
    flat = np.asarray(values).reshape(-1).tolist()
    out = np.empty(len(flat), dtype=np.int64)
    for i, v in enumerate(flat):
        try:
            out[i] = task.program_output_to_id(v)
        except (ValueError, TypeError):
            out[i] = -1
    return out.reshape(np.asarray(values).shape)


def _program_array(task: Task, rows: Sequence[Sequence[int]]) -> np.ndarray:
    vals = [task.program_tokens(r) for r in rows]
    return np.asarray(vals)


def decode_batch(task: Task, sop, prompts: Sequence[Sequence[int]], max_new_tokens: int,
                 on_invalid: str = "stop") -> list[list[int]]:
    """Greedy decoding of many prompts with a RASP program (batched by prefix length).

    Args:
        task: the :class:`~tasks.base.Task` (gives ``program_tokens`` and
            ``program_output_to_id``).
        sop: the program's output s-op (``task.load_reference()`` or any next-token program).
        prompts: token-id lists (each starting with BOS).
        max_new_tokens: upper bound on generated tokens per prompt.
        on_invalid: what to do when the program's output at the last position is not a token
            of the vocabulary: ``"stop"`` ends that prompt's generation (the output then lacks
            EOS), ``"raise"`` raises ``ValueError``.

    Returns:
        One list of generated token ids per prompt (ending with EOS unless stopped).

    Raises:
        rasp.ir.RASPError subclasses when the program fails to evaluate.
    """
    import rasp
    if on_invalid not in ("stop", "raise"):
        raise ValueError("on_invalid is 'stop' or 'raise'")
    prompts = [[int(t) for t in p] for p in prompts]
    outs: list[list[int]] = [[] for _ in prompts]
    eos = task.vocab.eos
    by_len: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        if not p:
            raise TaskInputError("empty prompt")
        by_len.setdefault(len(p), []).append(i)
    for _, idx in sorted(by_len.items()):
        rows = [list(prompts[i]) for i in idx]
        active = list(range(len(idx)))
        arr = _program_array(task, rows)
        for _step in range(max_new_tokens):
            if not active:
                break
            res = rasp.evaluate(sop, arr[active])
            nxt = _to_ids(task, res[:, -1])
            still = []
            new_cols = []
            for j, a in enumerate(active):
                tok = int(nxt[j])
                if tok < 0:
                    if on_invalid == "raise":
                        raise ValueError(
                            f"{task.name}: program output {res[j, -1]!r} at position "
                            f"{arr.shape[1] - 1} is not a token of the vocabulary")
                    continue
                outs[idx[a]].append(tok)
                if tok != eos:
                    still.append(a)
                    new_cols.append(task.vocab.values[tok])
            if not still:
                break
            # keep only the unfinished rows, each extended by its new token
            arr = np.concatenate([arr[still], np.asarray(new_cols)[:, None]], axis=1) \
                if arr.dtype.kind != "U" else \
                np.concatenate([arr[still].astype(object), np.asarray(new_cols, dtype=object)
                                [:, None]], axis=1)
            idx = [idx[a] for a in still]
            active = list(range(len(idx)))
    return outs


def decode_with_program(task: Task, sop, prompt: Sequence[int], max_new_tokens: int
                        ) -> list[int]:
    """Greedy next-token decoding of one prompt with a RASP program (contract C).

    Runs the program on the growing prefix, takes its value at the last position as the next
    token, appends it and stops at EOS or after ``max_new_tokens`` tokens.

    Returns the generated token ids (EOS included when reached). Raises ``ValueError`` when the
    program outputs a value that is no token of ``task.vocab``, and
    :class:`rasp.ir.RASPError` subclasses when the program fails.
    """
    return decode_batch(task, sop, [prompt], max_new_tokens, on_invalid="raise")[0]


def evaluate_sequence_program(task: Task, sop, prompts: Sequence[Sequence[int]]) -> list[list]:
    """Run a part-B (per-position) program on prompts (``BOS x_1..x_n`` ids); returns the output
    values per position (Python scalars), batching prompts of equal length."""
    import rasp
    outs: list[list] = [None] * len(prompts)  # type: ignore[list-item]
    by_len: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        by_len.setdefault(len(p), []).append(i)
    for _, idx in by_len.items():
        arr = _program_array(task, [prompts[i] for i in idx])
        res = rasp.evaluate(sop, arr)
        for j, i in enumerate(idx):
            outs[i] = [v.item() if hasattr(v, "item") else v for v in res[j]]
    return outs


@dataclass
class VerifyReport:
    """Result of :func:`verify_program`.

    ``per_length[n] = (n_correct, n_checked)``; ``failures`` lists up to 5 dicts with ``length``,
    ``prompt``, ``expected``, ``got`` (readable token names / values); ``method`` is
    ``"teacher_forcing"`` (exactly equivalent to greedy decoding for prefix-causal programs),
    ``"greedy"`` or ``"per_position"`` (part B).
    """

    task: str
    method: str
    per_length: dict = field(default_factory=dict)
    failures: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c == n for c, n in self.per_length.values())

    @property
    def n_checked(self) -> int:
        return sum(n for _, n in self.per_length.values())

    @property
    def failed_lengths(self) -> list[int]:
        return [k for k, (c, n) in sorted(self.per_length.items()) if c != n]

    def to_dict(self) -> dict:
        return {"task": self.task, "method": self.method, "ok": self.ok,
                "per_length": {str(k): list(v) for k, v in self.per_length.items()},
                "failed_lengths": self.failed_lengths, "failures": self.failures}


def verify_program(task: Task, sop, lengths: Sequence[int], samples: int = 10, seed: int = 0,
                   method: str = "auto") -> VerifyReport:
    """Check a program against the task's ground truth on ``samples`` random inputs per length.

    Args:
        task: the task; lengths it cannot produce raise ``ValueError``.
        sop: the program's output s-op.
        lengths: the lengths to check, e.g. ``range(1, 101)``.
        samples: examples per length (generator seeded with ``seed``; the same inputs every
            call).
        method: ``"auto"`` (teacher forcing when :func:`is_prefix_causal`, else greedy),
            ``"greedy"`` or ``"teacher_forcing"``.

    Returns:
        a :class:`VerifyReport`.
    """
    import rasp
    rng = np.random.default_rng(seed)
    if task.kind == "sequence":
        method = "per_position"
    elif method == "auto":
        method = "teacher_forcing" if is_prefix_causal(sop) else "greedy"
    elif method not in ("greedy", "teacher_forcing"):
        raise ValueError("method is 'auto', 'greedy' or 'teacher_forcing'")
    report = VerifyReport(task=task.name, method=method)
    for n in lengths:
        task.check_length(n)
        examples = [task.sample(n, rng) for _ in range(samples)]
        if method == "per_position":
            got = evaluate_sequence_program(task, sop, [p for p, _ in examples])
            ok = [len(g) == len(a) and all(values_equal(x, y) for x, y in zip(g, a))
                  for g, (_, a) in zip(got, examples)]
        elif method == "greedy":
            got = decode_batch(task, sop, [p for p, _ in examples],
                               max(len(a) for _, a in examples) + 1)
            ok = [g == a for g, (_, a) in zip(got, examples)]
        else:
            got = [None] * len(examples)
            by_len: dict[int, list[int]] = {}
            for i, (p, a) in enumerate(examples):
                by_len.setdefault(len(p) + len(a) - 1, []).append(i)
            for _, idx in by_len.items():
                arr = _program_array(task, [examples[i][0] + examples[i][1][:-1] for i in idx])
                res = rasp.evaluate(sop, arr)
                for j, i in enumerate(idx):
                    p, a = examples[i]
                    got[i] = _to_ids(task, res[j, len(p) - 1:]).tolist()
            ok = [g == a for g, (_, a) in zip(got, examples)]
        report.per_length[n] = (sum(ok), len(ok))
        for g, (p, a), good in zip(got, examples, ok):
            if not good and len(report.failures) < 5:
                if task.kind == "sequence":
                    exp, gg = [str(x) for x in a], [str(x) for x in g]
                else:
                    exp = task.vocab.decode(a)
                    gg = [task.vocab.tokens[t] if 0 <= t < len(task.vocab) else "<invalid>"
                          for t in g]
                report.failures.append({"length": n, "prompt": task.vocab.decode(p),
                                        "expected": exp, "got": gg})
    return report
