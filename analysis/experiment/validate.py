"""Predictions checked against our own training (``rasp validate-predictor``).

For every task and positional encoding: the predictor's output (:func:`analysis.prediction.predict.predict`
with that ``pe``) next to the outcome measured on models trained by this toolkit (the runs of
``rasp train --grid``: :func:`analysis.training.trainer.train`, which reuses a finished run with the same
settings and resumes an interrupted one), labelled like the report's claims:

* the measured outcome and the label come from the one owner of that rule,
  :func:`analysis.evidence.claims.prediction_claim` (its tests in
  :mod:`analysis.evidence.statistics`), applied to the runs of one (task, PE): "generalizes"
  when the PE fits its training lengths on every seed and an exact sign test over >= 5 seeds
  and the bootstrap 95% interval put its out-of-distribution exact match (OOD EM) above the
  threshold ``max(0.5, chance + 0.1)``, "fails" when they put it below, otherwise
  **inconclusive** (also with fewer than 5 seeds, or a model that does not fit the training
  lengths);
* the prediction (:mod:`analysis.prediction.theories`: ``generalizes`` / ``fails`` /
  ``no program`` / ``unknown`` / ``disagree`` / ``no theory``, for the runs' training protocol)
  is **supported** when it names the measured outcome, **contradicted** when it names the
  other one, **inconclusive** when the measurement is inconclusive or the prediction is not a
  decision (``no program <= s``, a bounded search certificate, is not one).

:func:`validate` returns the rows, the confusion matrix (predicted x measured: certificates in
their own row), the agreement rate = supported / (supported + contradicted) over decisions,
and the certificates' measured outcomes apart (``certificates``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence
from pathlib import Path

import numpy as np

from analysis.evidence.claims import prediction_claim
from analysis.experiment import pipeline
from analysis.experiment import replication as _replication
from analysis.experiment.plan import Plan
from analysis.prediction.budget import DEFAULT_CRASP_BUDGET, DEFAULT_SEARCH_BUDGET
from analysis.prediction.predict import PredictError, predict
from analysis.prediction.theories import CERTIFICATE, theories_for
from analysis.training.runs import RunDirError
from analysis.training.study import Study
from analysis.training.trainer import resolve_task

__all__ = ["ValidationRow", "validate", "measure", "format_validation"]


@dataclass
class ValidationRow:
    """One (task, PE) cell: prediction, measurement and label."""

    task: str
    pe: str
    prediction: str
    prediction_label: str
    theories: dict
    seeds: list
    id_em: list
    ood_em: list
    ood_mean: float | None
    ood_ci: tuple | None
    measured: str
    label: str
    reason: str = ""
    run_dirs: list = field(default_factory=list)
    registered: bool = False
    in_catalogue: bool = True
    threshold: float | None = None

    def to_dict(self) -> dict:
        return {"task": self.task, "pe": self.pe, "prediction": self.prediction,
                "prediction_label": self.prediction_label,
                "theories": {k: v.get("label", v["prediction"])
                             for k, v in self.theories.items()},
                "seeds": self.seeds, "id_em": self.id_em, "ood_em": self.ood_em,
                "ood_mean": self.ood_mean, "ood_ci95": self.ood_ci, "measured": self.measured,
                "label": self.label, "reason": self.reason, "run_dirs": self.run_dirs,
                "registered": self.registered, "in_catalogue": self.in_catalogue,
                "threshold": self.threshold}


def measure(records, prediction: str, regime=None
            ) -> tuple[str, str, str, float | None, tuple | None, float]:
    """``(measured, label, reason, mean OOD EM, 95% interval, OOD threshold)`` of the runs of
    one (task, PE)
    (:class:`analysis.evidence.claims.RunRecord`, one per seed) against ``prediction``, by
    :func:`analysis.evidence.claims.prediction_claim` (module docstring), inside or outside
    the task's ``regime`` (:class:`tasks.base.Regime`; None: the paper states none).

    Raises:
        analysis.evidence.claims.ClaimError: the runs cannot be pooled (different configurations).
    """
    claim = prediction_claim(records, prediction, regime=regime)
    (pe_numbers,) = claim.numbers["per_pe"].values()
    oods = [x for x in pe_numbers["ood_em"] if x is not None]
    ci = pe_numbers["ci"]
    ci = None if any(c != c for c in ci) else (round(ci[0], 4), round(ci[1], 4))
    return (claim.numbers["measured"], claim.label, claim.reason,
            float(np.mean(oods)) if oods else None, ci, claim.numbers["thresholds"]["ood"])


def validate(task_names: Sequence[str], pes: Sequence[str], seeds: Sequence[int],
             preset: str = "quick", runs_root: str = "runs", steps: int | None = None,
             search: bool = False, search_budget: int | None = None,
             crasp_budget: int | None = None, search_time_cap: float | None = None,
             verify_max_length: int | None = None, samples: int = 3,
             progress: bool = True, log: Callable[[str], None] | None = None,
             address: str | None = None, budget_s: float | None = None,
             overrides: dict | None = None, pe_presets: dict | None = None,
             registered: dict | None = None, replication_dir: str | None = None,
             at_regime: bool = True) -> dict:
    """Predict, train (reusing runs) and compare for every task x PE.

    A job on the experiment's pipeline: plan -> train (:func:`analysis.experiment.pipeline.
    train_every`: the grid, a local Ray instance unless ``address``; a failed or skipped run
    raises after the grid, naming every such run) -> load -> predict (per task and PE, for the
    runs' protocol) -> claims (:func:`measure`).

    Args:
        task_names: next-token tasks of the catalogue.
        pes: positional encodings (``rasp_model.positional.PE_NAMES``).
        seeds: training seeds (the uncertainty across seeds is in the label).
        preset, steps: training preset / step override (:func:`analysis.training.trainer.train`).
        runs_root: the grid's run directories (``rasp train --grid``'s default ``runs``).
        search: run the predictor's searches (False: shipped programs only), with
            ``search_budget`` / ``crasp_budget`` candidates (None: the defaults of
            :mod:`analysis.prediction.budget`) and the safety stop ``search_time_cap``.
        verify_max_length: verification length (None: the protocol's longest, as
            :func:`analysis.prediction.predict.predict`).
        overrides: model / training settings of every run (``--set``), e.g.
            ``{"position_offsets": "random"}``; the prediction follows the runs' protocol.
        pe_presets: PE -> training preset replacing ``preset`` for that PE (``--pe-preset``),
            e.g. ``{"ape_learned": "demo_random_offsets"}`` as the main job trains it, so the
            runs checked here are the runs of ``docs/results.md``.
        at_regime: train each task whose paper states a training length (``task.regime``,
            :class:`tasks.base.Regime`: count 60, Huang et al.'s tasks 50) on lengths up to
            it, where its theory speaks (runs in ``seed<k>-<preset>-L<n>``); False: the
            preset's lengths, and such a task's label is "inconclusive: outside the theory's
            regime" (:func:`analysis.evidence.claims.prediction_claim`).
        replication_dir: cell files of ``rasp replicate huang`` (None: ``docs/replication`` of
            this checkout): the prediction registered in each finished cell of these tasks and
            PEs, checked against the cell's runs at the paper's lengths
            (:func:`analysis.experiment.replication.prediction_checks`), listed apart under
            ``"replications"`` (another protocol than the rows').

    Returns:
        ``{"rows": [ValidationRow.to_dict()...], "confusion": {predicted: {measured: n}},
        "agreement": supported / (supported + contradicted) or None, "counts": {label: n},
        "replications": [prediction check...]}``.

    Raises:
        analysis.training.trainer.TrainingError / RunDirError: bad settings or an unusable run
        directory; analysis.experiment.pipeline.ExperimentError: the grid cannot run;
        analysis.prediction.predict.PredictError: a task the predictor cannot handle, or a
        (task, PE) without a registered prediction.
    """
    if registered is not None:
        missing = [f"{n}/{pe}" for n in task_names for pe in pes if (n, pe) not in registered]
        if missing:
            raise PredictError(f"no registered prediction for {', '.join(missing)}")
    budgets = {"search_budget": DEFAULT_SEARCH_BUDGET if search_budget is None else search_budget,
               "crasp_budget": DEFAULT_CRASP_BUDGET if crasp_budget is None else crasp_budget}
    opts = pipeline.StageOptions(progress=progress, address=address, sink=log)
    plan, lengths = _plan(task_names, pes, seeds, preset, runs_root, steps, overrides,
                          pe_presets, at_regime)                                  # plan
    trained = pipeline.train_every(plan, opts, budget_s, tag="validate")          # train
    predict_opts = dict(search=search, search_time_cap=search_time_cap, samples=samples,
                        verify_max_length=verify_max_length, **budgets)
    rows = [row for name in task_names for row in _task_rows(                # load, predict,
        plan, name, pes, seeds, trained, opts, registered, predict_opts, log)]  # claims
    out = _tally([r for r in rows if r.in_catalogue])
    outside = [r for r in rows if not r.in_catalogue]
    return {"rows": [r.to_dict() for r in rows], **out,
            "replications": replication_checks(task_names, pes, replication_dir),
            "outside": _tally(outside) if outside else None,
            "settings": {"preset": preset, "pe_presets": dict(pe_presets or {}), "steps": steps,
                         "seeds": list(seeds), "overrides": dict(overrides or {}),
                         "runs_root": str(runs_root), "search": search,
                         "registered": registered is not None, "regime_lengths": lengths,
                         "budgets": {"raspl": budgets["search_budget"], "crasp": budgets[
                             "crasp_budget"], "unit": "candidates"} if search else None}}


def _plan(task_names, pes, seeds, preset, runs_root, steps, overrides, pe_presets,
          at_regime) -> tuple[Plan, dict]:
    """The validation's runs (:class:`analysis.experiment.plan.Plan`: each task resolved once,
    each run's settings once) and the training lengths of the tasks trained in their paper's
    regime (task name -> ``L``)."""
    regimes = {name: resolve_task(name).regime for name in task_names}
    lengths = {name: r.train_max_len for name, r in regimes.items()
               if at_regime and r is not None}
    return Plan.of(Study(tasks=list(task_names), pes=list(pes), seeds=list(seeds),
                         train_preset=preset, pe_train_presets=dict(pe_presets or {}),
                         overrides=dict(overrides or {}), steps=steps,
                         task_train_max_len=lengths, runs_root=str(runs_root))), lengths


def _task_rows(plan: Plan, name: str, pes, seeds, trained: dict, opts, registered,
               predict_opts: dict, log) -> list[ValidationRow]:
    """One task's rows: its runs read back (the pipeline's load stage), then per PE the
    prediction for the runs' protocol (:func:`_prediction`) labelled by the claims' rule
    (:func:`_row`), in the order of ``pes``, seeds in the order of ``seeds``.

    Raises:
        RunDirError: a finished run directory that cannot be read."""
    task = plan.task(name)
    loaded = pipeline.load(task, plan.for_task(name), trained, opts, "validate")
    if loaded.problems:                  # every run finished: a directory that cannot be read
        raise RunDirError("; ".join(loaded.problems))
    row_of = {(r.pe, r.seed): r for r in loaded.rows}
    record_of = {(r.pe, r.seed): r for r in loaded.records}
    rows = []
    for pe in pes:
        runs = [row_of[(pe, s)] for s in seeds]
        records = [record_of[(pe, s)] for s in seeds]
        pred = _prediction(name, pe, records[0].protocol, registered, predict_opts)
        rows.append(_row(name, pe, runs, records, pred, task.regime, registered is not None,
                         log))
    return rows


def _prediction(name: str, pe: str, protocol, registered: dict | None,
                predict_opts: dict) -> dict:
    """The prediction for the runs of (``name``, ``pe``), trained with offset ``protocol``:
    the registered one (:func:`_registered`), else the predictor's
    (:func:`analysis.prediction.predict.predict` with ``predict_opts``). The theories depend on
    the runs' protocol (a learned APE without random offsets has none): the prediction is for
    the runs it is compared with."""
    if registered is not None:
        return _registered(registered[(name, pe)], pe, protocol)
    p = predict(name, pe=pe, position_offsets=protocol, **predict_opts)
    return {"prediction": p.prediction, "prediction_label": p.prediction_label,
            "theories": p.theories, "in_catalogue": True}


def _row(name: str, pe: str, runs: list, records: list, pred: dict, regime, registered: bool,
         log: Callable[[str], None] | None) -> ValidationRow:
    """The :class:`ValidationRow` of (``name``, ``pe``): its runs (``runs``:
    :class:`analysis.experiment.pipeline.RunRow`, one per seed; ``records`` their claims'
    records) measured against ``pred`` (:func:`measure`)."""
    measured, label, reason, mean, ci, threshold = measure(records, pred["prediction"], regime)
    row = ValidationRow(task=name, pe=pe, prediction=pred["prediction"],
                        prediction_label=pred["prediction_label"], theories=pred["theories"],
                        seeds=[r.seed for r in runs], id_em=[r.id_em for r in runs],
                        ood_em=[r.ood_em for r in runs], ood_mean=mean, ood_ci=ci,
                        measured=measured, label=label, reason=reason,
                        run_dirs=[r.dir for r in runs], registered=registered,
                        in_catalogue=pred["in_catalogue"], threshold=threshold)
    if log:
        log(f"{name} {pe}: predicted {row.prediction_label}, measured {measured} "
            f"-> {row.label}")
    return row


def replication_checks(task_names: Sequence[str], pes: Sequence[str],
                       cells_dir: str | None = None) -> list[dict]:
    """The predictions registered in the finished cells of Huang et al.'s experiment
    (``rasp replicate huang``) for these tasks and PEs, checked against each cell's runs on
    its farthest bin (:func:`analysis.experiment.replication.prediction_check`); ``cells_dir``
    None: ``docs/replication`` of this checkout (none there: ``[]``)."""
    root = Path(cells_dir) if cells_dir else _replication.DEFAULT_CELLS_DIR
    if not root.is_dir():
        return []
    return [c for c in _replication.prediction_checks(root)
            if c["task"] in set(task_names) and c["pe"] in set(pes)]


def _registered(rec: dict, pe: str, protocol) -> dict:
    """A registered prediction for runs of ``protocol``: as written, unless the runs' protocol
    leaves the PE without the registered theories (then ``no theory``, saying why)."""
    if tuple(theories_for(pe, protocol)) == tuple(theories_for(pe, None)):
        return rec
    return {**rec, "prediction": "no theory", "prediction_label": "no theory",
            "theories": {}, "note": f"registered for {pe} trained as the theories assume; "
                                    f"these runs use position_offsets={protocol!r}"}


def _tally(rows: list) -> dict:
    """Confusion matrix, label counts, certificates and agreement rate of ``rows``."""
    confusion: dict = {}
    counts = {"supported": 0, "contradicted": 0, "inconclusive": 0}
    for r in rows:
        confusion.setdefault(r.prediction, {}).setdefault(r.measured, 0)
        confusion[r.prediction][r.measured] += 1
        counts[r.label] += 1
    decided = counts["supported"] + counts["contradicted"]
    # bounded certificates are not decisions: their measured outcomes are counted apart
    certificates: dict = {}
    for r in rows:
        if r.prediction == CERTIFICATE:
            certificates[r.measured] = certificates.get(r.measured, 0) + 1
    return {"confusion": confusion, "counts": counts, "certificates": certificates,
            "agreement": counts["supported"] / decided if decided else None}


def format_validation(out: dict) -> str:
    """Markdown tables: per task and PE, the confusion matrix and the agreement rate; the
    registered predictions on tasks outside the catalogue in their own tables, counted
    apart (``out["outside"]``)."""
    inside = [r for r in out["rows"] if r.get("in_catalogue", True)]
    outside = [r for r in out["rows"] if not r.get("in_catalogue", True)]
    lines = _table(inside, out) if inside or not outside else []
    reps = out.get("replications") or []
    if reps:
        lines += ["", "Checked against replications of Huang et al.'s experiment (`rasp "
                  "replicate huang`: their lengths, sweep and selection; the prediction "
                  "registered in each cell before its runs; counted apart):", "",
                  "| task | PE | scale | predicted (registered) | measured (farthest bin) | "
                  "label |", "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {r['task']} | {r['pe']} | {r['scale']}"
                  f"{'' if r['comparable'] else ' (a cut: not their lengths)'} | "
                  f"{r['predicted'] or '–'} | {r['measured']} | {r['label']} |" for r in reps]
    if outside:
        lines += ["" if lines else "", "Registered predictions on tasks outside the catalogue "
                  "(out of sample: counted apart from the catalogue's):", ""]
        lines += _table(outside, out["outside"])
    return "\n".join(lines).strip("\n")


