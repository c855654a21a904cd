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
from rasp.runtime import run_source


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
    size: 2 layers and 3,829 parameters (vocab abc, max_seq_len 5) as in a fresh process."""
    import compiler
    code = ("import compiler, rasp\n"
            "from rasp import *\n"
            "{pre}"
            "r = aggregate(select(indices, length - indices - 1, '=='), tokens)\n"
            "cm = compiler.compile_program(r, list('abc'), 5)\n"
            "print(cm.stats['layers'], cm.stats['params'])\n")
    fresh = subprocess.run([sys.executable, "-c", code.format(pre="")], capture_output=True,
                           text=True, check=True).stdout.split()
    assert fresh == ["2", "3829"]
    rasp.numerical(rasp.indices)
    run_source("x = numerical(indices); y = numerical(tokens); z = categorical(length);")
    cm = compiler.compile_program(_reverse(), list("abc"), 5)
    assert [str(cm.stats["layers"]), str(cm.stats["params"])] == fresh


def test_raspl_rule4_hint_names_a_valid_program():
    """The hint's suggested program must run (the dialect writes TRUE as a string)."""
    from rasp.raspl import check
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
