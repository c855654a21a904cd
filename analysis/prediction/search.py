"""The program search's one entry point: :func:`search` (a task, a grammar, a work budget) and
its cache (:func:`cached_search`).

The RASP-Generalization Conjecture (Zhou et al. 2023, arXiv 2310.16028, §3) predicts length
generalization from the *shortest* RASP-L program of a task's next-token function; Huang et
al. 2025 (arXiv 2410.02140) from the existence of a C-RASP[] (NoPE) or C-RASP[periodic, local]
(learned APE with random offsets) program. A search enumerates a grammar's programs smallest
first and returns the first that reproduces the task, or certifies that none of size <= k
does. The grammars are packages of their own on one core (:mod:`analysis.prediction.search_core`):

* ``"raspl"`` — the RASP-L search grammar (:mod:`analysis.prediction.raspl_search`), size =
  expression size, budget in candidate programs;
* ``"crasp"``, ``"crasp_pl"`` — C-RASP[] and C-RASP[periodic, local] decision lists
  (:mod:`analysis.prediction.crasp_search`), size = C-RASP size, budget in candidate Booleans
  and counts.

Every search returns one type, :class:`~analysis.prediction.search_core.result.SearchResult`;
``rasp search`` and the predictor (:mod:`analysis.prediction.predict`) call this module only.
"""

from __future__ import annotations

import tasks
from analysis.prediction.crasp_search import search_crasp
from analysis.prediction.raspl_search import SearchProblem, search_raspl
from analysis.prediction.search_core import GRAMMARS, SearchError, SearchResult

__all__ = ["search", "cached_search", "clear_search_cache", "GRAMMARS", "SearchResult",
           "SearchError"]


def search(task, grammar: str = "raspl", budget: int | None = None, *,
           max_size: int | None = None, time_cap: float | None = None,
           max_memory_mb: float | None = None, progress: bool = False,
           threads: int | None = None, **options) -> SearchResult:
    """Search the smallest program of ``grammar`` that reproduces ``task``'s next-token
    function, within a work budget.

    Args:
        task: a :class:`tasks.base.Task` (next-token or next-set kind), its catalogue name, or,
            for ``"raspl"`` only, a batch of your own
            (:class:`analysis.prediction.raspl_search.SearchProblem`, e.g. from
            :func:`~analysis.prediction.raspl_search.problem_from_examples`).
        grammar: ``"raspl"``, ``"crasp"`` or ``"crasp_pl"`` (:data:`GRAMMARS`).
        budget: work units (:mod:`analysis.prediction.budget`: candidate programs for RASP-L,
            candidate Booleans and counts for C-RASP; default the grammar's,
            ``DEFAULT_SEARCH_BUDGET`` / ``DEFAULT_CRASP_BUDGET``): where the search stops is a
            function of the task, the grammar, the budget and the code version, never of the
            machine.
        max_size: largest size enumerated, in the grammar's measure (default: 6 expression
            size for RASP-L, 14 C-RASP size).
        time_cap: a wall-clock safety stop in seconds (None: none); a search it stops says
            ``stopped == "time_cap"`` and no verdict rests on it.
        max_memory_mb: the search's memory in MB (RASP-L: every array it keeps and its
            temporaries, counted in bytes, default 2048, 3072 above the default budget; C-RASP:
            stored values, default 768);
            where it is spent the search stops with ``stopped == "memory"``.
        progress, threads: a progress bar and the worker threads of the RASP-L enumeration
            (the C-RASP enumeration has neither: they are ignored there).
        options: the grammar's own settings, passed on:
            :func:`analysis.prediction.raspl_search.search_raspl` (``lengths``, ``samples``,
            ``seed``, ``validation_lengths``, ``validation_samples``, ``validation``,
            ``combine``, ``rules``, ``prune``) or
            :func:`analysis.prediction.crasp_search.search_crasp` (``lengths``, ``samples``,
            ``seed``, ``verify_max_length``, ``uniform``, ``max_rounds``, ``nope_first``,
            ``greedy``, ...).

    Returns:
        a :class:`~analysis.prediction.search_core.result.SearchResult` with ``grammar`` set
        (a C-RASP search it cannot run says ``stopped == "refused: ..."``).

    Raises:
        SearchError: an unknown grammar, a batch of your own for a C-RASP grammar, or (RASP-L)
            a task that gives no usable problem, a negative size or a bad budget.
        tasks.UnknownTaskError: a name that is not a catalogue task.
        analysis.prediction.budget.BudgetError: (C-RASP) a negative budget or a bad time cap.
        TypeError: an option the grammar does not take.
    """
    if grammar not in GRAMMARS:
        raise SearchError(f"unknown search grammar {grammar!r}: one of {', '.join(GRAMMARS)}")
    if isinstance(task, str):
        task = tasks.get_task(task)
    kw = {k: v for k, v in (("budget", budget), ("max_size", max_size),
                            ("max_memory_mb", max_memory_mb)) if v is not None}
    if grammar == "raspl":
        return search_raspl(task, time_cap=time_cap, progress=progress, threads=threads,
                            **kw, **options)
    if isinstance(task, SearchProblem):
        raise SearchError("the C-RASP search samples its own batches and verifies against the "
                          "task: give it a task, not a batch of examples")
    return search_crasp(task, grammar, time_cap=time_cap, **kw, **options)


_CACHE: dict = {}


def cached_search(task, grammar: str = "raspl", **settings) -> SearchResult:
    """:func:`search` once per (task, grammar, settings) in this process: the predictor asks
    for a task's searches once per positional encoding. A task is told apart by its name and,
    for a task file, its ``sha256``; ``progress`` is not part of the key. A search that raises
    :class:`SearchError` raises it again from the cache. Memory grows with the searches kept:
    :func:`clear_search_cache` forgets them (the predictor's ``clear_search_caches``).

    Raises:
        SearchError: as :func:`search`.
    """
    key = (task.name, getattr(task, "sha256", None), grammar,
           tuple(sorted((k, v) for k, v in settings.items() if k != "progress")))
    if key not in _CACHE:
        try:
            _CACHE[key] = search(task, grammar, **settings)
        except SearchError as e:
            _CACHE[key] = e
    got = _CACHE[key]
    if isinstance(got, SearchError):
        raise got
    return got


def clear_search_cache() -> None:
    """Forget every search :func:`cached_search` kept."""
    _CACHE.clear()
