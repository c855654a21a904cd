"""Task catalogue: registry, vocabularies, generators vs independent ground truths, lengths,
reproducibility and bad input (tasks.md parts A and B)."""

from fractions import Fraction

import numpy as np
import pytest

import tasks
from tasks import sequence as seq

PART_A = ["count", "mode", "copy_unique", "copy_repeat", "sort_unique", "addition",
          "addition_reverse_hints", "addition_forward_hints", "parity", "parity_scratchpad",
          "mode_scratchpad", "boolean_and", "reverse", "sum_mod10"]
PART_B = ["length", "reverse_seq", "hist", "double_hist", "sort", "sort_unique_seq",
          "sort_freq", "most_freq", "frac_prevs", "pair_balance", "dyck1", "dyck2",
          "shuffle_dyck2", "shift_by", "detect_pattern", "count_less_freq", "count_token",
          "nary_sequencemap"]


def test_registry_lists_every_task_of_the_spec():
    assert tasks.GENERALIZATION_TASKS == PART_A
    assert sorted(tasks.SEQUENCE_PROGRAMS) == sorted(PART_B)
    assert tasks.list_tasks() == PART_A + tasks.SEQUENCE_PROGRAMS + tasks.HUANG_TASKS
    for name in PART_A + PART_B:
        t = tasks.get_task(name)
        assert t is tasks.TASKS[name] and t.name == name
        assert t.reference_path is not None and t.reference_path.exists()
        assert t.paper or t.kind == "sequence"


def test_unknown_task_error_lists_known_tasks():
    with pytest.raises(tasks.UnknownTaskError) as e:
        tasks.get_task("sortt")
    assert isinstance(e.value, KeyError)
    msg = str(e.value)
    assert "sortt" in msg and "copy_unique" in msg and "dyck2" in msg


def test_parametrised_tasks():
    assert tasks.get_task("shift_by(3)").params == {"k": 3}
    assert tasks.get_task("shift_by_2").name == "shift_by(2)"
    assert tasks.get_task("count_token(c)").params == {"t": "c"}
    with pytest.raises(tasks.UnknownTaskError):
        tasks.get_task("count_token(z)")
    with pytest.raises(tasks.UnknownTaskError):
        tasks.get_task("shift_by(0)")


def test_paper_outcomes_carry_the_table_text():
    assert "3 attention ops" in tasks.get_task("count").paper["zhou"]
    assert tasks.get_task("copy_unique").paper["kazemnejad"] == "copy task: NoPE best"
    assert tasks.get_task("sort_unique").paper["kazemnejad"] == "sort: NoPE/T5 best"
    assert "fails" in tasks.get_task("copy_repeat").paper["zhou"]
    for name in PART_A:
        p = tasks.get_task(name).paper
        assert set(p) >= {"zhou", "kazemnejad", "sources"}


def test_default_train_lengths():
    # Kazemnejad et al.: L = 20, L = 8 for the math tasks
    assert tasks.get_task("copy_unique").default_train_max_len == 20
    assert tasks.get_task("addition").default_train_max_len == 8
    assert tasks.get_task("parity").default_train_max_len == 8


# --------------------------------------------------------------------------------------------
# vocabularies
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", PART_A)
def test_part_a_vocab_specials_and_values(name):
    v = tasks.get_task(name).vocab
    assert v.tokens[v.bos] == "BOS" and v.tokens[v.eos] == "EOS" and v.tokens[v.pad] == "PAD"
    assert v.values[v.bos] == -1 and v.values[v.eos] == -3 and v.values[v.pad] == -4
    if name == "count":
        assert v.sep is None
    else:
        assert v.values[v.sep] == -2
    assert all(-128 <= x <= 127 for x in v.values)          # int8 (RASP-L rule 2)
    names = v.tokens[:5]
    assert v.decode(v.encode(names)) == names
    assert len(v) == len(v.tokens)
    for i, x in enumerate(v.values):
        assert v.id_of_value(x) == i
        if x >= 0 and not v.tokens[i].startswith("h") and v.tokens[i].isdigit():
            assert i == x                                   # content: id == value


