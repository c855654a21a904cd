"""The C-RASP search :func:`search_crasp` (batches, counterexample rounds, the passes of
``crasp_pl``, final check and verification) and :class:`CRaspGrammar`, the grammar behind the
search core's interface. Part of :mod:`analysis.prediction.crasp_search`; callers use the one
entry point, :func:`analysis.prediction.search.search` (``grammar="crasp"`` or
``"crasp_pl"``).
"""

from __future__ import annotations

import time
import numpy as np

import tasks
from rasp.analyses.crasp import VARIANTS, check_crasp
from tasks.decode import verify_program

from analysis.prediction.budget import (BUDGET_STOP, DEFAULT_CRASP_BUDGET, TIME_CAP_STOP,
                                        Limits)

from analysis.prediction.search_core import (MEMORY_STOP, Round, SearchError, SearchResult,
                                             best_bound, cegis, exhaustive_rows, hard_rows,
                                             program_source, shortest_failing, task_problem)

from .enumeration import _Budget, _Enum, _Memory, _Timeout
from .recipes import _Batch, _decide, build_program, decision_list_text

#: most distinct output values a decision list is enumerated for (its requirement sets grow as
#: 2^(n-1) per value); more is refused with that reason, before anything is allocated
MAX_DECISION_VALUES = 12


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------

#: at most this many of a task's hard cases per length join the C-RASP validation batch
HARD_CASES_PER_LENGTH = 64


def _content(task) -> list[int]:
    """The task's content alphabet (the values its inputs are made of, ``0..k-1``): the task's
    ``k`` (Huang et al.'s tasks, task files, regular expressions), else its vocabulary's
    ``n_content`` (:func:`tasks.base.numeric_vocab`: the part-A tasks), else the vocabulary's
    non-negative integer values. The grammar's alphabet-uniform constructs range over it, so a
    task file that re-implements a catalogue task gets the same grammar."""
    k = getattr(task, "k", None)
    if k is None:
        k = task.vocab.n_content
    if k is None:
        k = sum(1 for v in task.vocab.values if isinstance(v, int) and v >= 0)
    return list(range(int(k)))


def _labels_only(task, samples: int = 3) -> bool:
    """Whether ``task`` has a content alphabet below 5 symbols (where the grammar is not
    alphabet-uniform by default) and next tokens that are never content symbols (yes/no,
    next-character sets, EOS), checked on ``samples`` seeded examples per length 1..6: there
    the alphabet-uniform grammar holds every concrete Boolean and the same decision lists."""
    content = set(_content(task))
    if len(content) >= 5:
        return False
    try:
        rows = task_problem(task, range(1, 7), samples, 0).rows
    except SearchError:
        return False
    return not any(v in content for vals, first in rows for v in vals[first:])


