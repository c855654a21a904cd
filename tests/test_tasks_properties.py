"""Property tests (hypothesis): ground truths against Python arithmetic, and reference programs
on inputs drawn independently of the task generators."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tasks

SETTINGS = settings(max_examples=25, deadline=None)


@pytest.fixture(scope="module")
def refs():
    names = ["sort_unique", "copy_unique", "addition_reverse_hints", "addition_forward_hints",
             "boolean_and", "mode", "count", "parity_scratchpad"]
    return {n: tasks.get_task(n).load_reference() for n in names}


def _hint_prompt(t, x, y, hints):
    w = len(hints)
    da, db = str(x).zfill(w), str(y).zfill(w)
    names = ["BOS"]
    for h, d in zip(hints, da):
        names += [f"h{h}", d]
    names.append("+")
    for h, d in zip(hints, db):
        names += [f"h{h}", d]
    return t.vocab.encode(names + ["SEP"])


@SETTINGS
@given(x=st.integers(0, 10 ** 30), y=st.integers(0, 10 ** 30), data=st.data())
def test_addition_with_hints_program_on_arbitrary_operands(refs, x, y, data):
    w = max(len(str(x)), len(str(y))) + 1
    hints = sorted(data.draw(st.lists(st.integers(0, 109), min_size=w, max_size=w,
                                      unique=True)))
    for name in ("addition_reverse_hints", "addition_forward_hints"):
        t = tasks.get_task(name)
        p = _hint_prompt(t, x, y, hints)
        gt = t.ground_truth(p)
        digits = [int(d) for d in t.vocab.decode(gt[1:-1:2])]
        if name == "addition_reverse_hints":
            digits = digits[::-1]
        assert int("".join(map(str, digits))) == x + y       # Python's integers
        assert tasks.decode_with_program(t, refs[name], p, 2 * w + 2) == gt


@SETTINGS
@given(st.lists(st.integers(0, 119), min_size=1, max_size=40, unique=True))
def test_sort_and_copy_unique_programs(refs, xs):
    for name, expect in (("sort_unique", sorted(xs)), ("copy_unique", xs)):
        t = tasks.get_task(name)
        p = t.vocab.encode(["BOS"] + [str(v) for v in xs] + ["SEP"])
        out = tasks.decode_with_program(t, refs[name], p, len(xs) + 2)
        assert t.vocab.decode(out) == [str(v) for v in expect] + ["EOS"]


@SETTINGS
@given(st.lists(st.integers(0, 1), min_size=1, max_size=60))
def test_boolean_and_program(refs, bits):
    t = tasks.get_task("boolean_and")
    p = t.vocab.encode(["BOS"] + [str(b) for b in bits] + ["SEP"])
    expect = [str(int(all(bits[:k + 1]))) for k in range(len(bits))] + ["EOS"]
    assert t.vocab.decode(t.ground_truth(p)) == expect
    assert t.vocab.decode(tasks.decode_with_program(t, refs["boolean_and"], p, 70)) == expect


@SETTINGS
@given(st.lists(st.integers(0, 4), min_size=1, max_size=50))
def test_mode_program_whenever_the_mode_is_unique(refs, xs):
    counts = np.bincount(xs, minlength=5)
    t = tasks.get_task("mode")
    p = t.vocab.encode(["BOS"] + [str(v) for v in xs] + ["SEP"])
    if (counts == counts.max()).sum() != 1:
        with pytest.raises(tasks.TaskInputError):
            t.ground_truth(p)
        return
    assert tasks.decode_with_program(t, refs["mode"], p, 3) == \
        t.vocab.encode([str(int(counts.argmax())), "EOS"])


@SETTINGS
@given(a=st.integers(0, 119), n=st.integers(1, 120))
def test_count_program(refs, a, n):
    b = a + n - 1
    if b > 119:
        return
    t = tasks.get_task("count")
    p = t.vocab.encode(["BOS", str(a), str(b)])
    out = tasks.decode_with_program(t, refs["count"], p, n + 2)
    assert t.vocab.decode(out) == [str(v) for v in range(a, b + 1)] + ["EOS"]


@SETTINGS
@given(bits=st.lists(st.integers(0, 1), min_size=1, max_size=30), data=st.data())
def test_parity_scratchpad_program(refs, bits, data):
    n = len(bits)
    hints = sorted(data.draw(st.lists(st.integers(0, 119), min_size=n, max_size=n,
                                      unique=True)))
    t = tasks.get_task("parity_scratchpad")
    names = ["BOS"]
    for h, b in zip(hints, bits):
        names += [f"h{h}", str(b)]
    p = t.vocab.encode(names + ["SEP"])
    gt = t.vocab.decode(t.ground_truth(p))
    assert gt[-2:] == [str(sum(bits) % 2), "EOS"]
    assert len(gt) == 2 * sum(bits) + 2
    assert t.vocab.decode(tasks.decode_with_program(t, refs["parity_scratchpad"], p,
                                                    2 * n + 3)) == gt
