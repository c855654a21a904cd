"""The experiment's pipeline: train -> load -> probe -> predict -> claims, one stage a function.

A :class:`~analysis.experiment.plan.Plan` says which runs exist (their settings resolved
once); the stages take it from there, each returning a typed record:

1. :func:`train`: the plan's missing or partial runs through the grid runner
   (:func:`analysis.training.grid.train_pending`: Ray tasks, most informative first), a
   :class:`Trained` per run trained now;
2. :func:`load`: each planned run of a task read back from its run directory (model,
   ``config.json``, ``accuracy.json``), a :class:`Loaded` (a :class:`RunRow` per run, what was
   not available said in ``problems``);
3. :func:`probe`: the task's reference program compiled and the trained models' attention
   compared with it and with each other (:mod:`analysis.probing.alignment`), a :class:`Probed`;
4. :func:`predict`: the predictor per PE for the training protocol of that PE's runs
   (:func:`analysis.prediction.predict.predict`; the searches where the checkers leave it
   unknown and the options ask for them), a :class:`Predicted`;
5. :func:`claim`: the measured outcome and the claims about the papers computed from the runs
   (:mod:`analysis.evidence.claims`), a :class:`Claimed`.

:func:`run_task` chains stages 2-5 for one task, as Tracr's ``compiling.py`` chains its
compiler's stages; training comes first for every task of a report at once (one grid, one
budget). The jobs on the pipeline: the report (:mod:`analysis.reporting.report`), the
predictor's check (:mod:`analysis.experiment.validate`: plan -> :func:`train_every` -> load ->
predict -> claims), the curves (:mod:`analysis.experiment.curve`) and the replication's waves
(:mod:`analysis.experiment.replication`: :func:`train`). Every stage's failure that leaves the others meaningful is a line of its record's
``problems``; what makes the experiment impossible raises :class:`ExperimentError`.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from analysis.evidence import claims as _claims
from analysis.experiment.plan import Plan, PlannedRun
from analysis.prediction import budget as _budget
from analysis.prediction import predict as _predict
from analysis.probing import alignment, capture, metrics
from analysis.training.grid import GridError, train_pending
from analysis.training.trainer import TrainingError
from analysis.training.runs import (RunDirError, is_finished, load_run, read_accuracy,
                                    read_task_name)
from compiler.errors import CompilerError
from rasp.errors import RASPError
from rasp.repl.progress import working

__all__ = ["ExperimentError", "GridError", "StageOptions", "Trained", "RunRow", "Loaded",
           "Probed", "Predicted", "Claimed", "TaskRuns", "train", "train_every", "load",
           "probe", "predict",
           "claim", "run_task", "check_owner", "prediction_for", "to_plain"]


class ExperimentError(RASPError):
    """The experiment cannot run: a run directory holds another task's run, the grid cannot
    start (unreachable cluster, impossible resources). The message says how to fix it."""


@dataclass
class StageOptions:
    """How the stages run (the report's options, :class:`analysis.reporting.report.
    ReportOptions`, add the page's and the preset's).

    Attributes:
        device: torch device of training (``cpu`` / ``cuda``).
        train_missing: train what is missing (False: report what exists, say what is missing).
        variant: the JSD variant of probing (``standard`` / ``kazemnejad``).
        progress: log lines on stderr and progress bars.
        probe_lengths: input lengths to probe (None: middle and end of the training range,
            and 1.5x its end: :func:`analysis.probing.alignment.probe_lengths`).
        jobs: CPUs of the local Ray instance (training runs side by side; None: all cores).
        address: ``HOST:PORT`` of a Ray cluster (None: ``$RAY_ADDRESS``, else local).
        search, search_budget, crasp_budget: run the searches where the checkers leave a
            PE's prediction ``unknown``, with these work budgets (None: the defaults of
            :mod:`analysis.prediction.budget`).
        serial: train in this process, one run at a time (no Ray; debugging, tests).
        force: retrain finished runs and replace runs of another configuration.
        grid: further keywords of :func:`analysis.training.grid.run_grid` (``num_cpus``,
            ``num_gpus``, ``stack``).
        sink: where the log lines go (None: stderr, when ``progress``).
    """

    device: str = "cpu"
    train_missing: bool = True
    variant: str = "standard"
    progress: bool = True
    probe_lengths: list[int] | None = None
    jobs: int | None = None
    address: str | None = None
    search: bool = False
    search_budget: int | None = None
    crasp_budget: int | None = None
    serial: bool = False
    force: bool = False
    grid: dict = field(default_factory=dict)
    sink: Callable[[str], None] | None = None

    def log(self, msg: str) -> None:
        """One progress line: to ``sink``, else on stderr (none without ``progress``)."""
        if self.sink is not None:
            self.sink(msg)
        elif self.progress:
            print(msg, file=sys.stderr, flush=True)


def to_plain(obj: Any) -> Any:
    """JSON-able copy of plain data holding NumPy values (other objects become strings)."""
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if isinstance(obj, dict):
        return {str(k): to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_plain(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


# --------------------------------------------------------------------------------------------
# 1. train
# --------------------------------------------------------------------------------------------

@dataclass
class Trained:
    """One run the train stage handed to the grid. ``status``: ``trained`` / ``resumed`` /
    ``reused`` / ``failed`` / ``skipped`` (not started: the time budget); ``seconds``: wall
    time; ``error``: why it failed or was skipped; ``line``: the grid's summary line of a
    finished run."""

    run_dir: str
    status: str
    seconds: float = 0.0
    error: str | None = None
    line: str | None = None

    @property
    def ran(self) -> bool:
        """Whether it trained in this call (from scratch or from a checkpoint)."""
        return self.status in ("trained", "resumed")


def check_owner(rd: Path, task_name: str) -> None:
    """Refuse a run directory that holds another task's run (:class:`ExperimentError`)."""
    if (rd / "config.json").exists():
        try:
            owner = read_task_name(rd)
        except RunDirError:
            return                       # a corrupt directory: training says so clearly
        if owner != task_name:
            raise ExperimentError(f"{rd} holds a run of task {owner!r}, not {task_name!r}; "
                                  f"move it away or choose another --runs dir")


def train(plan: Plan, opts: StageOptions, budget_s: float | None = None,
          tag: str = "report") -> dict[str, Trained]:
    """Train every missing or partial run of ``plan`` (and every finished one holding another
    configuration: the grid reports it with the fix) with the grid runner
    (:func:`analysis.training.grid.train_pending`: Ray tasks on a local Ray instance of
    ``opts.jobs`` CPUs, or the cluster ``opts.address``), most informative runs first.

    Args:
        plan: the runs.
        opts: how (``train_missing`` False: train nothing).
        budget_s: wall-clock budget in seconds for training; a run is not started when the
            time used plus the mean duration of the runs so far would exceed it. Skipped runs
            are returned (status ``"skipped"``) and trained by the next call (finished runs
            are reused). None = no budget; 0 = train nothing.
        tag: the log lines' prefix (``[tag] ...``).

    Returns:
        run directory -> :class:`Trained`, for the runs handed to the grid (none when nothing
        is pending).

    Raises:
        ExperimentError: a run directory holds another task's run; the grid cannot run.
    """
    for p in plan.runs:
        check_owner(p.run_dir, p.task_name)
    pending = list(plan.runs) if opts.force else plan.pending()
    if not pending or not opts.train_missing:
        return {}
    opts.log(f"[{tag}] training {len(pending)} missing run(s) on Ray"
             + (f", time budget {budget_s:.0f} s" if budget_s is not None else ""))
    try:
        done = train_pending([p.run for p in pending], runs_root=plan.runs_root,
                             address=opts.address, budget_s=budget_s, device=opts.device,
                             progress=opts.progress, ray_num_cpus=opts.jobs,
                             serial=opts.serial, force=opts.force,
                             log=(lambda line: opts.log(f"[{tag}] {line}")), **opts.grid)
    except GridError as e:
        raise ExperimentError(str(e)) from None
    return {d: Trained(d, r["status"], r.get("seconds", 0.0), r.get("error"), r.get("line"))
            for d, r in done.items()}


def train_every(plan: Plan, opts: StageOptions, budget_s: float | None = None,
                tag: str = "train", label: Callable[[PlannedRun], str] | None = None
                ) -> dict[str, Trained]:
    """:func:`train` for a job that needs every run of ``plan`` finished (the predictor's
    validation, a curve): the settings checked before anything starts (:meth:`Plan.check`),
    and any run that failed or was skipped by the budget raises.

    Args:
        label: how a run is named in the error (default ``task/pe/seed<k>``).

    Raises:
        analysis.training.trainer.TrainingError: a bad setting (the first), or the runs that
            failed or were skipped (all named, with why and their directories).
        ExperimentError: as :func:`train`.
    """
    plan.check()
    trained = train(plan, opts, budget_s, tag)
    if not trained and opts.train_missing:
        opts.log(f"[{tag}] nothing to train: {len(plan.runs)} run(s) finished before, reused")
    name = label or (lambda p: p.run.label())
    bad = [(p, trained[str(p.run_dir)]) for p in plan.runs
           if str(p.run_dir) in trained and trained[str(p.run_dir)].status in ("failed",
                                                                               "skipped")]
    if bad:
        raise TrainingError("; ".join(f"{name(p)}: {t.status}: {t.error} ({t.run_dir})"
                                      for p, t in bad))
    return trained


# --------------------------------------------------------------------------------------------
# 2. load
# --------------------------------------------------------------------------------------------

@dataclass
class RunRow:
    """One planned run as the experiment found it. ``status``: ``missing`` (never trained),
    ``reused`` (finished before), ``trained`` / ``resumed`` (now), ``failed`` / ``skipped``
    (now: ``error`` says why), ``unreadable`` (its directory cannot be read). ``train_seconds``
    is set for a run handed to the grid now; ``config`` (its ``config.json``), ``protocol``
    (``position_offsets``) and the mean exact matches in and out of distribution for a run
    read back."""

    pe: str
    seed: int
    dir: str = ""
    status: str = "missing"
    train_seconds: float | None = None
    error: str | None = None
    protocol: str | None = None
    config: dict | None = None
    id_em: float | None = None
    ood_em: float | None = None

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> "RunRow":
        """A row from a plain mapping with these keys (a synthetic run); others are left
        out."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def read_back(self) -> bool:
        """Whether the run was read back (its config, protocol and exact matches are set)."""
        return any(x is not None for x in (self.config, self.protocol, self.id_em, self.ood_em))

    def to_dict(self) -> dict:
        """The row as report.json holds it: the keys a run has, in a fixed order."""
        d: dict[str, Any] = {"pe": self.pe, "seed": self.seed, "dir": self.dir,
                             "status": self.status}
        if self.train_seconds is not None:
            d["train_seconds"] = self.train_seconds
        if self.status in ("failed", "skipped"):
            d["error"] = self.error
        if self.read_back():
            d.update(protocol=self.protocol, config=self.config, id_em=self.id_em,
                     ood_em=self.ood_em)
        return d


@dataclass
class Loaded:
    """A task's runs read back: one :class:`RunRow` per planned run, the models (label
    ``pe/seed<k>`` -> Transformer), the claims' records, accuracy rows per PE (each with its
    ``seed``), the training range ``(lo, hi)`` of the first run read, and what was missing."""

    rows: list[RunRow] = field(default_factory=list)
    models: dict[str, Any] = field(default_factory=dict)
    records: list[_claims.RunRecord] = field(default_factory=list)
    accuracy: dict[str, list[dict]] = field(default_factory=dict)
    train_range: tuple | None = None
    problems: list[str] = field(default_factory=list)


def _mean_em(rows: list[dict]) -> tuple[float | None, float | None]:
    ids = [r["em"] for r in rows if r["split"] == "id" and r["em"] is not None]
    oods = [r["em"] for r in rows if r["split"] == "ood" and r["em"] is not None]
    return (float(np.mean(ids)) if ids else None, float(np.mean(oods)) if oods else None)


def load(task, runs: Sequence[PlannedRun], trained: dict[str, Trained],
         opts: StageOptions, tag: str = "report") -> Loaded:
    """Read back every planned run of ``task`` (``trained``: what :func:`train` did now).

    A run not finished is a ``problems`` line (runs not trained grouped by why, one line
    each), as is one whose directory cannot be read.
    """
    out = Loaded()
    untrained: dict[str, list[str]] = {}        # why -> the runs (one line each on the page)
    for p in runs:
        rd, label = p.run_dir, f"{p.pe}/seed{p.seed}"
        row = RunRow(p.pe, p.seed, str(rd))
        t = trained.get(str(rd))
        if t is not None:
            row.status, row.train_seconds = t.status, round(t.seconds or 0.0, 1)
            if t.status == "failed":
                row.error = t.error or ""
                out.problems.append(f"training {label} failed: {row.error}")
            elif t.status == "skipped":
                row.error = t.error or ""
                untrained.setdefault(f"not trained: {row.error}", []).append(label)
        elif is_finished(rd):
            row.status = "reused"
            opts.log(f"[{tag}] {task.name} {label}: reusing {rd}")
        else:
            untrained.setdefault(f"missing (in {Path(rd).parent.parent}): the same command "
                                 "without --no-train trains them", []).append(label)
        if row.status in ("reused", "trained", "resumed"):
            _read_back(task, row, label, out)
        out.rows.append(row)
    out.problems += [f"{len(ls)} run(s) {', '.join(ls[:6])}{' ...' if len(ls) > 6 else ''} "
                     f"{why}" for why, ls in untrained.items()]
    return out


def _read_back(task, row: RunRow, label: str, out: Loaded) -> None:
    """Read one finished run into ``row`` and ``out`` (unreadable: a problem line)."""
    try:
        model, cfg, _ = load_run(row.dir, task=task)
        rows = read_accuracy(row.dir)
    except RunDirError as e:
        row.status = "unreadable"
        out.problems.append(f"run {label} at {row.dir} cannot be read: {e}")
        return
    out.accuracy.setdefault(row.pe, []).extend({**r, "seed": row.seed} for r in rows)
    out.train_range = out.train_range or tuple(cfg["train_lengths"])
    out.models[label] = model
    out.records.append(_claims.run_record(cfg, rows, row.dir))
    row.protocol, row.config = out.records[-1].protocol, cfg
    row.id_em, row.ood_em = _mean_em(rows)


# --------------------------------------------------------------------------------------------
# 3. probe
# --------------------------------------------------------------------------------------------

@dataclass
class Probed:
    """The task's compiled reference and the attention comparison. ``compiled``: the compiled
    model's size (:func:`analysis.probing.alignment.compiled_size`), ``{"error": ...}`` when it
    did not compile, None without a reference program; ``probe``: the
    :class:`analysis.probing.metrics.ProbeResult` (None: nothing probed); ``token_names``: each
    probe sequence decoded; ``lengths``: the lengths probed."""

    lengths: list[int]
    compiled: dict | None = None
    probe: metrics.ProbeResult | None = None
    token_names: list | None = None
    problems: list[str] = field(default_factory=list)


def probe(task, sop, loaded: Loaded, opts: StageOptions, per_length: int,
          tag: str = "report") -> Probed:
    """Compile ``sop`` (the task's reference program; None: not compiled) and compare the
    attention of ``loaded``'s models with it and with each other on ``per_length`` sequences
    per probe length."""
    out = Probed(list(opts.probe_lengths or alignment.probe_lengths(loaded.train_range, task)))
    compiled = None
    if sop is not None:
        opts.log(f"[{tag}] {task.name}: compiling the reference program")
        try:
            seqs = capture.probe_sequences(task, out.lengths, per_length=1, seed=0)
            compiled = alignment.compile_reference(task, sop, max(len(s) for s in seqs) + 4)
            out.compiled = alignment.compiled_size(compiled)
        except (RASPError, CompilerError) as e:
            out.compiled = {"error": str(e)}
            out.problems.append(f"the reference program was not compiled: {e}")
    if not loaded.models:
        out.problems.append("no trained run available: nothing to probe")
        return out
    opts.log(f"[{tag}] {task.name}: probing {len(loaded.models)} models at lengths "
             f"{out.lengths}")
    try:
        with working(f"[{tag}] {task.name}: probing", show=opts.progress):
            res = alignment.probe_task_runs(task, loaded.models, compiled, out.lengths,
                                            per_length=int(per_length), variant=opts.variant)
        out.probe = res
        out.token_names = [task.vocab.decode(list(s)) for s in res.sequences]
    except (metrics.ProbingError, RASPError) as e:
        out.problems.append(f"probing failed: {e}")
    return out


# --------------------------------------------------------------------------------------------
# 4. predict
# --------------------------------------------------------------------------------------------

#: the fields of a prediction the report keeps (:meth:`analysis.prediction.predict.
#: Prediction.to_dict`)
PREDICTION_FIELDS = ("prediction", "prediction_label", "theory", "theories", "verdict_evidence",
                     "size", "budgets", "size_lower_bound", "program_source")


@dataclass
class Predicted:
    """The prediction per PE (plain data: :data:`PREDICTION_FIELDS` of each), and the PEs
    without one."""

    predictions: dict[str, dict] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def prediction_for(task, pe: str, protocol: str | None, opts: StageOptions,
                   tag: str = "report"):
    """The prediction for one PE (:func:`analysis.prediction.predict.predict` for the runs'
    offset protocol): the checkers and shipped program first; where that leaves the verdict
    ``unknown`` and ``opts.search``, the searches with
    :func:`analysis.prediction.budget.search_budgets`."""
    p = _predict.predict(task, pe=pe, position_offsets=protocol)
    if opts.search and p.prediction == "unknown":
        opts.log(f"[{tag}] {task.name} / {pe}: no program from the checkers; searching "
                 f"({_budget.budgets_text(opts.search_budget, opts.crasp_budget)})")
        with working(f"[{tag}] {task.name} / {pe}: searching", show=opts.progress):
            p = _predict.predict(task, pe=pe, position_offsets=protocol, search=True,
                                 **_budget.search_budgets(opts.search_budget,
                                                          opts.crasp_budget))
    return p


def predict(task, pes: Sequence[str], records: Sequence[_claims.RunRecord],
            opts: StageOptions, tag: str = "report") -> Predicted:
    """The prediction per PE of ``pes`` for the training protocol of that PE's runs (a learned
    APE without random offsets has no theory): the same call as docs/predictions.md."""
    out = Predicted()
    for pe in dict.fromkeys(pes):
        protocol = next((r.protocol for r in records if r.pe == pe), None)
        try:
            p = prediction_for(task, pe, protocol, opts, tag)
            out.predictions[pe] = to_plain({k: v for k, v in p.to_dict().items()
                                            if k in PREDICTION_FIELDS})
        except (RASPError, _predict.PredictError, ValueError) as e:
            out.problems.append(f"prediction for {pe} unavailable: {e}")
    return out


# --------------------------------------------------------------------------------------------
# 5. claims
# --------------------------------------------------------------------------------------------

@dataclass
class Claimed:
    """The measured outcome (:func:`analysis.evidence.claims.measured_outcome`) and the task's
    claims (:func:`analysis.evidence.claims.claims_for_task`; None without a run read back or
    when they cannot be computed, said in ``problems``)."""

    measured: dict
    claims: dict | None = None
    problems: list[str] = field(default_factory=list)


def claim(task, records: Sequence[_claims.RunRecord], predictions: dict[str, dict],
          probe_result: metrics.ProbeResult | None) -> Claimed:
    """The claims' rule (:mod:`analysis.evidence.statistics`: seeds, sign test, interval,
    chance) on the task's runs, against its predictions, in its regime."""
    out = Claimed(_claims.measured_outcome(records))
    if records:
        try:
            out.claims = _claims.claims_for_task(records, predictions, probe_result,
                                                 regime=task.regime)
        except _claims.ClaimError as e:
            out.problems.append(f"claims not computed: {e}")
    return out


# --------------------------------------------------------------------------------------------
# the pipeline of one task
# --------------------------------------------------------------------------------------------

@dataclass
class TaskRuns:
    """What stages 2-5 found for one task."""

    loaded: Loaded
    probed: Probed
    predicted: Predicted
    claimed: Claimed

    @property
    def problems(self) -> list[str]:
        """Every stage's problems, in the stages' order."""
        return (self.loaded.problems + self.probed.problems + self.predicted.problems
                + self.claimed.problems)


def run_task(task, sop, plan: Plan, trained: dict[str, Trained], opts: StageOptions,
             per_length: int, tag: str = "report") -> TaskRuns:
    """Stages 2-5 for ``task`` (its reference program ``sop``, None when it did not load) on
    the runs ``plan`` holds for it, after :func:`train` (``trained``)."""
    runs = plan.for_task(task.name)
    loaded = load(task, runs, trained, opts, tag)                                 # 2. load
    probed = probe(task, sop, loaded, opts, per_length, tag)                      # 3. probe
    predicted = predict(task, [p.pe for p in runs], loaded.records, opts, tag)    # 4. predict
    claimed = claim(task, loaded.records, predicted.predictions, probed.probe)    # 5. claims
    return TaskRuns(loaded, probed, predicted, claimed)
