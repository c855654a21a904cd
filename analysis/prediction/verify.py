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

from typing import Any, Iterable
import re

import tasks
from rasp.ir import RASPError
from rasp.repl.progress import progress_bar
from tasks import LengthResult, VerifyResult
from tasks.custom import TaskFileError
from tasks.huang import TEST_MAX_LENGTH

__all__ = ["VerifyResult", "LengthResult", "verify_task", "verify_program_on_task",
           "VerifyError", "MAX_LENGTH", "MAX_SAMPLES", "protocol_max_length",
           "HUANG_TEST_MAX_LENGTH"]

#: Huang et al. 2025's algorithmic protocol tests lengths 101-150 (train 0-50)
HUANG_TEST_MAX_LENGTH = TEST_MAX_LENGTH


#: Longest length verified (``--max-length``) and most examples per length (``--samples``):
#: greedy decoding at length n costs ~n evaluations of the program on ~2n tokens, so one flag
#: of 10^9 ran for minutes (the fault test: 180-240 s) before this bound.
MAX_LENGTH = 1_000
MAX_SAMPLES = 1_000


class VerifyError(RASPError, ValueError):
    """Bad verification request: a length the task cannot produce, bad sample count, ..."""


def _task(task):
    return tasks.get_task(task) if isinstance(task, str) else task


def protocol_max_length(task) -> int:
    """The longest input length a length-generalization protocol tests for ``task``: the
    length a program must be verified up to before its theory says ``generalizes``.

    The largest of: our own training protocol's out-of-distribution lengths (up to
    ``eval_max_factor`` (2) x the task's training length, :func:`analysis.training.
    evaluation.eval_lengths`); for Huang et al.'s tasks their test bins — 101-150 for the
    algorithmic tasks and the membership languages (:data:`HUANG_TEST_MAX_LENGTH`), for a
    next-character-set language the upper end of its released bins (``paper["huang_bins"]
    ["lengths"]``, e.g. ``"48-100 / 54-100 / 110-200 / 172-300"`` -> 300). Capped by
    ``task.max_length`` and :data:`MAX_LENGTH`; at least the task's shortest length.

    Args:
        task: a :class:`tasks.Task` or its name.

    Raises:
        tasks.UnknownTaskError: unknown name.
    """
    # start-up: torch loads only when this runs
    from analysis.training.configs import TrainConfig
    task = _task(task)
    factor = TrainConfig.__dataclass_fields__["eval_max_factor"].default
    top = int(factor * task.default_train_max_len)
    paper = task.paper or {}
    if task.name in tasks.HUANG_TASKS:
        top = max(top, HUANG_TEST_MAX_LENGTH)
        bins = (paper.get("huang_bins") or {}).get("lengths")
        if bins:
            top = max(top, max(int(x) for x in re.findall(r"\d+", bins)))
    if task.test_max_length:
        top = max(top, int(task.test_max_length))
    if task.max_length is not None:
        top = min(top, task.max_length)
    return max(min(top, MAX_LENGTH), task.min_length or 1)


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
    task = _task(task)
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise VerifyError(f"samples must be a positive integer, got {samples!r}")
    if samples > MAX_SAMPLES:
        raise VerifyError(f"samples must be at most {MAX_SAMPLES:,} "
                          f"(analysis.prediction.verify.MAX_SAMPLES), got {samples:,}")
    if method not in ("auto", "greedy", "teacher_forcing"):
        raise VerifyError("method is 'auto', 'greedy' or 'teacher_forcing'")
    if lengths is None:
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
            raise VerifyError(f"max length must be a positive integer, got {max_length!r}")
        if max_length > MAX_LENGTH:
            raise VerifyError(f"max length must be at most {MAX_LENGTH:,} "
                              f"(analysis.prediction.verify.MAX_LENGTH), got {max_length:,}")
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
        bar = progress_bar(todo, desc=f"verify {task.name}", unit="length", leave=False)
        it = bar
    try:
        for n in it:
            # one seed per length: the examples at a length do not depend on the other lengths
            try:
                rep = tasks.verify_program(task, sop, [n], samples=samples, seed=seed * 100003 + n,
                                           method=method)
            except TaskFileError:
                raise                # the task's own code failed, not the program
            except (RASPError, ValueError, TypeError) as e:
                res.error = f"length {n}: {e}"
                res.per_length.append(LengthResult(n, samples, 0))
                break
            res.method = rep.method
            (r,) = rep.per_length
            res.per_length.append(r)
            res.failures += rep.failures[:max(0, 5 - len(res.failures))]
            if not r.ok and res.counterexample is None and rep.failures:
                res.counterexample = _greedy_counterexample(task, sop, rep.failures[0], n)
    finally:
        if bar is not None:
            bar.close()
    return res


def _greedy_counterexample(task, sop, failure: dict, n: int) -> dict:
    """Re-decode a failure greedily (``tasks.decode_with_program``) to report the real output."""
    out = dict(failure)
    out["length"] = n
    if task.kind == "sequence":
        return out
    try:
        prompt = task.vocab.encode(failure["prompt"])
        expected = task.vocab.encode(failure["expected"])
        got = tasks.decode_with_program(task, sop, prompt, len(expected) + 1)
        out["got"] = task.vocab.decode(got)
    except (RASPError, ValueError, TypeError) as e:  # keep the teacher-forced output, note why
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
