"""Padding-free training batches and the position-offset protocol (analysis.training.batches)."""

import itertools

import numpy as np
import pytest
import torch

from analysis.training import batches
from rasp_model import PE_NAMES, Transformer, TransformerConfig
import tasks

TASK = tasks.get_task("sort_unique")
LENGTHS = list(range(1, 11))


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny models: one torch thread (two threads spin 50x slower on a busy 2-core machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _model(pe, n_ctx=48, seed=0):
    cfg = TransformerConfig(n_layers=2, d_model=32, d_head=8, n_heads=2, d_mlp=32,
                            d_vocab=len(TASK.vocab), pe=pe, n_ctx=n_ctx)
    m = Transformer(cfg)
    m.reset_parameters(seed=seed)
    return m


def _grads(model, step):
    model.zero_grad(set_to_none=True)
    loss, _ = batches.step_loss(model, step)
    loss.backward()
    return float(loss.detach()), torch.cat([p.grad.flatten() for p in model.parameters()
                                   if p.grad is not None])


@pytest.mark.parametrize("pe", PE_NAMES)
@pytest.mark.parametrize("offsets", batches.OFFSET_PROTOCOLS)
def test_every_layout_gives_the_padded_batch_gradient(pe, offsets):
    model = _model(pe)
    out = {}
    for layout in batches.BATCHINGS:
        step = batches.make_step(TASK, LENGTHS, 32, np.random.default_rng([3, 7, 1]), 48,
                                 offsets, layout, length_buckets=3)
        out[layout] = (step, _grads(model, step))
    ref_loss, ref_grad = out["padded"][1]
    for layout, (step, (loss, grad)) in out.items():
        assert loss == pytest.approx(ref_loss, rel=1e-5)
        torch.testing.assert_close(grad, ref_grad, rtol=1e-4, atol=1e-6)
        assert step.real_tokens == out["padded"][0].real_tokens
        assert step.answer_tokens == out["padded"][0].answer_tokens
    # packing removes most of the padding of the padded batch
    pad_frac = {k: 1 - s.real_tokens / s.padded_tokens for k, (s, _) in out.items()}
    assert pad_frac["padded"] > 0.25 and pad_frac["packed"] < 0.15


def test_packed_rows_hold_whole_examples_and_restart_positions():
    step = batches.make_step(TASK, LENGTHS, 16, np.random.default_rng(0), 48, "none", "packed")
    (mb,) = step.micro
    seg, off = mb.segment_ids.numpy(), mb.offsets.numpy()
    pos = np.arange(seg.shape[1])[None] + off            # the model's absolute positions
    for r in range(seg.shape[0]):
        for s in set(seg[r]) - {-1}:
            cols = np.flatnonzero(seg[r] == s)
            assert (np.diff(cols) == 1).all()              # contiguous
            assert list(pos[r, cols]) == list(range(len(cols)))   # positions 0..n-1
            assert mb.inputs[r, cols[0]] == TASK.vocab.bos


def test_bucket_groups_is_the_least_padding_split():
    rng = np.random.default_rng(1)
    for _ in range(20):
        ls = list(rng.integers(1, 12, size=7))
        for g in (1, 2, 3):
            groups = batches.bucket_groups(ls, g)
            cost = sum(len(x) * max(ls[i] for i in x) for x in groups)
            order = sorted(ls)
            best = min(sum(len(order[a:b]) * order[b - 1]
                           for a, b in zip((0,) + cuts, cuts + (len(order),)))
                       for k in range(g) for cuts in itertools.combinations(range(1, 7), k))
            assert cost == best and len(groups) <= g
            assert sorted(i for x in groups for i in x) == list(range(7))


def test_random_offsets_train_every_position_row():
    """Zhou et al. / Huang et al.'s protocol: every learned position row gets a gradient; without
    offsets (Kazemnejad et al.) rows past the longest training input never do."""
    n_ctx = 60
    longest = max(len(p) + len(a) - 1 for p, a in (TASK.sample(10, np.random.default_rng(i))
                                                    for i in range(50)))
    for protocol, layout in (("random", "packed"), ("random", "padded"), ("none", "packed")):
        model = _model("ape_learned", n_ctx=n_ctx)
        seen = torch.zeros(n_ctx, dtype=torch.bool)
        for s in range(15):
            step = batches.make_step(TASK, LENGTHS, 32, np.random.default_rng([0, s, 1]), n_ctx,
                                     protocol, layout)
            model.zero_grad(set_to_none=True)
            loss, _ = batches.step_loss(model, step)
            loss.backward()
            seen |= model.pos_embed.W_pos.grad.abs().sum(-1) > 0
        if protocol == "random":
            assert bool(seen.all()), f"untrained rows {torch.flatnonzero(~seen).tolist()}"
        else:
            assert bool(seen[:longest].all()) and not bool(seen[longest:].any())


def test_bad_settings_are_refused():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="position_offsets"):
        batches.make_step(TASK, LENGTHS, 4, rng, 48, "shifted")
    with pytest.raises(ValueError, match="batching"):
        batches.make_step(TASK, LENGTHS, 4, rng, 48, "none", "ragged")
    with pytest.raises(ValueError, match="positions"):
        batches.make_step(TASK, LENGTHS, 4, rng, 8, "none")


