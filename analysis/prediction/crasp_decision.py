"""Deciding "no C-RASP program" for regular languages: a counter in the automaton is a proof.

The predictor's C-RASP verdicts otherwise rest on a search: a found program is a decision
(``generalizes``), an exhausted search only a bounded certificate (``no program <= s``). For a
task defined by a finite automaton (Huang et al.'s formal languages, every ``--regex`` task) a
*counter* in the automaton proves that no program of the fragment exists at any size, so the
verdict is ``fails`` with a witness anyone can re-check. :func:`decide_crasp` is that test.

**The lemma** (eventual constancy; proved here, in the style of the aperiodicity argument of
McNaughton-Papert / Schützenberger for first-order logic). Let ``P`` be a C-RASP[] program
(Huang et al. 2025, arXiv 2410.02140, §3: Boolean ``Q_sigma(i)``, ``not``, ``and``, comparisons
of counts with each other and with integer constants; counts ``#[j <= i] B(j)``, ``+``, ``-``,
constants and conditionals) and ``u, v, w`` words, ``v`` non-empty. Then the value of ``P`` at
the last position of ``u v^n w`` is the same for all large ``n``.

*Proof.* Index a position inside the block ``v^n`` by ``(k, r)`` (the ``r``-th symbol of the
``k``-th copy); its prefix ``u v^k v[:r+1]`` does not depend on ``n``. By induction over the
program's definitions: every Boolean ``B`` is, at ``(k, r)``, constant in ``k`` for ``k >= K_B``,
and every count ``C`` is affine in ``k`` for ``k >= K_C`` (``C(k, r) = a_r k + b_r``). Symbol
tests and constants are constant; ``#[j <= i] B(j)`` at ``(k, r)`` is a constant (the
positions of ``u`` and of the copies before ``K_B``) plus ``(k - K_B)`` times the number of
offsets where ``B`` is eventually true plus a bounded term: affine; ``+``, ``-`` and
conditionals on eventually constant Booleans keep counts affine; a comparison of two affine
functions of ``k`` (or of one with a constant) is eventually constant. The same induction over
the positions of ``w`` (indexed by ``(n, s)``) gives eventually constant Booleans at the last
position. QED.

**C-RASP[periodic, local]** (the learned APE's fragment) adds ``i mod p = r`` and counts whose
``psi(i, j)`` depends on ``i - j`` with bounded support. When ``|v|`` is a multiple of every
period the program uses, ``i mod p`` is the same at ``(k, r)`` for every ``k``, and a local count
reads a bounded number of earlier positions, which are eventually constant: the lemma holds
for those ``v``. Let ``S_t`` be the set of actions (on the automaton's states) of the words of
length ``t``; ``S_{a+b} = S_a S_b``, and the sequence is eventually periodic, so there is ``s``
with ``S_s = S_{2s}``, hence ``S_{Ps} = S_s`` for every ``P >= 1``. A counter in an action of
``S_s`` therefore appears, for whatever periods a program uses, in some word whose length is
a multiple of all of them (Barrington, Compton, Straubing & Thérien 1992 use the same stable
semigroup for first-order logic with modular predicates).

**The test.** The task's automaton as a Moore machine: the states where the task asks for an
output (membership: every state, output accept/reject at ``SEP``; next-character sets:
Huang et al. train and test on positive strings only, so the reachable *live* states, output
the set's label, a symbol into a dead state leaves the domain). A *witness* is ``(u, v, w)``
and a period ``p >= 2`` such that the state after ``u v^n`` cycles with period ``p`` through
live states and the outputs after ``u v^n w`` (all defined) differ between two residues of ``n``
mod ``p``. By the lemma every program's output on ``u v^n w`` is eventually constant, so it is
wrong for infinitely many ``n``: the task has no program of the fragment. The witness is
printed and :meth:`Decision.check` re-runs it on the automaton.

The search for a witness enumerates the transition monoid (C-RASP[]) or the stable semigroup
``S_s`` (C-RASP[periodic, local]) breadth-first, up to a work budget counted in actions; it
finds one iff one exists (every counter is a cycle of length >= 2 of some action whose states
an output can tell apart). Without a witness nothing is proved "not". The "in" side is
constructed: a piecewise testable task gets a program from subsequences
(:mod:`analysis.prediction.crasp_piecewise`), any other whose minimal automaton's components
each have a separating potential (a balanced morphism) gets one that follows the run
(:mod:`analysis.prediction.crasp_potential`); for C-RASP[periodic, local] the latter also
runs on the automaton's product with the position mod ``p`` and the symbols just before it
(:func:`~analysis.prediction.crasp_potential.periodic_local_program`). An aperiodic task with
neither (``Σ*ab`` for C-RASP[]) is
"no counter": the research code ``pentagonalize/crasp_reg`` (``decider.py``) labels such
languages "not in C-RASP", but we found no published proof of that direction to implement,
so the verdict stays with the search (program or certificate). See ``docs/predictions.md``
("Decided verdicts").
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field, fields

from analysis.prediction.crasp_piecewise import piecewise_program, subsequence_recipe
from analysis.prediction.crasp_potential import (periodic_local_program, potential_program,
                                                 product_letter_recipe, used_definitions)
from analysis.prediction.crasp_search.recipes import (build_program, decision_list_text,
                                                      recipe_text)
from analysis.prediction.theories import Evidence

__all__ = ["Decision", "decide_crasp", "decide_task", "DECISIONS", "DEFAULT_DECISION_BUDGET"]

#: actions (transformations of the automaton's states) the search may enumerate: a work
#: budget, not seconds, so the result is a function of the automaton alone
DEFAULT_DECISION_BUDGET = 200_000

_VARIANTS = {"crasp": "C-RASP[]", "crasp_pl": "C-RASP[periodic, local]"}


@dataclass
class Decision:
    """The result of :func:`decide_crasp`.

    Attributes:
        variant: ``"crasp"`` (C-RASP[], NoPE) or ``"crasp_pl"`` (C-RASP[periodic, local]).
        status: ``"not in fragment"`` (a witness proves no program exists), ``"in fragment"``
            (a C-RASP[] program is constructed and proved right at every length: from
            subsequences, :mod:`analysis.prediction.crasp_piecewise`, or from potentials,
            :mod:`analysis.prediction.crasp_potential`; or, J-trivial beyond the budget, proved
            to exist), ``"no counter"``
            (the monoid or stable semigroup has no counter an output can see and the task is
            not shown piecewise testable: nothing is proved), or ``"budget"`` (more than
            ``budget`` actions: nothing is proved).
        witness: for ``not in fragment``: ``u``, ``v``, ``w`` (lists of symbol names), the
            period ``p``, ``outputs`` (the output after ``u v^n w`` for ``n = start ..
            start + 2p - 1``, as ``[n, output]`` pairs; None where ``u v^n w`` is not an input
            of the task) and ``states`` (the cycle); else None.
        actions: how many actions were enumerated (the work done).
        stable_length: C-RASP[periodic, local] only: the length ``s`` with ``S_s = S_2s``.
        detail: one sentence a reader can check (the verdict's evidence).
        program: for ``in fragment``: ``construction`` (``"subsequences"`` or
            ``"potentials"``), ``label`` (one phrase), then for subsequences ``k``
            (subsequence length), ``features`` (the subsequences tested, as symbol strings),
            ``pairs`` (reachable (state, subsequence set) pairs checked), ``work``; for
            potentials ``states``, ``components``, ``coordinates``, ``balanced_morphisms``
            (per component with a loop: its states, ``h`` per symbol, ``phi`` per state); and,
            once :func:`decide_task` has mapped the outputs to the task's values, ``text``
            (the program in C-RASP notation); else None.
    """

    variant: str
    status: str
    witness: dict | None = None
    actions: int = 0
    stable_length: int | None = None
    detail: str = ""
    program: dict | None = None
    _machine: object = field(default=None, repr=False, compare=False)
    #: the constructed program (:class:`~analysis.prediction.crasp_piecewise.PiecewiseProgram`)
    _piecewise: object = field(default=None, repr=False, compare=False)
    #: or the one constructed from potentials
    #: (:class:`~analysis.prediction.crasp_potential.PotentialProgram`) and its minimal machine
    _potential: object = field(default=None, repr=False, compare=False)
    _minimal: object = field(default=None, repr=False, compare=False)
    #: the constructed program's IR s-op (set by :func:`decide_task`)
    sop: object = field(default=None, repr=False, compare=False)

    @property
    def proved_not(self) -> bool:
        """True when a witness proves that no program of the fragment exists."""
        return self.status == "not in fragment"

    def evidence(self):
        """The verdict's evidence (:class:`analysis.prediction.theories.Evidence`): of kind
        ``"decision"`` when a witness proves that no program exists, ``"existence"`` when a
        program is proved to exist but was not constructed (a constructed one is program
        evidence, verified by the caller), else None."""
        if self.proved_in and self.sop is None:
            return Evidence("existence", self.detail, source="Simon 1975 (piecewise testable "
                            "= J-trivial syntactic monoid) and analysis/prediction/"
                            "crasp_piecewise.py", theory=_VARIANTS[self.variant])
        if not self.proved_not:
            return None
        return Evidence("decision", self.detail, source="the eventual-constancy lemma "
                        "(analysis/prediction/crasp_decision.py)",
                        theory=_VARIANTS[self.variant])

    def to_dict(self) -> dict:
        """The record as JSON-ready data (the automaton it re-checks on left out)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if not f.name.startswith("_") and f.name != "sop"}

    @property
    def proved_in(self) -> bool:
        """True when a C-RASP[] program is constructed and proved right at every length."""
        return self.status == "in fragment"

    def check(self) -> bool:
        """Re-run the witness on the automaton: the outputs after ``u v^n w`` for the listed
        ``n`` are the recorded ones, all defined, periodic with period ``p`` and not constant.
        False for a decision without a witness."""
        if not self.proved_not or self._machine is None:
            return False
        m, wit = self._machine, self.witness
        sym = {name: i for i, name in enumerate(m.alphabet)}
        u, v, w = ([sym[c] for c in wit[k]] for k in ("u", "v", "w"))
        seen = []
        for n, out in wit["outputs"]:
            got = m.output_of(u + v * n + w)
            if (None if got is None else m.label(got)) != out:
                return False
            seen.append(out)
        p = wit["period"]
        periodic = all(seen[i] == seen[i + p] for i in range(len(seen) - p))
        return periodic and len({o for o in seen if o is not None}) > 1


