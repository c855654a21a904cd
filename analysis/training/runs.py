"""Run directories: the one owner of their naming, locking, writing, validation and loading.

A training run (:func:`analysis.training.trainer.train`) writes one directory, by default
``runs/<task>/<pe>/seed<k>/`` (``seed<k>-<preset>`` for a non-default training preset)::

    config.json        the RunSpec (analysis.training.configs) + git commit, creation time, device, torch
    metrics.jsonl      one JSON object per log step and per greedy probe
    accuracy.json      [{length, split: "id"|"ood", em, n, ci_low, ci_high[, note]}]
    model.safetensors  final weights (safetensors; the model config in the metadata)
    checkpoint/        model.safetensors + optimizer.pt (read with weights_only=True) +
                       state.json, while the run is unfinished
    DONE               written last: a finished run (JSON summary)
    .lock              the lock of the process writing the directory (its PID)

Guarantees (tested in ``tests/test_faults_runs.py``):

* **Locked.** A process writing a run holds an exclusive ``fcntl.flock`` on ``.lock``
  (:class:`RunLock`); a second writer fails at once with ``RunDirError: ... in use by PID n``.
  The kernel drops the lock when its process dies, so a killed run leaves no stale lock.
* **Atomic.** Every file is written to a fresh ``mkstemp`` file in the same directory and moved
  into place with ``os.replace`` (:func:`rasp_model.files.atomic_write`: a link planted at
  the name is replaced, never written through); a checkpoint is written to
  ``checkpoint.tmp/`` and swapped in.
* **Validated.** Every file is read through :mod:`rasp_model.files` (regular files only, a named
  pipe never blocks, a size cap per kind) and checked: JSON syntax and schema, value ranges
  (exact match and interval bounds in [0, 1], sample counts >= 1), finiteness of numbers and of
  weights, weights floating point, ``optimizer.pt`` against the run's own optimizer
  (:func:`_checked_optimizer_state`), checkpoint counters bounded. A file that fails raises
  :class:`RunDirError` naming the file and what is wrong. (Tests: also
  ``tests/test_faults_files.py``.)

Readers: the report and ``rasp probe`` use :func:`check_finished` and :func:`load_run`;
``rasp train`` uses :func:`read_result` to reuse a finished run.
"""

from __future__ import annotations

import errno
import fcntl
import io
import json
import math
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

import tasks
from analysis.training.configs import ConfigError, RunSpec
from rasp_model import Transformer, files, load_safetensors, save_safetensors
from rasp.errors import RASPError

__all__ = ["RunDirError", "DiskFullError", "disk_full_error", "RUNS_ROOT", "default_run_dir", "RunLock", "RunResult",
           "atomic_write_text", "load_checked_weights", "atomic_json", "read_json",
           "read_spec", "read_accuracy",
           "validate_accuracy", "read_done", "read_task_name", "read_result", "check_finished", "load_model",
           "load_run", "clear_run", "clear_checkpoints", "save_checkpoint", "load_checkpoint", "has_checkpoint",
           "is_finished"]

RUNS_ROOT = Path("runs")
"""Default root of run directories (relative to the working directory)."""

RUN_FILES = ("DONE", "accuracy.json", "model.safetensors", "metrics.jsonl", "config.json")
CHECKPOINT_DIRS = ("checkpoint", "checkpoint.tmp", "checkpoint.old")


class RunDirError(RASPError, RuntimeError):
    """A run directory that is in use, corrupt, partial, implausible, or holds a run with
    another configuration. The message names the directory or file and how to fix it."""


class DiskFullError(RunDirError):
    """A run file could not be written because its file system is full (or over quota). What
    was written before stays whole (atomic writes), so the run resumes once there is space."""


#: After a failed write, less free space than this on the file system means "the disk is full"
#: (torch reports a full disk as a RuntimeError of its zip writer, without ``errno``).
_FULL_DISK_BYTES = 64 * 1024


def _full_disk(e: BaseException, where: Path) -> bool:
    """Whether the failure ``e`` of a write under ``where`` is a full file system: ENOSPC or
    EDQUOT, or any error while less than :data:`_FULL_DISK_BYTES` are free there."""
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if not isinstance(e, (OSError, RuntimeError)):
        return False
    try:
        return shutil.disk_usage(where).free < _FULL_DISK_BYTES
    except OSError:
        return False


