"""The "in C-RASP[]" side of the decision: piecewise testable tasks get a constructed program
(analysis/prediction/crasp_piecewise.py, analysis/prediction/crasp_decision.py).

Ground truth here is Python's own ``re.fullmatch`` on the expression (not the automaton the
decider read) and, for the textbook cases, the language's definition written as a predicate.
A decided "in" must come with a program that agrees with it on *every* string up to a length
(exhaustive), and the languages that are not piecewise testable (Simon 1975: J-trivial
syntactic monoid) never get one.
"""

import itertools
import re

import numpy as np
from hypothesis import given, settings, strategies as st

from analysis.prediction.crasp_decision import decide_crasp, decide_task
from analysis.prediction.crasp_piecewise import piecewise_program, subsequence_recipe
from analysis.prediction.predict import predict
from rasp import evaluate
from rasp.analyses.crasp import check_crasp
from tasks.custom import regex_task
from tasks.huang import DFA


def _answers(task, sop, words):
    """The program's token at SEP for ``BOS w SEP`` (task symbols in, symbol names out)."""
    vals = task.vocab.values
    v = {t: vals[task.vocab.id(t)] for t in task.vocab.tokens}
    name = {val: t for t, val in v.items()}
    xs = [[v["BOS"]] + [v[c] for c in w] + [v["SEP"]] for w in words]
    return [name[int(np.asarray(row)[-1])] for row in evaluate(sop, xs)]


def _exhaustive(pattern, alphabet, max_len=7):
    task = regex_task(pattern, alphabet=list(alphabet))
    d = decide_task(task, "crasp")
    return task, d, [''.join(w) for n in range(max_len + 1)
                     for w in itertools.product(alphabet, repeat=n)]


# -- textbook cases ---------------------------------------------------------------------------
def test_a_star_b_star_is_no_ba_subsequence():
    # a*b* = the words without the subsequence "ba" (piecewise testable, k = 2)
    task, d, words = _exhaustive("a*b*", "ab")
    assert d.proved_in and d.program["k"] == 2 and d.program["features"] == {
        "ba": "(#[j<=i] (Q_a(j) and (#[k<=j] Q_b(k) > 0)) > 0)"}
    assert check_crasp(d.sop, "crasp").valid
    truth = ["yes" if "ba" not in "".join(sorted(set(w), key=w.index)) and
             re.fullmatch("a*b*", w) else "no" for w in words]
    assert _answers(task, d.sop, words) == truth


def test_exactly_two_a_needs_counts_above_one():
    # "exactly two a's": a count compared with 1 and 2 (k = 3: the subsequences aa, aaa)
    task, d, words = _exhaustive("b*ab*ab*", "ab", 8)
    assert d.proved_in and d.program["k"] == 3
    assert _answers(task, d.sop, words) == ["yes" if w.count("a") == 2 else "no" for w in words]


def test_not_piecewise_testable_gets_no_program():
    # (ab)* and (a|b)*ab are star-free (no counter) but not piecewise testable: their
    # syntactic monoids are not J-trivial ((ab)^n and (ab)^n a tell apart words with the same
    # subsequences of any bounded length: Simon 1975); PARITY has a counter. (ab)* still gets
    # a program, from its potential (tests/test_crasp_potential.py), never from subsequences
    from analysis.prediction.crasp_decision import _membership_machine
    for dfa in (DFA(2, [[1, None], [None, 0]], {0}),          # (ab)*
                DFA(2, [[1, 0], [1, 2], [1, 0]], {2})):        # (a|b)*ab
        assert piecewise_program(_membership_machine(dfa, ["a", "b"]), True) is None
        d = decide_crasp(dfa, "crasp", alphabet=["a", "b"])
        assert d._piecewise is None and not d.proved_not
    assert decide_crasp(DFA(2, [[0, 1], [1, 0]], {0}), "crasp").proved_not


def test_subsequence_recipe_runs_of_a_letter():
    # u = v a^r: one count of (Q_a and S_v) compared with r - 1
    assert subsequence_recipe((0, 1, 1)) == (
        "cmpk", "gt", 1, ("cnt", ("and", ("Q", 1), ("cmpk", "gt", 0, ("cnt", ("Q", 0))))))


