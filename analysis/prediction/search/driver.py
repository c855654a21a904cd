"""The search's entry points: :func:`search` (rounds of enumeration with counterexample-guided
refinement, the best certificate of any round kept) and :func:`search_task` (a task's next-token
function as a problem).
"""

from __future__ import annotations

import time
from typing import Iterable

from threadpoolctl import threadpool_limits

from analysis.prediction.budget import (BUDGET_STOP, DEFAULT_SEARCH_BUDGET, TIME_CAP_STOP,
                                        BudgetError, Limits)

from .engine import _Engine
from .problem import (SearchError, SearchProblem, SearchResult, _first_failing_row, _with_row,
                      matches_problem, problem_from_task)


def search(problem: SearchProblem, max_length: int = 6,
           budget: int = DEFAULT_SEARCH_BUDGET, progress: bool = False, max_memory_mb: float = 1024,
           validation: SearchProblem | None = None, prune: bool = True,
           grammar: dict | None = None, combine: int | None = None,
           threads: int | None = None, time_cap: float | None = None) -> SearchResult:
    """Enumerate RASP-L programs smallest first until one reproduces ``problem``.

    Args:
        problem: the batch and the expected next tokens (:func:`problem_from_task`).
        max_length: largest program length to try (program length of language.md §4).
        budget: candidate programs (:mod:`analysis.prediction.budget`): the enumeration's
            candidates plus the combination's work, over every counterexample round. The
            search stops where the count reaches it, so the result is the same on any
            machine, at any load and with any number of threads.
        combine: the combination's budget in each round, in candidates (None: 15% of what is
            left, 35% after a round restarted for the combination's counterexamples; 0: no
            combination).
        time_cap: a wall-clock safety stop in seconds (None: none); hitting it gives
            ``stopped == "time_cap"``, which no verdict rests on.
        progress: show a tqdm progress bar (programs evaluated).
        max_memory_mb: memory for stored values; once it is used up the current length is
            finished without storing (still a complete check of that length) and the search
            stops there (``stopped == "memory_limit"``).
        validation: a larger batch (more lengths, more samples); a candidate that reproduces
            ``problem`` is accepted only if it also reproduces ``validation``. A candidate
            that fits ``problem`` by chance shows that the batch cannot separate some programs
            (observational equivalence merged them), so the search adds the shortest
            validation example it gets wrong to the batch and starts again
            (counterexample-guided refinement; ``counterexamples_added`` in the result).
        threads: worker threads that compute the candidate families (default: the
            ``RASP_SEARCH_THREADS`` environment variable, else the usable cores, at most 2);
            the result does not depend on it (the emissions are committed in one order).

    Returns:
        a :class:`SearchResult`: the first (shortest) program found, or the largest length
        ``k`` such that every program of length ``<= k`` was ruled out.

    Raises:
        SearchError: a negative ``max_length``, a budget below 1 or a bad time cap.
    """
    if max_length < 0:
        raise SearchError("max_length must be >= 0")
    try:
        limits = Limits(budget, time_cap)
    except BudgetError as e:
        raise SearchError(str(e)) from None
    if limits.budget < 1:
        raise SearchError("budget must be at least 1 candidate program")
    validate = (lambda node: matches_problem(node, validation)) if validation else None
    start = time.perf_counter()
    explored = 0
    work = 0                    # what the budget counts: candidates and combination work
    added = 0
    cap = max_length            # sizes this round enumerates exhaustively
    best_cert = -1              # the best certificate of any round (each batch contains the
    # the combination's share of the work: a unit of it (a term scanned) costs about 2.8
    # enumerated candidates of CPU time (count: 869k candidates / CPU-s, 312k units / CPU-s),
    # so 15% of the work is the 30% of the time it had when the search stopped on seconds
    comb_share = 0.15           # ones before it, so each round's certificate holds)
    while True:
        left = budget - work
        comb = int(comb_share * left if combine is None else min(combine, 0.9 * left))
        g = dict(grammar or {})
        g["combine_budget"] = comb
        res = _Engine(problem, limits.sub(max(left - comb, 1)), cap, progress,
                      int(max_memory_mb * 2**20), validate, prune=prune, grammar=g,
                      threads=threads)
        res.validation = validation
        # one BLAS thread: the products are many and small; OpenBLAS's extra threads spin
        # and cost CPU time without saving wall time (bench/bench_search.py measures it)
        with threadpool_limits(limits=1, user_api="blas"):
            out = res.run()
        explored += out.explored
        work += out.work
        if not out.found:
            best_cert = max(best_cert, out.certified_below)
        if out.stopped == TIME_CAP_STOP:
            break
        if res.spurious_node is None:
            if out.found or not res.counterexample_rows or added >= 20 or \
                    work >= 0.7 * budget:
                break
            # terms of the combination that fit the batch by chance: their counterexamples
            # join the batch (the certificate stays sound: more examples, same grammar). The
            # next round only rebuilds the pool of terms for the combination: no program of
            # the sizes this round certified fits the smaller batch, so none fits the new one
            # and enumerating past them again (to the memory limit) would find nothing new;
            # the combination gets the time instead
            for row in res.counterexample_rows:
                problem = _with_row(problem, validation, row)
                added += 1
            cap = min(cap, max(out.certified_below, 1))
            comb_share = 0.35       # (60% of the time)
            continue
        # counterexample-guided refinement: add the shortest validation example that the
        # chance fit gets wrong, so that the batch separates it from the task; start again
        row = _first_failing_row(res.spurious_node, validation)
        if row is None or added >= 20 or work >= budget:
            out.stopped = BUDGET_STOP if row is not None else "spurious"
            out.certified_below = max(out.certified_below, -1)
            break
        problem = _with_row(problem, validation, row)
        added += 1
    out.explored = explored
    out.combine_work = work - explored
    out.budget = limits.budget
    out.seconds = time.perf_counter() - start
    out.counterexamples_added = added
    out.max_length = max_length
    if out.found_by != "enumeration":
        out.certified_below = max(out.certified_below, best_cert)
    return out


def search_task(task, max_length: int = 6, budget: int = DEFAULT_SEARCH_BUDGET,
                lengths: Iterable[int] = range(1, 7), samples: int = 3, seed: int = 0,
                progress: bool = False, validation_lengths: Iterable[int] = range(1, 21),
                validation_samples: int = 10, max_memory_mb: float = 1024,
                combine: int | None = None, grammar: dict | None = None,
                threads: int | None = None, time_cap: float | None = None) -> SearchResult:
    """Search the shortest RASP-L next-token program of a catalogue task.

    The search batch is :func:`problem_from_task` ``(task, lengths, samples, seed)``; a found
    program must also reproduce a validation batch of ``validation_samples`` examples at each of
    ``validation_lengths`` (seed ``seed + 1``). The certificate refers to the search batch's
    lengths (see :class:`SearchResult`). ``budget`` (candidate programs) and ``time_cap``
    (a wall-clock safety stop) as :func:`search`. Raises :class:`SearchError` for an unusable
    task or a bad budget.
    """
    problem = problem_from_task(task, lengths, samples, seed)
    validation = problem_from_task(task, validation_lengths, validation_samples, seed + 1)
    return search(problem, max_length, budget, progress, max_memory_mb, validation,
                  grammar=grammar, combine=combine, threads=threads, time_cap=time_cap)
