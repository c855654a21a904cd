"""The stacked trainer (analysis/training/stacked.py): each member is the run it replaces.

Independent truths: the separate runs of :func:`analysis.training.trainer.train` (same seeds,
same settings) trained one by one; an uninterrupted stacked group for the resume test.
Tolerance. Not bitwise: a member's batches are padded to the group's shape, and a matrix
product of another shape sums in another order (float32 rounding, ~1e-7 relative per step).
AdamW amplifies such rounding where gradients are near zero; measured over 12 member runs of 50
quick-preset steps (nope, t5, rope x 4 seeds): |loss difference| at step 50 is 0 or 1e-6 (the
metrics' rounding) for 10 of 12, 2.3e-5 and 3.1e-5 for two, and the *same* run trained with two
mathematically equal batch layouts (packed vs padded, one model) differs by up to 3.1e-5 as well
(nope seed 2: 3.1e-5 in both comparisons). So the tests ask: each member within 2e-4 at every
logged step, the median over the members within 1e-5 at step 50, and exact match per length
equal.
A wrong batch, seed or gradient gives differences of 1e-2 or more.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from analysis.training import batches, stacked, trainer
from analysis.training.batches import make_step
from analysis.training.evaluation import greedy_decode, predict_labels
from analysis.training.grid import GridRun, plan_jobs, run_grid
from rasp_model import Transformer

ROOT = Path(__file__).resolve().parent.parent

#: 50 steps, logged every 10, a checkpoint at 30, a probe at 25 and 50, a small evaluation
SETTINGS = {"steps": 50, "log_every": 10, "checkpoint_every": 30, "probe_every": 25,
            "eval_samples": 12, "eval_stride": 3}


def _specs(task, pe, seeds, extra=None):
    return [trainer.resolve_spec(task, pe, s, "quick", config_overrides={**SETTINGS,
                                                                         **(extra or {})})
            for s in seeds]


def _losses(run_dir):
    return {r["step"]: r["loss"] for r in map(json.loads, open(Path(run_dir) / "metrics.jsonl"))
            if "loss" in r}


@pytest.mark.parametrize("name,pe,extra", [
    ("sort_unique", "nope", None),
    ("sort_unique", "ape_learned", {"position_offsets": "random"}),
    ("sort_unique", "t5", {"batching": "padded"}),
    # Huang et al.'s next-character sets: one label per position, scored without decoding.
    # ab_d_bc: its quick-preset loss falls smoothly; on dyck1_depth3 / tomita3 the loss spikes
    # at lr 3e-3 and one run with packed vs padded batches differs by up to 7e-3 at step 50
    # (measured), so rounding, not stacking, would decide the comparison there.
    ("ab_d_bc_nextchar", "ape_learned", {"position_offsets": "random"})])
def test_stacked_members_equal_separate_runs(tmp_path, name, pe, extra):
    task = trainer.resolve_task(name)
    seeds = [0, 1, 2]
    specs = _specs(task, pe, seeds, extra)
    got = stacked.train_group(task, specs, [tmp_path / "stack" / str(s) for s in seeds],
                              progress=False, verbose=False)
    at_50 = []
    for s, res in zip(seeds, got):
        alone = trainer.train(task, pe, s, preset="quick",
                              config_overrides={**SETTINGS, **(extra or {})},
                              out_dir=tmp_path / "alone" / str(s), progress=False,
                              verbose=False)
        a, b = _losses(tmp_path / "stack" / str(s)), _losses(alone.run_dir)
        assert sorted(a) == sorted(b) == [10, 20, 30, 40, 50]
        assert all(abs(a[k] - b[k]) <= 2e-4 for k in a), (s, a, b)
        at_50.append(abs(a[50] - b[50]))
        # the same test set, the same greedy answers: exact match per length equal
        acc_s = json.loads((Path(res.run_dir) / "accuracy.json").read_text())
        acc_a = json.loads((Path(alone.run_dir) / "accuracy.json").read_text())
        assert [r.get("correct") for r in acc_s] == [r.get("correct") for r in acc_a]
        done = json.loads((Path(res.run_dir) / "DONE").read_text())
        assert done["stacked_members"] == 3 and done["steps"] == 50
        # the run directory is today's format: the same files as a separate run
        assert sorted(p.name for p in Path(res.run_dir).iterdir()) == \
            sorted(p.name for p in Path(alone.run_dir).iterdir())
    assert np.median(at_50) <= 1e-5, at_50
    # the members differ from each other (a stack of copies would pass the checks above
    # only if the separate runs were equal too)
    assert _losses(tmp_path / "stack" / "0")[50] != _losses(tmp_path / "stack" / "1")[50]


def test_same_initial_weights_and_batches():
    task = trainer.resolve_task("sort_unique")
    specs = _specs(task, "rope", [3, 4])
    models = []
    for spec in specs:
        torch.manual_seed(spec.seed)
        m = Transformer(spec.model)
        m.reset_parameters(seed=spec.seed)
        models.append(m)
    sm = stacked.StackedModel(models)
    for i, m in enumerate(models):
        for name, p in m.named_parameters():
            assert torch.equal(sm.params[name][i], p)
    lengths = trainer.train_lengths(specs[0], task)
    steps = [make_step(task, lengths, 16, np.random.default_rng([s.seed, 7, 1]),
                       specs[0].model.n_ctx) for s in specs]
    mb = stacked.stack_micro_batches([s.micro[0] for s in steps], task.vocab.eos)
    logits = sm(mb.inputs, pos_offset=mb.offsets, segment_ids=mb.segment_ids)
    for i, (m, st) in enumerate(zip(models, steps)):
        one = st.micro[0]
        r, c = one.inputs.shape
        assert torch.equal(mb.inputs[i, :r, :c], one.inputs)
        ref = m(one.inputs, pos_offset=one.offsets, segment_ids=one.segment_ids)
        real = one.segment_ids >= 0
        assert torch.allclose(logits[i, :r, :c][real], ref[real], atol=1e-5)


@pytest.mark.parametrize("name,pe,lengths", [
    ("copy_unique", "alibi", (3, 3, 5, 6, 6, 6)),
    # next-character sets: one forward pass labels every position (no decoding)
    ("tomita3_nextchar", "rope", (3, 3, 5, 6, 6, 9))])
def test_stacked_answers_equal_each_member(name, pe, lengths):
    task = trainer.resolve_task(name)
    specs = _specs(task, pe, [0, 1, 2])
    models = []
    for spec in specs:
        m = Transformer(spec.model)
        m.reset_parameters(seed=spec.seed)
        models.append(m)
    rng = np.random.default_rng(5)
    prompts = [list(task.sample(n, rng)[0]) for n in lengths]
    got = stacked.stacked_answers(stacked.StackedModel(models), task, prompts, 9)
    for m, g in zip(models, got):
        if task.kind == "next_set":
            assert g == predict_labels(m, prompts)
            assert [len(x) for x in g] == [len(p) - 1 for p in prompts]
        else:
            assert g == greedy_decode(m, prompts, 9, task.vocab.eos)


def test_clip_is_per_member():
    a = torch.zeros(2, 3, requires_grad=True)
    a.grad = torch.tensor([[3.0, 4.0, 0.0], [0.3, 0.4, 0.0]])     # norms 5 and 0.5
    norms = stacked.clip_grad_norm_stacked([a], 1.0)
    assert torch.allclose(norms, torch.tensor([5.0, 0.5]))
    assert torch.allclose(a.grad[0], torch.tensor([0.6, 0.8, 0.0]), atol=1e-6)
    assert torch.allclose(a.grad[1], torch.tensor([0.3, 0.4, 0.0]))   # under the limit


def test_diverged_member_is_dropped_others_go_on(tmp_path, monkeypatch):
    task = trainer.resolve_task("sort_unique")
    specs = _specs(task, "nope", [0, 1, 2])
    call = stacked.StackedModel.__call__

    def poisoned(self, tokens, **kw):            # member 1's logits become NaN from step 15
        out = call(self, tokens, **kw)
        if self.members == 3 and torch.is_grad_enabled() and poisoned.n >= 15:
            out = out.clone()
            out[1] = float("nan")
        poisoned.n += torch.is_grad_enabled()
        return out
    poisoned.n = 0
    monkeypatch.setattr(stacked.StackedModel, "__call__", poisoned)
    got = stacked.train_group(task, specs, [tmp_path / str(s) for s in range(3)],
                              progress=False, verbose=False)
    assert isinstance(got[1], trainer.TrainingError) and "nan" in str(got[1])
    assert not (tmp_path / "1" / "DONE").exists()
    monkeypatch.undo()
    for s in (0, 2):
        assert got[s].finished
        alone = trainer.train(task, "nope", s, preset="quick", config_overrides=SETTINGS,
                              out_dir=tmp_path / f"alone{s}", progress=False, verbose=False)
        assert abs(_losses(got[s].run_dir)[50] - _losses(alone.run_dir)[50]) <= 2e-4


_KILLED = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {root!r})
    from analysis.training import stacked, trainer
    task = trainer.resolve_task("sort_unique")
    specs = [trainer.resolve_spec(task, "nope", s, "quick", config_overrides={settings!r})
             for s in (0, 1)]
    def hook(point, step):
        if point == "metrics" and step == 39:       # after the checkpoint at 30
            os.kill(os.getpid(), signal.SIGKILL)
    stacked.train_group(task, specs, [{d0!r}, {d1!r}], progress=False, verbose=False,
                        step_hook=hook)
""")


