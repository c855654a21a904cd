"""The RASP-L grammar of the search core (:class:`RaspLGrammar`: a round of the enumeration
engine, its refinement policy) and its search, :func:`search_raspl` (the core's
counterexample-guided loop, :func:`analysis.prediction.search_core.core.cegis`, over that
grammar, on a task's batches or on a batch of your own). Callers use the one entry point,
:func:`analysis.prediction.search.search` (``grammar="raspl"``).
"""

from __future__ import annotations

import time
from typing import Iterable

from threadpoolctl import threadpool_limits

from analysis.prediction.budget import BUDGET_STOP, DEFAULT_SEARCH_BUDGET, BudgetError, Limits
from analysis.prediction.search_core import Loop, Round, SearchResult, cegis

from .engine import _Engine
from .problem import (SearchError, SearchProblem, _first_failing_row, _with_row, matches_problem,
                      problem_from_task)


def search_raspl(target, max_size: int = 6, budget: int = DEFAULT_SEARCH_BUDGET, *,
                 lengths: Iterable[int] = range(1, 7), samples: int = 3, seed: int = 0,
                 validation_lengths: Iterable[int] = range(1, 21), validation_samples: int = 10,
                 validation: SearchProblem | None = None, progress: bool = False,
                 max_memory_mb: float | None = None, prune: bool = True,
                 rules: dict | None = None,
                 combine: int | None = None, threads: int | None = None,
                 time_cap: float | None = None) -> SearchResult:
    """Enumerate RASP-L programs smallest first until one reproduces the target's next-token
    function.

    Args:
        target: a catalogue task (:class:`tasks.base.Task`, next-token or next-set kind) or a
            batch of your own (:class:`SearchProblem`, e.g. :func:`problem_from_examples`).
            For a task the search batch is :func:`problem_from_task` ``(task, lengths,
            samples, seed)``, and a found program must also reproduce a validation batch of
            ``validation_samples`` examples at each of ``validation_lengths`` (seed
            ``seed + 1``); the certificate refers to the search batch's lengths.
        max_size: largest expression size to enumerate.
        budget: candidate programs (:mod:`analysis.prediction.budget`): the enumeration's
            candidates plus the combination's work, over every counterexample round. The
            search stops where the count reaches it, so the result is the same on any
            machine, at any load and with any number of threads.
        combine: the combination's budget in each round, in candidates (None: 15% of what is
            left, 35% after a round restarted for the combination's counterexamples; 0: no
            combination).
        time_cap: a wall-clock safety stop in seconds (None: none); hitting it gives
            ``stopped == "time_cap"``, which no verdict rests on.
        progress: show a progress bar (programs evaluated).
        max_memory_mb: the search's memory in MB (default :func:`default_memory_mb`: 2048,
            3072 for budgets above the default budget): what it keeps and its temporaries,
            counted in bytes of arrays (:class:`.storage.Store`), so where it stops is the
            same on every machine. Once what it keeps fills its share the current size is
            finished without storing (still a complete check of that size) and the search
            stops there (``stopped == "memory"``), as it does when a step cannot be held.
        validation: for a :class:`SearchProblem` target, a larger batch (more lengths, more
            samples); a candidate that reproduces the target is accepted only if it also
            reproduces ``validation``. A candidate that fits the batch by chance shows that
            the batch cannot separate some programs (observational equivalence merged them),
            so the search adds the shortest validation example it gets wrong to the batch and
            starts again (counterexample-guided refinement; ``counterexamples_added``).
        rules: grammar switches (``where``, ``maxmin``, ``sel_andor``: all on by default).
        threads: worker threads that compute the candidate families (default: the
            ``RASP_SEARCH_THREADS`` environment variable, else the usable cores, at most 2);
            the result does not depend on it (the emissions are committed in one order).

    Returns:
        a :class:`~analysis.prediction.search_core.result.SearchResult` (``grammar ==
        "raspl"``): the first (shortest) program found, or the largest size ``k`` such that
        every program of size ``<= k`` was ruled out.

    Raises:
        SearchError: an unusable task (not a next-token task, no allowed length, ...), a
            negative ``max_size``, a budget below 1 or a bad time cap.
    """
    if not isinstance(target, SearchProblem):
        task, target = target, problem_from_task(target, lengths, samples, seed)
        validation = problem_from_task(task, validation_lengths, validation_samples, seed + 1)
    if max_size < 0:
        raise SearchError("max_length must be >= 0")
    try:
        limits = Limits(budget, time_cap)
    except BudgetError as e:
        raise SearchError(str(e)) from None
    if limits.budget < 1:
        raise SearchError("budget must be at least 1 candidate program")
    if max_memory_mb is None:
        max_memory_mb = default_memory_mb(limits.budget)
    start = time.perf_counter()
    g = RaspLGrammar(target, limits, max_size, progress, max_memory_mb, validation, prune,
                     rules, combine, threads)
    loop = cegis(g, limits.budget)
    return g.result(loop, time.perf_counter() - start)


#: the search's memory in MB by default (``--memory-mb``) ...
DEFAULT_MEMORY_MB = 2048
#: ... and for budgets above :data:`analysis.prediction.budget.DEFAULT_SEARCH_BUDGET` (the
#: predictions doc's deep searches: boolean_and at 180M finds its size-13 program from 3 GB on)
DEEP_MEMORY_MB = 3072


