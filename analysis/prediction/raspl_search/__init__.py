"""The RASP-L grammar of the program search: bounded shortest-program search over RASP-L
next-token programs, on the search core (:mod:`analysis.prediction.search_core`).

The RASP-Generalization Conjecture (Zhou et al. 2023, arXiv 2310.16028, §3) predicts length
generalization from the length of the *shortest* RASP-L program for a task's next-token
function; Huang et al. 2025 (arXiv 2410.02140) from the existence of a C-RASP program. Shipped
programs only bound that length from above. This package enumerates programs smallest first and
either returns the first program that reproduces the task, or certifies that no program of
expression size ``<= k`` in the grammar does; after the exhaustive part it may also *combine*
the terms it enumerated into a larger program (an upper bound, not certified shortest).

**Size.** The expression size counts every operation (select, aggregate, selector width, map,
sequence map, ternary, constant s-op, selector and/or) at every use; ``tokens`` and
``indices`` count 0. It equals the program length of ``docs/language.md`` §4 for programs whose
sub-expressions are not shared, and bounds it from above otherwise; bounds are stated in size.

**Method.** Bottom-up enumeration with observational equivalence (Udupa et al. 2013, TRANSIT;
Albarghouthi et al. 2013) on one fixed batch of task examples, evaluated in *families* as array
operations instead of one interpreter call per candidate: every s-op of a size is a row of an
``[M, P]`` int8 array (P = valid positions of the batch); all maps of a size are one broadcast
per operation; all sequence maps of two sizes one ``[Mx, My, P]`` broadcast; all ternaries one
``where`` per condition row; all selects of a key row against every query row one comparison
of ``[Mq, E]`` causal entries; all mean-aggregates of a block of selectors over every value
row of a size one batched matrix product, max/min one masked reduction. Each family is
fingerprinted at once (a random linear hash modulo 2^64 of each row: one integer matrix-vector
product), checked against the target on the target positions, and only new fingerprints are
kept. Because every program is causal, position ``t``'s value depends only on the prefix
``0..t``: one evaluation of an example gives the next-token prediction for every prefix.
The families are computed in blocks ("jobs") on worker threads (the usable cores, at most 2;
NumPy releases the GIL in the array work) and their candidates committed on the calling thread
in the order a sequential run emits them, so the result does not depend on the threads.

**Grammar** (all RASP-L: causal selects, int8 values, indices only compared or
shifted by a constant, no ``length``): leaves ``tokens``, ``indices``; constants (size 1) 0, 1,
2 and the special tokens' values; maps ``x + 1``, ``x - 1``, ``x == c``, ``x < c``, ``x > c``,
``not x``; sequence maps ``x + y``, ``x - y``, ``x == y``, ``x < y``, ``x and y``, ``x or y``;
ternaries ``x if c else y`` (``c`` 0/1); ``select(keys, queries, op)`` for the six comparisons
and the always-true selector; selector ``and`` / ``or``; ``aggregate`` with ``mean`` (truncated,
the RASP-L ``kqv``), ``max``, ``min`` and the constants as defaults; ``selector_width``. Values
derived from indices (selector widths included, as :mod:`rasp.analyses.raspl` rule 3 says) are only
compared or shifted. The C-RASP grammars (Huang et al. §3) are a grammar of their own
(:mod:`analysis.prediction.crasp_search`) on the same core; ``rasp search --mode crasp`` runs it.
Both are reached through one entry point, :func:`analysis.prediction.search.search`
(``grammar="raspl"`` runs this package).

**Certificate.** "No program of size <= k in this grammar reproduces the next-token function on
the search batch" — and so on every batch, since a correct program must reproduce this one.
Pruning by observational equivalence is exact for size (each program can use the kept
representative of any sub-expression's value class, which is no larger); fingerprints are 64-bit
(a collision, about n^2 / 2^65 for n rows, would prune wrongly); values outside int8 are
dropped (RASP-L rule 2). ``tests/test_search_certificates.py`` re-checks certificates against a
brute force that evaluates every program with the interpreter. A candidate that fits the batch
but not a larger validation batch shows that the batch merged programs it should have
separated: the shortest validation example it gets wrong joins the batch and the search starts
again (counterexample-guided refinement). Batches only grow from round to round, so the
certificate of any round holds for the task and the result keeps the best one; a round
restarted for the combination's counterexamples enumerates only the sizes already certified
(they rebuild the pool of terms; no program of those sizes can fit the larger batch).

**Combination** (Alur et al. 2017, divide and conquer): after the exhaustive part, a decision
list ``c1 ? t1 : (c2 ? t2 : ...)`` of enumerated terms ``t`` (each right on part of the targets)
and conditions ``c`` (0/1 s-ops of the pool, or a term compared with a constant) that are true
only where their term is right. A combined program is validated like any other and reported as
``found_by == "combination"``: an upper bound.

**The package, one job per module** (imports one way, top to bottom):

- :mod:`analysis.prediction.search_core` (outside this package) — the search core both
  grammars run on: the problem (:class:`~analysis.prediction.search_core.core.Problem`),
  the certificate, a round, the grammar interface, the counterexample-guided loop and the one
  result type (:class:`~analysis.prediction.search_core.result.SearchResult`).
- :mod:`.problem` — :class:`SearchProblem` (the RASP-L batch form of a problem), the batch
  from examples or a task, checking a program against a problem, counterexample rows.
- :mod:`.storage` — two explicit records: the batch layout (:class:`~.storage.Layout`) and
  what the enumeration keeps (:class:`~.storage.Store`: levels of s-ops and selectors, the
  fingerprint seen-sets, bytes stored; :func:`~.storage.keep_sops`,
  :func:`~.storage.keep_sels`); recipes, shared constants and worker-thread helpers.
- :mod:`.kernels` — fingerprints, selector entries and matrices, aggregate products, max/min
  rank tables: functions of the layout or of the engine record.
- :mod:`.families` — the candidate families (maps, sequence maps, ternaries, widths, selects,
  aggregates), cut into jobs for the worker threads.
- :mod:`.combination` — deep aggregates and the decision-list combination.
- :mod:`.engine` — ``_Engine``, the record of one round: emit / commit, IR nodes from
  recipes, the level loop; the three modules above are functions of it (no mixins).
- :mod:`.driver` — the RASP-L grammar of the core (:class:`~.driver.RaspLGrammar`: a round, its
  refinement policy) and :func:`~.driver.search_raspl` (the core's loop over it, on a task or
  a batch).

Found programs of both grammars are printed as ``.rasp`` source by
:func:`rasp.source.program_to_source` (:func:`analysis.prediction.search_core.program_source`).
"""

from .driver import search_raspl
from .problem import (INT8, SearchError, SearchProblem, matches_problem, problem_from_examples,
                      problem_from_task, tree_size)

__all__ = ["SearchProblem", "SearchError", "search_raspl", "matches_problem",
           "problem_from_examples", "problem_from_task", "tree_size", "INT8"]
