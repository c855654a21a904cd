"""Shortest-program search (analysis.prediction.search, the RASP-L grammar): known minima on
synthetic next-token functions, certificates, RASP-L validity of what it finds, and the task
adapter."""

import numpy as np
import pytest

import rasp
from analysis.prediction.raspl_search import matches_problem, problem_from_examples
from analysis.prediction.search import SearchError, search
from rasp.source import program_to_source
from rasp.analyses.measures import measure
from rasp.analyses.raspl import check


def _examples(fn, lengths=range(1, 9), per=3, seed=0):
    """Sequences s_0..s_n with s_0 random and s_{t+1} = fn(s_0..s_t): every prefix is a
    target."""
    rng = np.random.default_rng(seed)
    out = []
    for n in lengths:
        for _ in range(per):
            seq = [int(rng.integers(0, 20))]
            for _t in range(n):
                seq.append(fn(seq))
            out.append((seq, 1))
    return out


def test_map_found_at_length_one():
    # next token = current token + 1: one map; nothing of length 0 (tokens, indices) does it
    ex = _examples(lambda s: s[-1] + 1)
    res = search(problem_from_examples(ex), max_size=3, budget=200_000_000)
    assert res.found and res.size == 1 and res.certified_below == 0
    xs = np.arange(10)[None, :]
    assert (rasp.evaluate(res.program, xs, causal=True) == xs + 1).all()


def test_running_max_needs_an_attention_head():
    # next token = max of the prefix: a select and a max-aggregate (length 2); no map or
    # sequence map of tokens / indices computes a running maximum, so length 1 is ruled out
    rng = np.random.default_rng(1)
    ex = []
    for n in range(1, 9):
        for _ in range(3):
            xs = [int(v) for v in rng.integers(0, 50, size=n)]
            ex.append((xs + [max(xs)], 1))
    # only the last position is a target in these examples: use every prefix instead
    ex = [(xs[:t] + [max(xs[:t])], t) for xs, _ in ex for t in range(1, len(xs))]
    res = search(problem_from_examples(ex), max_size=3, budget=200_000_000)
    assert res.found and res.size == 2 and res.certified_below == 1
    fresh = rng.integers(0, 100, size=(20, 15))
    got = rasp.evaluate(res.program, fresh, causal=True)
    assert (got == np.maximum.accumulate(fresh, axis=1)).all()
    rep = check(res.program, vocab=set(range(100)), max_seq_len=15, causal=True)
    assert rep.valid, rep.format()
    # the search's length is the program length of rasp.analyses.measures (language.md §4)
    assert measure(res.program).length == res.size


def test_found_program_source_runs_in_the_dialect():
    ex = [(xs[:t] + [max(xs[:t])], t)
          for xs in ([3, 1, 4, 1, 5, 9, 2, 6], [2, 7, 1, 8, 2, 8, 1, 8])
          for t in range(1, 8)]
    res = search(problem_from_examples(ex), max_size=3, budget=200_000_000)
    assert res.found
    text = program_to_source(res.program, "prog")       # runs as printed (issue 46)
    env = rasp.run_source(text, causal=True)
    inp = [[5, 3, 8, 1, 9, 2]]
    assert (rasp.evaluate(env["prog"], inp, causal=True) ==
            np.maximum.accumulate(np.array(inp), axis=1)).all()


def test_impossible_target_is_certified_not_found():
    # no deterministic program maps one prefix to two different next tokens
    seq_a = [1, 2, 3, 4]
    ex = [(seq_a + [5], 4), (seq_a + [6], 4)]     # same prefix, different next tokens
    res = search(problem_from_examples(ex), max_size=2, budget=200_000_000)
    assert not res.found and res.certified_below == 2 and res.stopped == "max_length"
    assert res.explored > 0 and res.programs_per_s > 0


def test_no_index_arithmetic_in_found_programs():
    # all-zero inputs whose last position must predict 2 * position: `indices + indices`
    # (length 1) does it but breaks RASP-L rule 3, so no length-1 program may be returned
    ex = [([0] * n + [2 * (n - 1)], n) for n in range(1, 10)]
    prob = problem_from_examples(ex)
    res = search(prob, max_size=3, budget=200_000_000)
    assert res.certified_below >= 1
    if res.found:
        assert res.size > 1
        rep = check(res.program, vocab={0}, max_seq_len=12, causal=True)
        assert rep.valid, rep.format()
        assert matches_problem(res.program, prob)


def test_the_work_budget_stops_the_search():
    """The search stops on candidates, not seconds: a budget smaller than the sizes it would
    enumerate stops it with ``stopped == "budget"`` after that many candidates (plus the rest
    of the family in progress), and the wall-clock cap is a separate safety stop."""
    ex = _examples(lambda s: (s[0] * 7 + len(s) * 3) % 11)
    res = search(problem_from_examples(ex), max_size=9, budget=20_000, combine=0)
    assert not res.found and res.stopped == "budget" and res.budget == 20_000
    assert 20_000 < res.explored < 20_000 + 50_000 and res.certified_below < 9
    capped = search(problem_from_examples(ex), max_size=9, budget=10**12, time_cap=0.2)
    assert not capped.found and capped.stopped == "time_cap"


def test_bad_input():
    with pytest.raises(SearchError):
        problem_from_examples([])
    with pytest.raises(SearchError):
        problem_from_examples([([1, "a", 2], 1)])
    with pytest.raises(SearchError):
        search(problem_from_examples([([1, 2, 3], 1)]), max_size=-1)


def test_chance_fits_are_refined_with_counterexamples():
    # on increasing sequences the running maximum is the current token, so `tokens` (length 0)
    # fits the search batch by chance; the validation batch (any order) refutes it and the
    # search must go on to the real running maximum (a select and a max-aggregate)
    inc = [(list(range(3, 3 + t)) + [2 + t], t) for t in range(1, 8)]
    rng = np.random.default_rng(5)
    mixed = []
    for n in range(2, 9):
        xs = [int(v) for v in rng.permutation(30)[:n]]
        mixed += [(xs[:t] + [max(xs[:t])], t) for t in range(1, n + 1)]
    res = search(problem_from_examples(inc), max_size=3, budget=200_000_000,
                 validation=problem_from_examples(mixed))
    assert res.found and res.size == 2
    assert res.counterexamples_added >= 1
    fresh = rng.integers(0, 100, size=(10, 12))
    assert (rasp.evaluate(res.program, fresh, causal=True) ==
            np.maximum.accumulate(fresh, axis=1)).all()