def search_crasp(task, variant: str = "crasp", budget: int = DEFAULT_CRASP_BUDGET,
                 time_cap: float | None = None, max_size: int = 14,
                 lengths=None, samples: int | None = None, seed: int = 0,
                 validation_max_length: int | None = None, validation_samples: int = 3,
                 verify_max_length: int = 60, verify_samples: int = 3,
                 uniform: bool | None = None, max_memory_mb: float = 768,
                 max_rounds: int = 30, nope_first: float = 0.35,
                 greedy: bool = True, search_mutants: int = 1,
                 exhaustive: int = 5000, search_exhaustive: int = 0) -> SearchResult:
    """Search a C-RASP next-token program for a catalogue task (module docstring).

    Args:
        task: a :class:`tasks.base.Task` (next-token kind) or its catalogue name.
        variant: ``"crasp"`` (C-RASP[], NoPE) or ``"crasp_pl"`` (C-RASP[periodic, local]).
        budget: candidate Booleans and counts the enumeration may evaluate, over every
            counterexample round and pass (:mod:`analysis.prediction.budget`): the result is
            the same on any machine and at any load.
        time_cap: a wall-clock safety stop in seconds (None: none); hitting it gives
            ``stopped == "time_cap"``, which no verdict rests on.
        max_size: largest Boolean size enumerated.
        lengths, samples, seed: the search batch (``samples`` examples per length; default
            lengths 1..6 with 3 samples, 1..4 with 2 for content alphabets over 30 symbols).
        search_mutants: near misses per search example (:func:`~analysis.prediction.
            search_core.core.task_problem`; not for alphabets over
            30 symbols).
        search_exhaustive: the search batch also holds every body of lengths 1, 2, ... while
            their number stays within this budget (0: none).
        exhaustive: the validation also holds every body of lengths 1, 2, ... over the content
            alphabet while their number stays within this budget (not for alphabets over 30).
        validation_max_length, validation_samples: the batch candidates are checked on
            (lengths 1..``validation_max_length``, default ``verify_max_length``, seed + 1); a
            failure of the final verification also joins the search batch.
        verify_max_length, verify_samples: final verification with
            :func:`tasks.decode.verify_program` at every length 1..``verify_max_length``.
        uniform: use alphabet-uniform constructs for the content symbols (default: when the
            content alphabet has 5 symbols or more).
        max_memory_mb: memory for stored values (the search stops at the level it is in).
        max_rounds: counterexample rounds at most.
        greedy: after each level without a one-entry-per-value program, also try a decision
            list whose entries may repeat a value (Rivest's greedy over every Boolean kept,
            at most two entries more than values); such a program is an upper bound outside
            the certificate's grammar (``notes`` says so).
        nope_first: for ``crasp_pl``, the share of ``budget`` spent on the smaller
            C-RASP[] grammar after a first pass of 20% over C-RASP[periodic, local] (every
            C-RASP[] program is a C-RASP[periodic, local] program, and the smaller grammar
            reaches larger sizes); its program, when it finds one, is returned (``notes`` says
            so; ``certified_below`` is then the first pass's); otherwise the larger grammar
            gets the time left. 0 disables the passes. Where ``uniform`` is left to its
            default, the alphabet is below 5 symbols and no target is a content symbol
            (membership, next-character sets), that last pass adds the alphabet-uniform
            constructs (its Booleans then include every concrete one, and the relational
            counts ``#[j<=i] P(j) and tok(j) == tok(i)``: "the token before SEP equals the
            first", a C-RASP[local] program, lies in its reach; ``notes`` says so).

    Returns:
        a :class:`~analysis.prediction.search_core.result.SearchResult` (``grammar`` the
        variant; never raises for a task it cannot handle: ``stopped`` says ``"refused:
        ..."``). ``certified_below``: no program of the grammar (decision lists with one entry
        per output value or uniform group) of C-RASP size <= it; a program found by the greedy
        decision lists (repeated values) lies outside that grammar and may be smaller.

    Raises:
        ValueError: an unknown variant; :class:`analysis.prediction.budget.BudgetError` (a
            ValueError): a negative budget or a time cap that is not a positive number.
    """
    limits = budget if isinstance(budget, Limits) else Limits(budget, time_cap)
    res = _search_crasp(task, variant, limits, max_size=max_size, lengths=lengths,
                        samples=samples, seed=seed, validation_max_length=validation_max_length,
                        validation_samples=validation_samples,
                        verify_max_length=verify_max_length, verify_samples=verify_samples,
                        uniform=uniform, max_memory_mb=max_memory_mb, max_rounds=max_rounds,
                        nope_first=nope_first, greedy=greedy, search_mutants=search_mutants,
                        exhaustive=exhaustive, search_exhaustive=search_exhaustive)
    res.budget = limits.budget
    return res


