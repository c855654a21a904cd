"""Training small decoder transformers on the task catalogue, one run directory per run.

``train(task, pe, seed)`` trains the shared :class:`rasp_model.Transformer` with one of
the six positional encodings on data generated online by the task (fresh seeded samples every
batch, lengths uniform over the training range), with the loss on answer tokens only (EOS
included; a next-set task: on every string position's label, :mod:`analysis.training.batches`), AdamW with linear warmup and cosine/linear decay and gradient clipping (protocol of
Kazemnejad et al. 2023 and Zhou et al. 2023, scaled down for CPUs). It then evaluates exact match
of greedy decoding per length (:mod:`analysis.training.evaluation`).

``train`` runs four stages: :func:`resolve_spec` (settings -> a :class:`~analysis.training.configs.RunSpec`;
bad input fails here, before anything is written), :func:`prepare` (lock the run directory;
reuse, resume or refuse what it holds; build the model and optimizer), :func:`run_loop` (the
optimizer steps) and :func:`finish` (final weights, evaluation, ``DONE``). The run directory
and its files are described and owned by :mod:`analysis.training.runs`.

Exact resume. The batch of step ``s`` depends only on ``(seed, s)``; a checkpoint holds the
weights, the optimizer state and the torch RNG after a whole number of steps. Each step commits
in one order — batch, forward, backward, ``opt.step()``, then the step counter, then the
metrics line, then (every ``checkpoint_every`` steps and at the end) the checkpoint. Ctrl-C
(SIGINT) during the loop is deferred to the end of the current step, which is then checkpointed;
a kill loses the steps since the last checkpoint, and ``metrics.jsonl`` is truncated back to
the checkpoint on resume. Either way a resumed run ends with bitwise the weights, metrics and
accuracy of an uninterrupted run (``tests/test_faults_runs.py`` interrupts at every point of
the step through ``step_hook``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

import tasks
from analysis.training import configs
from analysis.training.batches import make_step, step_loss, teacher_forced_accuracy
from analysis.training.configs import ConfigError, RunSpec, TrainConfig
from analysis.training.evaluation import (EVAL_SEED, bin_set, eval_lengths, evaluate,
                                         evaluate_bins, model_answers, summarize,
                                         teacher_forced_em)
from analysis.training.runs import (RUNS_ROOT, RunDirError, RunLock, RunResult, atomic_json,
                           clear_checkpoints, clear_run, default_run_dir, has_checkpoint,
                           load_checked_weights, load_checkpoint, read_result, read_spec,
                           save_checkpoint)
from rasp_model import (PE_NAMES, Transformer, TransformerConfig, TransformerConfigError,
                   save_safetensors)
from rasp.errors import RASPError

__all__ = ["train", "resolve_spec", "prepare", "run_loop", "finish", "TrainingError",
           "resolve_task", "lr_at", "make_optimizer", "n_ctx_for", "STEP_POINTS",
           "train_lengths", "probe_set", "probe_em", "metrics_record", "check_finite_loss",
           "TrainState", "offset_positions", "fit_set"]

STEP_POINTS = ("start", "batch", "forward", "backward", "opt_step", "commit", "metrics",
               "probe", "fit", "checkpoint")
"""The named points of one training step, in order, at which ``step_hook`` is called."""


class TrainingError(RASPError, ValueError):
    """Bad training input: unknown task or PE, bad setting, unavailable device, a diverged
    loss. The message says what and how to fix it."""


def resolve_task(task_or_name):
    """A task object from a name (``tasks.get_task``) or the object itself.

    Raises :class:`TrainingError` listing the known tasks for an unknown name."""
    if not isinstance(task_or_name, str):
        return task_or_name
    try:
        return tasks.get_task(task_or_name)
    except tasks.UnknownTaskError as e:
        raise TrainingError(str(e.args[0]) if e.args else f"unknown task {task_or_name!r}") \
            from None


def git_commit() -> str | None:
    """The checkout's ``git rev-parse HEAD`` (recorded with runs and reports), or None."""
    try:
        here = Path(__file__).resolve().parent
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


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


def _set_threads(device: str, threads: int | None) -> None:
    if device != "cpu":
        return
    if threads is None:
        env = os.environ.get("RASP_TORCH_THREADS")
        # one thread by default: on a shared / oversubscribed CPU, OpenMP threads spin and a
        # 2-thread step measured 20-40x slower than a 1-thread step (docs/training.md)
        try:
            threads = int(env) if env else 1
        except ValueError:
            raise TrainingError(f"RASP_TORCH_THREADS={env!r} must be a whole number of "
                                "threads") from None
    torch.set_num_threads(max(1, int(threads)))


