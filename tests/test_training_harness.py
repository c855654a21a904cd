"""Training harness: run directory, resume, reuse, evaluation, bad input.

Uses a tiny local copy task (duck-typed to contract C) so these tests do not depend on the
task catalogue and stay fast.
"""

import json
import math

import numpy as np
import pytest
import torch

from analysis.training.evaluation import (eval_lengths, evaluate, greedy_decode, summarize,
                                 wilson_interval)
from analysis.training.configs import TrainConfig
from analysis.training.runs import RunDirError, load_run
from analysis.training.batches import make_step
from analysis.training.trainer import TrainingError, lr_at, train
from rasp_model import Transformer, TransformerConfig


class _Vocab:
    def __init__(self, n):
        self.tokens = [str(i) for i in range(n)] + ["BOS", "SEP", "EOS", "PAD"]
        self.bos, self.sep, self.eos, self.pad = n, n + 1, n + 2, n + 3

    def __len__(self):
        return len(self.tokens)


class CopyUnique:
    """BOS x1..xn SEP -> x1..xn EOS with distinct x (Zhou et al.'s copy_unique format)."""
    name = "local_copy_unique"
    kind = "next_token"
    min_length = 1

    def __init__(self, n=8, train_max=3, max_length=6):
        self.vocab = _Vocab(n)
        self.n = n
        self.default_train_max_len = train_max
        self.max_length = max_length

    def length_ok(self, n):
        return 1 <= n <= self.max_length

    def sample(self, n, rng):
        x = [int(v) for v in rng.permutation(self.n)[:n]]
        return [self.vocab.bos] + x + [self.vocab.sep], x + [self.vocab.eos]


TINY = dict(n_layers=2, d_model=32, d_head=8, n_heads=4, d_mlp=64, batch_size=32, lr=3e-3,
            warmup_steps=20, eval_samples=50, log_every=10, probe_every=0,
            checkpoint_every=10)


def test_tiny_model_learns_copy_in_distribution(tmp_path):
    res = train(CopyUnique(), "ape_learned", seed=0, steps=300, out_dir=tmp_path / "run",
                config_overrides=TINY, progress=False, verbose=False)
    assert res.finished and not res.reused
    id_rows = [r for r in res.accuracy if r["split"] == "id"]
    assert [r["length"] for r in id_rows] == [1, 2, 3]
    assert [r["length"] for r in res.accuracy if r["split"] == "ood"] == [4, 5, 6]
    assert res.id_em >= 0.9
    for name in ("config.json", "metrics.jsonl", "accuracy.json", "model.safetensors", "DONE"):
        assert (tmp_path / "run" / name).exists(), name
    lines = [json.loads(l) for l in (tmp_path / "run" / "metrics.jsonl").read_text().split("\n")
             if l]
    losses = [l["loss"] for l in lines if "loss" in l]
    assert losses[-1] < losses[0] / 3
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    assert cfg["pe"] == "ape_learned" and cfg["steps"] == 300
    assert cfg["train_lengths"] == [1, 3] and cfg["optimizer"]["name"] == "AdamW"
    # the saved model reproduces the recorded accuracy on the same evaluation set
    model, config, task = load_run(tmp_path / "run", task=CopyUnique())
    again = evaluate(model, task, [(3, "id")], samples=50)
    assert again[0].em == [r for r in res.accuracy if r["length"] == 3][0]["em"]
    # a second call reuses the finished run
    res2 = train(CopyUnique(), "ape_learned", seed=0, steps=300, out_dir=tmp_path / "run",
                 config_overrides=TINY, progress=False, verbose=False)
    assert res2.reused and res2.accuracy == res.accuracy


def test_resume_after_interruption_equals_uninterrupted(tmp_path):
    kw = dict(seed=3, steps=40, config_overrides={**TINY, "eval_samples": 8},
              progress=False, verbose=False)
    full = train(CopyUnique(), "t5", out_dir=tmp_path / "full", **kw)
    part = train(CopyUnique(), "t5", out_dir=tmp_path / "part", stop_after=25, **kw)
    assert not part.finished
    assert not (tmp_path / "part" / "DONE").exists()
    assert (tmp_path / "part" / "checkpoint" / "state.json").exists()
    resumed = train(CopyUnique(), "t5", out_dir=tmp_path / "part", **kw)
    assert resumed.finished and not resumed.reused
    a = load_run(tmp_path / "full", task=CopyUnique())[0].state_dict()
    b = load_run(tmp_path / "part", task=CopyUnique())[0].state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert full.accuracy == resumed.accuracy

    def losses(d):
        rows = [json.loads(l) for l in (d / "metrics.jsonl").read_text().split("\n") if l]
        return [(r["step"], r["loss"]) for r in rows if "loss" in r]
    assert losses(tmp_path / "full") == losses(tmp_path / "part")


