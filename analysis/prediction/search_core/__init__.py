"""The search core both program searches run on, outside either grammar's package.

A search asks for the smallest program of a grammar that reproduces a task's next-token
function (the RASP-Generalization Conjecture, Zhou et al. 2023, arXiv 2310.16028 §3; Huang et
al. 2025, arXiv 2410.02140). The grammars are packages of their own that stand on this one:
RASP-L (:mod:`analysis.prediction.raspl_search`) and C-RASP
(:mod:`analysis.prediction.crasp_search`); the one entry point over both is
:func:`analysis.prediction.search.search`.

Modules: :mod:`.core` (the problem both grammars search, :class:`~.core.Problem` drawn from a
task by :func:`~.core.task_problem`; :class:`~.core.Certificate`, :class:`~.core.Round`, the
:class:`~.core.Grammar` interface and the counterexample-guided loop :func:`~.core.cegis`) and
:mod:`.result` (:class:`~.result.SearchResult`, what every search returns).
"""

from .core import (Certificate, Grammar, Loop, Problem, Round, SearchError, best_bound, cegis,
                   exhaustive_rows, hard_rows, program_source, shortest_failing, task_example,
                   task_problem, task_symbols)
from .result import GRAMMARS, MEMORY_STOP, SearchResult

__all__ = ["Problem", "SearchError", "task_problem", "hard_rows", "exhaustive_rows",
           "Certificate", "Round", "Grammar", "Loop", "cegis", "program_source", "task_symbols",
           "task_example", "best_bound", "shortest_failing", "SearchResult", "GRAMMARS", "MEMORY_STOP"]
