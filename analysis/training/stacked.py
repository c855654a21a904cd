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
  separate run would raise; the others go on;
* the fit check (``fit_every``) runs per member: a member that fits is checkpointed and leaves
  the stack at the step its separate run stops.

The loop is :func:`analysis.training.trainer.train_steps` (the one commit order) over a
:class:`StackStepper`; on CUDA the step runs on static shapes as CUDA graphs
(:class:`CapturedStep`) with batches made ahead by a background thread.

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
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from torch.func import functional_call, stack_module_state, vmap

from analysis.training import trainer
from analysis.training.batches import BatchProducer, stack_micro_batches, static_shape
from analysis.training.configs import RunSpec
from analysis.training.evaluation import evaluate_with, label_positions, teacher_forced_em_with
from analysis.training.runs import RunDirError, RunLock, RunResult
from rasp.decode import greedy_decode as rasp_greedy_decode

__all__ = ["stack_key", "why_not_stackable", "StackedModel", "stack_micro_batches",
           "clip_grad_norm_stacked", "train_group", "greedy_decode_stacked", "stacked_answers",
           "StackStepper", "StackBatch", "CapturedStep", "undone_step", "CUDA_GRAPHS_ENV"]


#: ``RASP_CUDA_GRAPHS=0`` turns the captured step off (the eager stacked step on CUDA)
CUDA_GRAPHS_ENV = "RASP_CUDA_GRAPHS"


def why_not_stackable(spec: RunSpec) -> str | None:
    """Why the run of ``spec`` cannot be a member of a stack (None: it can)."""
    tr = spec.train
    if spec.model.dropout:
        return "dropout > 0 (a run's dropout masks come from its own RNG)"
    if tr.torch_compile:
        return "torch_compile"
    if tr.batching == "bucketed":
        return "bucketed batches (several forward passes per step)"
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

    def __call__(self, tokens, pos_offset=None, segment_ids=None, check_ids: bool = True):
        """``tokens [member, batch, seq]`` (offsets / segment ids the same shape or None) ->
        logits ``[member, batch, seq, d_vocab_out]``. Token ids are checked here (in range),
        since the forward cannot read batched values; ``check_ids=False`` skips the check (and
        its device-to-host read) for ids already known valid (training batches, a captured
        step). Raises ValueError for an id out of range."""
        if check_ids and tokens.numel() and (int(tokens.min()) < 0
                                             or int(tokens.max()) >= self.cfg.d_vocab):
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
    top = model.cfg.encoding.max_positions(model.cfg)      # a learned APE's n_ctx, else None
    limit = None if top is None else top - pos_offset
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
# the stack's stepper (one step of every member) and its captured form on CUDA
# ------------------------------------------------------------------------------------------

def _stacked_optimizer(model: StackedModel, members: list, spec: RunSpec, capturable_on=None):
    """AdamW over the stacked tensors, with the members' AdamW state (if resumed) stacked."""
    opt = trainer.make_optimizer(None, spec.train, named_parameters=model.params.items(),
                                 capturable_on=capturable_on)
    for name, P in model.params.items():
        states = []
        for mem in members:
            p = dict(mem.st.model.named_parameters())[name]
            states.append(mem.st.opt.state.get(p))
        if all(s for s in states):
            opt.state[P] = {k: (_step_count(states[0][k], capturable_on) if k == "step" else
                                torch.stack([s[k] for s in states]).to(P.device))
                            for k in states[0]}
    return opt


def _step_count(t: torch.Tensor, device) -> torch.Tensor:
    """AdamW's step count: on ``device`` for a capturable optimizer, else on the CPU (where a
    separate run's AdamW keeps it)."""
    t = t.detach().clone().to(torch.float32)
    return t.to(device) if device is not None else t.cpu()


def _write_member_state(model: StackedModel, opt, i: int, mem: trainer.Member,
                        lr: float) -> None:
    """Member ``i``'s weights and AdamW state into its own model and optimizer (what a
    separate run holds at this step), so its checkpoint and final files are a separate run's."""
    model.write_member(i, mem.st.model)
    named = dict(mem.st.model.named_parameters())
    for name, P in model.params.items():
        s = opt.state.get(P)
        if s:
            mem.st.opt.state[named[name]] = {
                k: (_step_count(v, None) if k == "step" else v[i].detach().clone())
                for k, v in s.items()}
    for g in mem.st.opt.param_groups:
        g["lr"] = lr


