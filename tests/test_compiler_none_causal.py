"""Issue 38's reproducers: ``None`` as a value like any other (D1, D2, D4), causal models
checked at every length by the gate (D3), means of bools typed as the interpreter types them
(D5), a callable's own error reported as a ``RASPError`` (D6).

The truth is the interpreter: each compiled model is compared with ``rasp.evaluate`` on every
input of every length ``1..N`` (exhaustively, here, not through the gate), plus values worked
out by hand."""

import itertools

import numpy as np
import pytest

import rasp
from compiler import CompiledRuntimeError, compile_program
from compiler.verification import verify_compiled
from rasp import (aggregate, causal_mode, indices, kqv, numerical, select, tokens, tokens_int)
from rasp.equality import values_equal
from rasp.ir import Elementwise, Map, map_sop

VOCAB = ["1", "2", "3"]


def exhaustive_mismatches(prog, n_max: int = 4, causal: bool = False, vocab=VOCAB) -> int:
    """Compile ``prog`` and count the inputs (every sequence of length 1..n_max) where the
    model and the interpreter differ (a value, or one raising where the other does not)."""
    cm = compile_program(prog, vocab, n_max, causal=causal,
                         raising="declare")     # raising programs: refused by default
    bad = 0
    for n in range(1, n_max + 1):
        for x in itertools.product(vocab, repeat=n):
            outs = []
            for run in (lambda: rasp.evaluate(prog, [list(x)], causal=causal or None)[0],
                        lambda: cm.run([list(x)])[0]):
                try:
                    outs.append(run())
                except rasp.RASPError as e:          # CompiledRuntimeError is one too
                    outs.append(e)
            w, g = outs
            errs = isinstance(w, Exception), isinstance(g, Exception)
            bad += not (all(errs) or (not any(errs) and values_equal(w, g, strict=True)))
    return bad


def d1():
    """A numerical mean with default None fed to ``* 0.5``: the interpreter raises where the
    row is None (the compiled model gave 0.0)."""
    m = numerical(aggregate(select(indices, tokens_int, "=="), tokens_int, default=None))
    return m * 0.5


def d2():
    """A mean of numbers with default None, no annotation: the interpreter averages (the
    compiled model was categorical and raised)."""
    return aggregate(select(tokens_int, tokens_int, "<="), tokens_int, default=None)


def d4():
    """``kqv``'s truncated mean with default None (an internal error refused it)."""
    return kqv(tokens_int, indices, tokens_int, "<", default=None)


def test_d1_none_times_a_number_raises_in_both():
    prog = d1()
    # by hand: "11" -> every query (token 1) selects the key at index 1 (token 1): 1 * 0.5
    assert rasp.evaluate(prog, [list("11")])[0].tolist() == [0.5, 0.5]
    with pytest.raises(rasp.RASPError):          # "1": no key has index 1 -> None * 0.5
        rasp.evaluate(prog, [list("1")])
    cm = compile_program(prog, VOCAB, 4, raising="declare")   # refused by default
    with pytest.raises(CompiledRuntimeError):
        cm.run([list("1")])
    assert exhaustive_mismatches(prog) == 0


def test_d2_a_mean_with_a_none_default_is_a_numerical_mean():
    prog = d2()
    # by hand: "1212": keys <= query: query 1 -> {1, 1}: 1; query 2 -> all four: 1.5
    assert rasp.evaluate(prog, [list("1212")])[0].tolist() == [1, 1.5, 1, 1.5]
    cm = compile_program(prog, VOCAB, 4)
    assert values_equal(cm.run([list("1212")])[0], [1, 1.5, 1, 1.5])
    assert exhaustive_mismatches(prog) == 0
    # a None row: no key above the query
    prog2 = aggregate(select(tokens_int, tokens_int, ">"), tokens_int, default=None)
    assert rasp.evaluate(prog2, [list("1213")])[0].tolist() == [2.5, 3, 2.5, None]
    assert values_equal(compile_program(prog2, VOCAB, 4).run([list("1213")])[0],
                        [2.5, 3, 2.5, None])
    assert exhaustive_mismatches(prog2) == 0


def test_d4_kqv_with_a_none_default_compiles():
    prog = d4()
    # by hand: "1213", keys with token < the query's index: index 0, 1 -> none (None);
    # index 2 -> tokens 1, 1: 1; index 3 -> tokens 1, 2, 1: trunc(4/3) = 1
    assert rasp.evaluate(prog, [list("1213")])[0].tolist() == [None, None, 1, 1]
    assert exhaustive_mismatches(prog) == 0
    assert exhaustive_mismatches(kqv(tokens_int, indices, tokens_int, ">", default=None)) == 0


