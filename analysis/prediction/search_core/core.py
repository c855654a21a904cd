"""The one search core both grammars run on: the problem, the certificate, a round, the grammar
interface and the counterexample-guided loop (CEGIS; Solar-Lezama et al. 2006).

A search asks for the smallest program of a grammar that reproduces a task's next-token
function. Each grammar enumerates its programs smallest first on a fixed *search batch* of
examples (one **round**); a program that fits the batch is checked on larger batches, and the
shortest example it gets wrong (a **counterexample**) joins the search batch for the next round.
Batches only grow, so every round's certificate ("no program of size <= k in this grammar fits
the batch") holds for the task; the loop keeps the best one. Work is counted in the grammar's
unit (:mod:`analysis.prediction.budget`), summed over the rounds, so where a search stops is a
function of the task, the grammar, the budget and the code version, never of the machine.

The two grammars behind :class:`Grammar`:

* RASP-L (:class:`analysis.prediction.raspl_search.driver.RaspLGrammar`): expressions of the
  RASP-L search grammar, size = expression size (every operation at every use), unit = candidate
  programs (plus the combination's work);
* C-RASP (:class:`analysis.prediction.crasp_search.driver.CRaspGrammar`): Booleans and counts
  of C-RASP[] or C-RASP[periodic, local] in decision lists, size = C-RASP size, unit =
  candidate Booleans and counts.

Both grammars search one kind of problem, :class:`Problem` (examples as rows of program values,
drawn from a task by :func:`task_problem`; a task's hard cases by :func:`hard_rows`, every
short body by :func:`exhaustive_rows`). Each grammar encodes it in its own batch form (the
RASP-L :class:`~analysis.prediction.raspl_search.problem.SearchProblem` arrays, the C-RASP
``_Batch``) and owns its refinement policy (how many counterexamples, how much of the budget a
restart may take); :func:`cegis` owns the loop, the work count and the certificate. Found
programs are IR s-ops printed as ``.rasp`` source by :func:`rasp.source.program_to_source`
(:func:`program_source`); both grammars return one result type, :class:`.result.SearchResult`.
"""

from __future__ import annotations

import functools
import itertools as it
from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol

import numpy as np

from analysis.prediction.budget import TIME_CAP_STOP
from rasp import Session
from rasp.ir import RASPError
from rasp.source import program_to_source
from tasks.base import next_token_examples

__all__ = ["Problem", "SearchError", "task_problem", "hard_rows", "exhaustive_rows",
           "Certificate", "Round", "Grammar", "Loop", "cegis", "program_source",
           "task_symbols", "task_example", "best_bound", "shortest_failing"]


# --------------------------------------------------------------------------------------------
# The problem both grammars search
# --------------------------------------------------------------------------------------------

class SearchError(RASPError, ValueError):
    """The search cannot be set up: a task that gives no usable problem (not a next-token
    task, no allowed length, program values that do not map back to the token ids), a bad
    budget, mixed value types, ..."""


@dataclass
class Problem:
    """The examples a program must reproduce, the same for both grammars.

    Attributes:
        rows: ``(values, first)`` per example: ``values`` the program values of the whole
            example (``prompt + answer``, e.g. ``BOS w SEP answer EOS``), ``first`` =
            ``len(prompt)``; positions ``t >= first - 1`` up to the second-to-last must predict
            ``values[t + 1]`` (the next-token function). No two rows are equal.
        lengths: the task lengths the rows were drawn at.
        special: the program values of the task's special tokens (BOS, SEP, EOS) that exist,
            which a grammar may use as constants.
        name: the task's name.
    """

    rows: list
    lengths: list
    special: list = field(default_factory=list)
    name: str = "problem"


