"""Measures of known programs: hand-counted lengths, and layer / head counts of the original RASP
analyser (Weiss et al. 2021; tech-srl/RASP ``analyse.py``, ``paper_examples.rasp``).

Programs are written with the Python API as they appear in the original ``paper_examples.rasp``
and ``rasplib.rasp``.
"""

import numpy as np
import pytest

from rasp import (aggregate, evaluate, indices, length, select, selector_width, tokens,
                  tokens_int)
from rasp.ir import Full, Map, SequenceMap
from rasp.ir import Elementwise
from rasp.analyses.measures import cse, depths, format_layer_table, layer_table, measure


def indicator(x):
    return Map(Elementwise("indicator"), x)


def ternary(c, a, b):
    return SequenceMap(Elementwise("ternary"), (c, a, b))


def lib_selector_width(sel):
    """rasplib.rasp's selector_width: two aggregates (two heads) in the original library."""
    at0 = select(indices, 0, "==")
    s_and0 = sel & at0
    s_or0 = sel | at0
    inverted = aggregate(s_or0, indicator(indices == 0))
    except0 = (1 / inverted) - 1
    valat0 = aggregate(s_and0, 1, 0)
    return Map(Elementwise("round"), except0 + valat0)


def make_sort(seq, key, sw=selector_width):
    earlier = select(key, key, "<") | (select(key, key, "==") & select(indices, indices, "<"))
    target = sw(earlier)
    return aggregate(select(target, indices, "=="), seq)


def make_dyck(pairs, sw=selector_width):
    openers = [p[0] for p in pairs]
    closers = [p[1] for p in pairs]
    opens = indicator(Map(Elementwise("in", container=openers), tokens))
    closes = indicator(Map(Elementwise("in", container=closers), tokens))
    up_to_self = select(indices, indices, "<=")
    n_opens = (indices + 1) * aggregate(up_to_self, opens)
    n_closes = (indices + 1) * aggregate(up_to_self, closes)
    depth = n_opens - n_closes
    delay_closer = depth + closes
    depth_index = sw(select(delay_closer, delay_closer, "==") & up_to_self)
    open_for_close = (select(opens, True, "==") & select(delay_closer, delay_closer, "==")
                      & select(depth_index, depth_index - 1, "=="))
    matched_opener = aggregate(open_for_close, tokens, "-")
    opener_matches = Map(Elementwise("in", container=list(pairs)), matched_opener + tokens)
    mismatch = closes & ~opener_matches
    had_problem = aggregate(up_to_self, indicator(mismatch | (depth < 0))) > 0
    return ternary(had_problem, Full("F"), ternary(depth == 0, Full("T"), Full("P")))


def test_hist_one_layer_one_head_length_two():
    hist = selector_width(select(tokens, tokens, "=="))
    m = measure(hist)
    assert (m.layers, m.heads_per_layer, m.max_heads) == (1, [1], 1)
    assert m.length == 2          # one select, one selector width
    assert (m.attention_ops, m.mlp_ops) == (1, 0)


def test_reverse_two_layers():
    flip = select(indices, length - indices - 1, "==")
    reverse = aggregate(flip, tokens)
    m = measure(reverse)
    # paper Table: reverse needs 2 layers (length, then flip + aggregate), 1 head each
    assert m.layers == 2
    assert m.heads_per_layer == [1, 1]
    # length (select + selector width) + sub + sub-constant + select + aggregate
    assert m.length == 6
    assert m.uses_length
    assert (m.attention_ops, m.mlp_ops, m.selects, m.aggregates) == (2, 2, 2, 1)


def test_sort_two_layers():
    m = measure(make_sort(tokens, tokens))
    assert m.layers == 2
    assert m.heads_per_layer == [1, 1]
    # 3 selects + and + or + selector width, then select + aggregate
    assert m.length == 8
    assert m.selector_combinations == 2


def test_sort_with_library_selector_width_has_two_heads_in_layer_one():
    # the original library's selector width is two aggregates on two different selects
    m = measure(make_sort(tokens, tokens, sw=lib_selector_width))
    assert m.layers == 2
    assert m.heads_per_layer == [2, 1]