def disk_full_error(path: Path, what: str) -> DiskFullError:
    """The one-line error of a write that found the disk full (names the file system)."""
    return DiskFullError(f"{path}: the disk is full (no space left while writing {what}); "
                         f"what was written before is intact: free space on this file system "
                         f"and rerun the command to resume")


def default_run_dir(task: str, pe: str, seed: int, preset: str | None = "default",
                    root: str | os.PathLike = RUNS_ROOT,
                    train_max_len: int | None = None) -> Path:
    """``root/<task>/<pe>/seed<k>`` (``seed<k>-<preset>`` for a non-default preset; ``-L<n>``
    appended when the training length is set apart from the preset's, ``train_max_len``, so
    runs of one task at several training lengths never share a directory)."""
    leaf = f"seed{seed}" if preset in (None, "default") else f"seed{seed}-{preset}"
    if train_max_len is not None:
        leaf += f"-L{int(train_max_len)}"
    return Path(root) / task / pe / leaf


def is_finished(run_dir: str | os.PathLike) -> bool:
    """Whether ``run_dir`` holds a ``DONE`` marker (not validated; see :func:`read_result`)."""
    return (Path(run_dir) / "DONE").exists()


def has_checkpoint(run_dir: str | os.PathLike) -> bool:
    """Whether ``run_dir`` holds a checkpoint to resume from."""
    run_dir = Path(run_dir)
    return (run_dir / "checkpoint").exists() or (run_dir / "checkpoint.old").exists()


# ------------------------------------------------------------------------------------------
# locking
# ------------------------------------------------------------------------------------------

class RunLock:
    """Exclusive lock of a run directory for the writing process (a context manager).

    Creates the directory, opens ``.lock`` and takes a non-blocking ``fcntl.flock``; writes
    the PID into the file. The lock is released on :meth:`release`, on exit of the ``with``
    block, or by the kernel when the process dies (no stale lock survives a crash).

    Raises:
        RunDirError: the directory is locked by another process (the message gives its PID),
            or it cannot be created / is not a directory.
    """

    def __init__(self, run_dir: str | os.PathLike):
        self.run_dir = Path(run_dir)
        self._fd: int | None = None

    def acquire(self) -> "RunLock":
        make_run_dir(self.run_dir)
        path = self.run_dir / ".lock"
        try:
            # O_NOFOLLOW: a .lock that is a symbolic link is refused, never written through
            # (it would truncate the link's target and write our PID into it)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise RunDirError(f"{self.run_dir}: .lock is a symbolic link; refusing to "
                                  "write through it (remove it)") from None
            raise RunDirError(f"{self.run_dir}: cannot create the lock file "
                              f"({e.strerror or e})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            pid = _read_pid(fd)
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                who = f"PID {pid}" if pid else "another process"
                raise RunDirError(f"{self.run_dir} is in use by {who} (another training is "
                                  f"writing it); wait for it to finish or choose another "
                                  f"output directory") from None
            raise RunDirError(f"{self.run_dir}: cannot lock ({e.strerror or e})") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None


def make_run_dir(run_dir: Path) -> None:
    """Create ``run_dir`` (and parents); :class:`RunDirError` with a one-line reason when the
    path cannot be a directory (an existing file, a read-only or virtual file system)."""
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"{run_dir} exists and is not a directory; choose another output "
                          f"directory")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RunDirError(f"cannot create the run directory {run_dir}: "
                          f"{e.strerror or e}") from None


# ------------------------------------------------------------------------------------------
# atomic writes
# ------------------------------------------------------------------------------------------

def _atomic_replace(path: Path, write, suffix: str = "", mode: int | None = None) -> None:
    """Write ``path`` atomically through the one writer (:func:`rasp_model.files.atomic_write`:
    a fresh ``mkstemp`` file in the same directory, written through its descriptor, then
    ``os.replace``); ``write(f)`` fills the binary file object ``f``. A full disk is
    :class:`DiskFullError`. ``mode``: the file's permissions (default ``0o666 & ~umask``)."""
    path = Path(path)
    try:
        files.atomic_write(path, write, mode=mode, suffix=suffix or ".tmp")
    except (OSError, RuntimeError) as e:
        if _full_disk(e, path.parent):
            raise disk_full_error(path, path.name) from None
        raise


