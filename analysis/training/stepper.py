"""One optimizer step of training, for one model or a stack: the :class:`Stepper` interface,
:class:`SingleStepper` (one :class:`~rasp_model.Transformer`), what a step's batch, learning
rate and precision are (:func:`batch_maker`, :func:`lr_at`, :func:`autocast_context`), and
:func:`optimizer_step`, the step itself in its one order: batch, learning rate, forward,
backward (zero the gradients, backpropagate, clip), ``opt.step()``.

:func:`analysis.training.trainer.train_steps` (the one training loop) calls
:func:`optimizer_step` once per step and commits the step after it; the benchmarks
(``bench/bench_training.py``, ``bench_batches.py``, ``bench_gpu_stack.py``) time the same
function, so they measure the product's step, not a copy of it.
:class:`analysis.training.stacked.StackStepper` is the stacked implementation. The trainer
re-exports every name here.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np
import torch

from analysis.training.batches import epoch_batch, fixed_train_set, make_step, step_loss
from analysis.training.configs import RunSpec, TrainConfig
from analysis.training.evaluation import model_answers, teacher_forced_em
from rasp_model import Transformer
from tasks.base import drawn_lengths

__all__ = ["lr_at", "make_optimizer", "TrainState", "autocast_context", "train_lengths",
           "batch_maker", "offset_positions", "Member", "Stepper", "SingleStepper", "StepResult",
           "optimizer_step"]


def lr_at(step: int, train: TrainConfig) -> float:
    """Learning rate of optimizer step ``step`` (0-based): linear warmup over
    ``warmup_steps``, then cosine / linear decay to ``lr * min_lr_ratio`` (or constant)."""
    lr, steps, warm = train.lr, train.steps, train.warmup_steps
    if warm > 0 and step < warm:
        return lr * (step + 1) / warm
    if train.schedule == "constant" or steps <= warm:
        return lr
    p = min(1.0, (step - warm) / max(1, steps - warm))
    lo = lr * train.min_lr_ratio
    if train.schedule == "cosine":
        return lo + (lr - lo) * 0.5 * (1 + math.cos(math.pi * p))
    return lr + (lo - lr) * p


def make_optimizer(model: Transformer | None, train: TrainConfig,
                   named_parameters=None, capturable_on=None) -> torch.optim.Optimizer:
    """AdamW with weight decay on the weight matrices (``W_*``) only.

    The parameters are ``model.named_parameters()``, or ``named_parameters`` (``(name,
    tensor)`` pairs, e.g. the stacked ``[member, ...]`` tensors of
    :mod:`analysis.training.stacked`: AdamW is elementwise, so one optimizer over stacked
    tensors is each member's optimizer). ``capturable_on``: a CUDA device; the optimizer is
    then safe to capture in a CUDA graph (``capturable=True``, its step counts and learning
    rate tensors on that device: set the rate with ``group["lr"].fill_(lr)``)."""
    decay, no_decay = [], []
    pairs = model.named_parameters() if named_parameters is None else named_parameters
    for name, p in pairs:
        (decay if name.rsplit(".", 1)[-1].startswith("W_") else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": train.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    if capturable_on is not None:
        for g in groups:
            g["lr"] = torch.tensor(float(train.lr), device=capturable_on)
        return torch.optim.AdamW(groups, lr=torch.tensor(float(train.lr), device=capturable_on),
                                 betas=tuple(train.betas), capturable=True, foreach=True)
    return torch.optim.AdamW(groups, lr=train.lr, betas=tuple(train.betas))


@dataclass
class TrainState:
    """The state of a run in progress: what a checkpoint saves (with the model and
    optimizer). ``step`` counts completed optimizer steps."""

    model: Transformer
    opt: torch.optim.Optimizer
    step: int = 0
    elapsed: float = 0.0
    tokens_seen: int = 0
    last_loss: float | None = None
    early_stopped: bool = False     # the fit check (``fit_every``) stopped training


def autocast_context(tr: TrainConfig, device: str):
    """The precision of a training forward: ``torch.autocast`` to bfloat16 when
    ``tr.autocast == "bfloat16"`` (on ``device``'s type: cpu or cuda), else a no-op."""
    if tr.autocast == "none":
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)


def train_lengths(spec: RunSpec, task) -> list[int]:
    """The training lengths of a run, drawn uniformly by :func:`make_step` (a length listed
    k times weighs k): :meth:`tasks.base.Task.drawn_lengths` over the run's range
    ``train_min_len..train_max_len``."""
    return drawn_lengths(task, spec.train.train_min_len, spec.train.train_max_len)


def batch_maker(spec: RunSpec, task, length_buckets: int = 4) -> Callable:
    """``make(seed, step)``: the :class:`~analysis.training.batches.Step` of optimizer step
    ``step`` of the run of ``spec`` with seed ``seed`` (examples drawn from
    ``default_rng([seed, step, 1])``, or read in order from the fixed training set of
    ``train_set``, which is drawn here once; the offsets from that generator).
    ``length_buckets``: at most this many passes of ``"bucketed"`` batching (the trainer's 4;
    ``bench/bench_batches.py`` compares others)."""
    tr = spec.train
    lengths, n_pos = train_lengths(spec, task), offset_positions(spec)
    fixed = fixed_train_set(task, lengths, tr.train_set, tr.train_set_seed) \
        if tr.train_set else None

    def make(seed: int, step: int):
        return make_step(task, lengths, tr.batch_size, np.random.default_rng([seed, step, 1]),
                         n_pos, tr.position_offsets, tr.batching, length_buckets,
                         examples=None if fixed is None else epoch_batch(fixed, step,
                                                                        tr.batch_size),
                         offset_range=tr.offset_range)
    return make


def offset_positions(spec: RunSpec) -> int:
    """The positions random offsets keep every training example within: ``offset_span`` when
    set (a paper's generator, :class:`~analysis.training.configs.TrainConfig`), else
    ``n_ctx``."""
    return spec.train.offset_span or spec.model.n_ctx


@dataclass
class Member:
    """One run trained by :func:`analysis.training.trainer.train_steps`: its spec, run
    directory and state.

    ``rng_state``: the torch RNG state its checkpoints save (a stack's members: the state after
    :func:`analysis.training.trainer.prepare`, as their separate runs would hold it; None: the
    process's own RNG, which a single model's dropout advances)."""

    spec: RunSpec
    run_dir: Path
    st: TrainState
    rng_state: torch.Tensor | None = None

    @classmethod
    def fresh(cls, spec: RunSpec, model: Transformer) -> "Member":
        """``model`` at step 0 with a fresh AdamW (:func:`make_optimizer`) and no run
        directory: what a benchmark steps (it writes no files)."""
        return cls(spec, Path("."), TrainState(model, make_optimizer(model, spec.train)))


class Stepper:
    """What :func:`analysis.training.trainer.train_steps` drives: the models of ``members``
    (one model, or a stack of M members sharing one configuration but the seed) and how one
    optimizer step runs on them.
    Every member stands at the same step. Implementations: :class:`SingleStepper` (one model)
    and :class:`analysis.training.stacked.StackStepper` (``[member, ...]`` tensors)."""

    #: True when a member whose loss diverges is dropped and the others go on (a stack);
    #: False: its :class:`TrainingError` ends the loop (one model)
    drops_failed = False
    members: list[Member]

    def batch(self, step: int):
        """The batches of optimizer step ``step`` of every member (each from
        ``numpy.random.default_rng([seed, step, 1])``)."""
        raise NotImplementedError

    def real_tokens(self, batch) -> list[int]:
        """Per member, the real (non-padding) input tokens of ``batch``."""
        raise NotImplementedError

    def set_lr(self, lr: float) -> None:
        raise NotImplementedError

    def forward(self, batch) -> torch.Tensor:
        """Each member's mean loss over its answer tokens, ``[member]`` (autograd attached)."""
        raise NotImplementedError

    def backward(self, losses: torch.Tensor) -> None:
        """Zero the gradients, backpropagate, clip (each member its own global norm)."""
        raise NotImplementedError

    def opt_step(self) -> None:
        raise NotImplementedError

    def outputs(self, batch, i: int) -> list:
        """Member ``i``'s ``(logits, micro_batch)`` pairs of the last forward
        (:func:`metrics_record`)."""
        raise NotImplementedError

    def answers(self, task, prompts: list, max_new_tokens: int) -> list:
        """Every member's answers ``[member][prompt]`` (greedy decoding or next-set labels)."""
        raise NotImplementedError

    def fit_counts(self, task, data: list, batch_size: int) -> list[tuple]:
        """Per member, :func:`~analysis.training.evaluation.teacher_forced_em` on ``data``."""
        raise NotImplementedError

    def sync(self, i: int, lr: float) -> None:
        """Member ``i``'s weights, AdamW state and RNG into its own ``st.model``/``st.opt``
        (what its checkpoint and final files are written from)."""

    def drop(self, keep: list[int]) -> None:
        """Keep only the members ``keep`` (indices, in order)."""
        self.members = [self.members[i] for i in keep]

    def train_mode(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Stop background work (batch producers)."""


class SingleStepper(Stepper):
    """One model (:class:`Transformer`), exactly the run of
    :func:`analysis.training.trainer.train`: eager or ``torch_compile``, float32 or bfloat16
    autocast, any ``batching``, dropout. ``make(seed, step)``: the batches (default:
    :func:`batch_maker` of the member's spec; a benchmark of another layout passes its own)."""

    def __init__(self, member: Member, task, device: str = "cpu",
                 make: Callable | None = None):
        self.members = [member]
        self.task, self.device = task, device
        spec, self.model, self.opt = member.spec, member.st.model, member.st.opt
        self.tr = spec.train
        self.forward_model = (torch.compile(self.model, dynamic=True) if self.tr.torch_compile
                              else self.model)
        self.seed = spec.seed
        self._make = batch_maker(spec, task) if make is None else make
        self._loss = self._outputs = None

    @classmethod
    def fresh(cls, spec: RunSpec, task, model: Transformer, device: str = "cpu",
              make: Callable | None = None) -> "SingleStepper":
        """The stepper :func:`analysis.training.trainer.run_loop` would build for
        :meth:`Member.fresh` of ``model``: what a benchmark times."""
        return cls(Member.fresh(spec, model), task, device, make)

    def batch(self, step):
        return self._make(self.seed, step)

    def real_tokens(self, batch):
        return [batch.real_tokens]

    def set_lr(self, lr):
        for g in self.opt.param_groups:
            g["lr"] = lr

    def forward(self, batch):
        with autocast_context(self.tr, self.device):
            self._loss, self._outputs = step_loss(self.forward_model, batch, self.device)
        return self._loss.reshape(1)

    def backward(self, losses):
        self.opt.zero_grad(set_to_none=True)
        self._loss.backward()
        if self.tr.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.tr.grad_clip)

    def opt_step(self):
        self.opt.step()

    def outputs(self, batch, i):
        return self._outputs

    def answers(self, task, prompts, max_new_tokens):
        return [model_answers(self.model, task, prompts, max_new_tokens)]

    def fit_counts(self, task, data, batch_size):
        return [teacher_forced_em(self.model, task, data, batch_size)]

    def train_mode(self):
        self.model.train()


class StepResult(NamedTuple):
    """What :func:`optimizer_step` did: the step's ``batch`` (the stepper's kind), the
    learning rate ``lr`` it set and each member's loss ``losses [member]`` (before the
    update)."""

    batch: object
    lr: float
    losses: torch.Tensor


def _no_hook(point: str, step: int) -> None:
    pass


def optimizer_step(stepper: Stepper, step: int,
                   hook: Callable[[str, int], None] | None = None) -> StepResult:
    """Optimizer step ``step`` (0-based) of every member of ``stepper``: its batch
    (``stepper.batch(step)``), the learning rate :func:`lr_at` of the step, the forward pass,
    the backward pass (zero the gradients, backpropagate, clip) and ``opt.step()``, in that
    order. Commits nothing: the caller advances the members' step counters (as
    :func:`analysis.training.trainer.train_steps` does) or does not (a benchmark).

    Args:
        hook: called as ``hook(point, step)`` at ``"start"``, ``"batch"``, ``"forward"``,
            ``"backward"`` and ``"opt_step"`` (the first five of
            :data:`analysis.training.trainer.STEP_POINTS`).

    Returns:
        a :class:`StepResult`.
    """
    hook = hook or _no_hook
    hook("start", step)
    batch = stepper.batch(step)
    hook("batch", step)
    lr = lr_at(step, stepper.members[0].spec.train)
    stepper.set_lr(lr)
    losses = stepper.forward(batch)
    hook("forward", step)
    stepper.backward(losses)
    hook("backward", step)
    stepper.opt_step()
    hook("opt_step", step)
    return StepResult(batch, lr, losses)