def test_resume_after_sigkill_equals_uninterrupted(tmp_path):
    task = trainer.resolve_task("sort_unique")
    specs = _specs(task, "nope", [0, 1])
    full = stacked.train_group(task, specs, [tmp_path / "full0", tmp_path / "full1"],
                               progress=False, verbose=False)
    dirs = [str(tmp_path / "cut0"), str(tmp_path / "cut1")]
    code = _KILLED.format(root=str(ROOT), settings=SETTINGS, d0=dirs[0], d1=dirs[1])
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == -signal.SIGKILL, p.stderr
    assert all((Path(d) / "checkpoint").exists() and not (Path(d) / "DONE").exists()
               for d in dirs)
    again = stacked.train_group(task, specs, dirs, progress=False, verbose=False)
    for a, b in zip(full, again):
        assert b.finished and not b.reused
        pa, pb = Path(a.run_dir), Path(b.run_dir)
        assert (pa / "model.safetensors").read_bytes() == (pb / "model.safetensors").read_bytes()
        assert (pa / "metrics.jsonl").read_text().count("\n") == \
            (pb / "metrics.jsonl").read_text().count("\n")
        assert _losses(pa) == _losses(pb)
        assert (pa / "accuracy.json").read_text() == (pb / "accuracy.json").read_text()
    # a finished stack is reused as separate runs are
    reused = stacked.train_group(task, specs, dirs, progress=False, verbose=False)
    assert all(r.reused for r in reused)