def atomic_write_text(path: Path, text: str, mode: int | None = None) -> None:
    """Write ``text`` to ``path`` atomically (temporary file, fsync, ``os.replace``).
    ``mode``: the file's permissions (default ``0o666 & ~umask``; a report passes ``0o644``)."""
    _atomic_replace(path, lambda f: f.write(text.encode("utf-8")), mode=mode)


def atomic_json(path: Path, obj) -> None:
    """:func:`atomic_write_text` of ``obj`` as indented JSON (NaN and inf refused)."""
    atomic_write_text(path, json.dumps(obj, indent=1, allow_nan=False) + "\n")


def _atomic_torch_save(path: Path, obj) -> None:
    buf = io.BytesIO()              # serialized first: a full disk is then ENOSPC of write()
    torch.save(obj, buf)
    _atomic_replace(path, lambda f: f.write(buf.getbuffer()), suffix=".pt")


# ------------------------------------------------------------------------------------------
# reading and validation
# ------------------------------------------------------------------------------------------

def read_json(path: Path, what: str):
    """Parse a run file through the one reader (:func:`rasp_model.files.read_json`: a regular
    file of at most 16 MiB, ``NaN``/``Infinity``/``1e400`` and deep nesting refused);
    :class:`RunDirError` for a missing, unreadable or non-JSON file."""
    try:
        return files.read_json(path, what)
    except FileNotFoundError:
        raise RunDirError(f"{Path(path).parent}: missing {Path(path).name} ({what})") from None
    except files.FileReadError as e:
        raise RunDirError(f"{e}; delete the run directory or rerun with --force") from None


def _finite(x, lo=-math.inf, hi=math.inf, optional=True) -> bool:
    if x is None:
        return optional
    return (not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)
            and lo <= x <= hi)


def _count(x, lo=0) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= lo


def read_spec(run_dir: str | os.PathLike) -> tuple[RunSpec, dict]:
    """``config.json`` as ``(RunSpec, raw dict)``; :class:`RunDirError` when missing, corrupt
    or not a valid run configuration."""
    run_dir = Path(run_dir)
    raw = read_json(run_dir / "config.json", "run configuration")
    try:
        return RunSpec.from_dict(raw), raw
    except ConfigError as e:
        raise RunDirError(f"{run_dir}/config.json: not a valid rasp-lab run configuration "
                          f"({e})") from None


def validate_accuracy(rows, where: str) -> list[dict]:
    """Check accuracy rows (``accuracy.json``): a list of ``{length >= 0, split "id"|"ood",
    n >= 1, em in [0, 1] or null, ci_low <= em <= ci_high in [0, 1] or null}``.

    Returns the rows; raises :class:`RunDirError` naming the first bad row."""
    if not isinstance(rows, list):
        raise RunDirError(f"{where}: not a list of per-length results")
    for i, r in enumerate(rows):
        def bad(msg, r=r, i=i):
            raise RunDirError(f"{where}: row {i} ({json.dumps(r)[:120]}): {msg}")
        if not isinstance(r, dict):
            bad("not an object")
        if not _count(r.get("length")):
            bad("length must be an integer >= 0")
        if r.get("split") not in ("id", "ood"):
            bad("split must be 'id' or 'ood'")
        if not _count(r.get("n"), 1):
            bad("n (samples) must be an integer >= 1")
        em, lo, hi = r.get("em"), r.get("ci_low"), r.get("ci_high")
        for name, v in (("em", em), ("ci_low", lo), ("ci_high", hi)):
            if not _finite(v, 0.0, 1.0):
                bad(f"{name} must be a number in [0, 1] or null")
        if em is not None and (lo is None or hi is None or not lo - 1e-9 <= em <= hi + 1e-9):
            bad("the confidence interval must contain em")
        if em is not None and abs(em * r["n"] - round(em * r["n"])) > 1e-6 * r["n"]:
            bad("em is not a fraction of n samples")
    return rows


def read_accuracy(run_dir: str | os.PathLike) -> list[dict]:
    """``accuracy.json`` of a finished run, validated (:func:`validate_accuracy`)."""
    path = Path(run_dir) / "accuracy.json"
    return validate_accuracy(read_json(path, "accuracy by length"), str(path))