def test_vocab_errors():
    v = tasks.get_task("mode").vocab
    with pytest.raises(KeyError, match="'z'"):
        v.encode(["z"])
    with pytest.raises(ValueError):
        v.decode([999])
    with pytest.raises(ValueError, match="77"):
        v.id_of_value(77)


# --------------------------------------------------------------------------------------------
# generators vs independent truths
# --------------------------------------------------------------------------------------------

def _content(t, prompt):
    vals = t.program_tokens(prompt)
    return [x for x in vals if x >= 0]


def _samples(name, lengths=range(1, 13), k=6, seed=0):
    t = tasks.get_task(name)
    rng = np.random.default_rng(seed)
    for n in lengths:
        if t.length_ok(n):
            for _ in range(k):
                yield t, n, t.sample(n, rng)


@pytest.mark.parametrize("name", PART_A)
def test_part_a_frame_and_ground_truth(name):
    for t, n, (p, a) in _samples(name):
        assert p[0] == t.vocab.bos
        assert a[-1] == t.vocab.eos and t.vocab.eos not in a[:-1]
        if t.vocab.sep is not None:
            assert p[-1] == t.vocab.sep and p.count(t.vocab.sep) == 1
        assert t.ground_truth(p) == a
        assert len(p) + len(a) <= t.sequence_length(n)
        assert set(t.program_tokens(p + a)) <= t.program_vocab(n)


def _number(digits):
    return int("".join(str(d) for d in digits))


def test_count_semantics():
    for t, n, (p, a) in _samples("count", range(1, 40), 3):
        _, lo, hi = t.program_tokens(p)
        assert hi - lo + 1 == n                             # the length definition
        assert t.program_tokens(a) == list(range(lo, hi + 1)) + [-3]


def test_mode_semantics():
    for t, n, (p, a) in _samples("mode", range(1, 30), 4):
        xs = _content(t, p)
        assert len(xs) == n and set(xs) <= set(range(5))
        counts = np.bincount(xs, minlength=5)
        assert (counts == counts.max()).sum() == 1          # unique mode
        assert t.program_tokens(a) == [int(counts.argmax()), -3]
    for t, n, (p, a) in _samples("mode_scratchpad", range(1, 30), 4):
        xs = _content(t, p)
        counts = np.bincount(xs, minlength=5)
        assert t.program_tokens(a) == counts.tolist() + [int(counts.argmax()), -3]


def test_copy_sort_reverse_semantics():
    for t, n, (p, a) in _samples("copy_unique", range(1, 30), 3):
        xs = _content(t, p)
        assert len(xs) == n == len(set(xs))
        assert t.program_tokens(a)[:-1] == xs
    for t, n, (p, a) in _samples("sort_unique", range(1, 30), 3):
        xs = _content(t, p)
        assert len(set(xs)) == n and t.program_tokens(a)[:-1] == sorted(xs)
    for t, n, (p, a) in _samples("copy_repeat", range(1, 30), 3):
        xs = _content(t, p)
        assert set(xs) <= {0, 1} and t.program_tokens(a)[:-1] == xs
    for t, n, (p, a) in _samples("reverse", range(1, 30), 3):
        xs = _content(t, p)
        assert len(xs) == n and t.program_tokens(a)[:-1] == xs[::-1]


def test_bit_tasks_semantics():
    for t, n, (p, a) in _samples("parity", range(1, 30), 3):
        xs = _content(t, p)
        assert len(xs) == n and t.program_tokens(a) == [sum(xs) % 2, -3]
    for t, n, (p, a) in _samples("boolean_and", range(1, 30), 3):
        xs = _content(t, p)
        assert t.program_tokens(a)[:-1] == [int(all(xs[:k + 1])) for k in range(n)]
    for t, n, (p, a) in _samples("sum_mod10", range(1, 30), 3):
        xs = _content(t, p)
        assert t.program_tokens(a) == [sum(xs) % 10, -3]


