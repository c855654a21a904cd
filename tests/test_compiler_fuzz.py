"""Differential fuzz test of the compiler (issue 16 item 6): random programs over the whole op
vocabulary, compiled and interpreted on random inputs, against the independent plain-Python
evaluator of ``tests/compiler_fuzz.py``. Fixed seed, quick profile; the long profile is
``python -m bench.bench_compiler_fuzz`` (counts in docs/compiler.md)."""

from compiler_fuzz import reference, run_fuzz

import rasp
from rasp import aggregate, indices, length, select, tokens


def test_reference_evaluator_on_known_values():
    """The reference itself against values worked out by hand."""
    rev = aggregate(select(indices, length - indices - 1, "=="), tokens)
    assert reference(rev, list("abc")) == ["c", "b", "a"]
    frac = aggregate(select(indices, indices, "<="), tokens == "a")
    assert reference(frac, list("aba")) == [1, 0.5, 2 / 3]
    assert reference(aggregate(select(tokens, "z", "=="), tokens), list("ab")) == [0, 0]


def test_compiled_models_equal_the_reference_on_random_programs():
    stats = run_fuzz(max_examples=40, seed_value=16)
    assert stats["compiled_mismatches"] == 0, stats["examples"]
    assert stats["interpreter_mismatches"] == 0, stats["examples"]
    assert stats["gate_refusals"] == 0, stats["examples"]   # no miscompilation refused
    assert stats["compiled"] >= 20, stats           # most programs compile