def _table(rows: list, tally: dict) -> list[str]:
    lines = ["| task | PE | predicted | theories | ID EM per seed | OOD EM per seed | OOD mean "
             "[95% CI] | measured | label |", "| --- | --- | --- | --- | --- | --- | --- | --- "
             "| --- |"]

    def f(x):
        return "-" if x is None else f"{x:.2f}"
    for r in rows:
        th = ", ".join(f"{k}: {v}" for k, v in r["theories"].items()) or "-"
        ci = f" [{r['ood_ci95'][0]:.2f}, {r['ood_ci95'][1]:.2f}]" if r["ood_ci95"] else ""
        lines.append(f"| {r['task']} | {r['pe']} | "
                     f"{r.get('prediction_label', r['prediction'])} | {th} | "
                     f"{' '.join(f(x) for x in r['id_em'])} | "
                     f"{' '.join(f(x) for x in r['ood_em'])} | {f(r['ood_mean'])}{ci} | "
                     f"{r['measured']} | {r['label']} |")
    measured = ["generalizes", "fails", "inconclusive"]
    lines += ["", "| predicted \\ measured | " + " | ".join(measured) + " |",
              "| --- | " + " | ".join("---" for _ in measured) + " |"]
    for p, row in sorted(tally["confusion"].items()):
        lines.append(f"| {p} | " + " | ".join(str(row.get(m, 0)) for m in measured) + " |")
    c = tally["counts"]
    agree = "n/a (nothing decided)" if tally["agreement"] is None else \
        f"{tally['agreement']:.2f}"
    certs = tally.get("certificates") or {}
    cert_text = (f" Bounded search certificates (`no program <= s`, not decisions, counted "
                 f"apart): {sum(certs.values())}, measured "
                 + ", ".join(f"{m} {n}" for m, n in sorted(certs.items())) + "."
                 if certs else "")
    lines += ["", f"Supported {c['supported']}, contradicted {c['contradicted']}, inconclusive "
                  f"{c['inconclusive']}; agreement rate (supported / decisions): {agree}."
                  + cert_text]
    return lines
