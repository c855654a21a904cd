"""The one search core (analysis/prediction/search_core/): the counterexample-guided loop on
a scripted grammar (its rules stated here, not read from the code), and both grammars' results
through the one interface."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tasks
from analysis.prediction.budget import TIME_CAP_STOP
from analysis.prediction.raspl_search import problem_from_examples, problem_from_task
from analysis.prediction.search import SearchError, cached_search, clear_search_cache, search
from analysis.prediction.search_core.core import Certificate, Round, cegis, task_problem
from rasp.analyses.crasp import check_crasp


class Scripted:
    """A grammar whose rounds are given: ``rounds[i]`` is what round i returns; refinement
    records what it was given and stops after ``max_rounds`` refinements."""

    name, measure = "toy", "toy size"

    def __init__(self, rounds, max_rounds=10):
        self.rounds, self.max_rounds = list(rounds), max_rounds
        self.lefts, self.batch = [], []

    def round(self, left):
        self.lefts.append(left)
        return self.rounds[len(self.lefts) - 1]

    def refine(self, rnd, spent, rounds):
        self.batch += rnd.counterexamples
        return "rounds" if rounds + 1 >= self.max_rounds else None


def test_rounds_refine_until_a_program_and_keep_the_best_certificate():
    g = Scripted([Round(10, "refine", 3, counterexamples=["x"]),
                  Round(5, "refine", 2, counterexamples=["y"]),
                  Round(7, "found", None, program="P")])
    loop = cegis(g, 100)
    # every round gets what the earlier ones left; the work is their sum
    assert g.lefts == [100, 90, 85] and loop.spent == 22
    assert g.batch == ["x", "y"] and loop.rounds == 2
    # the batch only grows, so every round's certificate holds: the best is kept
    assert loop.certified == 3 and loop.stopped == "found" and loop.last.program == "P"
    assert loop.certificate(g) == Certificate(3, "toy", "toy size")


def test_a_round_without_counterexample_ends_the_search_with_its_reason():
    g = Scripted([Round(4, "budget", 5), Round(1, "found", program="P")])
    loop = cegis(g, 4)
    assert loop.stopped == "budget" and loop.certified == 5 and g.lefts == [4]
    assert loop.last.program is None


def test_the_time_cap_is_never_refined_and_the_policy_can_stop():
    g = Scripted([Round(3, TIME_CAP_STOP, None, counterexamples=["x"])])
    loop = cegis(g, 10)
    assert loop.stopped == TIME_CAP_STOP and g.batch == [] and loop.certified is None
    g = Scripted([Round(1, "refine", 1, counterexamples=[i]) for i in range(5)], max_rounds=2)
    loop = cegis(g, 10)
    assert loop.stopped == "rounds" and g.batch == [0, 1] and loop.spent == 2


def test_certificate_text():
    assert Certificate(4, "C-RASP[]", "C-RASP size").text() == \
        "no program <= 4 (C-RASP[], C-RASP size)"
    assert Certificate(None, "g", "m").text() == "nothing certified"
    assert not Certificate(0, "g", "m").holds and Certificate(1, "g", "m").holds


def test_both_grammars_answer_through_the_one_result_interface():
    """Running max has no program of size 1 (no single operation of the grammar computes it)
    and one of size 2, ``aggregate(select(tokens, tokens, TRUE), tokens, max)``; a C-RASP
    next-token program for the constant language (aa)* over {a} needs no condition."""
    seqs = [[3, 1, 4, 1, 5], [2, 7, 1, 8, 2], [9, 9, 0, 1, 0]]
    ex = [(xs[:t] + [max(xs[:t])], t) for xs in seqs for t in range(1, len(xs) + 1)]
    r = search(problem_from_examples(ex), budget=10_000_000, max_size=3, combine=0)
    assert r.found and r.size == 2 and r.grammar == "raspl" and r.source
    assert r.certificate == Certificate(1, "the RASP-L search grammar", "expression size")
    assert r.certificate.holds
    from tasks.huang import make_huang_tasks
    c = search(make_huang_tasks()["majority_binary"], "crasp", budget=2_000_000)
    assert c.found and c.source and c.size is not None
    assert c.certificate.grammar == "C-RASP[]" and c.certificate.measure == "C-RASP size"
    assert c.certificate.bound == c.certified_below and c.certified_below < c.size


def test_the_counterexample_is_the_shortest_failing_example_first_on_ties():
    from analysis.prediction.search_core.core import shortest_failing
    assert shortest_failing([False, True, True, True], [1, 5, 3, 3]) == 2
    assert shortest_failing([False, False], [1, 2]) is None
    assert shortest_failing([True], [7]) == 0


def test_one_problem_holds_the_task_s_own_answers_once_each():
    # sort_unique, stated here: BOS body SEP, then the distinct body tokens ascending, then EOS
    task = tasks.get_task("sort_unique")
    p = task_problem(task, range(1, 7), 3, 0)
    bos, sep, eos = (task.vocab.values[i] for i in (task.vocab.bos, task.vocab.sep,
                                                     task.vocab.eos))
    assert p.lengths == [1, 2, 3, 4, 5, 6] and p.special == [bos, sep, eos]
    for values, first in p.rows:
        assert values[0] == bos and values[first - 1] == sep
        assert values[first:] == sorted(set(values[1:first - 1])) + [eos]
    # the RASP-L batch is these rows, in order
    batch = problem_from_task(task, range(1, 7), 3, 0)
    assert batch.inputs.shape[0] == len(p.rows)
    for i, (values, _) in enumerate(p.rows):
        assert list(batch.inputs[i, :len(values) - 1]) == values[:-1]


def test_a_next_set_problem_has_no_row_twice_though_its_prefixes_repeat():
    # a next-set string enters as one next-token example per prefix, so strings of different
    # lengths share prefixes: (10)* has one string per even length, so its rows are the
    # prefixes of the longest one, each once
    task = tasks.get_task("tomita2_nextchar")
    p = task_problem(task, range(1, 7), 3, 0)
    rows = [tuple(v) for v, _ in p.rows]
    assert len(rows) == len(set(rows))
    c = search(task, "crasp", budget=1_000_000)
    assert c.found and check_crasp(c.program, "crasp").valid


def test_the_rasp_l_engine_has_no_c_rasp_mode():
    problem = problem_from_task(tasks.get_task("sort_unique"), range(1, 4), 1, 0)
    with pytest.raises(SearchError, match="grammar=\"crasp\""):
        search(problem, budget=1000, max_size=2, rules={"mode": "crasp"})


ROOT = Path(__file__).resolve().parent.parent
PRED = "analysis.prediction"


def _imports(path: Path) -> set[str]:
    """``module`` and ``module.name`` of every import in ``path`` (relative ones resolved)."""
    pkg = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    if path.name != "__init__.py":
        pkg = pkg.rpartition(".")[0]
    out = set()
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.Import):
            out |= {a.name for a in n.names}
        elif isinstance(n, ast.ImportFrom):
            base = pkg.split(".")[:len(pkg.split(".")) - n.level + 1] if n.level else []
            mod = ".".join(base + ([n.module] if n.module else []))
            out |= {mod} | {f"{mod}.{a.name}" for a in n.names}
    return out


def test_one_front_door_over_a_core_outside_both_grammars():
    """The core imports neither grammar nor the entry; neither grammar imports the other or the
    entry; outside the grammars only the entry (``analysis/prediction/search.py``) starts a
    grammar's search (``search_raspl``, ``search_crasp``): every caller in the product goes
    through ``search`` (``bench/bench_search.py`` times the RASP-L engine itself)."""
    grammars = (f"{PRED}.raspl_search", f"{PRED}.crasp_search")
    for f in (ROOT / "analysis" / "prediction" / "search_core").glob("*.py"):
        bad = {m for m in _imports(f) if m.startswith(grammars + (f"{PRED}.search",))
               and not m.startswith(f"{PRED}.search_core")}
        assert not bad, (f.name, bad)
    for own, other in (grammars, grammars[::-1]):
        for f in (ROOT / Path(*own.split("."))).glob("*.py"):
            bad = {m for m in _imports(f) if m.startswith(other)
                   or m == f"{PRED}.search" or m.startswith(f"{PRED}.search.")}
            assert not bad, (f, bad)
    starts = []
    for pkg in ("rasp", "tasks", "compiler", "analysis", "rasp_cli"):
        for f in (ROOT / pkg).rglob("*.py"):
            rel = f.relative_to(ROOT).as_posix()
            if rel.startswith(("analysis/prediction/raspl_search/",
                               "analysis/prediction/crasp_search/")):
                continue
            if any(m.endswith((".search_raspl", ".search_crasp")) for m in _imports(f)):
                starts.append(rel)
    assert starts == ["analysis/prediction/search.py"], starts


def test_the_one_cache_keeps_a_search_and_forgets_it_when_cleared():
    task = tasks.get_task("sort_unique")
    clear_search_cache()
    a = cached_search(task, "raspl", max_size=1, budget=2_000, progress=False)
    assert cached_search(task, "raspl", max_size=1, budget=2_000, progress=True) is a
    assert cached_search(task, "raspl", max_size=1, budget=3_000) is not a
    clear_search_cache()
    assert cached_search(task, "raspl", max_size=1, budget=2_000) is not a
    clear_search_cache()


def test_the_entry_refuses_an_unknown_grammar_and_a_batch_for_c_rasp():
    problem = problem_from_task(tasks.get_task("sort_unique"), range(1, 3), 1, 0)
    with pytest.raises(SearchError, match="unknown search grammar"):
        search(problem, "rasp")
    with pytest.raises(SearchError, match="give it a task"):
        search(problem, "crasp")
