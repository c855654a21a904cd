"""Deciding "a C-RASP[] program exists" for piecewise testable regular tasks, with the program.

:mod:`analysis.prediction.crasp_decision` proves *no* program exists when the task's automaton
has a counter. This module is the other side for one class of languages: when the task's
output after a prefix is a function of **which words of length <= k the prefix contains as a
subsequence** (scattered subword), the task is *piecewise testable* (Simon 1975, "Piecewise
testable events", LNCS 33: the piecewise testable languages are those whose syntactic monoid is
J-trivial; every one is k-piecewise testable for some k) and this module constructs a C-RASP[]
program for it and proves that program right at every length.

**The program.** For a word ``u`` write ``S_u(i)``: "``u`` is a subsequence of the input's
symbols at positions ``<= i``". ``S_ε`` is true; if ``u = v a^r`` with ``v`` empty or ending in
a symbol other than ``a``, then

    S_u(i)  =  #[j <= i] (Q_a(j) and S_v(j))  >=  r

(a C-RASP[] count over a Boolean, compared with a constant: Huang et al. 2025, arXiv
2410.02140, §3). *Proof.* At a position ``j`` holding ``a``, ``v`` (which does not end in
``a``) is a subsequence of the positions ``<= j`` iff it is one of the positions ``< j``. If
``r`` positions ``j_1 < .. < j_r <= i`` hold ``a`` with ``S_v(j_1)``, embed ``v`` before ``j_1``
and the ``a``'s at ``j_1 .. j_r``; conversely an embedding of ``v a^r`` gives ``r`` such
positions (the ``a``'s after ``v``'s last symbol). The output is then a decision list over
Boolean combinations of the ``S_u``: C-RASP[] (and so C-RASP[periodic, local]).

**The proof that the table is right.** Every input prefix ``w`` reaches exactly one pair
(automaton state, set of subsequences of ``w`` of length ``<= k``): both are deterministic
functions of ``w`` updated symbol by symbol. A breadth-first search visits every reachable pair
(finitely many); if no two reachable pairs with the same subsequence set give different outputs,
the output *is* a function of that set on every input of every length (for next-character
sets, whose outputs are read at each string position, the symbol at that position joins the
set: a C-RASP[] atom ``Q_a(i)``) — the table read off the
search is the task, exhaustively, with no length bound. The same holds for any prefix-closed set
of subsequences (not only all those of length <= k): the set grows by counterexamples
(:func:`piecewise_program`) while the work (pairs visited, over every round) stays within a
budget, and every ``S_u`` the table does not need is then dropped (re-checked on the same
pairs).

What this does not decide: a language that is not piecewise testable (``(ab)*``, ``Σ*ab``, every
language with a counter) gets no program here; :mod:`analysis.prediction.crasp_decision`'s
counter test or the search speaks for it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

__all__ = ["PiecewiseProgram", "piecewise_program", "subsequence_recipe",
           "DEFAULT_PIECEWISE_BUDGET"]

#: reachable (state, subsequence set) pairs a standalone construction may visit, over every
#: round: a work budget, not seconds, so the result is a function of the automaton alone (the
#: decision, :func:`analysis.prediction.crasp_decision.decide_crasp`, passes its own budget)
DEFAULT_PIECEWISE_BUDGET = 50_000


@dataclass
class PiecewiseProgram:
    """A C-RASP[] program constructed for a piecewise testable task.

    Attributes:
        k: the subsequence length that suffices (the task is k-piecewise testable).
        features: the subsequences ``u`` the program tests (tuples of symbol indices), after
            dropping those the table does not need.
        table: ``[(literals, output), ...]``: each reachable class as the features it contains
            (a tuple of 0/1 per feature) and the machine's output label there.
        pairs: reachable (state, subsequence set) pairs visited in the last round (the
            exhaustive check's size).
        work: pairs visited over every round (the budget's unit).
        entries: the decision list in the C-RASP search's recipe form
            (:mod:`analysis.prediction.crasp_search.recipes`): ``[(output value, recipe),
            ...]``, ``default`` the value when no entry holds; filled by the caller that knows
            the task's output values (:func:`analysis.prediction.crasp_decision.decide_task`).
        uses_last: next-character sets only: the output also reads the symbol at the query
            position (``Q_a(i)``, a C-RASP[] atom); each table row then ends with that
            symbol's one-hot tuple.
    """

    k: int
    features: list
    table: list
    pairs: int
    work: int
    entries: list = field(default_factory=list)
    default: object = None
    uses_last: bool = False


def _reach(machine, words: list, with_empty: bool, limit: int, track_last: bool = False):
    """Breadth-first over reachable (state, feature bitmask, last symbol) triples (the last
    symbol -1 unless ``track_last``); ``words`` is prefix-closed (bit ``b`` = "``words[b]`` is
    a subsequence of the prefix").

    Returns ``(asked, parent)``: the pairs whose output is asked and each pair's ``(previous
    pair, symbol)`` (a shortest word reaching it), or ``(None, None)`` past ``limit`` pairs."""
    n_sym = len(machine.alphabet)
    bit = {w: b for b, w in enumerate(words)}
    # reading symbol a adds u = p + (a,) for every feature p (or the empty word) already held
    grow = [[(bit[w[:-1]] if len(w) > 1 else -1, 1 << bit[w]) for w in words if w[-1] == a]
            for a in range(n_sym)]
    start = (0, 0, -1)
    parent, asked = {start: None}, set()
    if with_empty:
        asked.add(start)
    todo = deque([start])
    while todo:
        pair = todo.popleft()
        q, mask, _ = pair
        for a in range(n_sym):
            r = machine.delta[q][a]
            if r < 0:
                continue
            new = mask
            for pre, ubit in grow[a]:
                if pre < 0 or mask >> pre & 1:
                    new |= ubit
            nxt = (r, new, a if track_last else -1)
            asked.add(nxt)
            if nxt not in parent:
                parent[nxt] = (pair, a)
                if len(parent) > limit:
                    return None, None
                todo.append(nxt)
    return asked, parent


def _word_to(parent, pair) -> tuple:
    out = []
    while parent[pair] is not None:
        pair, a = parent[pair]
        out.append(a)
    return tuple(reversed(out))


def _function_of(pairs, out, keep_mask: int, last: bool = True):
    """``(table, None)``: ``(projected mask, last symbol or -1) -> output`` when the output is a
    function of the kept features (and the last symbol, with ``last``) on the reachable pairs,
    else ``(None, (pair, pair))`` two pairs with the same key and different outputs."""
    table, first = {}, {}
    for pair in sorted(pairs):
        key = (pair[1] & keep_mask, pair[2] if last else -1)
        o = out[pair[0]]
        if key not in table:
            table[key], first[key] = o, pair
        elif table[key] != o:
            return None, (first[key], pair)
    return table, None


def _separating(w1: tuple, w2: tuple, n_symbols: int, max_len: int):
    """The shortest (then first in symbol order) word of length <= ``max_len`` that is a
    subsequence of exactly one of ``w1``, ``w2``, or None: breadth-first over the pairs of
    greedy embedding positions (``len(w) + 1`` = not embedded), at most ``(|w1| + 2) (|w2| +
    2)`` of them."""
    def step(w, i, a):
        if i > len(w):
            return i
        for k in range(i, len(w)):
            if w[k] == a:
                return k + 1
        return len(w) + 1

    start = (0, 0)
    seen = {start: ()}
    todo = deque([start])
    while todo:
        i, j = todo.popleft()
        u = seen[(i, j)]
        if len(u) >= max_len:
            continue
        for a in range(n_symbols):
            nxt = (step(w1, i, a), step(w2, j, a))
            if (nxt[0] > len(w1)) != (nxt[1] > len(w2)):
                return u + (a,)
            if nxt not in seen and not (nxt[0] > len(w1) and nxt[1] > len(w2)):
                seen[nxt] = u + (a,)
                todo.append(nxt)
    return None


def piecewise_program(machine, with_empty: bool, budget: int = DEFAULT_PIECEWISE_BUDGET,
                      max_len: int | None = None) -> PiecewiseProgram | None:
    """A set of subsequences whose presence in a prefix determines the machine's output, with
    the table (module docstring: the proof), or None when none of words of length <=
    ``max_len`` (default: the number of states + 1) is found within ``budget`` pairs.

    The set grows by counterexamples: start with no feature; search the reachable (state,
    feature set) pairs; if two with the same features give different outputs, add (with its
    prefixes) the shortest subsequence that tells their shortest words apart; repeat. For a
    k-piecewise testable task every added word has length <= k (two words with different
    outputs differ in a subsequence of length <= k), so it ends; the last search is the proof.

    Args:
        machine: a Moore machine (``delta[q][a]``: a state or -1 when the word leaves the
            task's inputs; ``out[q]``; start 0), as :mod:`analysis.prediction.crasp_decision`
            builds it.
        with_empty: whether the empty prefix is an input whose output is asked (membership:
            yes; next-character sets: outputs at non-empty prefixes only).
        budget: the most (state, feature set) pairs to visit, over every round.
        max_len: the longest subsequence a feature may be.
    """
    max_len = len(machine.delta) + 1 if max_len is None else max_len
    feats: set = set()
    work = 0
    while True:
        words = sorted(feats, key=lambda w: (len(w), w))
        asked, parent = _reach(machine, words, with_empty, budget - work, not with_empty)
        if asked is None:
            return None
        work += len(parent)
        full = (1 << len(words)) - 1
        table, clash = _function_of(asked, machine.out, full)
        if clash is not None:
            u = _separating(_word_to(parent, clash[0]), _word_to(parent, clash[1]),
                           len(machine.alphabet), max_len)
            if u is None:
                return None
            feats |= {u[:i] for i in range(1, len(u) + 1)}
            continue
        keep = full
        for b in reversed(range(len(words))):       # longest first: drop what is not needed
            if _function_of(asked, machine.out, keep & ~(1 << b))[0] is not None:
                keep &= ~(1 << b)
        uses_last = _function_of(asked, machine.out, keep, last=False)[0] is None
        kept = [b for b in range(len(words)) if keep >> b & 1]
        table = _function_of(asked, machine.out, keep, last=uses_last)[0]
        n_sym = len(machine.alphabet)
        rows = sorted((tuple(int(m >> b & 1) for b in kept)
                       + (tuple(int(a == c) for a in range(n_sym)) if uses_last else ()), o)
                      for (m, c), o in table.items())
        k = max((len(words[b]) for b in kept), default=0)
        return PiecewiseProgram(k, [words[b] for b in kept], rows, len(parent), work,
                                uses_last=uses_last)


def subsequence_recipe(u: tuple, values=None):
    """The recipe of ``S_u`` (module docstring) over symbol values ``values[a]`` (default the
    index): ``u = v a^r`` -> ``#[j <= i] (Q_a(j) and S_v(j)) >= r``, written ``count > r - 1``
    in the C-RASP search's recipe form."""
    val = (lambda a: a) if values is None else (lambda a: values[a])
    if not u:
        raise ValueError("S_ε is true; it needs no recipe")
    a = u[-1]
    r = 1
    while r < len(u) and u[-1 - r] == a:
        r += 1
    v = u[:len(u) - r]
    body = ("Q", val(a)) if not v else ("and", ("Q", val(a)), subsequence_recipe(v, values))
    return ("cmpk", "gt", r - 1, ("cnt", body))