def _check_device(device: str) -> str:
    device = str(device)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise TrainingError(f"device {device!r} requested but CUDA is not available here")
    if device == "mps" and not torch.backends.mps.is_available():
        raise TrainingError("device 'mps' requested but this PyTorch has no MPS support")
    if not (device == "cpu" or device.startswith("cuda") or device == "mps"):
        raise TrainingError(f"unknown device {device!r}; use cpu or cuda")
    return device


def n_ctx_for(task, eval_pairs, train_max_len: int) -> int:
    """Positions needed: the longest example's input positions
    (:func:`tasks.inputs_targets`; a next-token example: prompt + answer - 1) at the
    longest evaluated length, plus 3."""
    rng = np.random.default_rng([EVAL_SEED, 99])
    longest = 0
    ns = {max(n for n, _ in eval_pairs)} if eval_pairs else set()
    ns |= {train_max_len} if task.length_ok(train_max_len) else set()   # (abab)*: 4, 8, ...
    for n in sorted(ns):
        for _ in range(16):
            p, a = task.sample(n, rng)
            longest = max(longest, len(tasks.inputs_targets(task, p, a)[0]))
    return longest + 3


def make_optimizer(model: Transformer | None, train: TrainConfig,
                   named_parameters=None) -> torch.optim.Optimizer:
    """AdamW with weight decay on the weight matrices (``W_*``) only.

    The parameters are ``model.named_parameters()``, or ``named_parameters`` (``(name,
    tensor)`` pairs, e.g. the stacked ``[member, ...]`` tensors of
    :mod:`analysis.training.stacked`: AdamW is elementwise, so one optimizer over stacked
    tensors is each member's optimizer)."""
    decay, no_decay = [], []
    pairs = model.named_parameters() if named_parameters is None else named_parameters
    for name, p in pairs:
        (decay if name.rsplit(".", 1)[-1].startswith("W_") else no_decay).append(p)
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": train.weight_decay},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=train.lr, betas=tuple(train.betas))


# ------------------------------------------------------------------------------------------
# 1. resolve
# ------------------------------------------------------------------------------------------

