"""Greedy next-token decoding with a RASP program, and verification of reference programs.

A part-A RASP-L program is a next-token function (Zhou et al. 2023): run on a prefix, its value
at the last position is the next token. :func:`decode_with_program` appends that token and runs
again until EOS. :func:`decode_batch` does the same for many prompts at once with the one greedy
decoder (:func:`rasp.decode.greedy_decode`): all unfinished prompts of one length are evaluated
in one batched :func:`rasp.evaluate` call.

:func:`verify_program` checks a program against a task's ground truth on sampled inputs at every
requested length. When the program is *prefix-causal* (``rasp.analyses.raspl.is_prefix_causal``: every
attention selector causal, by its flag or its comparisons, and no ``length``), the value at position i depends only on tokens 0..i, so greedy decoding reproduces
the answer iff the program, run once on ``prompt + answer[:-1]`` (teacher forcing), predicts
every answer token: one evaluation per batch instead of one per generated token. Other programs
are decoded step by step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from rasp.equality import values_equal
from rasp.analyses.raspl import is_prefix_causal   # the one owner of prefix causality (re-exported)

from .base import Task, TaskInputError
from rasp.decode import NO_TOKEN, greedy_decode
import rasp

__all__ = ["decode_with_program", "decode_batch", "verify_program", "VerifyResult",
           "LengthResult", "is_prefix_causal", "evaluate_sequence_program"]


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
    """Greedy decoding of many prompts with a RASP program (:func:`rasp.decode.greedy_decode`,
    prompts grouped by length, one batched :func:`rasp.evaluate` per step).

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
        TaskInputError: an empty prompt.
        rasp.ir.RASPError subclasses when the program fails to evaluate.
    """
    if on_invalid not in ("stop", "raise"):
        raise ValueError("on_invalid is 'stop' or 'raise'")
    if any(len(p) == 0 for p in prompts):
        raise TaskInputError("empty prompt")

    def next_ids(ids: np.ndarray) -> np.ndarray:
        res = rasp.evaluate(sop, _program_array(task, ids.tolist()))
        nxt = _to_ids(task, res[:, -1])
        if on_invalid == "raise" and (nxt == NO_TOKEN).any():
            j = int(np.argmax(nxt == NO_TOKEN))
            raise ValueError(f"{task.name}: program output {res[j, -1]!r} at position "
                             f"{ids.shape[1] - 1} is not a token of the vocabulary")
        return nxt

    return greedy_decode(next_ids, prompts, max_new_tokens, task.vocab.eos)


def decode_with_program(task: Task, sop, prompt: Sequence[int], max_new_tokens: int
                        ) -> list[int]:
    """Greedy next-token decoding of one prompt with a RASP program.

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
    outs: list[list] = [None] * len(prompts)  # type: ignore[list-item]
    by_len: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        by_len.setdefault(len(p), []).append(i)
    for _, idx in by_len.items():
        arr = _program_array(task, [prompts[i] for i in idx])
        res = rasp.evaluate(sop, arr)
        for j, i in enumerate(idx):
            outs[i] = [v.item() if isinstance(v, np.generic) else v for v in res[j]]
    return outs


@dataclass
class LengthResult:
    """Exact match at one input length: ``correct`` of ``n`` examples (the one per-length
    result type: program verification here, trained-model evaluation in
    :mod:`analysis.training.evaluation`, rows of a run's ``accuracy.json``).

    Attributes:
        length: the task's input length.
        n: examples checked.
        correct: examples whose whole answer was exact; None when the length could not be
            evaluated (``note`` says why, e.g. ``ape_learned`` beyond its positions).
        split: ``"id"`` / ``"ood"`` for trained models (None for program verification).
        ci_low, ci_high: the Wilson 95% interval of ``em`` when computed
            (:func:`analysis.training.evaluation.wilson_interval`).
    """

    length: int
    n: int
    correct: int | None
    split: str | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    note: str | None = None

    @property
    def em(self) -> float | None:
        """Exact match ``correct / n`` (None when not evaluated)."""
        return None if self.correct is None else self.correct / self.n

    @property
    def ok(self) -> bool:
        """Every example exact."""
        return self.correct == self.n

    def to_dict(self) -> dict:
        """``{length, split, em, n, ci_low, ci_high, correct[, note]}`` (an ``accuracy.json``
        row when ``split`` is set)."""
        d = {"length": self.length, "split": self.split, "em": self.em, "n": self.n,
             "ci_low": self.ci_low, "ci_high": self.ci_high, "correct": self.correct}
        if self.note:
            d["note"] = self.note
        return d