def _search_crasp(task, variant, limits: Limits, max_size, lengths, samples, seed,
                  validation_max_length, validation_samples, verify_max_length, verify_samples,
                  uniform, max_memory_mb, max_rounds, nope_first, greedy, search_mutants,
                  exhaustive, search_exhaustive) -> SearchResult:
    """:func:`search_crasp` under ``limits`` (a budget and the deadline shared by the passes)."""
    t0 = time.perf_counter()
    budget = limits.budget
    if isinstance(task, str):
        task = tasks.get_task(task)
    if variant not in VARIANTS:
        raise ValueError(f"unknown C-RASP variant {variant!r}")
    kw = dict(max_size=max_size, lengths=lengths, samples=samples, seed=seed,
              validation_max_length=validation_max_length,
              validation_samples=validation_samples, verify_max_length=verify_max_length,
              verify_samples=verify_samples, uniform=uniform, max_memory_mb=max_memory_mb,
              max_rounds=max_rounds, nope_first=0.0, greedy=greedy,
              search_mutants=search_mutants, exhaustive=exhaustive,
              search_exhaustive=search_exhaustive)
    if variant == "crasp_pl" and nope_first > 0:
        # three passes: the larger grammar briefly (small programs with periodic / local
        # predicates), the smaller grammar (larger C-RASP[] programs), the larger one again
        rp = _search_crasp(task, "crasp_pl", limits.sub(0.2 * budget), **kw)
        if rp.found or rp.stopped.startswith("refused") or rp.stopped in ("max_size",
                                                                          TIME_CAP_STOP):
            rp.seconds = time.perf_counter() - t0
            return rp
        r0 = _search_crasp(task, "crasp", limits.sub(nope_first * budget), **kw)
        if r0.stopped == TIME_CAP_STOP:
            r0.grammar = "crasp_pl"
            r0.explored += rp.explored
            r0.seconds = time.perf_counter() - t0
            return r0
        if r0.found:
            if check_crasp(r0.program, "crasp_pl").valid:
                r0.grammar = "crasp_pl"
                r0.certified_below = rp.certified_below
                r0.explored += rp.explored
                r0.notes.append("found by the pass over C-RASP[] (a C-RASP[] program is a "
                                "C-RASP[periodic, local] program); certified_below is the "
                                "first pass's over C-RASP[periodic, local]")
                r0.seconds = time.perf_counter() - t0
                return r0
        widen = uniform is None and _labels_only(task)
        r1 = _search_crasp(task, "crasp_pl", limits.sub(budget - rp.explored - r0.explored),
                           **dict(kw, uniform=True) if widen else kw)
        if widen:
            r1.notes.append("last pass with the alphabet-uniform constructs (relational "
                            "counts) over an alphabet below 5 symbols whose targets are no "
                            "content symbols")
        r1.explored += r0.explored + rp.explored
        if rp.certified_below is not None:
            r1.certified_below = max(r1.certified_below or 0, rp.certified_below)
        r1.counterexamples_added += rp.counterexamples_added
        r1.notes.append(f"C-RASP[] pass: {r0.stopped}, certified_below "
                        f"{r0.certified_below} in C-RASP[]")
        r1.seconds = time.perf_counter() - t0
        return r1
    res = SearchResult(task=task.name, grammar=variant, found=False)

    def done(stopped):
        res.stopped = stopped
        res.seconds = time.perf_counter() - t0
        return res

    if task.kind not in ("next_token", "next_set"):
        return done("refused: not a next-token or next-set task")
    try:
        if not all(isinstance(v, int) for v in task.vocab.values):
            return done("refused: non-integer token values")
        content = np.array(_content(task), dtype=np.int64)
        if uniform is None:
            uniform = len(content) >= 5
        big = uniform and len(content) > 30
        if lengths is None:
            lengths = range(1, 5) if big else range(1, 7)
        if samples is None:
            samples = 2 if big else 3
        rows = task_problem(task, lengths, samples, seed,
                            mutants=search_mutants if not big else 0).rows
        if search_exhaustive and not big:
            have = {tuple(r[0]) for r in rows}
            rows += [r for r in exhaustive_rows(task, content, search_exhaustive)
                     if tuple(r[0]) not in have]
        if validation_max_length is None:
            validation_max_length = verify_max_length
        vrows = task_problem(task, range(1, validation_max_length + 1), validation_samples,
                             seed + 1, mutants=0 if big else 2).rows
    except Exception as e:  # noqa: BLE001 - a task's generator may refuse
        return done(f"refused: cannot sample the task ({e})")
    if not rows:
        return done("refused: no example at the search lengths")
    names = {int(v): t for t, v in zip(task.vocab.tokens, task.vocab.values)}
    eos = int(task.vocab.values[task.vocab.eos]) if task.vocab.eos is not None else 0
    vbatches = [_Batch(vrows, content, uniform)]
    exrows = exhaustive_rows(task, content, exhaustive) if not big else []
    if exrows:
        vbatches.append(_Batch(exrows, content, uniform))
    hard = [] if big else hard_rows(task, range(1, validation_max_length + 1),
                                    HARD_CASES_PER_LENGTH)
    if hard:
        vbatches.append(_Batch(hard, content, uniform))

    g = CRaspGrammar(task, variant, limits, rows, vbatches, content, uniform, names, eos,
                     max_size, max_memory_mb, seed, greedy, max_rounds, verify_max_length,
                     verify_samples, res, t0)
    loop = cegis(g, budget)
    res.stopped = loop.stopped
    res.seconds = time.perf_counter() - t0
    return res


