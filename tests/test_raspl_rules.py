"""The RASP-L check (Zhou et al. 2023 restrictions, docs/language.md §3).

Valid programs are RASP-L next-token programs in the style of the paper's listings (causal
selects, positions only compared or shifted by constants); invalid ones break exactly one rule.
"""

import numpy as np
import pytest

from rasp import (aggregate, causal_mode, evaluate, indices, kqv, length, select,
                  selector_width, tokens, tokens_int)
from rasp.ir import Span
from rasp.analyses.raspl import RULES, check, provably_causal


def rules_of(report):
    return sorted({v.rule for v in report.violations})


# ---- valid RASP-L programs ------------------------------------------------------------------

def shift_right(x, n, default=0):
    # RASP-L library: kqv(indices + n, indices, x, ==): key k is read by query k + n
    return kqv(indices + n, indices, x, "==", default=default)


def valid_programs():
    with causal_mode():
        running_and = kqv(tokens_int, tokens_int, tokens_int, "TRUE", reduction="min")
        prefix_len = selector_width(select(tokens, tokens, "TRUE"))
        hist = selector_width(select(tokens, tokens, "=="))
        prev = shift_right(tokens_int, 1)
        induction = kqv(prev, tokens_int, tokens_int, "==", default=0, reduction="max")
        # sort_unique: the smallest token greater than the current one (min aggregation)
        next_larger = kqv(tokens_int, tokens_int, tokens_int, ">", default=0, reduction="min")
        # the latest position holding the running maximum (keys = x, queries = running max)
        running_max = kqv(tokens_int, tokens_int, tokens_int, "TRUE", reduction="max")
        argmax = kqv(tokens_int, running_max, indices, "==", reduction="max")
        after_argmax = aggregate(select(indices, argmax + 1, "=="), tokens_int)
    return {
        "running_and": running_and, "prefix_length": prefix_len, "hist": hist,
        "induction": induction, "sort_unique_step": next_larger, "argmax": argmax,
        "after_argmax": after_argmax,
    }


@pytest.mark.parametrize("name", sorted(valid_programs()))
def test_valid_raspl_programs(name):
    report = check(valid_programs()[name])
    assert report.valid, report.format()
    assert report.violations == []


def test_shift_right_is_causal_and_correct():
    prog = shift_right(tokens_int, 1)
    assert check(prog).valid                 # provably causal by its comparison
    out = evaluate(prog, [[5, 6, 7, 8]])
    assert out.tolist() == [[0, 5, 6, 7]]


# ---- rule 1 -----------------------------------------------------------------------------

def test_non_causal_select_is_rule_1():
    prog = selector_width(select(tokens, tokens, "=="))
    report = check(prog)
    assert not report.valid
    assert rules_of(report) == [1]
    v = report.violations[0]
    assert v.rule_name == RULES[1] == "causal"
    assert "select(tokens, tokens, ==)" in v.operation


def test_whole_program_in_causal_mode_satisfies_rule_1():
    prog = selector_width(select(tokens, tokens, "=="))
    assert check(prog, causal=True).valid


@pytest.mark.parametrize("keys,queries,op,expected", [
    (indices, indices, "<=", True),
    (indices, indices, "<", True),
    (indices, indices, "==", True),
    (indices, indices, ">=", False),
    (indices, indices, "!=", False),
    (indices + 1, indices, "==", True),     # k + 1 == q
    (indices, indices + 1, "==", False),    # k == q + 1: the next position
    (indices, indices - 2, "<=", True),
    (indices, indices + 1, "<", True),      # k < q + 1  <=>  k <= q
    (indices, indices + 2, "<", False),
    (tokens, tokens, "==", False),
])
def test_provably_causal_matches_brute_force(keys, queries, op, expected):
    sel = select(keys, queries, op, causal=False)
    assert provably_causal(sel) is expected
    # independent truth: no selected key after its query, on a few lengths
    m = evaluate(sel, [list("abcdefg")])[0]
    q, k = np.nonzero(m)
    if expected:
        assert np.all(k <= q)


def test_not_of_future_is_causal():
    later = select(indices, indices, ">", causal=False)
    assert provably_causal(~later)
    assert check(aggregate(~later, tokens_int)).valid


# ---- rule 3 -----------------------------------------------------------------------------

def test_length_minus_indices_is_rule_3_and_4():
    with causal_mode():
        prog = aggregate(select(indices, length - indices - 1, "=="), tokens)
    report = check(prog)
    assert 3 in rules_of(report)
    assert 4 in rules_of(report)
    v3 = [v for v in report.violations if v.rule == 3]
    assert any("length - indices" in v.operation for v in v3)


@pytest.mark.parametrize("make", [
    lambda: indices * 2,
    lambda: indices % 2,
    lambda: 10 - indices,
    lambda: -indices,
    lambda: indices + tokens_int,
    lambda: indices / 2,
])
def test_index_arithmetic_is_rule_3(make):
    with causal_mode():
        prog = aggregate(select(tokens_int, make(), "=="), tokens_int)
    report = check(prog)
    assert rules_of(report) == [3], report.format()