@dataclass
class VerifyResult:
    """Result of verifying a program against a task's ground truth (:func:`verify_program`,
    :func:`analysis.prediction.verify.verify_task`).

    Attributes:
        task: task name. ``program``: a label of the checked program.
        method: ``"teacher_forcing"`` (exactly greedy decoding for prefix-causal programs),
            ``"greedy"`` or ``"per_position"`` (part-B sequence programs).
        samples, seed: the sampling parameters.
        per_length: one :class:`LengthResult` per checked length, in the order checked.
        failures: up to 5 failing examples (dicts with ``length``, ``prompt``, ``expected``,
            ``got`` as readable token names / values).
        counterexample: the first failure re-decoded greedily, or None.
        error: a program error (message) that stopped the verification, or None.
    """

    task: str
    method: str
    program: str = "program"
    samples: int = 0
    seed: int = 0
    per_length: list = field(default_factory=list)
    failures: list = field(default_factory=list)
    counterexample: dict | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Every example at every checked length decoded exactly and no error occurred."""
        return self.error is None and bool(self.per_length) and \
            all(r.ok for r in self.per_length)

    @property
    def lengths(self) -> list[int]:
        return [r.length for r in self.per_length]

    @property
    def failed_lengths(self) -> list[int]:
        return [r.length for r in self.per_length if not r.ok]

    @property
    def max_length(self) -> int | None:
        return max(self.lengths) if self.per_length else None

    @property
    def n_checked(self) -> int:
        return sum(r.n for r in self.per_length)

    def to_dict(self) -> dict:
        return {"task": self.task, "program": self.program, "method": self.method,
                "ok": self.ok, "samples": self.samples, "seed": self.seed,
                "lengths": [self.lengths[0], self.lengths[-1]] if self.per_length else [],
                "n_checked": self.n_checked, "failed_lengths": self.failed_lengths,
                "per_length": [r.to_dict() for r in self.per_length],
                "counterexample": self.counterexample, "error": self.error}

    def summary(self) -> str:
        """One line: ``task: OK, N examples at lengths a..b`` or the first counterexample."""
        span = f"lengths {self.lengths[0]}..{self.lengths[-1]}" if self.per_length else \
            "no length"
        if self.error:
            return f"{self.task}: ERROR ({self.error})"
        if self.ok:
            return f"{self.task}: OK, {self.n_checked} examples at {span} ({self.method})"
        c = self.counterexample or (self.failures[0] if self.failures else {})
        return (f"{self.task}: MISMATCH at lengths {_ranges(self.failed_lengths)} "
                f"(checked {span}); first counterexample at length {c.get('length')}: "
                f"{' '.join(c.get('prompt', []))} -> expected {' '.join(c.get('expected', []))}"
                f", got {' '.join(c.get('got', []))}")


def _ranges(xs: list[int]) -> str:
    out, start, prev = [], None, None
    for x in xs:
        if start is None:
            start = prev = x
        elif x == prev + 1:
            prev = x
        else:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = x
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(out)


def verify_program(task: Task, sop, lengths: Sequence[int], samples: int = 10, seed: int = 0,
                   method: str = "auto") -> VerifyResult:
    """Check a program against the task's ground truth on ``samples`` random inputs per length,
    plus the task's hard cases of that length (:meth:`tasks.base.Task.verification_prompts`:
    for a formal language every short string, every DFA transition towards acceptance and
    rejection, and counting adversaries; none for other tasks).

    Args:
        task: the task; lengths it cannot produce raise ``ValueError``.
        sop: the program's output s-op.
        lengths: the lengths to check, e.g. ``range(1, 101)``.
        samples: examples per length (generator seeded with ``seed``; the same inputs every
            call).
        method: ``"auto"`` (teacher forcing when :func:`is_prefix_causal`, else greedy),
            ``"greedy"`` or ``"teacher_forcing"``.

    Returns:
        a :class:`VerifyResult`.

    A next-set task (Huang et al.'s next-character sets) is checked per position
    (``method`` ``"per_position"``): the program runs on ``BOS w`` and its value at each
    string position must be that prefix's label, as a decoder writes them all in one pass; the
    program must be prefix-causal (:func:`is_prefix_causal`), since a decoder's position sees
    only its prefix — otherwise ``ValueError``.

    Raises:
        ValueError: a next-set program that is not prefix-causal; a length the task cannot
            produce.
    """
    rng = np.random.default_rng(seed)
    if task.kind == "next_set":
        if not is_prefix_causal(sop):
            raise ValueError(f"{task.name}: the program reads later positions (not "
                             "prefix-causal); a decoder writes each position's set of next "
                             "characters from its prefix alone")
        method = "per_position"
    elif task.kind == "sequence":
        method = "per_position"
    elif method == "auto":
        method = "teacher_forcing" if is_prefix_causal(sop) else "greedy"
    elif method not in ("greedy", "teacher_forcing"):
        raise ValueError("method is 'auto', 'greedy' or 'teacher_forcing'")
    report = VerifyResult(task=task.name, method=method, samples=samples, seed=seed)
    for n in lengths:
        task.check_length(n)
        examples = [task.sample(n, rng) for _ in range(samples)]
        # the task's hard cases (a language's DFA coverage and counting adversaries)
        examples += [(p, task.ground_truth(p)) for p in task.verification_prompts(n)]
        if method == "per_position" and task.kind == "next_set":
            got = [None] * len(examples)
            by_len: dict[int, list[int]] = {}
            for i, (p, _) in enumerate(examples):
                by_len.setdefault(len(p), []).append(i)
            for _, idx in by_len.items():
                res = rasp.evaluate(sop, _program_array(task, [examples[i][0] for i in idx]))
                for j, i in enumerate(idx):
                    got[i] = _to_ids(task, res[j, 1:]).tolist()
            ok = [g == list(a) for g, (_, a) in zip(got, examples)]
        elif method == "per_position":
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
        report.per_length.append(LengthResult(n, len(ok), sum(ok)))
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