def test_stack_key_and_refusals(tmp_path):
    task = trainer.resolve_task("sort_unique")
    a, b = _specs(task, "nope", [0, 1])
    assert stacked.stack_key(a) == stacked.stack_key(b)
    (c,) = _specs(task, "t5", [0])
    assert stacked.stack_key(c) != stacked.stack_key(a)
    (d,) = _specs(task, "nope", [0], {"dropout": 0.1})
    assert stacked.stack_key(d) is None and "dropout" in stacked.why_not_stackable(d)
    with pytest.raises(trainer.TrainingError, match="cannot train as one stack"):
        stacked.train_group(task, [a, c], [tmp_path / "a", tmp_path / "c"], progress=False,
                            verbose=False)


def test_plan_jobs_groups_seeds_of_one_configuration():
    runs = [GridRun("sort_unique", pe, s, preset="quick") for pe in ("nope", "t5")
            for s in range(5)]
    runs.append(GridRun("sort_unique", "nope", 9, preset="quick",
                        overrides={"dropout": 0.1}))
    jobs = plan_jobs(runs, list(range(len(runs))), stack=3, slots=2)
    flat = sorted(i for j in jobs for i in j)
    assert flat == list(range(len(runs)))
    for job in jobs:
        assert len(job) <= 3
        assert len({(runs[i].pe, tuple(runs[i].overrides.items())) for i in job}) == 1
    assert [10] in jobs                                  # dropout: trained alone
    assert plan_jobs(runs, [0, 1, 2], stack=1) == [[0], [1], [2]]