class _Machine:
    """The task's automaton as a Moore machine over the states where an output is asked.

    ``delta[q][a]`` is a state index or -1 (the word leaves the domain); ``out[q]`` the
    output; state 0 is the start."""

    def __init__(self, delta, out, alphabet, names, empty_asked=True):
        self.delta, self.out, self.alphabet, self._names = delta, out, alphabet, names
        #: whether the empty prefix is an input whose output is asked (membership: ``BOS
        #: SEP``; next-character sets: outputs at non-empty prefixes only)
        self.empty_asked = empty_asked

    def output_of(self, word):
        """The state after ``word`` from the start (None when it leaves the domain)."""
        q = 0
        for a in word:
            q = self.delta[q][a]
            if q < 0:
                return None
        return q

    def label(self, q) -> str:
        return self._names(self.out[q])


def _membership_machine(dfa, alphabet) -> _Machine:
    """Complete the DFA with a rejecting sink; output accept (``yes``) / reject (``no``)."""
    n = len(dfa.delta)
    sink = n
    delta = [[sink if r is None else r for r in row] for row in dfa.delta] + [[sink] * dfa.k]
    out = [q in dfa.accept for q in range(n)] + [False]
    return _trim(delta, out, alphabet, lambda o: "yes" if o else "no")


def _next_set_machine(dfa, fmt, alphabet) -> _Machine:
    """Reachable live states; a symbol into a dead state leaves the domain; output the label."""
    # tasks.huang owns the label rule; imported here so that a membership decision does not
    # need the formats
    from tasks.huang import next_set_label
    live = dfa.live_states()
    delta = [[r if r is not None and r in live else -1 for r in row] for row in dfa.delta]
    out = [next_set_label(dfa, fmt, alphabet, q) if q in live else None
           for q in range(len(dfa.delta))]
    return _trim(delta, out, alphabet, str, empty_asked=False)