def test_parity_scratchpad_semantics():
    t = tasks.get_task("parity_scratchpad")
    # a hand-made example: bits 1 0 1 1 under hints h0 h3 h4 h9
    p = t.vocab.encode(["BOS", "h0", "1", "h3", "0", "h4", "1", "h9", "1", "SEP"])
    assert t.vocab.decode(t.ground_truth(p)) == ["h0", "1", "h4", "0", "h9", "1", "1", "EOS"]
    for t, n, (p, a) in _samples("parity_scratchpad", range(1, 30), 3):
        body = _content(t, p)
        hints, bits = body[0::2], body[1::2]
        assert len(bits) == n and hints == sorted(set(hints))
        assert t.program_tokens(a)[-2:] == [sum(bits) % 2, -3]


def test_addition_semantics():
    t = tasks.get_task("addition")
    assert t.vocab.decode(t.ground_truth(t.vocab.encode(
        ["BOS", "9", "5", "+", "7", "SEP"]))) == ["1", "0", "2", "EOS"]
    for t, n, (p, a) in _samples("addition", range(1, 25), 4):
        vals = t.program_tokens(p)
        k = vals.index(-5)
        x, y = vals[1:k], vals[k + 1:-1]
        assert max(len(x), len(y)) == n                     # the length definition
        assert all(d[0] != 0 or len(d) == 1 for d in (x, y))
        assert _number(t.program_tokens(a)[:-1]) == _number(x) + _number(y)


@pytest.mark.parametrize("name", ["addition_reverse_hints", "addition_forward_hints"])
def test_addition_with_hints_semantics(name):
    t = tasks.get_task(name)
    hb = t.HINT_BASE
    for t, n, (p, a) in _samples(name, range(1, 25), 4):
        vals = t.program_tokens(p)
        k = vals.index(-5)
        left, right = vals[1:k], vals[k + 1:-1]
        assert len(left) == len(right) == 2 * (n + 1)       # zero-padded to n + 1 digits
        hints = left[0::2]
        assert right[0::2] == hints and hints == sorted(set(hints)) and min(hints) >= hb
        x, y = _number(left[1::2]), _number(right[1::2])
        assert max(len(str(x)), len(str(y))) == n
        out = t.program_tokens(a)[:-1]
        out_hints, out_digits = out[0::2], out[1::2]
        if name == "addition_reverse_hints":
            assert out_hints == hints[::-1] and _number(out_digits[::-1]) == x + y
        else:
            assert out_hints == hints and _number(out_digits) == x + y


def test_reverse_hints_published_format_example():
    # 35 + 7 = 42 with hints a, b, c -> h's 0, 1, 2; answer least significant first
    t = tasks.get_task("addition_reverse_hints")
    p = t.vocab.encode(["BOS", "h0", "0", "h1", "3", "h2", "5", "+",
                        "h0", "0", "h1", "0", "h2", "7", "SEP"])
    assert t.vocab.decode(t.ground_truth(p)) == ["h2", "2", "h1", "4", "h0", "0", "EOS"]


@pytest.mark.parametrize("name", PART_A + PART_B)
def test_reproducible_by_seed(name):
    t = tasks.get_task(name)
    n = 6 if t.length_ok(6) else t.min_length
    a = [t.sample(n, np.random.default_rng(123)) for _ in range(1)]
    b = [t.sample(n, np.random.default_rng(123)) for _ in range(1)]
    assert a == b
    rng = np.random.default_rng(7)
    many = {tuple(t.sample(n, rng)[0]) for _ in range(20)}
    assert len(many) > 1                                    # it is random


@pytest.mark.parametrize("name", PART_A + PART_B)
def test_lengths_the_task_cannot_produce(name):
    t = tasks.get_task(name)
    rng = np.random.default_rng(0)
    for bad in (0, -1, 2.5, "3", True):
        assert not t.length_ok(bad)
        with pytest.raises(ValueError, match=name.split("(")[0]):
            t.sample(bad, rng)
    if t.max_length is not None:
        with pytest.raises(ValueError, match="cannot produce length"):
            t.sample(t.max_length + 1, rng)
        t.sample(t.max_length, rng)                         # the largest one works


