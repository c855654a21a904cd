"""Python callables in compiled programs (Tracr writes maps, sequence maps and select
predicates as callables): what the compiler can prove about them from the value sets.

Independent truths: the interpreter's values on every input (exhaustive), its selector widths,
and the IR arithmetic the callable spells out (``numerical(x * 3 + 1)``)."""

import itertools

import numpy as np
import pytest

import rasp
from rasp.ir import (aggregate, indices, map_sop, numerical, select, selector_width,
                     sequence_map, tokens_asis, Select)
from rasp.analyses.value_sets import infer_value_sets, selects_at_most_one
from compiler import compile_program

VOCAB = list("ab")
N = 6


def _frac():
    """numerical mean of 0/1 over the prefix: values k/m, most not dyadic."""
    flag = numerical(map_sop(lambda t: 1 if t == "a" else 0, tokens_asis))
    return numerical(aggregate(select(indices, indices, "<="), flag))


def _exhaustive_mismatches(sop, cm, vocab=VOCAB, n=N):
    bad = 0
    for length in range(1, n + 1):
        batch = [list(x) for x in itertools.product(vocab, repeat=length)]
        want = rasp.evaluate(sop, batch)
        got = cm.run(batch)
        for w, g in zip(want, got):
            bad += any(a != b if isinstance(a, (str, type(None))) else abs(a - b) > 1e-9
                       for a, b in zip(w.tolist(), g.tolist()))
    return bad


AFFINE = [
    ("3x+1 of a mean", lambda f: numerical(map_sop(lambda x: 3 * x + 1, f)),
     lambda f: numerical(f * 3 + 1)),
    ("2x - i + 3", lambda f: numerical(sequence_map(lambda x, y: 2 * x - y + 3, f, indices)),
     lambda f: numerical(f * 2 - indices + 3)),
    ("x/2 of indices", lambda f: numerical(map_sop(lambda x: x / 2, indices)),
     lambda f: numerical(indices / 2)),
]


@pytest.mark.parametrize("name,callable_form,arith_form", AFFINE, ids=[a[0] for a in AFFINE])
def test_an_affine_callable_compiles_as_its_arithmetic(name, callable_form, arith_form):
    """A callable that is affine on its inputs' value sets is one affine MLP, the size of the
    same program written as IR arithmetic (before: a discretising MLP with two units per
    step, e.g. 2,273 parameters for 3x+1 of a mean against 929), and exact on every input."""
    f = _frac()
    sop, arith = callable_form(f), arith_form(f)
    cm, ca = compile_program(sop, VOCAB, N), compile_program(arith, VOCAB, N)
    assert cm.stats["params"] == ca.stats["params"], (cm.stats, ca.stats)
    assert cm.stats["mlp_hidden"] == ca.stats["mlp_hidden"]
    assert _exhaustive_mismatches(sop, cm) == 0


def test_a_callable_affine_only_up_to_rounding_keeps_its_table():
    """``(x + 1) * 0.1`` is affine over the rationals, but ``0.1 * x + 0.1`` is not bitwise
    the callable's float64 value for every x: the rewrite is refused and the model is still
    exact (the interpreter's values are the callable's)."""
    import compiler.graph.lowering as lowering
    f = _frac()
    sop = numerical(map_sop(lambda x: (x + 1) * 0.1, f))
    seen = []
    real = lowering.affine_python_expr
    try:
        lowering.affine_python_expr = lambda fn, leaves, desc: seen.append(
            (fn.label, real(fn, leaves, desc))) or seen[-1][1]
        cm = compile_program(sop, VOCAB, N)
    finally:
        lowering.affine_python_expr = real
    assert seen and all(e is None for _, e in seen)        # no rewrite: the table is kept
    assert _exhaustive_mismatches(sop, cm) == 0


def test_a_nonaffine_callable_is_not_rewritten():
    f = _frac()
    sq = numerical(map_sop(lambda x: x * x, f))
    cm = compile_program(sq, VOCAB, N)
    assert cm.stats["mlp_hidden"] > compile_program(numerical(f * 3 + 1), VOCAB, N
                                                    ).stats["mlp_hidden"]
    assert _exhaustive_mismatches(sq, cm) == 0


PREDICATES = [
    ("q == k + 1", lambda k, q: q == k + 1, True),
    ("q == k - 2", lambda k, q: q == k - 2, True),
    ("|q - k| <= 1", lambda k, q: abs(q - k) <= 1, False),
    ("k == q // 2", lambda k, q: k == q // 2, True),
    ("q == k // 2", lambda k, q: q == k // 2, False),
]


@pytest.mark.parametrize("name,pred,one", PREDICATES, ids=[p[0] for p in PREDICATES])
def test_at_most_one_key_for_python_predicates_agrees_with_the_selector_widths(name, pred, one):
    """``selects_at_most_one`` proves "at most one key per query" for a Python predicate over
    injective keys from the value sets; the truth is the largest selector width the
    interpreter computes over every input."""
    sel = Select(indices, indices, "python", causal=False, predicate=pred)
    vs = infer_value_sets(selector_width(sel), VOCAB, N)
    widest = max(int(rasp.evaluate(selector_width(sel), [["a"] * n]).max())
                 for n in range(1, N + 1))
    assert (widest <= 1) == one
    assert selects_at_most_one(sel, vs) == one


def test_affine_and_nearly_affine_callables_into_steps_are_exact():
    """A small fuzz profile: affine callables written in several float orders (``a*x + b``,
    ``(x + b) * a``, ``x / a + b``; coefficients such as 0.1 and 1/3 whose float products round)
    over means, positions and selector widths, then discontinuous steps (``round``, ``>``,
    ``int(4x) % 3``): every compiled model equals the interpreter on every input."""
    import random
    rnd = random.Random(1)
    inners = [_frac(), indices, numerical(indices),
              numerical(selector_width(select(tokens_asis, tokens_asis, "==")))]
    coefs = [0, 1, -1, 2, 3, 0.5, 0.1, 1 / 3, -0.25, 10, 7]
    forms = [lambda a, b: (lambda x: a * x + b), lambda a, b: (lambda x: (x + b) * a),
             lambda a, b: (lambda x: x * a - b), lambda a, b: (lambda x: x / (a or 1) + b)]
    steps = [lambda s: s, lambda s: numerical(map_sop(lambda v: round(v), s)),
             lambda s: map_sop(lambda v: v > 1, s), lambda s: map_sop(lambda v: int(v * 4) % 3, s)]
    for _ in range(40):
        f = rnd.choice(forms)(rnd.choice(coefs), rnd.choice(coefs))
        sop = rnd.choice(steps)(numerical(map_sop(f, rnd.choice(inners))))
        cm = compile_program(sop, VOCAB, 5)
        assert _exhaustive_mismatches(sop, cm, n=5) == 0
