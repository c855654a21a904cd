"""The one search core both grammars run on: the certificate, the result, a round, the grammar
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

* RASP-L (:class:`analysis.prediction.search.driver.RaspLGrammar`): expressions of the RASP-L
  search grammar, size = expression size (every operation at every use), unit = candidate
  programs (plus the combination's work);
* C-RASP (:class:`analysis.prediction.crasp_search.driver.CRaspGrammar`): Booleans and counts
  of C-RASP[] or C-RASP[periodic, local] in decision lists, size = C-RASP size, unit =
  candidate Booleans and counts.

Each grammar owns its batch (the RASP-L :class:`~analysis.prediction.search.problem.
SearchProblem` arrays, the C-RASP rows of values) and its refinement policy (how many
counterexamples, how much of the budget a restart may take); :func:`cegis` owns the loop, the
work count and the certificate. Found programs are IR s-ops printed as ``.rasp`` source by
:func:`rasp.source.program_to_source` (:func:`program_source`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from analysis.prediction.budget import TIME_CAP_STOP
from rasp.source import program_to_source

__all__ = ["Certificate", "Round", "Grammar", "Result", "Loop", "cegis", "program_source",
           "best_bound", "shortest_failing"]


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
            ``counterexamples``), ``"budget"``, ``"time_cap"``, ``"memory_limit"``,
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


class Result(Protocol):
    """What every search returns (:class:`~analysis.prediction.search.problem.SearchResult`,
    :class:`~analysis.prediction.crasp_search.driver.CRaspResult`): whether a program was
    found, the program (an IR s-op) and its ``.rasp`` source, its size in the grammar's
    measure, the certificate, why it stopped, the work spent (``explored``, candidates) of
    its ``budget``, the counterexamples added and the wall seconds (reported, never a
    stopping rule)."""

    found: bool
    program: Any
    source: str | None
    certified_below: int | None
    stopped: str
    explored: int
    budget: int | None
    seconds: float
    counterexamples_added: int

    @property
    def size(self) -> int | None: ...

    @property
    def certificate(self) -> Certificate: ...


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


def program_source(program) -> str | None:
    """A found program as ``.rasp`` source (:func:`rasp.source.program_to_source`), None for
    none; every search prints its candidates this one way."""
    if program is None:
        return None
    return program_to_source(program)