def _move_optimizer_state(opt, moved: dict, index: Sequence[int], spec: RunSpec,
                          model: StackedModel, capturable_on=None):
    """A new AdamW over the kept members' tensors (:meth:`StackedModel.keep`)."""
    idx = torch.as_tensor(list(index), dtype=torch.long)
    new = trainer.make_optimizer(None, spec.train, named_parameters=model.params.items(),
                                 capturable_on=capturable_on)
    for old, P in moved.items():
        s = opt.state.get(old)
        if s:
            new.state[P] = {k: (v.clone() if k == "step" else v[idx.to(v.device)].clone())
                            for k, v in s.items()}
    return new


@dataclass
class StackBatch:
    """One step of a stack: the members' own :class:`~analysis.training.batches.Step` (each
    its separate run's), their first micro-batches stacked ``[member, rows, cols]`` (``mb``,
    on the host; pinned on CUDA) and each member's answer-token count ``[member]``."""

    steps: list
    mb: object
    answer: torch.Tensor


class StackStepper(trainer.Stepper):
    """A stack of M members (M >= 1) of one configuration (:func:`stack_key`) as one
    :class:`StackedModel`, stepped by :func:`analysis.training.trainer.train_steps`.

    Batches: every member's :func:`~analysis.training.trainer.batch_maker` step (its own seed),
    stacked by :func:`~analysis.training.batches.stack_micro_batches`, made by a
    :class:`~analysis.training.batches.BatchProducer` ``prefetch`` steps ahead in a background
    thread (default: 2 on CUDA, 0 on a CPU, where the thread would take the core the step
    needs). ``static_shapes`` (default: on CUDA): batches padded up to
    :func:`~analysis.training.batches.static_shape` sizes. ``capture`` (default: on CUDA with
    static shapes and float32, unless ``$RASP_CUDA_GRAPHS`` is ``0``): the whole step (forward, backward, per-member clipping, AdamW)
    runs as one CUDA graph per shape (:class:`CapturedStep`).

    Raises:
        TrainingError: ``capture`` without CUDA or without static shapes.
    """

    drops_failed = True

    def __init__(self, members: list, task, device: str = "cpu", prefetch: int | None = None,
                 static_shapes: bool | None = None, capture: bool | None = None):
        self.members = list(members)
        self.task, self.device = task, device
        spec = self.spec = members[0].spec
        self.tr = spec.train
        cuda = str(device).startswith("cuda")
        self.static_shapes = cuda if static_shapes is None else bool(static_shapes)
        if capture is None:
            capture = (cuda and self.static_shapes and self.tr.autocast == "none"
                       and os.environ.get(CUDA_GRAPHS_ENV, "1") != "0")
        if capture and not cuda:
            raise trainer.TrainingError("a captured step (CUDA graphs) needs a CUDA device; "
                                        "this run is on " + str(device))
        if capture and not self.static_shapes:
            raise trainer.TrainingError("a captured step needs static shapes")
        self.capturable_on = torch.device(device) if capture else None
        self.pin = cuda
        self.prefetch = (2 if cuda else 0) if prefetch is None else int(prefetch)
        self._make = trainer.batch_maker(spec, task)
        vocab = task.vocab
        self.pad = vocab.pad if vocab.pad is not None else vocab.eos
        self.max_rows = self.tr.batch_size
        self.model = StackedModel([m.st.model for m in self.members])
        self.opt = _stacked_optimizer(self.model, self.members, spec, self.capturable_on)
        self.captured = CapturedStep(self) if capture else None
        self._producer = None
        self._logits = None

    # batches ---------------------------------------------------------------------------
    def _maker(self):
        seeds = [m.spec.seed for m in self.members]

        def make(step: int) -> StackBatch:
            steps = [self._make(seed, step) for seed in seeds]
            mbs = [st.micro[0] for st in steps]
            shape = None
            if self.static_shapes:
                shape = static_shape(max(mb.inputs.shape[0] for mb in mbs),
                                     max(mb.inputs.shape[1] for mb in mbs), self.max_rows,
                                     self.spec.model.n_ctx)
            answer = torch.tensor([float(st.answer_tokens) for st in steps])
            return StackBatch(steps, stack_micro_batches(mbs, self.pad, shape, self.pin),
                              answer.pin_memory() if self.pin else answer)
        return make

    def batch(self, step):
        if self._producer is None:
            self._producer = BatchProducer(self._maker(), step, self.prefetch)
        return self._producer.get(step)

    def real_tokens(self, batch):
        return [st.real_tokens for st in batch.steps]

    # the step --------------------------------------------------------------------------
    def set_lr(self, lr):
        for g in self.opt.param_groups:
            if isinstance(g["lr"], torch.Tensor):
                g["lr"].fill_(lr)
            else:
                g["lr"] = lr

    def losses_of(self, mb, answer):
        """Each member's mean loss over its answer tokens ``[member]`` of the stacked batch
        ``mb`` (on the device); sets the logits of :meth:`outputs`."""
        with trainer.autocast_context(self.tr, self.device):
            logits = self.model(mb.inputs, pos_offset=mb.offsets, segment_ids=mb.segment_ids,
                                check_ids=False)
        M = logits.shape[0]
        ce = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(), mb.targets.reshape(-1),
            reduction="none").reshape(M, -1)
        self._logits = logits
        return (ce * mb.mask.reshape(M, -1)).sum(1) / answer

    def backward_of(self, losses):
        """Zero the gradients, backpropagate the sum of the members' losses, clip per member."""
        self.opt.zero_grad(set_to_none=True)
        losses.sum().backward()
        if self.tr.grad_clip:
            clip_grad_norm_stacked(list(self.model.params.values()), self.tr.grad_clip)

    def forward(self, batch):
        if self.captured is not None:           # the whole step, replayed
            losses, self._logits = self.captured.run(batch)
            return losses
        mb = batch.mb.to(self.device)
        return self.losses_of(mb, batch.answer.to(self.device))

    def backward(self, losses):
        if self.captured is None:
            self.backward_of(losses)

    def opt_step(self):
        if self.captured is None:
            self.opt.step()

    def outputs(self, batch, i):
        one = batch.steps[i].micro[0]
        r, c = one.inputs.shape
        return [(self._logits[i, :r, :c].detach(), one)]

    # evaluation during training --------------------------------------------------------
    def answers(self, task, prompts, max_new_tokens):
        return stacked_answers(self.model, task, prompts, max_new_tokens)

    def fit_counts(self, task, data, batch_size):
        self.model.eval()
        M = self.model.members
        return teacher_forced_em_with(
            lambda x: self.model(x[None].expand(M, *x.shape)), self.model.cfg, M, task, data,
            batch_size, self.device)

    def train_mode(self):
        self.model.train()

    # members ---------------------------------------------------------------------------
    def sync(self, i, lr):
        _write_member_state(self.model, self.opt, i, self.members[i], lr)

    def drop(self, keep):
        super().drop(keep)
        self.close()                            # the producer makes the kept members' batches
        if not keep:
            return
        moved = self.model.keep(keep)
        self.opt = _move_optimizer_state(self.opt, moved, keep, self.spec, self.model,
                                         self.capturable_on)
        if self.captured is not None:
            self.captured = CapturedStep(self)  # new tensors: captured again

    def close(self):
        if self._producer is not None:
            self._producer.close()
            self._producer = None