def test_grid_serial_with_stack_writes_every_run(tmp_path):
    runs = [GridRun("sort_unique", "nope", s, preset="quick", overrides=SETTINGS)
            for s in range(3)]
    rep = run_grid(runs, runs_root=tmp_path, serial=True, progress=False, stack=3)
    assert rep.ok and [r.status for r in rep.results] == ["trained"] * 3
    assert all("stack of 3" in r.worker or r.worker == "driver" for r in rep.results)
    for r in rep.results:
        assert json.loads((Path(r.run_dir) / "DONE").read_text())["stacked_members"] == 3
    again = run_grid(runs, runs_root=tmp_path, serial=True, progress=False, stack=3)
    assert [r.status for r in again.results] == ["reused"] * 3


@pytest.mark.parametrize("name,pe", [("sort_unique", "t5"), ("copy_unique", "rope"),
                                     ("tomita3_nextchar", "nope")])
def test_stacked_attention_capture_equals_each_member(name, pe):
    """Probing stacked (issue 26 item 3): the attention patterns of 3 seeds captured in one
    vmapped pass equal each model's own capture (float32: the batched arithmetic rounds
    differently, |difference| <= 1e-5), at several lengths at once; and the probe's grouping
    keeps a model of another configuration apart."""
    from analysis.probing import capture
    task = trainer.resolve_task(name)
    models = []
    for spec in _specs(task, pe, [0, 1, 2]):
        m = Transformer(spec.model)
        m.reset_parameters(seed=spec.seed)
        models.append(m)
    seqs = capture.probe_sequences(task, [3, 5, 7], per_length=2, seed=3)
    got = capture.capture_trained_stacked(models, seqs)
    for m, g in zip(models, got):
        want = capture.capture_trained(m, seqs)
        assert len(g) == len(want)
        for a, b in zip(g, want):
            assert a.shape == b.shape and float(np.abs(a - b).max()) <= 1e-5
    other = Transformer(_specs(task, "alibi" if pe != "alibi" else "nope", [0])[0].model)
    groups = capture.stack_groups({"a": models[0], "x": other, "b": models[1]})
    assert groups == [["a", "b"], ["x"]]


# --------------------------------------------------------------------------------------------
# issue 35: one loop, stack-wide batches, static shapes, the fit check per member
# --------------------------------------------------------------------------------------------

def _single_batch(spec, task, step):
    """The batch of ``step`` that the separate run of ``spec`` trains on (its own stepper)."""
    st = trainer.TrainState(Transformer(spec.model), None)
    return trainer.SingleStepper(trainer.Member(spec, Path("."), st), task).batch(step)


