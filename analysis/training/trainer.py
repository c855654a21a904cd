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

One loop. :func:`train_steps` is the only loop; the step it runs is
:func:`analysis.training.stepper.optimizer_step` (batch, learning rate, forward, backward,
``opt.step()``: the one place that order is written, which the benchmarks time too) on a
:class:`~analysis.training.stepper.Stepper`, either
:class:`~analysis.training.stepper.SingleStepper` (one model, what :func:`run_loop` and
:func:`train` use) or :class:`analysis.training.stacked.StackStepper` (M members of one
configuration trained as one stacked model). The step's pieces live in
:mod:`analysis.training.stepper` and are re-exported here.
"""

from __future__ import annotations

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
from tasks.base import drawn_lengths
from tasks.custom import run_task_source
from analysis.training import configs
from analysis.training.batches import teacher_forced_accuracy
from analysis.training.configs import ConfigError, RunSpec, TrainConfig
from analysis.training.evaluation import (EVAL_SEED, bin_set, eval_lengths, evaluate,
                                         evaluate_bins, summarize)
from analysis.training.stepper import (Member, SingleStepper, Stepper, TrainState,  # noqa: F401
                                       autocast_context, batch_maker, lr_at, make_optimizer,
                                       offset_positions, optimizer_step, train_lengths)
from analysis.training.runs import (RUNS_ROOT, RunDirError, RunLock, RunResult, atomic_json,
                           clear_checkpoints, clear_run, default_run_dir, has_checkpoint,
                           load_checked_weights, load_checkpoint, read_result, read_spec,
                           save_checkpoint)
from rasp_model import (Transformer, TransformerConfig, TransformerConfigError,
                        save_safetensors)
from rasp_model.pe_names import PositionalEncodingError, check_pe
from rasp_model.files import FileReadError, open_append, truncate_file
from rasp.errors import RASPError
from rasp.repl.progress import progress_bar

__all__ = ["train", "resolve_spec", "prepare", "run_loop", "finish", "TrainingError",
           "resolve_task", "lr_at", "make_optimizer", "n_ctx_for", "STEP_POINTS",
           "train_lengths", "probe_set", "metrics_record", "check_finite_loss",
           "TrainState", "offset_positions", "fit_set", "Member", "Stepper", "SingleStepper",
           "LoopOutcome", "train_steps", "DeferredInterrupt", "optimizer_step", "batch_maker",
           "autocast_context"]

STEP_POINTS = ("start", "batch", "forward", "backward", "opt_step", "commit", "metrics",
               "probe", "fit", "checkpoint")
"""The named points of one training step, in order, at which ``step_hook`` is called."""


class TrainingError(RASPError, ValueError):
    """Bad training input: unknown task or PE, bad setting, unavailable device, a diverged
    loss. The message says what and how to fix it."""


def resolve_task(task_or_name):
    """A task object from a name (``tasks.get_task``), a source record
    (:func:`tasks.catalogue.task_from_source`, a task file's sha256 checked), or the object.

    Raises :class:`TrainingError`: an unknown name, a task file that changed or fails."""
    if not isinstance(task_or_name, (str, dict)):
        return task_or_name
    try:
        if isinstance(task_or_name, dict):
            return tasks.catalogue.task_from_source(task_or_name, check_sha256=True)
        return tasks.get_task(task_or_name)
    except (tasks.UnknownTaskError, tasks.TaskFileError) as e:
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
    try:
        check_pe(pe)                   # a registered encoding (rasp_model.pe_names)
    except PositionalEncodingError as e:
        raise TrainingError(str(e)) from None
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
    lo, hi = tr.train_min_len, tr.train_max_len
    if task.max_length is not None and hi > task.max_length:
        raise TrainingError(f"train_max_len {hi} exceeds the task's maximum length "
                            f"{task.max_length}")
    lengths = drawn_lengths(task, lo, hi)      # the lengths the task accepts (length_ok)
    if not lengths:
        raise TrainingError(f"no valid training length in {lo}..{hi} for task {task.name!r}")
    eval_pairs = eval_lengths(task, hi, lo, tr.eval_max_factor, tr.eval_stride)
    try:
        cfg = TransformerConfig(**{**model_s, "d_vocab": len(task.vocab), "pe": pe,
                                   "n_ctx": max(n_ctx_for(task, eval_pairs, hi),
                                                tr.offset_span or 0)})
    except (TransformerConfigError, TypeError) as e:
        raise TrainingError(f"bad model configuration: {e}") from None
    if tr.offset_range is not None and tr.position_offsets == "random":
        longest = n_ctx_for(task, (), hi) - 3       # the longest training example's positions
        if tr.offset_range - 1 + longest > (tr.offset_span or cfg.n_ctx):
            raise TrainingError(f"offset_range {tr.offset_range}: an offset pushes a training "
                                f"example of {longest} positions past the model's "
                                f"{tr.offset_span or cfg.n_ctx} (set offset_span)")
    for lo, hi in tr.eval_bins:
        if not drawn_lengths(task, lo, hi):
            raise TrainingError(f"eval_bins: task {task.name!r} has no valid length in "
                                f"{lo}..{hi}")
    return RunSpec(task=task.name, pe=pe, seed=int(seed), preset=preset, model=cfg, train=tr,
                   train_lengths=(min(lengths), max(lengths)), eval_lengths=tuple(eval_pairs),
                   task_source=run_task_source(task))



# ------------------------------------------------------------------------------------------
# 2. prepare
# ------------------------------------------------------------------------------------------

def _never_trained(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds no trace of training: no ``DONE``, no checkpoint, no
    weights, and an empty or missing ``metrics.jsonl`` (a start that stopped early)."""
    metrics = run_dir / "metrics.jsonl"
    return (not (run_dir / "DONE").exists() and not has_checkpoint(run_dir)
            and not (run_dir / "model.safetensors").exists()
            and (not metrics.exists() or metrics.stat().st_size == 0))


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
        elif old != spec and _never_trained(run_dir):
            # a start that stopped before its first step (a crash, Ctrl-C, a device that
            # failed) left only config.json: nothing to lose, the corrected command starts
            say(f"{run_dir}: replacing the configuration of a run that never trained")
            clear_run(run_dir)
        elif old != spec:
            if not force:
                why = ""
                if old.task_source != spec.task_source:
                    why = (f" (the task's definition changed: {old.task_source or 'catalogue'} "
                           f"-> {spec.task_source or 'catalogue'})")
                raise RunDirError(
                    f"{run_dir} holds a run with a different configuration{why}; use another "
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
        try:                                        # drop lines written after the checkpoint
            truncate_file(metrics, state["metrics_bytes"])
        except FileReadError as e:
            raise RunDirError(str(e)) from None
        say(f"resuming {run_dir} from step {st.step}")
    elif metrics.exists():
        metrics.unlink()
    return st


# ------------------------------------------------------------------------------------------
# 3. the training loop
# ------------------------------------------------------------------------------------------

class DeferredInterrupt:
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


def probe_set(spec: RunSpec, task) -> list:
    """The fixed prompts of the in-training ID exact-match probe (``probe_samples`` pairs at
    the longest training length, the same for every run)."""
    probe_rng = np.random.default_rng([EVAL_SEED, 7])
    return [task.sample(spec.train_lengths[1], probe_rng)
            for _ in range(spec.train.probe_samples)]


def fit_set(spec: RunSpec, task) -> list | None:
    """The examples of the in-training fit check (``fit_every``): ``bin_samples`` pairs of the
    first ``eval_bins`` bin (the in-distribution one; the same examples as the final bin
    evaluation), or None when the check is off."""
    tr = spec.train
    if not tr.fit_every:
        return None
    lo, hi = tr.eval_bins[0]
    return bin_set(task, lo, hi, tr.bin_samples)


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


@dataclass
class LoopOutcome:
    """How :func:`train_steps` ended: ``done`` (False: stopped by ``stop_after``),
    ``stopped`` (members the fit check stopped early, out of the stack), ``failed`` (run
    directory -> the :class:`TrainingError` of a member whose loss diverged, dropped from a
    stack), and the ``stepper`` with the members still in it (when ``done``: trained to the
    last step). Every member's weights and state are in its ``st``."""

    done: bool
    stopped: list
    failed: dict
    stepper: Stepper


def train_steps(stepper: Stepper, task, progress: bool = True, stop_after: int | None = None,
                step_hook: Callable[[str, int], None] | None = None,
                say: Callable[[str], None] = print) -> LoopOutcome:
    """The one training loop: train the stepper's members from their (common) step to
    ``spec.train.steps`` in the commit order of the module docstring, for one model or a stack.

    Per step: batch, forward, backward, ``opt.step()``, step counter; then per member its
    metrics line (every ``log_every`` steps), probe (``probe_every``), fit check (``fit_every``:
    a member whose first bin reaches ``fit_em`` stops, is checkpointed and leaves the stack)
    and checkpoint (``checkpoint_every``, the end, an early stop). A member whose logged loss is
    NaN or infinite: one model raises, a stack drops it and goes on.

    Args:
        stop_after: stop (as if killed: no checkpoint) once this many steps are done.
        step_hook: called as ``step_hook(point, step)`` at each of :data:`STEP_POINTS` (once
            per step for all members; fault tests interrupt there).

    Returns:
        a :class:`LoopOutcome`.

    Raises:
        KeyboardInterrupt: after Ctrl-C, once every member is checkpointed.
        TrainingError: one model's loss became NaN or infinite.
    """
    members = stepper.members
    spec0 = members[0].spec
    tr = spec0.train
    hook = step_hook or (lambda point, step: None)
    probe = probe_set(spec0, task)
    fit_data = fit_set(spec0, task)
    total = tr.steps
    t0 = time.time()
    base = {id(m): m.st.elapsed for m in members}
    # O_NOFOLLOW: a metrics.jsonl planted as a link is refused, never appended through
    files = {id(m): open_append(m.run_dir / "metrics.jsonl") for m in members}
    stopped: list[Member] = []
    failed: dict = {}
    step0 = members[0].st.step
    lr = lr_at(max(step0 - 1, 0), tr)

    def elapsed(m: Member) -> float:
        return base[id(m)] + time.time() - t0

    def write(m: Member, rec: dict) -> None:
        f = files[id(m)]
        f.write(json.dumps(rec) + "\n")
        f.flush()

    def checkpoint(i: int) -> None:
        m = stepper.members[i]
        files[id(m)].flush()
        m.st.elapsed = elapsed(m)
        stepper.sync(i, lr)
        if m.rng_state is not None:
            torch.set_rng_state(m.rng_state)
        save_checkpoint(m.run_dir, m.st.model, m.st.opt, {
            "step": m.st.step, "elapsed": m.st.elapsed, "tokens_seen": m.st.tokens_seen,
            "metrics_bytes": (m.run_dir / "metrics.jsonl").stat().st_size,
            "last_loss": m.st.last_loss, "early_stopped": m.st.early_stopped})

    def leave(idx: list[int], errors: dict | None = None) -> None:
        """Members ``idx`` leave the stack: failed (``errors``) or stopped early."""
        for i in idx:
            m = stepper.members[i]
            if errors is None:
                stepper.sync(i, lr)
                m.st.elapsed = elapsed(m)
                stopped.append(m)
            else:
                failed[str(m.run_dir)] = errors[i]
            files.pop(id(m)).close()
        stepper.drop([i for i in range(len(stepper.members)) if i not in idx])

    over = [i for i, m in enumerate(members) if m.st.early_stopped and m.st.step < total]
    if over:                                    # resumed after an early stop
        leave(over)
    seeds = ",".join(str(m.spec.seed) for m in stepper.members) or "-"
    bar = progress_bar(show=progress, total=total, initial=step0,
                       desc=f"{spec0.task}/{spec0.pe}/s{seeds}", leave=False, dynamic_ncols=True)
    try:
        with DeferredInterrupt() as interrupt:
            stepper.train_mode()
            while stepper.members:
                members = stepper.members
                step = members[0].st.step
                if step >= total:
                    break
                if stop_after is not None and step >= stop_after:
                    return LoopOutcome(False, stopped, failed, stepper)
                batch, lr, losses = optimizer_step(stepper, step, hook)
                now = step + 1
                for m, n in zip(members, stepper.real_tokens(batch)):
                    m.st.step = now                             # the step is committed
                    m.st.tokens_seen += n                       # real tokens, not padding
                hook("commit", step)
                if now % tr.log_every == 0 or now == total:
                    values = losses.detach().float().cpu().tolist()
                    bad = {}
                    for i, m in enumerate(members):
                        m.st.last_loss = values[i]
                        try:
                            check_finite_loss(m.st)
                        except TrainingError as e:
                            if not stepper.drops_failed:
                                raise
                            bad[i] = e
                            say(f"{m.run_dir}: {e} (dropped from its stack; the others go on)")
                            continue
                        rec = metrics_record(m.st, lr, stepper.outputs(batch, i), elapsed(m))
                        write(m, rec)
                    if bad:
                        leave(sorted(bad), bad)
                        members = stepper.members
                        if not members:
                            break
                    bar.set_postfix(loss=f"{np.mean([m.st.last_loss for m in members]):.3f}",
                                    **({"tf_em": f"{rec['tf_em']:.2f}"}
                                       if len(members) == 1 else {}))
                    hook("metrics", step)
                if tr.probe_every and (now % tr.probe_every == 0 or now == total):
                    gens = stepper.answers(task, [p for p, _ in probe],
                                           max(len(a) for _, a in probe) + 2)
                    for m, gen in zip(members, gens):
                        em = float(np.mean([g == list(a) for g, (_, a) in zip(gen, probe)]))
                        write(m, {"step": now, "probe_id_em": em,
                                  "probe_length": spec0.train_lengths[1]})
                    stepper.train_mode()
                    bar.set_postfix({f"em_len{spec0.train_lengths[1]}": f"{em:.2f}"})
                    hook("probe", step)
                if fit_data is not None and (now % tr.fit_every == 0 or now == total):
                    counts = stepper.fit_counts(task, fit_data, tr.eval_batch_size)
                    for m, (k, n) in zip(members, counts):
                        em = None if k is None else k / n
                        m.st.early_stopped = em is not None and em >= tr.fit_em and now < total
                        write(m, {"step": now, "fit_id_em": em,
                                  "fit_bin": list(tr.eval_bins[0]),
                                  "early_stop": m.st.early_stopped})
                    stepper.train_mode()
                    hook("fit", step)
                regular = now % tr.checkpoint_every == 0 or now == total
                saved = [i for i, m in enumerate(members) if regular or m.st.early_stopped]
                for i in saved:
                    checkpoint(i)
                if saved:
                    hook("checkpoint", step)
                bar.update(1)
                if interrupt.requested:
                    for i in range(len(members)):
                        if i not in saved:
                            checkpoint(i)
                    say(f"interrupted at step {now}; checkpoint saved, rerun the same "
                        f"command to resume")
                    raise KeyboardInterrupt
                if now == total:
                    break
                over = [i for i, m in enumerate(members) if m.st.early_stopped]
                if over:
                    leave(over)
    finally:
        bar.close()
        stepper.close()
        for m in stepper.members:
            m.st.elapsed = elapsed(m)
        for f in files.values():
            f.close()
    for i in range(len(stepper.members)):       # the final weights into each member
        stepper.sync(i, lr)
    return LoopOutcome(True, stopped, failed, stepper)


def run_loop(spec: RunSpec, task, run_dir: Path, st: TrainState, device: str = "cpu",
             progress: bool = True, stop_after: int | None = None,
             step_hook: Callable[[str, int], None] | None = None,
             say: Callable[[str], None] = print) -> bool:
    """Train one model from ``st.step`` to ``spec.train.steps``: :func:`train_steps` of a
    :class:`SingleStepper`.

    Returns:
        True when training is over (all steps, or the fit check stopped it), False when stopped
        by ``stop_after``.

    Raises:
        KeyboardInterrupt: after Ctrl-C, once the current step is checkpointed.
        TrainingError: the loss became NaN or infinite.
    """
    out = train_steps(SingleStepper(Member(spec, Path(run_dir), st), task, device), task,
                      progress, stop_after, step_hook, say)
    return out.done


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
        pe: a registered positional encoding (:mod:`rasp_model.pe_names`; the six of
            :data:`rasp_model.PE_NAMES`).
        seed: seeds the initial weights, the training data and the dropout.
        steps, train_max_len: override the resolved configuration.
        out_dir: run directory (default :func:`analysis.training.runs.default_run_dir` under
            ``runs_root``).
        device: ``"cpu"`` or ``"cuda"``.
        config_overrides: flat dict of model / training keys (:mod:`analysis.training.configs`).
        preset: a training preset (:data:`analysis.training.configs.TRAIN_PRESETS`): ``"default"`` or
            ``"quick"`` (~12 s on 2 cores, for the report demo).
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
        task.name, pe, seed, preset, runs_root, train_max_len)
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