def resolve_spec(task, pe: str, seed: int = 0, preset: str = "default",
                 steps: int | None = None, train_max_len: int | None = None,
                 config_overrides: dict | None = None) -> RunSpec:
    """The :class:`~analysis.training.configs.RunSpec` of a run (nothing is written).

    Raises:
        TrainingError: unknown PE or preset, unknown key or bad value of a setting, a
            sequence-program task, training lengths the task cannot produce.
    """
    if pe not in PE_NAMES:
        raise TrainingError(f"unknown positional encoding {pe!r}; known: {', '.join(PE_NAMES)}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise TrainingError(f"seed must be an integer >= 0, got {seed!r}")
    if task.kind not in ("next_token", "next_set"):
        raise TrainingError(f"task {task.name!r} is a sequence program (part B), not a "
                            f"next-token task; train on a generalization task")
    try:
        model_s, tr = configs.resolve(preset, config_overrides)
        changes = {}
        if steps is not None:
            changes["steps"] = steps
        if train_max_len is not None:
            changes["train_max_len"] = train_max_len
        tr = tr.replace(**changes)
        if tr.train_max_len is None:
            hi = int(task.default_train_max_len)
            tr = tr.replace(train_max_len=min(hi, tr.train_max_len_cap or hi))
    except ConfigError as e:
        raise TrainingError(str(e)) from None
    lo, hi = max(tr.train_min_len, int(task.min_length or 1)), tr.train_max_len
    if task.max_length is not None and hi > task.max_length:
        raise TrainingError(f"train_max_len {hi} exceeds the task's maximum length "
                            f"{task.max_length}")
    lengths = [n for n in range(lo, hi + 1) if task.length_ok(n)]
    if not lengths:
        raise TrainingError(f"no valid training length in {lo}..{hi} for task {task.name!r}")
    eval_pairs = eval_lengths(task, hi, lo, tr.eval_max_factor, tr.eval_stride)
    try:
        cfg = TransformerConfig(**{**model_s, "d_vocab": len(task.vocab), "pe": pe,
                                   "n_ctx": n_ctx_for(task, eval_pairs, hi)})
    except (TransformerConfigError, TypeError) as e:
        raise TrainingError(f"bad model configuration: {e}") from None
    if tr.offset_span is not None and tr.offset_span > cfg.n_ctx:
        raise TrainingError(f"offset_span {tr.offset_span} exceeds the model's {cfg.n_ctx} "
                            f"positions (n_ctx)")
    for lo, hi in tr.eval_bins:
        if not any(task.length_ok(n) for n in range(max(1, lo), hi + 1)):
            raise TrainingError(f"eval_bins: task {task.name!r} has no valid length in "
                                f"{lo}..{hi}")
    return RunSpec(task=task.name, pe=pe, seed=int(seed), preset=preset, model=cfg, train=tr,
                   train_lengths=(min(lengths), max(lengths)), eval_lengths=tuple(eval_pairs))


# ------------------------------------------------------------------------------------------
# 2. prepare
# ------------------------------------------------------------------------------------------

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


def prepare(spec: RunSpec, run_dir: Path, device: str = "cpu", force: bool = False,
            say: Callable[[str], None] = print) -> RunResult | TrainState:
    """Reuse, resume or start the run in ``run_dir`` (which the caller has locked).

    Returns the finished run's :class:`~analysis.training.runs.RunResult` when ``run_dir`` holds the
    same finished run (and not ``force``), else the :class:`TrainState` to train from
    (restored from the checkpoint when there is one; ``config.json`` written for a new run).

    Raises:
        RunDirError: ``run_dir`` holds another configuration or a corrupt run (without
            ``force``), or a corrupt checkpoint.
    """
    config_path = run_dir / "config.json"
    if config_path.exists():
        try:
            old, _ = read_spec(run_dir)
        except RunDirError:
            if not force:
                raise
            old = None
        if old is None or force:
            clear_run(run_dir)
        elif old != spec:
            if not force:
                raise RunDirError(
                    f"{run_dir} holds a run with a different configuration; use another "
                    f"output directory or force=True (--force) to replace it")
        elif (run_dir / "DONE").exists():
            result = read_result(run_dir, reused=True, spec=spec)
            try:
                load_checked_weights(run_dir, spec)      # reuse only weights that load
            except RunDirError as e:
                raise RunDirError(f"{e}; the finished run cannot be reused: rerun with "
                                  "--force to train it again") from None
            return result
    elif (run_dir / "DONE").exists() or has_checkpoint(run_dir):
        if not force:
            raise RunDirError(f"{run_dir}: run directory without config.json (corrupt); "
                              f"rerun with --force")
        clear_run(run_dir)
    if not config_path.exists():
        atomic_json(config_path, {**spec.to_dict(), "git_commit": git_commit(),
                                  "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                  "device": device, "torch": torch.__version__})

    torch.manual_seed(spec.seed)
    model = Transformer(spec.model)
    model.reset_parameters(seed=spec.seed)
    model.to(device)
    st = TrainState(model, make_optimizer(model, spec.train))
    metrics = run_dir / "metrics.jsonl"
    if has_checkpoint(run_dir):
        state = load_checkpoint(run_dir, model, st.opt, spec.train.steps)
        st.step, st.elapsed = state["step"], float(state["elapsed"])
        st.tokens_seen, st.last_loss = state["tokens_seen"], state.get("last_loss")
        st.early_stopped = state.get("early_stopped") is True
        size = metrics.stat().st_size if metrics.exists() else 0
        if size < state["metrics_bytes"]:
            raise RunDirError(f"{metrics}: shorter ({size} bytes) than its checkpoint "
                              f"records ({state['metrics_bytes']}); rerun with --force")
        with open(metrics, "r+b") as f:             # drop lines written after the checkpoint
            f.truncate(state["metrics_bytes"])
        say(f"resuming {run_dir} from step {st.step}")
    elif metrics.exists():
        metrics.unlink()
    return st


# ------------------------------------------------------------------------------------------
# 3. the training loop
# ------------------------------------------------------------------------------------------

def autocast_context(tr: TrainConfig, device: str):
    """The precision of a training forward: ``torch.autocast`` to bfloat16 when
    ``tr.autocast == "bfloat16"`` (on ``device``'s type: cpu or cuda), else a no-op."""
    if tr.autocast == "none":
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)


class _DeferredInterrupt:
    """While active (in the main thread), SIGINT only sets :attr:`requested`; the training loop
    acts on it at the end of the current step."""

    def __init__(self):
        self.requested = False
        self._old = None

    def _handle(self, signum, frame):
        self.requested = True

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc):
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)