def read_done(run_dir: str | os.PathLike) -> dict:
    """The ``DONE`` marker, validated (task, pe, seed, steps, exact-match means in [0, 1])."""
    path = Path(run_dir) / "DONE"
    done = read_json(path, "finished-run marker")
    problems = []
    if not isinstance(done, dict):
        raise RunDirError(f"{path}: corrupt marker (not a JSON object)")
    for key in ("task", "pe"):
        if not isinstance(done.get(key), str):
            problems.append(f"{key} must be a string")
    for key in ("seed", "steps"):
        if not _count(done.get(key)):
            problems.append(f"{key} must be an integer >= 0")
    for key in ("id_em", "ood_em"):
        if not _finite(done.get(key), 0.0, 1.0):
            problems.append(f"{key} must be a number in [0, 1] or null")
    for key in ("final_loss", "wall_seconds", "train_seconds", "tokens_per_second"):
        if not _finite(done.get(key), 0.0):
            problems.append(f"{key} must be a finite number >= 0 or null")
    if done.get("params") is not None and not _count(done.get("params")):
        problems.append("params must be an integer >= 0")
    if problems:
        raise RunDirError(f"{path}: corrupt marker ({'; '.join(problems)})")
    return done


@dataclass
class RunResult:
    """Outcome of a training run (:func:`analysis.training.trainer.train`, :func:`read_result`).

    ``accuracy`` is the list of ``accuracy.json``; ``id_em`` / ``ood_em`` are means over
    lengths; ``reused`` is True when an existing finished run was returned; ``finished`` is
    False when training stopped early (``stop_after``)."""

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


def check_consistent(run_dir: Path, spec: RunSpec, done: dict, rows: list[dict]) -> None:
    """Refuse a finished run whose files disagree: ``DONE`` of another task, PE, seed or step
    count than ``config.json``, or ``accuracy.json`` rows at other lengths than the spec's
    evaluated lengths (files of two different runs mixed in one directory)."""
    for key, want in (("task", spec.task), ("pe", spec.pe), ("seed", spec.seed),
                      ("steps", spec.train.steps)):
        if (key == "steps" and done.get("early_stopped") is True and spec.train.fit_every
                and 0 < done[key] <= want and done[key] % spec.train.fit_every == 0):
            continue                     # stopped by the fit check (TrainConfig.fit_every)
        if done[key] != want:
            raise RunDirError(f"{run_dir}: DONE says {key} {done[key]!r}, config.json "
                              f"{want!r}: files of different runs; rerun with --force")
    got = [(r["length"], r["split"]) for r in rows]
    if got != [tuple(p) for p in spec.eval_lengths]:
        raise RunDirError(f"{run_dir}: accuracy.json has other lengths than config.json's "
                          f"eval_lengths: files of different runs; rerun with --force")


def read_result(run_dir: str | os.PathLike, reused: bool = True,
                spec: RunSpec | None = None) -> RunResult:
    """The :class:`RunResult` of a finished run (``DONE`` + ``accuracy.json``, validated, and
    checked against ``spec`` when given)."""
    run_dir = Path(run_dir)
    done = read_done(run_dir)
    acc = read_accuracy(run_dir)
    if spec is not None:
        check_consistent(run_dir, spec, done, acc)
    return RunResult(str(run_dir), done["task"], done["pe"], int(done["seed"]),
                     done.get("preset", "default"), int(done["steps"]), acc,
                     done.get("id_em"), done.get("ood_em"), done.get("final_loss"),
                     float(done.get("wall_seconds") or 0.0),
                     float(done.get("train_seconds") or 0.0), done.get("tokens_per_second"),
                     int(done.get("params") or 0), reused=reused, finished=True)


def read_task_name(run_dir: str | os.PathLike) -> str:
    """The task of the run in ``run_dir`` (``config.json``'s ``task``), without validating
    the rest: cheap, to refuse another task's runs early. :class:`RunDirError` if unreadable."""
    path = Path(run_dir) / "config.json"
    raw = read_json(path, "run configuration")
    if not isinstance(raw, dict) or not isinstance(raw.get("task"), str):
        raise RunDirError(f"{path}: not a rasp-lab run configuration (no task)")
    return raw["task"]


