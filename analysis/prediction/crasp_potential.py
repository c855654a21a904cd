"""Constructing C-RASP[] programs for regular tasks whose components are tracked by counts.

:mod:`analysis.prediction.crasp_piecewise` constructs a program when the output is a function
of which subsequences a prefix contains. This module constructs one for a wider class: tasks
whose (minimal) automaton's **strongly connected components** each carry a *potential* — a
map ``phi`` from the component's states to integer vectors and a map ``h`` from symbols to
integer vectors with ``phi(r) - phi(p) = h(a)`` on every transition ``p -a-> r`` inside the
component (``h`` is a *balanced morphism*: every loop of the component sums to 0) — that tells
the component's states apart. A partially ordered automaton (every component one state: the
R-trivial languages, Brzozowski & Fich 1980) has the trivial potential; ``(ab)*`` has
``h(a) = 1, h(b) = -1``; ``(baa|c)*`` has ``h(a) = 1, h(b) = -2, h(c) = 0``.

**The program** (Huang et al. 2025, arXiv 2410.02140, §3: C-RASP[]'s Booleans ``Q_a(i)``,
``not``, ``and``, ``or``; counts ``#[j <= i] B(j)``, ``+``, ``-``; comparisons with constants).
The run of the automaton enters each component at most once (the components form a DAG), at
one entry state, stays while it reads symbols of the component's inner transitions and leaves
at the first symbol that leads out. For a component ``T`` (the start component is entered at
position 0, before the input, at the start state), with definitions read in the order of the
components:

- ``Ent_T,e(j) = OR_{p not in T, a: delta(p, a) = e} (Q_a(j) and Last_p(j))``: ``T`` is
  entered at ``j`` at state ``e``; ``A_T(j)`` the disjunction over ``e``;
  ``E_T(j) = #[k <= j] A_T(k) > 0``, ``W_T,e(j) = #[k <= j] Ent_T,e(k) > 0`` and
  ``S_T(j) = E_T(j) and not A_T(j)`` (``j`` is strictly after the entry).
- ``D_T,m(j) = sum_a h_m(a) #[k <= j] (Q_a(k) and S_T(k))``: the ``m``-th coordinate of
  ``h`` summed over the symbols after the entry.
- ``B_T,p(j) = OR_a (Q_a(j) and OR_e (W_T,e(j) and D_T(j) == phi(p) - phi(e) + h(a)))``: if
  the run was still in ``T`` before ``j``, its state there was ``p``.
- ``X_T(j) = S_T(j) and OR_{p, a: delta(p, a) not in T} (B_T,p(j) and Q_a(j))``, ``Z_T(j) =
  #[k <= j] X_T(k)``; ``R_T(j) = S_T(j) and (Z_T(j) == 0 or (X_T(j) and Z_T(j) == 1))``: the
  run was in ``T`` after the prefix before ``j``; ``Last_p(j) = R_T(j) and B_T,p(j)``.
- ``In_q(i) = E_T(i) and Z_T(i) == 0 and OR_e (W_T,e(i) and D_T(i) == phi(q) - phi(e))``: the
  state after the prefix ending at ``i`` is ``q``. The output is a decision list over the
  ``In_q``.

*Proof* (induction over the components in topological order). If ``Last_p`` is right for the
states of earlier components, ``Ent_T,e(j)`` holds iff the run enters ``T`` at ``j`` at ``e``,
so ``A``, ``E``, ``W``, ``S`` are right. While the run stays in ``T`` each symbol read adds
``h(a) = phi(r) - phi(p)``, so ``D_T(j) - h(w_j) = phi(state before j) - phi(e)``
(telescoping); ``phi`` separates ``T``'s states, so ``B_T,p(j)`` holds iff the state before
``j`` is ``p``, for every ``j`` up to the exit. ``X_T`` is therefore false strictly between
the entry and the exit and true at the exit (the state before it is in ``T`` and its symbol
leads out), so ``Z_T(j) - [X_T(j)] = 0`` iff the run had not left ``T`` before ``j``: ``R_T``,
``Last_p`` and ``In_q`` are right. QED. The program is exact at every length; the predictor
verifies it again on the task like any program.

**What is not constructed here.** A component whose states no potential separates (the
research code ``pentagonalize/crasp_reg`` iterates the relabelling for those; we found no
published proof of that step) and every automaton with a counter (no program exists:
:mod:`analysis.prediction.crasp_decision`). Potentials are exact rational nullspaces (sympy),
scaled to integers; the loops are those a spanning tree of the component closes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["PotentialProgram", "potential_program", "used_definitions", "ProductMachine",
           "product_machine", "product_letter_recipe", "periodic_local_program", "PRODUCTS"]


@dataclass
class PotentialProgram:
    """A C-RASP[] program constructed from the components' potentials (module docstring).

    Attributes:
        components: per strongly connected component (topological order): ``states``,
            ``entries`` (entry states), ``h`` (per coordinate: symbol index -> integer) and
            ``phi`` (per coordinate: state -> integer); no coordinate for a one-state
            component.
        defs: definition name -> recipe (:mod:`analysis.prediction.crasp_search.recipes`;
            ``("ref", name)`` reads another definition at the same position), in the order
            they are defined, over symbol indices (``("Q", a)``).
        state_def: state -> the name of its ``In_q`` definition.
        dims: the potentials' coordinates over all components.
        work: definitions written (before the unused ones are dropped).
        entries, default: the decision list over the ``In_q`` in the task's values, filled
            by the caller that knows them
            (:func:`analysis.prediction.crasp_decision.decide_task`).
    """

    components: list
    defs: dict
    state_def: dict
    dims: int
    work: int = 0
    entries: list = field(default_factory=list)
    default: object = None


def _potential(states, inner):
    """Integer coordinates ``(h, phi)`` of the balanced morphisms of one component (``inner``:
    ``(p, a, r)`` transitions inside it) whose potentials are not constant, or None when no
    potential separates the states.

    A spanning tree from the first state gives each state ``q`` the symbol counts ``P(q)`` of
    its tree path; every inner transition closes a loop with symbol counts ``P(p) + e_a -
    P(r)``, and ``h`` is balanced iff it is 0 on all of them (the nullspace of those loops'
    symbol counts: at most one column per symbol, so the work grows with the transitions, not
    with the states squared); then ``phi(q) = h . P(q)``."""
    from collections import deque

    from sympy import Matrix, ilcm
    letters = sorted({a for _, a, _ in inner})
    col = {a: i for i, a in enumerate(letters)}
    out = {}
    for p, a, r in inner:
        out.setdefault(p, []).append((a, r))
    P = {states[0]: (0,) * len(letters)}
    todo = deque([states[0]])
    while todo:
        p = todo.popleft()
        for a, r in out.get(p, ()):
            if r not in P:
                P[r] = tuple(x + (i == col[a]) for i, x in enumerate(P[p]))
                todo.append(r)
    loops = {tuple(x + (i == col[a]) - y for i, (x, y) in enumerate(zip(P[p], P[r])))
             for p, a, r in inner}
    loops.discard((0,) * len(letters))
    basis = (Matrix(sorted(loops)).nullspace() if loops else
             [Matrix([int(i == j) for i in range(len(letters))]) for j in range(len(letters))])
    coords = []
    for vec in basis:
        scale = ilcm(*[x.q for x in vec]) if len(vec) > 1 else vec[0].q
        h = {a: int(vec[col[a]] * scale) for a in letters}
        phi = {q: sum(h[a] * P[q][col[a]] for a in letters) for q in states}
        if len(set(phi.values())) > 1:
            coords.append((h, phi))
    keys = {q: tuple(phi[q] for _, phi in coords) for q in states}
    if len(set(keys.values())) < len(states):
        return None
    return coords


def potential_program(machine) -> PotentialProgram | None:
    """The program of the module docstring for ``machine``, or None when some component has no
    separating potential.

    Args:
        machine: a *minimal* Moore machine (``delta[q][a]``: a state or -1 when the word
            leaves the task's inputs; ``out[q]``; start 0), as
            :mod:`analysis.prediction.crasp_decision` builds it (minimality only makes the
            construction apply more often: it is right for any machine it accepts).
    """
    import networkx as nx
    n, k = len(machine.delta), len(machine.alphabet)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from((q, r) for q in range(n) for r in machine.delta[q] if r >= 0)
    dag = nx.condensation(g)
    comp_of = dag.graph["mapping"]
    order = list(nx.topological_sort(dag))
    defs: dict = {}
    state_def: dict = {}
    comps = []
    ref = lambda name: ("ref", name)  # noqa: E731
    Q = lambda a: ("Q", a)  # noqa: E731

    def any_of(items):
        items = list(items)
        if not items:
            return None
        out = items[0]
        for x in items[1:]:
            out = ("or", out, x)
        return out

    def all_of(items):
        items = [x for x in items if x is not None]
        out = items[0]
        for x in items[1:]:
            out = ("and", out, x)
        return out

    def positive(rec):      # a count > 0
        return ("cmpk", "gt", 0, rec)

    def eq(rec, c):
        return ("cmpk", "eq", int(c), rec)

    for t in order:
        states = sorted(dag.nodes[t]["members"])
        inner = [(p, a, machine.delta[p][a]) for p in states for a in range(k)
                 if machine.delta[p][a] >= 0 and comp_of[machine.delta[p][a]] == t]
        coords = _potential(states, inner) if len(states) > 1 else []
        if coords is None:
            return None
        start = 0 in states
        entries = [0] if start else sorted({r for q in range(n) if comp_of[q] != t
                                            for r in machine.delta[q]
                                            if r >= 0 and comp_of[r] == t})
        comps.append({"states": states, "entries": entries,
                      "h": [dict(h) for h, _ in coords], "phi": [dict(p) for _, p in coords]})
        name = f"T{len(comps) - 1}"
        if not start:
            for e in entries:
                srcs = {}
                for p in range(n):
                    if comp_of[p] == t:
                        continue
                    for a in range(k):
                        if machine.delta[p][a] == e:
                            srcs.setdefault(p, []).append(a)
                defs[f"Ent_{name}_q{e}"] = any_of(
                    ("and", any_of(Q(a) for a in sorted(srcs[p])), ref(f"Last_q{p}"))
                    for p in sorted(srcs))
            defs[f"A_{name}"] = any_of(ref(f"Ent_{name}_q{e}") for e in entries)
            defs[f"E_{name}"] = positive(("cnt", ref(f"A_{name}")))
            for e in entries:
                defs[f"W_{name}_q{e}"] = positive(("cnt", ref(f"Ent_{name}_q{e}")))
            defs[f"S_{name}"] = ("and", ref(f"E_{name}"), ("not", ref(f"A_{name}")))
        after = None if start else ref(f"S_{name}")
        used = sorted({a for _, a, _ in inner})
        if coords:
            for a in used:
                defs[f"C_{name}_{a}"] = ("cnt", Q(a) if start else ("and", Q(a), after))
        for m, (h, _) in enumerate(coords):
            terms = []
            for a in used:
                terms += [("+" if h[a] > 0 else "-", ref(f"C_{name}_{a}"))] * abs(h[a])
            pos = [x for s, x in terms if s == "+"]
            neg = [x for s, x in terms if s == "-"]
            expr = pos[0] if pos else ("sub", neg[0], neg[0])
            for x in pos[1:]:
                expr = ("add", expr, x)
            for x in neg:
                expr = ("sub", expr, x)
            defs[f"D_{name}_{m}"] = expr

        def at(target, e, shift):
            """W_e and D == target - phi(e) + shift, per coordinate (None: no condition)."""
            conds = [] if start else [ref(f"W_{name}_q{e}")]
            conds += [eq(ref(f"D_{name}_{m}"), phi[target] - phi[e] + shift[m])
                      for m, (_, phi) in enumerate(coords)]
            return all_of(conds) if conds else None

        def state_before(p, a):
            conds = [at(p, e, [h.get(a, 0) for h, _ in coords]) for e in entries]
            if any(c is None for c in conds):
                return Q(a)
            return ("and", Q(a), any_of(conds))

        for p in states:
            defs[f"B_q{p}"] = any_of(state_before(p, a) for a in range(k)
                                     if machine.delta[p][a] >= 0)
        leaving = [(p, a) for p in states for a in range(k)
                   if machine.delta[p][a] >= 0 and comp_of[machine.delta[p][a]] != t]
        if leaving:
            exit_ = any_of(("and", ref(f"B_q{p}"), Q(a)) for p, a in leaving)
            defs[f"X_{name}"] = exit_ if start else ("and", after, exit_)
            defs[f"Z_{name}"] = ("cnt", ref(f"X_{name}"))
            stay = ("or", eq(ref(f"Z_{name}"), 0),
                    ("and", ref(f"X_{name}"), eq(ref(f"Z_{name}"), 1)))
            defs[f"R_{name}"] = stay if start else ("and", after, stay)
        for p in states:
            if leaving or not start:
                cond = [ref(f"R_{name}")] if leaving else [after]
                defs[f"Last_q{p}"] = all_of(cond + [ref(f"B_q{p}")])
            else:
                defs[f"Last_q{p}"] = ref(f"B_q{p}")
        for q in states:
            conds = [] if start else [ref(f"E_{name}")]
            if leaving:
                conds.append(eq(ref(f"Z_{name}"), 0))
            at_q = [at(q, e, [0] * len(coords)) for e in entries]
            if not any(c is None for c in at_q):
                conds.append(any_of(at_q))
            # the start component alone, with no way out: its one state holds at every position
            defs[f"In_q{q}"] = all_of(conds) if conds else ("not", ("and", Q(0), ("not", Q(0))))
            state_def[q] = f"In_q{q}"
    return PotentialProgram(comps, used_definitions(defs, state_def.values()), state_def,
                            sum(len(c["h"]) for c in comps), work=len(defs))


def used_definitions(defs: dict, roots) -> dict:
    """The definitions the names ``roots`` need (themselves included, transitively through
    ``("ref", name)``), in definition order; the others dropped."""
    need, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in need or name not in defs:
            continue
        need.add(name)
        stack = [defs[name]]
        while stack:
            rec = stack.pop()
            if rec[0] == "ref":
                todo.append(rec[1])
            else:
                stack.extend(x for x in rec[1:] if isinstance(x, tuple))
    return {k: v for k, v in defs.items() if k in need}


@dataclass
class ProductMachine:
    """A machine's product with the position's residue mod ``period`` and the ``window``
    symbols before it (C-RASP[periodic, local]'s extra atoms, Huang et al. 2025 §3): state
    ``(q, t, previous symbols)``, one *product letter* ``(a, t, previous symbols)`` per symbol
    read at a position ``j`` with ``j mod period = t`` after those symbols (-1: no symbol
    there, the position is BOS or before). Its run is the machine's, so a program for it is one
    for the machine; the letters are C-RASP[periodic, local] Booleans at ``j``.

    Attributes:
        delta, out, alphabet, empty_asked: as the machine's (``alphabet``: the product
            letters' names), start 0.
        letters: ``(a, t, previous)`` per product letter index.
    """

    delta: list
    out: list
    alphabet: list
    empty_asked: bool
    letters: list
    period: int
    window: int
    #: output -> its name (the machine's)
    _names: object = None
    #: the machine's own symbols
    symbols: list = field(default_factory=list)


def product_machine(machine, period: int, window: int, max_states: int = 4000):
    """The :class:`ProductMachine` of ``machine`` (reachable states only; position 0 is BOS,
    the first symbol is at position 1), or None past ``max_states`` states (a work budget).

    Raises:
        ValueError: a period below 1 or a negative window.
    """
    if period < 1 or window < 0:
        raise ValueError("period >= 1 and window >= 0")
    k = len(machine.alphabet)
    start = (0, 0, (-1,) * window)
    index, order = {start: 0}, [start]
    letter_ix, letters = {}, []
    delta = []
    for q, t, prev in order:
        row = {}
        for a in range(k):
            r = machine.delta[q][a]
            if r < 0:
                continue
            t2 = (t + 1) % period
            lt = (a, t2, prev)
            if lt not in letter_ix:
                letter_ix[lt] = len(letters)
                letters.append(lt)
            nxt = (r, t2, (prev + (a,))[1:] if window else ())
            if nxt not in index:
                if len(order) >= max_states:
                    return None
                index[nxt] = len(order)
                order.append(nxt)
            row[letter_ix[lt]] = index[nxt]
        delta.append(row)
    n_letters = len(letters)
    full = [[row.get(x, -1) for x in range(n_letters)] for row in delta]
    names = [machine.alphabet[a] + (f"@{t}" if period > 1 else "")
             + ("".join("<" + ("^" if b < 0 else machine.alphabet[b]) for b in prev[::-1]))
             for a, t, prev in letters]
    return ProductMachine(full, [machine.out[q] for q, _, _ in order], names,
                          machine.empty_asked, letters, period, window, machine._names,
                          list(machine.alphabet))


#: (period, window) pairs a C-RASP[periodic, local] construction tries, in order of the
#: product's size; (1, 0) is the machine itself (C-RASP[])
PRODUCTS = [(2, 0), (3, 0), (4, 0), (1, 1), (2, 1), (6, 0), (1, 2), (8, 0), (3, 1), (4, 1),
            (2, 2), (1, 3)]


def periodic_local_program(machine, max_states: int = 4000):
    """``(program, product)``: the first product of :data:`PRODUCTS` (at most ``max_states``
    states) whose components all have separating potentials, with its program, or None. The
    product's run is the machine's, so the program (over product letters: C-RASP[periodic,
    local] Booleans, :func:`product_letter_recipe`) computes the machine's output."""
    for period, window in PRODUCTS:
        prod = product_machine(machine, period, window, max_states)
        if prod is None:
            continue
        prog = potential_program(prod)
        if prog is not None:
            return prog, prod
    return None


def product_letter_recipe(letter, period: int, values) -> tuple:
    """The C-RASP[periodic, local] Boolean of a product letter ``(a, t, previous)`` at the
    current position, over symbol values ``values``: ``Q_a``, ``i % period == t`` (when the
    period is above 1), and for the ``m``-th previous symbol ``Q_b`` at ``i - m`` (or, for
    -1, no symbol there: ``not (Q_x or ..)`` at ``i - m``, which also holds before BOS)."""
    a, t, prev = letter
    rec = ("Q", values[a])
    if period > 1:
        rec = ("and", rec, ("per", period, t))
    for m, b in enumerate(reversed(prev), start=1):
        if b >= 0:
            rec = ("and", rec, ("loc", m, ("Q", values[b])))
        else:
            anyq = ("Q", values[0])
            for v in values[1:]:
                anyq = ("or", anyq, ("Q", v))
            rec = ("and", rec, ("not", ("loc", m, anyq)))
    return rec
