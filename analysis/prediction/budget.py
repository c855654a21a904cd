"""Search budgets counted in work, never in seconds (``../shared/spec/predictor.md`` §5).

A verdict must be a function of the task, the positional encoding, the budget and the code
version: the same on an idle and on a busy machine, with one thread or two. So both searches
stop on *work*:

* the RASP-L search (:mod:`analysis.prediction.search`): **candidate programs** -- every
  s-op and selector the enumeration evaluates (its ``explored``), plus the combination's work
  in the same unit (each decision-list step scans its pool of terms: one unit per term; each
  deep-aggregate (key, query) pair tested and each term evaluated is one unit);
* the C-RASP search (:mod:`analysis.prediction.crasp_search`): **candidate Booleans and
  counts** evaluated by its enumeration (its ``explored``), summed over its counterexample
  rounds and, for C-RASP[periodic, local], its passes.

A wall-clock cap (``time_cap``, seconds, off by default) may stay as a safety stop; a search
that hits it says ``stopped == "time_cap"`` and its verdict is ``unknown (time cap)`` -- never a
certificate and never another verdict, since where it stopped depends on the machine.

The defaults (:data:`DEFAULT_SEARCH_BUDGET`, :data:`DEFAULT_CRASP_BUDGET`) were chosen so that
each search finds the programs the old default time settings (20 s per search in
``docs/predictions.md``) found on an idle 2-core machine; ``docs/benchmarks.md`` ("Search
budgets") records the measurement.
"""

from __future__ import annotations

import argparse
import re
import time

__all__ = ["DEFAULT_SEARCH_BUDGET", "DEFAULT_CRASP_BUDGET", "DEEP_SEARCH_BUDGET",
           "BudgetError", "parse_budget", "format_budget", "Limits", "TIME_CAP_STOP",
           "BUDGET_STOP", "search_budgets", "budgets_text"]

#: candidate programs per RASP-L search (``rasp score --search``, ``docs/predictions.md``)
DEFAULT_SEARCH_BUDGET = 40_000_000
#: candidate programs per RASP-L search for the tasks whose programs need the combination and
#: deep aggregates (``docs/predictions.md``'s ``--deep-tasks``)
DEEP_SEARCH_BUDGET = 180_000_000
#: candidate Booleans and counts per C-RASP search (each variant)
DEFAULT_CRASP_BUDGET = 24_000_000

#: ``stopped`` of a search that spent its work budget (its certificate stands)
BUDGET_STOP = "budget"
#: ``stopped`` of a search stopped by its wall-clock safety cap (verdict ``unknown``)
TIME_CAP_STOP = "time_cap"


class BudgetError(argparse.ArgumentTypeError, ValueError):
    """A budget that is not a non-negative whole number of candidates (or a bad time cap); an
    ``ArgumentTypeError`` too, so a command line shows its message."""


_SUFFIX = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}


def parse_budget(text, what: str = "budget") -> int:
    """A budget from ``20000000``, ``20M``, ``500k``, ``1.5G`` or ``2e7`` (candidates).

    Raises:
        BudgetError: not a number, negative, not finite, or not a whole number of candidates.
    """
    bad = BudgetError(f"{what} must be a finite number of candidates, whole and >= 0 (e.g. "
                      f"40000000, 40M, 500k), got {text!r}")
    if isinstance(text, bool):
        raise bad
    if isinstance(text, int):
        value = float(text)
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMgG]?)\s*",
                         str(text))
        if m is None:
            raise bad
        value = float(m.group(1)) * _SUFFIX[m.group(2).lower()]
    if value != value or value in (float("inf"), float("-inf")) or value < 0 \
            or value != int(value):
        raise bad
    return int(value)


def format_budget(n: int) -> str:
    """``20,000,000 candidates`` style text of a budget (for docs and messages)."""
    return f"{int(n):,}"


class Limits:
    """A work budget and an optional wall-clock cap, checked together.

    Args:
        budget: units of work allowed (candidates); ``spent`` counts them.
        time_cap: seconds from now, or None for no cap.

    Raises:
        BudgetError: a negative budget or a time cap that is not a positive finite number.
    """

    def __init__(self, budget: int, time_cap: float | None = None,
                 deadline: float | None = None):
        if isinstance(budget, bool) or not isinstance(budget, (int, float)) or budget < 0 \
                or budget != budget:
            raise BudgetError(f"budget must be a number of candidates >= 0, got {budget!r}")
        if time_cap is not None and not (0 < time_cap < float("inf")):
            raise BudgetError(f"time cap must be a positive number of seconds, got {time_cap!r}")
        self.budget = int(budget)
        self.time_cap = time_cap
        self.deadline = deadline if deadline is not None else (
            None if time_cap is None else time.perf_counter() + time_cap)

    def over_time(self) -> bool:
        """Whether the wall-clock cap has passed (never without a cap)."""
        return self.deadline is not None and time.perf_counter() > self.deadline

    def sub(self, budget: int) -> "Limits":
        """The same deadline with another work budget (a pass or a round of the search)."""
        return Limits(max(0, int(budget)), deadline=self.deadline, time_cap=self.time_cap)


def search_budgets(search_budget: int | None = None, crasp_budget: int | None = None) -> dict:
    """``predict``'s budget keywords: the given budgets, else :data:`DEFAULT_SEARCH_BUDGET`
    and :data:`DEFAULT_CRASP_BUDGET`."""
    return {"search_budget": search_budget or DEFAULT_SEARCH_BUDGET,
            "crasp_budget": crasp_budget or DEFAULT_CRASP_BUDGET}


def budgets_text(search_budget: int | None = None, crasp_budget: int | None = None) -> str:
    """The budgets of :func:`search_budgets` as a page or a log states them."""
    b = search_budgets(search_budget, crasp_budget)
    return (f"RASP-L {b['search_budget']:,} candidate programs, C-RASP "
            f"{b['crasp_budget']:,} candidate Booleans and counts")
