"""The attention report: one self-contained HTML file per call, plus its PNG figures.

``generate_report(["copy_unique", "copy_repeat"], "reports")`` runs what is missing for each task
(prediction, compile, training per PE, probing), reuses finished runs, and writes
``reports/report.html`` (base64 PNG figures, inline styles, no network). The runs are the
experiment's: the report's study preset names them (:func:`report_study`), the experiment's plan
resolves them once and its pipeline trains, reads back, probes, predicts and states the claims
(:mod:`analysis.experiment.pipeline`); this module does not train.

The report has two jobs, kept apart so that tests and other callers can render synthetic data:

* :func:`collect_task` gathers one task's data into a typed record (a :class:`Section`);
* :func:`render_report` turns sections into figures and the HTML page (jinja2 template
  ``analysis/reporting/templates/report.html.j2``).

Run directories are those of ``rasp train`` (``runs/<task>/<pe>/seed<k>[-<preset>]/``), so runs
made by either command are reused. Probing trained against compiled models: :mod:`analysis.probing.alignment`.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence
import resource

import numpy as np

import tasks
from analysis.reporting import figures
from analysis.prediction import budget as _budget
from analysis.prediction import predict
from analysis.probing import metrics
from analysis.training import trainer
from analysis.evidence import claims as _claims
from analysis.experiment import pipeline as _pipeline
from analysis.experiment import replication as _replication
from analysis.experiment.pipeline import (ExperimentError, RunRow, StageOptions, Trained,
                                          to_plain as _to_plain)
from analysis.experiment.plan import Plan
from analysis.evidence import statistics as _stats
from analysis.training.runs import atomic_write_text
from rasp.analyses import measures, raspl
from rasp.ir import RASPError
from rasp_model.positional import PE_LABELS, PE_NAMES

from analysis.reporting.presets import (CONFIRMATION_TASKS, DEFAULT_TASKS, FULL_TASKS,
                                       REPORT_PRESETS, SELECTED_TASK, study_preset)
from analysis.training.study import Study
from tasks.catalogue import user_tasks
from rasp.repl.draw import Drawing
from rasp.repl.progress import working
from analysis.reporting.captions import (accuracy_caption, curve_caption,  # noqa: F401
                                         distance_note, finding)

__all__ = ["ReportError", "ReportOptions", "Section", "collect_task", "render_report", "generate_report",
           "check_overwrite", "DEFAULT_TASKS", "FULL_TASKS", "REPORT_PRESETS", "wanted_runs",
           "train_missing", "report_study", "report_plan"]

#: Thresholds of a task's outcome (one owner: :mod:`analysis.evidence.claims`).
OOD_GENERALIZES, ID_FIT = _claims.OOD_GENERALIZES, _claims.ID_FIT

#: Seconds kept for compiling, probing and drawing after training when a budget is set
#: (``--budget``; measured for the report of 18 demo runs: 15 s wall at load ~1, 37 s at load
#: ~9); runs that would not end within the budget are skipped and named, and the next call
#: trains them. The main job sets no budget: it trains every run in one call.
RENDER_RESERVE_S = 50.0


class ReportError(RASPError):
    """A report cannot be produced (bad task, unwritable output, ...): says what and how to fix."""


@dataclass
class ReportOptions(StageOptions):
    """How a report is produced (see :data:`REPORT_PRESETS`): the experiment's stage options
    (:class:`analysis.experiment.pipeline.StageOptions`: device, training, probing, searches)
    and the study preset's choices."""

    preset: str = "tour"
    pes: list[str] = field(default_factory=lambda: list(PE_NAMES))
    seeds: list[int] | None = None
    nope_seeds: int | None = None
    runs_root: str | None = None
    probe_per_length: int | None = None
    #: extra training settings (``config_overrides`` of ``analysis.training.trainer.train``), e.g.
    #: ``{"steps": 20}`` for tests; runs with overrides belong in their own ``runs_root``.
    train_overrides: dict | None = None
    #: the command's start (``time.time()``; None: the call): the page's wall time runs from it
    started_at: float | None = None
    #: wall-clock budget of the whole report in seconds (training stops starting new runs
    #: RENDER_RESERVE_S before it); None = no budget (``rasp demo``'s default).
    budget_s: float | None = None
    #: cell files of ``rasp replicate huang`` to show for Huang et al.'s tasks (None: docs/)
    replication_dir: str | None = None

    def resolved(self) -> dict:
        """The report preset with this object's explicit choices applied."""
        name = study_preset(self.preset)
        if name not in REPORT_PRESETS:
            raise ReportError(f"unknown preset {self.preset!r}; choose one of "
                              f"{sorted(REPORT_PRESETS)}")
        p = dict(REPORT_PRESETS[name])
        for k, v in (("seeds", self.seeds), ("nope_seeds", self.nope_seeds),
                     ("runs_root", self.runs_root), ("probe_per_length", self.probe_per_length)):
            if v is not None:
                p[k] = v
        return p