def test_value_sets_carry_none_and_the_means():
    from rasp.analyses.value_sets import value_set_pass
    prog = aggregate(select(tokens_int, tokens_int, ">"), tokens_int, default=None)
    vs = value_set_pass(prog, VOCAB, 3)
    got = vs.sets[prog.id]
    assert None in got and 2.5 in got and 3 in got


def test_a_mean_over_values_that_may_be_none_is_refused_up_front():
    from compiler import UnsupportedError
    inner = aggregate(select(indices, indices - 1, "=="), tokens_int, default=None)
    prog = aggregate(select(indices, indices, "<="), inner, default=0)
    with pytest.raises(UnsupportedError, match="may be None"):
        compile_program(prog, VOCAB, 4)


class _WrongOnShortInputs:
    """A compiled model that raises on every input of length 2..4 and is right elsewhere."""

    def __init__(self, cm):
        self.cm = cm
        self.vocab, self.max_seq_len, self.causal = cm.vocab, cm.max_seq_len, cm.causal

    def run(self, inputs):
        seqs = inputs if isinstance(inputs[0], (list, tuple, str)) else [inputs]
        if any(2 <= len(s) <= 4 for s in seqs):
            raise CompiledRuntimeError("wrong on purpose")
        return self.cm.run(inputs)


def d3():
    """A causal program the interpreter raises on at every input of length 5 and 6 (position 4
    has no lookup entry) and computes at every shorter length (the shape
    ``tests/compiler_fuzz.causal_programs`` generates)."""
    with causal_mode():
        return Map(Elementwise("lookup", container=[-3, 0, 5, 7]), indices) + tokens_int


def test_d3_the_gate_checks_causal_models_at_every_length():
    prog = d3()
    cm = compile_program(prog, VOCAB, 6, causal=True,      # 1,092 inputs: sampled gate
                         raising="declare")              # raises: refused by default
    assert verify_compiled(cm, prog).ok
    with pytest.raises(rasp.RASPError):
        rasp.evaluate(prog, [list("123123")], causal=True)
    res = verify_compiled(_WrongOnShortInputs(cm), prog)
    assert not res.exhaustive
    assert set(res.per_length) == {1, 2, 3, 4, 5, 6}
    assert all(res.per_length[n][0] == res.per_length[n][1] > 0 for n in (2, 3, 4))
    assert res.per_length[1][0] == res.per_length[5][0] == res.per_length[6][0] == 0
    # the gate before issue 38 checked length 6 only: both raise there, nothing was found


def test_d6_a_callables_error_is_a_rasp_error_naming_the_map():
    bad = map_sop(lambda v: v + "x", tokens_int, label="bad")
    with pytest.raises(rasp.RASPTypeError, match=r"map .*bad\(x\).*raised TypeError") as e:
        rasp.evaluate(bad, [list("12")])
    assert isinstance(e.value.__cause__, TypeError)
    zero = rasp.ir.sequence_map(lambda a, b: a // b, tokens_int, tokens_int - 1, label="q")
    with pytest.raises(rasp.RASPValueError,
                       match=r"sequence_map .*q\(x, x\).*ZeroDivisionError"):
        rasp.evaluate(zero, [list("12")])


@pytest.mark.parametrize("default", [False, True, None])
def test_d5_a_mean_of_bools_is_typed_as_the_interpreter_types_it(default):
    """The interpreter returns a mean of bools with a bool (or None) default as the moved
    bools when every query of the batch selects at most one key, else as numbers; the gate
    refused such models (``True`` vs ``1``)."""
    prog = aggregate(select(indices, tokens_int, "<"), tokens == "1", default=default)
    # by hand: "1" selects key 0 (index 0 < 1): the bool True; "31" averages keys 0-2 at
    # query 0 (token 3): (False + True) / 2 = 0.5 -> numbers
    assert rasp.evaluate(prog, [list("1")])[0].tolist() == [True]
    assert rasp.evaluate(prog, [list("31")])[0].tolist() == [0.5, 0]
    assert exhaustive_mismatches(prog) == 0
    cm = compile_program(prog, VOCAB, 4)
    for n in range(1, 5):                     # whole batches: the type is the batch's
        batch = [list(x) for x in itertools.product(VOCAB, repeat=n)]
        for w, g in zip(rasp.evaluate(prog, batch), cm.run(batch)):
            assert values_equal(w, g, strict=True), (w, g)