def check_finished(run_dir: str | os.PathLike, task_name: str | None = None) -> dict:
    """The raw ``config.json`` of a finished run of ``task_name`` (any task when None).

    Cheap (no weights are read): used to refuse runs of other tasks before loading.

    Raises:
        RunDirError: not a run directory, unreadable or invalid configuration, another task's
            run, or not finished (no ``DONE``).
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir}: no such run directory")
    if not (run_dir / "config.json").exists():
        raise RunDirError(f"{run_dir}: not a run directory (no config.json)")
    name = read_task_name(run_dir)
    if task_name is not None and name != task_name:
        raise RunDirError(f"{run_dir}: this run is of task {name!r}, not {task_name!r}")
    if not (run_dir / "DONE").exists():
        raise RunDirError(f"{run_dir}: run not finished (no DONE marker); rerun the same "
                          f"`rasp train` command to resume it")
    return read_json(run_dir / "config.json", "run configuration")


def load_model(path: str | os.PathLike) -> Transformer:
    """A trained model's weights (safetensors), refusing non-finite (NaN / inf) weights.

    Raises:
        RunDirError: a missing, unreadable or implausible weights file.
    """
    path = Path(path)
    try:
        model = load_safetensors(path)
    except (ValueError, OSError) as e:
        reason = str(e).removeprefix(f"{path}: ")
        raise RunDirError(f"{path}: cannot load the weights ({reason})") from None
    bad = [name for name, p in model.state_dict().items() if not bool(torch.isfinite(p).all())]
    if bad:
        raise RunDirError(f"{path}: non-finite weights (NaN or inf) in {', '.join(bad[:3])}"
                          f"{' ...' if len(bad) > 3 else ''}; the run diverged or the file is "
                          f"corrupt")
    return model


def load_checked_weights(run_dir: str | os.PathLike, spec: RunSpec):
    """The finished run's weights, validated: present, readable, finite and of the model
    ``spec`` describes (the one check before a run is reused, probed or reported).

    Raises:
        RunDirError: missing, unreadable, non-finite or mismatching weights.
    """
    run_dir = Path(run_dir)
    if not (run_dir / "model.safetensors").exists():
        raise RunDirError(f"{run_dir}: finished (DONE) but model.safetensors is missing")
    model = load_model(run_dir / "model.safetensors")
    if model.cfg.to_dict() != spec.model.to_dict():
        raise RunDirError(f"{run_dir}: model.safetensors does not match config.json")
    return model


def load_run(run_dir: str | os.PathLike, task=None):
    """Load a finished run: ``(model, config_dict, task)``.

    ``model`` is the trained :class:`Transformer` (eval mode, on CPU), ``config_dict`` the
    contents of ``config.json``, ``task`` the task object (``tasks.get_task(config["task"])``
    unless given). Every file is validated (module docstring).

    Raises:
        RunDirError: the directory is missing, unfinished (no ``DONE``), or has a corrupt or
            implausible config, marker, accuracy or weights file; an unknown task.
    """
    run_dir = Path(run_dir)
    check_finished(run_dir)
    spec, raw = read_spec(run_dir)
    check_consistent(run_dir, spec, read_done(run_dir), read_accuracy(run_dir))
    model = load_checked_weights(run_dir, spec)
    if task is None:
        try:
            task = tasks.get_task(spec.task)
        except tasks.UnknownTaskError as e:
            raise RunDirError(f"{run_dir}: {e.args[0] if e.args else e}") from None
    return model, raw, task


def clear_run(run_dir: str | os.PathLike) -> None:
    """Delete every run file and checkpoint of ``run_dir`` (the lock is kept)."""
    run_dir = Path(run_dir)
    for name in RUN_FILES:
        p = run_dir / name
        if p.exists():
            p.unlink()
    clear_checkpoints(run_dir)


def clear_checkpoints(run_dir: str | os.PathLike) -> None:
    """Delete ``checkpoint/`` and any half-swapped ``checkpoint.tmp/`` / ``.old/``."""
    for name in CHECKPOINT_DIRS:
        if (Path(run_dir) / name).exists():
            shutil.rmtree(Path(run_dir) / name)


# ------------------------------------------------------------------------------------------
# checkpoints
# ------------------------------------------------------------------------------------------

def save_checkpoint(run_dir: Path, model, opt: torch.optim.Optimizer, state: dict) -> None:
    """Write ``checkpoint/`` atomically: model weights, optimizer state + torch RNG, and
    ``state`` (JSON: step, elapsed, tokens_seen, metrics_bytes, last_loss).

    The new checkpoint is written to ``checkpoint.tmp/`` and swapped in with two renames;
    :func:`load_checkpoint` falls back to ``checkpoint.old/`` if interrupted between them."""
    run_dir = Path(run_dir)
    tmp = run_dir / "checkpoint.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        tmp.mkdir(parents=True)
        save_safetensors(model, tmp / "model.safetensors", {"step": state["step"]})
        _atomic_torch_save(tmp / "optimizer.pt", {"optimizer": opt.state_dict(),
                                                  "torch_rng": torch.get_rng_state()})
        atomic_json(tmp / "state.json", state)
    except (OSError, RuntimeError) as e:
        full = isinstance(e, DiskFullError) or _full_disk(e, run_dir)
        shutil.rmtree(tmp, ignore_errors=True)        # the previous checkpoint stays whole
        if full:
            raise disk_full_error(run_dir, f"the checkpoint of step {state['step']}") from None
        raise
    final, old = run_dir / "checkpoint", run_dir / "checkpoint.old"
    if old.exists():
        shutil.rmtree(old)
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    if old.exists():
        shutil.rmtree(old)


#: Bounds of a checkpoint's counters: tokens (2^53, exact in a float) and seconds (a century).
MAX_TOKENS_SEEN = 2 ** 53
MAX_ELAPSED_SECONDS = 100 * 365 * 86400.0


def _validate_state(state, path: Path) -> dict:
    ok = (isinstance(state, dict) and _count(state.get("step"))
          and _finite(state.get("elapsed"), 0.0, MAX_ELAPSED_SECONDS, optional=False)
          and _count(state.get("tokens_seen")) and state["tokens_seen"] <= MAX_TOKENS_SEEN
          and _count(state.get("metrics_bytes"))
          and _finite(state.get("last_loss"), 0.0))
    if not ok:
        raise RunDirError(f"{path}: corrupt checkpoint state (needs step, elapsed <= "
                          f"{MAX_ELAPSED_SECONDS:.0f} s, tokens_seen <= 2^53, metrics_bytes "
                          f">= 0); rerun with --force")
    return state


#: The optimizer settings a checkpoint must share with the run's own optimizer (the others,
#: ``lr`` (set every step) and how the update is computed (``foreach``, ``capturable``, ...),
#: are taken from the run's optimizer, never from the file).
_OPT_FLAGS = ("weight_decay", "betas", "eps", "amsgrad", "maximize")
_ADAM_STATE = {"step", "exp_avg", "exp_avg_sq"}


def _same_flag(mine, theirs) -> bool:
    """Whether an optimizer setting read from a file equals the run's own: booleans equal
    booleans, numbers equal numbers (0 and 0.0 alike), tuples of numbers elementwise."""
    if isinstance(mine, (tuple, list)):
        return (isinstance(theirs, (tuple, list)) and len(theirs) == len(mine)
                and all(_same_flag(a, b) for a, b in zip(mine, theirs)))
    if isinstance(mine, bool) or isinstance(theirs, bool):
        return isinstance(mine, bool) and isinstance(theirs, bool) and mine == theirs
    if isinstance(mine, (int, float)):
        return isinstance(theirs, (int, float)) and mine == theirs
    return mine is None and theirs is None


def _checked_optimizer_state(blob, opt: torch.optim.Optimizer, step: int, path: Path):
    """``(optimizer state dict, torch RNG state)`` of a loaded ``optimizer.pt``, checked
    against the run's own optimizer ``opt`` before anything is loaded: the same parameter
    groups and flags (:data:`_OPT_FLAGS`), per parameter a step count in ``0..step`` and
    finite moments of the parameter's shape, dense and floating point; an RNG state of
    torch's size. :class:`RunDirError` naming the first difference."""
    def bad(msg):
        raise RunDirError(f"{path}: not this run's optimizer state ({msg}); rerun with --force")
    if not isinstance(blob, dict) or set(blob) != {"optimizer", "torch_rng"}:
        bad("expected optimizer and torch_rng")
    rng, sd, ours = blob["torch_rng"], blob["optimizer"], opt.state_dict()
    want_rng = torch.get_rng_state()
    if (not isinstance(rng, torch.Tensor) or rng.dtype != want_rng.dtype
            or rng.shape != want_rng.shape):
        bad("torch_rng is not a torch RNG state")
    if not isinstance(sd, dict) or set(sd) != {"state", "param_groups"} or \
            not isinstance(sd["param_groups"], list) or not isinstance(sd["state"], dict):
        bad("expected state and param_groups")
    if len(sd["param_groups"]) != len(ours["param_groups"]):
        bad(f"{len(sd['param_groups'])} parameter groups, the run has "
            f"{len(ours['param_groups'])}")
    groups = []
    for i, (g, o) in enumerate(zip(sd["param_groups"], ours["param_groups"])):
        if not isinstance(g, dict) or g.get("params") != o["params"]:
            bad(f"parameter group {i} holds other parameters")
        for k in _OPT_FLAGS:
            if not _same_flag(o.get(k), g.get(k)):
                bad(f"parameter group {i}: {k} {str(g.get(k))[:40]}, the run's is {o.get(k)}")
        groups.append({**o})                # the run's own settings, never the file's
    params = [p for g in opt.param_groups for p in g["params"]]
    if not all(isinstance(k, int) and 0 <= k < len(params) for k in sd["state"]):
        bad("state of unknown parameters")
    for k, st in sd["state"].items():
        p = params[k]
        if not isinstance(st, dict) or set(st) != _ADAM_STATE:
            bad(f"parameter {k}: expected {sorted(_ADAM_STATE)}")
        n = st["step"]
        if (not isinstance(n, torch.Tensor) or n.numel() != 1 or not n.is_floating_point()
                or not 0 <= float(n) <= step or float(n) != int(float(n))):
            bad(f"parameter {k}: an optimizer step count outside 0..{step}")
        for name in ("exp_avg", "exp_avg_sq"):
            t = st[name]
            if (not isinstance(t, torch.Tensor) or t.layout != torch.strided
                    or not t.is_floating_point() or t.shape != p.shape or not t.is_contiguous()
                    or t.untyped_storage().nbytes() < t.numel() * t.element_size()):
                bad(f"parameter {k}: {name} is not a dense float tensor of shape "
                    f"{tuple(p.shape)}")
            if not bool(torch.isfinite(t).all()) or (name == "exp_avg_sq" and bool((t < 0).any())):
                bad(f"parameter {k}: {name} is not finite (or negative)")
    return {"state": sd["state"], "param_groups": groups}, rng