def _log(opts: ReportOptions | None, msg: str) -> None:
    if opts is None or opts.progress:
        print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# The report's study: which runs (the experiment's plan)
# --------------------------------------------------------------------------------------------

def report_study(task_names: Sequence[str], opts: ReportOptions) -> Study:
    """The :class:`~analysis.training.study.Study` of a report: its tasks, the PEs asked for
    (``task_pes`` of the preset), the preset's seeds plus NoPE's ``nope_seeds``, its training
    presets and ``opts.train_overrides``."""
    preset = opts.resolved()
    return Study(tasks=list(task_names), pes=list(opts.pes), seeds=list(preset["seeds"]),
                 train_preset=preset["train_preset"],
                 pe_train_presets=dict(preset.get("pe_train_presets") or {}),
                 task_pes=dict(preset.get("task_pes") or {}),
                 extra_seeds={"nope": int(preset["nope_seeds"])},
                 overrides=dict(opts.train_overrides or {}), runs_root=preset["runs_root"])


def report_plan(task_names: Sequence[str], opts: ReportOptions) -> Plan:
    """The report's runs with their settings resolved once
    (:class:`analysis.experiment.plan.Plan` of :func:`report_study`)."""
    return Plan.of(report_study(task_names, opts))


def wanted_runs(task_name: str, opts: ReportOptions) -> list[tuple[str, int, Path]]:
    """The (PE, seed, run directory) triples a report on ``task_name`` needs
    (:func:`report_study`)."""
    return report_study([task_name], opts).triples(task_name)


def train_missing(task_names: Sequence[str], opts: ReportOptions,
                  budget_s: float | None = None, plan: Plan | None = None
                  ) -> dict[str, Trained]:
    """The experiment's train stage (:func:`analysis.experiment.pipeline.train`) on the
    report's plan (``plan``, default :func:`report_plan` of ``task_names``): every missing or
    partial run, most informative first, within ``budget_s`` seconds (None: no budget; 0:
    train nothing).

    Returns:
        run directory -> :class:`analysis.experiment.pipeline.Trained` (status ``trained`` /
        ``resumed`` / ``reused`` / ``failed`` / ``skipped``, seconds, error).

    Raises:
        ReportError: a run directory holds another task's run; the cluster cannot be reached.
    """
    try:
        return _pipeline.train(plan or report_plan(task_names, opts), opts, budget_s)
    except ExperimentError as e:
        raise ReportError(str(e)) from None


# --------------------------------------------------------------------------------------------
# A section: what the report shows of one task
# --------------------------------------------------------------------------------------------