@pytest.mark.parametrize("make", [
    lambda: indices + 1,
    lambda: indices - 3,
    lambda: 2 + indices,
    lambda: (indices + 1) - 1,
])
def test_constant_shifts_are_allowed(make):
    with causal_mode():
        prog = aggregate(select(indices, make(), "=="), tokens_int)
    assert 3 not in rules_of(check(prog))


def test_index_comparisons_are_allowed():
    with causal_mode():
        first = indices == 0
        prog = aggregate(select(tokens, tokens, "=="), first)
    assert check(prog).valid


def test_arithmetic_on_moved_positions_is_rule_3():
    with causal_mode():
        last_a = kqv(tokens, tokens, indices, "==", reduction="max")
        distance = indices - last_a
    report = check(distance)
    assert rules_of(report) == [3]


# ---- rule 4 -----------------------------------------------------------------------------

def test_builtin_length_is_rule_4():
    report = check(length + 0)
    assert rules_of(report) == [4]
    assert "length" in report.violations[0].operation


def test_prefix_length_is_not_rule_4():
    with causal_mode():
        n = selector_width(select(tokens, tokens, "TRUE"))
    assert check(n + 1).valid


# ---- rule 5 -----------------------------------------------------------------------------

def test_length_dependent_constant_is_rule_5():
    with causal_mode():
        prog = aggregate(select(indices, 20, "=="), tokens_int)
    assert rules_of(check(prog, max_seq_len=20)) == [5]
    assert check(prog, max_seq_len=64).valid


# ---- reports ------------------------------------------------------------------------------

def test_violation_carries_span_and_serialises():
    prog = indices * 2
    prog.span = Span("prog.rasp", 3, 7)
    report = check(prog)
    v = report.violations[0]
    assert v.location == "3:7"
    d = report.to_dict()
    assert d["valid"] is False
    assert d["violations"][0]["rule"] == 3
    assert d["violations"][0]["span"] == "3:7"
    assert "prog.rasp:3:7" in report.format()


def test_rule_2_undecided_without_vocab():
    with causal_mode():
        prog = selector_width(select(tokens, tokens, "=="))
    report = check(prog)
    assert report.valid
    assert any("rule 2" in u for u in report.undecided)


def test_bad_input_is_a_clear_error():
    from rasp.ir import RASPError
    with pytest.raises(RASPError):
        check("tokens")


def test_arithmetic_on_counts_is_rule_3():
    # parity's natural program: a count of positions modulo 2 (Zhou et al.: no RASP-L program)
    with causal_mode():
        ones = selector_width(select(tokens_int, 1, "=="))
    assert rules_of(check(ones % 2)) == [3]
    assert check(ones + 1).valid            # a shifted count is fine
    assert check(ones == 3).valid           # so is a comparison


# ---- rule 2 (value-set inference) -----------------------------------------------------------

def test_int8_values_rule_2():
    big = tokens_int * 100
    report = check(big, vocab={"1", "2", "3"}, max_seq_len=8)
    assert rules_of(report) == [2]
    assert "200" in report.violations[0].message
    assert check(tokens_int + 1, vocab={"0", "1", "9"}, max_seq_len=8).valid


def test_counts_beyond_int8_are_rule_2():
    with causal_mode():
        n = selector_width(select(tokens, tokens, "TRUE"))
    assert check(n, vocab={"a"}, max_seq_len=127).valid
    assert rules_of(check(n, vocab={"a"}, max_seq_len=128)) == [2]


# ---- the task catalogue's reference programs agree with Zhou et al. 2023 ---------------------

# Zhou et al. 2023 (and docs/tasks): tasks with a short RASP-L program vs tasks without one.
ZHOU_HAS_RASPL = {"count", "mode", "copy_unique", "sort_unique", "addition_reverse_hints",
                  "addition_forward_hints", "parity_scratchpad", "mode_scratchpad",
                  "boolean_and"}
ZHOU_NO_RASPL = {"copy_repeat", "addition", "parity", "reverse"}


def _task_program(name):
    import rasp
    import tasks
    from pathlib import Path
    task = tasks.get_task(name)
    path = Path(task.reference_file)
    if not path.is_absolute():
        path = Path(tasks.__file__).parent / "programs" / path
    env = rasp.run_file(path, causal=task.causal)
    return env[task.reference_name]


@pytest.mark.parametrize("name", sorted(ZHOU_HAS_RASPL))
def test_reference_raspl_programs_are_valid(name):
    report = check(_task_program(name))
    assert report.valid, report.format()


@pytest.mark.parametrize("name", sorted(ZHOU_NO_RASPL))
def test_natural_programs_without_raspl_are_invalid(name):
    report = check(_task_program(name))
    assert not report.valid