def test_bounded_and_unbounded_lengths():
    assert tasks.get_task("copy_unique").max_length == 120
    assert tasks.get_task("copy_repeat").max_length is None
    assert tasks.get_task("parity").length_ok(500)
    assert not tasks.get_task("sort_unique_seq").length_ok(27)


def test_malformed_prompts_give_clear_errors():
    rng = np.random.default_rng(0)
    t = tasks.get_task("sort_unique")
    p, _ = t.sample(4, rng)
    with pytest.raises(tasks.TaskInputError, match="BOS"):
        t.ground_truth(p[1:])
    with pytest.raises(tasks.TaskInputError):
        t.ground_truth(p[:-1])                              # no SEP
    with pytest.raises(tasks.TaskInputError, match="distinct"):
        t.ground_truth([p[0], p[1], p[1], p[-1]])
    with pytest.raises(ValueError, match="out of range"):
        t.ground_truth([p[0], 10_000, p[-1]])
    with pytest.raises(TypeError, match="Generator"):
        t.sample(3, 42)


# --------------------------------------------------------------------------------------------
# part B ground truths vs published values
# --------------------------------------------------------------------------------------------

def test_part_b_ground_truths_published_examples():
    # Tracr lib docstrings and the RASP paper's examples
    assert seq.gt_hist(list("abac")) == [2, 1, 2, 1]
    assert seq.gt_frac_prevs(list("hello"), "l") == [0, 0, Fraction(1, 3), Fraction(1, 2),
                                                     Fraction(2, 5)]
    assert seq.gt_pair_balance(list("a()b(c))")) == [0, Fraction(1, 2), 0, 0, Fraction(1, 5),
                                                     Fraction(1, 6), 0, Fraction(-1, 8)]
    assert seq.gt_shuffle_dyck2(list("({)}")) == [True] * 4
    assert seq.gt_shuffle_dyck2(list("(){)}")) == [False] * 5
    assert seq.gt_sort_freq([2, 4, 2, 1]) == [2, 2, 4, 1]
    assert seq.gt_detect_pattern(list("abcabc"), "abc") == [False, False, True, False,
                                                            False, True]
    assert seq.gt_count_less_freq(list("aaabbc"), 2) == [3] * 6
    assert seq.gt_count_less_freq(list("aacbbc"), 2) == [6] * 6
    assert seq.gt_count_token(list("cabc"), "c") == [2] * 4
    assert seq.gt_reverse(list("hello")) == list("olleh")
    assert seq.gt_shift_by(list("abc"), 1) == ["_", "a", "b"]
    assert seq.gt_dyck1(list("(()))(")) == ["P", "P", "P", "T", "F", "F"]
    assert seq.gt_dyck2(list("({})}")) == ["P", "P", "P", "T", "F"]
    assert seq.gt_dyck2(list("({)}")) == ["P", "P", "F", "F"]
    assert seq.gt_most_freq(list("abbcb")) == ["b", "a", "c", "§", "§"]
    assert seq.gt_double_hist(list("aabbc")) == [2, 2, 2, 2, 1]


@pytest.mark.parametrize("name", PART_B)
def test_part_b_samples(name):
    for t, n, (p, a) in _samples(name, range(1, 10), 3):
        assert p[0] == t.vocab.bos and len(p) == n + 1 and len(a) == n
        assert t.ground_truth(p) == a
        assert len(t.program_tokens(p)) == n                # BOS is stripped
        assert set(t.program_tokens(p)) <= t.program_vocab(n)


def test_catalogue_page_lists_every_task():
    from pathlib import Path
    page = (Path(__file__).resolve().parents[1] / "docs" / "tasks.md").read_text()
    for name in PART_A + PART_B:
        assert f"### `{name}`" in page
    from tasks.docs import task_section
    sec = task_section("sort_unique", verify_to=5, samples=1)
    assert "valid RASP-L" in sec and "verified: all" in sec and "sort: NoPE/T5 best" in sec
