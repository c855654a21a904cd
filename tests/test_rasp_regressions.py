"""Regression tests of the dialect's semantics and messages (issues 13, 14, 16).

Each test states an independent truth: a value computed by hand or by plain Python, the
original RASP's behaviour (tech-srl/RASP), or a size measured on a fresh process.
"""

import subprocess
import sys

import pytest

import rasp
from rasp import indices, length, select, aggregate, tokens
from rasp.ir import RASPTypeError, RASPValueError
from rasp.repl.session import run_source


def _reverse():
    return aggregate(select(indices, length - indices - 1, "=="), tokens)


def test_numerical_returns_an_annotated_copy():
    before = rasp.indices.encoding
    n = rasp.numerical(rasp.indices)
    assert n is not rasp.indices and n.encoding == "numerical"
    assert rasp.indices.encoding == before == "categorical"
    c = rasp.categorical(n)
    assert c.encoding == "categorical" and n.encoding == "numerical"
    with pytest.raises(RASPTypeError):
        rasp.numerical(3)


def test_compiled_size_does_not_depend_on_history():
    """numerical(indices) built earlier in the process must not change reverse's compiled
    size: 2 layers and 3,429 parameters (vocab abc, max_seq_len 5; per-head widths counted
    unpadded) as in a fresh process."""
    import compiler
    code = ("import compiler, rasp\n"
            "from rasp import *\n"
            "{pre}"
            "r = aggregate(select(indices, length - indices - 1, '=='), tokens)\n"
            "cm = compiler.compile_program(r, list('abc'), 5)\n"
            "print(cm.stats['layers'], cm.stats['params'])\n")
    fresh = subprocess.run([sys.executable, "-c", code.format(pre="")], capture_output=True,
                           text=True, check=True).stdout.split()
    assert fresh == ["2", "3429"]
    rasp.numerical(rasp.indices)
    run_source("x = numerical(indices); y = numerical(tokens); z = categorical(length);")
    cm = compiler.compile_program(_reverse(), list("abc"), 5)
    assert [str(cm.stats["layers"]), str(cm.stats["params"])] == fresh


def test_raspl_rule4_hint_names_a_valid_program():
    """The hint's suggested program must run (the dialect writes TRUE as a string)."""
    from rasp.analyses.raspl import check
    rep = check(run_source("r = length - indices;")["r"])
    hint = [v.message for v in rep.violations if v.rule == 4][0]
    suggested = hint.split("prefix length ")[1].split(" in causal mode")[0]
    env = run_source(f"w = {suggested};", causal=True)
    assert rasp.evaluate(env["w"], "abc").tolist() == [[1, 2, 3]]


def test_zero_to_negative_power_message():
    with pytest.raises(RASPValueError) as e:
        run_source("x = 0.0 ^ -1;")
    assert "modulo" not in str(e.value) and "negative power" in str(e.value)
    with pytest.raises(RASPValueError) as e:
        rasp.evaluate(rasp.tokens_float ^ -1, [[0.0, 1.0]])
    assert "negative power" in str(e.value)


def test_type_error_names_operands_in_source_order():
    env = run_source("a = tokens + 1; b = 1 + tokens;")
    with pytest.raises(RASPTypeError) as e:
        rasp.evaluate(env["a"], "abc")
    assert "string and int" in str(e.value)
    with pytest.raises(RASPTypeError) as e:
        rasp.evaluate(env["b"], "abc")
    assert "int and string" in str(e.value)


# ---- issue 16 item 5: defaults of another type, as the original RASP ---------------------

def _ev(src, name, inp):
    return rasp.evaluate(run_source(src)[name], inp).tolist()


def test_numeric_default_when_no_query_selects_anything():
    """Original RASP (tech-srl/RASP Support.py apply_average_select): a query that selects
    nothing gets the default (0 when omitted), whatever the values' type; tokens[5] on "abc"
    is [0, 0, 0]."""
    assert _ev("a = tokens[5];", "a", ["abc"]) == [[0, 0, 0]]
    assert _ev('a = aggregate(select(tokens, "z", ==), tokens);', "a", ["abc"]) == [[0, 0, 0]]
    assert _ev('a = aggregate(select(tokens, "z", ==), tokens, 7);', "a", ["abc"]) == [[7] * 3]
    assert _ev('a = aggregate(select(tokens_int, 9, ==), tokens_int, "none");', "a",
               [[1, 2, 3]]) == [["none"] * 3]
    # max / min reductions follow the same rule
    assert _ev('a = aggregate(select(tokens, "z", ==), tokens, 0, "max");', "a",
               ["ab"]) == [[0, 0]]
    # the default flows on: [0, 0, 0] == "a" is all false
    assert _ev('a = tokens[5] == "a";', "a", ["abc"]) == [[False] * 3]


def test_default_of_another_type_per_sequence_of_a_batch():
    """Each sequence is evaluated as the original would evaluate it alone."""
    out = rasp.evaluate(run_source('a = aggregate(select(tokens, "z", ==), tokens);')["a"],
                        ["abc", "zbc"])
    assert out.tolist() == [[0, 0, 0], ["z", "z", "z"]]
    alone = [rasp.evaluate(run_source('a = aggregate(select(tokens, "z", ==), tokens);')["a"],
                           [s]).tolist()[0] for s in ("abc", "zbc")]
    assert out.tolist() == alone


def test_default_of_another_type_in_part_of_a_sequence_is_an_error():
    """The original refuses a sequence mixing strings and numbers ("attempted to create
    sequence with vals of different types"); so do we, naming the aggregate."""
    env = run_source("r = aggregate(select(indices, length - indices, ==), tokens);")
    with pytest.raises(RASPTypeError, match="cannot mix strings and numbers"):
        rasp.evaluate(env["r"], "abc")