def test_budget_counts_pairs():
    dfa = DFA(2, [[0, 1], [None, 1]], {0, 1})                  # a*b*
    from analysis.prediction.crasp_decision import _membership_machine
    m = _membership_machine(dfa, ["a", "b"])
    assert piecewise_program(m, True, budget=5) is None
    pw = piecewise_program(m, True)
    assert pw.k == 2 and pw.work <= 200


def test_next_set_format_and_the_apes_fragment():
    # next-character sets of a*b* (outputs at non-empty prefixes of members): the label is
    # {a,b,EOS} before the first b and {b,EOS} after it: one subsequence test
    task = regex_task("a*b*", format="next_set", alphabet=["a", "b"])
    for variant in ("crasp", "crasp_pl"):
        d = decide_task(task, variant)
        assert d.proved_in and check_crasp(d.sop, variant).valid
    words = ["".join(w) for n in range(1, 8) for w in itertools.product("ab", repeat=n)
             if re.fullmatch("a*b*", "".join(w))]
    vals = {t: task.vocab.values[task.vocab.id(t)] for t in task.vocab.tokens}
    name = {v: t for t, v in vals.items()}
    for w in words:
        got = np.asarray(evaluate(d.sop, [[vals["BOS"]] + [vals[c] for c in w]]))[0][1:]
        want = ["{a,b,EOS}" if "b" not in w[:i + 1] else "{b,EOS}" for i in range(len(w))]
        assert [name[int(g)] for g in got] == want, w


# -- random expressions against re.fullmatch --------------------------------------------------
_ATOMS = ["a", "b", "c", "(a|b)", "(a|c)", "a*", "b*", "(a|b)*", "(a|b|c)*", "c*"]


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(_ATOMS), min_size=1, max_size=5), st.booleans())
def test_a_decided_in_agrees_with_re_on_every_short_string(parts, union):
    pattern = "".join(parts)
    if union:
        pattern = f"{pattern}|b*c"
    task = regex_task(pattern, alphabet=["a", "b", "c"])
    d = decide_task(task, "crasp", budget=20_000)
    if not d.proved_in:
        return
    words = ["".join(w) for n in range(6) for w in itertools.product("abc", repeat=n)]
    if d.sop is None:       # decided by Simon's theorem, no program constructed: nothing to run
        assert "J-trivial" in d.detail
        return
    want = ["yes" if re.fullmatch(pattern, w) else "no" for w in words]
    assert _answers(task, d.sop, words) == want, pattern


def test_the_predictor_says_generalizes_from_the_construction():
    rec = predict(regex_task("b*ab*ab*"), pe="nope")
    assert rec.prediction == "generalizes"
    ev = rec.verdict_evidence["crasp"]
    assert ev["kind"] == "program" and ev["source"] == "decision"


def test_next_set_reads_the_symbol_at_the_position():
    # next-character sets of (ab)* (positive strings): after a prefix ending in a only b may
    # follow, after one ending in b, a or the end: a function of the symbol at the position
    # (Q_a(i)), with no subsequence test; (ab)* membership is not piecewise testable (its
    # answer is read at SEP, where no symbol of w is): its program comes from its potential
    task = regex_task("(ab)*", format="next_set", alphabet=["a", "b"])
    d = decide_task(task, "crasp")
    assert d.proved_in and d.program["reads_symbol_at_i"] and d.program["k"] == 0
    assert check_crasp(d.sop, "crasp").valid
    vals = {t: task.vocab.values[task.vocab.id(t)] for t in task.vocab.tokens}
    name = {v: t for t, v in vals.items()}
    for n in range(1, 9):
        w = ("ab" * n)[:n]
        got = np.asarray(evaluate(d.sop, [[vals["BOS"]] + [vals[c] for c in w]]))[0][1:]
        want = ["{b}" if c == "a" else "{a,EOS}" for c in w]
        assert [name[int(g)] for g in got] == want, w
    d = decide_task(regex_task("(ab)*", alphabet=["a", "b"]), "crasp")
    assert d._piecewise is None and d.program["construction"] == "potentials"
