"""Differential fuzz test of the compiler (issue 16 item 6): random programs over the whole op
vocabulary, compiled and interpreted on random inputs, against the independent plain-Python
evaluator of ``tests/compiler_fuzz.py``. Fixed seed, quick profile; the long profile is
``python -m bench.bench_compiler_fuzz`` (counts in docs/compiler.md)."""

from compiler_fuzz import (causal_programs, none_programs, reference, run_exhaustive_profile,
                           run_fuzz)

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


def _clean(stats: dict, min_compiled: int) -> None:
    assert stats["mismatches"] == 0, stats["examples"]       # no model wrong on any input
    assert stats["gate_refusals"] == 0, stats["examples"]    # no miscompilation refused
    assert stats["internal_errors"] == 0, stats["examples"]  # no valid program refused so
    assert stats["compiled"] >= min_compiled, stats


def test_none_defaults_profile_every_input_of_every_length():
    """Issue 38: aggregates with a None default (means, kqv, max / min, annotated or not) and
    their consumers (arithmetic, comparisons, round, callables, selects, means), each compiled
    model compared with the interpreter on all 1,092 inputs of length 1..6."""
    _clean(run_exhaustive_profile(none_programs(), 12, seed_value=38, causal=False), 8)


def test_causal_profile_every_input_of_every_length():
    """Issue 38: causal programs (incl. ones raising on every full-length input) compared with
    the interpreter on all 1,092 inputs of length 1..6."""
    _clean(run_exhaustive_profile(causal_programs(), 10, seed_value=38, causal=True), 4)