def test_or_of_causal_and_noncausal_selector_is_causal():
    """Documented rule (docs/language.md): a selector combination is causal when any part is;
    its matrix is ANDed with key <= query after combining."""
    with rasp.causal_mode():
        c = select(indices, indices, "==")
    nc = select(indices, indices, ">")            # keys after the query
    w = rasp.selector_width(c | nc)
    assert rasp.evaluate(w, "abcd").tolist() == [[1, 1, 1, 1]]
    assert rasp.evaluate(rasp.selector_width(nc), "abcd").tolist() == [[3, 2, 1, 0]]


def test_mean_of_several_bools_is_their_fraction():
    """Documented extension (Tracr and RASP-L average booleans as 0/1; the original refuses):
    the mean of several bools is the fraction of true ones."""
    env = run_source('f = aggregate(select(indices, indices, <=), tokens == "a");')
    assert rasp.evaluate(env["f"], "aab").tolist() == [[1.0, 1.0, 2 / 3]]


def test_lookup_by_a_bool_sop_indexes_0_and_1():
    """As the original (Python list indexing): False -> element 0, True -> element 1."""
    assert _ev('x = [10, 20][tokens == "a"];', "x", ["aba"]) == [[20, 10, 20]]
    assert _ev('x = "no"[tokens == "a"];', "x", ["ab"]) == [["o", "n"]]


# ---- resource limits (issue 16 item 5) ---------------------------------------------------

@pytest.mark.parametrize("src, limit", [
    ("x = 3; for i in range(40) { x = x * x; }", "MAX_INT_BITS"),
    ('x = "ab"; for i in range(40) { x = x + x; }', "MAX_COLLECTION"),
    ("x = [1]; for i in range(40) { x = x + x; }", "MAX_COLLECTION"),
    ("x = 2 ^ 1000000;", "MAX_INT_BITS"),
    ("r = range(10000000000000000000000000);", "MAX_COLLECTION"),
])
def test_growing_atom_operations_are_refused(src, limit):
    with pytest.raises(rasp.ir.RASPResourceError, match=limit):
        run_source(src)


def test_nested_comprehensions_are_bounded(monkeypatch):
    monkeypatch.setattr(rasp.limits, "MAX_ITERATIONS", 10_000)
    with pytest.raises(rasp.ir.RASPResourceError, match="MAX_ITERATIONS"):
        run_source("y = [[i for i in range(1000)] for j in range(1000)];")
    assert len(run_source("y = [[i for i in range(90)] for j in range(100)];")["y"]) == 100


def test_string_sop_doubling_is_refused_before_allocating():
    env = run_source("x = tokens; for i in range(40) { x = x + x; }")
    with pytest.raises(rasp.ir.RASPResourceError, match="MAX_COLLECTION"):
        rasp.evaluate(env["x"], "abc")


def test_int_literals_beyond_int64():
    assert run_source("x = 99999999999999999999;")["x"] == 99999999999999999999   # an atom
    for src in ("y = tokens_int + 99999999999999999999;", "y = full(99999999999999999999);",
                "y = select(tokens_int, 99999999999999999999, ==);"):
        with pytest.raises(RASPValueError, match="outside the 64-bit range"):
            run_source(src)
    with pytest.raises(RASPValueError, match="outside the 64-bit range"):
        rasp.evaluate(rasp.tokens_int, [[99999999999999999999, 1]])


# ---- issue 13 item 3: checked integer arithmetic on s-ops --------------------------------

def test_integer_sop_arithmetic_does_not_wrap():
    """tokens_int ^ 100000 on [1, 2, 3]: 2^100000 does not fit int64 (NumPy would wrap to a
    negative number); an overflow error, not a wrong value."""
    with pytest.raises(RASPValueError, match="integer overflow"):
        rasp.evaluate(rasp.tokens_int ^ 100000, [[1, 2, 3]])
    with pytest.raises(RASPValueError, match="integer overflow"):
        rasp.evaluate(rasp.tokens_int * (2 ** 62), [[1, 2, 3]])
    with pytest.raises(RASPValueError, match="integer overflow"):
        rasp.evaluate(rasp.tokens_int + (2 ** 63 - 2), [[1, 2, 3]])
    # exact where the result fits, even when the operands' bound does not
    big = 2 ** 62
    assert rasp.evaluate((rasp.tokens_int + big) - big, [[-1, 0, 1]]).tolist() == [[-1, 0, 1]]
    assert rasp.evaluate(rasp.tokens_int ^ 62, [[1, 2, -2]]).tolist() == [[1, 2 ** 62, 2 ** 62]]
    assert rasp.evaluate(rasp.tokens_int ^ 63, [[1, -2]]).tolist() == [[1, -(2 ** 63)]]


# ---- issue 15 item 4: the vectorised list path keeps the type rules ---------------------

@pytest.mark.parametrize("inputs, dtype, values", [
    ([[1, 2], [3, 4]], "int64", [[1, 2], [3, 4]]),
    ([[1, 2.5]], "float64", [[1.0, 2.5]]),
    ([[True, False]], "bool", [[True, False]]),
    (["ab", "cd"], "<U1", [["a", "b"], ["c", "d"]]),
    ([(1, 2), [3, 4]], "int64", [[1, 2], [3, 4]]),
])
def test_list_input_types(inputs, dtype, values):
    import numpy as np
    arr = rasp.to_batch(inputs)
    assert arr.dtype == np.dtype(dtype) and arr.tolist() == values


@pytest.mark.parametrize("inputs", [[[1, True]], [["a", 1]], [[1, "2"]], [[1.5, False]]])
def test_list_input_mixtures_are_refused(inputs):
    with pytest.raises(RASPTypeError, match="mixed value types"):
        rasp.to_batch(inputs)