def test_dyck2_matches_original_analyser():
    # paper_examples.rasp: "right now this function creates dyck2 with 4 layers and 2 heads,
    # as follows: 1/2/1/1" (with the library selector width)
    m = measure(make_dyck(["()", "{}"], sw=lib_selector_width))
    assert m.layers == 4
    assert m.heads_per_layer == [1, 2, 1, 1]
    # our selector width is a primitive: one head
    m2 = measure(make_dyck(["()", "{}"]))
    assert m2.heads_per_layer == [1, 1, 1, 1]


def test_dyck1_two_layers():
    up_to_self = select(indices, indices, "<=")
    n_opens = (indices + 1) * aggregate(up_to_self, indicator(tokens == "("))
    n_closes = (indices + 1) * aggregate(up_to_self, indicator(tokens == ")"))
    balance = n_opens - n_closes
    prev_imbalances = aggregate(up_to_self, indicator(balance < 0))
    out = ternary(prev_imbalances > 0, Full("F"),
                  ternary(balance == 0, Full("T"), Full("P")))
    m = measure(out)
    assert m.layers == 2
    assert m.heads_per_layer == [1, 1]   # both layers attend with up_to_self


def test_most_freq_three_layers_two_heads():
    # paper_examples.rasp sort_by_most_freq, with the BOS-free primitive selector width
    hist = selector_width(select(tokens, tokens, "=="))
    has_earlier = selector_width(select(tokens, tokens, "==") & select(indices, indices, "<")) > 0
    filtered_freq = hist - indicator(has_earlier) * 300
    filtered_tokens = ternary(has_earlier, Full("§"), tokens)
    out = make_sort(filtered_tokens, -filtered_freq)
    m = measure(out)
    assert m.layers == 3
    assert m.heads_per_layer == [2, 1, 1]
    assert m.max_heads == 2


def test_aggregate_waits_for_its_values():
    # an aggregate is one layer deeper than its values, even with a shallow select
    first = aggregate(select(tokens, tokens, "=="), indices)       # layer 1
    second = aggregate(select(tokens, tokens, "=="), first)        # same select, layer 2
    m = measure(second)
    assert m.layers == 2
    assert m.heads_per_layer == [1, 1]
    assert m.length == 3          # the select is shared after CSE


def test_cse_merges_repeated_subexpressions():
    a = selector_width(select(tokens, tokens, "=="))
    b = selector_width(select(tokens, tokens, "=="))
    m = measure(a + b)
    assert m.length == 3          # one select, one selector width, one sequence map
    assert m.heads_per_layer == [1]


def test_elementwise_only_program_has_no_layers():
    m = measure((tokens_int + 1) * 2)
    assert (m.layers, m.heads_per_layer, m.max_heads, m.length, m.mlp_ops) == (0, [], 0, 2, 2)


def test_constants_count_once():
    sel = select(indices, 0, "==")
    prog = aggregate(sel, tokens) + aggregate(select(indices, 0, "=="), tokens)
    m = measure(prog)
    assert m.constants == 1
    assert m.length == 4          # full(0), select, aggregate, sequence map


@pytest.mark.parametrize("seed", range(3))
def test_cse_preserves_values(seed):
    rng = np.random.default_rng(seed)
    prog = make_dyck(["()", "{}"])
    data = ["".join(rng.choice(list("(){}"), size=8)) for _ in range(20)]
    np.testing.assert_array_equal(evaluate(prog, data), evaluate(cse(prog), data))
    s = make_sort(tokens, tokens)
    words = ["".join(rng.choice(list("abcde"), size=6)) for _ in range(20)]
    np.testing.assert_array_equal(evaluate(s, words), evaluate(cse(s), words))


def test_cse_does_not_modify_input():
    x = select(tokens, tokens, "==")
    y = select(tokens, tokens, "==")
    prog = aggregate(x, indices) + aggregate(y, indices)
    before = [(c.id) for c in prog.children]
    cse(prog)
    assert [(c.id) for c in prog.children] == before
    assert prog.inputs[1].selector is y


def test_layer_table_lists_heads_and_mlps():
    flip = select(indices, length - indices - 1, "==")
    reverse = aggregate(flip, tokens).named("reverse")
    table = layer_table(reverse)
    assert [t.index for t in table] == [0, 1, 2]
    assert [len(t.heads) for t in table] == [0, 1, 1]
    assert table[2].heads[0].outputs == ["reverse"]
    assert len(table[1].mlps) == 2            # length - indices, ... - 1
    text = format_layer_table(reverse)
    assert "layer 2" in text and "reverse" in text
    d = depths(reverse)
    assert max(d.values()) == 2