@dataclass
class Section:
    """One task's part of the report: what :func:`collect_task` gathers and
    :func:`render_report` draws. Plain data except ``probe`` and ``flow``.

    Attributes:
        name, description, source, paper: the task (:class:`tasks.base.Task`; ``paper``: what
            its papers say, plain data).
        program: the reference program (``file``, ``name``, ``listing``, ``causal``); None when
            it did not load.
        measures, raspl: the program's measures and its RASP-L check (None: unavailable).
        prediction: the predictor's output for the task (plain data; None: unavailable).
        runs: one :class:`analysis.experiment.pipeline.RunRow` per planned run.
        accuracy: PE -> accuracy rows of its runs read back (each with its ``seed``).
        train_range: ``(lo, hi)`` training lengths of the runs (None: no run read back).
        measured: the measured outcome (:func:`analysis.evidence.claims.measured_outcome`).
        compiled: the compiled reference's size (``stats``, ``heads``, ``mlp``, ...) or
            ``{"error": ...}``; None without a reference program.
        probe: the attention comparison (:class:`analysis.probing.metrics.ProbeResult`;
            None: nothing probed); ``token_names``: each probe sequence decoded.
        predictions: PE -> the prediction for that PE's runs (plain data).
        replication: the finished cells of Huang et al.'s experiment for the task.
        claims: the task's claims (:func:`analysis.evidence.claims.claims_for_task`).
        problems: what is missing or failed, one line each (the page lists them).
        seconds: wall time of collecting the section.
        flow: ``(s-op, example tokens)`` of the computation-flow figure (not in report.json).
    """

    name: str
    description: str = ""
    source: str | None = None
    paper: Any = None
    program: dict | None = None
    measures: dict | None = None
    raspl: dict | None = None
    prediction: dict | None = None
    runs: list[RunRow] = field(default_factory=list)
    accuracy: dict[str, list[dict]] = field(default_factory=dict)
    train_range: tuple | None = None
    measured: dict | None = None
    compiled: dict | None = None
    probe: metrics.ProbeResult | None = None
    token_names: list | None = None
    predictions: dict[str, dict] | None = None
    replication: list[dict] = field(default_factory=list)
    claims: dict | None = None
    problems: list[str] = field(default_factory=list)
    seconds: float | None = None
    flow: tuple | None = None

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> "Section":
        """A section from a plain mapping with the same keys (synthetic sections: tests, a
        page of someone else's data): runs as :meth:`RunRow.of`, ``_draw`` as ``flow``;
        other keys are left out."""
        names = {f.name for f in dataclasses.fields(cls)} - {"runs", "flow"}
        kw = {k: v for k, v in data.items() if k in names and v is not None}
        return cls(**kw, runs=[r if isinstance(r, RunRow) else RunRow.of(r)
                               for r in data.get("runs") or []],
                   flow=data.get("_draw", data.get("flow")))

    def summary(self) -> dict:
        """The section as report.json holds it (plain data)."""
        return {"task": self.name, "measured": self.measured or {},
                "predictions": self.predictions,
                "probe": ({**self.probe.to_dict(),
                           "cross_seed": _claims.cross_seed_summary(self.probe)}
                          if self.probe is not None else None),
                "compiled": (self.compiled or {}).get("stats"), "claims": self.claims,
                "runs": [r.to_dict() for r in self.runs], "problems": self.problems}


# --------------------------------------------------------------------------------------------
# Collecting one task
# --------------------------------------------------------------------------------------------

def _program_part(task, sec: Section, opts: ReportOptions):
    """The section's program, its measures, RASP-L check and the task's prediction (no runs
    needed); returns the reference program (None when it does not load)."""
    _log(opts, f"[report] {task.name}: program, measures, RASP-L check, prediction")
    sop = None
    try:
        sop, listing = task.load_reference(), task.reference_source()
        sec.program = {"file": str(task.reference_path or task.reference_file),
                          "name": task.reference_name,
                          "listing": listing, "causal": task.causal}
        # the program's computation flow on one short example, drawn by the renderer
        # (rasp.draw); kept out of report.json (not plain data)
        n = next((n for n in range(3, 12) if task.length_ok(n)), None)
        if n is not None:
            prompt, answer = task.sample(n, np.random.default_rng(0))
            sec.flow = (sop, task.program_tokens(list(prompt) + list(answer)[:-1]))
    except (RASPError, OSError, tasks.TaskInputError) as e:
        sec.program = None
        sec.problems.append(f"reference program could not be loaded: {e}")
    if sop is not None:
        try:
            sec.measures = _to_plain(measures.measure(sop).to_dict())
        except RASPError as e:
            sec.problems.append(f"measures unavailable: {e}")
        try:
            rep = raspl.check(sop, causal=task.causal or None)
            sec.raspl = {"valid": bool(rep.valid), "violations": [
                {"rule": str(v.rule), "operation": v.operation, "span": str(v.span or ""),
                 "message": v.message} for v in rep.violations]}
        except RASPError as e:
            sec.problems.append(f"RASP-L check unavailable: {e}")
    try:
        sec.prediction = _to_plain(predict.predict(task).to_dict())
    except (RASPError, predict.PredictError, ValueError) as e:
        sec.problems.append(f"prediction unavailable: {e}")
    return sop