def task_problem(task, lengths: Iterable[int], samples: int, seed: int,
                 mutants: int = 0) -> Problem:
    """The search problem of a next-token or next-set task: ``samples`` examples drawn with
    ``task.sample(n, rng)`` (``numpy.random.default_rng(seed)``) at each allowed length ``n``,
    in that order, as program values (``task.program_tokens``; each answer value must map back
    to its token id with ``task.program_output_to_id``); a next-set example enters as one
    next-token example per string position (:func:`tasks.base.next_token_examples`); a row
    equal to an earlier one is dropped.

    Args:
        mutants: near misses per drawn example (two adjacent body tokens swapped, or one
            replaced by another content symbol, answered by ``task.ground_truth``; bodies the
            task refuses are skipped), since a sampler rarely draws them; 0 for none (then the
            generator draws exactly the task's samples).

    Raises:
        SearchError: not a next-token or next-set task, none of the lengths allowed, or
            program values that do not map back to the token ids.
    """
    if task.kind not in ("next_token", "next_set"):
        raise SearchError(f"task {task.name!r} is a per-position sequence program, not a "
                           "next-token task: the search looks for next-token programs")
    rng = np.random.default_rng(seed)
    rows, seen, used = [], set(), []
    values = task.vocab.values
    content = ([i for i, v in enumerate(values) if isinstance(v, int) and v >= 0]
               if mutants else [])

    def add(prompt, answer):
        for pp, aa in next_token_examples(task, prompt, answer):
            ids = list(pp) + list(aa)
            if tuple(ids) in seen:
                continue
            seen.add(tuple(ids))
            vals = _plain(task.program_tokens(ids))
            if len(vals) != len(ids):
                raise SearchError(f"task {task.name}: program_tokens changed the length")
            for t in range(len(pp), len(ids)):
                if task.program_output_to_id(vals[t]) != ids[t]:
                    raise SearchError(f"task {task.name}: program value {vals[t]!r} does "
                                       f"not map back to token id {ids[t]}")
            rows.append((vals, len(pp)))

    for n in lengths:
        if not task.length_ok(n):
            continue
        used.append(n)
        for _ in range(samples):
            p, a = task.sample(n, rng)
            add(p, a)
            if not mutants:
                continue
            body = [k for k in range(1, len(p))
                    if isinstance(values[p[k]], int) and values[p[k]] >= 0]
            for _ in range(mutants if body else 0):
                q = list(p)
                k = int(rng.choice(body))
                if rng.random() < 0.5 and k + 1 in body:
                    q[k], q[k + 1] = q[k + 1], q[k]
                else:
                    q[k] = int(rng.choice(content))
                try:
                    ans = task.ground_truth(q)
                except Exception:  # noqa: BLE001 - not a valid prompt of the task
                    continue
                add(q, ans)
    if not used:
        raise SearchError(f"task {task.name} allows none of the lengths {list(lengths)}")
    special = []
    for tid in (task.vocab.bos, task.vocab.sep, task.vocab.eos):
        if tid is None:
            continue
        try:
            special.append(_plain(task.program_tokens([tid]))[-1])
        except Exception:  # noqa: BLE001 - a task may refuse a lone special token
            continue
    return Problem(rows, used, special, task.name)


def _rows_of(task, prompts, seen: set) -> list:
    """Rows (:class:`Problem`) of ``prompts`` answered by ``task.ground_truth`` (prompts it
    refuses are skipped), none equal to a row in ``seen`` (updated)."""
    rows = []
    for prompt in prompts:
        try:
            ans = task.ground_truth(prompt)
        except Exception:  # noqa: BLE001 - not a prompt the task answers
            continue
        for pp, aa in next_token_examples(task, prompt, ans):
            ids = list(pp) + list(aa)
            row = _plain(task.program_tokens(ids))
            if tuple(row) not in seen:
                seen.add(tuple(row))
                rows.append((row, len(pp)))
    return rows


def hard_rows(task, lengths: Iterable[int], per_length: int) -> list:
    """The task's hard cases (:meth:`tasks.base.Task.verification_prompts`: for a formal
    language every DFA transition towards acceptance and rejection and counting adversaries)
    at each allowed length, at most ``per_length`` each, as :class:`Problem` rows: the strings
    a sampler rarely draws and the final verification checks (e.g. Dyck-1 at its depth bound)."""
    rows, seen = [], set()
    for n in lengths:
        if task.length_ok(n):
            rows += _rows_of(task, task.verification_prompts(n)[:per_length], seen)
    return rows