def undone_step(params: Sequence[torch.Tensor], opt: torch.optim.Optimizer, step) -> None:
    """Run ``step()`` (an optimizer step of ``params``) and undo it: the parameters and the
    optimizer's state are restored to their values before (state that ``step`` created, e.g.
    AdamW's on its first step, is zeroed, as a fresh AdamW state is). The warm-up of
    :class:`CapturedStep`: lazy initialisation happens, the values do not change."""
    saved_p = [p.detach().clone() for p in params]
    saved_o = {p: {k: v.clone() for k, v in opt.state[p].items()}
               for p in params if p in opt.state}
    step()
    with torch.no_grad():
        for p, v in zip(params, saved_p):
            p.copy_(v)
        for p in params:
            for k, v in opt.state.get(p, {}).items():
                if p in saved_o and k in saved_o[p]:
                    v.copy_(saved_o[p][k])
                else:
                    v.zero_()


class CapturedStep:
    """A stack's whole optimizer step (forward, backward, per-member clipping, AdamW) captured
    as one CUDA graph per batch shape (``torch.cuda.CUDAGraph``) and replayed; all graphs
    share one memory pool.

    Exact: every real step runs as a replay. The first time a shape occurs, one step is run
    eagerly on a side stream to warm up (lazy initialisation: cuBLAS, AdamW state) and then
    undone (weights and AdamW state restored), the step is captured (capture executes
    nothing) and replayed; so a resumed run, which captures again, replays the same graphs on
    the same values. Needs static shapes (:func:`~analysis.training.batches.static_shape`), a
    capturable AdamW (:func:`analysis.training.trainer.make_optimizer`) and float32."""

    def __init__(self, stepper: StackStepper):
        self.s = stepper
        self.graphs: dict = {}
        self.pool = None

    def _static(self, batch):
        mb, dev = batch.mb, self.s.device

        def buf(t):
            return None if t is None else torch.empty(t.shape, dtype=t.dtype, device=dev)
        return type(mb)(buf(mb.inputs), buf(mb.targets), buf(mb.mask), buf(mb.offsets),
                        buf(mb.segment_ids)), torch.empty(batch.answer.shape, device=dev)

    @staticmethod
    def _fill(static, batch) -> None:
        mb, answer = static
        for dst, src in ((mb.inputs, batch.mb.inputs), (mb.targets, batch.mb.targets),
                         (mb.mask, batch.mb.mask), (mb.offsets, batch.mb.offsets),
                         (mb.segment_ids, batch.mb.segment_ids)):
            if dst is not None:
                dst.copy_(src, non_blocking=True)
        answer.copy_(batch.answer, non_blocking=True)

    def _capture(self, batch):
        s = self.s
        params = list(s.model.params.values())
        static = self._static(batch)
        self._fill(static, batch)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):           # warm-up step, undone
            undone_step(params, s.opt, lambda: (s.backward_of(s.losses_of(*static)),
                                                s.opt.step()))
        torch.cuda.current_stream().wait_stream(side)
        s.opt.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            losses = s.losses_of(*static)
            s.backward_of(losses)
            s.opt.step()
        self.pool = graph.pool()
        return graph, static, losses, s._logits

    def run(self, batch):
        """Run one real step on ``batch``; returns ``(losses [member], logits)`` (static
        tensors, valid until the next step)."""
        shape = tuple(batch.mb.inputs.shape)
        if shape not in self.graphs:
            self.graphs[shape] = self._capture(batch)
        graph, static, losses, logits = self.graphs[shape]
        self._fill(static, batch)
        graph.replay()
        return losses, logits