@pytest.mark.parametrize("prefetch,static", [(0, False), (2, True)])
def test_stack_batches_equal_each_separate_runs_batches_bitwise(prefetch, static):
    """Per-member streams: the stack's batch of step s holds, for member k, exactly the
    separate run's batch of step s (made ahead in a thread or not, padded to a static shape or
    not); everything outside it is padding that no real token reads."""
    task = trainer.resolve_task("sort_unique")
    specs = _specs(task, "ape_learned", [4, 0, 9], {"position_offsets": "random"})
    models = [Transformer(s.model) for s in specs]
    members = [trainer.Member(s, Path("."), trainer.TrainState(m, trainer.make_optimizer(m, s.train)))
               for s, m in zip(specs, models)]
    stepper = stacked.StackStepper(members, task, prefetch=prefetch, static_shapes=static)
    try:
        for step in (3, 4, 5, 11):                  # 11: the producer restarts ahead
            got = stepper.batch(step)
            for k, spec in enumerate(specs):
                alone = _single_batch(spec, task, step).micro[0]
                r, c = alone.inputs.shape
                for name in ("inputs", "targets", "mask", "offsets", "segment_ids"):
                    a, b = getattr(got.mb, name)[k], getattr(alone, name)
                    assert torch.equal(a[:r, :c], b), (step, k, name)
                assert (got.mb.segment_ids[k][r:] == -1).all()
                assert (got.mb.segment_ids[k][:, c:] == -1).all()
                assert (got.mb.mask[k].sum() == alone.mask.sum())
                assert got.steps[k].answer_tokens == int(got.answer[k])
            if static:
                R, C = got.mb.inputs.shape[1:]
                sizes = (8, 12, 16, 24, 32, 48, 64)      # quick preset: batch 64
                assert R in sizes and C in sizes + (specs[0].model.n_ctx,), (R, C)
    finally:
        stepper.close()


def test_static_shape_sizes():
    """The fixed sizes: 8, 12, 16, 24, 32, 48, ...; never below the batch, capped."""
    assert batches.static_shape(1, 1, 32, 100) == (8, 8)
    assert batches.static_shape(9, 13, 32, 100) == (12, 16)
    assert batches.static_shape(17, 25, 32, 100) == (24, 32)
    assert batches.static_shape(30, 70, 32, 100) == (32, 96)
    assert batches.static_shape(30, 70, 30, 80) == (30, 80)        # capped
    assert batches.static_shape(31, 81, 30, 80) == (31, 81)        # never below the batch


def test_batch_producer_order_restart_and_errors():
    made = []

    def make(step):
        made.append(step)
        if step == 7:
            raise ValueError("step 7 cannot be made")
        return step * 10
    p = batches.BatchProducer(make, 2, depth=2)
    assert [p.get(s) for s in (2, 3, 4)] == [20, 30, 40]
    assert p.get(0) == 0                                  # not the next step: restarted
    assert p.get(1) == 10
    with pytest.raises(ValueError, match="step 7"):
        p.get(7)
    p.close()
    assert batches.BatchProducer(make, 0, depth=0).get(5) == 50     # no thread


def test_static_shapes_and_producer_keep_members_equal_separate_runs(tmp_path):
    """The stack with static shapes and a background producer (the CUDA settings, here on a
    CPU) trains each member as its separate run (the tolerance of the module docstring)."""
    task = trainer.resolve_task("sort_unique")
    seeds = [0, 1]
    specs = _specs(task, "t5", seeds)
    got = stacked.train_group(task, specs, [tmp_path / "stack" / str(s) for s in seeds],
                              progress=False, verbose=False, prefetch=2, static_shapes=True)
    for s, res in zip(seeds, got):
        alone = trainer.train(task, "t5", s, preset="quick", config_overrides=SETTINGS,
                              out_dir=tmp_path / "alone" / str(s), progress=False,
                              verbose=False)
        a, b = _losses(res.run_dir), _losses(alone.run_dir)
        assert sorted(a) == sorted(b) and all(abs(a[k] - b[k]) <= 2e-4 for k in a), (a, b)
        done = json.loads((Path(res.run_dir) / "DONE").read_text())
        assert done["stacked_step"] == "static shapes"


def test_captured_step_needs_cuda():
    task = trainer.resolve_task("sort_unique")
    (spec,) = _specs(task, "nope", [0])
    m = Transformer(spec.model)
    mem = trainer.Member(spec, Path("."), trainer.TrainState(m, trainer.make_optimizer(m, spec.train)))
    with pytest.raises(trainer.TrainingError, match="needs a CUDA device"):
        stacked.StackStepper([mem], task, "cpu", capture=True)


#: Huang et al.'s fit check on a tiny sort: seeds 0-3 reach 1/8 ID exact match (>= fit_em) at
#: different steps (measured: 60, 50, 90, 60), so members leave the stack at different steps
FIT = {"train_max_len": 3, "eval_samples": 4, "eval_stride": 2, "log_every": 10,
       "probe_every": 0, "checkpoint_every": 30, "eval_bins": [[1, 3], [4, 6]],
       "bin_samples": 16, "fit_every": 10, "fit_em": 0.1, "steps": 100, "batch_size": 16}