def collect_task(task_name: str, opts: ReportOptions | None = None,
                 trained: dict[str, Trained] | None = None,
                 plan: Plan | None = None) -> Section:
    """Gather everything the report shows for one task; run what is missing.

    Steps: load the task and its reference program; measures and RASP-L check; the prediction;
    then the experiment's pipeline on the task's planned runs
    (:func:`analysis.experiment.pipeline.run_task`: load, probe, predict per PE, claims),
    after training what is missing when ``trained`` is None (else ``trained`` is what
    :func:`train_missing` did for the report). Each step's failure is recorded in
    ``section.problems`` and the page says what is missing; an unknown task raises.

    Returns:
        the task's :class:`Section`.

    Raises:
        ReportError: unknown task; a run directory holding another task's run.
    """
    opts = opts or ReportOptions()
    preset = opts.resolved()
    try:                                   # the plan's task (resolved once), else by name
        task = plan.tasks.get(task_name) if plan is not None else None
        task = task or tasks.get_task(task_name)
    except tasks.UnknownTaskError as e:
        raise ReportError(str(e.args[0] if e.args else e)) from None
    t0 = time.time()
    sec = Section(task.name, task.description, task.source, _to_plain(task.paper))
    sop = _program_part(task, sec, opts)
    plan = plan or report_plan([task.name], opts)
    try:
        for p in plan.for_task(task.name):
            _pipeline.check_owner(p.run_dir, task.name)
    except ExperimentError as e:
        raise ReportError(str(e)) from None
    if trained is None:                       # not trained up front by generate_report
        trained = train_missing([task.name], opts, plan=plan)
    found = _pipeline.run_task(task, sop, plan, trained, opts, int(preset["probe_per_length"]))
    return dataclasses.replace(
        sec, runs=found.loaded.rows, accuracy=found.loaded.accuracy,
        train_range=found.loaded.train_range, measured=found.claimed.measured,
        compiled=found.probed.compiled, probe=found.probed.probe,
        token_names=found.probed.token_names, predictions=found.predicted.predictions,
        replication=_replication.cell_rows(task.name, opts.replication_dir),
        claims=found.claimed.claims, problems=sec.problems + found.problems,
        seconds=round(time.time() - t0, 1))



# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------

def _png_data_uri(path: str) -> str:
    with open(path, "rb") as f:
        return "data:image/png;base64," + base64.b64encode(f.read()).decode("ascii")


def _fmt(x, nd=3) -> str:
    """A number with ``nd`` decimals; "–" for None, NaN, or anything not a number."""
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
        return "–"
    if not np.isfinite(x):
        return "–"
    return f"{x:.{nd}f}"


def _num(x) -> str:
    """A table value as a reader wants it: floats to 3 significant digits (seconds, ratios),
    integers with thousands separators, anything else as it is."""
    if isinstance(x, bool) or x is None:
        return str(x)
    if isinstance(x, (int, np.integer)):
        return f"{int(x):,}"
    if isinstance(x, (float, np.floating)):
        return f"{x:.3g}" if np.isfinite(x) else "–"
    if isinstance(x, (list, tuple)):
        return ", ".join(_num(v) for v in x)
    return str(x)


#: The checkout this module runs from: the page shows paths relative to it.
CHECKOUT = Path(__file__).resolve().parents[2]

#: An absolute path inside free text (an error message): a "/" that no word, dot or path
#: character precedes ("nope/seed0", "k/35" and " / " are not paths), then path characters.
_ABS_PATH = re.compile(r"(?<![\w.~/-])/(?:[\w.@+=-]+/?)+")


def results_link(out_dir) -> str | None:
    """The page's link to the checkout's ``docs/results.md``: relative to the page, and only
    for a page inside the checkout (a page is mailed: it never names a path outside it)."""
    out = Path(out_dir).resolve()
    if not out.is_relative_to(CHECKOUT):
        return None
    return os.path.relpath(CHECKOUT / "docs" / "results.md", out)


def display_path(path, report_dir: str | os.PathLike | None = None) -> str:
    """A path as the page shows it, never absolute (the page is meant to be mailed): relative
    to the checkout (``runs/sort_unique/nope/seed0-demo``, ``tasks/programs/x.rasp``) when
    inside it, else relative to the report's directory (``../runs``) when they share more
    than the file system's root, else ``…/`` and its last four parts (a run directory's
    root/task/pe/seed). A relative path is
    taken from the working directory."""
    p = Path(str(path)).expanduser()
    if not p.is_absolute():
        p = Path.cwd() / p
    p = Path(os.path.normpath(p))
    bases = [CHECKOUT] + ([Path(report_dir).resolve()] if report_dir is not None else [])
    for base in bases:
        try:
            return str(p.relative_to(base)) if p != base else "."
        except ValueError:
            pass
    if report_dir is not None:
        rd = Path(report_dir).resolve()
        if len(Path(os.path.commonpath([p, rd])).parts) > 1:
            return os.path.relpath(p, rd)
    return str(Path("…", *p.parts[-4:]))


