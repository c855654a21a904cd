"""Training small decoder transformers on the task catalogue, one run directory per run.

``train(task, pe, seed)`` trains the shared :class:`model.Transformer` with one of
the six positional encodings on data generated online by the task (fresh seeded samples every
batch, lengths uniform over the training range), with the loss on answer tokens only (EOS
included), AdamW with linear warmup and cosine/linear decay and gradient clipping (protocol of
Kazemnejad et al. 2023 and Zhou et al. 2023, scaled down for CPUs). It then evaluates exact match
of greedy decoding per length (:mod:`analysis.evaluation`).

Run directory (contract F; default ``runs/<task>/<pe>/seed<k>/``, with ``-<preset>`` appended
for a non-default preset, e.g. ``seed0-quick``)::

    config.json        task, pe, seed, preset, model config, optimizer, steps, train and eval
                       lengths, git commit
    metrics.jsonl      one JSON object per log step (loss, lr, token accuracy, teacher-forced
                       exact match, tokens/s) and per probe (greedy ID exact match)
    accuracy.json      [{length, split: "id"|"ood", em, n, ci_low, ci_high[, note]}]
    model.safetensors  final weights (safetensors; config in the metadata)
    checkpoint/        model.safetensors + optimizer.pt (torch.save, read back with
                       weights_only=True) + state.json, for resuming
    DONE               written last: a finished run (JSON summary)

All files are written atomically (temporary file + ``os.replace``). A run that finds ``DONE``
with the same configuration is reused; a different configuration needs ``force=True``. A run
that finds a checkpoint resumes from it and ends with the same weights and results as an
uninterrupted run (the batch of step ``s`` depends only on ``(seed, s)``).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from analysis import configs as _configs
from analysis.evaluation import EVAL_SEED, eval_lengths, evaluate, greedy_decode, summarize
from model import (
    PE_NAMES, Transformer, TransformerConfig, TransformerConfigError, load_safetensors,
    save_safetensors)

__all__ = ["train", "load_run", "RunResult", "RunDirError", "TrainingError", "default_run_dir",
           "resolve_task", "read_accuracy", "PE_NAMES", "PRESETS"]

PRESETS = tuple(_configs.PRESETS)
RUNS_ROOT = Path("runs")


class TrainingError(ValueError):
    """Bad training input: unknown task or PE, bad setting, unavailable device."""


class RunDirError(RuntimeError):
    """A run directory that is corrupt, partial, or holds a run with another configuration."""


@dataclass
class RunResult:
    """Outcome of :func:`train`. ``accuracy`` is the list written to ``accuracy.json``;
    ``id_em`` / ``ood_em`` are means over lengths; ``reused`` is True when an existing finished
    run was returned; ``finished`` is False when training stopped early (``stop_after``)."""

    run_dir: str
    task: str
    pe: str
    seed: int
    preset: str
    steps: int
    accuracy: list = field(default_factory=list)
    id_em: float | None = None
    ood_em: float | None = None
    final_loss: float | None = None
    wall_seconds: float = 0.0
    train_seconds: float = 0.0
    tokens_per_second: float | None = None
    params: int = 0
    reused: bool = False
    finished: bool = True

    def to_dict(self) -> dict:
        return asdict(self)

    def summary_line(self) -> str:
        """One line: task, PE, seed, ID/OOD exact match, time, throughput, directory."""
        def f(x):
            return "n/a" if x is None else f"{x:.3f}"
        tps = f"{self.tokens_per_second / 1000:.1f}k tok/s" if self.tokens_per_second else "-"
        state = "reused" if self.reused else ("done" if self.finished else "stopped")
        return (f"{self.task} {self.pe} seed{self.seed} [{self.preset}]: ID EM {f(self.id_em)}"
                f"  OOD EM {f(self.ood_em)}  ({self.steps} steps, {self.train_seconds:.0f} s "
                f"train, {tps}, {state}) -> {self.run_dir}")


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------

def resolve_task(task_or_name):
    """A task object from a name (``tasks.get_task``) or the object itself.

    Raises :class:`TrainingError` listing the known tasks for an unknown name."""
    if not isinstance(task_or_name, str):
        return task_or_name
    try:
        import tasks as _tasks
        return _tasks.get_task(task_or_name)
    except KeyError as e:  # tasks.UnknownTaskError is a KeyError
        raise TrainingError(str(e.args[0]) if e.args else f"unknown task {task_or_name!r}") \
            from None
    except (ImportError, AttributeError) as e:
        raise TrainingError(f"the task catalogue is not available ({e})") from None


def default_run_dir(task: str, pe: str, seed: int, preset: str = "default",
                    root: str | os.PathLike = RUNS_ROOT) -> Path:
    """``root/<task>/<pe>/seed<k>`` (``seed<k>-<preset>`` for a non-default preset)."""
    leaf = f"seed{seed}" if preset == "default" else f"seed{seed}-{preset}"
    return Path(root) / task / pe / leaf


def _atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _atomic_json(path: Path, obj) -> None:
    _atomic_write_text(path, json.dumps(obj, indent=1) + "\n")


def _atomic_torch_save(path: Path, obj) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="tmp-", suffix=".pt")
    os.close(fd)
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _git_commit() -> str | None:
    try:
        here = Path(__file__).resolve().parent
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() or None
    except Exception:
        return None


def _read_json(path: Path, what: str):
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise RunDirError(f"{path.parent}: missing {path.name} ({what})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RunDirError(f"{path}: corrupt {what} ({e}); delete the run directory or rerun "
                          f"with --force") from None


def lr_at(step: int, train: dict) -> float:
    """Learning rate of optimizer step ``step`` (0-based): linear warmup over
    ``warmup_steps``, then cosine / linear decay to ``lr * min_lr_ratio`` (or constant)."""
    lr, steps, warm = train["lr"], train["steps"], train["warmup_steps"]
    if warm > 0 and step < warm:
        return lr * (step + 1) / warm
    if train["schedule"] == "constant" or steps <= warm:
        return lr
    p = min(1.0, (step - warm) / max(1, steps - warm))
    lo = lr * train["min_lr_ratio"]
    if train["schedule"] == "cosine":
        return lo + (lr - lo) * 0.5 * (1 + math.cos(math.pi * p))
    return lr + (lo - lr) * p


def make_batch(task, lengths: list[int], batch_size: int, rng: np.random.Generator,
               n_ctx: int | None = None, random_offsets: bool = False):
    """One training batch from the task generator.

    Returns ``(inputs [batch, seq-1], targets [batch, seq-1], mask [batch, seq-1],
    offsets [batch] or None)``: ``inputs``/``targets`` are the padded ``prompt + answer`` shifted
    by one, ``mask`` is 1 where the target is an answer token (EOS included).
    """
    ns = rng.choice(np.asarray(lengths), size=batch_size)
    examples = [task.sample(int(n), rng) for n in ns]
    seqs = [list(p) + list(a) for p, a in examples]
    T = max(len(s) for s in seqs)
    pad = task.vocab.pad if task.vocab.pad is not None else task.vocab.eos
    tok = np.full((batch_size, T), pad, dtype=np.int64)
    mask = np.zeros((batch_size, T - 1), dtype=np.float32)
    for i, ((p, a), s) in enumerate(zip(examples, seqs)):
        tok[i, : len(s)] = s
        mask[i, len(p) - 1: len(s) - 1] = 1.0
    offsets = None
    if random_offsets and n_ctx is not None:
        room = np.array([max(0, n_ctx - (len(s) - 1)) for s in seqs])
        offsets = torch.from_numpy((rng.random(batch_size) * (room + 1)).astype(np.int64))
    t = torch.from_numpy(tok)
    return t[:, :-1], t[:, 1:], torch.from_numpy(mask), offsets


def _set_threads(device: str, threads: int | None) -> None:
    if device != "cpu":
        return
    if threads is None:
        env = os.environ.get("RASP_TORCH_THREADS")
        # one thread by default: on a shared / oversubscribed CPU, OpenMP threads spin and a
        # 2-thread step measured 20-40x slower than a 1-thread step (docs/training.md)
        threads = int(env) if env else 1
    torch.set_num_threads(max(1, int(threads)))


def _check_device(device: str) -> str:
    device = str(device)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise TrainingError(f"device {device!r} requested but CUDA is not available here")
    if not (device == "cpu" or device.startswith("cuda") or device == "mps"):
        raise TrainingError(f"unknown device {device!r}; use cpu or cuda")
    return device


def _n_ctx_for(task, eval_pairs, train_max_len: int) -> int:
    """Positions needed: the longest prompt + answer at the longest evaluated length."""
    rng = np.random.default_rng([EVAL_SEED, 99])
    longest = 0
    cand = [n for n, _ in eval_pairs] or [train_max_len]
    for n in sorted(set([max(cand), train_max_len])):
        for _ in range(16):
            p, a = task.sample(n, rng)
            longest = max(longest, len(p) + len(a))
    return longest + 2


def _optimizer(model: Transformer, train: dict) -> torch.optim.Optimizer:
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if name.rsplit(".", 1)[-1].startswith("W_") else no_decay).append(p)
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": train["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=train["lr"], betas=tuple(train["betas"]))


# ------------------------------------------------------------------------------------------
# checkpoints
# ------------------------------------------------------------------------------------------

def _save_checkpoint(run_dir: Path, model, opt, state: dict) -> None:
    tmp = run_dir / "checkpoint.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    save_safetensors(model, tmp / "model.safetensors", {"step": state["step"]})
    _atomic_torch_save(tmp / "optimizer.pt", {"optimizer": opt.state_dict(),
                                              "torch_rng": torch.get_rng_state()})
    _atomic_json(tmp / "state.json", state)
    final, old = run_dir / "checkpoint", run_dir / "checkpoint.old"
    if old.exists():
        shutil.rmtree(old)
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    if old.exists():
        shutil.rmtree(old)


def _load_checkpoint(run_dir: Path, model, opt):
    ck = run_dir / "checkpoint"
    if not ck.exists() and (run_dir / "checkpoint.old").exists():
        ck = run_dir / "checkpoint.old"  # interrupted while swapping: the previous one is whole
    state = _read_json(ck / "state.json", "checkpoint state")
    try:
        saved = load_safetensors(ck / "model.safetensors")
        model.load_state_dict(saved.state_dict())
        blob = torch.load(ck / "optimizer.pt", weights_only=True)
        opt.load_state_dict(blob["optimizer"])
        torch.set_rng_state(blob["torch_rng"])
    except (ValueError, RuntimeError, KeyError, OSError) as e:
        raise RunDirError(f"{ck}: corrupt checkpoint ({e}); rerun with --force") from None
    return state


# ------------------------------------------------------------------------------------------
# train
# ------------------------------------------------------------------------------------------

def _spec(task, pe, seed, preset, model_cfg: TransformerConfig, tr: dict, train_lengths,
          eval_pairs) -> dict:
    return {"task": task.name, "pe": pe, "seed": int(seed), "preset": preset,
            "model": model_cfg.to_dict(),
            "optimizer": {"name": "AdamW", "lr": tr["lr"], "betas": list(tr["betas"]),
                          "weight_decay": tr["weight_decay"], "warmup_steps": tr["warmup_steps"],
                          "schedule": tr["schedule"], "min_lr_ratio": tr["min_lr_ratio"],
                          "grad_clip": tr["grad_clip"]},
            "train": tr, "steps": int(tr["steps"]),
            "train_lengths": [min(train_lengths), max(train_lengths)],
            "eval_lengths": [[n, s] for n, s in eval_pairs]}


_SPEC_KEYS = ("task", "pe", "seed", "preset", "model", "optimizer", "train", "steps",
              "train_lengths", "eval_lengths")


def _same_spec(a: dict, b: dict) -> bool:
    """Same run configuration? Settings added to the code after a run was written count as
    their default values (so older finished runs stay reusable)."""
    def norm(d):
        d = {k: d.get(k) for k in _SPEC_KEYS}
        try:
            d["model"] = TransformerConfig.from_dict(dict(d["model"] or {})).to_dict()
        except (TransformerConfigError, TypeError, ValueError):
            pass  # compared as is (and so different)
        if isinstance(d.get("train"), dict):
            d["train"] = {**_configs.TRAIN_DEFAULTS, **d["train"]}
        return json.loads(json.dumps(d))
    return norm(a) == norm(b)


def _clear_run(run_dir: Path) -> None:
    for name in ("DONE", "accuracy.json", "model.safetensors", "metrics.jsonl", "config.json"):
        p = run_dir / name
        if p.exists():
            p.unlink()
    for name in ("checkpoint", "checkpoint.tmp", "checkpoint.old"):
        if (run_dir / name).exists():
            shutil.rmtree(run_dir / name)


def train(task_name, pe: str, seed: int = 0, steps: int | None = None,
          train_max_len: int | None = None, out_dir=None, device: str = "cpu",
          config_overrides: dict | None = None, progress: bool = True,
          preset: str = "default", force: bool = False, threads: int | None = None,
          stop_after: int | None = None, runs_root=RUNS_ROOT, verbose: bool = True
          ) -> RunResult:
    """Train one model and evaluate it; write the run directory (module docstring).

    Args:
        task_name: a task name (``tasks.get_task``) or a task object (contract C).
        pe: one of :data:`PE_NAMES`.
        seed: seeds the initial weights, the training data and the dropout.
        steps, train_max_len: override the resolved configuration.
        out_dir: run directory (default :func:`default_run_dir`).
        device: ``"cpu"`` or ``"cuda"``.
        config_overrides: flat dict of model / training keys (:mod:`analysis.configs`).
        preset: ``"default"`` or ``"quick"`` (~30 s on 2 cores, for the report demo).
        force: redo a finished run or replace a run with another configuration.
        threads: torch CPU threads (default ``$RASP_TORCH_THREADS`` or 1).
        stop_after: stop (as if killed, no final checkpoint) after this many global steps;
            for tests of resuming and time-boxed runs. Returns ``finished=False``.

    Returns a :class:`RunResult`. Raises :class:`TrainingError` for bad input and
    :class:`RunDirError` for a run directory that cannot be reused or resumed.
    """
    t_start = time.time()
    task = resolve_task(task_name)
    if pe not in PE_NAMES:
        raise TrainingError(f"unknown positional encoding {pe!r}; known: {', '.join(PE_NAMES)}")
    if getattr(task, "kind", "next_token") != "next_token":
        raise TrainingError(f"task {task.name!r} is a sequence program (part B), not a "
                            f"next-token task; train on a generalization task")
    device = _check_device(device)
    _set_threads(device, threads)
    try:
        model_s, tr = _configs.resolve(task.name, preset, getattr(task, "default_config", {}),
                                       config_overrides, pe=pe)
    except _configs.ConfigError as e:
        raise TrainingError(str(e)) from None
    if steps is not None:
        tr["steps"] = int(steps)
    if train_max_len is not None:
        tr["train_max_len"] = int(train_max_len)
    if tr["train_max_len"] is None:
        tr["train_max_len"] = int(task.default_train_max_len)
        if tr.get("train_max_len_cap"):
            tr["train_max_len"] = min(tr["train_max_len"], int(tr["train_max_len_cap"]))
    if tr["steps"] < 1:
        raise TrainingError(f"steps must be >= 1, got {tr['steps']}")
    lo = max(int(tr["train_min_len"]), int(getattr(task, "min_length", 1) or 1))
    hi = int(tr["train_max_len"])
    if getattr(task, "max_length", None) is not None and hi > task.max_length:
        raise TrainingError(f"train_max_len {hi} exceeds the task's maximum length "
                            f"{task.max_length}")
    train_lengths = [n for n in range(lo, hi + 1) if task.length_ok(n)]
    if not train_lengths:
        raise TrainingError(f"no valid training length in {lo}..{hi} for task {task.name!r}")
    eval_pairs = eval_lengths(task, hi, lo, tr["eval_max_factor"], tr["eval_stride"])
    n_ctx = _n_ctx_for(task, eval_pairs, hi)
    try:
        cfg = TransformerConfig(**{**model_s, "d_vocab": len(task.vocab), "pe": pe,
                                   "n_ctx": n_ctx})
    except (TransformerConfigError, TypeError) as e:
        raise TrainingError(f"bad model configuration: {e}") from None
    spec = _spec(task, pe, seed, preset, cfg, tr, train_lengths, eval_pairs)

    run_dir = Path(out_dir) if out_dir is not None else default_run_dir(
        task.name, pe, seed, preset, runs_root)
    run_dir.mkdir(parents=True, exist_ok=True)
    say = print if verbose else (lambda *a, **k: None)

    # -- reuse / resume / refuse --------------------------------------------------------
    existing = run_dir / "config.json"
    if existing.exists():
        old = _read_json(existing, "run configuration")
        if not _same_spec(old, spec):
            if not force:
                raise RunDirError(
                    f"{run_dir} holds a run with a different configuration; use another "
                    f"output directory or force=True (--force) to replace it")
            _clear_run(run_dir)
        elif force:
            _clear_run(run_dir)
        elif (run_dir / "DONE").exists():
            res = _result_from_dir(run_dir, reused=True)
            say(res.summary_line())
            return res
    elif (run_dir / "DONE").exists() or (run_dir / "checkpoint").exists():
        if not force:
            raise RunDirError(f"{run_dir}: run directory without config.json (corrupt); "
                              f"rerun with --force")
        _clear_run(run_dir)

    if not existing.exists():
        _atomic_json(existing, {**spec, "git_commit": _git_commit(),
                                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                "device": device, "torch": torch.__version__})

    # -- model, optimizer, resume ---------------------------------------------------------
    torch.manual_seed(seed)
    model = Transformer(cfg)
    model.reset_parameters(seed=seed)
    model.to(device)
    opt = _optimizer(model, tr)
    start, elapsed, tokens_seen = 0, 0.0, 0
    metrics_path = run_dir / "metrics.jsonl"
    if (run_dir / "checkpoint").exists() or (run_dir / "checkpoint.old").exists():
        state = _load_checkpoint(run_dir, model, opt)
        start, elapsed = int(state["step"]), float(state["elapsed"])
        tokens_seen = int(state["tokens_seen"])
        if metrics_path.exists():  # drop lines written after the checkpoint
            with open(metrics_path, "r+b") as f:
                f.truncate(int(state["metrics_bytes"]))
        say(f"resuming {run_dir} from step {start}")
    elif metrics_path.exists():
        metrics_path.unlink()

    # -- training loop ----------------------------------------------------------------------
    from tqdm.auto import tqdm

    total = tr["steps"]
    probe_rng = np.random.default_rng([EVAL_SEED, 7])
    probe = [task.sample(hi, probe_rng) for _ in range(int(tr["probe_samples"]))]
    last_probe = None
    loss_val = None
    mf = open(metrics_path, "a")
    bar = tqdm(total=total, initial=start, desc=f"{task.name}/{pe}/s{seed}",
               disable=not progress, leave=False, dynamic_ncols=True)
    t0 = time.time()
    step = start
    stopped = False
    try:
        model.train()
        while step < total:
            if stop_after is not None and step >= stop_after:
                stopped = True
                break
            rng = np.random.default_rng([int(seed), step, 1])
            inp, tgt, mask, offsets = make_batch(task, train_lengths, tr["batch_size"], rng,
                                                 n_ctx, tr["random_offsets"])
            inp, tgt, mask = inp.to(device), tgt.to(device), mask.to(device)
            lr = lr_at(step, tr)
            for g in opt.param_groups:
                g["lr"] = lr
            logits = model(inp, pos_offset=None if offsets is None else offsets.to(device))
            ce = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), reduction="none")
            loss = (ce * mask.reshape(-1)).sum() / mask.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if tr["grad_clip"]:
                torch.nn.utils.clip_grad_norm_(model.parameters(), tr["grad_clip"])
            opt.step()
            step += 1
            tokens_seen += int(inp.numel())
            if step % tr["log_every"] == 0 or step == total:
                with torch.no_grad():
                    hit = (logits.argmax(-1) == tgt).float()
                    tok_acc = float((hit * mask).sum() / mask.sum())
                    tf_em = float(((hit * mask).sum(1) == mask.sum(1)).float().mean())
                loss_val = float(loss.detach())
                now = elapsed + time.time() - t0
                rec = {"step": step, "loss": round(loss_val, 6), "lr": lr,
                       "token_acc": round(tok_acc, 5), "tf_em": round(tf_em, 5),
                       "tokens": tokens_seen, "elapsed_s": round(now, 2)}
                mf.write(json.dumps(rec) + "\n")
                mf.flush()
                bar.set_postfix(loss=f"{loss_val:.3f}", tf_em=f"{tf_em:.2f}",
                                id_em="-" if last_probe is None else f"{last_probe:.2f}")
            if tr["probe_every"] and (step % tr["probe_every"] == 0 or step == total):
                gen = greedy_decode(model, [p for p, _ in probe],
                                    max(len(a) for _, a in probe) + 2, task.vocab.eos,
                                    task.vocab.pad)
                last_probe = float(np.mean([g == list(a) for g, (_, a) in zip(gen, probe)]))
                mf.write(json.dumps({"step": step, "probe_id_em": last_probe,
                                     "probe_length": hi}) + "\n")
                mf.flush()
                model.train()
                bar.set_postfix(loss=f"{float(loss.detach()):.3f}", id_em=f"{last_probe:.2f}")
            if step % tr["checkpoint_every"] == 0 and step < total:
                mf.flush()
                _save_checkpoint(run_dir, model, opt, {
                    "step": step, "elapsed": elapsed + time.time() - t0,
                    "tokens_seen": tokens_seen, "metrics_bytes": metrics_path.stat().st_size})
            bar.update(1)
    except KeyboardInterrupt:
        mf.flush()
        _save_checkpoint(run_dir, model, opt, {
            "step": step, "elapsed": elapsed + time.time() - t0, "tokens_seen": tokens_seen,
            "metrics_bytes": metrics_path.stat().st_size})
        bar.close()
        mf.close()
        say(f"interrupted at step {step}; checkpoint saved, rerun the same command to resume")
        raise
    finally:
        bar.close()
        mf.close()
    train_seconds = elapsed + time.time() - t0
    if stopped:
        return RunResult(str(run_dir), task.name, pe, int(seed), preset, step, finished=False,
                         train_seconds=train_seconds, params=model.num_parameters())

    # -- final weights, evaluation, DONE --------------------------------------------------
    save_safetensors(model, run_dir / "model.safetensors",
                     {"task": task.name, "pe": pe, "seed": int(seed), "steps": step})
    acc = evaluate(model, task, eval_pairs, samples=int(tr["eval_samples"]),
                   batch_size=int(tr["eval_batch_size"]), progress=progress)
    accuracy = [r.to_dict() for r in acc]
    _atomic_json(run_dir / "accuracy.json", accuracy)
    summ = summarize(accuracy)
    done = {"task": task.name, "pe": pe, "seed": int(seed), "preset": preset, "steps": step,
            **summ, "final_loss": loss_val, "train_seconds": round(train_seconds, 2),
            "wall_seconds": round(time.time() - t_start + elapsed, 2),
            "tokens_per_second": round(tokens_seen / train_seconds, 1) if train_seconds else None,
            "params": model.num_parameters(),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    _atomic_json(run_dir / "DONE", done)
    if (run_dir / "checkpoint").exists():
        shutil.rmtree(run_dir / "checkpoint")
    res = _result_from_dir(run_dir, reused=False)
    say(res.summary_line())
    return res


def read_accuracy(run_dir) -> list[dict]:
    """``accuracy.json`` of a finished run; :class:`RunDirError` if missing or corrupt."""
    run_dir = Path(run_dir)
    acc = _read_json(run_dir / "accuracy.json", "accuracy by length")
    if not isinstance(acc, list) or not all(isinstance(r, dict) and "length" in r for r in acc):
        raise RunDirError(f"{run_dir}/accuracy.json: not a list of per-length results")
    return acc


def _result_from_dir(run_dir: Path, reused: bool) -> RunResult:
    done = _read_json(run_dir / "DONE", "finished-run marker")
    acc = read_accuracy(run_dir)
    try:
        return RunResult(str(run_dir), done["task"], done["pe"], int(done["seed"]),
                         done.get("preset", "default"), int(done["steps"]), acc,
                         done.get("id_em"), done.get("ood_em"), done.get("final_loss"),
                         float(done.get("wall_seconds", 0.0)),
                         float(done.get("train_seconds", 0.0)), done.get("tokens_per_second"),
                         int(done.get("params", 0)), reused=reused, finished=True)
    except (KeyError, TypeError, ValueError) as e:
        raise RunDirError(f"{run_dir}/DONE: corrupt marker ({e})") from None


def load_run(run_dir, task=None):
    """Load a finished run: ``(model, config_dict, task)``.

    ``model`` is the trained :class:`Transformer` (eval mode, on CPU), ``config_dict`` the
    contents of ``config.json``, ``task`` the task object (``tasks.get_task(config["task"])``
    unless given). Raises :class:`RunDirError` with a clear message when the directory is
    missing, unfinished (no ``DONE``), or has a corrupt config, weights or accuracy file.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir}: no such run directory")
    config = _read_json(run_dir / "config.json", "run configuration")
    if not isinstance(config, dict) or "task" not in config or "model" not in config:
        raise RunDirError(f"{run_dir}/config.json: not a rasp-lab run configuration")
    if not (run_dir / "DONE").exists():
        raise RunDirError(f"{run_dir}: run not finished (no DONE marker); rerun the same "
                          f"`rasp train` command to resume it")
    _read_json(run_dir / "DONE", "finished-run marker")
    read_accuracy(run_dir)
    try:
        model = load_safetensors(run_dir / "model.safetensors")
    except (ValueError, FileNotFoundError, OSError) as e:
        raise RunDirError(f"{run_dir}: cannot load model.safetensors ({e})") from None
    if model.cfg.to_dict() != TransformerConfig.from_dict(config["model"]).to_dict():
        raise RunDirError(f"{run_dir}: model.safetensors does not match config.json")
    if task is None:
        try:
            task = resolve_task(config["task"])
        except TrainingError as e:
            raise RunDirError(f"{run_dir}: {e}") from None
    return model, config, task
