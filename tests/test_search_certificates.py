"""Search certificates re-checked by brute force (issue 10, Must show).

The brute force enumerates *every* program of the grammar up to a size, without observational
equivalence, and evaluates each one with the reference interpreter (``rasp.Evaluator``), not
with the search's vectorized families. The pruned search's answer must agree: the size of the
shortest program it finds equals the brute-force minimum, and when it certifies "nothing of
size <= k", brute force finds nothing either.
"""

import numpy as np
import pytest

from analysis.search import _Engine, matches_problem, problem_from_examples, search

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
    eng = _Engine(problem, 600, k, False, 2**31, None, prune=False, grammar=TINY)
    eng.tvals = np.full_like(eng.tvals, 99)
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
    res = search(problem, max_length=k, time_limit=600, grammar=TINY, combine=0)
    if brute is None:
        assert not res.found
        assert res.certified_below == k and res.stopped == "max_length"
    else:
        assert res.found and res.found_by == "enumeration"
        assert res.length == brute and res.certified_below == brute - 1
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
    eng = _Engine(problem, 600, 4, False, 2**31, None, grammar={"where": False})
    eng.tvals = np.full_like(eng.tvals, 120)           # unreachable: enumerate all of size <= 4
    eng.run()
    from rasp.interpreter import Evaluator
    seen = {"mean": 0, "max": 0, "min": 0}
    for level in (3,):              # stored: sizes below max_length
        lv = eng.rows[level]
        for i in range(len(lv)):
            rec = lv.recipes[i]
            if rec[0] != "agg" or seen[rec[4]] >= 40:
                continue
            seen[rec[4]] += 1
            node = eng.node_of(level, i)
            want = Evaluator(problem.inputs, causal=True)(node)[problem.valid]
            assert np.array_equal(lv.vals[i].astype(np.int64), np.asarray(want, np.int64)), rec
    assert min(seen.values()) >= 20
