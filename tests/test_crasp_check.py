"""C-RASP checker (rasp.analyses.crasp): hand-written programs that are and are not C-RASP (Huang et al.
2025, arXiv 2410.02140, §3), with the offending operation named at its line:column."""

import numpy as np
import pytest

import rasp
from rasp.analyses.crasp import check_crasp

MAJORITY = """tokens = tokens_int;
ones = selector_width(select(tokens, 1, ==));
zeros = selector_width(select(tokens, 0, ==));
answer = (1 if ones > zeros else 0) if tokens == -2 else -3;
"""

INDUCTION = """load "rasp_l";
tokens = tokens_int;
found = kqv(shift_right(tokens, 1, -9), tokens, tokens, ==, -3, "mean");
"""

PERIODIC = """tokens = tokens_int;
third = indices % 3 == 0;
c = selector_width(select(tokens, 1, ==) and select(third, 1, ==));
res = c > 2;
"""

LOCAL = """tokens = tokens_int;
prev_is_one = selector_width(select(indices, indices - 1, ==) and select(tokens, 1, ==));
res = prev_is_one == 1;
"""

PRODUCT = """tokens = tokens_int;
a = selector_width(select(tokens, 1, ==));
b = selector_width(select(tokens, 0, ==));
res = a * b > 3;
"""

COUNT_KEYS = """tokens = tokens_int;
a = selector_width(select(tokens, 1, ==));
res = selector_width(select(a, a, ==));
"""


def _env(src):
    return rasp.run_source(src, causal=True)


def test_majority_is_crasp_in_both_variants_and_computes_majority():
    env = _env(MAJORITY)
    for variant in ("crasp", "crasp_pl"):
        rep = check_crasp(env["answer"], variant)
        assert rep.valid, rep.format()
    xs = np.array([[-1, 1, 0, 1, 1, 0, -2]])
    assert rasp.evaluate(env["answer"], xs, causal=True)[0, -1] == 1


def test_value_aggregation_is_named_with_line_and_column():
    rep = check_crasp(_env(INDUCTION)["found"])
    assert not rep.valid
    agg = [v for v in rep.violations if v.rule == 1]
    # the user's kqv at line 3 (the library's shift_right is an aggregate too, at its own
    # line in the standard library file)
    mine = [v for v in agg if v.location == "3:9"]
    assert mine and "kqv" in mine[0].span.text, rep.format()


def test_periodic_predicate_only_in_the_periodic_local_variant():
    env = _env(PERIODIC)
    assert check_crasp(env["res"], "crasp_pl").valid
    rep = check_crasp(env["res"], "crasp")
    assert not rep.valid
    v = rep.violations[0]
    assert v.rule == 4 and "periodic" in v.message and v.location == "2:9", rep.format()


def test_local_selector_only_in_the_periodic_local_variant():
    env = _env(LOCAL)
    assert check_crasp(env["res"], "crasp_pl").valid
    rep = check_crasp(env["res"], "crasp")
    assert not rep.valid and rep.violations[0].rule == 2
    assert "local" in rep.violations[0].message


def test_product_of_counts_and_selection_by_counts_are_not_crasp():
    rep = check_crasp(_env(PRODUCT)["res"], "crasp_pl")
    assert not rep.valid and rep.violations[0].rule == 5
    assert rep.violations[0].location.startswith("4:"), rep.format()
    rep = check_crasp(_env(COUNT_KEYS)["res"], "crasp_pl")
    assert not rep.valid and rep.violations[0].rule == 2


def test_length_and_bad_variant():
    env = _env("tokens = tokens_int;\nx = length - 1;\n")
    rep = check_crasp(env["x"])
    assert not rep.valid and rep.violations[0].rule == 6
    with pytest.raises(ValueError):
        check_crasp(env["x"], "crasp_x")
