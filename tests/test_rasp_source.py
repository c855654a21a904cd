"""rasp.source.program_to_source: a program built with the Python API, printed as `.rasp`
source and run back through the statement interpreter, computes its task's ground truth.

Each program is paired with a ground truth written directly in NumPy (independent of the IR):
the printed program must give it on every input of a small exhaustive set, and so must the
program it was printed from (so a wrong ground truth cannot hide a wrong printer).
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

import rasp
from rasp.ir import (aggregate, indices, kqv, length, numerical, select, selector_width,
                     tokens_int)
from rasp.source import program_to_source


def _prefix_count_of_ones():
    prog = selector_width(select(tokens_int, 1, "==", causal=True)
                          & select(indices, indices, "<=", causal=True))
    return prog, lambda x: np.cumsum(x == 1, axis=1)


def _running_max():
    prog = kqv(indices, indices, tokens_int, "<=", 0, "max")
    return prog, lambda x: np.maximum.accumulate(x, axis=1)


def _previous_token():
    prog = aggregate(select(indices, indices - 1, "==", causal=True), tokens_int, 0, "max")
    return prog, lambda x: np.concatenate([np.zeros_like(x[:, :1]), x[:, :-1]], axis=1)


def _ternary_of_comparisons():
    big = tokens_int > 1
    prog = rasp.ir.SequenceMap(rasp.ir.Elementwise("ternary"), [big, tokens_int + 1, indices])
    return prog, lambda x: np.where(x > 1, x + 1, np.arange(x.shape[1])[None, :])


PROGRAMS = {"prefix_count_of_ones": _prefix_count_of_ones, "running_max": _running_max,
            "previous_token": _previous_token, "ternary": _ternary_of_comparisons}


def test_each_operation_is_one_statement():
    prog, _ = _previous_token()
    lines = program_to_source(prog, "prog").splitlines()
    assert lines[-1].startswith("prog = ")
    assert lines[0] == "#!causal"             # its selects are causal: the file says so
    assert all(line.endswith(";") for line in lines[1:])


def _reverse():
    prog = aggregate(select(indices, length - indices - 1, "=="), tokens_int)
    return prog, lambda x: x[:, ::-1]


def _histogram():
    prog = selector_width(select(tokens_int, tokens_int, "=="))
    return prog, lambda x: (x[:, :, None] == x[:, None, :]).sum(axis=2)


def _prefix_mean():
    prog = numerical(aggregate(select(indices, indices, "<="), numerical(tokens_int), 0, "mean"))
    return prog, lambda x: np.cumsum(x, axis=1) / np.arange(1, x.shape[1] + 1)[None, :]


NONCAUSAL = {"reverse": _reverse, "histogram": _histogram, "prefix_mean": _prefix_mean}


CASES = [(name, True) for name in sorted(PROGRAMS)] + [(name, False) for name in sorted(NONCAUSAL)]


@pytest.mark.parametrize("name,causal", CASES)
def test_printed_program_runs_back_to_the_ground_truth(name, causal):
    # the non-causal ones are outside the search's causal grammar (``length``, a
    # bidirectional select, a numerical untruncated mean): run back without causal masking
    prog, truth = (PROGRAMS if causal else NONCAUSAL)[name]()
    text = program_to_source(prog, "prog")     # it rebinds tokens itself (runs as printed)
    env = rasp.run_source(text, causal=causal)
    for n in (1, 3, 5) if causal else (1, 2, 4):
        inputs = np.array(list(itertools.product(range(3), repeat=n)))
        want = truth(inputs)
        got_printed = np.asarray(rasp.evaluate(env["prog"], inputs.tolist(), causal=causal))
        got_original = np.asarray(rasp.evaluate(prog, inputs.tolist(), causal=causal))
        assert np.allclose(got_original, want), f"{name}: the test's own program is wrong"
        assert np.allclose(got_printed, want), f"{name} printed as:\n{text}"


def _membership_by_symbols():
    """A next-token program over a task's values (a = 0, b = 1, no = 2, yes = 3, BOS = -1,
    SEP = -2, EOS = -3): at SEP, ``yes`` iff some earlier token is b; EOS after the answer."""
    from rasp.ir import Full, SequenceMap, Elementwise, causal_mode, tokens_asis
    with causal_mode():
        seen_b = kqv(tokens_asis, tokens_asis, tokens_asis == 1, ">", 0, "max")
    answer = SequenceMap(Elementwise("ternary"), [seen_b, Full(3), Full(2)])
    prog = SequenceMap(Elementwise("ternary"), [tokens_asis > 1, Full(-3), answer])
    return prog.named("program"), selector_width(select(tokens_asis == 1, 1, "==",
                                                          causal=True)) + 1


SYMBOLS = {0: "a", 1: "b", 2: "no", 3: "yes", -1: "BOS", -2: "SEP", -3: "EOS", -4: "PAD"}


def test_token_constants_print_as_the_task_s_symbols_and_the_program_runs_as_printed():
    """Constants that stand for tokens (compared with tokens, chosen as the output) are the
    task's symbols bound as atoms; an offset (``+ 1``) and a count's query constant stay
    numbers; the printed text computes what the program computes."""
    prog, counted = _membership_by_symbols()
    text = program_to_source(prog, symbols=SYMBOLS)
    lines = text.splitlines()
    assert lines[:2] == ["#!causal", "tokens = tokens_asis;"]
    assert dict(re.findall(r"(\w+) = (-?\d+);", lines[2])) == {
        "b": "1", "no": "2", "yes": "3", "EOS": "-3"}
    assert "tokens == b" in text and "yes if" in text and "else no" in text and \
        "EOS if" in text
    env = rasp.run_source(text, causal=True)
    # a, b words behind BOS and before SEP; the truth: "yes" (3) iff b occurs, written here
    for w in itertools.product([0, 1], repeat=4):
        row = [-1, *w, -2]
        got = rasp.evaluate(env["program"], [row], causal=True)[0].tolist()
        assert got == rasp.evaluate(prog, [row], causal=True)[0].tolist()
        assert got[-1] == (3 if 1 in w else 2)
    counted_text = program_to_source(counted, symbols=SYMBOLS)
    assert "select(v1, 1, ==)" in counted_text and " + 1;" in counted_text \
        and "tokens == b" in counted_text


def test_a_symbol_that_is_no_dialect_name_stays_a_number_named_in_a_comment():
    from rasp.ir import Full, SequenceMap, Elementwise, tokens_asis
    prog = SequenceMap(Elementwise("ternary"), [tokens_asis == 1, Full(2), Full(3)])
    text = program_to_source(prog, symbols={1: "b", 2: "{a,EOS}", 3: "{b}", 4: "length"})
    assert "program = 2 if v1 else 3;  # 2 = '{a,EOS}', 3 = '{b}'" in text
    env = rasp.run_source(text, causal=True)
    assert rasp.evaluate(env["program"], [[1, 0, 1]], causal=True)[0].tolist() == [2, 3, 2]


def test_string_constants_print_in_double_quotes():
    """A program over string tokens (``rasp search --examples`` with string tokens) prints its
    constants as the dialect's strings, not Python's ``'a'``."""
    from rasp.ir import tokens_asis
    text = program_to_source((tokens_asis == "a").named("program"))
    assert 'tokens == "a"' in text
    env = rasp.run_source(text, causal=True)
    assert rasp.evaluate(env["program"], [["a", "b"]], causal=True)[0].tolist() == [True, False]


def test_a_task_input_becomes_the_repl_s_running_example_and_the_repl_runs_the_program():
    """The REPL checks each statement on its running example ("hello" by default), on which a
    program over numbers fails: the printed program sets one of its task's inputs, in symbols,
    and the REPL front end (piped mode, the file loaded as `rasp repl FILE` does) accepts every
    statement and gives the value the program gives."""
    import io
    from rasp.repl.repl import Repl
    prog, _ = _membership_by_symbols()
    row = [-1, 0, 1, 0, -2]
    text = program_to_source(prog, symbols=SYMBOLS, example=row)
    assert "set example [BOS, a, b, a, SEP]" in text.splitlines()
    out = io.StringIO()
    repl = Repl(session=rasp.Session(causal=True), stdout=out, history_file=False)
    assert repl.run_lines(text.splitlines() + ["program([BOS, b, SEP]);"]) == 0, out.getvalue()
    # at SEP the answer: yes (3), since b occurs; before it the program's own values
    assert "=  [2, 2, 3] (ints)" in out.getvalue()
    assert rasp.evaluate(prog, [[-1, 1, -2]], causal=True)[0].tolist() == [2, 2, 3]


def test_a_program_mixing_causal_and_bidirectional_selects_is_refused():
    prog = selector_width(select(indices, indices, "<=", causal=True)
                          & select(indices, indices, "<=", causal=False))
    with pytest.raises(ValueError, match="mixes causal and bidirectional"):
        program_to_source(prog)