def test_existing_run_with_other_config_is_not_overwritten(tmp_path):
    kw = dict(config_overrides={**TINY, "eval_samples": 4}, progress=False, verbose=False)
    train(CopyUnique(), "nope", steps=5, out_dir=tmp_path / "r", **kw)
    with pytest.raises(RunDirError, match="different configuration"):
        train(CopyUnique(), "nope", steps=6, out_dir=tmp_path / "r", **kw)
    redo = train(CopyUnique(), "nope", steps=6, out_dir=tmp_path / "r", force=True, **kw)
    assert redo.steps == 6 and not redo.reused


def test_corrupt_or_partial_run_dirs_raise_run_dir_error(tmp_path):
    with pytest.raises(RunDirError, match="no such run directory"):
        load_run(tmp_path / "missing")
    kw = dict(config_overrides={**TINY, "eval_samples": 4}, progress=False, verbose=False)
    d = tmp_path / "r"
    train(CopyUnique(), "alibi", steps=12, out_dir=d, stop_after=11, **kw)
    with pytest.raises(RunDirError, match="not finished"):
        load_run(d, task=CopyUnique())
    train(CopyUnique(), "alibi", steps=12, out_dir=d, **kw)
    load_run(d, task=CopyUnique())
    (d / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(RunDirError, match="model.safetensors"):
        load_run(d, task=CopyUnique())
    (d / "accuracy.json").write_text("{not json")
    with pytest.raises(RunDirError, match="corrupt"):
        load_run(d, task=CopyUnique())
    (d / "config.json").write_text("[1, 2")
    with pytest.raises(RunDirError, match="config.json"):
        load_run(d, task=CopyUnique())


def test_bad_input_is_a_clear_error(tmp_path):
    with pytest.raises(TrainingError, match="unknown positional encoding"):
        train(CopyUnique(), "sinusoid", steps=1, out_dir=tmp_path / "x", verbose=False)
    with pytest.raises(TrainingError, match="unknown configuration key"):
        train(CopyUnique(), "nope", steps=1, out_dir=tmp_path / "x", verbose=False,
              config_overrides={"layers": 3})
    with pytest.raises(TrainingError, match="exceeds"):
        train(CopyUnique(), "nope", steps=1, train_max_len=50, out_dir=tmp_path / "x",
              verbose=False)
    with pytest.raises(TrainingError, match="preset"):
        train(CopyUnique(), "nope", steps=1, preset="huge", out_dir=tmp_path / "x",
              verbose=False)
    if not torch.cuda.is_available():
        with pytest.raises(TrainingError, match="CUDA"):
            train(CopyUnique(), "nope", steps=1, device="cuda", out_dir=tmp_path / "x",
                  verbose=False)


def test_wilson_interval_matches_formula():
    for k, n in [(0, 10), (5, 10), (10, 10), (37, 50), (1, 3)]:
        z = 1.959963984540054
        p = k / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        lo, hi = wilson_interval(k, n)
        assert lo == pytest.approx(max(0.0, centre - half), abs=1e-9)
        assert hi == pytest.approx(min(1.0, centre + half), abs=1e-9)
    with pytest.raises(ValueError):
        wilson_interval(3, 0)


def test_make_batch_masks_answer_tokens_only():
    task = CopyUnique()
    rng = np.random.default_rng(0)
    step = make_step(task, [2, 3], 16, rng, n_ctx=20, batching="padded")
    (mb,) = step.micro
    inp, tgt, mask, off = mb.inputs, mb.targets, mb.mask, mb.offsets
    assert off is None
    for i in range(16):
        row_in, row_tgt, m = inp[i].tolist(), tgt[i].tolist(), mask[i].tolist()
        sep = row_in.index(task.vocab.sep)
        n = sep - 1
        # targets under the mask are exactly the answer x1..xn EOS
        answer = [t for t, w in zip(row_tgt, m) if w]
        assert answer == row_in[1:sep] + [task.vocab.eos]
        assert sum(m) == n + 1
    step = make_step(task, [3], 8, rng, n_ctx=20, position_offsets="random", batching="padded")
    off = step.micro[0].offsets
    # 8 input positions (BOS x x x SEP x x x), offsets keep them inside n_ctx = 20
    assert off.shape == (8, 8) and int(off.min()) >= 0 and int(off.max()) <= 20 - 8


def test_lr_schedule_warmup_and_cosine():
    tr = TrainConfig(lr=1.0, steps=110, warmup_steps=10, schedule="cosine", min_lr_ratio=0.1)
    assert lr_at(0, tr) == pytest.approx(0.1)
    assert lr_at(9, tr) == pytest.approx(1.0)
    assert lr_at(60, tr) == pytest.approx(0.1 + 0.9 * 0.5)   # half-way: cos(pi/2) = 0
    assert lr_at(110, tr) == pytest.approx(0.1)
    assert lr_at(60, tr.replace(schedule="linear")) == pytest.approx(0.55)


def test_greedy_decode_and_ape_learned_beyond_context():
    task = CopyUnique(max_length=12, train_max=3)
    cfg = TransformerConfig(n_layers=1, d_model=16, d_head=8, n_heads=2, d_mlp=16,
                            d_vocab=len(task.vocab), n_ctx=10, pe="ape_learned")
    m = Transformer(cfg)
    with torch.no_grad():  # a model that always predicts EOS
        m.unembed.b_U[task.vocab.eos] = 100.0
    out = greedy_decode(m, [[8, 1, 9], [8, 2, 3, 9]], 5, task.vocab.eos)
    assert out == [[task.vocab.eos], [task.vocab.eos]]
    res = evaluate(m, task, [(2, "id"), (8, "ood")], samples=5)
    assert res[0].em == 0.0 and res[0].n == 5
    assert res[1].em is None and "ape_learned" in res[1].note
    s = summarize([r.to_dict() for r in res])
    assert s == {"id_em": 0.0, "ood_em": None}
    pairs = eval_lengths(task, 3, 1)
    assert pairs == [(1, "id"), (2, "id"), (3, "id"), (4, "ood"), (5, "ood"), (6, "ood")]


def test_finished_run_written_before_a_new_setting_existed_is_reused(tmp_path):
    kw = dict(steps=4, config_overrides={**TINY, "eval_samples": 4}, progress=False,
              verbose=False)
    first = train(CopyUnique(), "rope", out_dir=tmp_path / "r", **kw)
    cfg_path = tmp_path / "r" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    del cfg["model"]["dropout"]                 # as written by an older version
    del cfg["train"]["train_max_len_cap"]
    del cfg["train"]["batching"]
    cfg_path.write_text(json.dumps(cfg))
    again = train(CopyUnique(), "rope", out_dir=tmp_path / "r", **kw)
    assert again.reused and again.accuracy == first.accuracy


class _LabelOracle(torch.nn.Module):
    """Logits one-hot on the task's ground-truth label at every string position (Huang et
    al.'s next-character sets); from strings of ``wrong_from`` symbols on, the last position
    says BOS instead."""

    def __init__(self, task, wrong_from=None):
        super().__init__()
        self.task, self.wrong_from = task, wrong_from
        self.cfg = TransformerConfig(n_layers=1, d_model=8, d_head=4, n_heads=2, d_mlp=8,
                                     d_vocab=len(task.vocab), pe="nope", n_ctx=64)
        self.unused = torch.nn.Parameter(torch.zeros(1))

    def forward(self, tokens, pos_offset=None):
        out = torch.zeros(*tokens.shape, len(self.task.vocab))
        for r, row in enumerate(tokens.tolist()):
            labels = self.task.ground_truth(row)
            for i, label in enumerate(labels):
                out[r, i + 1, label] = 1.0
            if self.wrong_from is not None and len(labels) >= self.wrong_from:
                out[r, len(labels)] = 0.0
                out[r, len(labels), self.task.vocab.bos] = 1.0
        return out


def test_next_set_exact_match_needs_every_position():
    import tasks
    task = tasks.get_task("dyck1_depth2_nextchar")
    lengths = [(2, "id"), (4, "id"), (6, "ood"), (8, "ood")]
    res = evaluate(_LabelOracle(task), task, lengths, samples=10)
    assert [r.em for r in res] == [1.0, 1.0, 1.0, 1.0]
    res = evaluate(_LabelOracle(task, wrong_from=6), task, lengths, samples=10)
    assert [r.em for r in res] == [1.0, 1.0, 0.0, 0.0]      # one wrong position: not a match


def test_eval_stride_counts_the_lengths_a_task_accepts():
    import tasks
    # Dyck words have even lengths only: stride 2 keeps every other even length (counting all
    # integers, it kept only the odd ones, which have no member, plus 10 and 20)
    dyck = tasks.get_task("dyck1_depth2_nextchar")
    assert eval_lengths(dyck, 10, 1, 2.0, 2) == [(2, "id"), (6, "id"), (10, "id"), (14, "ood"),
                                                 (18, "ood"), (20, "ood")]
    # a task accepting every length: every stride-th from the lowest, as before
    assert eval_lengths(CopyUnique(max_length=40), 10, 1, 2.0, 3) == [
        (n, "id" if n <= 10 else "ood") for n in (1, 4, 7, 10, 13, 16, 19, 20)]


def test_training_max_length_without_a_member_is_not_sampled():
    import tasks
    from analysis.training.trainer import resolve_spec
    # (abab)* has members at lengths 4, 8, 12, ... only; the quick preset trains up to 10
    spec = resolve_spec(tasks.get_task("abab_star_nextchar"), "nope", 0, "quick")
    assert spec.train_lengths == (4, 8)
    assert [n for n, _ in spec.eval_lengths] == [4, 8, 12, 20]    # 8: the longest trained
    assert spec.model.n_ctx >= 20 + 1                  # BOS + 20 symbols at the longest length