def exhaustive_rows(task, content, budget: int) -> list:
    """Every prompt ``BOS body SEP`` (``BOS body`` for a next-set task) with a body over the
    content values ``content``, lengths 1, 2, ... (at most 16) while the number of bodies stays
    within ``budget``, as :class:`Problem` rows (the task's own ``ground_truth`` answers; bodies
    it refuses are skipped): short counterexamples a sampler rarely draws. Empty for a task
    without BOS (or SEP, for a next-token task) or a budget <= 0."""
    voc = task.vocab
    next_set = task.kind == "next_set"
    if voc.bos is None or (voc.sep is None and not next_set) or budget <= 0:
        return []
    ids = [voc.id_of_value(int(c)) for c in content]
    rows, seen, total, n = [], set(), 0, 1
    while total + len(ids) ** n <= budget and n <= 16:
        if task.length_ok(n):
            rows += _rows_of(task, ([voc.bos, *body] + ([] if next_set else [voc.sep])
                                    for body in it.product(ids, repeat=n)), seen)
        total += len(ids) ** n
        n += 1
    return rows


def _plain(values) -> list:
    """Program values as plain Python values (NumPy integers, Booleans and integral floats as
    ``int``)."""
    out = []
    for v in values:
        if isinstance(v, (bool, np.bool_, np.integer)):
            out.append(int(v))
        elif isinstance(v, (float, np.floating)) and float(v).is_integer():
            out.append(int(v))
        else:
            out.append(v)
    return out


def best_bound(a: int | None, b: int | None) -> int | None:
    """The larger of two certificate bounds (None: no bound)."""
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


@dataclass(frozen=True)
class Certificate:
    """A bounded search certificate: no program of size ``<= bound`` in ``grammar`` reproduces
    the task (on its search batch, and so on every batch that contains it).

    Attributes:
        bound: the size bound, or None (no size completed: nothing is certified).
        grammar: the grammar's name as a verdict states it (``"the RASP-L search grammar"``,
            ``"C-RASP[]"``, ...).
        measure: the size measure (``"expression size"``, ``"C-RASP size"``).
    """

    bound: int | None
    grammar: str
    measure: str

    @property
    def holds(self) -> bool:
        """Whether it rules anything out (a bound of at least 1: size 0 has no operation)."""
        return self.bound is not None and self.bound >= 1

    def text(self) -> str:
        """``no program <= k (grammar, measure)`` or ``nothing certified``."""
        if self.bound is None:
            return "nothing certified"
        return f"no program <= {self.bound} ({self.grammar}, {self.measure})"


@dataclass
class Round:
    """One round of a grammar's enumeration on a fixed batch.

    Attributes:
        work: budget units the round spent (candidates).
        stopped: why it ended: ``"found"``, ``"refine"`` (a chance fit refuted: see
            ``counterexamples``), ``"budget"``, ``"time_cap"``, ``"memory"``,
            ``"max_length"`` / ``"max_size"``, ``"spurious"``, ``"refused: ..."``.
        certified: the size bound this round certified, or None (none, or one the loop must
            not count, such as the round of a program found by enumeration).
        program: a program that passed the round's checks (None: none).
        counterexamples: examples (in the grammar's own form) that refute a program that fit
            the batch by chance; they join the batch if the loop goes on.
        detail: what the grammar keeps about the round for its result (engine output, ...).
    """

    work: int
    stopped: str
    certified: int | None = None
    program: Any = None
    counterexamples: list = field(default_factory=list)
    detail: Any = None


class Grammar(Protocol):
    """A grammar the core loop searches: one round on its current batch, then refinement.

    ``round(left)`` enumerates on the current batch with ``left`` budget units; ``refine(rnd,
    spent, rounds)`` (called for a round with counterexamples and no program; ``rounds`` =
    rounds refined before) adds them to the batch and returns None to go on, or
    the ``stopped`` value the search ends with (its policy: rounds at most, share of the budget
    a restart may take, the wall-clock cap)."""

    name: str
    measure: str

    def round(self, left: int) -> Round: ...

    def refine(self, rnd: Round, spent: int, rounds: int) -> str | None: ...


