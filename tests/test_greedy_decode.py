"""The one greedy decoder (rasp.decode.greedy_decode) against a one-prompt-at-a-time reference
loop written here, on a next-token function whose outputs are known in closed form; and its
users for a RASP program and for its compiled model decode the task's ground truth."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from rasp.decode import NO_TOKEN, greedy_decode

V, EOS = 7, 0


def next_token(seq):
    """Sum of the prefix mod V (EOS = 0 ends); -1 ("no token") after a 6."""
    return NO_TOKEN if seq[-1] == 6 else sum(seq) % V


def reference(prompt, max_new, max_seq_len=None):
    seq, out = list(prompt), []
    for _ in range(max_new):
        if max_seq_len is not None and len(seq) > max_seq_len:
            break
        t = next_token(seq)
        if t == NO_TOKEN:
            break
        out.append(t)
        if t == EOS:
            break
        seq.append(t)
    return out


@settings(max_examples=60, deadline=None)
@given(prompts=st.lists(st.lists(st.integers(1, V - 1), min_size=1, max_size=6), min_size=1,
                        max_size=12),
       max_new=st.integers(0, 9), limit=st.one_of(st.none(), st.integers(1, 10)),
       batch=st.one_of(st.none(), st.integers(1, 4)))
def test_matches_the_one_at_a_time_reference(prompts, max_new, limit, batch):
    calls = []

    def next_ids(ids):
        assert ids.dtype == np.int64 and ids.ndim == 2
        calls.append(ids.shape)
        return [next_token(list(r)) for r in ids]
    got = greedy_decode(next_ids, prompts, max_new, EOS, max_seq_len=limit, batch_size=batch)
    assert got == [reference(p, max_new, limit) for p in prompts]
    # rows of one call always share a length, and a call never exceeds the batch size
    assert all(b <= (batch or len(prompts)) for b, _ in calls)


def test_empty_prompt_is_an_error():
    with pytest.raises(ValueError, match="empty prompt"):
        greedy_decode(lambda ids: [1] * len(ids), [[1], []], 3, EOS)


def test_program_compiled_and_trained_decoders_agree_on_copy_unique():
    """tasks.decode_batch (interpreter), compiler.decode.decode_task (compiled weights) and the
    task's ground truth give the same answers."""
    import tasks
    from compiler.decode import decode_task
    from analysis.probing.alignment import compile_reference
    t = tasks.get_task("copy_unique")
    sop = t.load_reference()
    cm = compile_reference(t, sop, 12)
    rng = np.random.default_rng(3)
    ex = [t.sample(n, rng) for n in (1, 3, 3, 4)]
    by_program = tasks.decode_batch(t, sop, [p for p, _ in ex], 8)
    by_compiled = [decode_task(t, cm, p, 8) for p, _ in ex]
    assert by_program == by_compiled == [a for _, a in ex]