def default_memory_mb(budget: int) -> int:
    """The default memory of a search with ``budget`` candidates (a function of the settings,
    never of the machine): :data:`DEFAULT_MEMORY_MB`, :data:`DEEP_MEMORY_MB` above the
    default budget."""
    return DEFAULT_MEMORY_MB if budget <= DEFAULT_SEARCH_BUDGET else DEEP_MEMORY_MB


class RaspLGrammar:
    """The RASP-L search grammar behind :class:`~analysis.prediction.search_core.core.Grammar`: a
    round is one run of the enumeration engine (:class:`~.engine._Engine`) on the current
    batch, then the combination; refinement adds validation examples to the batch.

    Policy (the arguments of :func:`search_raspl`): a program that fits the batch but not
    ``validation`` gives its shortest failing validation example (20 at most, and none once
    the budget is spent: ``stopped == "budget"``); terms of the combination that fit the batch
    by chance give theirs while the rounds have spent under 70% of the budget, and the next
    round only rebuilds the pool of terms (it enumerates the sizes already certified: no
    program of those sizes fits the larger batch) and gives the combination 35% of what is
    left instead of 15%.
    """

    name = "the RASP-L search grammar"
    measure = "expression size"

    def __init__(self, problem: SearchProblem, limits: Limits, max_length: int, progress: bool,
                 max_memory_mb: float, validation: SearchProblem | None, prune: bool,
                 grammar: dict | None, combine: int | None, threads: int | None):
        self.problem, self.limits, self.max_length = problem, limits, max_length
        self.progress, self.max_bytes = progress, int(max_memory_mb * 2**20)
        self.validation, self.prune, self.grammar = validation, prune, grammar
        self.combine, self.threads = combine, threads
        self.validate = (lambda node: matches_problem(node, validation)) if validation else None
        self.explored = 0           # the enumeration's candidates over the rounds
        self.added = 0              # counterexamples added to the batch
        self.cap = max_length       # sizes a round enumerates exhaustively
        # the combination's share of the work: a unit of it (a term scanned) costs about 2.8
        # enumerated candidates of CPU time (count: 869k candidates / CPU-s, 312k units /
        # CPU-s), so 15% of the work is the 30% of the time it had when the search stopped on
        # seconds
        self.comb_share = 0.15

    def round(self, left: int) -> Round:
        comb = int(self.comb_share * left if self.combine is None else
                   min(self.combine, 0.9 * left))
        g = dict(self.grammar or {})
        g["combine_budget"] = comb
        eng = _Engine(self.problem, self.limits.sub(max(left - comb, 1)), self.cap,
                      self.progress, self.max_bytes, self.validate, prune=self.prune, grammar=g,
                      threads=self.threads)
        eng.validation = self.validation
        # one BLAS thread: the products are many and small; OpenBLAS's extra threads spin
        # and cost CPU time without saving wall time (bench/bench_search.py measures it)
        with threadpool_limits(limits=1, user_api="blas"):
            out = eng.run()
        self.explored += out.explored
        rows = list(eng.counterexample_rows)
        if eng.spurious_node is not None:
            # a chance fit: the shortest validation example it gets wrong
            row = _first_failing_row(eng.spurious_node, self.validation)
            rows = [] if row is None else [row]
            if row is None:
                out.stopped = "spurious"
        elif out.found:
            rows = []
        return Round(out.work, out.stopped, None if out.found else out.certified_below,
                     out.program if out.found else None, rows,
                     (out, eng.spurious_node is not None))

    def refine(self, rnd: Round, spent: int, rounds: int) -> str | None:
        out, spurious = rnd.detail
        budget = self.limits.budget
        if not spurious:
            if self.added >= 20 or spent >= 0.7 * budget:
                return out.stopped
            # terms of the combination that fit the batch by chance: their counterexamples
            # join the batch (the certificate stays sound: more examples, same grammar). The
            # next round only rebuilds the pool of terms for the combination: no program of
            # the sizes this round certified fits the smaller batch, so none fits the new one
            # and enumerating past them again (to the memory limit) would find nothing new;
            # the combination gets the time instead
            for row in rnd.counterexamples:
                self.problem = _with_row(self.problem, self.validation, row)
                self.added += 1
            self.cap = min(self.cap, max(out.certified_below, 1))
            self.comb_share = 0.35       # (60% of the time)
            return None
        # counterexample-guided refinement: add the shortest validation example that the
        # chance fit gets wrong, so that the batch separates it from the task; start again
        if self.added >= 20 or spent >= budget:
            return BUDGET_STOP
        self.problem = _with_row(self.problem, self.validation, rnd.counterexamples[0])
        self.added += 1
        return None

    def result(self, loop: Loop, seconds: float) -> SearchResult:
        """The last round's :class:`SearchResult` with the loop's totals and certificate."""
        out = loop.last.detail[0]
        out.stopped = loop.stopped
        out.explored = self.explored
        out.combine_work = loop.spent - self.explored
        out.budget = self.limits.budget
        out.seconds = seconds
        out.counterexamples_added = self.added
        out.max_size = self.max_length
        if out.found_by != "enumeration":
            out.certified_below = max(out.certified_below,
                                      -1 if loop.certified is None else loop.certified)
        if out.certified_below < 0:         # the engine's -1: no size completed
            out.certified_below = None
        return out