@dataclass
class Loop:
    """What :func:`cegis` returns: the last round, the work over every round, the rounds
    refined, the best certificate of any round (:func:`best_bound` over the rounds'
    ``certified``) and why it stopped."""

    last: Round
    spent: int
    rounds: int
    certified: int | None
    stopped: str

    def certificate(self, grammar: Grammar) -> Certificate:
        return Certificate(self.certified, grammar.name, grammar.measure)


def cegis(grammar: Grammar, budget: int) -> Loop:
    """Run ``grammar``'s rounds until one gives a program, ends without a counterexample (its
    ``stopped`` stands), or the grammar's refinement policy stops the loop.

    Args:
        grammar: a :class:`Grammar` (its batch and limits set up).
        budget: work units for all rounds together; round ``r`` gets ``budget - spent``.

    Returns:
        :class:`Loop` (never raises for a search that stops: ``stopped`` says why; a wall-clock
        cap gives ``"time_cap"`` and no refinement after it).
    """
    spent, rounds, cert = 0, 0, None
    while True:
        rnd = grammar.round(budget - spent)
        spent += rnd.work
        cert = best_bound(cert, rnd.certified)
        if rnd.program is not None or rnd.stopped == TIME_CAP_STOP or not rnd.counterexamples:
            return Loop(rnd, spent, rounds, cert, rnd.stopped)
        stop = grammar.refine(rnd, spent, rounds)
        if stop is not None:
            return Loop(rnd, spent, rounds, cert, stop)
        rounds += 1


def shortest_failing(bad, lengths) -> int | None:
    """The counterexample both grammars take: the index of the shortest example with
    ``bad[i]`` (the first of equal length), or None when none is bad.

    Args:
        bad: ``[n]`` bool, the examples a candidate gets wrong.
        lengths: ``[n]`` their lengths (valid positions).
    """
    rows = np.flatnonzero(bad)
    if rows.size == 0:
        return None
    return int(rows[np.argmin(np.asarray(lengths)[rows])])


def program_source(program, task=None, *, symbols: dict | None = None,
                   example: list | None = None) -> str | None:
    """A found program as ``.rasp`` source (:func:`rasp.source.program_to_source`), None for
    none; every search prints its candidates this one way: runnable as printed (the REPL,
    ``rasp verify --program``), its token constants written as the task's symbols, one input
    of the task as the REPL's running example.

    Args:
        program: the program's output s-op, or None.
        task: the task it was found for: gives ``symbols`` (:func:`task_symbols`) and
            ``example`` (:func:`task_example`).
        symbols: program value -> token name; None: values as numbers.
        example: program values of one input (``set example [...]``); None: none.
    """
    if program is None:
        return None
    if task is not None:
        symbols, example = task_symbols(task), task_example(task)
    return program_to_source(program, symbols=symbols, example=example,
                             reserved=_repl_names())


def task_symbols(task) -> dict:
    """The symbols a task's program values stand for: program value -> token name
    (``task.vocab``), as :func:`program_source` writes them."""
    return dict(zip(task.vocab.values, task.vocab.tokens))


def task_example(task, length: int = 3) -> list:
    """The program values of one seeded input of ``task`` (``BOS w SEP ...``, the prompt
    only) at the first allowed length from ``length`` on: the running example a printed
    program sets for the REPL.

    Raises:
        SearchError: the task allows no length from ``length`` to ``length + 20``.
    """
    for n in range(length, length + 21):
        if task.length_ok(n):
            prompt, _ = task.sample(n, np.random.default_rng(0))
            return _plain(task.program_tokens(list(prompt)))
    raise SearchError(f"task {task.name} allows no length in {length}..{length + 20}")


@functools.cache
def _repl_names() -> frozenset:
    """The names the REPL will not let a program rebind (built-ins, the library's names)."""
    return frozenset(Session().base_env.keys())