class CRaspGrammar:
    """The C-RASP grammar behind :class:`analysis.prediction.search_core.core.Grammar`: a round
    enumerates Booleans and counts level by level on the current rows (:class:`._Enum`) and
    tries the decision lists of each level on the validation batches (the 40 smallest exact
    ones, then the greedy one); a program that passes them is checked with ``check_crasp`` and
    verified (:func:`_finish`). A chance fit on the search batch, or a verification failure,
    gives the shortest failing example as the counterexample; refinement adds it to the rows
    (a verification failure to the first validation batch too), at most ``max_rounds`` rounds,
    and stops when the budget is spent or the wall-clock cap has passed.
    """

    measure = "C-RASP size"

    def __init__(self, task, variant, limits, rows, vbatches, content, uniform, names, eos,
                 max_size, max_memory_mb, seed, greedy, max_rounds, verify_max_length,
                 verify_samples, res: SearchResult, t0: float):
        self.name = VARIANTS[variant][0].split(" (")[0]
        self.task, self.variant, self.limits = task, variant, limits
        self.rows, self.vbatches = rows, vbatches
        self.content, self.uniform, self.names, self.eos = content, uniform, names, eos
        self.max_size, self.max_memory = max_size, int(max_memory_mb * 2**20)
        self.seed, self.greedy, self.max_rounds = seed, greedy, max_rounds
        self.verify = (verify_max_length, verify_samples)
        self.res, self.t0 = res, t0
        self.best_cert = None
        self.greedy_restarts = 0

    def failing(self, entries, dflt):
        """The shortest validation example a decision list gets wrong, or None."""
        best = None
        for vb in self.vbatches:
            out = _decide(entries, dflt, vb)
            lens = vb.valid.sum(axis=1)
            r = shortest_failing(((out != vb.target) & vb.tmask).any(axis=1), lens)
            if r is not None and (best is None or lens[r] < best[0]):
                best = (int(lens[r]), vb.rows[r])
        return None if best is None else best[1]

    def round(self, left: int) -> Round:
        res, content, uniform, eos = self.res, self.content, self.uniform, self.eos
        batch = _Batch(self.rows, content, uniform)
        tv = sorted({int(x) for x in batch.tgt})
        cset = {int(c) for c in content}
        if uniform and any(v in cset for v in tv):
            nonc = [v for v in tv if v not in cset]
            values = [nonc + ["U"]]
            cur = batch.tok.ravel()[batch.tflat]
            cats = sorted({"c" if c >= 0 else str(int(c))
                           for c, i in zip(cur, batch.tgt_cidx) if i >= 0})
            if len(cats) > 1:
                values.append(nonc + [f"U@{g}" for g in cats])
        else:
            values = [tv]
        widest = max(len(vl) for vl in values)
        if widest > MAX_DECISION_VALUES:
            # the enumeration keeps a requirement per (earlier values, value): 2^(n-1) per
            # value, so n = 120 (count) would need 2^119 sets; refuse before allocating
            return Round(0, f"refused: {widest} distinct next-token values that are not "
                         "alphabet-uniform (a decision list over n values needs 2^(n-1) "
                         f"requirement sets per value; at most {MAX_DECISION_VALUES})")
        # the round's budget: what earlier rounds left (the count is of candidates evaluated)
        en = _Enum(batch, self.variant, self.limits.sub(left), self.max_size, self.max_memory,
                   values, self.names, self.seed)
        present = sorted({int(x) for x in batch.tok[batch.valid]})
        atoms = [("Q", v) for v in present
                 if not (uniform and v in cset and len(cset) > 8)]
        atoms.append(("content",))
        if uniform:
            atoms += [("Qa",), ("lta",), ("gta",)]
        if self.variant == "crasp_pl":
            atoms += [("per", p, r) for p in (2, 3, 4) for r in range(p)]
        atoms.append(("true",))
        en.atoms = atoms
        cand = None
        stopped = None
        cex = []
        s = 0
        if len(values[0]) == 1 and not isinstance(values[0][0], str):
            cand = [(0, [], values[0][0])]
        try:
            while cand is None:
                s += 1
                if s > self.max_size:
                    stopped = "max_size"
                    break
                en.level(s)
                res.level_reached = max(res.level_reached, s)
                progs = en.programs()
                good = None
                for size, entries, default in progs[:40]:
                    dflt = default if default is not None else eos
                    if self.failing(entries, dflt) is None:
                        good = (size, entries, dflt)
                        break
                if good is not None:
                    cand = [good]
                    break
                if not progs:
                    self.best_cert = best_bound(self.best_cert, s)
                # also when the exact lists fit the batch only by chance
                if self.greedy and s >= 3 and self.greedy_restarts < 10:
                    g = en.greedy(len(values[0]) + 2, self.vbatches)
                    if g is not None:
                        size, entries, default = g
                        dflt = default if default is not None else eos
                        if self.failing(entries, dflt) is None:
                            cand = [(size, entries, dflt)]
                            res.notes.append("found by the greedy decision list (entries "
                                             "may repeat a value): an upper bound, "
                                             "outside the certificate's grammar")
                            break
                        if not progs:
                            progs = [g]
                            self.greedy_restarts += 1
                if progs:
                    # chance fits: the shortest failing validation example joins the batch
                    size, entries, default = progs[0]
                    dflt = default if default is not None else eos
                    cex = [self.failing(entries, dflt)]
                    stopped = "refine"
                    break
        except _Budget:
            stopped = BUDGET_STOP
        except _Timeout:
            stopped = TIME_CAP_STOP
        except _Memory:
            stopped = MEMORY_STOP
        res.explored += en.explored
        res.distinct = max(res.distinct, en.distinct)
        res.certified_below = self.best_cert
        if cand is None:
            return Round(en.explored, stopped, self.best_cert, counterexamples=cex,
                         detail="validation")
        size, entries, default = cand[0]
        fin = _finish(res, self.task, self.variant, entries, default, size, content,
                      self.names, *self.verify, self.seed, self.t0)
        if fin.found or fin.stopped != "refine":
            return Round(en.explored, fin.stopped, self.best_cert, program=fin.program)
        # verification found a counterexample the validation batch missed
        res.found, res.program, res.size, res.schema = False, None, None, None
        return Round(en.explored, "refine", self.best_cert, counterexamples=[fin.notes.pop()],
                     detail="verification")

    def refine(self, rnd: Round, spent: int, rounds: int) -> str | None:
        self.rows = self.rows + rnd.counterexamples
        if rnd.detail == "verification":
            self.vbatches[0] = _Batch(self.vbatches[0].rows + rnd.counterexamples,
                                      self.content, self.uniform)
        self.res.counterexamples_added += len(rnd.counterexamples)
        if rounds + 1 >= self.max_rounds:
            return "rounds"
        if spent >= self.limits.budget:
            return BUDGET_STOP
        if self.limits.over_time():
            return TIME_CAP_STOP
        return None


