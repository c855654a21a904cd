"""Search certificates re-checked by brute force (issue 10, Must show).

The brute force enumerates *every* program of the grammar up to a size, without observational
equivalence, and evaluates each one with the reference interpreter (``rasp.Evaluator``), not
with the search's vectorized families. The pruned search's answer must agree: the size of the
shortest program it finds equals the brute-force minimum, and when it certifies "nothing of
size <= k", brute force finds nothing either.
"""

import numpy as np
import pytest

from analysis.prediction.raspl_search import matches_problem, problem_from_examples
from analysis.prediction.raspl_search.engine import _Engine
from analysis.prediction.search import search
from analysis.prediction.budget import Limits

#: an engine budget no test reaches (the tests enumerate small sizes to the end)
UNLIMITED = Limits(10**15)

TINY = {"where": False, "sel_andor": False}


def _prefix_examples(fn, seed, lengths=range(1, 6), per=2):
    rng = np.random.default_rng(seed)
    out = []
    for n in lengths:
        for _ in range(per):
            xs = [int(v) for v in rng.integers(0, 6, size=n)]
            out += [(xs[:t] + [fn(xs[:t])], t) for t in range(1, n + 1)]
    return out


def _brute_force_min(problem, k):
    """Smallest size (<= k) of a program that reproduces ``problem``, by evaluating every
    program of the grammar with the interpreter; None if there is none."""
    # same batch, but a target no program can meet (99 is out of reach of every program of
    # size <= 3 on these inputs): the engine lists every program and stops at none
    eng = _Engine(problem, UNLIMITED, k, False, 2**31, None, prune=False, grammar=TINY)
    eng.lay.tvals = np.full_like(eng.lay.tvals, 99)
    eng.run()
    best = None
    for level, rec in eng.all_programs:
        if best is not None and level >= best:
            continue
        node = eng._node((level, rec))
        if matches_problem(node, problem):
            best = level
    return best, len(eng.all_programs)


TARGETS = {
    "successor": lambda xs: xs[-1] + 1,
    "running_max": lambda xs: max(xs),
    "first_token": lambda xs: xs[0],
    "is_repeat": lambda xs: int(xs.count(xs[-1]) > 1),
    "count_of_current": lambda xs: xs.count(xs[-1]),
    "previous_or_0": lambda xs: xs[-2] if len(xs) > 1 else 0,
    "parity_of_len": lambda xs: len(xs) % 2,
}


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_certificate_agrees_with_brute_force(name):
    k = 3
    problem = problem_from_examples(_prefix_examples(TARGETS[name], seed=len(name)),
                                    constants=(0, 1), defaults=(0,))
    brute, n_programs = _brute_force_min(problem, k)
    assert n_programs > 1000          # the brute force really enumerated the grammar
    res = search(problem, budget=200_000_000, max_size=k, rules=TINY, combine=0)
    if brute is None:
        assert not res.found
        assert res.certified_below == k and res.stopped == "max_length"
    else:
        assert res.found and res.found_by == "enumeration"
        assert res.size == brute and res.certified_below == brute - 1
        assert matches_problem(res.program, problem)


def test_stored_aggregate_values_equal_the_interpreter():
    """Every max / min / mean aggregate the engine keeps (computed by matrix products: sums,
    and for max / min sums of 2^(b * rank)) has exactly the values that the reference
    interpreter gives for its program, on sequences long enough for many distinct values."""
    rng = np.random.default_rng(7)
    ex = []
    for n in (9, 17, 30):
        xs = [int(v) for v in rng.integers(-20, 40, size=n)]
        ex += [(xs[:t] + [0], t) for t in (n,)]
    problem = problem_from_examples(ex, constants=(0, 1, 2), defaults=(0,))
    eng = _Engine(problem, UNLIMITED, 4, False, 2**31, None, grammar={"where": False})
    eng.lay.tvals = np.full_like(eng.lay.tvals, 120)           # unreachable: enumerate all of size <= 4
    eng.run()
    from rasp.interpreter import Evaluator
    seen = {"mean": 0, "max": 0, "min": 0}
    for level in (3,):              # stored: sizes below max_length
        lv = eng.store.rows[level]
        for i in range(len(lv)):
            rec = lv.recipes[i]
            if rec[0] != "agg" or seen[rec[4]] >= 40:
                continue
            seen[rec[4]] += 1
            node = eng.node_of(level, i)
            want = Evaluator(problem.inputs, causal=True)(node)[problem.valid]
            assert np.array_equal(lv.vals[i].astype(np.int64), np.asarray(want, np.int64)), rec
    assert min(seen.values()) >= 20