def train_lengths(spec: RunSpec, task) -> list[int]:
    """The training lengths of a run (drawn uniformly by :func:`make_step`)."""
    return [n for n in range(spec.train_lengths[0], spec.train_lengths[1] + 1)
            if task.length_ok(n)]


def probe_set(spec: RunSpec, task) -> list:
    """The fixed prompts of the in-training ID exact-match probe (``probe_samples`` pairs at
    the longest training length, the same for every run)."""
    probe_rng = np.random.default_rng([EVAL_SEED, 7])
    return [task.sample(spec.train_lengths[1], probe_rng)
            for _ in range(spec.train.probe_samples)]


def offset_positions(spec: RunSpec) -> int:
    """The positions random offsets keep every training example within: ``offset_span`` when
    set (a paper's generator, :class:`~analysis.training.configs.TrainConfig`), else
    ``n_ctx``."""
    return spec.train.offset_span or spec.model.n_ctx


def fit_set(spec: RunSpec, task) -> list | None:
    """The examples of the in-training fit check (``fit_every``): ``bin_samples`` pairs of the
    first ``eval_bins`` bin (the in-distribution one; the same examples as the final bin
    evaluation), or None when the check is off."""
    tr = spec.train
    if not tr.fit_every:
        return None
    lo, hi = tr.eval_bins[0]
    return bin_set(task, lo, hi, tr.bin_samples)


def probe_em(model: Transformer, probe: list, task) -> float:
    """Exact match of ``model`` on the probe pairs of :func:`probe_set` (greedy decoding, or
    per-position labels for a next-set task: :func:`~analysis.training.evaluation.model_answers`)."""
    gen = model_answers(model, task, [p for p, _ in probe], max(len(a) for _, a in probe) + 2)
    return float(np.mean([g == list(a) for g, (_, a) in zip(gen, probe)]))


def metrics_record(st: TrainState, lr: float, outputs: list, elapsed: float) -> dict:
    """The ``metrics.jsonl`` line of a logged step (``st.last_loss`` already set):
    loss, lr, token accuracy and teacher-forced exact match of the step's ``outputs``
    (:func:`~analysis.training.batches.teacher_forced_accuracy`), real tokens so far, seconds."""
    tok_acc, tf_em = teacher_forced_accuracy(outputs)
    return {"step": st.step, "loss": round(st.last_loss, 6), "lr": lr,
            "token_acc": round(tok_acc, 5), "tf_em": round(tf_em, 5),
            "tokens": st.tokens_seen, "elapsed_s": round(elapsed, 2)}


def check_finite_loss(st: TrainState) -> None:
    """Raise :class:`TrainingError` when the logged loss is NaN or infinite."""
    if not math.isfinite(st.last_loss):
        raise TrainingError(f"the loss became {st.last_loss} at step {st.step};"
                            f" lower lr and rerun with --force")