def _finish(res, task, variant, entries, default, size, content, names, vmax, vsamples, seed,
            t0):
    prog = build_program(entries, default, content, task.vocab.values)
    res.schema = decision_list_text(entries, default, names)
    res.size = size
    rep = check_crasp(prog, variant)
    if not rep.valid:
        res.notes.append(rep.format())
        res.stopped = "refused: the program failed the C-RASP check"
        res.seconds = time.perf_counter() - t0
        return res
    ver = verify_program(task, prog, task.lengths(vmax), samples=vsamples, seed=seed + 7)
    res.verification = ver.summary()
    if not ver.ok:
        f = ver.failures[0] if ver.failures else None
        if f is not None:
            ids = task.vocab.encode(f["prompt"])
            try:
                ans = task.ground_truth(ids)
                vals = [int(task.vocab.values[i]) for i in list(ids) + list(ans)]
                res.notes.append((vals, len(ids)))
                res.stopped = "refine"
                return res
            except Exception:  # noqa: BLE001 - fall through to the refusal
                pass
        res.stopped = "refused: verification failed beyond the validation lengths"
        res.seconds = time.perf_counter() - t0
        return res
    res.found = True
    res.program = prog
    try:
        res.source = program_source(prog, task)
    except Exception:  # noqa: BLE001 - printing is best effort
        res.source = res.schema
    res.stopped = "found"
    res.seconds = time.perf_counter() - t0
    return res