def _entries(lay, K, Q, op):
    """Causal entries ``[nk * nq, E]`` of ``select(K_x, Q_y, op)`` formed directly."""
    from analysis.prediction.raspl_search.storage import _SEL_OPS
    Kf = np.zeros((len(K), lay.B * lay.T), np.int64)
    Kf[:, lay.vflat] = K
    Qf = np.zeros((len(Q), lay.B * lay.T), np.int64)
    Qf[:, lay.vflat] = Q
    return _SEL_OPS[op](Kf[:, None, lay.ek_flat], Qf[None, :, lay.eq_flat]).reshape(-1, lay.E)


@pytest.mark.parametrize("shape", [(3, 40), (40, 3), (1, 1)])
@pytest.mark.parametrize("T", [7, 64])
def test_select_fingerprints_and_widths_equal_those_of_the_entries(shape, T):
    """The fingerprints of ``select(K, Q, op)`` computed from running sums (never forming the
    entries; grouped by key rows when there are fewer, else by query rows) equal the linear
    hash of the entries formed directly, for all six operators, and (grouped by key rows, where
    the running sums give them) the widths equal the number of selected causal keys per
    query."""
    rng = np.random.default_rng(T)
    ex = []
    for n in (T, T - 2, 3):
        xs = [int(v) for v in rng.integers(0, 5, size=n)]
        ex.append((xs + [0], n))
    from analysis.prediction.raspl_search import kernels
    from analysis.prediction.raspl_search.storage import layout_of
    lay = layout_of(problem_from_examples(ex, constants=(0,), defaults=(0,)))
    nk, nq = shape
    K = rng.integers(-6, 6, size=(nk, lay.Pn)).astype(np.int16)
    Q = rng.integers(-8, 8, size=(nq, lay.Pn)).astype(np.int16)
    lt, le, widths_of = kernels.select_hashes(lay, K, Q)
    tot = lay.RE_total
    got = {"<": lt, "<=": le, "==": le - lt, "!=": tot - (le - lt), ">": tot - le,
           ">=": tot - lt}
    x, y = np.divmod(np.arange(nk * nq), nq)
    from analysis.prediction.raspl_search.storage import _STRUCT_OPS
    for op, h in got.items():
        ent = _entries(lay, K, Q, op)
        want = (ent.astype(np.uint64) * lay.RE.astype(np.uint64)).sum(axis=1, dtype=np.uint64)
        assert np.array_equal(h.reshape(-1).astype(np.uint64), want), op
        assert np.array_equal(kernels.sel_hash(lay, np.packbits(ent, axis=1)).astype(np.uint64),
                              want)
        if widths_of is not None:
            w = widths_of(x, y, _STRUCT_OPS.index(op))
            assert np.array_equal(w, np.add.reduceat(ent.astype(np.int64), lay.qstarts, axis=1))


def test_selector_deduplication_keeps_every_distinct_selector():
    """Observational equivalence on selectors is exact: at every size up to 4 of mode's search
    batch, every ``select(K, Q, op)`` of two stored s-ops (compared as their causal entries,
    byte for byte, no hash) is a selector kept at that size or below, and no two kept
    selectors are equal. (The earlier fingerprint, one coefficient per 64-bit word of packed
    entries, dropped 6 distinct size-4 selectors of this batch as duplicates.)"""
    import time
    import tasks
    from analysis.prediction.raspl_search import families, kernels, problem_from_task
    from analysis.prediction.raspl_search.storage import _KIND_STR, _SEL_OPS
    problem = problem_from_task(tasks.get_task("mode"), range(1, 7), 3, 0)
    eng = _Engine(problem, UNLIMITED, 5, False, 2**31, None)
    eng.found = ("not checked", 0)               # enumerate every size, stop at none
    eng.start = time.perf_counter()
    families.leaves(eng)
    eng.store.rows[0].freeze()
    kept: set = set()
    for k in range(1, 5):
        families.sop_level(eng, k)
        families.sel_level(eng, k)
        sl = eng.store.sels[k]
        pats = [bytes(p) for p in np.packbits(kernels.sel_entries(eng, sl, np.arange(len(sl))),
                                              axis=1)]
        assert len(set(pats)) == len(pats) and not kept & set(pats), k
        kept |= set(pats)
        n_candidates = 0
        for i in range(k):
            lk, lq = eng.store.rows[i], eng.store.rows[k - 1 - i]
            for strness in (False, True):
                K = lk.vals[(lk.kind == _KIND_STR) == strness]
                Q = lq.vals[(lq.kind == _KIND_STR) == strness]
                for op in (("==", "!=") if strness else tuple(_SEL_OPS)):
                    for a in range(0, len(K), 64):
                        ent = _entries(eng.lay, K[a:a + 64], Q, op)
                        n_candidates += len(ent)
                        missing = {bytes(p) for p in np.packbits(ent, axis=1)} - kept
                        assert not missing, (k, i, op, len(missing))
        assert n_candidates > {1: 10, 2: 100, 3: 10_000, 4: 100_000}[k]