def run_loop(spec: RunSpec, task, run_dir: Path, st: TrainState, device: str = "cpu",
             progress: bool = True, stop_after: int | None = None,
             step_hook: Callable[[str, int], None] | None = None,
             say: Callable[[str], None] = print) -> bool:
    """Train from ``st.step`` to ``spec.train.steps`` (module docstring: the commit order).

    Args:
        stop_after: stop (as if killed: no checkpoint) once this many steps are done.
        step_hook: called as ``step_hook(point, step)`` at each of :data:`STEP_POINTS`
            (fault tests interrupt there).

    Returns:
        True when all steps are done, False when stopped by ``stop_after``.

    Raises:
        KeyboardInterrupt: after Ctrl-C, once the current step is checkpointed.
        TrainingError: the loss became NaN or infinite.
    """
    from rasp.progress import progress_bar

    tr, model, opt = spec.train, st.model, st.opt
    forward_model = torch.compile(model, dynamic=True) if tr.torch_compile else model
    hook = step_hook or (lambda point, step: None)
    lengths = train_lengths(spec, task)
    probe = probe_set(spec, task)
    fit_data = fit_set(spec, task)
    n_pos = offset_positions(spec)
    metrics_path = run_dir / "metrics.jsonl"
    total = tr.steps
    t0, base = time.time(), st.elapsed

    def checkpoint() -> None:
        mf.flush()
        st.elapsed = base + time.time() - t0
        save_checkpoint(run_dir, model, opt, {
            "step": st.step, "elapsed": st.elapsed, "tokens_seen": st.tokens_seen,
            "metrics_bytes": metrics_path.stat().st_size, "last_loss": st.last_loss,
            "early_stopped": st.early_stopped})

    bar = progress_bar(show=progress, total=total, initial=st.step,
                       desc=f"{spec.task}/{spec.pe}/s{spec.seed}", leave=False, dynamic_ncols=True)
    with open(metrics_path, "a") as mf, _DeferredInterrupt() as interrupt:
        try:
            model.train()
            while st.step < total and not st.early_stopped:
                if stop_after is not None and st.step >= stop_after:
                    return False
                step = st.step
                hook("start", step)
                rng = np.random.default_rng([spec.seed, step, 1])
                batch = make_step(task, lengths, tr.batch_size, rng, n_pos,
                                  tr.position_offsets, tr.batching)
                hook("batch", step)
                lr = lr_at(step, tr)
                for g in opt.param_groups:
                    g["lr"] = lr
                with autocast_context(tr, device):
                    loss, outputs = step_loss(forward_model, batch, device)
                hook("forward", step)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if tr.grad_clip:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), tr.grad_clip)
                hook("backward", step)
                opt.step()
                hook("opt_step", step)
                st.step = step + 1                          # the step is committed
                st.tokens_seen += batch.real_tokens         # real tokens, not padding
                hook("commit", step)
                if st.step % tr.log_every == 0 or st.step == total:
                    st.last_loss = float(loss.detach())
                    check_finite_loss(st)
                    rec = metrics_record(st, lr, outputs, base + time.time() - t0)
                    mf.write(json.dumps(rec) + "\n")
                    mf.flush()
                    bar.set_postfix(loss=f"{st.last_loss:.3f}", tf_em=f"{rec['tf_em']:.2f}")
                    hook("metrics", step)
                if tr.probe_every and (st.step % tr.probe_every == 0 or st.step == total):
                    em = probe_em(model, probe, task)
                    mf.write(json.dumps({"step": st.step, "probe_id_em": em,
                                         "probe_length": spec.train_lengths[1]}) + "\n")
                    mf.flush()
                    model.train()
                    bar.set_postfix(loss=f"{st.last_loss:.3f}" if st.last_loss is not None
                                    else "-", id_em=f"{em:.2f}")
                    hook("probe", step)
                if fit_data is not None and (st.step % tr.fit_every == 0 or st.step == total):
                    k, n = teacher_forced_em(model, task, fit_data, tr.eval_batch_size)
                    em = None if k is None else k / n
                    st.early_stopped = em is not None and em >= tr.fit_em and st.step < total
                    mf.write(json.dumps({"step": st.step, "fit_id_em": em,
                                         "fit_bin": list(tr.eval_bins[0]),
                                         "early_stop": st.early_stopped}) + "\n")
                    mf.flush()
                    model.train()
                    hook("fit", step)
                saved = (st.step % tr.checkpoint_every == 0 or st.step == total
                         or st.early_stopped)
                if saved:
                    checkpoint()
                    hook("checkpoint", step)
                bar.update(1)
                if interrupt.requested:
                    if not saved:
                        checkpoint()
                    say(f"interrupted at step {st.step}; checkpoint saved, rerun the same "
                        f"command to resume")
                    raise KeyboardInterrupt
        finally:
            bar.close()
            st.elapsed = base + time.time() - t0
    return True


# ------------------------------------------------------------------------------------------
# 4. finish
# ------------------------------------------------------------------------------------------