# ------------------------------------------------------------------------------------------
# a group of runs
# ------------------------------------------------------------------------------------------

def _evaluate_members(task, members: list, model: StackedModel,
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
                step_hook: Callable[[str, int], None] | None = None,
                prefetch: int | None = None, static_shapes: bool | None = None,
                capture: bool | None = None) -> list[RunResult | Exception]:
    """Train the runs ``specs`` (one configuration, different seeds: equal :func:`stack_key`)
    as one stack, each into its run directory, as :func:`analysis.training.trainer.train`
    would one by one: :func:`analysis.training.trainer.train_steps` of a
    :class:`StackStepper`.

    Args:
        task_name: a task name or object.
        specs: the members' :class:`~analysis.training.configs.RunSpec` (from
            :func:`analysis.training.trainer.resolve_spec`).
        run_dirs: their run directories (each locked for the whole call).
        stop_after, step_hook: as :func:`analysis.training.trainer.train` (tests).
        prefetch, static_shapes, capture: :class:`StackStepper` (defaults: by device).

    Returns:
        per member, its :class:`~analysis.training.runs.RunResult` (``reused`` when it was
        finished; ``finished=False`` when stopped by ``stop_after``) or the exception that
        ended it (:class:`~analysis.training.runs.RunDirError`: locked, another
        configuration, corrupt; :class:`~analysis.training.trainer.TrainingError`: diverged).

    Raises:
        TrainingError: the specs differ in more than their seeds, or cannot be stacked; a
            captured step asked for without CUDA.
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
        active: list[tuple[int, trainer.Member]] = []
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
            active.append((i, trainer.Member(spec, rd, st, torch.get_rng_state())))
        by_step: dict[int, list] = {}
        for i, mem in active:
            by_step.setdefault(mem.st.step, []).append((i, mem))
        where = {str(m.run_dir): i for i, m in active}
        for _, group in sorted(by_step.items()):
            mems = [m for _, m in group]
            earlier = {str(m.run_dir): m.st.elapsed for m in mems}
            stepper = StackStepper(mems, task, device, prefetch, static_shapes, capture)
            out = trainer.train_steps(stepper, task, progress, stop_after, step_hook, say)
            for rd, e in out.failed.items():
                results[where[rd]] = e
            if not out.done:
                for m in out.stopped + stepper.members:
                    results[where[str(m.run_dir)]] = RunResult(
                        str(m.run_dir), task.name, m.spec.pe, m.spec.seed, m.spec.preset,
                        m.st.step, finished=False, train_seconds=m.st.elapsed,
                        params=m.st.model.num_parameters())
                continue
            extra = {"stacked_members": len(mems)}
            if stepper.static_shapes or stepper.captured is not None:
                extra["stacked_step"] = ("cuda graph, static shapes" if stepper.captured
                                         else "static shapes")
            accs = (_evaluate_members(task, stepper.members, stepper.model, progress)
                    if stepper.members else [])
            for m, acc in [(m, None) for m in out.stopped] + list(zip(stepper.members, accs)):
                i = where[str(m.run_dir)]
                results[i] = trainer.finish(
                    m.spec, task, m.run_dir, m.st, t_start - earlier[str(m.run_dir)], progress,
                    accuracy=acc, extra=extra)
                say(results[i].summary_line())
    return results