def _levels(threads, problem, k):
    """Every level of an exhaustive run to size ``k`` (no target met) with ``threads``."""
    eng = _Engine(problem, UNLIMITED, k, False, 2**31, None, threads=threads)
    eng.lay.tvals = np.full_like(eng.lay.tvals, 99)          # no program meets it: every size runs
    res = eng.run()
    rows = {lev: (lv.vals.copy(), lv.kind.copy()) for lev, lv in eng.store.rows.items()}
    sels = {lev: (sl.W.copy(), np.stack([sl.klev, sl.krow, sl.qlev, sl.qrow, sl.opc]))
            for lev, sl in eng.store.sels.items()}
    return res, rows, sels


def test_worker_threads_change_nothing(monkeypatch):
    """The families computed on two worker threads and committed in emission order keep the
    same s-ops and selectors, in the same order, at every size, as one thread (the sequential
    engine), and count the same candidates. Small blocks: many jobs are in flight at once."""
    import tasks
    from analysis.prediction.raspl_search import families, kernels, storage
    for module in (storage, families, kernels):           # the block size each module reads
        monkeypatch.setattr(module, "_CHUNK", 1 << 12)
    from analysis.prediction.raspl_search import problem_from_task
    problem = problem_from_task(tasks.get_task("mode"), range(1, 7), 3, 0)
    r1, rows1, sels1 = _levels(1, problem, 4)
    r2, rows2, sels2 = _levels(2, problem, 4)
    assert r1.explored == r2.explored and r1.certified_below == r2.certified_below == 4
    assert rows1.keys() == rows2.keys() and sels1.keys() == sels2.keys()
    for lev in rows1:
        assert all(np.array_equal(a, b) for a, b in zip(rows1[lev], rows2[lev])), lev
    for lev in sels1:
        assert all(np.array_equal(a, b) for a, b in zip(sels1[lev], sels2[lev])), lev
    # and the program found first is the same
    sort = problem_from_task(tasks.get_task("sort_unique"), range(1, 7), 3, 0)
    a = search(sort, max_size=5, budget=200_000_000, combine=0, threads=1)
    b = search(sort, max_size=5, budget=200_000_000, combine=0, threads=2)
    assert a.found and (a.source, a.explored) == (b.source, b.explored)


def test_selector_matrices_equal_the_entries():
    """The dense ``[B, q, k]`` selector matrices (compared directly in that layout for
    ``select(K, Q, op)`` rows, unpacked for packed rows) hold exactly the causal entries."""
    import tasks
    from analysis.prediction.raspl_search import kernels, problem_from_task
    problem = problem_from_task(tasks.get_task("copy_unique"), range(1, 7), 3, 0)
    eng = _Engine(problem, UNLIMITED, 3, False, 2**31, None, threads=1)
    eng.lay.tvals = np.full_like(eng.lay.tvals, 99)
    eng.run()
    kinds = set()
    for lev, sl in eng.store.sels.items():
        kinds |= set(np.sign(sl.opc).tolist())
        rows = np.arange(len(sl))
        ent = kernels.sel_entries(eng, sl, rows)
        want = np.zeros((len(sl), eng.lay.B * eng.lay.T * eng.lay.T), np.float32)
        want[:, eng.lay.sel_flat] = ent
        got = kernels.sel_matrices(eng, sl, rows)
        assert np.array_equal(got.reshape(len(sl), -1), want), lev
    assert -1 in kinds and 1 in kinds          # packed rows (TRUE, and/or) and select rows


def test_max_aggregate_of_many_distinct_values_stays_exact():
    """Running max over 26 distinct values with up to 20 keys of the largest one: its size-2
    program (select TRUE, max) must be found and nothing smaller certified. The max/min gemm
    sums ``2^(bits * rank)``; with ``bits = 5`` (20 tokens) and 26 ranks, 20 keys of the top
    rank sum to 20 * 2^125, past float32's range: such rows must use float64 (they once gave
    inf, read as rank 0, and the search certified "none of size <= 3")."""
    rng = np.random.default_rng(0)
    seqs = [list(range(20)), list(range(6, 26)), [25] * 20,
            [int(v) for v in rng.integers(0, 26, 20)]]
    ex = [(xs[:t] + [max(xs[:t])], t) for xs in seqs for t in range(1, len(xs) + 1)]
    for threads in (1, 2):
        res = search(problem_from_examples(ex), max_size=3, budget=200_000_000, combine=0,
                     threads=threads)
        assert res.found and res.size == 2 and res.certified_below == 1, threads