def test_teacher_forced_accuracy_counts_examples_in_every_layout():
    for layout in batches.BATCHINGS:
        step = batches.make_step(TASK, LENGTHS, 8, np.random.default_rng(5), 48, "none", layout)
        perfect = [(torch.nn.functional.one_hot(mb.targets, len(TASK.vocab)).float(), mb)
                   for mb in step.micro]
        assert batches.teacher_forced_accuracy(perfect) == (1.0, 1.0)
        # one wrong answer token in one example: exact match 7/8 of the examples
        logits, mb = perfect[-1]
        bad = logits.clone()
        r, t = [int(x) for x in torch.nonzero(mb.mask)[-1]]
        bad[r, t] = torch.roll(bad[r, t], 1)
        acc, em = batches.teacher_forced_accuracy(perfect[:-1] + [(bad, mb)])
        assert em == pytest.approx(7 / 8), layout
        assert acc == pytest.approx(1 - 1 / step.answer_tokens)


NEXT_SET = tasks.get_task("dyck1_depth3_nextchar")


@pytest.mark.parametrize("offsets", batches.OFFSET_PROTOCOLS)
def test_next_set_batches_score_every_string_position_with_its_label(offsets):
    """Huang et al.'s next-character-set format: the input is BOS w (no answer tokens appended)
    and the loss covers one label per symbol of w, in every layout with the padded gradient."""
    model = Transformer(TransformerConfig(n_layers=1, d_model=16, d_head=8, n_heads=2,
                                          d_mlp=16, d_vocab=len(NEXT_SET.vocab), pe="nope",
                                          n_ctx=30))
    model.reset_parameters(seed=0)
    lengths = [2, 4, 6, 8]
    out = {}
    for layout in batches.BATCHINGS:
        step = batches.make_step(NEXT_SET, lengths, 12, np.random.default_rng([1, 2, 1]), 30,
                                 offsets, layout)
        out[layout] = (step, _grads(model, step))
        examples = batches.sample_examples(NEXT_SET, lengths, 12,
                                           np.random.default_rng([1, 2, 1]))
        assert step.answer_tokens == sum(len(p) - 1 for p, _ in examples)
        assert step.real_tokens == sum(len(p) for p, _ in examples)
        for mb in step.micro:                    # the scored targets are labels, inputs symbols
            scored = mb.targets[mb.mask > 0]
            assert all(NEXT_SET.vocab.tokens[int(i)].startswith("{") for i in scored)
            assert not (mb.inputs == NEXT_SET.vocab.eos).any()
    ref_loss, ref_grad = out["padded"][1]
    for layout, (step, (loss, grad)) in out.items():
        assert loss == pytest.approx(ref_loss, rel=1e-5), layout
        torch.testing.assert_close(grad, ref_grad, rtol=1e-4, atol=1e-6)