def _fit_specs(task, seeds):
    return [trainer.resolve_spec(task, "nope", s, "quick", config_overrides=FIT) for s in seeds]


def _rows(run_dir):
    return [{k: v for k, v in r.items() if k != "elapsed_s"}
            for r in map(json.loads, open(Path(run_dir) / "metrics.jsonl"))]


def test_fit_check_per_member_equals_separate_runs(tmp_path):
    """A stack runs the fit check per member: each member stops where its separate run stops
    (members at different steps), with the same fit lines, bins and DONE."""
    task = trainer.resolve_task("sort_unique")
    seeds = [0, 1, 2, 3]
    specs = _fit_specs(task, seeds)
    assert all(stacked.stack_key(s) is not None for s in specs)
    got = stacked.train_group(task, specs, [tmp_path / "stack" / str(s) for s in seeds],
                              progress=False, verbose=False)
    stops = []
    for s, res in zip(seeds, got):
        alone = trainer.train(task, "nope", s, preset="quick", config_overrides=FIT,
                              out_dir=tmp_path / "alone" / str(s), progress=False,
                              verbose=False)
        fa = [(r["step"], r["fit_id_em"], r["early_stop"]) for r in _rows(res.run_dir)
              if "fit_id_em" in r]
        fb = [(r["step"], r["fit_id_em"], r["early_stop"]) for r in _rows(alone.run_dir)
              if "fit_id_em" in r]
        assert fa == fb, (s, fa, fb)
        assert res.steps == alone.steps
        stops.append(res.steps)
        a, b = _losses(res.run_dir), _losses(alone.run_dir)
        assert sorted(a) == sorted(b) and all(abs(a[k] - b[k]) <= 2e-4 for k in a)
        bins_a = json.loads((Path(res.run_dir) / "bins.json").read_text())
        bins_b = json.loads((Path(alone.run_dir) / "bins.json").read_text())
        assert [r["correct"] for r in bins_a] == [r["correct"] for r in bins_b]
        assert json.loads((Path(res.run_dir) / "DONE").read_text())["early_stopped"] == \
            json.loads((Path(alone.run_dir) / "DONE").read_text())["early_stopped"]
    assert len(set(stops)) >= 2 and min(stops) < 100, stops      # they left at different steps


@pytest.mark.parametrize("point,at", [("batch", 33), ("fit", 59), ("checkpoint", 59),
                                      ("metrics", 69)])
