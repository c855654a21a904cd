"""The RASP-L search problem: the examples and the next-token targets.

:class:`SearchProblem` is the RASP-L grammar's batch form of a search problem
(:class:`analysis.prediction.search_core.core.Problem`): token sequences as ``[batch, seq]``
int arrays with their valid positions and per-position targets; :func:`problem_from_examples`
(rows) and :func:`problem_from_task` (a task, through
:func:`analysis.prediction.search_core.core.task_problem`) make one. Checking a program against
a problem (:func:`matches_problem`) and finding the row a program gets wrong (the
counterexample that joins the batch in the next round of counterexample-guided refinement) are
here too, since the engine and the driver both use them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from rasp.analyses.measures import measure
from rasp.interpreter import Evaluator
from rasp.ir import Indices, Node, RASPError, Tokens

from analysis.prediction.search_core.core import (SearchError, shortest_failing, task_example,
                                                  task_problem, task_symbols)

INT8 = (-128, 127)


# --------------------------------------------------------------------------------------------
# The problem: a batch of examples and the next token expected at some positions
# --------------------------------------------------------------------------------------------

@dataclass
class SearchProblem:
    """A fixed batch and the next-token values a program must produce.

    Attributes:
        inputs: ``[batch, seq]`` program token values (each example right-padded with its last
            value; padding never influences a causal program's earlier positions).
        valid: ``[batch, seq]`` bool, the real positions of each example.
        target_mask: ``[batch, seq]`` bool, the positions whose next token is predicted (the
            answer part of each example).
        target: ``[batch, seq]`` the expected program value (the next token) where
            ``target_mask``; arbitrary elsewhere.
        constants: numeric constants the grammar may use (``full``, ``x == c``, ...).
        defaults: aggregate defaults.
        lengths: the task lengths present in the batch.
        name: a label for reports.
        symbols: program value -> the token it stands for (a task's,
            :func:`~analysis.prediction.search_core.core.task_symbols`; empty for examples of
            your own), how a found program's source names its constants.
        example: program values of one input, the running example a found program's source
            sets for the REPL (a task's :func:`~analysis.prediction.search_core.core.
            task_example`, else the first example).
    """

    inputs: np.ndarray
    valid: np.ndarray
    target_mask: np.ndarray
    target: np.ndarray
    constants: list = field(default_factory=lambda: [0, 1, 2])
    defaults: list = field(default_factory=lambda: [0])
    lengths: list = field(default_factory=list)
    name: str = "problem"
    symbols: dict = field(default_factory=dict)
    example: list = field(default_factory=list)

    @property
    def n_targets(self) -> int:
        return int(self.target_mask.sum())


def problem_from_examples(examples: Sequence[tuple[Sequence, int]], *, constants=(0, 1, 2),
                          defaults=(0,), lengths=(), name="problem") -> SearchProblem:
    """Build a :class:`SearchProblem` from ``(values, first_target)`` pairs.

    Each ``values`` is one whole example as the program sees it (e.g. ``BOS prompt SEP answer
    EOS``); positions ``t >= first_target - 1`` up to the second-to-last must predict
    ``values[t + 1]``. The batch holds ``values[:-1]`` of each example.

    Raises:
        SearchError: no examples, or mixed value types.
    """
    if not examples:
        raise SearchError("no examples to search on")
    seqs = [list(v) for v, _ in examples]
    n = max(len(s) for s in seqs) - 1
    if n < 1:
        raise SearchError("examples are too short")
    kinds = {isinstance(x, str) for s in seqs for x in s}
    if len(kinds) > 1:
        raise SearchError("examples mix string and numeric token values")
    is_str = kinds == {True}
    dtype = str if is_str else np.int64
    b = len(seqs)
    inputs = np.empty((b, n), dtype=object)
    valid = np.zeros((b, n), dtype=bool)
    tmask = np.zeros((b, n), dtype=bool)
    target = np.empty((b, n), dtype=object)
    for i, (s, first) in enumerate(examples):
        s = list(s)
        body = s[:-1]
        inputs[i, :len(body)] = body
        inputs[i, len(body):] = body[-1]
        valid[i, :len(body)] = True
        target[i, :] = s[-1]
        for t in range(max(first - 1, 0), len(s) - 1):
            tmask[i, t] = True
            target[i, t] = s[t + 1]
    inputs = inputs.astype(dtype)
    try:
        target = target.astype(dtype)
    except (TypeError, ValueError):
        raise SearchError("target values do not share the input's type") from None
    if is_str:
        constants = [c for c in constants if isinstance(c, str)]
        defaults = [d for d in defaults if isinstance(d, str)] or [""]
    else:
        constants = sorted({int(c) for c in constants if isinstance(c, (int, np.integer))})
        defaults = sorted({int(d) for d in defaults if isinstance(d, (int, np.integer))})
    return SearchProblem(inputs, valid, tmask, target, list(constants), list(defaults),
                         sorted(set(lengths)), name, example=list(seqs[0][:max(
                             examples[0][1], 1)]))


def problem_from_task(task, lengths: Iterable[int] = range(1, 9), samples: int = 3,
                      seed: int = 0) -> SearchProblem:
    """The RASP-L batch of a task's search problem (:func:`~analysis.prediction.search_core.
    core.task_problem`: ``samples``
    examples per allowed length, seeded, as program values, no row twice). Constants are the
    small integers 0, 1, 2 plus the program values of the special tokens (BOS, SEP, EOS);
    defaults are 0 plus those values.

    Raises:
        SearchError: not a next-token task, none of the lengths allowed, or program values
            that do not map back to the token ids (the representation is not invertible).
    """
    p = task_problem(task, lengths, samples, seed)
    ints = [v for v in p.special if isinstance(v, int)]
    strs = [v for v in p.special if isinstance(v, str)]
    out = problem_from_examples(p.rows, constants=[0, 1, 2] + ints + strs,
                                defaults=[0] + ints + strs, lengths=p.lengths, name=p.name)
    out.symbols, out.example = task_symbols(task), task_example(task)
    return out


def tree_size(node: Node) -> int:
    """Expression size: operations of the program counted at every use (no sharing);
    ``tokens``, ``indices`` count 0 (the search's size measure)."""
    if isinstance(node, (Tokens, Indices)):
        return 0
    return 1 + sum(tree_size(c) for c in node.children)


def _measured(node: Node) -> int:
    return measure(node).length


#: Grammar switches (all on by default): ``where`` (ternaries), ``maxmin`` (max/min
#: aggregates), ``sel_andor`` (selector and/or).
_GRAMMAR = {"where": True, "maxmin": True, "sel_andor": True}


def matches_problem(sop: Node, problem: SearchProblem) -> bool:
    """Whether ``sop`` (evaluated causally) gives the expected next token at every target
    position of ``problem``. Errors during evaluation count as a mismatch."""
    try:
        with np.errstate(all="ignore"):
            val = Evaluator(problem.inputs, causal=True)(sop)
    except (RASPError, ValueError, TypeError, OverflowError):
        return False
    got = val[problem.target_mask]
    want = problem.target[problem.target_mask]
    if (got.dtype.kind == "U") != (want.dtype.kind == "U"):
        return False
    return bool(np.array_equal(got, want))


def _term_failing_row(term: Node, problem: SearchProblem | None) -> int | None:
    """The shortest example of ``problem`` on which ``term`` is wrong where the target is not
    its most frequent value (a term of the combination, checked on the validation batch);
    None when it is right there, or without a batch."""
    if problem is None:
        return None
    lens = problem.valid.sum(axis=1)
    try:
        with np.errstate(all="ignore"):
            val = Evaluator(problem.inputs, causal=True)(term)
    except (RASPError, ValueError, TypeError, OverflowError):
        return int(np.argmin(lens))
    want = problem.target[problem.target_mask]
    vals, counts = np.unique(want, return_counts=True)
    need = problem.target_mask & (problem.target != vals[np.argmax(counts)])
    if val.dtype.kind == "U" or problem.target.dtype.kind == "U":
        return int(np.argmin(lens))
    return shortest_failing(((val != problem.target) & need).any(axis=1), lens)


def _first_failing_row(sop: Node, problem: SearchProblem) -> int | None:
    """Index of the shortest example of ``problem`` on which ``sop`` is wrong."""
    try:
        val = Evaluator(problem.inputs, causal=True)(sop)
    except (RASPError, ValueError, TypeError, OverflowError):
        return int(np.argmin(problem.valid.sum(axis=1)))
    return shortest_failing(((val != problem.target) & problem.target_mask).any(axis=1),
                            problem.valid.sum(axis=1))


def _with_row(problem: SearchProblem, other: SearchProblem, row: int) -> SearchProblem:
    """``problem`` plus example ``row`` of ``other`` (both right-padded to the wider one)."""
    n_new = int(other.valid[row].sum())
    width = max(problem.inputs.shape[1], n_new)

    def widen(a, valid, fill_last=True):
        if a.shape[1] == width:
            return a
        extra = width - a.shape[1]
        last = a[np.arange(a.shape[0]), valid.sum(axis=1) - 1][:, None]
        pad = np.repeat(last, extra, axis=1) if fill_last else np.zeros(
            (a.shape[0], extra), dtype=a.dtype)
        return np.concatenate([a, pad], axis=1)

    def one(a, fill_last=True):
        r = a[row:row + 1, :n_new]
        if n_new < width:
            pad = np.repeat(r[:, -1:], width - n_new, axis=1) if fill_last else np.zeros(
                (1, width - n_new), dtype=a.dtype)
            r = np.concatenate([r, pad], axis=1)
        return r

    inputs = np.concatenate([widen(problem.inputs, problem.valid),
                             one(other.inputs)]).astype(problem.inputs.dtype)
    valid = np.concatenate([widen(problem.valid, problem.valid, False),
                            one(other.valid, False)])
    tmask = np.concatenate([widen(problem.target_mask, problem.valid, False),
                            one(other.target_mask, False)])
    target = np.concatenate([widen(problem.target, problem.valid),
                             one(other.target)]).astype(problem.target.dtype)
    return SearchProblem(inputs, valid, tmask, target, problem.constants, problem.defaults,
                         sorted(set(problem.lengths)), problem.name, problem.symbols,
                         problem.example)
