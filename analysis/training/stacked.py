"""Stacked training: several runs of one model shape trained as one model with a leading member
dimension, each member exactly the run it replaces.

Every claim of the toolkit compares positional encodings across seeds, so its unit of cost is a
run, and its runs are tiny. :func:`train_group` trains the seeds of one configuration (same
task, PE, preset and settings; :func:`stack_key`) together: the members' weights are stacked
with ``torch.func.stack_module_state`` into tensors ``[member, ...]`` and the one
:class:`rasp_model.Transformer` runs over them with ``torch.func.vmap(functional_call)`` (no
second model); one AdamW step updates all members (AdamW is elementwise, so it is each
member's optimizer), gradient clipping is per member (each member's own global norm).

A member is the run it replaces (``tests/test_stacked.py``):

* the same initial weights (each member is built by :func:`analysis.training.trainer.prepare`,
  seeded by its own seed) and the same batches (step ``s`` of member ``m`` draws from
  ``numpy.random.default_rng([seed_m, s, 1])``, as a separate run);
* its loss is its own mean over its own answer tokens; the group's objective is the sum of the
  members' losses, so each member's gradient is its own;
* its own run directory in today's format (``config.json``, ``metrics.jsonl``, checkpoints,
  ``accuracy.json``, ``model.safetensors``, ``DONE`` with ``stacked_members``), locked,
  committed atomically, resumed from its checkpoint (all members checkpoint at the same steps;
  a group whose members stand at different steps is trained as sub-groups per step);
* a member whose loss becomes NaN or infinite is dropped at that logged step with the error a
  separate run would raise; the others go on.

Not bitwise: members' batches are padded to one ``[member, rows, cols]`` shape (extra rows of
padding, extra columns with segment id -1 or beyond the causal mask, so no real token sees
them), and a matrix product of another shape may sum in another order: the members' losses
equal the separate runs' to ~1e-6 after 50 steps (the test's tolerance is 1e-5).

Stacking needs ``dropout == 0`` (a separate run's dropout masks come from its own torch RNG,
which vmap cannot reproduce), eager float32 or bfloat16 autocast (not ``torch_compile``) and
one micro-batch per step (``batching`` ``"packed"`` or ``"padded"``); other runs train alone
(:func:`why_not_stackable`).

Measured (``python -m bench.bench_training --stacked``, docs/benchmarks.md): on a 2-core CPU a
demo-size step is arithmetic-bound, so stacking saves the per-operation overhead only (a few
tens of percent); it is on a GPU, where a small model leaves the device idle, that one stacked
step does the work of many.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from torch.func import functional_call, stack_module_state, vmap

from analysis.training import trainer
from analysis.training.batches import MicroBatch, make_step, teacher_forced_accuracy
from analysis.training.configs import RunSpec
from analysis.training.evaluation import evaluate_with, label_positions
from analysis.training.runs import RunDirError, RunLock, RunResult, save_checkpoint
from rasp.decode import greedy_decode as rasp_greedy_decode

__all__ = ["stack_key", "why_not_stackable", "StackedModel", "stack_micro_batches",
           "clip_grad_norm_stacked", "train_group", "greedy_decode_stacked", "stacked_answers",
           "GroupMember",
           "GroupOutcome", "run_group_loop"]


def why_not_stackable(spec: RunSpec) -> str | None:
    """Why the run of ``spec`` cannot be a member of a stack (None: it can)."""
    tr = spec.train
    if spec.model.dropout:
        return "dropout > 0 (a run's dropout masks come from its own RNG)"
    if tr.torch_compile:
        return "torch_compile"
    if tr.batching == "bucketed":
        return "bucketed batches (several forward passes per step)"
    if tr.fit_every:
        return "fit_every (members would stop at different steps)"
    if tr.offset_span is not None or tr.eval_bins:
        return "offset_span / eval_bins (not implemented by the stacked loop)"
    return None


def stack_key(spec: RunSpec):
    """Runs with equal keys can train as one stack: the spec without its seed (None when the
    run cannot be stacked, :func:`why_not_stackable`)."""
    if why_not_stackable(spec) is not None:
        return None
    d = spec.to_dict()
    d.pop("seed", None)
    return json.dumps(d, sort_keys=True, default=str)


# ------------------------------------------------------------------------------------------
# the stacked model
# ------------------------------------------------------------------------------------------

class StackedModel:
    """Members' weights stacked ``[member, ...]`` under the names of
    :class:`rasp_model.Transformer`, run by ``vmap(functional_call)`` of one Transformer.

    ``params[name]``: leaf tensors ``[member, *shape]`` (requires_grad); ``base``: the members'
    module on the ``meta`` device (structure only)."""

    def __init__(self, models: Sequence[torch.nn.Module]):
        params, buffers = stack_module_state(list(models))
        self.params = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
        self.buffers = {k: v.detach().clone() for k, v in buffers.items()}
        self.base = copy.deepcopy(models[0]).to("meta")
        self.cfg = models[0].cfg

    @property
    def members(self) -> int:
        return next(iter(self.params.values())).shape[0]

    def __call__(self, tokens, pos_offset=None, segment_ids=None):
        """``tokens [member, batch, seq]`` (offsets / segment ids the same shape or None) ->
        logits ``[member, batch, seq, d_vocab_out]``. Inputs are checked here (token ids in
        range), since the forward cannot read batched values."""
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self.cfg.d_vocab):
            raise ValueError(f"token ids must be in 0..{self.cfg.d_vocab - 1}")
        base = self.base

        def one(p, b, tok, off, seg):
            return functional_call(base, (p, b), (tok,), {"pos_offset": off,
                                                          "segment_ids": seg})
        dims = (0, 0, 0, None if pos_offset is None else 0, None if segment_ids is None else 0)
        return vmap(one, in_dims=dims)(self.params, self.buffers, tokens, pos_offset,
                                       segment_ids)

    def eval(self):
        self.base.eval()
        return self

    def train(self, mode: bool = True):
        self.base.train(mode)
        return self

    def keep(self, index: Sequence[int]) -> dict:
        """Keep only the members ``index`` (in that order); returns ``{old tensor: new
        tensor}`` for moving optimizer state."""
        idx = torch.as_tensor(list(index), dtype=torch.long)
        moved = {}
        for k, v in list(self.params.items()):
            new = v.detach()[idx.to(v.device)].clone().requires_grad_(True)
            moved[v] = new
            self.params[k] = new
        self.buffers = {k: v[idx.to(v.device)] for k, v in self.buffers.items()}
        return moved

    def write_member(self, i: int, model: torch.nn.Module) -> None:
        """Copy member ``i``'s weights into ``model`` (a Transformer of the members' config)."""
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(self.params[name][i])


def stack_micro_batches(mbs: Sequence[MicroBatch], pad: int) -> MicroBatch:
    """One :class:`MicroBatch` ``[member, rows, cols]`` from one micro-batch per member, padded
    to the largest rows and columns: token ``pad``, target 0, mask 0, offset 0, segment id -1
    (extra columns are beyond every real token's segment or causal mask; extra rows are all
    padding). Offsets / segment ids are None when every member's are None."""
    R = max(mb.inputs.shape[0] for mb in mbs)
    C = max(mb.inputs.shape[1] for mb in mbs)
    M = len(mbs)

    def stack(get, fill, dtype):
        ts = [get(mb) for mb in mbs]
        if all(t is None for t in ts):
            return None
        out = torch.full((M, R, C), fill, dtype=dtype)
        for m, t in enumerate(ts):
            if t is None:
                continue
            if t.dim() == 1:                         # per-row offsets -> per token
                t = t[:, None].expand(-1, mbs[m].inputs.shape[1])
            out[m, :t.shape[0], :t.shape[1]] = t
        return out

    return MicroBatch(stack(lambda b: b.inputs, pad, torch.long),
                      stack(lambda b: b.targets, 0, torch.long),
                      stack(lambda b: b.mask, 0.0, torch.float32),
                      stack(lambda b: b.offsets, 0, torch.long),
                      stack(lambda b: b.segment_ids, -1, torch.long))