def load_checkpoint(run_dir: Path, model, opt: torch.optim.Optimizer, total_steps: int) -> dict:
    """Restore ``model``, ``opt`` and the torch RNG from the run's checkpoint; returns its
    validated state dict.

    ``optimizer.pt`` is read with ``torch.load(weights_only=True)`` (tensors and plain
    containers only; a pickle with code is refused).

    Raises:
        RunDirError: a missing, corrupt or empty file, weights of another shape or non-finite,
            weights of another step than ``state.json``'s, or a state beyond ``total_steps``.
    """
    run_dir = Path(run_dir)
    ck = run_dir / "checkpoint"
    if not ck.exists() and (run_dir / "checkpoint.old").exists():
        ck = run_dir / "checkpoint.old"  # interrupted while swapping: the previous one is whole
    state = _validate_state(read_json(ck / "state.json", "checkpoint state"), ck / "state.json")
    if state["step"] > total_steps:
        raise RunDirError(f"{ck}/state.json: step {state['step']} is beyond the run's "
                          f"{total_steps} steps; rerun with --force")
    try:
        saved = load_model(ck / "model.safetensors")
    except RunDirError as e:
        raise RunDirError(f"{e}; rerun with --force") from None
    # the weights say which step they are of (save_checkpoint writes it in their metadata):
    # weights of another step than state.json's would resume a run that never existed
    saved_step = getattr(saved, "metadata", {}).get("step")
    if saved_step != state["step"]:
        raise RunDirError(f"{ck}: model.safetensors holds the weights of step {saved_step} but "
                          f"state.json says step {state['step']} (files of two checkpoints); "
                          "rerun with --force")
    try:
        model.load_state_dict(saved.state_dict())
    except RuntimeError:
        raise RunDirError(f"{ck}/model.safetensors does not match the run's model; rerun "
                          f"with --force") from None
    model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    try:
        blob = files.read_torch(ck / "optimizer.pt", "optimizer state",
                                max_bytes=4 * model_bytes + (1 << 20))
    except FileNotFoundError:
        raise RunDirError(f"{ck}: missing optimizer.pt; rerun with --force") from None
    except files.FileReadError as e:
        raise RunDirError(f"{e}; rerun with --force") from None
    opt_state, rng = _checked_optimizer_state(blob, opt, state["step"], ck / "optimizer.pt")
    opt.load_state_dict(opt_state)
    torch.set_rng_state(rng)
    return state