def strip_paths(text, report_dir: str | os.PathLike | None = None) -> str:
    """Free text (an error message, a reason) with every absolute path in it shown as
    :func:`display_path` shows it."""
    if not isinstance(text, str):
        return text
    return _ABS_PATH.sub(lambda m: display_path(m.group(0), report_dir), text)


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


def find_curve(task: str, out_dir: Path) -> tuple[dict, Path] | None:
    """The training-length curve of ``task`` (``rasp curve``'s curve.json) the page shows: the
    one beside the report (``<out>/curves/<task>``, where ``rasp curve`` writes by default
    when the report is in ``reports/``), else the checkout's ``docs/curves/<task>``; None when
    neither holds one of this task that reads as a curve."""
    for where in (Path(out_dir) / "curves" / task, CHECKOUT / "docs" / "curves" / task):
        try:
            data = json.loads((where / "curve.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("task") == task and data.get("points"):
            return data, where / "curve.json"
    return None


def _figures_for_section(sec: Section, out_dir: Path) -> dict:
    """Draw a section's figures; returns name -> {"path", "uri", "caption"}."""
    figs: dict[str, dict] = {}
    slug = _slug(sec.name)

    def add(key, path, caption):
        figs[key] = {"path": os.path.basename(path), "uri": _png_data_uri(path),
                     "caption": caption, "text_px": figures.text_px(path)}

    if sec.accuracy:
        tr = sec.train_range or (1, 1)
        p = figures.accuracy_figure(sec.accuracy, tr, out_dir / f"{slug}_accuracy.png",
                                    title=f"{sec.name}: exact match by length")
        add("accuracy", p, accuracy_caption(sec.accuracy))
    curve = find_curve(sec.name, out_dir)
    if curve is not None:
        data, where = curve
        p = figures.curve_figure(data, out_dir / f"{slug}_curve.png")
        add("curve", p, curve_caption(data, display_path(where, out_dir)))
    comp = sec.compiled or {}
    if comp.get("heads"):
        labels = {tuple(int(x) for x in k.split(",")): v
                  for k, v in (comp.get("head_names") or {}).items()}
        p = figures.layer_diagram(comp["heads"], comp["mlp"], out_dir / f"{slug}_compiled.png",
                                  title="compiled model", head_labels=labels)
        add("layers", p, "Layers of the compiled model, residual stream left to right: per "
                         "layer its attention heads (each with the s-op it computes), then "
                         "the MLP's hidden width.")
    if sec.flow:
        sop, example = sec.flow
        try:
            # rasp draw's own resolution (110 dpi), higher where its smallest text (a long
            # example's selector ticks) would be under 10 px; the page shows it at full size
            p = figures.save(Drawing(sop, example).figure, out_dir / f"{slug}_flow.png",
                             dpi=110, min_text_px=10)
            add("flow", p, "The program's computation flow on one example (rasp draw): each "
                           "operation with its value, each selector's [query, key] matrix. "
                           "Shown at full size: scroll inside the box; click the "
                           "picture to fit it to the page's width (an overview), again for "
                           "full size.")
        except RASPError as e:
            sec.problems.append(f"computation flow not drawn: {e}")
    res: metrics.ProbeResult | None = sec.probe
    if res is not None:
        panels = {}
        for agg in metrics.AGGREGATIONS:
            cross = res.cross_seed_distances(agg)
            base = cross.pop("nope", None)
            panels[agg] = ({pe: c.values for pe, c in cross.items()},
                           base.values if base else [])
        # a chart needs a PE besides NoPE (the reference); the baseline alone draws no bar
        panels = {agg: v for agg, v in panels.items()
                  if any(pe != "nope" and d for pe, d in v[0].items())}
        if panels:
            p = figures.distance_chart(panels, out_dir / f"{slug}_distances.png",
                                       reference="nope", title=sec.name)
            add("distances", p, "Kazemnejad et al.'s distance of each PE's model from the NoPE "
                                "models of the other seeds (runs of one seed share initial "
                                "weights and batches, so the same seed would understate it). "
                                "Left, standard aggregation (standard "
                                "JSD in bits, all head pairs, min per layer, mean over layers); "
                                "right, the released code's aggregation (their JSD variant in "
                                "nats, head pairs i < j, min per sample and layer) — the only "
                                "panel on the paper's scale, so the paper's values (diamonds) "
                                "are drawn only there. Dots: seeds; whiskers: seed range; dashed "
                                "line and grey band: NoPE against NoPE of the other seeds. "
                                "The paper's values are of another task and model (SCAN, "
                                "12-layer models).")
        figs["heatmaps"] = []
        tokens = None
        longest = int(np.argmax([len(s) for s in res.sequences]))
        n = len(res.sequences[longest])
        if sec.token_names:
            tokens = sec.token_names[longest]
        labels = [l for l in res.models if l != res.compiled_label]
        firsts = {}
        for l in labels:                       # heatmaps for the first seed of each PE only
            firsts.setdefault(l.split("/")[0], l)
        for label in firsts.values():
            pats = metrics.as_layer_list(res.models[label])
            fits = dict(res.relpos.get(label, []))
            m = res.matchings.get(label)
            if m is not None and m.pairs:
                chosen = [(t, c, d) for t, c, d in m.pairs[:2]]
            else:
                chosen = [((l, h), None, None) for l in range(len(pats))
                          for h in range(pats[l].shape[1])][:2]
            for t, c, d in chosen:
                panels = [(f"{label} L{t[0]}H{t[1]}", pats[t[0]][longest, t[1], :n, :n])]
                if c is not None:
                    cp = metrics.as_layer_list(res.models[res.compiled_label])
                    nm = (comp.get("head_names") or {}).get(f"{c[0]},{c[1]}")
                    panels.append((f"compiled L{c[0]}H{c[1]}{f' ({nm})' if nm else ''}  "
                                   f"JSD {_fmt(d)}",
                                   cp[c[0]][longest, c[1], :n, :n]))
                else:
                    panels.append(("compiled: not available", None))
                f = fits.get(t)
                panels.append((f"relative-position fit  JSD {_fmt(f.jsd if f else None)}",
                               f.pattern[longest, :n, :n] if f is not None else None))
                key = f"{slug}_heat_{_slug(label)}_L{t[0]}H{t[1]}"
                p = figures.heatmap_figure(panels, out_dir / f"{key}.png", tokens=tokens)
                figs["heatmaps"].append({
                    "path": os.path.basename(p), "uri": _png_data_uri(p), "label": label,
                    "text_px": figures.text_px(p),
                    "caption": f"{label} head L{t[0]}H{t[1]} | best compiled match | "
                               f"relative-position (T5 bucket) fit, on the longest probe "
                               f"sequence ({n} tokens)"})
    return figs


def _section_view(sec: Section) -> dict:
    """Tables of a section for the template (strings, already formatted)."""
    view: dict[str, Any] = {"distance_note": distance_note(
        {"probe": sec.probe, "runs": [r.to_dict() for r in sec.runs]})}
    res: metrics.ProbeResult | None = sec.probe
    if res is not None:
        view["pairwise"] = [{"a": a, "b": b, "mean": _fmt(d.mean),
                             "per_layer": ", ".join(_fmt(x) for x in d.per_layer),
                             "released": _fmt(res.pairwise_released[(a, b)].mean)
                             if (a, b) in res.pairwise_released else "–"}
                            for (a, b), d in res.pairwise.items()]
        view["matchings"] = []
        for label, m in res.matchings.items():
            fits = dict(res.relpos.get(label, []))
            view["matchings"].append({
                "label": label, "mean": _fmt(m.mean),
                "perfect": bool(m.pairs) and all(d < 1e-6 for _, _, d in m.pairs),
                "pairs": [{"trained": f"L{t[0]}H{t[1]}", "compiled": f"L{c[0]}H{c[1]}",
                           "jsd": _fmt(d), "relpos": _fmt(fits[t].jsd) if t in fits else "–"}
                          for t, c, d in m.pairs]})
        view["relpos"] = [{"label": label,
                           "fits": ", ".join(f"L{h[0]}H{h[1]} {_fmt(f.jsd)}" for h, f in fits)}
                          for label, fits in res.relpos.items()]
        view["probe_info"] = (f"{len(res.sequences)} sequences of "
                              f"{min(len(s) for s in res.sequences)}–"
                              f"{max(len(s) for s in res.sequences)} tokens; JSD variant "
                              f"{res.variant}; BOS query row left out")
        view["probe_notes"] = list(res.notes)
    meas = sec.measured or {}
    view["per_pe"] = [{"pe": PE_LABELS.get(pe, pe), "id_em": _fmt(v["id_em"], 2),
                       "ood_em": _fmt(v["ood_em"], 2)}
                      for pe, v in sorted((meas.get("per_pe") or {}).items(),
                                          key=lambda kv: PE_NAMES.index(kv[0])
                                          if kv[0] in PE_NAMES else 99)]
    pred = sec.prediction or {}
    view["paper_outcome"] = _find(pred, ("paper_outcome", "paper"))
    claims = {c["id"]: c for c in ((sec.claims or {}).get("claims") or [])}
    view["predictions"] = []
    for pe, p in (sec.predictions or {}).items():
        c = claims.get(f"{sec.name}:prediction:{pe}")
        view["predictions"].append({
            "pe": PE_LABELS.get(pe, pe),
            "prediction": p.get("prediction_label") or p.get("prediction"),
            "theory": p.get("theory"),
            "evidence": "; ".join(f"{t.get('key')}: {t.get('label') or t.get('prediction')} "
                                  f"({t.get('reason')})"
                                  for t in (p.get("theories") or {}).values()),
            "measured": c["numbers"].get("measured") if c else None,
            "label": c["label"] if c else None, "reason": c["reason"] if c else None})
    return view


#: The report's prediction for one PE: the experiment's predict stage for one PE
#: (:func:`analysis.experiment.pipeline.prediction_for`: the checkers and shipped program
#: first, the searches where they leave it unknown and ``opts.search``).
report_prediction = _pipeline.prediction_for


def _find(d: dict, keys: Sequence[str]):
    for k in keys:
        if isinstance(d, dict) and d.get(k) not in (None, ""):
            v = d[k]
            return v if isinstance(v, (str, int, float, bool)) else json.dumps(v)[:300]
    return None


def _check_writable(out_dir: Path) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out_dir, prefix=".write-test-", delete=True):
            pass
    except OSError as e:
        raise ReportError(f"cannot write the report to {out_dir}: {e.strerror or e}; choose "
                          "another directory with -o")


def render_report(sections: Sequence[Section | Mapping[str, Any]],
                  out_dir: str | os.PathLike,
                  title: str = "rasp-lab attention report", meta: dict | None = None) -> Path:
    """Write ``out_dir/report.html`` (self-contained) and the PNG figures.

    Args:
        sections: one :class:`Section` per task as returned by :func:`collect_task` (a plain
            mapping with the same keys is read as one: :meth:`Section.of`, e.g. synthetic
            data); what a section lacks renders as "not available".
        out_dir: the output directory (created).

    Returns:
        the path of ``report.html``.

    Raises:
        ReportError: the directory cannot be written.
    """
    # start-up: jinja2 loads only when this runs
    import jinja2

    out = Path(out_dir)
    _check_writable(out)
    sections = [sec if isinstance(sec, Section) else Section.of(sec) for sec in sections]
    all_claims = [c for sec in sections for c in ((sec.claims or {}).get("claims") or [])]
    names = [sec.name for sec in sections]
    confirm_on = [t for t in CONFIRMATION_TASKS if t in names]
    confirmation = (_claims.confirmation(all_claims, SELECTED_TASK, confirm_on)
                    if SELECTED_TASK in names and confirm_on else [])
    views = []
    for sec in sections:
        figs = _figures_for_section(sec, out)
        views.append({"sec": sec, "figs": figs, "view": _section_view(sec)})
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
        autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.ChainableUndefined)
    env.filters["fmt"] = _fmt
    env.filters["num"] = _num
    env.filters["shortpath"] = lambda p: display_path(p, out)
    env.filters["nopath"] = lambda t: strip_paths(t, out)
    env.filters["pename"] = lambda pe: PE_LABELS.get(pe, pe)
    meta = dict(meta or {})
    if "started" in meta:      # the command's wall time up to this page (figures drawn)
        meta["seconds"] = meta["wall_seconds"] = round(time.time() - meta.pop("started"), 1)
    page = env.get_template("report.html.j2").render(
        title=title, sections=views, meta=meta, claims=all_claims, finding=finding(all_claims),
        runs_root=display_path(meta["runs_root"], out) if meta.get("runs_root") else None,
        confirmation=confirmation,
        generated=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        thresholds={"ood": OOD_GENERALIZES, "id": ID_FIT, "min_seeds": _stats.MIN_SEEDS,
                    "margin": _stats.CHANCE_MARGIN, "alpha": _stats.ALPHA,
                    "stated": _stats.ALPHA_STATED, "reverse": _stats.ALPHA_REVERSE})
    path = out / "report.html"
    atomic_write_text(path, page, mode=0o644)        # meant to be mailed: world-readable
    summary = [sec.summary() for sec in sections]
    doc = {"meta": meta, "claims": all_claims, "finding": finding(all_claims),
           "confirmation": confirmation, "tasks": summary}
    atomic_write_text(out / "report.json", json.dumps(_to_plain(doc), indent=1), mode=0o644)
    return path