def clip_grad_norm_stacked(params: Sequence[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Per member, ``torch.nn.utils.clip_grad_norm_`` of that member's gradients: the global
    L2 norm over all its parameters, scaled by ``min(1, max_norm / (norm + 1e-6))``.

    Args:
        params: stacked tensors ``[member, ...]`` with ``.grad``.
    Returns:
        the members' norms before clipping ``[member]``.
    """
    grads = [p.grad for p in params if p.grad is not None]
    norms = torch.stack([torch.linalg.vector_norm(g.reshape(g.shape[0], -1), dim=1)
                         for g in grads])                           # [param, member]
    total = torch.linalg.vector_norm(norms, dim=0)                   # [member]
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(coef.reshape(-1, *([1] * (g.dim() - 1))).to(g.dtype))
    return total


# ------------------------------------------------------------------------------------------
# greedy decoding of all members in one pass
# ------------------------------------------------------------------------------------------

@torch.no_grad()
def greedy_decode_stacked(model: StackedModel, prompts: list[list[int]], max_new_tokens: int,
                          eos: int, batch_size: int = 256, pos_offset: int = 0
                          ) -> list[list[list[int]]]:
    """Greedy decoding of every member from the same prompts (the loop is
    :func:`rasp.decode.greedy_decode`'s, over (member, prompt) rows; each call runs all
    members at once, a member's rows padded to the member with most rows still decoding).

    Returns ``[member][prompt]`` generated ids, as
    :func:`analysis.training.evaluation.greedy_decode` of each member."""
    M, P = model.members, len(prompts)
    device = next(iter(model.params.values())).device
    limit = model.cfg.n_ctx - pos_offset if model.cfg.pe == "ape_learned" else None
    model.eval()

    def next_ids(seq: np.ndarray, rows: Sequence[int]) -> np.ndarray:
        member = np.asarray(rows) // P
        per = [np.nonzero(member == m)[0] for m in range(M)]
        width = max(len(r) for r in per)
        ids = np.empty((M, max(width, 1), seq.shape[1]), dtype=np.int64)
        for m, r in enumerate(per):
            if len(r):
                ids[m, :len(r)] = seq[r]
                ids[m, len(r):] = seq[r[0]]
            else:
                ids[m] = seq[0]
        logits = model(torch.from_numpy(ids).to(device),
                       pos_offset=(torch.full(ids.shape, pos_offset, device=device)
                                   if pos_offset else None))
        nxt = logits[:, :, -1].argmax(-1).cpu().numpy()             # [member, width]
        out = np.empty(len(rows), dtype=np.int64)
        for m, r in enumerate(per):
            out[r] = nxt[m, :len(r)]
        return out

    flat = rasp_greedy_decode(next_ids, [p for _ in range(M) for p in prompts], max_new_tokens,
                              eos, max_seq_len=limit, batch_size=batch_size * M,
                              with_rows=True)
    return [flat[m * P:(m + 1) * P] for m in range(M)]


def stacked_answers(model: StackedModel, task, prompts: list[list[int]], max_new_tokens: int,
                    batch_size: int = 256) -> list[list[list[int]]]:
    """Every member's answers ``[member][prompt]``, as
    :func:`analysis.training.evaluation.model_answers` of each member: greedy decoding
    (:func:`greedy_decode_stacked`), or for a next-set task the per-position labels of one
    forward pass (:func:`analysis.training.evaluation.label_positions`)."""
    if task.kind != "next_set":
        return greedy_decode_stacked(model, prompts, max_new_tokens, task.vocab.eos, batch_size)
    device = next(iter(model.params.values())).device
    model.eval()
    with torch.no_grad():
        out = label_positions(
            lambda ids: model(torch.from_numpy(ids).to(device)[None].expand(
                model.members, *ids.shape)), prompts, batch_size)
    return out or [[] for _ in range(model.members)]


# ------------------------------------------------------------------------------------------
# the group's training loop
# ------------------------------------------------------------------------------------------

@dataclass
class GroupMember:
    """One member of a stacked group: its spec, run directory and state (the member's own
    :class:`~analysis.training.trainer.TrainState`, whose model and optimizer hold the
    member's weights and AdamW state whenever it is checkpointed or finished)."""

    spec: RunSpec
    run_dir: Path
    st: trainer.TrainState
    rng_state: torch.Tensor = field(default_factory=torch.get_rng_state)


def _stacked_optimizer(model: StackedModel, members: list[GroupMember], spec: RunSpec):
    """AdamW over the stacked tensors, with the members' AdamW state (if resumed) stacked."""
    opt = trainer.make_optimizer(None, spec.train, named_parameters=model.params.items())
    for name, P in model.params.items():
        states = []
        for mem in members:
            p = dict(mem.st.model.named_parameters())[name]
            states.append(mem.st.opt.state.get(p))
        if all(s for s in states):
            opt.state[P] = {k: (states[0][k].clone() if k == "step" else
                                torch.stack([s[k] for s in states]).to(P.device))
                            for k in states[0]}
    return opt


def _write_member_state(model: StackedModel, opt, i: int, mem: GroupMember, lr: float) -> None:
    """Member ``i``'s weights and AdamW state into its own model and optimizer (what a
    separate run holds at this step), so its checkpoint and final files are a separate run's."""
    model.write_member(i, mem.st.model)
    named = dict(mem.st.model.named_parameters())
    for name, P in model.params.items():
        s = opt.state.get(P)
        if s:
            mem.st.opt.state[named[name]] = {
                k: (v.clone() if k == "step" else v[i].detach().clone()) for k, v in s.items()}
    for g in mem.st.opt.param_groups:
        g["lr"] = lr


def _move_optimizer_state(opt, moved: dict, index: Sequence[int], spec: RunSpec,
                          model: StackedModel):
    """A new AdamW over the kept members' tensors (:meth:`StackedModel.keep`)."""
    idx = torch.as_tensor(list(index), dtype=torch.long)
    new = trainer.make_optimizer(None, spec.train, named_parameters=model.params.items())
    for old, P in moved.items():
        s = opt.state.get(old)
        if s:
            new.state[P] = {k: (v.clone() if k == "step" else v[idx.to(v.device)].clone())
                            for k, v in s.items()}
    return new


@dataclass
class GroupOutcome:
    """What :func:`run_group_loop` ends with: ``done`` (False when stopped by
    ``stop_after``), ``failed`` (a dropped member's run directory -> its
    :class:`~analysis.training.trainer.TrainingError`), the stacked ``model`` and the
    ``members`` still in it (in the model's order)."""

    done: bool
    failed: dict
    model: StackedModel
    members: list


def run_group_loop(task, members: list[GroupMember], device: str = "cpu", progress: bool = True,
                   stop_after: int | None = None,
                   step_hook: Callable[[str, int], None] | None = None,
                   say: Callable[[str], None] = print) -> "GroupOutcome":
    """Train the members (all at the same step, same configuration but the seed) from their
    step to ``spec.train.steps`` as one stack: :func:`analysis.training.trainer.run_loop`'s
    commit order, per member (metrics line, probe, checkpoint).

    Returns:
        a :class:`GroupOutcome`.
    Raises:
        KeyboardInterrupt: after Ctrl-C, once every member is checkpointed.
    """
    from rasp.progress import progress_bar

    spec0 = members[0].spec
    tr = spec0.train
    hook = step_hook or (lambda point, step: None)
    lengths = trainer.train_lengths(spec0, task)
    probe = trainer.probe_set(spec0, task)
    pad = task.vocab.pad if task.vocab.pad is not None else task.vocab.eos
    model = StackedModel([m.st.model for m in members])
    opt = _stacked_optimizer(model, members, spec0)
    failed: dict = {}
    step0 = members[0].st.step
    total = tr.steps
    t0 = time.time()
    bases = [m.st.elapsed for m in members]
    files = [open(m.run_dir / "metrics.jsonl", "a") for m in members]

    def checkpoint(lr: float) -> None:
        for i, mem in enumerate(members):
            files[i].flush()
            mem.st.elapsed = bases[i] + time.time() - t0
            _write_member_state(model, opt, i, mem, lr)
            torch.set_rng_state(mem.rng_state)          # a separate run's RNG (unused: no dropout)
            save_checkpoint(mem.run_dir, mem.st.model, mem.st.opt, {
                "step": mem.st.step, "elapsed": mem.st.elapsed,
                "tokens_seen": mem.st.tokens_seen,
                "metrics_bytes": (mem.run_dir / "metrics.jsonl").stat().st_size,
                "last_loss": mem.st.last_loss})

    seeds = ",".join(str(m.spec.seed) for m in members)
    bar = progress_bar(show=progress, total=total, initial=step0,
                       desc=f"{spec0.task}/{spec0.pe}/s{seeds}", leave=False, dynamic_ncols=True)
    lr = trainer.lr_at(max(step0 - 1, 0), tr)
    step = step0
    try:
        with trainer._DeferredInterrupt() as interrupt:
            model.train()
            while step < total and members:
                if stop_after is not None and step >= stop_after:
                    return GroupOutcome(False, failed, model, members)
                hook("start", step)
                steps = [make_step(task, lengths, tr.batch_size,
                                   np.random.default_rng([m.spec.seed, step, 1]),
                                   spec0.model.n_ctx, tr.position_offsets, tr.batching)
                         for m in members]
                mb = stack_micro_batches([s.micro[0] for s in steps], pad).to(device)
                hook("batch", step)
                lr = trainer.lr_at(step, tr)
                for g in opt.param_groups:
                    g["lr"] = lr
                with trainer.autocast_context(tr, device):
                    logits = model(mb.inputs, pos_offset=mb.offsets, segment_ids=mb.segment_ids)
                M = len(members)
                ce = torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]).float(), mb.targets.reshape(-1),
                    reduction="none").reshape(M, -1)
                answer = torch.tensor([float(s.answer_tokens) for s in steps], device=ce.device)
                losses = (ce * mb.mask.reshape(M, -1)).sum(1) / answer     # [member]
                hook("forward", step)
                opt.zero_grad(set_to_none=True)
                losses.sum().backward()
                if tr.grad_clip:
                    clip_grad_norm_stacked(list(model.params.values()), tr.grad_clip)
                hook("backward", step)
                opt.step()
                hook("opt_step", step)
                step += 1                                        # the step is committed
                for m, s in zip(members, steps):
                    m.st.step = step
                    m.st.tokens_seen += s.real_tokens
                hook("commit", step - 1)
                logged = step % tr.log_every == 0 or step == total
                if logged:
                    dropped = []
                    for i, (mem, s) in enumerate(zip(members, steps)):
                        mem.st.last_loss = float(losses[i].detach())
                        try:
                            trainer.check_finite_loss(mem.st)
                        except trainer.TrainingError as e:
                            failed[str(mem.run_dir)] = e
                            dropped.append(i)
                            say(f"{mem.run_dir}: {e} (dropped from its stack; the others go on)")
                            continue
                        r, c = s.micro[0].inputs.shape
                        out = [(logits[i, :r, :c].detach(), s.micro[0])]
                        rec = trainer.metrics_record(mem.st, lr, out,
                                                     bases[i] + time.time() - t0)
                        files[i].write(json.dumps(rec) + "\n")
                        files[i].flush()
                    if dropped:
                        keep = [i for i in range(len(members)) if i not in dropped]
                        for i in sorted(dropped, reverse=True):
                            files[i].close()
                        members = [members[i] for i in keep]
                        files = [files[i] for i in keep]
                        bases = [bases[i] for i in keep]
                        moved = model.keep(keep)
                        opt = _move_optimizer_state(opt, moved, keep, spec0, model)
                        if not members:
                            break
                    bar.set_postfix(loss=f"{float(np.mean([m.st.last_loss for m in members])):.3f}")
                    hook("metrics", step - 1)
                if tr.probe_every and (step % tr.probe_every == 0 or step == total):
                    gens = stacked_answers(model, task, [p for p, _ in probe],
                                           max(len(a) for _, a in probe) + 2)
                    for i, gen in enumerate(gens):
                        em = float(np.mean([g == list(a) for g, (_, a) in zip(gen, probe)]))
                        files[i].write(json.dumps({"step": step, "probe_id_em": em,
                                                   "probe_length": spec0.train_lengths[1]})
                                       + "\n")
                        files[i].flush()
                    model.train()
                    hook("probe", step - 1)
                saved = step % tr.checkpoint_every == 0 or step == total
                if saved:
                    checkpoint(lr)
                    hook("checkpoint", step - 1)
                bar.update(1)
                if interrupt.requested:
                    if not saved:
                        checkpoint(lr)
                    say(f"interrupted at step {step}; checkpoints saved, rerun the same "
                        f"command to resume")
                    raise KeyboardInterrupt
    finally:
        bar.close()
        for f in files:
            f.close()
        for i, mem in enumerate(members):
            mem.st.elapsed = bases[i] + time.time() - t0
    for i, mem in enumerate(members):                # the final weights into each member
        _write_member_state(model, opt, i, mem, lr)
    return GroupOutcome(True, failed, model, members)


def _evaluate_members(task, members: list[GroupMember], model: StackedModel,
                      progress: bool) -> list[list]:
    """Every member's evaluation (:func:`analysis.training.evaluation.evaluate_with`) with
    all members decoded in one pass per length."""
    tr = members[0].spec.train

    def decode(prompts, max_new):
        return stacked_answers(model, task, prompts, max_new, tr.eval_batch_size)
    return evaluate_with(decode, model.cfg, len(members), task,
                         list(members[0].spec.eval_lengths), samples=tr.eval_samples,
                         progress=progress)


def train_group(task_name, specs: Sequence[RunSpec], run_dirs: Sequence, device: str = "cpu",
                progress: bool = True, force: bool = False, threads: int | None = None,
                stop_after: int | None = None, verbose: bool = True,
                step_hook: Callable[[str, int], None] | None = None
                ) -> list[RunResult | Exception]:
    """Train the runs ``specs`` (one configuration, different seeds: equal :func:`stack_key`)
    as one stack, each into its run directory, as :func:`analysis.training.trainer.train`
    would one by one.

    Args:
        task_name: a task name or object.
        specs: the members' :class:`~analysis.training.configs.RunSpec` (from
            :func:`analysis.training.trainer.resolve_spec`).
        run_dirs: their run directories (each locked for the whole call).
        stop_after, step_hook: as :func:`analysis.training.trainer.train` (tests).

    Returns:
        per member, its :class:`~analysis.training.runs.RunResult` (``reused`` when it was
        finished; ``finished=False`` when stopped by ``stop_after``) or the exception that
        ended it (:class:`~analysis.training.runs.RunDirError`: locked, another
        configuration, corrupt; :class:`~analysis.training.trainer.TrainingError`: diverged).

    Raises:
        TrainingError: the specs differ in more than their seeds, or cannot be stacked.
        KeyboardInterrupt: Ctrl-C (every member is checkpointed; rerun to resume).
    """
    t_start = time.time()
    task = trainer.resolve_task(task_name)
    device = trainer._check_device(device)
    specs, run_dirs = list(specs), [Path(d) for d in run_dirs]
    if len(specs) != len(run_dirs):
        raise trainer.TrainingError("one run directory per spec is needed")
    keys = {stack_key(s) for s in specs}
    if None in keys or len(keys) != 1:
        why = next((why_not_stackable(s) for s in specs if why_not_stackable(s)), None)
        raise trainer.TrainingError(
            "these runs cannot train as one stack: " + (why or "their configurations differ "
                                                               "in more than the seed"))
    if len({str(d.resolve()) for d in run_dirs}) != len(run_dirs):
        raise trainer.TrainingError("two members of a stack write the same run directory")
    trainer._set_threads(device, threads)
    say = print if verbose else (lambda *a, **k: None)
    results: list = [None] * len(specs)
    with contextlib.ExitStack() as locks:
        active: list[tuple[int, GroupMember]] = []
        for i, (spec, rd) in enumerate(zip(specs, run_dirs)):
            try:
                locks.enter_context(RunLock(rd))
                st = trainer.prepare(spec, rd, device, force, say)
            except (RunDirError, trainer.TrainingError) as e:
                results[i] = e
                continue
            if isinstance(st, RunResult):
                results[i] = st
                continue
            active.append((i, GroupMember(spec, rd, st, torch.get_rng_state())))
        by_step: dict[int, list] = {}
        for i, mem in active:
            by_step.setdefault(mem.st.step, []).append((i, mem))
        for _, group in sorted(by_step.items()):
            idx = [i for i, _ in group]
            mems = [m for _, m in group]
            earlier = {str(m.run_dir): m.st.elapsed for m in mems}
            out = run_group_loop(task, mems, device, progress, stop_after, step_hook, say)
            for i, m in zip(idx, mems):
                if str(m.run_dir) in out.failed:
                    results[i] = out.failed[str(m.run_dir)]
            where = {str(m.run_dir): i for i, m in zip(idx, mems)}
            if not out.done:
                for m in out.members:
                    results[where[str(m.run_dir)]] = RunResult(
                        str(m.run_dir), task.name, m.spec.pe, m.spec.seed, m.spec.preset,
                        m.st.step, finished=False, train_seconds=m.st.elapsed,
                        params=m.st.model.num_parameters())
                continue
            if not out.members:
                continue
            accs = _evaluate_members(task, out.members, out.model, progress)
            for m, acc in zip(out.members, accs):
                i = where[str(m.run_dir)]
                results[i] = trainer.finish(
                    m.spec, task, m.run_dir, m.st, t_start - earlier[str(m.run_dir)], progress,
                    accuracy=acc, extra={"stacked_members": len(mems)})
                say(results[i].summary_line())
    return results