def finish(spec: RunSpec, task, run_dir: Path, st: TrainState, wall_start: float,
           progress: bool = True, accuracy: list | None = None,
           extra: dict | None = None) -> RunResult:
    """Write the final weights, evaluate (``accuracy.json``), write ``DONE``, drop the
    checkpoint; returns the run's :class:`~analysis.training.runs.RunResult`.

    ``accuracy``: the evaluation's :class:`~tasks.LengthResult` list when the caller has
    already evaluated ``st.model`` (the stacked trainer evaluates its members in one pass);
    ``extra``: more ``DONE`` fields (e.g. ``stacked_members``)."""
    tr, model = spec.train, st.model
    save_safetensors(model, run_dir / "model.safetensors",
                     {"task": spec.task, "pe": spec.pe, "seed": spec.seed, "steps": st.step})
    acc = accuracy if accuracy is not None else evaluate(
        model, task, list(spec.eval_lengths), samples=tr.eval_samples,
        batch_size=tr.eval_batch_size, progress=progress)
    accuracy = [r.to_dict() for r in acc]
    atomic_json(run_dir / "accuracy.json", accuracy)
    if tr.eval_bins:
        atomic_json(run_dir / "bins.json", evaluate_bins(
            model, task, tr.eval_bins, tr.bin_samples, tr.eval_batch_size))
    done = {"task": spec.task, "pe": spec.pe, "seed": spec.seed, "preset": spec.preset,
            "steps": st.step, **summarize(accuracy), "final_loss": st.last_loss,
            "train_seconds": round(st.elapsed, 2),
            # this call's wall time plus the training time of earlier calls (a resumed run):
            # ``wall_start`` is already moved back by that time (train() does it)
            "wall_seconds": round(time.time() - wall_start, 2),
            "tokens_per_second": round(st.tokens_seen / st.elapsed, 1) if st.elapsed else None,
            "params": model.num_parameters(), "early_stopped": st.early_stopped,
            **(extra or {}),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    atomic_json(run_dir / "DONE", done)
    clear_checkpoints(run_dir)
    return read_result(run_dir, reused=False, spec=spec)


# ------------------------------------------------------------------------------------------
# train
# ------------------------------------------------------------------------------------------

def train(task_name, pe: str, seed: int = 0, steps: int | None = None,
          train_max_len: int | None = None, out_dir=None, device: str = "cpu",
          config_overrides: dict | None = None, progress: bool = True,
          preset: str = "default", force: bool = False, threads: int | None = None,
          stop_after: int | None = None, runs_root=RUNS_ROOT, verbose: bool = True,
          step_hook: Callable[[str, int], None] | None = None) -> RunResult:
    """Train one model and evaluate it; write the run directory (:mod:`analysis.training.runs`).

    Args:
        task_name: a task name (``tasks.get_task``) or a task object.
        pe: one of :data:`rasp_model.PE_NAMES`.
        seed: seeds the initial weights, the training data and the dropout.
        steps, train_max_len: override the resolved configuration.
        out_dir: run directory (default :func:`analysis.training.runs.default_run_dir` under
            ``runs_root``).
        device: ``"cpu"`` or ``"cuda"``.
        config_overrides: flat dict of model / training keys (:mod:`analysis.training.configs`).
        preset: a training preset (:data:`analysis.training.configs.TRAIN_PRESETS`): ``"default"`` or
            ``"quick"`` (~30 s on 2 cores, for the report demo).
        force: redo a finished run or replace a run with another configuration.
        threads: torch CPU threads (default ``$RASP_TORCH_THREADS`` or 1).
        stop_after: stop (as if killed, no checkpoint) after this many global steps; for tests
            of resuming and time-boxed runs. Returns ``finished=False``.
        step_hook: fault-injection hook, see :func:`run_loop`.

    Returns a :class:`~analysis.training.runs.RunResult`.

    Raises:
        TrainingError: bad input (nothing is written).
        RunDirError: the run directory is in use by another process, cannot be created, holds
            another configuration, or is corrupt.
        KeyboardInterrupt: Ctrl-C (the run is checkpointed; rerun to resume).
    """
    t_start = time.time()
    task = resolve_task(task_name)
    device = _check_device(device)
    spec = resolve_spec(task, pe, seed, preset, steps, train_max_len, config_overrides)
    _set_threads(device, threads)
    run_dir = Path(out_dir) if out_dir is not None else default_run_dir(
        task.name, pe, seed, preset, runs_root)
    say = print if verbose else (lambda *a, **k: None)
    with RunLock(run_dir):
        st = prepare(spec, run_dir, device, force, say)
        if isinstance(st, RunResult):
            say(st.summary_line())
            return st
        earlier = st.elapsed            # training seconds of earlier calls (0 for a new run)
        if not run_loop(spec, task, run_dir, st, device, progress, stop_after, step_hook, say):
            return RunResult(str(run_dir), task.name, pe, int(seed), preset, st.step,
                             finished=False, train_seconds=st.elapsed,
                             params=st.model.num_parameters())
        res = finish(spec, task, run_dir, st, t_start - earlier, progress)
    say(res.summary_line())
    return res
