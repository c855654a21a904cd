"""The C-RASP decision for regular tasks (analysis/prediction/crasp_decision.py).

Each "not in fragment" is checked against a ground truth written here (a Python predicate of
the language, not the automaton the decider read): the outputs after ``u v^n w`` cycle with
the witness's period and are not constant, which the eventual-constancy lemma (proved in the
module's docstring) rules out for every program of the fragment.
"""

import itertools

from hypothesis import given, settings, strategies as st

import tasks
from analysis.prediction.crasp_decision import decide_crasp, decide_task
from analysis.prediction.search import search
from analysis.prediction.predict import predict
from tasks.huang import DFA


def _witness_truth(decision, member):
    """The witness against the ground truth ``member`` (a predicate of the word's symbols):
    periodic with the witness's period and not constant."""
    wit = decision.witness
    u, v, w = wit["u"], wit["v"], wit["w"]
    p = wit["period"]
    outs = [member(u + v * n + w) for n in range(1, 1 + 4 * p)]
    assert all(outs[i] == outs[i + p] for i in range(len(outs) - p))
    assert len(set(outs)) > 1
    return outs


# -- textbook cases ---------------------------------------------------------------------------
def test_parity_is_refuted_for_both_fragments():
    # PARITY (an even number of 1s): not star-free (McNaughton & Papert 1971, "Counter-free
    # automata": its minimal automaton is a counter); with periodic position predicates still
    # out of reach: words of every length move the parity (Barrington, Compton, Straubing &
    # Therien 1992: PARITY is not quasi-aperiodic)
    parity = DFA(2, [[0, 1], [1, 0]], {0})
    for variant in ("crasp", "crasp_pl"):
        d = decide_crasp(parity, variant)
        assert d.proved_not and d.check()
        _witness_truth(d, lambda s: s.count("1") % 2 == 0)


def test_aa_star_is_refuted_for_nope_only():
    # (aa)*: the period-2 counter on a^n (not star-free); with i mod 2 it has a
    # C-RASP[periodic] program (Huang et al. 2025 list it among the APE-learnable languages),
    # so the periodic fragment must not be refuted
    aa = DFA(1, [[1], [0]], {0})
    d = decide_crasp(aa, "crasp", alphabet=["a"])
    assert d.proved_not and d.check()
    assert d.witness["v"] == ["a"] and d.witness["period"] == 2
    _witness_truth(d, lambda s: len(s) % 2 == 0)
    # ... and is not: its program is constructed on the product with the position mod 2
    d = decide_crasp(aa, "crasp_pl", alphabet=["a"])
    assert not d.proved_not and d.proved_in
    assert d.program["product"] == {"period": 2, "window": 0}


def test_mod3_counter():
    # #a - #b = 0 mod 3 (Tomita 6): a counter of period 3
    t6 = DFA(2, [[1, 2], [2, 0], [0, 1]], {0})
    d = decide_crasp(t6, "crasp", alphabet=["a", "b"])
    assert d.proved_not and d.witness["period"] == 3
    _witness_truth(d, lambda s: (s.count("a") - s.count("b")) % 3 == 0)


