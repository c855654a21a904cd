"""Reference programs of the task catalogue: greedy decoding reproduces the ground truth at every
length they claim (small N here; `rasp verify` runs 1..100), part-B programs agree with their
ground truths and with published values, and the RASP-L status of each reference."""

import numpy as np
import pytest

import rasp
import tasks
from tasks.decode import is_prefix_causal

PART_A = tasks.GENERALIZATION_TASKS
PART_B = tasks.SEQUENCE_PROGRAMS


@pytest.fixture(scope="module")
def refs():
    return {name: tasks.get_task(name).load_reference() for name in PART_A + PART_B}


@pytest.mark.parametrize("name", PART_A)
def test_part_a_reference_reproduces_answers_at_every_length(name, refs):
    t = tasks.get_task(name)
    top = 10 if name == "addition" else 24              # addition's natural program is slow
    report = tasks.verify_program(t, refs[name], t.lengths(top), samples=3, seed=1)
    assert report.ok, report.failures
    assert report.n_checked == 3 * len(t.lengths(top))


@pytest.mark.parametrize("name", ["count", "copy_unique", "sort_unique", "boolean_and",
                                  "addition_reverse_hints"])
def test_long_lengths(name, refs):
    t = tasks.get_task(name)
    lengths = [n for n in (60, 99, 100) if t.length_ok(n)]
    report = tasks.verify_program(t, refs[name], lengths, samples=2, seed=3)
    assert report.ok, report.failures


@pytest.mark.parametrize("name", ["mode", "copy_unique", "sort_unique", "parity_scratchpad",
                                  "addition_forward_hints"])
def test_greedy_decoding_agrees_with_teacher_forcing(name, refs):
    # the two verification paths are independent: step-by-step decoding vs one causal pass
    t = tasks.get_task(name)
    rng = np.random.default_rng(5)
    for n in (1, 3, 7):
        p, a = t.sample(n, rng)
        assert tasks.decode_with_program(t, refs[name], p, len(a) + 5) == a
    greedy = tasks.verify_program(t, refs[name], [2, 5], samples=4, method="greedy")
    assert greedy.ok and greedy.method == "greedy"


def test_decode_batch_mixed_lengths(refs):
    t = tasks.get_task("copy_unique")
    rng = np.random.default_rng(0)
    ex = [t.sample(n, rng) for n in (1, 4, 4, 9, 2)]
    outs = tasks.decode_batch(t, refs["copy_unique"], [p for p, _ in ex], 20)
    assert outs == [a for _, a in ex]


def test_verification_detects_a_wrong_program(refs):
    # the sort program decodes copy_unique prompts into sorted (wrong) answers
    t = tasks.get_task("copy_unique")
    report = tasks.verify_program(t, refs["sort_unique"], [3, 4], samples=5)
    assert not report.ok and report.failures
    assert report.failures[0]["expected"] != report.failures[0]["got"]
    # max_new_tokens bounds the output
    p, a = t.sample(6, np.random.default_rng(0))
    assert len(tasks.decode_with_program(t, refs["copy_unique"], p, 3)) == 3


def test_invalid_program_output_is_a_clear_error():
    t = tasks.get_task("mode")
    bad = rasp.tokens_int + 100                        # 100+ is no token of mode's vocabulary
    p, _ = t.sample(3, np.random.default_rng(0))
    with pytest.raises(ValueError, match="not a token"):
        tasks.decode_with_program(t, bad, p, 4)
    assert tasks.decode_batch(t, bad, [p], 4) == [[]]


def test_causal_flags(refs):
    for name in PART_A:
        t = tasks.get_task(name)
        assert is_prefix_causal(refs[name]) == (name != "addition"), name
        assert t.causal == (name != "addition")


@pytest.mark.parametrize("name", PART_B)
def test_part_b_programs_match_ground_truth(name, refs):
    t = tasks.get_task(name)
    report = tasks.verify_program(t, refs[name], t.lengths(12), samples=8, seed=2)
    assert report.ok, report.failures


def test_parametrised_part_b_programs():
    for name in ("shift_by(3)", "count_less_freq(1)", "count_token(b)"):
        t = tasks.get_task(name)
        report = tasks.verify_program(t, t.load_reference(), t.lengths(9), samples=6)
        assert report.ok, (name, report.failures)


def test_part_b_programs_on_published_inputs(refs):
    # values printed in the Tracr library docstrings / the RASP paper
    ev = lambda name, x: rasp.evaluate(refs[name], x)[0].tolist()
    assert ev("hist", "abac") == [2, 1, 2, 1]
    assert ev("reverse_seq", "hello") == list("olleh")
    assert ev("length", "abcdefg") == [7] * 7
    assert ev("shuffle_dyck2", "({)}") == [True] * 4
    assert ev("shuffle_dyck2", "(){)}") == [False] * 5
    assert ev("count_less_freq", list("aaabbc")) == [3] * 6
    assert ev("count_less_freq", list("aacbbc")) == [6] * 6
    assert ev("detect_pattern", "abcabc") == [False, False, True, False, False, True]
    assert ev("sort_unique_seq", "dbca") == list("abcd")
    assert np.allclose(ev("pair_balance", "a()b(c))"),
                       [0, 1 / 2, 0, 0, 1 / 5, 1 / 6, 0, -1 / 8])
    assert ev("dyck2", "({})}") == ["P", "P", "P", "T", "F"]


@pytest.mark.parametrize("name", PART_A)
def test_raspl_status_of_references(name, refs):
    # Zhou et al.: valid RASP-L programs exist for count, mode, copy_unique, sort_unique,
    # addition with hints, the scratchpads and boolean AND; the natural programs of the others
    # do index arithmetic (rule 3): copy_repeat, plain addition (also non-causal), parity,
    # reverse, sum_mod10.
    from rasp.analyses import raspl
    t = tasks.get_task(name)
    rep = raspl.check(refs[name], vocab=t.program_vocab(8), max_seq_len=t.sequence_length(8),
                      causal=t.causal)
    assert rep.valid == t.valid_raspl, [v.message for v in rep.violations]
    if not t.valid_raspl:
        assert 3 in {v.rule for v in rep.violations}
