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
