"""The one grid runner: every training run of a grid is a Ray task; run directories are the truth.

``run_grid(runs)`` trains a list of :class:`GridRun` (task, PE, seed, preset, settings) and
returns one :class:`GridResult` per run, in the order given. It is used by ``rasp train --grid``,
``rasp sweep``, ``rasp report`` / ``rasp demo`` and the predictor's validation.

* **Ray.** Each run is a Ray task (``ray.remote``) with declared resources: ``num_cpus`` (also
  its torch threads) and, for ``device="cuda"``, a fractional ``num_gpus`` (default 0.25: four
  small runs share one GPU). With no address, ``ray.init(address="local")`` starts a local Ray
  instance sized to the machine and stops it at the end. With ``address="HOST:PORT"`` (or
  ``$RAY_ADDRESS``) the grid runs on an existing cluster (``ray start --head`` /
  ``ray start --address``, docs/training.md); the run directories must then lie on a path every
  node sees (``runs_root`` / ``-o``). Workers write the run directories themselves; the driver
  only receives each run's small summary (:class:`analysis.training.runs.RunResult`).
* **Run directories are the unit of truth** (:func:`analysis.training.trainer.train`): a finished run is
  reused (checked in the driver, no worker started), an interrupted one resumes from its
  checkpoint, so a rerun of the same grid finishes only what is missing. A worker that dies is
  retried by Ray (``max_retries``) and resumes from the last checkpoint.
* **Failures.** A run that raises is reported (its error and run directory) and does not stop
  the grid; :attr:`GridReport.ok` is False and the CLI exits non-zero at the end.
* **Budget.** With ``budget_s`` no run is started once the time used plus the mean duration of
  the runs trained so far would exceed it; the runs not started are reported as ``"skipped"``
  and the same call trains them next time.
* **Progress.** A tqdm bar over the grid and one summary line per run. Without a terminal the
  bar writes a line ``grid: k/N [elapsed<time left, rate, training <runs>]`` every
  ``$RASP_PROGRESS_EVERY`` seconds (:mod:`rasp.repl.progress`, time-based: also while every
  worker is still busy); the driver waits for Ray at most :data:`WAIT_S` seconds at a time, so
  Ctrl-C acts within seconds: a line says which runs are stopped, their workers are cancelled,
  their checkpoints stay and the same command resumes them.
* ``serial=True`` trains the runs in this process, one at a time (for debugging, e.g. with
  ``pdb``); results are the same.
* **Stacks.** With ``stack`` > 1, runs that differ only in their seed (same task, PE, preset
  and settings) are trained together as one Ray task, one stacked model
  (:mod:`analysis.training.stacked`), at most ``stack`` members each; each member still writes
  its own run directory and gets its own result. The default (:func:`auto_stack`) stacks on
  a GPU and not on a CPU, where it was measured not to pay (docs/benchmarks.md, "Stacked
  training").
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from analysis.training import runs as _runs
from analysis.training import stacked, trainer
from rasp_model.positional import PE_NAMES
from rasp.errors import RASPError
from tasks.custom import task_source
from rasp.repl.progress import progress_bar

__all__ = ["GridRun", "GridResult", "GridReport", "GridError", "run_grid",
           "with_source",
           "connect", "priority", "train_pending", "auto_stack", "plan_jobs", "GPU_STACK",
           "parse_address", "DEFAULT_GPUS_PER_RUN", "CONNECT_TIMEOUT_S", "WAIT_S"]

#: Fraction of a GPU each run declares with ``device="cuda"`` (several small runs share one GPU).
DEFAULT_GPUS_PER_RUN = 0.25

#: Members per stacked Ray task on a GPU (:func:`auto_stack`): a demo-size model leaves a GPU
#: mostly idle, so one task trains this many seeds of a configuration at once.
GPU_STACK = 16

#: Seconds the driver waits for a finished Ray task at a time (then it updates what the bar
#: says and waits again): how late Ctrl-C can act.
WAIT_S = 1.0

#: Seconds to wait for a cluster's address to accept a connection before giving up.
CONNECT_TIMEOUT_S = 10.0


class GridError(RASPError, RuntimeError):
    """The grid cannot run: unreachable or malformed cluster address, impossible resources
    (e.g. ``device="cuda"`` on a cluster without GPUs). The message says how to fix it."""


@dataclass
class GridRun:
    """One run of a grid: the arguments of :func:`analysis.training.trainer.train`.

    ``task`` is a task name (or a task object, for ``serial=True`` only); ``source`` is where a
    task outside the catalogue comes from (:func:`tasks.custom.task_source`: a task file with its
    sha256, a regular expression), set by :func:`run_grid` so that a worker loads the task from
    the record itself (:meth:`load_task`) — on a cluster node that never saw the driver's
    registrations or environment; ``overrides`` are
    ``config_overrides`` (flat model / training settings, :mod:`analysis.training.configs`); ``run_dir``
    defaults to ``runs_root/<task>/<pe>/seed<k>[-<preset>]``; ``tag`` is free text shown in the
    summary (e.g. a sweep configuration).
    """

    task: object
    pe: str
    seed: int = 0
    preset: str = "default"
    overrides: dict = field(default_factory=dict)
    steps: int | None = None
    train_max_len: int | None = None
    run_dir: str | None = None
    tag: str = ""
    source: dict | None = None

    def load_task(self):
        """The run's task: from :attr:`source` when set (a task file is loaded and must still
        have the recorded sha256), else :attr:`task` (a catalogue name or a task object).

        Raises:
            analysis.training.trainer.TrainingError: unknown task, or a task file that changed
                or no longer loads."""
        return trainer.resolve_task(self.source if self.source is not None else self.task)

    def spec(self, task=None):
        """The run's settings (:class:`analysis.training.configs.RunSpec`,
        :func:`analysis.training.trainer.resolve_spec` of these arguments): the one place a
        grid run's arguments become a spec. ``task``: the run's task object when the caller
        has it (default :meth:`load_task`).

        Raises:
            analysis.training.trainer.TrainingError: unknown task or PE, a bad preset, setting
                or length."""
        return trainer.resolve_spec(self.load_task() if task is None else task, self.pe,
                                    self.seed, self.preset, self.steps, self.train_max_len,
                                    dict(self.overrides) or None)

    @property
    def task_name(self) -> str:
        return self.task if isinstance(self.task, str) else self.task.name

    def label(self) -> str:
        """``task/pe/seed<k>`` plus the tag, for summaries."""
        base = f"{self.task_name}/{self.pe}/seed{self.seed}"
        return f"{base} {self.tag}" if self.tag else base

    def directory(self, runs_root: str | os.PathLike = "runs") -> Path:
        """The run directory (``run_dir`` or the default naming under ``runs_root``)."""
        if self.run_dir is not None:
            return Path(self.run_dir)
        return _runs.default_run_dir(self.task_name, self.pe, self.seed, self.preset,
                                        runs_root, self.train_max_len)


@dataclass
class GridResult:
    """Outcome of one run. ``status``: ``"trained"`` (from scratch), ``"resumed"`` (from a
    checkpoint), ``"reused"`` (finished before), ``"failed"`` (``error`` says why),
    ``"skipped"`` (not started: time budget). ``result`` is the run's
    :class:`analysis.training.runs.RunResult` when it finished; ``seconds`` is wall time."""

    run: GridRun
    run_dir: str
    status: str
    result: _runs.RunResult | None = None
    error: str | None = None
    seconds: float = 0.0
    worker: str = ""

    @property
    def finished(self) -> bool:
        return self.status in ("trained", "resumed", "reused")

    def summary_line(self) -> str:
        """One line: the run, its outcome (exact match, time) or its error, its directory."""
        if self.result is not None and self.finished:
            line = self.result.summary_line()
            if self.status == "resumed":
                line += "  (resumed from a checkpoint)"
            return f"{line}  [{self.run.tag}]" if self.run.tag else line
        what = "FAILED" if self.status == "failed" else self.status
        return f"{self.run.label()}: {what}: {self.error} -> {self.run_dir}"

    def to_dict(self) -> dict:
        d = {"task": self.run.task_name, "pe": self.run.pe, "seed": self.run.seed,
             "preset": self.run.preset, "overrides": self.run.overrides, "tag": self.run.tag,
             "run_dir": self.run_dir, "status": self.status, "error": self.error,
             "seconds": round(self.seconds, 2), "worker": self.worker}
        d["result"] = None if self.result is None else self.result.to_dict()
        return d


@dataclass
class GridReport:
    """All results of :func:`run_grid` (in the order of the runs given) and how it ran."""

    results: list[GridResult]
    wall_seconds: float
    backend: str                       # "serial", "ray-local" or "ray://HOST:PORT"
    budget_s: float | None = None

    @property
    def failed(self) -> list[GridResult]:
        return [r for r in self.results if r.status == "failed"]

    @property
    def skipped(self) -> list[GridResult]:
        return [r for r in self.results if r.status == "skipped"]

    @property
    def ok(self) -> bool:
        """True when every run finished (none failed, none skipped)."""
        return all(r.finished for r in self.results)

    def run_results(self) -> list[_runs.RunResult]:
        """The :class:`analysis.training.runs.RunResult` of every finished run."""
        return [r.result for r in self.results if r.finished and r.result is not None]

    def summary(self) -> str:
        """A closing line: counts per status, wall time, and what is left to do."""
        counts: dict[str, int] = {}
        for r in self.results:
            counts[r.status] = counts.get(r.status, 0) + 1
        parts = ", ".join(f"{n} {s}" for s, n in counts.items())
        line = f"grid: {len(self.results)} run(s): {parts} in {self.wall_seconds:.0f} s " \
               f"({self.backend})"
        if self.skipped:
            line += (f"\ngrid: time budget of {self.budget_s:.0f} s used up; "
                     f"{len(self.skipped)} run(s) not started: "
                     + ", ".join(r.run.label() for r in self.skipped)
                     + "; run the same command again to train them (finished runs are reused)")
        if self.failed:
            line += "\ngrid: failed run(s):\n" + "\n".join(
                f"  {r.run.label()}: {r.error} -> {r.run_dir}" for r in self.failed)
        return line


# ------------------------------------------------------------------------------------------
# one run (what a Ray worker executes)
# ------------------------------------------------------------------------------------------

def _train_one(run: GridRun, run_dir: str, device: str, threads: int, force: bool) -> dict:
    """Train (or resume) one run into ``run_dir``; returns ``{"status", "result", "worker"}``.

    Executed by a Ray worker (or in-process with ``serial=True``); exceptions propagate to the
    driver, which reports them with the run directory."""
    resumed = _runs.has_checkpoint(run_dir)
    res = trainer.train(run.load_task(), run.pe, seed=run.seed, steps=run.steps,
                         train_max_len=run.train_max_len, out_dir=run_dir, device=device,
                         config_overrides=dict(run.overrides) or None, progress=False,
                         preset=run.preset, force=force, threads=threads, verbose=False)
    status = "reused" if res.reused else ("resumed" if resumed else "trained")
    return {"status": status, "result": res, "worker": f"{socket.gethostname()}:{os.getpid()}"}


def _train_job(job: list, device: str, threads: int, force: bool) -> list[dict]:
    """Train one job of :func:`plan_jobs`: a list of ``(run, run_dir)``; one run trains alone
    (:func:`_train_one`, its error propagates; on CUDA a stackable run trains as a stack of
    one), several as one stack
    (:func:`analysis.training.stacked.train_group`, a member's error is its own entry
    ``{"status": "failed", "error"}``). Executed by a Ray worker or in-process."""
    run0 = job[0][0]
    task = run0.load_task()
    specs = [r.spec(task) for r, _ in job]
    # one run alone: the single-model loop, except on CUDA, where a stack of one takes the
    # captured step (analysis.training.stacked.StackStepper)
    if len(job) == 1 and not (str(device).startswith("cuda")
                              and stacked.stack_key(specs[0]) is not None):
        return [_train_one(job[0][0], job[0][1], device, threads, force)]
    resumed = [_runs.has_checkpoint(d) for _, d in job]
    results = stacked.train_group(task, specs, [d for _, d in job], device=device,
                                  progress=False, force=force, threads=threads, verbose=False)
    worker = f"{socket.gethostname()}:{os.getpid()} (stack of {len(job)})"
    out = []
    for res, was in zip(results, resumed):
        if isinstance(res, BaseException):
            out.append({"status": "failed", "error": f"{type(res).__name__}: {res}",
                        "worker": worker})
        else:
            out.append({"status": "reused" if res.reused else ("resumed" if was else "trained"),
                        "result": res, "worker": worker})
    return out


def auto_stack(device: str) -> int:
    """Members per Ray task when the caller does not say: :data:`GPU_STACK` on a GPU, 1 on a
    CPU (there a demo-size step is arithmetic-bound and a stack of 5 trained no faster than 5
    separate runs: docs/benchmarks.md, "Stacked training")."""
    return GPU_STACK if str(device).startswith("cuda") else 1


def plan_jobs(runs: Sequence[GridRun], todo: Sequence[int], stack: int,
              slots: int = 1) -> list[list[int]]:
    """Group the runs ``todo`` (indices into ``runs``, in their order) into jobs: runs whose
    specs differ only in the seed (:func:`analysis.training.stacked.stack_key`) share a job of
    at most ``stack`` members, chunks of a configuration kept even and at least ``slots`` of
    them where there are enough runs (so every worker has a job). ``stack`` 1: one job per run.
    Jobs are ordered by their first run."""
    if stack <= 1:
        return [[i] for i in todo]
    groups: dict = {}
    for i in todo:
        r = runs[i]
        try:
            key = stacked.stack_key(r.spec())
        except (trainer.TrainingError, RASPError):
            key = None
        groups.setdefault((r.task_name, key) if key is not None else ("alone", i), []).append(i)
    jobs = []
    for members in groups.values():
        n = len(members)
        chunks = max(-(-n // stack), min(n, max(1, slots)) if len(groups) < slots else 1)
        size = -(-n // chunks)
        jobs += [members[k:k + size] for k in range(0, n, size)]
    return sorted(jobs, key=lambda j: todo.index(j[0]))


def _reuse_in_driver(run: GridRun, run_dir: Path) -> _runs.RunResult | None:
    """A finished run's result without starting a worker (``train`` checks that the finished
    run has the same configuration and returns it without training); None if not finished."""
    if not _runs.is_finished(run_dir):
        return None
    return trainer.train(run.load_task(), run.pe, seed=run.seed, steps=run.steps,
                          train_max_len=run.train_max_len, out_dir=run_dir,
                          config_overrides=dict(run.overrides) or None, progress=False,
                          preset=run.preset, verbose=False)


def with_source(run: GridRun) -> GridRun:
    """``run`` carrying its task's source record (:attr:`GridRun.source`) when the task is
    outside the catalogue (a task file, a regular expression), resolved here in the driver;
    a catalogue task's run, or one whose task does not resolve (it fails where it trains, with
    the error), unchanged."""
    if run.source is not None:
        return run
    try:
        task = run.load_task()
    except (trainer.TrainingError, RASPError):
        return run                 # the run fails where it trains, with the error (as before)
    if getattr(task, "spec", None) is None:
        return run
    return dataclasses.replace(run, source=task_source(task))


# ------------------------------------------------------------------------------------------
# Ray
# ------------------------------------------------------------------------------------------

def parse_address(address: str) -> tuple[str, int]:
    """``"HOST:PORT"`` -> ``(host, port)``; :class:`GridError` for anything else."""
    text = address.strip()
    if text.startswith("ray://"):
        raise GridError(f"--address {address!r}: Ray client addresses (ray://) are not "
                        f"supported; give the head node's GCS address HOST:PORT "
                        f"(`ray start --head --port PORT`)")
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise GridError(f"--address {address!r}: expected HOST:PORT of a Ray head node, "
                        f"e.g. 127.0.0.1:6379")
    return host.strip("[]"), int(port)


def _check_reachable(address: str, timeout_s: float) -> None:
    host, port = parse_address(address)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as e:
        why = "timed out" if isinstance(e, socket.timeout) else (e.strerror or str(e))
        raise GridError(f"cannot reach a Ray cluster at {address} ({why}); start one with "
                        f"`ray start --head --port {port}` or check the address "
                        f"(docs/training.md)") from None


def ray_token_path() -> Path:
    """Where Ray keeps its authentication token (``$RAY_AUTH_TOKEN_PATH``, else
    ``~/.ray/auth_token``, Ray's default)."""
    return Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")


def _private_token() -> None:
    """Make Ray's authentication token readable by its owner only.

    Ray 2.60 writes ``~/.ray/auth_token`` with mode 0644 and its gRPC servers (GCS, raylet,
    workers) listen on every interface — it has no option to bind them to 127.0.0.1 — so the
    token is what keeps other users and hosts out of a local instance: it must not be readable
    by them. A token owned by another user is left alone."""
    path = ray_token_path()
    try:
        st = path.stat()
        if st.st_uid == os.getuid() and st.st_mode & 0o077:
            os.chmod(path, 0o600)
    except OSError:
        pass


#: the environment variable with which Ray's raylet sets its workers' niceness (Ray's default
#: 15); a local instance started by :func:`connect` runs them at 0 unless it is set
WORKER_NICENESS_ENV = "RAY_worker_niceness"


#: the reaper of a local Ray instance (:func:`_start_reaper`), run as ``python -c``: it needs
#: only the standard library and psutil (a dependency of Ray)
_REAPER = r"""
import os, sys, time, signal
import psutil
driver = psutil.Process(int(sys.argv[1]))
seen = {}
while True:
    try:
        if not driver.is_running() or driver.status() == psutil.STATUS_ZOMBIE:
            break
        for c in driver.children(recursive=True):
            if c.pid != os.getpid() and c.pid not in seen:
                try:
                    if "ray" in " ".join(c.cmdline()):      # Ray's processes only
                        seen[c.pid] = c
                except psutil.Error:
                    pass
    except psutil.Error:
        break
    time.sleep(0.5)
for p in seen.values():
    try:
        if p.is_running():      # the same process (psutil compares its start time)
            p.kill()
    except psutil.Error:
        pass
"""


def _start_reaper() -> None:
    """Start a small process that outlives the driver by at most a second: it records the
    processes of the local Ray instance this driver started (its descendants whose command line
    names Ray: GCS, raylet, workers, and the dashboard and runtime-env agents, which Ray does not
    tie to the driver)
    and kills those still running when the driver is gone. Ray ends the others itself; the
    agents of a SIGKILLed driver otherwise stay 1-4 minutes, their ports open, trying to
    report the raylet's death to the dead GCS (measured 2026-11-25)."""
    try:
        subprocess.Popen([sys.executable, "-c", _REAPER, str(os.getpid())],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
    except OSError:        # no reaper: Ray's own fate-sharing still ends GCS, raylet, workers
        pass


def _token_auth_for_a_cluster() -> None:
    """Send Ray's token to a cluster at an explicit address when one is at hand.

    ``ray start`` enables token authentication when a token exists (``~/.ray/auth_token``);
    Ray sends it only for ``address="auto"``, so ``RAY_AUTH_MODE=token`` is set for an explicit
    address too, unless the user set the mode. Ray reads the variable into its cached
    configuration when it is imported (measured with Ray 2.60: set after ``import ray``, the
    connection fails with "Authentication token is missing or incorrect"): this runs before
    the import, and refreshes that configuration as Ray's own ``_enable_token_auth`` does when
    Ray was imported already."""
    if "RAY_AUTH_MODE" in os.environ or not (
            os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH")
            or ray_token_path().exists()):
        return
    os.environ["RAY_AUTH_MODE"] = "token"
    if "ray" in sys.modules:
        try:
            from ray._raylet import Config   # start-up: as connect(); Ray is imported already
            Config.initialize("")
        except (ImportError, AttributeError):     # another Ray: the variable alone
            pass


def connect(address: str | None = None, num_cpus: int | None = None,
            timeout_s: float = CONNECT_TIMEOUT_S) -> tuple[bool, str]:
    """Connect to Ray; returns ``(started_here, backend_name)``.

    ``address`` None (and no ``$RAY_ADDRESS``): start a local Ray instance sized to the machine
    (``num_cpus`` to limit it), its workers at normal priority (niceness 0, not Ray's 15:
    :data:`WORKER_NICENESS_ENV`), with token authentication (Ray's default) and the token made
    readable by its owner only (:func:`_private_token`); its processes end with the driver,
    also when the driver is killed (a test). ``"HOST:PORT"``: connect to that cluster after checking within
    ``timeout_s`` that the address accepts connections (Ray itself would retry for minutes).
    If Ray is already initialised in this process, it is used as it is.

    Raises :class:`GridError` for a malformed or unreachable address or a failed connection.
    """
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address not in (None, "local"):
        _token_auth_for_a_cluster()        # before `import ray`: Ray reads it at import
    import ray   # start-up: importing Ray costs ~1-2 s; only the Ray path needs it

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")   # no usage reports leave the machine
    if ray.is_initialized():
        return False, "ray (already initialised)"
    quiet = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    if address in (None, "local"):
        # Ray starts its workers at niceness 15 (RayConfig worker_niceness), so on a shared
        # machine any other process at normal priority starves the training runs (measured: 2%
        # CPU per worker beside three busy loops); the runs are the job's work, not background
        # work: the raylet started here reads this variable (as Ray's job manager sets it)
        os.environ.setdefault(WORKER_NICENESS_ENV, "0")
        ray.init(address="local", num_cpus=num_cpus, object_store_memory=128 * 1024 ** 2,
                 **quiet)
        _private_token()
        _start_reaper()
        return True, "ray-local"
    _check_reachable(address, timeout_s)
    try:
        ray.init(address=address, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        cause = e.__cause__
        if cause is not None and "auth" in type(cause).__name__.lower():
            msg += (" (authentication: copy the head node's ~/.ray/auth_token or set "
                    "RAY_AUTH_TOKEN; docs/training.md)")
        raise GridError(f"cannot connect to the Ray cluster at {address}: {msg}") from None
    return False, f"ray://{address}"


def _error_text(e: BaseException) -> str:
    """The user-facing error of a failed run (the worker's exception, not Ray's wrapper)."""
    import ray.exceptions as rex   # start-up: as connect()

    if isinstance(e, rex.RayTaskError):
        cause = e.cause if e.cause is not None else e
        if isinstance(cause, rex.RayTaskError):
            return str(cause).strip().splitlines()[-1]
        return f"{type(cause).__name__}: {cause}"
    if isinstance(e, (rex.WorkerCrashedError, rex.NodeDiedError)):
        return f"the worker died ({type(e).__name__}); rerun to resume from the checkpoint"
    return f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"


# ------------------------------------------------------------------------------------------
# the grid
# ------------------------------------------------------------------------------------------

def run_grid(runs: Sequence[GridRun], runs_root: str | os.PathLike = "runs",
             address: str | None = None, budget_s: float | None = None, serial: bool = False,
             device: str = "cpu", num_cpus: int = 1, num_gpus: float | None = None,
             force: bool = False, progress: bool = True, max_retries: int = 2,
             ray_num_cpus: int | None = None, log: Callable[[str], None] | None = None,
             stack: int | None = None) -> GridReport:
    """Train every run of a grid, reusing finished runs and resuming interrupted ones.

    Args:
        runs: the runs, in the order to start them (put the most informative first when a
            budget may cut the grid short).
        runs_root: root of the default run directories (a path every node sees on a cluster).
        address: ``"HOST:PORT"`` of a Ray cluster; None = ``$RAY_ADDRESS`` or a local Ray
            instance started here and stopped at the end.
        budget_s: wall-clock budget in seconds; no run is started once time used + the mean
            duration of the runs trained so far would exceed it (0 = start nothing).
        serial: train in this process, one run at a time (debugging; no Ray).
        device: ``"cpu"`` or ``"cuda"`` (each run declares ``num_gpus`` then).
        num_cpus: CPUs each run declares (also its torch threads).
        num_gpus: GPU fraction each run declares with ``device="cuda"``
            (default :data:`DEFAULT_GPUS_PER_RUN`).
        force: retrain finished runs / replace runs with another configuration.
        progress: a tqdm bar over the grid (one summary line per run is always logged).
        max_retries: Ray retries of a run whose worker died (it resumes from its checkpoint).
        ray_num_cpus: size of the local Ray instance (default: all cores).
        log: where summary lines go (default: the bar's ``write``, i.e. stderr).
        stack: at most this many runs of one configuration (differing in the seed) per Ray
            task, trained as one stacked model (:mod:`analysis.training.stacked`); 1 = one run
            per task (``--no-stack``); None = :func:`auto_stack` (GPU: stacked, CPU: not).

    Returns:
        a :class:`GridReport` (results in the order of ``runs``).

    Raises:
        GridError: unreachable / malformed address, or impossible resources.
    """
    t0 = time.time()
    if num_cpus < 1:
        raise GridError(f"num_cpus per run must be >= 1, got {num_cpus}")
    if stack is not None and (isinstance(stack, bool) or not isinstance(stack, int)
                              or stack < 1):
        raise GridError(f"stack must be a whole number >= 1 (1 = no stacking), got {stack!r}")
    stack = auto_stack(device) if stack is None else stack
    cuda = str(device).startswith("cuda")
    if num_gpus is None:
        num_gpus = DEFAULT_GPUS_PER_RUN if cuda else 0.0
    if num_gpus < 0 or num_gpus > 1 and num_gpus != int(num_gpus):
        raise GridError(f"num_gpus per run must be a fraction in (0, 1] or a whole number, "
                        f"got {num_gpus}")
    dirs = [str(r.directory(runs_root)) for r in runs]
    runs = [with_source(r) for r in runs]     # workers load tasks from these records
    if len(set(dirs)) != len(dirs):
        dup = next(d for d in dirs if dirs.count(d) > 1)
        raise GridError(f"two runs of the grid write the same run directory {dup}")
    results: list[GridResult | None] = [None] * len(runs)
    bar = progress_bar(show=progress, total=len(runs), desc="grid", unit="run",
                       dynamic_ncols=True, file=sys.stderr)
    say = log or (lambda s: bar.write(s, file=sys.stderr))
    durations: list[float] = []

    def doing(job_runs: Sequence[int]) -> None:
        """What the bar's lines say the grid is doing: the runs training now."""
        names = [runs[i].label() for i in job_runs]
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        bar.set_postfix_str(f"training {', '.join(names[:3])}{more}" if names else "",
                            refresh=False)

    def stopping(job_runs: Sequence[int]) -> None:
        """Ctrl-C: one line before the workers are told (their checkpoints stay)."""
        names = [runs[i].label() for i in job_runs]
        say(f"grid: interrupted; stopping {len(names)} run(s) "
            f"({', '.join(names[:3])}{' ...' if len(names) > 3 else ''}); their checkpoints "
            f"stay, the same command resumes them")

    def finish(i: int, res: GridResult) -> None:
        results[i] = res
        if res.status in ("trained", "resumed"):
            durations.append(res.seconds)
        bar.update(1)
        say(res.summary_line())

    def may_start() -> bool:
        if budget_s is None:
            return True
        if budget_s <= 0:
            return False
        expected = sum(durations) / len(durations) if durations else 0.0
        return time.time() - t0 + expected <= budget_s

    # finished runs are read in the driver (no worker needed)
    todo = []
    for i, (run, rd) in enumerate(zip(runs, dirs)):
        if not force:
            t1 = time.time()
            try:
                res = _reuse_in_driver(run, Path(rd))
            except (trainer.TrainingError, _runs.RunDirError) as e:
                finish(i, GridResult(run, rd, "failed", error=str(e),
                                     seconds=time.time() - t1))
                continue
            if res is not None:
                finish(i, GridResult(run, rd, "reused", res, seconds=time.time() - t1,
                                     worker="driver"))
                continue
        todo.append(i)

    backend = "serial" if serial else ("ray" if todo else "nothing to train")
    slots = 1 if serial else max(1, (ray_num_cpus or os.cpu_count() or 1) // num_cpus)
    jobs = plan_jobs(runs, todo, stack, slots)

    def finish_job(job: list[int], outs: list[dict], seconds: float) -> None:
        for i, out in zip(job, outs):
            if out["status"] == "failed":
                finish(i, GridResult(runs[i], dirs[i], "failed", error=out["error"],
                                     seconds=seconds, worker=out.get("worker", "")))
            else:
                finish(i, GridResult(runs[i], dirs[i], out["status"], out["result"],
                                     seconds=seconds, worker=out["worker"]))

    try:
        if todo and serial:
            for job in jobs:
                if not may_start():
                    break
                t1 = time.time()
                doing(job)
                try:
                    outs = _train_job([(runs[i], dirs[i]) for i in job], device, num_cpus,
                                      force)
                    finish_job(job, [{**o, "worker": "driver"} for o in outs],
                               time.time() - t1)
                except KeyboardInterrupt:
                    stopping(job)
                    raise
                except Exception as e:  # noqa: BLE001 - any failure of one run is reported
                    for i in job:
                        finish(i, GridResult(runs[i], dirs[i], "failed",
                                             error=f"{type(e).__name__}: {e}",
                                             seconds=time.time() - t1))
        elif todo and may_start():
            backend = _run_on_ray(runs, dirs, jobs, address, device, num_cpus, num_gpus, force,
                                  max_retries, ray_num_cpus, may_start, finish_job,
                                  doing, stopping)
    finally:
        bar.close()
    for i, run in enumerate(runs):
        if results[i] is None:
            results[i] = GridResult(run, dirs[i], "skipped",
                                    error=f"not started: time budget of {budget_s:.0f} s "
                                          f"used up")
    report = GridReport([r for r in results if r is not None], time.time() - t0, backend,
                        budget_s)
    say(report.summary())
    return report


# --------------------------------------------------------------------------------------------
# Scheduling: which pending runs first
# --------------------------------------------------------------------------------------------

def priority(run: GridRun) -> tuple:
    """Sort key of a run when a budget may cut a grid short: most informative first. PEs in
    :data:`rasp_model.positional.PE_NAMES` order (NoPE, then the relative encodings, then the
    absolute ones), seed 0 first; NoPE's other seeds (the cross-seed baseline of the distance
    claims) right after T5."""
    rank = PE_NAMES.index(run.pe) if run.pe in PE_NAMES else len(PE_NAMES)
    if run.pe == "nope" and run.seed > 0:
        rank = 1.5 + run.seed / 1000
    return (rank, run.seed)


def train_pending(runs: Sequence[GridRun], **grid_kwargs) -> dict[str, dict]:
    """Train the runs ``runs`` (each ``run.run_dir`` set; finished ones are reused by
    :func:`run_grid`, or reported when they hold another configuration), most informative
    first (:func:`priority`), with :func:`run_grid` (``grid_kwargs``: its keyword arguments,
    e.g. ``runs_root``, ``address``, ``budget_s``).

    Returns:
        run directory -> ``{"dir", "status": "trained"|"resumed"|"reused"|"failed"|"skipped",
        "error"?, "seconds", "line"?}``; empty when ``runs`` is. A skipped run's error says
        that the same command trains it (finished runs are reused).

    Raises:
        GridError: as :func:`run_grid`.
    """
    todo = sorted(runs, key=priority)
    if not todo:
        return {}
    rep = run_grid(todo, **grid_kwargs)
    done: dict[str, dict] = {}
    for r in rep.results:
        entry = {"dir": r.run_dir, "status": r.status, "seconds": r.seconds}
        if r.finished:
            entry["line"] = r.summary_line()
        else:
            entry["error"] = r.error if r.status == "failed" else (
                f"{r.error}; run the same command again to train it (finished runs are reused)")
        done[r.run_dir] = entry
    return done


def _run_on_ray(runs, dirs, jobs, address, device, num_cpus, num_gpus, force, max_retries,
                ray_num_cpus, may_start, finish_job, doing, stopping) -> str:
    """Submit the ``jobs`` (:func:`plan_jobs`) as Ray tasks, as many at a time as the cluster
    can run; wait for them :data:`WAIT_S` seconds at a time (``doing``: the runs training now;
    ``stopping``: called with them on Ctrl-C, before they are cancelled)."""
    import ray   # start-up: as connect()
    import ray.exceptions as rex

    started_here, backend = connect(address, num_cpus=ray_num_cpus)
    try:
        avail = ray.cluster_resources()
        if num_gpus and avail.get("GPU", 0) < num_gpus:
            raise GridError(f"each run asks for {num_gpus} GPU but the Ray cluster has "
                            f"{avail.get('GPU', 0):g} GPU(s); use --device cpu or add GPU "
                            f"nodes")
        if avail.get("CPU", 0) < num_cpus:
            raise GridError(f"each run asks for {num_cpus} CPU(s) but the Ray cluster has "
                            f"{avail.get('CPU', 0):g}")
        slots = int(avail.get("CPU", 1) // num_cpus)
        if num_gpus:
            slots = min(slots, int(avail.get("GPU", 0) / num_gpus + 1e-9))
        slots = max(1, slots)
        task = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus or 0,
                          max_retries=max_retries)(_train_job)
        pending = list(jobs)
        running: dict = {}
        try:
            while pending or running:
                while pending and len(running) < slots and may_start():
                    job = pending.pop(0)
                    ref = task.remote([(runs[i], dirs[i]) for i in job], device, num_cpus,
                                      force)
                    running[ref] = (job, time.time())
                if not running:
                    break
                doing([i for job, _ in running.values() for i in job])
                ready, _ = ray.wait(list(running), num_returns=1, timeout=WAIT_S)
                for ref in ready:
                    job, t1 = running.pop(ref)
                    try:
                        outs = ray.get(ref)
                    except rex.RayError as e:
                        outs = [{"status": "failed", "error": _error_text(e)} for _ in job]
                    finish_job(job, outs, time.time() - t1)
        except KeyboardInterrupt:
            stopping([i for job, _ in running.values() for i in job])
            raise
        finally:
            for ref in running:                   # interrupted: stop what is still running
                ray.cancel(ref, force=True)
    finally:
        if started_here:
            ray.shutdown()
    return backend
