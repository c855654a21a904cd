"""Verification of a task's program at every length: greedy decoding vs the ground truth.

The RASP-Generalization Conjecture (Zhou et al. 2023, arXiv 2310.16028) is about programs that
compute the next-token function *at every input length*. :func:`verify_task` checks that claim
for a catalogue task's reference program (or any program): for every length ``1..N`` the task
can produce, ``samples`` seeded random examples are decoded greedily with the program
(``tasks.decode_with_program`` semantics) and compared with the plain-Python ground truth.

Method. For a *prefix-causal* program (every selector causal, no ``length``; RASP-L programs
are) the value at position ``i`` depends only on tokens ``0..i``, so greedy decoding reproduces
the answer exactly when the program, run once on ``prompt + answer[:-1]`` (teacher forcing),
predicts every answer token: both procedures see the same prefixes up to the first wrong token.
``method="auto"`` uses that (one batched evaluation per length); other programs are decoded
step by step (``tasks.decode_batch``). The first counterexample is always re-decoded greedily
with ``tasks.decode_with_program`` so the reported output is the real greedy output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

__all__ = ["VerifyResult", "LengthResult", "verify_task", "verify_program_on_task",
           "VerifyError"]


class VerifyError(ValueError):
    """Bad verification request: a length the task cannot produce, bad sample count, ..."""


@dataclass
class LengthResult:
    """Outcome at one length: ``correct`` of ``checked`` examples decoded exactly."""

    length: int
    correct: int
    checked: int

    @property
    def ok(self) -> bool:
        return self.correct == self.checked

    def to_dict(self) -> dict:
        return {"length": self.length, "correct": self.correct, "checked": self.checked,
                "ok": self.ok}


@dataclass
class VerifyResult:
    """Result of :func:`verify_task`.

    Attributes:
        task: task name. ``program``: ``"reference"`` or a label of the checked program.
        method: ``"teacher_forcing"`` (exactly greedy decoding for prefix-causal programs),
            ``"greedy"`` or ``"per_position"`` (part-B sequence programs).
        per_length: one :class:`LengthResult` per checked length, increasing.
        counterexample: the first failure (smallest length), a dict with ``length``,
            ``prompt``, ``expected``, ``got`` (token names), or ``None``.
        error: a program error (message) that stopped the verification, or ``None``.
        samples, seed: the sampling parameters.
    """

    task: str
    program: str
    method: str
    samples: int
    seed: int
    per_length: list[LengthResult] = field(default_factory=list)
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
        return sum(r.checked for r in self.per_length)

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
        c = self.counterexample or {}
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


def _task(task):
    import tasks
    return tasks.get_task(task) if isinstance(task, str) else task


def verify_program_on_task(task, sop, max_length: int = 100, samples: int = 5, seed: int = 0,
                           lengths: Iterable[int] | None = None, method: str = "auto",
                           progress: bool = False, program_label: str = "program"
                           ) -> VerifyResult:
    """Check ``sop`` as the task's next-token program at every allowed length.

    Args:
        task: a :class:`tasks.Task` or its name.
        sop: the program's output s-op.
        max_length: check every length ``1..max_length`` the task allows (``task.length_ok``).
        samples: examples per length (seeded with ``seed``; the same examples every call).
        lengths: explicit lengths instead of ``1..max_length``; each must be allowed.
        method: ``"auto"``, ``"greedy"`` or ``"teacher_forcing"`` (module docstring).
        progress: show a tqdm bar over lengths.

    Returns:
        a :class:`VerifyResult`; a program that raises during evaluation gives ``ok == False``
        with ``error`` set (and the length where it failed).

    Raises:
        VerifyError: ``samples < 1``, ``max_length < 1``, no allowed length, or an explicit
            length the task cannot produce.
        tasks.UnknownTaskError: unknown task name.
    """
    import tasks
    from rasp.ir import RASPError
    task = _task(task)
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise VerifyError(f"samples must be a positive integer, got {samples!r}")
    if method not in ("auto", "greedy", "teacher_forcing"):
        raise VerifyError("method is 'auto', 'greedy' or 'teacher_forcing'")
    if lengths is None:
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
            raise VerifyError(f"max length must be a positive integer, got {max_length!r}")
        todo = task.lengths(max_length)
        if not todo:
            hi = "unbounded" if task.max_length is None else task.max_length
            raise VerifyError(f"task {task.name!r} produces no length in 1..{max_length} "
                              f"(its lengths are {task.min_length}..{hi}, "
                              f"{task.length_definition})")
    else:
        todo = list(lengths)
        bad = [n for n in todo if not task.length_ok(n)]
        if bad:
            hi = "unbounded" if task.max_length is None else task.max_length
            raise VerifyError(f"task {task.name!r} cannot produce length {bad[0]!r} (its "
                              f"lengths are {task.min_length}..{hi}, {task.length_definition})")
    res = VerifyResult(task=task.name, program=program_label, method=method, samples=samples,
                       seed=seed)
    it: Any = todo
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(todo, desc=f"verify {task.name}", unit="length", leave=False)
        it = bar
    try:
        for n in it:
            # one seed per length: the examples at a length do not depend on the other lengths
            try:
                rep = tasks.verify_program(task, sop, [n], samples=samples, seed=seed * 100003 + n,
                                           method=method)
            except (RASPError, ValueError, TypeError) as e:
                res.error = f"length {n}: {e}"
                res.per_length.append(LengthResult(n, 0, samples))
                break
            res.method = rep.method
            c, k = rep.per_length[n]
            res.per_length.append(LengthResult(n, c, k))
            if c != k and res.counterexample is None and rep.failures:
                res.counterexample = _greedy_counterexample(task, sop, rep.failures[0], n)
    finally:
        if bar is not None:
            bar.close()
    return res


def _greedy_counterexample(task, sop, failure: dict, n: int) -> dict:
    """Re-decode a failure greedily (``tasks.decode_with_program``) to report the real output."""
    import tasks
    out = dict(failure)
    out["length"] = n
    if task.kind == "sequence":
        return out
    try:
        prompt = task.vocab.encode(failure["prompt"])
        expected = task.vocab.encode(failure["expected"])
        got = tasks.decode_with_program(task, sop, prompt, len(expected) + 1)
        out["got"] = task.vocab.decode(got)
    except Exception as e:  # noqa: BLE001 - keep the teacher-forced output, note why
        out["greedy_error"] = str(e)
    return out


def verify_task(task, max_length: int = 100, samples: int = 5, seed: int = 0,
                progress: bool = False, method: str = "auto") -> VerifyResult:
    """Verify a task's reference program at every length ``1..max_length`` it allows.

    Greedy decoding with ``task.load_reference()`` is compared with ``task.ground_truth`` on
    ``samples`` seeded examples per length (see :func:`verify_program_on_task`).

    Raises:
        tasks.UnknownTaskError: unknown name (its message lists the known tasks).
        VerifyError: bad lengths or samples; a task without a reference program.
        rasp.ir.RASPError: the reference program does not parse or run.
    """
    task = _task(task)
    if not task.reference_file:
        raise VerifyError(f"task {task.name!r} has no reference program")
    sop = task.load_reference()
    return verify_program_on_task(task, sop, max_length=max_length, samples=samples, seed=seed,
                                  method=method, progress=progress,
                                  program_label=f"{task.reference_file}:{task.reference_name}")