def test_stack_interrupted_anywhere_resumes_bitwise(point, at, tmp_path):
    """Ctrl-C at a point of a step (before and after members left the stack), then the same
    call again: every member's weights, metrics and accuracy bitwise those of an uninterrupted
    stack."""
    task = trainer.resolve_task("sort_unique")
    seeds = [0, 1, 2, 3]
    specs = _fit_specs(task, seeds)
    full = stacked.train_group(task, specs, [tmp_path / "full" / str(s) for s in seeds],
                               progress=False, verbose=False)
    dirs = [tmp_path / "cut" / str(s) for s in seeds]
    fired = []

    def hook(p, step):
        if p == point and step >= at and not fired:
            fired.append(step)
            os.kill(os.getpid(), signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        stacked.train_group(task, specs, dirs, progress=False, verbose=False, step_hook=hook)
    assert fired
    again = stacked.train_group(task, specs, dirs, progress=False, verbose=False)
    for a, b in zip(full, again):
        pa, pb = Path(a.run_dir), Path(b.run_dir)
        assert (pa / "model.safetensors").read_bytes() == (pb / "model.safetensors").read_bytes()
        assert _rows(pa) == _rows(pb)
        assert (pa / "accuracy.json").read_text() == (pb / "accuracy.json").read_text()
        assert (pa / "bins.json").read_text() == (pb / "bins.json").read_text()


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="CUDA graphs need a CUDA device (none here)")
def test_captured_stack_on_cuda_equals_eager_and_resumes_exactly(tmp_path):
    """On CUDA: the captured step (CUDA graphs, static shapes) trains each member as the
    eager stack does (float noise), and a stack killed after its checkpoint resumes to bitwise
    the uninterrupted captured stack."""
    task = trainer.resolve_task("sort_unique")
    seeds = [0, 1, 2]
    specs = _specs(task, "t5", seeds)
    kw = dict(device="cuda", progress=False, verbose=False)
    cap = stacked.train_group(task, specs, [tmp_path / "cap" / str(s) for s in seeds],
                              capture=True, **kw)
    eager = stacked.train_group(task, specs, [tmp_path / "eager" / str(s) for s in seeds],
                                capture=False, static_shapes=True, **kw)
    for a, b in zip(cap, eager):
        assert json.loads((Path(a.run_dir) / "DONE").read_text())["stacked_step"] == \
            "cuda graph, static shapes"
        la, lb = _losses(a.run_dir), _losses(b.run_dir)
        assert all(abs(la[k] - lb[k]) <= 2e-4 for k in la), (la, lb)
    dirs = [tmp_path / "cut" / str(s) for s in seeds]
    stacked.train_group(task, specs, dirs, capture=True, stop_after=40, **kw)
    again = stacked.train_group(task, specs, dirs, capture=True, **kw)
    for a, b in zip(cap, again):
        assert (Path(a.run_dir) / "model.safetensors").read_bytes() == \
            (Path(b.run_dir) / "model.safetensors").read_bytes()
        assert _losses(a.run_dir) == _losses(b.run_dir)


def test_main_job_on_cuda_is_planned_as_stacks():
    """``rasp demo --device cuda`` (the grid's default stacking on CUDA, :func:`auto_stack`)
    trains the main job's 35 runs as 7 stacks, one per configuration (5 seeds each); on a CPU
    one run per job."""
    from analysis.training.grid import auto_stack
    from rasp_model import PE_NAMES
    runs = [GridRun("sort_unique", pe, s,
                    preset="demo_random_offsets" if pe == "ape_learned" else "demo")
            for pe in PE_NAMES for s in range(5)]
    runs += [GridRun("copy_repeat", "nope", s, preset="demo") for s in range(5)]
    jobs = plan_jobs(runs, list(range(35)), auto_stack("cuda"))
    assert sorted(len(j) for j in jobs) == [5] * 7
    assert all(len({(runs[i].task_name, runs[i].pe) for i in j}) == 1 for j in jobs)
    assert len(plan_jobs(runs, list(range(35)), auto_stack("cpu"))) == 35


def test_undone_step_leaves_weights_and_adamw_state_as_before():
    """The warm-up of a captured step (CUDA) is a step run and undone; checked here on a CPU:
    a stack that ran and undid a step on another batch (first step: AdamW state created, and a
    later step) then trains bitwise as a stack that never did."""
    task = trainer.resolve_task("sort_unique")
    specs = _specs(task, "alibi", [0, 1])

    def stepper():
        members = []
        for spec in specs:
            m = Transformer(spec.model)
            m.reset_parameters(seed=spec.seed)
            members.append(trainer.Member(spec, Path("."), trainer.TrainState(
                m, trainer.make_optimizer(m, spec.train))))
        return stacked.StackStepper(members, task)

    def real(s, step):
        s.set_lr(trainer.lr_at(step, specs[0].train))
        losses = s.forward(s.batch(step))
        s.backward(losses)
        s.opt_step()
    a, b = stepper(), stepper()
    for step in range(3):
        params = list(a.model.params.values())
        stacked.undone_step(params, a.opt, lambda: real(a, 50 + step))
        real(a, step)
        real(b, step)
        for name in a.model.params:
            assert torch.equal(a.model.params[name], b.model.params[name]), (step, name)
            sa, sb = a.opt.state[a.model.params[name]], b.opt.state[b.model.params[name]]
            assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