def test_star_free_languages_are_not_refuted():
    # (ab)*, a*b* and (a|b)*ab are star-free (McNaughton & Papert 1971): aperiodic, no
    # counter, so none is refuted. (ab)* is in C-RASP[] (#a - #b in {0, 1} at every prefix, 0
    # at the end) but not piecewise testable: its program comes from its potential
    # (tests/test_crasp_potential.py); a*b* (no subsequence "ba") is piecewise testable
    # (tests/test_crasp_piecewise.py); (a|b)*ab has neither, so nothing is decided for
    # C-RASP[] (for C-RASP[periodic, local] the symbol before is an atom)
    ab_star = DFA(2, [[1, None], [None, 0]], {0})
    a_star_b_star = DFA(2, [[0, 1], [None, 1]], {0, 1})
    ends_ab = DFA(2, [[1, 0], [1, 2], [1, 0]], {2})
    for variant in ("crasp", "crasp_pl"):
        d = decide_crasp(ab_star, variant, alphabet=["a", "b"])
        assert d.status == "in fragment" and d.program["construction"] == "potentials"
        d = decide_crasp(ends_ab, variant, alphabet=["a", "b"])
        if variant == "crasp":
            assert d.status == "no counter" and not d.proved_not and d.evidence() is None
        else:       # C-RASP[local] reads the two symbols before SEP: a program on that product
            assert d.proved_in and d.program["product"] == {"period": 1, "window": 2}
        d = decide_crasp(a_star_b_star, variant, alphabet=["a", "b"])
        assert d.status == "in fragment" and not d.proved_not and d.program["k"] == 2


def test_budget_is_work():
    parity = DFA(2, [[0, 1], [1, 0]], {0})
    d = decide_crasp(DFA(3, [[1, 2, 0], [2, 0, 1], [0, 1, 2]], {0}), "crasp", budget=1)
    assert d.status == "budget" and not d.proved_not
    assert decide_crasp(parity, "crasp", budget=10).proved_not