def check_overwrite(out_dir: str | os.PathLike, preset: str, force: bool = False) -> None:
    """Refuse to write a report of ``preset`` over a report of another preset: ``out_dir``
    holds ``report.html`` and its ``report.json`` records another ``meta.preset`` (or none can
    be read). Nothing is refused with ``force`` or in a directory without a report.

    Raises:
        ReportError: naming the preset found and the ways out (another ``-o``, ``--force``).
    """
    out = Path(out_dir)
    if force or not (out / "report.html").exists():
        return
    try:
        found = json.loads((out / "report.json").read_text())["meta"]["preset"]
    except (OSError, ValueError, KeyError, TypeError):
        found = None
    if found is not None and study_preset(str(found)) == study_preset(preset):
        return
    what = f"the {found!r} preset" if found else "an unknown preset (no readable report.json)"
    raise ReportError(f"{out} already holds a report of {what}; a {preset!r} report would "
                      f"replace it. Write it elsewhere (-o {out / preset}) or replace that "
                      "report with --force")


def generate_report(task_names: Sequence[str] | None = None,
                    out_dir: str | os.PathLike = "reports",
                    opts: ReportOptions | None = None, force: bool = False) -> Path:
    """Produce the report for ``task_names`` (default :data:`DEFAULT_TASKS`).

    Runs what is missing (see :func:`collect_task`), then :func:`render_report`. The output
    directory is checked first so an unwritable one, or one holding a report of another
    preset (:func:`check_overwrite`; ``force`` replaces it), fails before any training.

    Returns:
        the path of ``report.html``.

    Raises:
        ReportError: unknown task, unwritable output directory, a report of another preset
            there, runs of another task.
    """
    opts = opts or ReportOptions()
    opts.resolved()
    names = list(task_names or DEFAULT_TASKS)
    out = Path(out_dir)
    check_overwrite(out, opts.preset, force)
    _check_writable(out)
    known = set(tasks.list_tasks()) | set(user_tasks())      # the catalogue and your own
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ReportError(f"unknown task(s) {', '.join(unknown)}; known tasks: "
                          f"{', '.join(sorted(known))}")
    t0 = opts.started_at or time.time()
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    plan = report_plan(names, opts)
    trained = train_missing(names, opts, plan=plan, budget_s=(
        None if opts.budget_s is None else max(0.0, opts.budget_s - RENDER_RESERVE_S)))
    sections = [collect_task(n, opts, trained, plan) for n in names]
    ran = [t for t in trained.values() if t.ran]
    _log(opts, "[report] drawing figures and writing the page")
    with working("[report] drawing figures and writing the page", show=opts.progress):
        path = render_report(sections, out, meta={
            "preset": study_preset(opts.preset), "pes": opts.pes,
            "started": t0, "driver_cpu_seconds": round(_cpu_seconds(), 1),
            "decides": _stats.decidable_with(len(opts.resolved()["seeds"]))["sentence"],
            "results_doc": results_link(out),
            "run_seconds_trained_now": round(sum(t.seconds or 0.0 for t in ran), 1),
            "cpu_count": os.cpu_count(), "load_before": load_before,
            "trained_now": len(ran),
            "git_commit": trainer.git_commit(),
            "finished": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "runs_root": opts.resolved()["runs_root"],
            "searches": _budget.budgets_text(opts.search_budget, opts.crasp_budget)
            if opts.search else None})
    return path


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and its finished child processes (the driver:
    Ray's workers are not counted here; their runs' seconds are ``run_seconds_trained_now``)."""
    me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