def _trim(delta, out, alphabet, names, empty_asked=True) -> _Machine:
    """Keep the states reachable from 0 inside the domain, renumbered in BFS order."""
    order, index = [0], {0: 0}
    for q in order:
        for r in delta[q]:
            if r >= 0 and r not in index:
                index[r] = len(order)
                order.append(r)
    new = [[index[r] if r >= 0 else -1 for r in delta[q]] for q in order]
    return _Machine(new, [out[q] for q in order], list(alphabet), names, empty_asked)


def _distinguishable(m: _Machine) -> dict:
    """``(p, q) -> w``: a shortest word after which both stay in the domain and their outputs
    differ (backward breadth-first search over pairs); pairs not in the dict are not."""
    n, k = len(m.delta), len(m.alphabet)
    pre = [[[] for _ in range(k)] for _ in range(n)]
    for q in range(n):
        for a in range(k):
            r = m.delta[q][a]
            if r >= 0:
                pre[r][a].append(q)
    word = {}
    todo = deque()
    for p in range(n):
        for q in range(p + 1, n):
            if m.out[p] != m.out[q]:
                word[(p, q)] = []
                todo.append((p, q))
    while todo:
        p, q = todo.popleft()
        for a in range(k):
            for p2 in pre[p][a]:
                for q2 in pre[q][a]:
                    key = (min(p2, q2), max(p2, q2))
                    if p2 != q2 and key not in word:
                        word[key] = [a] + word[(p, q)]
                        todo.append(key)
    return word


def _counter(action, dist):
    """A cycle of length >= 2 of ``action`` (a tuple: state -> state or -1) holding two
    states an output can tell apart: ``(cycle, i, j)`` or None."""
    n = len(action)
    done = [False] * n
    for start in range(n):
        if done[start]:
            continue
        path, pos, q = [], {}, start
        while q >= 0 and not done[q] and q not in pos:
            pos[q] = len(path)
            path.append(q)
            q = action[q]
        for x in path:
            done[x] = True
        if q < 0 or q not in pos:
            continue
        cycle = path[pos[q]:]
        if len(cycle) < 2:
            continue
        for i in range(len(cycle)):
            for j in range(i + 1, len(cycle)):
                a, b = cycle[i], cycle[j]
                if (min(a, b), max(a, b)) in dist:
                    return cycle, i, j
    return None


