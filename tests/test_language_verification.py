"""Verification of programs for Huang et al.'s formal languages is sound where sampling is not
(issue 24): every string of short lengths, every DFA transition towards acceptance and towards
rejection, and counting adversaries (a member's symbols reordered).

The case that motivated it: a C-RASP program for bounded-depth Dyck-1 D_12 that checks balance
and never-negative prefixes but ignores the depth bound passed sampled verification at lengths
1..60 (no sampled member or non-member reaches depth 13) and made the predictor say
"generalizes". ``a^13 b^13`` (length 26) is balanced and never negative, and not in D_12.
"""

from __future__ import annotations

import itertools

import pytest

import tasks
from analysis.prediction.verify import verify_program_on_task
from rasp.repl.session import run_source
from tasks.huang import EXHAUSTIVE_STRINGS, LANGUAGES

# prefix counts of a (v4) and b (v7); member iff equal at the end and never #a < #b — the
# program the C-RASP search found for dyck1_depth12 (it ignores the depth bound)
BALANCED_ONLY = """
v1 = tokens_int >= 0;
v4 = selector_width(select(tokens_int == 0, 1, ==));
v7 = selector_width(select(tokens_int == 1, 1, ==));
v9 = not (v4 == v7);
v13 = selector_width(select(v4 < v7, 1, ==)) == 0;
fine = v13;
answer = 2 if v9 else (3 if fine else 2);
program = -3 if v1 else answer;
"""
# the same with the depth bound: no prefix with #a - #b > 12
DEPTH_12 = BALANCED_ONLY.replace("fine = v13;", "fine = v13 and (selector_width(select("
                                                 "(v4 - v7) > 12, 1, ==)) == 0);")


def _program(src):
    return run_source(src, causal=True)["program"]


def test_a_dyck_program_that_ignores_the_depth_bound_is_refused():
    wrong = verify_program_on_task("dyck1_depth12", _program(BALANCED_ONLY), max_length=40,
                                   samples=3)
    assert not wrong.ok
    body = wrong.counterexample["prompt"][1:-1]
    assert wrong.counterexample["length"] == 26 and body == ["a"] * 13 + ["b"] * 13
    right = verify_program_on_task("dyck1_depth12", _program(DEPTH_12), max_length=40,
                                   samples=3)
    assert right.ok, right.counterexample


@pytest.mark.parametrize("name", sorted(LANGUAGES))
def test_verification_prompts_cover_the_dfa(name):
    """Short lengths: every string. Longer: every transition (q, s) whose state is reachable
    within the length is taken by some prompt, and members and non-members both appear
    whenever the length has them (counted on the DFA by brute force)."""
    task = tasks.get_task(name)
    dfa, k = task.dfa, task.k
    for n in task.lengths(30):
        bodies = [task._body(p) for p in task.verification_prompts(n)]
        if k ** n <= EXHAUSTIVE_STRINGS:
            assert sorted(map(tuple, bodies)) == sorted(itertools.product(range(k), repeat=n))
            continue
        taken = set()
        for b in bodies:
            q = 0
            for s in b:
                taken.add((q, s))
                q = dfa.delta[q][s]
                if q is None:
                    break
        # states reachable by a prefix short enough to leave a symbol: brute-force BFS depth
        depth = {0: 0}
        frontier = [0]
        while frontier:
            nxt = []
            for q in frontier:
                for s in range(k):
                    r = dfa.delta[q][s]
                    if r is not None and r not in depth:
                        depth[r] = depth[q] + 1
                        nxt.append(r)
            frontier = nxt
        want = {(q, s) for q, d in depth.items() if d + 1 <= n for s in range(k)}
        assert want <= taken, (name, n, sorted(want - taken))
        verdicts = {dfa.run(b) for b in bodies}
        assert verdicts == {v for v in (True, False) if dfa.count(0, n, v) > 0}
