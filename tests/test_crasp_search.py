"""The C-RASP search (analysis/prediction/crasp_search/, run through analysis.prediction.search):
found programs are C-RASP for their variant and agree with the task's ground truth at every
length 1..40; a certificate is re-checked by brute force with the interpreter; a 150-symbol task
returns a result."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import rasp
from analysis.prediction.crasp_search import evaluate_recipe, recipe_size
from analysis.prediction.search import search
from analysis.prediction.search_core.core import task_problem
from analysis.prediction.crasp_search.recipes import _Batch, _IRBuilder
from rasp.analyses.crasp import check_crasp
from tasks.decode import verify_program
from tasks.huang import make_huang_tasks

TASKS = make_huang_tasks()


def _check_found(r, variant):
    assert r.found, (r.task, r.stopped)
    assert r.stopped == "found"
    assert r.grammar == variant
    assert check_crasp(r.program, variant).valid
    task = TASKS[r.task]
    ver = verify_program(task, r.program, task.lengths(40), samples=4, seed=123)
    assert ver.ok, ver.summary()
    assert r.size is not None and r.size > 0
    assert r.source and r.schema


def test_majority_binary_found():
    r = search(TASKS["majority_binary"], "crasp", budget=24_000_000)
    _check_found(r, "crasp")
    assert r.size <= 10
    # the certificate stays below the found program's size
    assert r.certified_below is None or r.certified_below < r.size


@pytest.mark.parametrize("name,variant", [("tomita1", "crasp"), ("aa_star", "crasp_pl"),
                                          ("majority", "crasp")])
def test_formal_language_and_uniform_found(name, variant):
    r = search(TASKS[name], variant, budget=24_000_000)
    _check_found(r, variant)


def test_crasp_program_refused_by_nope_check():
    # (aa)* needs the periodic predicate: found in crasp_pl, and that program is not C-RASP[]
    r = search(TASKS["aa_star"], "crasp_pl", budget=24_000_000)
    assert r.found
    assert not check_crasp(r.program, "crasp").valid


def test_large_alphabet_returns_a_result():
    r = search(TASKS["copy_unique_150"], "crasp", budget=2_000_000, max_memory_mb=200)
    assert isinstance(r.found, bool)
    assert r.stopped
    if not r.found:
        assert r.stopped in ("budget", "memory", "max_size", "rounds") or \
            r.stopped.startswith("refused")


# --------------------------------------------------------------------------------------------
# certificate re-checked by brute force
# --------------------------------------------------------------------------------------------

def _naive_booleans(atoms, max_size):
    """Every Boolean recipe of the C-RASP[] grammar without uniform constructs up to
    ``max_size``, enumerated naively (no observational equivalence)."""
    B = {s: [] for s in range(1, max_size + 1)}
    C = {s: [] for s in range(1, max_size + 1)}
    B[1] = list(atoms)
    C[1] = [("true",)]
    for s in range(2, max_size + 1):
        B[s] += [("not", x) for x in B[s - 1]]
        C[s] += [("cnt", x) for x in B[s - 1]]
        for k in range(16):
            c = max(0, k.bit_length() - 1)                # constants in binary
            if s - 1 - c >= 1:
                B[s] += [("cmpk", o, k, x) for x in C[s - 1 - c] for o in ("eq", "gt")]
        for s1 in range(1, s - 1):
            s2 = s - 1 - s1
            B[s] += [(o, x, y) for x in B[s1] for y in B[s2] for o in ("and", "or")]
            C[s] += [(o, x, y) for x in C[s1] for y in C[s2] for o in ("add", "sub")]
            B[s] += [("cmp", o, x, y) for x in C[s1] for y in C[s2]
                     for o in ("lt", "le", "eq")]
    return [b for s in B for b in B[s]]


def test_certificate_brute_force():
    task = TASKS["parity_bits"]
    cert_size = 3
    r = search(task, "crasp", budget=24_000_000, max_size=cert_size)
    assert not r.found and r.stopped == "max_size"
    assert r.certified_below == cert_size
    assert r.counterexamples_added == 0
    rows = task_problem(task, range(1, 7), 3, 0, mutants=1).rows    # the search batch
    T = max(len(v) - 1 for v, _ in rows)
    inputs = np.array([v[:-1] + [v[-2]] * (T - len(v) + 1) for v, _ in rows])
    tmask = np.zeros(inputs.shape, dtype=bool)
    target = np.zeros(inputs.shape, dtype=np.int64)
    for b, (v, first) in enumerate(rows):
        for t in range(first - 1, len(v) - 1):
            tmask[b, t] = True
            target[b, t] = v[t + 1]
    present = sorted({int(x) for v, _ in rows for x in v[:-1]})
    atoms = [("Q", v) for v in present] + [("content",)]
    bools = _naive_booleans(atoms, cert_size)
    assert all(recipe_size(b) <= cert_size for b in bools)
    bld = _IRBuilder()
    bld.content = [0, 1]
    vals = []
    for b in bools:
        node = bld.node(b)
        assert check_crasp(node, "crasp").valid
        v = np.asarray(rasp.evaluate(node, inputs)).astype(bool)[tmask]
        vals.append(v)
    vals = np.array(vals)                                # [N, targets]
    tgt = target[tmask]
    outputs = sorted(set(tgt.tolist()))
    assert len(outputs) == 3                            # e, o, EOS
    # every decision list `v1 if B1 else (v2 if B2 else v3)` with conditions of size <= 3
    # (all programs of total size <= 3 are among them) fails somewhere on the batch
    for v1, v2, v3 in itertools.permutations(outputs):
        for i in range(len(bools)):
            out = np.where(vals[i][None], v1, np.where(vals, v2, v3))   # [N, targets]
            assert not (out == tgt[None]).all(axis=1).any()


def test_recipe_evaluation_matches_interpreter():
    # the search's NumPy semantics equal the interpreter's on the IR it builds
    task = TASKS["ab_d_bc"]
    rows = task_problem(task, range(1, 6), 2, 0).rows
    batch = _Batch(rows, np.arange(4), uniform=True)
    recs = [("cnt", ("Q", 3)), ("cmp", "lt", ("cnt", ("Q", 0)), ("true",)),
            ("rel", "lt", ("Q", 1)), ("cmpk", "gt", 0, ("cnt", ("Qa",))),
            ("argmax", ("cnt", ("Qa",))), ("loc", 1, ("Q", -1)), ("relT", "eq"),
            ("any", ("and", ("Qa",), ("cmpk", "gt", 0, ("rel", "gt", ("Qa",)))))]
    inputs = batch.tok.copy()
    for b, (v, _) in enumerate(rows):
        inputs[b, len(v) - 1:] = v[-2]
    bld = _IRBuilder()
    bld.content = [0, 1, 2, 3]
    for rec in recs:
        mine = evaluate_recipe(rec, batch)
        for k, a in enumerate(bld.content if mine.ndim == 3 else [None]):
            got = np.asarray(rasp.evaluate(bld.node(rec, a), inputs)).astype(np.int64)
            m = mine[k] if mine.ndim == 3 else mine
            assert np.array_equal(got[batch.valid], m[batch.valid].astype(np.int64)), rec