# -- the catalogue ------------------------------------------------------------------------
#: Huang et al.'s languages that are not star-free, with their definitions written here
NOT_STAR_FREE = {
    "aa_star": lambda s: set(s) <= {"a"} and len(s) % 2 == 0,
    "aaaa_star": lambda s: set(s) <= {"a"} and len(s) % 4 == 0,
    "abab_star": lambda s: len(s) % 4 == 0 and s == ["a", "b"] * (len(s) // 2),
    "tomita5": lambda s: s.count("0") % 2 == 0 and s.count("1") % 2 == 0,
    "tomita6": lambda s: (s.count("0") - s.count("1")) % 3 == 0,
}


def test_catalogue_counters_against_their_definitions():
    for name, member in NOT_STAR_FREE.items():
        task = tasks.get_task(name)
        d = decide_task(task, "crasp")
        assert d.proved_not and d.check(), name
        outs = _witness_truth(d, lambda s: "yes" if member(s) else "no")
        assert [o for _, o in d.witness["outputs"]] == outs[:len(d.witness["outputs"])]


def test_catalogue_star_free_languages_not_refuted():
    # star-free languages of Huang et al.'s suite (their "star-free" group): no counter
    for name in ("tomita1", "tomita2", "tomita4", "tomita7", "dyck1_depth2", "dyck1_depth12",
                 "a_to_e_blocks", "ab_d_bc", "ends_02"):
        for fmt in ("", "_nextchar"):
            assert not decide_task(tasks.get_task(name + fmt), "crasp").proved_not, name + fmt


def test_decided_cells_are_not_cells_huang_report_a_program_for():
    # Huang et al.'s plotting data name the next-set cells with a C-RASP program (per PE): a
    # proof of "no program" on one of them would contradict their paper
    from tasks.huang import HUANG_EXPRESSIVE
    decided = 0
    for name in tasks.TASKS:
        if not name.endswith("_nextchar"):
            continue
        for variant, pe in (("crasp", "nope"), ("crasp_pl", "ape")):
            if decide_task(tasks.get_task(name), variant).proved_not:
                decided += 1
                assert name not in HUANG_EXPRESSIVE[pe], (name, variant)
    assert decided == 8     # tomita3/5/6, (aa)*, (aaaa)*, (abab)* for NoPE; tomita5/6 for APE


def test_next_set_witness_uses_positive_prefixes_only():
    # tomita3_nextchar: the witness words are prefixes of members (Huang et al. test only
    # positive strings): every prefix of u v^n w keeps the automaton live
    task = tasks.get_task("tomita3_nextchar")
    d = decide_task(task, "crasp")
    assert d.proved_not and d.check()
    alpha = task.vocab.tokens[:task.k]
    live = task.dfa.live_states()
    wit = d.witness
    for n, out in wit["outputs"]:
        word = [alpha.index(c) for c in wit["u"] + wit["v"] * n + wit["w"]]
        if out is None:
            continue
        q = 0
        for x in word:
            q = task.dfa.delta[q][x]
            assert q is not None and q in live


def test_decided_languages_get_no_program_from_the_search():
    # soundness against the search: a language proved to have no C-RASP[] program never gets
    # a verified one (at the budget the tests afford)
    for name in ("aa_star", "tomita5"):
        res = search(tasks.get_task(name), "crasp", budget=300_000)
        assert not res.found, name


def test_predictor_says_fails_with_the_witness():
    rec = predict("aa_star", pe="nope", search=True, crasp_budget=100_000)
    assert rec.prediction == "fails" and rec.prediction_label == "fails"
    ev = rec.verdict_evidence["crasp"]
    assert ev["kind"] == "decision" and "v='a'" in ev["detail"]
    assert rec.crasp["decisions"]["crasp"]["status"] == "not in fragment"
    # not decided: the verdict stays with the search
    rec = predict("ends_02", pe="nope")
    assert rec.prediction != "fails"
    assert rec.crasp["decisions"]["crasp"]["status"] == "no counter"


def test_regex_task_is_decided():
    from tasks.custom import regex_task
    rec = predict(regex_task("(aaa)*"), pe="nope")
    assert rec.prediction == "fails"
    rec = predict(regex_task("(aaa)*", format="next_set"), pe="nope")
    assert rec.prediction == "fails"


# -- random automata: the witness against the raw automaton, and no missed short counter --------
def _brute_counter(dfa, max_len=4):
    """A counter seen by brute force: a word v (|v| <= max_len) and a reachable state q with
    q v^n cycling through >= 2 states with different acceptance of some suffix (<= 4)."""
    k, n = dfa.k, len(dfa.delta)
    sink = n
    step = lambda q, x: sink if q == sink or dfa.delta[q][x] is None else dfa.delta[q][x]
    def after(q, word):
        for x in word:
            q = step(q, x)
        return q
    acc = lambda q: q != sink and q in dfa.accept
    reach = {after(0, w) for L in range(n + 1) for w in itertools.product(range(k), repeat=L)}
    suffixes = [w for L in range(5) for w in itertools.product(range(k), repeat=L)]
    for L in range(1, max_len + 1):
        for v in itertools.product(range(k), repeat=L):
            for q in reach:
                seq = [q]
                for _ in range(2 * (n + 1)):
                    seq.append(after(seq[-1], v))
                tail = seq[n + 1:]
                if len(set(tail)) > 1 and any(len({acc(after(r, s)) for r in set(tail)}) > 1
                                              for s in suffixes):
                    return v
    return None


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4).flatmap(lambda n: st.tuples(
    st.just(n),
    st.lists(st.lists(st.one_of(st.none(), st.integers(0, n - 1)), min_size=2, max_size=2),
             min_size=n, max_size=n),
    st.sets(st.integers(0, n - 1), min_size=1))))
def test_random_automata(case):
    n, delta, accept = case
    dfa = DFA(2, delta, accept)
    d = decide_crasp(dfa, "crasp", alphabet=["a", "b"])
    pl = decide_crasp(dfa, "crasp_pl", alphabet=["a", "b"])
    if d.proved_not:
        sym = {"a": 0, "b": 1}
        _witness_truth(d, lambda s: dfa.run([sym[c] for c in s]))
    else:
        # a counter that brute force sees must have been found
        assert _brute_counter(dfa) is None
    # C-RASP[] is a fragment of C-RASP[periodic, local]: refuting the larger refutes the smaller
    if pl.proved_not:
        assert d.proved_not and pl.check()
        assert len(pl.witness["v"]) == pl.stable_length
