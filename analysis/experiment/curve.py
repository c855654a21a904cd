"""Training-length curves (``rasp curve``): how long must training inputs be before a positional
encoding length-generalizes on a task?

The theories are limits: Zhou et al. 2023 (RASP-L) and Huang et al. 2025 (C-RASP) predict what
happens once training lengths are "sufficiently long"; Zhou et al.'s Fig. 1b shows the count task
generalizing only once training reaches length 60; Izzo, Nichani & Lee (ICLR 2026,
"Quantitative Bounds for Length Generalization in Transformers") make the needed training length
itself a quantity to bound. A curve trains one task with each PE at several maximum training
lengths ``L`` (lengths ``1..L``; every other setting the preset's) and reads, per PE and ``L``:

* the out-of-distribution exact match (OOD EM: the mean over the lengths ``L+1..2L`` the run
  evaluates, the protocol of :mod:`analysis.training.trainer`), per seed and as a mean with the
  bootstrap 95% interval over seeds;
* the measured outcome by the claims rule (:func:`analysis.evidence.claims.measured_outcome`:
  ``generalizes`` needs >= 5 seeds that all fit their training lengths and an exact sign test
  and the interval above ``max(0.5, chance + 0.1)``; ``fails`` below; else ``inconclusive``);
* the **shortest training length** at which the PE generalizes by that rule (None: "not within
  the lengths tried"), and whether it still does at every longer ``L`` tried.

Izzo, Nichani & Lee's bounds grow with the parameter norm, the positional period and locality,
the vocabulary and 1/epsilon; they give no constants for a model of a given size, so no number is
computed from them here (:data:`IZZO_NOTE` is printed with every curve). The task's own paper's
regime (:class:`tasks.base.Regime`), where it states one, is printed beside the measured length.

:func:`training_length_curve` plans the runs (one :class:`analysis.training.study.Study` per
length: run directories ``<runs>/<task>/<pe>/seed<k>-<preset>-L<n>``, finished runs reused,
interrupted ones resumed), trains them as a job on the experiment's pipeline
(:mod:`analysis.experiment.pipeline`: train through the grid runner, a local Ray instance unless
an address; load each run back), and returns a :class:`Curve`. :func:`format_curve` prints it;
the figure is :func:`analysis.reporting.figures.curve_figure`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

from analysis.evidence.claims import ID_FIT, check_poolable, measured_outcome
from analysis.experiment import pipeline
from analysis.experiment.plan import Plan
from analysis.training.runs import RunDirError
from analysis.training.study import Study
from analysis.training.trainer import TrainingError, resolve_task

__all__ = ["CurvePoint", "Curve", "training_length_curve", "curve_from_records",
           "format_curve", "IZZO_NOTE"]

#: What the curve says about Izzo, Nichani & Lee's bound (printed with every curve).
IZZO_NOTE = ("Izzo, Nichani & Lee (ICLR 2026) bound the training length needed for length "
             "generalization by a quantity growing with the parameter norm, the positional "
             "period and locality, the vocabulary and 1/epsilon (polynomially or exponentially); "
             "the bounds carry no constants for a given model, so no number is computed from "
             "them here: the curve measures the length their bounds are about")


@dataclass
class CurvePoint:
    """One PE at one maximum training length: per-seed numbers and the claims rule's outcome.

    ``ood_em`` / ``id_em``: per seed, in ``seeds`` order (None: no OOD length evaluated);
    ``ood_mean`` and ``ood_ci`` (bootstrap 95% over seeds; None with one seed); ``fits``: every
    seed fits its training lengths (ID EM >= the claims rule's ``ID_FIT``); ``outcome``:
    ``generalizes`` / ``fails`` / ``inconclusive``, ``reason`` why; ``run_dirs`` in seed order."""

    pe: str
    train_max_len: int
    seeds: list
    id_em: list
    ood_em: list
    ood_mean: float | None
    ood_ci: tuple | None
    fits: bool
    outcome: str
    reason: str
    run_dirs: list = field(default_factory=list)


@dataclass
class Curve:
    """A task's training-length curve: :class:`CurvePoint` per (PE, length) in the order of
    ``pes`` x ``lengths``; ``shortest``: PE -> the shortest length at which the PE generalizes
    (None: not within the lengths tried); ``stays``: PE -> whether it generalizes at every longer
    length tried too; ``threshold``: the OOD EM the rule tests against; ``regime``: the task
    paper's :class:`tasks.base.Regime` as a dict (None: the paper states none)."""

    task: str
    pes: list
    lengths: list
    seeds: list
    points: list
    shortest: dict
    stays: dict
    threshold: float | None
    regime: dict | None
    settings: dict = field(default_factory=dict)
    izzo: str = IZZO_NOTE

    def point(self, pe: str, length: int) -> CurvePoint | None:
        """The point of ``pe`` at training length ``length`` (None: not run)."""
        return next((p for p in self.points if p.pe == pe and p.train_max_len == length), None)

    def to_dict(self) -> dict:
        return asdict(self)


def curve_from_records(task_name: str, records_by_point: dict, regime=None,
                       settings: dict | None = None) -> Curve:
    """A :class:`Curve` from finished runs: ``records_by_point`` maps ``(pe, L)`` to the
    :class:`analysis.evidence.claims.RunRecord` of that PE trained up to ``L`` (one per seed).

    Raises:
        analysis.evidence.claims.ClaimError: runs of one point that cannot be pooled.
    """
    pes = list(dict.fromkeys(pe for pe, _ in records_by_point))
    lengths = sorted({int(L) for _, L in records_by_point})
    points, threshold = [], None
    for pe in pes:
        for L in lengths:
            recs = sorted(records_by_point.get((pe, L)) or [], key=lambda r: r.seed)
            if not recs:
                continue
            check_poolable(recs)
            m = measured_outcome(recs)
            threshold = m["threshold"] if threshold is None else threshold
            v = m["per_pe"].get(pe) or {}
            ci = v.get("ci")
            ci = None if not ci or any(c != c for c in ci) else (round(ci[0], 4),
                                                                  round(ci[1], 4))
            ids = [r.id_em for r in recs]
            points.append(CurvePoint(
                pe=pe, train_max_len=L, seeds=[r.seed for r in recs], id_em=ids,
                ood_em=[r.ood_em for r in recs], ood_mean=v.get("ood_em"), ood_ci=ci,
                fits=all(x is not None and x >= ID_FIT for x in ids), outcome=m["outcome"],
                reason=m["reason"], run_dirs=[r.run_dir for r in recs]))
    shortest, stays = {}, {}
    for pe in pes:
        mine = [p for p in points if p.pe == pe]
        first = next((p.train_max_len for p in mine if p.outcome == "generalizes"), None)
        shortest[pe] = first
        stays[pe] = first is not None and all(p.outcome == "generalizes" for p in mine
                                              if p.train_max_len >= first)
    seeds = sorted({s for p in points for s in p.seeds})
    return Curve(task=task_name, pes=pes, lengths=lengths, seeds=seeds, points=points,
                 shortest=shortest, stays=stays, threshold=threshold,
                 regime=regime.to_dict() if regime is not None else None,
                 settings=dict(settings or {}))


def training_length_curve(task, pes: Sequence[str], lengths: Sequence[int],
                          seeds: Sequence[int], preset: str = "demo",
                          pe_presets: dict | None = None, steps: int | None = None,
                          overrides: dict | None = None, runs_root: str = "runs",
                          address: str | None = None, serial: bool = False,
                          budget_s: float | None = None, progress: bool = True,
                          log: Callable[[str], None] | None = None) -> Curve:
    """Train ``task`` with every PE at every maximum training length and return its curve
    (module docstring).

    Args:
        task: a task name (the catalogue, or a task file / expression registered by name:
            :func:`tasks.catalogue.register_task`) or a task object (in-process only).
        pes: positional encodings (``rasp_model.positional.PE_NAMES``).
        lengths: maximum training lengths ``L`` (each run trains on ``1..L``; each must be a
            length the task can produce).
        seeds: training seeds of every (PE, L); >= 5 for a decided outcome.
        preset, pe_presets, steps, overrides: the training settings
            (:func:`analysis.training.trainer.resolve_spec`; ``pe_presets``: PE -> preset, e.g.
            ``{"ape_learned": "demo_random_offsets"}``, the protocol the theories assume).
        runs_root: root of the run directories (``rasp train --grid``'s ``runs``).
        address, serial, budget_s, progress, log: the train stage's
            (:class:`analysis.experiment.pipeline.StageOptions`; ``log``: where its lines go).

    Raises:
        analysis.training.trainer.TrainingError: a bad setting or length, or runs that failed
            or were skipped by the budget (all named).
        analysis.training.runs.RunDirError: a finished run directory that cannot be read.
        analysis.experiment.pipeline.ExperimentError: Ray could not start; a run directory
            holds another task's run.
    """
    task_obj = resolve_task(task)
    name = task_obj.name
    lengths = sorted({int(L) for L in lengths})
    bad = [L for L in lengths if L < 1 or not task_obj.length_ok(L)]
    if not lengths or bad:
        raise TrainingError(f"training lengths {bad or lengths} are not lengths task "
                            f"{name!r} can produce (lengths {task_obj.min_length}.."
                            f"{task_obj.max_length or 'unbounded'})")
    def plan(task_train_max_len: dict) -> Plan:
        return Plan.of(Study(tasks=[task], pes=list(pes), seeds=list(seeds), train_preset=preset,
                             pe_train_presets=dict(pe_presets or {}),
                             overrides=dict(overrides or {}), steps=steps,
                             task_train_max_len=task_train_max_len, runs_root=str(runs_root)))
    # the task's own training length (every PE's preset gives it): those runs are the ones
    # `rasp train` / the report wrote (seed<k>-<preset>, no -L<n>), reused here
    own_plan = plan({})
    own_plan.check()
    own = own_plan.train_lengths()
    plans = {L: own_plan if own == {L} else plan({name: L}) for L in lengths}
    length_of = {str(p.run_dir): L for L, pl in plans.items() for p in pl.runs}
    whole = Plan.joined(list(plans.values()))                                     # plan
    opts = pipeline.StageOptions(progress=progress, address=address, serial=serial, sink=log)
    trained = pipeline.train_every(whole, opts, budget_s, tag="curve", label=lambda p: (
        f"{p.run.label()} L{length_of[str(p.run_dir)]}"))                         # train
    loaded = pipeline.load(whole.task(name), whole.runs, trained, opts, "curve")  # load
    if loaded.problems:                  # every run finished: a directory that cannot be read
        raise RunDirError("; ".join(loaded.problems))
    records: dict = {}
    for r in loaded.records:
        records.setdefault((r.pe, length_of[r.run_dir]), []).append(r)
    # the curve's order: PEs as asked
    records = {(pe, L): records[(pe, L)] for pe in pes for L in lengths if (pe, L) in records}
    return curve_from_records(name, records, task_obj.regime, settings={        # claims
        "preset": preset, "pe_presets": dict(pe_presets or {}), "steps": steps,
        "overrides": dict(overrides or {}), "runs_root": str(runs_root)})


def format_curve(curve: Curve | dict) -> str:
    """Markdown: one row per (PE, L) with per-seed OOD EM, mean [95% CI], fit and outcome; then
    the shortest training length per PE, the paper's regime and :data:`IZZO_NOTE`."""
    c = curve.to_dict() if isinstance(curve, Curve) else curve

    def f(x):
        return "-" if x is None else f"{x:.2f}"
    lines = [f"Training-length curve of {c['task']}: OOD exact match on lengths L+1..2L after "
             f"training on 1..L ({len(c['seeds'])} seeds: {', '.join(map(str, c['seeds']))}; "
             f"threshold {f(c['threshold'])})", "",
             "| PE | L | OOD EM per seed | OOD mean [95% CI] | fits 1..L | outcome |",
             "| --- | --- | --- | --- | --- | --- |"]
    for p in c["points"]:
        ci = f" [{p['ood_ci'][0]:.2f}, {p['ood_ci'][1]:.2f}]" if p["ood_ci"] else ""
        lines.append(f"| {p['pe']} | {p['train_max_len']} | "
                     f"{' '.join(f(x) for x in p['ood_em'])} | {f(p['ood_mean'])}{ci} | "
                     f"{'yes' if p['fits'] else 'no'} | {p['outcome']} |")
    lines += ["", "Shortest training length at which each PE generalizes (the claims rule):"]
    for pe in c["pes"]:
        L = c["shortest"].get(pe)
        if L is None:
            lines.append(f"- {pe}: not within the lengths tried ({', '.join(map(str, c['lengths']))})")
        else:
            tail = "" if c["stays"].get(pe) else " (not at every longer length tried)"
            lines.append(f"- {pe}: {L}{tail}")
    reg = c.get("regime")
    lines += ["", (f"The task's paper: outcome stated from training length "
                   f"{reg['train_max_len']} ({reg['source']})." if reg else
                   "The task's paper states no training length for its outcome."),
              "", (c.get("izzo") or IZZO_NOTE) + "."]
    return "\n".join(lines)
