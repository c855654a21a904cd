"""A search over C-RASP programs in C-RASP's own terms (Huang et al. 2025, arXiv 2410.02140, §3).

The RASP-L search (:mod:`analysis.prediction.raspl_search`) enumerates RASP-L expressions; a C-RASP
program that is short in C-RASP's terms (binary majority: two counts and a comparison) is an
expression of size 10+ there. This module enumerates C-RASP Booleans and counts directly,
bottom-up by size with observational equivalence, and assembles a next-token program from them
as a decision list with one entry per output value.

**Grammar.** Booleans (``B``) and counts (``C``), each either *concrete* or *alphabet-uniform*
(a construct with a symbol parameter ``a`` ranging over the task's content alphabet, counted
once, evaluated for every ``a`` at once):

* Boolean atoms (size 1): ``Q_s(i)`` for every symbol ``s`` of the batch (content symbols only
  for alphabets of at most 8 content symbols), the class ``content(i)`` (token >= 0); uniform atoms
  ``Q_a(i)``, ``tok(i) < a``, ``tok(i) > a``; in ``crasp_pl`` the periodic predicates
  ``i mod p == r`` (p in 2..4).
* Count atoms: ``#[j <= i] true`` (= i + 1; size 1); with a uniform alphabet the relative
  counts ``#[j <= i] tok(j) op tok(i)`` (op in ``==, <, >``; size 2: a count over a Boolean of
  the key's token case-split over the query's token) and, in ``crasp_pl``,
  ``#[j <= i] tok(j-1) == tok(i)`` (size 3: the key's predecessor through the local selector).
* Boolean rules: ``not B`` (+1), ``B and B``, ``B or B`` (sizes + 1), ``C op C`` for op in
  ``<, <=, ==`` (sizes + 1; ``>``/``>=`` are the swapped pairs), ``C op k`` for ``==, >`` and
  k in 0..15 (size + 1 + the constant's binary digits beyond the first: 0, 1 free, 2-3 one,
  4-7 two, 8-15 three), in ``crasp_pl`` the local ``P(i - c)`` =
  ``#[j <= i, j = i - c] P(j) > 0`` for c in 1..2 (size + 2), and for a uniform count
  ``argmax C`` = ``C(a) > C(b) for every b != a`` (size + 2), and for a uniform Boolean
  ``exists a: B(a)`` (size + 1; a concrete Boolean, the or of one Boolean per symbol).
* Count rules: ``#[j <= i] P(j)`` (size + 1), with a uniform alphabet ``#[j <= i] P(j) and
  tok(j) op tok(i)`` (size + 2; + 3 for the predecessor relation), ``C + C``, ``C - C``
  (sizes + 1).

**Output.** A decision list ``v1 if B1 else (v2 if B2 else ... v_m)`` with one entry per output
value occurring in the targets (special tokens, labels, and the content symbols: one concrete
entry each, or, for a uniform alphabet, one uniform entry ``a if B(a)`` for the first ``a`` in
ascending order whose ``B(a)`` holds -- or one uniform entry per kind of current token: content
symbol, or each special token, e.g. SEP, where content targets follow it); the last value is the
default (no condition). A membership task is the same with the targets ``yes|no`` at SEP and EOS
after it. After each level without such a program, a *greedy* decision list whose entries may
repeat a value (Rivest 1987: each entry consistent on the positions left, the most covering
first, each also checked on the validation batch) is tried: its programs are upper bounds
outside the certificate's grammar (``notes`` says so).

**Size** (C-RASP size): every operation of the grammar counted once per use, an
alphabet-uniform construct (``Q_a``, a count or comparison with the parameter ``a``, ``argmax``)
once for the whole alphabet, output constants 0, comparison constants by their binary digits,
plus one per decision-list entry with a condition.

**Certificate.** ``certified_below = s``: the enumeration of every Boolean of size <= s (up to
observational equivalence on the search batch: one representative per distinct value vector,
smallest first, which is exact for size because every rule is a function of its arguments'
values on the batch) found no decision list whose conditions all have size <= s; so no program
of this grammar of total size <= s reproduces the task (a program of total size <= s has every
condition of size <= s). For each order of the output values the entry for the t-th value must
equal the target indicator on the positions left by earlier entries, so existence is decided
exactly per order.

**Refinement.** Found candidates are checked on a validation batch (every length 1..
``validation_max_length``, sampled examples plus near misses: two adjacent tokens swapped or
one replaced, answered by ``task.ground_truth``); a failing candidate's shortest failing example
joins the search batch and the enumeration restarts (counterexample-guided; the batch only
grows, so each round's certificate holds); so does a failure of the final verification.
``crasp_pl`` runs three passes: the larger grammar for 20% of the work budget, C-RASP[] (smaller, so
it reaches larger sizes; its programs are C-RASP[periodic, local] programs) for 35%, the larger
grammar again for the rest (with the alphabet-uniform constructs added where the alphabet has
fewer than 5 symbols and no target is a content symbol: there that grammar holds every concrete
Boolean, and its relational counts reach programs such as "the token before SEP equals the
first"); the certificate is the larger grammar's. A returned program is built as IR (``selector_width`` of causal
selects whose key predicate is the Boolean: the shape :func:`rasp.analyses.crasp.check_crasp` accepts),
checked with ``check_crasp`` for the variant and verified with
:func:`tasks.decode.verify_program` at every length 1..``verify_max_length``.

Reached through :func:`analysis.prediction.search.search` (``grammar="crasp"`` or
``"crasp_pl"``), which runs :func:`~.driver.search_crasp` and returns the one result type,
:class:`analysis.prediction.search_core.result.SearchResult`. Modules: :mod:`.recipes`
(recipes, their values on a batch, the IR they build), :mod:`.enumeration` (the enumerator and
the decision lists), :mod:`.driver` (:class:`~.driver.CRaspGrammar`, this grammar behind the
search core's interface, :class:`analysis.prediction.search_core.core.Grammar`, whose
counterexample loop :func:`~analysis.prediction.search_core.core.cegis` runs the rounds; the
search and its passes).
"""

from .driver import search_crasp
from .recipes import build_program, evaluate_recipe, is_param, recipe_size, recipe_text

__all__ = ["search_crasp", "evaluate_recipe", "recipe_size", "recipe_text",
           "build_program", "is_param"]