def _compose(f, g):
    """``f`` then ``g`` (actions as tuples; -1 stays -1)."""
    return tuple(g[x] if x >= 0 else -1 for x in f)


def _monoid(m: _Machine, budget: int):
    """Breadth-first over words: action -> a shortest word with that action. Stops past
    ``budget`` actions (returns None)."""
    n = len(m.delta)
    letters = [tuple(m.delta[q][a] for q in range(n)) for a in range(len(m.alphabet))]
    ident = tuple(range(n))
    word = {ident: []}
    todo = deque([ident])
    while todo:
        f = todo.popleft()
        for a, g in enumerate(letters):
            h = _compose(f, g)
            if h not in word:
                word[h] = word[f] + [a]
                if len(word) > budget:
                    return None
                todo.append(h)
    del word[ident]
    return word


def _stable(m: _Machine, budget: int):
    """``(s, S_s)`` with ``S_s = S_2s`` (``S_t``: action -> a word of length t with it), or
    None past ``budget`` compositions."""
    n = len(m.delta)
    letters = [tuple(m.delta[q][a] for q in range(n)) for a in range(len(m.alphabet))]
    layers = [None, {g: [a] for a, g in enumerate(letters)}]
    seen = {frozenset(layers[1]): 1}
    work = 0
    while True:
        nxt = {}
        for f, wf in layers[-1].items():
            for a, g in enumerate(letters):
                work += 1
                h = _compose(f, g)
                if h not in nxt:
                    nxt[h] = wf + [a]
        if work > budget:
            return None, work
        t = len(layers)
        key = frozenset(nxt)
        if key in seen:
            first, period = seen[key], t - seen[key]
            s = -(-first // period) * period
            return (s, layers[first + (s - first) % period]), work
        seen[key] = t
        layers.append(nxt)


def _word(m: _Machine, xs) -> list[str]:
    return [m.alphabet[a] for a in xs]


def _witness(m: _Machine, dist, action, v, found) -> dict:
    """The witness of a counter ``found = (cycle, i, j)`` of ``action`` (the action of
    ``v``): ``u`` reaches the cycle's ``i``-th state, ``w`` tells the ``i``-th and ``j``-th
    apart."""
    cycle, i, j = found
    p = len(cycle)
    a, b = cycle[i], cycle[j]
    paths = {0: []}
    todo = deque([0])
    while todo:
        q = todo.popleft()
        for x, r in enumerate(m.delta[q]):
            if r >= 0 and r not in paths:
                paths[r] = paths[q] + [x]
                todo.append(r)
    u = paths[a]
    w = dist[(min(a, b), max(a, b))]
    start = 1
    outputs = []
    for n in range(start, start + 2 * p):
        q = m.output_of(u + v * n + w)
        outputs.append([n, None if q is None else m.label(q)])
    return {"u": _word(m, u), "v": _word(m, v), "w": _word(m, w), "period": p,
            "outputs": outputs, "states": list(cycle)}


def _sentence(variant, wit, stable_length) -> str:
    u, v, w = ("".join(wit[k]) or "ε" for k in ("u", "v", "w"))
    outs = ", ".join(f"n={n}: {'not an input of the task' if o is None else o}"
                     for n, o in wit["outputs"])
    tail = ("" if stable_length is None else
            f"; |v| = {len(wit['v'])} is the stable length s (S_s = S_2s), so for any periods "
            "a program uses some word of length a multiple of them acts like v")
    return (f"no {_VARIANTS[variant]} program at any size (decided): the automaton has a "
            f"counter — after u v^n w with u={u!r}, v={v!r}, w={w!r} the output cycles with "
            f"period {wit['period']} ({outs}), while every {_VARIANTS[variant]} program's "
            f"output on u v^n w is constant for large n (the eventual-constancy lemma, "
            f"analysis/prediction/crasp_decision.py){tail}")


def decide_crasp(dfa, variant: str = "crasp", next_set=None, alphabet=None,
                 budget: int = DEFAULT_DECISION_BUDGET) -> Decision:
    """Decide whether a counter proves that a regular task has no C-RASP program (module
    docstring: the lemma, the witness, what is and is not decided).

    Args:
        dfa: a :class:`tasks.huang.DFA` (``delta[state][symbol]``, None = reject, start 0).
        variant: ``"crasp"`` (C-RASP[], NoPE) or ``"crasp_pl"`` (C-RASP[periodic, local],
            learned APE with random offsets).
        next_set: None for the membership format (``BOS w SEP -> yes|no``), else the task's
            :class:`tasks.huang.NextSetFormat` (outputs on non-empty prefixes of members).
        alphabet: the symbol names, in symbol order (default ``"0", "1", ...``).
        budget: the most actions (C-RASP[]) or compositions (C-RASP[periodic, local]) to
            enumerate, and the most (state, subsequence set) pairs the construction of a
            program visits (:mod:`analysis.prediction.crasp_piecewise`); past it the status
            is ``"budget"`` (or ``"in fragment"`` without a program).

    Returns:
        a :class:`Decision`; ``status == "not in fragment"`` carries a witness that
        :meth:`Decision.check` re-runs.

    Raises:
        ValueError: an unknown variant, a budget below 1, or an alphabet of the wrong size.
    """
    if variant not in _VARIANTS:
        raise ValueError(f"variant is one of {', '.join(_VARIANTS)}, got {variant!r}")
    if budget < 1:
        raise ValueError(f"budget is at least 1 action, got {budget}")
    alphabet = [str(a) for a in range(dfa.k)] if alphabet is None else list(alphabet)
    if len(alphabet) != dfa.k:
        raise ValueError(f"the automaton has {dfa.k} symbols, the alphabet {len(alphabet)}")
    m = (_membership_machine(dfa, alphabet) if next_set is None
         else _next_set_machine(dfa, next_set, alphabet))
    dist = _distinguishable(m)
    stable_length = None
    if variant == "crasp":
        actions = _monoid(m, budget)
        work = budget + 1 if actions is None else len(actions)
    else:
        got, work = _stable(m, budget)
        actions = None if got is None else got[1]
        stable_length = None if got is None else got[0]
    for f, v in sorted((actions or {}).items(), key=lambda fv: (len(fv[1]), fv[1])):
        found = _counter(f, dist)
        if found:
            wit = _witness(m, dist, f, v, found)
            return Decision(variant, "not in fragment", wit, work, stable_length,
                            _sentence(variant, wit, stable_length), _machine=m)
    # no counter (or too many actions to look): a piecewise testable task still gets its
    # program, proved right at every length (an aperiodic automaton never has a counter).
    # Membership: Simon's theorem says first whether some k exists (J-trivial syntactic
    # monoid); the construction visits at most ``budget`` (state, subsequence set) pairs
    simon = _j_trivial(m, dist, budget) if m.empty_asked else None
    pw = None if simon is False else piecewise_program(m, m.empty_asked, budget)
    if pw is not None:
        return Decision(variant, "in fragment", None, work, stable_length,
                        _in_sentence(variant, pw, m), _piecewise_dict(pw, m), _machine=m,
                        _piecewise=pw)
    # else the components' potentials (analysis/prediction/crasp_potential.py), on the
    # minimal machine
    # (a partial machine whose merge is not well defined is used as it is: the construction
    # is right for any machine, minimality only makes it apply more often)
    quo = _quotient(m, dist) or m
    pot = potential_program(quo)
    if pot is not None:
        return Decision(variant, "in fragment", None, work, stable_length,
                        _potential_sentence(variant, pot, quo), _potential_dict(pot, quo),
                        _machine=m, _potential=pot, _minimal=quo)
    # C-RASP[periodic, local]: the same construction on the machine's product with the
    # position mod p and the symbols just before (its letters are that fragment's Booleans)
    got = periodic_local_program(quo) if variant == "crasp_pl" else None
    if got is not None:
        pot, prod = got
        return Decision(variant, "in fragment", None, work, stable_length,
                        _potential_sentence(variant, pot, prod), _potential_dict(pot, prod),
                        _machine=m, _potential=pot, _minimal=prod)
    if simon:
        return Decision(variant, "in fragment", None, work, stable_length, (
            f"a {_VARIANTS['crasp']} program exists (decided, program not constructed): the "
            "language's syntactic monoid is J-trivial, so it is piecewise testable (Simon "
            "1975) — a Boolean combination of 'contains u as a subsequence' for words u of "
            "some length k — and each such test is a C-RASP[] count (analysis/prediction/"
            "crasp_piecewise.py); the k it needs is beyond the construction's budget"
            + ("" if variant == "crasp" else
               "; a C-RASP[] program is a C-RASP[periodic, local] program")), _machine=m)
    if actions is None:
        return Decision(variant, "budget", actions=work, detail=(
            f"not decided: more than {budget} actions of the automaton to enumerate (raise "
            "the decision budget)"), _machine=m)
    where = "transition monoid" if variant == "crasp" else \
        f"stable semigroup (words of length {stable_length})"
    pt = ("not piecewise testable (its syntactic monoid is not J-trivial: Simon 1975)"
          if simon is False else "not shown piecewise testable within the construction's "
          "budget") + (", and some strongly connected component of its minimal automaton has "
                       "no potential (balanced morphism) that separates its states")
    return Decision(variant, "no counter", None, work, stable_length, (
        f"not decided: the automaton's {where} has no counter an output can see, so the "
        f"eventual-constancy lemma proves nothing ({len(actions)} actions), and the task is "
        f"{pt}; the verdict rests on the search"), _machine=m)


def _classes(m: _Machine, dist: dict) -> list:
    """``cls[q]``: the smallest state indistinguishable from ``q`` (the minimal machine's
    state of ``q``)."""
    n = len(m.delta)
    cls = list(range(n))
    for p in range(n):
        for q in range(p):
            if (q, p) not in dist and cls[q] == q:
                cls[p] = q
                break
    return cls


def _quotient(m: _Machine, dist: dict) -> _Machine | None:
    """The minimal machine: ``m`` with its indistinguishable states merged (states renumbered
    in order, the start stays 0), or None when merging is not well defined (two merged states
    whose transitions on a symbol disagree, which a partial machine allows)."""
    cls = _classes(m, dist)
    reps = sorted(set(cls))
    idx = {r: i for i, r in enumerate(reps)}
    delta = []
    for r in reps:
        row = []
        for a in range(len(m.alphabet)):
            to = {idx[cls[m.delta[q][a]]] if m.delta[q][a] >= 0 else -1
                  for q in range(len(m.delta)) if cls[q] == r}
            if len(to) != 1:
                return None
            row.append(to.pop())
        delta.append(row)
    return _Machine(delta, [m.out[r] for r in reps], m.alphabet, m._names, m.empty_asked)


def _j_trivial(m: _Machine, dist: dict, budget: int) -> bool | None:
    """Whether the syntactic monoid of a membership machine is J-trivial (Simon 1975: the
    language is then piecewise testable), or None past ``budget`` elements. The minimal
    automaton is ``m`` with its indistinguishable states merged; a finite monoid is J-trivial
    iff it is R-trivial and L-trivial, i.e. iff its right and its left Cayley graphs have no
    cycle through two elements (strongly connected components, networkx)."""
    import networkx as nx
    cls = _classes(m, dist)
    reps = sorted(set(cls))
    idx = {r: i for i, r in enumerate(reps)}
    letters = [tuple(idx[cls[m.delta[r][a]]] for r in reps) for a in range(len(m.alphabet))]
    ident = tuple(range(len(reps)))
    elems, todo = {ident}, deque([ident])
    right, left = nx.DiGraph(), nx.DiGraph()
    while todo:
        f = todo.popleft()
        for g in letters:
            for graph, h in ((right, _compose(f, g)), (left, _compose(g, f))):
                graph.add_edge(f, h)
                if h not in elems:
                    elems.add(h)
                    if len(elems) > budget:
                        return None
                    todo.append(h)
    return all(len(c) == 1 for graph in (right, left)
               for c in nx.strongly_connected_components(graph))


def _potential_dict(pot, m: _Machine) -> dict:
    return {"construction": "potentials", "label": _potential_label(pot, m),
            "product": {"period": m.period, "window": m.window} if hasattr(m, "period")
            else None,
            "states": len(m.delta), "components": len(pot.components),
            "coordinates": pot.dims, "definitions": len(pot.defs),
            "balanced_morphisms": [
                {"states": c["states"],
                 "h": [{m.alphabet[a]: x for a, x in h.items()} for h in c["h"]],
                 "phi": c["phi"]} for c in pot.components if c["h"]]}


def _product_words(m) -> str:
    """How a product machine reads positions ('' for the machine itself)."""
    parts = ([f"the position mod {m.period}"] if getattr(m, "period", 1) > 1 else []) + (
        [f"the {m.window} symbol(s) before it"] if getattr(m, "window", 0) else [])
    return " and ".join(parts)


def _potential_label(pot, m=None) -> str:
    on = _product_words(m) if m is not None else ""
    if not pot.dims:
        return "partially ordered automaton (R-trivial)" + (f" over {on}" if on else "")
    return (f"potentials: {pot.dims} balanced morphism(s) over {len(pot.components)} "
            "component(s)" + (f" of the automaton's product with {on}" if on else ""))


def _potential_sentence(variant, pot, m: _Machine) -> str:
    cyc = [c for c in pot.components if c["h"]]
    how = ("every strongly connected component of the minimal automaton is one state (a "
           "partially ordered automaton: the language is R-trivial, Brzozowski & Fich 1980), "
           "so the state after each prefix is read off the first positions where the run "
           "leaves each state" if not cyc else
           f"each of the minimal automaton's {len(cyc)} component(s) with a loop has a "
           "potential (a balanced morphism h: every loop sums to 0, phi(r) - phi(p) = h(a) on "
           "its transitions) that tells its states apart — "
           + "; ".join(", ".join(f"h({m.alphabet[a]}) = {x}" for a, x in sorted(h.items()))
                       for c in cyc for h in c["h"])
           + " — so the state inside it is the entry state plus h summed over the symbols "
           "since the entry, a C-RASP[] count")
    on = _product_words(m)
    if on:
        return (f"a {_VARIANTS['crasp_pl']} program exists (decided, constructed): in the "
                f"automaton's product with {on} (letters: a symbol with that position "
                "information, a C-RASP[periodic, local] Boolean) " + how.replace(
                    "the minimal automaton", "the product") + f"; the program ({len(pot.defs)} "
                "definitions) follows the product's run, which is the automaton's, and is "
                "right at every length by the induction in analysis/prediction/"
                "crasp_potential.py")
    return (f"a {_VARIANTS['crasp']} program exists (decided, constructed): {how}; the program "
            f"({len(pot.defs)} definitions) follows the run of the automaton through its "
            "components and is right at every length by the induction in "
            "analysis/prediction/crasp_potential.py"
            + ("" if variant == "crasp" else
               "; a C-RASP[] program is a C-RASP[periodic, local] program"))


def _piecewise_dict(pw, m: _Machine) -> dict:
    return {"construction": "subsequences", "label": f"{pw.k}-piecewise testable", "k": pw.k, "features": ["".join(_word(m, u)) for u in pw.features],
            "reads_symbol_at_i": pw.uses_last, "pairs": pw.pairs, "work": pw.work}


def _in_sentence(variant, pw, m: _Machine) -> str:
    feats = ", ".join(repr("".join(_word(m, u))) for u in pw.features) or "none"
    last = " and of the symbol at the position (Q_a(i))" if pw.uses_last else ""
    return (f"a {_VARIANTS['crasp']} program exists (decided, constructed): the output after "
            f"every prefix is a function of which of the subsequences {feats} it contains{last} "
            f"(checked exhaustively on all {pw.pairs:,} reachable pairs of automaton state and "
            f"set of subsequences of length <= {pw.k}: the task is {pw.k}-piecewise testable, "
            "Simon 1975), and each 'contains v a^r' is the C-RASP[] count "
            "#[j<=i] (Q_a(j) and S_v(j)) >= r (analysis/prediction/crasp_piecewise.py)"
            + ("" if variant == "crasp" else
               "; a C-RASP[] program is a C-RASP[periodic, local] program"))


#: :func:`decide_task`'s decisions in this process (cleared with the predictor's search caches)
DECISIONS: dict = {}


def decide_task(task, variant: str, budget: int = DEFAULT_DECISION_BUDGET) -> Decision | None:
    """:func:`decide_crasp` of a task defined by an automaton (Huang et al.'s formal
    languages and ``--regex`` tasks: a ``dfa`` attribute; the next-set format when it has a
    ``format``), once per process and ``budget``; None for a task without an automaton. A
    decided "in fragment" with a constructed program gets its IR s-op (``sop``) and its text
    in the task's values (``program["text"]``, ``program["features"]``).

    Raises:
        ValueError: an unknown variant.
    """
    dfa = getattr(task, "dfa", None)
    if dfa is None:
        return None
    key = (task.name, getattr(task, "sha256", None), repr(getattr(task, "spec", None)),
           variant, budget)
    if key not in DECISIONS:
        d = decide_crasp(dfa, variant, getattr(task, "format", None), task.vocab.tokens[:dfa.k],
                         budget)
        if d.proved_in and d._piecewise is not None:
            _build_program(d, task)
        elif d.proved_in and d._potential is not None:
            _build_potential_program(d, task)
        DECISIONS[key] = d
    return DECISIONS[key]


#: most features whose decision list is minimized (sympy's ``SOPform``, Quine-McCluskey, with
#: the unreachable classes as don't-cares: exponential in the features); above it each output's
#: condition is the disjunction of its classes as they are
_MINIMIZED_FEATURES = 6


def _eos_entry(m, value) -> list:
    """Membership (``BOS w SEP -> answer EOS``): the decision-list entry that writes EOS after
    the answer token (``[]`` for next-character sets); ``value``: token -> its value."""
    if not m.empty_asked:
        return []
    answer = sorted({value(m._names(o)) for o in (False, True)})
    return [(value("EOS"), ("or", ("Q", answer[0]), ("Q", answer[1])))]


def _build_program(d: Decision, task) -> None:
    """The constructed program of ``d`` in the task's values: a decision list (one entry per
    output but the most frequent, each a minimal sum of products of the ``S_u`` over the
    reachable classes, sympy's ``SOPform`` with the unreachable classes as don't-cares, up to
    :data:`_MINIMIZED_FEATURES` features), its
    IR s-op (``d.sop``) and its text (``d.program["text"]``)."""
    from sympy import And, Not, Or, symbols
    from sympy.logic import SOPform


    pw, m, vocab = d._piecewise, d._machine, task.vocab
    value = lambda token: vocab.values[vocab.id(token)]  # noqa: E731
    sym_values = [value(t) for t in m.alphabet]
    feats = [subsequence_recipe(u, sym_values) for u in pw.features] + (
        [("Q", v) for v in sym_values] if pw.uses_last else [])
    outs = [value(m._names(o)) for _, o in pw.table]
    default = max(sorted(set(outs)), key=outs.count)
    xs = symbols(f"x0:{len(feats)}") if feats else ()
    seen = {lits for lits, _ in pw.table}
    small = len(feats) <= _MINIMIZED_FEATURES
    dont = ([list(c) for c in itertools.product((0, 1), repeat=len(feats)) if c not in seen]
            if small else [])
    entries = []
    for val in sorted(set(outs) - {default}):
        minterms = [list(lits) for (lits, _), o in zip(pw.table, outs) if o == val]
        expr = (SOPform(xs, minterms, dont) if small else
                Or(*(And(*(x if b else Not(x) for x, b in zip(xs, t))) for t in minterms)))
        entries.append((val, _recipe(expr, xs, feats)))
    entries[:0] = _eos_entry(m, value)
    names = {v: t for t, v in zip(vocab.tokens, vocab.values)}
    pw.entries, pw.default = entries, default
    d.sop = build_program(entries, default, sym_values, vocab.values)
    d.program["text"] = decision_list_text(entries, default, names)
    d.program["features"] = {"".join(m.alphabet[a] for a in u): recipe_text(f, names)
                             for u, f in zip(pw.features, feats)}
    if pw.uses_last:
        d.program["features"]["(the symbol at i)"] = " / ".join(
            recipe_text(f, names) for f in feats[len(pw.features):])


def _with_letters(rec, letter):
    """``rec`` with every letter index ``("Q", a)`` replaced by ``letter[a]`` (the symbol's
    ``Q`` in its value, or a product letter's Boolean)."""
    if rec[0] == "Q":
        return letter[rec[1]]
    return tuple(_with_letters(x, letter) if isinstance(x, tuple) else x for x in rec)


def _build_potential_program(d: Decision, task) -> None:
    """The program constructed from potentials (:mod:`analysis.prediction.crasp_potential`)
    in the task's values: a decision list over the ``In_q`` definitions (one entry per output
    but the most frequent: the disjunction of the states with it), its IR s-op (``d.sop``,
    every definition built once) and its text (the definitions, then the list)."""
    pot, m, vocab = d._potential, d._minimal, task.vocab
    value = lambda token: vocab.values[vocab.id(token)]  # noqa: E731
    if hasattr(m, "period"):            # a product machine: its letters read positions
        base = [value(t) for t in m.symbols]
        letter = [product_letter_recipe(x, m.period, base) for x in m.letters]
    else:
        letter = [("Q", value(t)) for t in m.alphabet]
    outs = {q: value(m._names(m.out[q])) for q in pot.state_def if m.out[q] is not None}
    ranked = sorted(set(outs.values()))
    default = max(ranked, key=lambda v: sum(o == v for o in outs.values()))
    entries = []
    for val in ranked:
        if val == default:
            continue
        ins = [("ref", pot.state_def[q]) for q in sorted(outs) if outs[q] == val]
        rec = ins[0]
        for x in ins[1:]:
            rec = ("or", rec, x)
        entries.append((val, rec))
    entries[:0] = _eos_entry(m, value)
    # only the definitions the list reads (a state whose output is the default is not)
    defs = {k: _with_letters(v, letter) for k, v in
            used_definitions(pot.defs, {r for _, rec in entries for r in _refs(rec)}).items()}
    names = {v: t for t, v in zip(vocab.tokens, vocab.values)}
    pot.entries, pot.default = entries, default
    content = [value(t) for t in getattr(m, "symbols", None) or m.alphabet]
    d.sop = build_program(entries, default, content, vocab.values, defs=defs)
    lines = [f"{k}(i) := {recipe_text(v, names)}" for k, v in defs.items()]
    d.program["text"] = "\n".join(lines + [decision_list_text(entries, default, names)])
    d.program["definitions"] = len(defs)


def _refs(rec):
    """The names of the definitions ``rec`` reads directly."""
    if rec[0] == "ref":
        yield rec[1]
        return
    for x in rec[1:]:
        if isinstance(x, tuple):
            yield from _refs(x)


def _recipe(expr, xs, feats):
    """A sympy Boolean over ``xs`` as a C-RASP search recipe over ``feats``."""
    from sympy import And, Not, Or
    if expr in xs:
        return feats[list(xs).index(expr)]
    if isinstance(expr, Not):
        return ("not", _recipe(expr.args[0], xs, feats))
    if isinstance(expr, (And, Or)):
        op = "and" if isinstance(expr, And) else "or"
        parts = [_recipe(a, xs, feats) for a in sorted(expr.args, key=str)]
        out = parts[0]
        for p in parts[1:]:
            out = (op, out, p)
        return out
    raise ValueError(f"unexpected Boolean {expr!r} in a constructed program")
