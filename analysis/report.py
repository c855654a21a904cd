"""The attention report: one self-contained HTML file per call, plus its PNG figures.

``generate_report(["copy_unique", "copy_repeat"], "reports")`` runs what is missing for each task
(prediction, compile, training per positional encoding via ``analysis.training.train``, probing),
reuses finished runs, and writes ``reports/report.html`` (figures embedded as base64 PNG, styles
inline, no network reference) and ``reports/*.png``.

The pipeline is split in two so that tests and other callers can render synthetic data:

* :func:`collect_task` gathers one task's data into a plain dict (a *section*);
* :func:`render_report` turns sections into figures and the HTML page (jinja2 template
  ``analysis/templates/report.html.j2``).

Run directories are those of ``rasp train`` (contract F): ``runs/<task>/<pe>/seed<k>/`` for the
training defaults (``--full``) and ``runs/<task>/<pe>/seed<k>-quick/`` for the quick preset
(the default of ``rasp report`` and ``rasp demo``), so runs made by either command are reused.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import inspect
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from analysis import figures, probing

__all__ = ["ReportError", "ReportOptions", "collect_task", "render_report", "generate_report",
           "DEFAULT_TASKS", "FULL_TASKS", "run_dir_for", "measured_outcome", "PRESETS", "wanted_runs",
           "train_missing", "probe_task_runs", "probe_run_dirs"]

#: The demo's default: one task predicted to generalize, one predicted to fail (Zhou et al.).
#: count (Zhou's flagship short RASP-L program) fits its training lengths within the quick
#: preset; copy_unique needs the training defaults (see docs/results.md), so it is in --full.
DEFAULT_TASKS = ["count", "copy_repeat"]

#: The larger grid (``rasp demo --full``), the tasks of docs/results.md.
FULL_TASKS = ["count", "copy_unique", "sort_unique", "copy_repeat", "parity", "reverse"]

#: Report presets: seeds per PE, extra NoPE seeds (for the other-seed baseline), probe size.
PRESETS = {
    "quick": {"seeds": [0], "nope_seeds": 2, "probe_per_length": 3, "train_preset": "quick",
              "runs_root": "runs"},
    "full": {"seeds": [0, 1, 2], "nope_seeds": 3, "probe_per_length": 8,
             "train_preset": "default", "runs_root": "runs"},
}

#: A task "generalizes" in our runs when some PE reaches this mean OOD exact match while fitting
#: the training lengths (mean ID exact match >= ID_FIT).
OOD_GENERALIZES = 0.5
ID_FIT = 0.9


#: Seconds kept for compiling, probing and drawing after training when a budget is set.
RENDER_RESERVE_S = 150.0


class ReportError(Exception):
    """A report cannot be produced (bad task name, unwritable output directory, runs of another
    task, ...). The message says what and how to fix it."""


@dataclass
class ReportOptions:
    """How a report is produced (see :data:`PRESETS`)."""

    preset: str = "quick"
    pes: list[str] = field(default_factory=lambda: list(figures.PE_ORDER))
    seeds: list[int] | None = None
    nope_seeds: int | None = None
    runs_root: str | None = None
    device: str = "cpu"
    probe_per_length: int | None = None
    train_missing: bool = True
    variant: str = "standard"
    progress: bool = True
    #: extra training settings (``config_overrides`` of ``analysis.training.train``), e.g.
    #: ``{"steps": 20}`` for tests; runs with overrides belong in their own ``runs_root``.
    train_overrides: dict | None = None
    #: input lengths to probe (default: middle and end of the training range, and 1.5x its end)
    probe_lengths: list[int] | None = None
    #: training processes run side by side (default: min(2, CPU cores)); each gets
    #: cores // jobs torch threads. Small models train faster this way than one at a time.
    jobs: int | None = None
    #: wall-clock budget of the whole report in seconds (training stops starting new runs
    #: RENDER_RESERVE_S before it); None = no budget. ``rasp demo`` uses 570.
    budget_s: float | None = None

    def resolved(self) -> dict:
        if self.preset not in PRESETS:
            raise ReportError(f"unknown preset {self.preset!r}; choose one of {sorted(PRESETS)}")
        p = dict(PRESETS[self.preset])
        for k in ("seeds", "nope_seeds", "runs_root", "probe_per_length"):
            v = getattr(self, k)
            if v is not None:
                p[k] = v
        return p


def _log(opts: ReportOptions | None, msg: str) -> None:
    if opts is None or opts.progress:
        print(msg, file=sys.stderr, flush=True)


def run_dir_for(runs_root: str | os.PathLike, task: str, pe: str, seed: int,
                preset: str = "default") -> Path:
    """The run directory of (task, PE, seed, training preset), as ``rasp train`` names it:
    ``runs_root/<task>/<pe>/seed<k>`` (``seed<k>-<preset>`` for a non-default preset)."""
    leaf = f"seed{seed}" if preset in (None, "default") else f"seed{seed}-{preset}"
    return Path(runs_root) / task / pe / leaf


# --------------------------------------------------------------------------------------------
# Collecting one task
# --------------------------------------------------------------------------------------------

def _to_plain(obj: Any) -> Any:
    """Best-effort conversion of a result object into JSON-able data."""
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if hasattr(obj, "to_dict"):
        try:
            return _to_plain(obj.to_dict())
        except Exception:  # noqa: BLE001 - fall back to the fields
            pass
    if isinstance(obj, dict):
        return {str(k): _to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_to_plain(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if hasattr(obj, "__dataclass_fields__"):
        return {k: _to_plain(getattr(obj, k)) for k in obj.__dataclass_fields__}
    return str(obj)


def _read_json(path: Path) -> Any:
    with open(path) as f:
        return json.load(f)


def _load_program(task) -> tuple[Any, str]:
    """The task's reference s-op and its source listing (contract C)."""
    if getattr(task, "reference_path", None) is not None and hasattr(task, "load_reference"):
        return task.load_reference(), task.reference_source()
    import rasp
    path = Path(task.reference_file)
    env = rasp.run_file(str(path), causal=bool(getattr(task, "causal", False)))
    return env[task.reference_name], path.read_text()


def measured_outcome(accuracy: dict[str, list[dict]]) -> dict:
    """Summarise accuracy rows per PE into ID / OOD exact match and an outcome.

    Args:
        accuracy: PE -> rows ``{length, split: "id"|"ood", em, n, ...}`` (all seeds).

    Returns:
        ``{"per_pe": {pe: {"id_em", "ood_em"}}, "best_pe", "outcome"}`` where outcome is
        ``"generalizes"`` (some PE fits the training lengths, mean ID EM >= 0.9, and reaches mean
        OOD EM >= 0.5), ``"fails"`` (some PE fits but none reaches it), or ``"inconclusive"``
        (no PE fits the training lengths) or ``"no runs"``.
    """
    per_pe = {}
    for pe, rows in accuracy.items():
        ids = [r["em"] for r in rows if r.get("split") == "id" and r.get("em") is not None]
        oods = [r["em"] for r in rows if r.get("split") == "ood" and r.get("em") is not None]
        per_pe[pe] = {"id_em": float(np.mean(ids)) if ids else None,
                      "ood_em": float(np.mean(oods)) if oods else None}
    fitted = {pe: v for pe, v in per_pe.items() if v["id_em"] is not None and v["id_em"] >= ID_FIT}
    if not per_pe:
        return {"per_pe": {}, "best_pe": None, "outcome": "no runs"}
    scored = {pe: v["ood_em"] for pe, v in per_pe.items() if v["ood_em"] is not None}
    best = max(scored, key=scored.get) if scored else None
    if not fitted:
        outcome = "inconclusive"
    elif any((v["ood_em"] or 0.0) >= OOD_GENERALIZES for v in fitted.values()):
        outcome = "generalizes"
    else:
        outcome = "fails"
    return {"per_pe": per_pe, "best_pe": best, "outcome": outcome}


def _call_train(task_name: str, pe: str, seed: int, run_dir: Path, opts: ReportOptions,
                train_preset: str | None, threads: int | None = None, quiet: bool = False):
    from analysis import training

    kwargs = dict(seed=seed, out_dir=str(run_dir), device=opts.device,
                  progress=opts.progress and not quiet, verbose=opts.progress and not quiet,
                  threads=threads)
    if train_preset:
        kwargs["preset"] = train_preset
    if opts.train_overrides:
        kwargs["config_overrides"] = dict(opts.train_overrides)
    params = inspect.signature(training.train).parameters
    kwargs = {k: v for k, v in kwargs.items() if k in params and v is not None}
    return training.train(task_name, pe, **kwargs)


def check_run_dir(run_dir: Path, task_name: str | None = None) -> dict:
    """Read a finished run's ``config.json`` and check it belongs to ``task_name``.

    Raises:
        ReportError: no config, not finished (no ``DONE``), or another task's run.
    """
    cfg_path = run_dir / "config.json"
    if not cfg_path.exists():
        raise ReportError(f"{run_dir}: not a run directory (no config.json)")
    try:
        cfg = _read_json(cfg_path)
    except (OSError, ValueError) as e:
        raise ReportError(f"{run_dir}: config.json is unreadable ({e})")
    if task_name is not None and cfg.get("task") not in (None, task_name):
        raise ReportError(f"{run_dir}: this run is of task {cfg.get('task')!r}, not "
                          f"{task_name!r}")
    if not (run_dir / "DONE").exists():
        raise ReportError(f"{run_dir}: the run is not finished (no DONE marker)")
    return cfg


def _train_range(cfg: dict, rows: list[dict]) -> tuple[int, int] | None:
    for key in ("train_lengths", "train_range", "train_length_range"):
        v = cfg.get(key)
        if isinstance(v, (list, tuple)) and v:
            return int(min(v)), int(max(v))
        if isinstance(v, dict) and "min" in v and "max" in v:
            return int(v["min"]), int(v["max"])
    if "train_min_len" in cfg and "train_max_len" in cfg:
        return int(cfg["train_min_len"]), int(cfg["train_max_len"])
    ids = [int(r["length"]) for r in rows if r.get("split") == "id"]
    return (min(ids), max(ids)) if ids else None


def _align_compiled(compiled: list[np.ndarray], seq: int) -> list[np.ndarray]:
    """Align a compiled model's patterns to trained patterns of length ``seq``.

    When the compiled model prepends its own BOS in front of the task's BOS (one position more),
    the two BOS keys are merged into key 0 and the compiled BOS query row is dropped, so query i
    of both models reads the same token.
    """
    out = []
    for arr in compiled:
        if arr.shape[-1] == seq + 1:
            a = arr[:, :, 1:, 1:].copy()
            a[..., 0] += arr[:, :, 1:, 0]
            out.append(a)
        elif arr.shape[-1] == seq:
            out.append(arr)
        else:
            raise probing.ProbingError(f"compiled patterns have {arr.shape[-1]} positions, the "
                                       f"trained ones {seq}: the sequences do not align")
    return out


def _compile_reference(task, sop, max_seq_len: int):
    import compiler

    vocab = None
    if hasattr(task, "program_vocab"):
        vocab = set(task.program_vocab(max_seq_len))
    else:
        vocab = {task.program_tokens([i])[-1] for i in range(len(task.vocab))}
    return compiler.compile_program(sop, vocab, max_seq_len,
                                    causal=bool(getattr(task, "causal", False)))


def _compiled_size(compiled) -> dict:
    stats = _to_plain(getattr(compiled, "stats", {}) or {})
    cfg = getattr(getattr(compiled, "model", None), "cfg", None)
    if cfg is None:
        cfg = getattr(getattr(compiled, "model", None), "config", None)
    heads, mlp = [], []
    if cfg is not None:
        n = cfg.n_layers
        heads = [cfg.heads(l) if hasattr(cfg, "heads") else
                 (cfg.n_heads[l] if isinstance(cfg.n_heads, list) else cfg.n_heads)
                 for l in range(n)]
        mlp = [cfg.mlp_width(l) if hasattr(cfg, "mlp_width") else
               (cfg.d_mlp[l] if isinstance(cfg.d_mlp, list) else cfg.d_mlp) for l in range(n)]
    names = getattr(compiled, "head_nodes", None)
    head_names = {}
    if isinstance(names, (list, tuple)):
        for l, layer in enumerate(names):
            for h, nm in enumerate(layer or []):
                head_names[f"{l},{h}"] = str(nm)
    return {"stats": stats, "heads": heads, "mlp": mlp, "head_names": head_names}


def _is_compiled(obj) -> bool:
    return hasattr(obj, "attention") and hasattr(obj, "run") and not hasattr(obj, "attention_patterns")


def _capture_compiled_aligned(task, compiled, seqs) -> list[np.ndarray]:
    """Compiled patterns on the program tokens of ``seqs``, aligned to the token positions."""
    per_example = []
    for s in seqs:
        prog = list(task.program_tokens(list(s)))
        pats = probing.capture_compiled(compiled, [prog])
        per_example.append([a[0] for a in _align_compiled(pats, len(s))])
    return probing.pad_patterns(per_example)


def probe_task_runs(task, runs: dict[str, Any], compiled=None, lengths: Sequence[int] = (),
                    per_length: int = 3, seed: int = 1234, variant: str = "standard",
                    ) -> probing.ProbeResult:
    """Capture and compare attention for loaded trained models and the compiled model.

    Args:
        task: a contract-C task.
        runs: label (``"<pe>/seed<k>"``) -> trained ``Transformer``.
        compiled: a ``CompiledModel`` or None.
        lengths: input lengths to probe (task lengths, not sequence lengths).

    Returns:
        :class:`analysis.probing.ProbeResult` (``notes`` record what could not be compared).
    """
    seqs = probing.probe_sequences(task, lengths, per_length=per_length, seed=seed)
    notes = []
    trained = {}
    for label, model in runs.items():
        if _is_compiled(model):                      # a compiled model probed like a trained one
            trained[label] = _capture_compiled_aligned(task, model, seqs)
        else:
            trained[label] = probing.capture_trained(model, seqs)
    comp = None
    if compiled is not None:
        try:
            comp = _capture_compiled_aligned(task, compiled, seqs)
        except Exception as e:  # noqa: BLE001 - reported in the page
            notes.append(f"compiled model could not be probed: {e}")
            comp = None
    res = probing.probe(task.name, seqs, trained, comp, variant=variant)
    res.notes = notes + res.notes
    return res


def wanted_runs(task_name: str, opts: ReportOptions) -> list[tuple[str, int, Path]]:
    """The (PE, seed, run directory) triples a report on ``task_name`` needs."""
    preset = opts.resolved()
    out = []
    for pe in opts.pes:
        seeds = list(preset["seeds"])
        if pe == "nope":
            seeds = sorted(set(seeds) | set(range(int(preset["nope_seeds"]))))
        out += [(pe, s, run_dir_for(preset["runs_root"], task_name, pe, s,
                                    preset.get("train_preset"))) for s in seeds]
    return out


def _train_worker(job: tuple) -> dict:
    """Run one training job in a worker process (module level so it can be pickled)."""
    task_name, pe, seed, rd, opts, train_preset, threads = job
    t0 = time.time()
    state = "resumed" if Path(rd).exists() else "trained"
    try:
        res = _call_train(task_name, pe, seed, Path(rd), opts, train_preset, threads=threads,
                          quiet=True)
        line = res.summary_line() if hasattr(res, "summary_line") else ""
        return {"dir": str(rd), "status": state, "seconds": time.time() - t0, "line": line}
    except Exception as e:  # noqa: BLE001 - reported in the page
        return {"dir": str(rd), "status": "failed", "error": str(e),
                "seconds": time.time() - t0}


#: Order in which missing runs are trained, so that a time budget leaves the most informative
#: runs done: NoPE and T5 first (the paper's closest pair), then NoPE's other seed (the
#: baseline), then the others; tasks interleaved.
_PE_PRIORITY = ["nope", "t5", "alibi", "rope", "ape_sinusoidal", "ape_learned"]


def _job_rank(job: tuple) -> tuple:
    name, pe, seed = job[:3]
    rank = _PE_PRIORITY.index(pe) if pe in _PE_PRIORITY else len(_PE_PRIORITY)
    if pe == "nope" and seed > 0:
        rank = 1.5 + seed / 1000              # the other-seed baseline right after T5
    return (rank, seed)


def train_missing(task_names: Sequence[str], opts: ReportOptions,
                  budget_s: float | None = None) -> dict[str, dict]:
    """Train every missing or partial run of the report, ``opts.jobs`` at a time.

    Args:
        task_names: the report's tasks.
        opts: the report options (``jobs``, ``train_missing``, ...).
        budget_s: wall-clock budget in seconds for training; a run is not started when the
            time used plus the mean duration of the runs so far would exceed it. Skipped runs
            are reported (status ``"skipped"``) and trained by the next call (finished runs are
            reused). None = no budget; 0 = train nothing.

    Returns:
        run directory -> ``{"status": "trained"|"resumed"|"failed"|"skipped", "error"?,
        "seconds"}``.

    Raises:
        ReportError: a run directory holds another task's run.
    """
    preset = opts.resolved()
    jobs = []
    for name in task_names:
        for pe, seed, rd in wanted_runs(name, opts):
            _check_owner(rd, name)
            if not (rd / "DONE").exists():
                jobs.append((name, pe, seed, str(rd), opts, preset.get("train_preset")))
    if not jobs or not opts.train_missing:
        return {}
    jobs.sort(key=_job_rank)
    cores = os.cpu_count() or 1
    n_jobs = max(1, min(opts.jobs or min(2, cores), len(jobs)))
    threads = max(1, cores // n_jobs)
    done: dict[str, dict] = {}
    _log(opts, f"[report] training {len(jobs)} missing run(s), {n_jobs} at a time "
               f"({threads} torch thread(s) each)"
               + (f", time budget {budget_s:.0f} s" if budget_s else ""))
    t0 = time.time()
    durations: list[float] = []

    def may_start() -> bool:
        if budget_s is None:
            return True
        if budget_s <= 0:
            return False
        expected = float(np.mean(durations)) if durations else 0.0
        return time.time() - t0 + expected <= budget_s

    def finished(i_done: int, job: tuple, r: dict) -> None:
        name, pe, seed, rd = job[:4]
        done[rd] = r
        durations.append(r.get("seconds", 0.0))
        _log(opts, f"[report] [{i_done}/{len(jobs)}, {time.time() - t0:.0f} s] {name} "
                   f"{pe}/seed{seed}: {r['status']} in {r.get('seconds', 0.0):.0f} s  "
                   f"{r.get('line') or r.get('error', '')}")

    pending = list(jobs)
    if n_jobs == 1:
        while pending and may_start():
            job = pending.pop(0)
            finished(len(done) + 1, job, _train_worker(job + (threads,)))
    else:
        import concurrent.futures as cf
        import multiprocessing as mp
        with cf.ProcessPoolExecutor(n_jobs, mp_context=mp.get_context("spawn")) as pool:
            running: dict = {}
            while pending or running:
                while pending and len(running) < n_jobs and may_start():
                    job = pending.pop(0)
                    running[pool.submit(_train_worker, job + (threads,))] = job
                if not running:
                    break
                ready, _ = cf.wait(list(running), return_when=cf.FIRST_COMPLETED)
                for fut in ready:
                    job = running.pop(fut)
                    try:
                        r = fut.result()
                    except Exception as e:  # noqa: BLE001 - a crashed worker
                        r = {"dir": job[3], "status": "failed", "seconds": 0.0,
                             "error": f"worker crashed: {e}"}
                    finished(len(done) + 1, job, r)
    for job in pending:
        done[job[3]] = {"dir": job[3], "status": "skipped", "seconds": 0.0,
                        "error": f"time budget of {budget_s:.0f} s used up; run the same "
                                 "command again to train it (finished runs are reused)"}
    if pending:
        _log(opts, f"[report] time budget reached: {len(pending)} run(s) left for next time")
    return done


def _check_owner(rd: Path, task_name: str) -> None:
    if (rd / "config.json").exists():
        cfg = _read_json(rd / "config.json") if _safe_json(rd / "config.json") else {}
        if cfg.get("task") not in (None, task_name):
            raise ReportError(f"{rd} holds a run of task {cfg.get('task')!r}, not "
                              f"{task_name!r}; move it away or choose another --runs dir")


def collect_task(task_name: str, opts: ReportOptions | None = None,
                 trained: dict[str, dict] | None = None) -> dict:
    """Gather everything the report shows for one task; run what is missing.

    Steps: load the task and its reference program; measures and RASP-L check; the prediction;
    compile the reference; train (or reuse) one run per PE and seed; probe. Each step's failure
    is recorded in ``section["problems"]`` and the page says what is missing; an unknown task
    raises.

    Returns:
        a section dict (see :func:`render_report`).

    Raises:
        ReportError: unknown task; a run directory holding another task's run.
    """
    opts = opts or ReportOptions()
    preset = opts.resolved()
    try:
        import tasks as _tasks
    except ImportError as e:
        raise ReportError(f"the task catalogue is not available ({e})")
    try:
        task = _tasks.get_task(task_name)
    except KeyError as e:
        raise ReportError(str(e))
    t0 = time.time()
    sec: dict[str, Any] = {"name": task.name, "description": getattr(task, "description", ""),
                           "source": getattr(task, "source", ""), "problems": [],
                           "paper": _to_plain(getattr(task, "paper", {})), "runs": [],
                           "accuracy": {}, "train_range": None}
    _log(opts, f"[report] {task.name}: program, measures, RASP-L check, prediction")
    sop = None
    try:
        sop, listing = _load_program(task)
        sec["program"] = {"file": str(task.reference_file), "name": task.reference_name,
                          "listing": listing, "causal": bool(getattr(task, "causal", False))}
    except Exception as e:  # noqa: BLE001
        sec["program"] = None
        sec["problems"].append(f"reference program could not be loaded: {e}")
    if sop is not None:
        try:
            from rasp import measures
            sec["measures"] = _to_plain(measures.measure(sop))
        except Exception as e:  # noqa: BLE001
            sec["problems"].append(f"measures unavailable: {e}")
        try:
            from rasp import raspl
            rep = raspl.check(sop, causal=bool(getattr(task, "causal", False)) or None)
            sec["raspl"] = {"valid": bool(rep.valid), "violations": [
                {"rule": str(getattr(v, "rule", "")), "operation": str(getattr(v, "operation", "")),
                 "span": str(getattr(v, "span", "") or ""), "message": str(getattr(v, "message", ""))}
                for v in rep.violations]}
        except Exception as e:  # noqa: BLE001
            sec["problems"].append(f"RASP-L check unavailable: {e}")
    try:
        from analysis import predict as _predict
        sec["prediction"] = _to_plain(_predict.predict(task))
    except Exception as e:  # noqa: BLE001
        sec["problems"].append(f"prediction unavailable: {e}")

    # --- training runs -------------------------------------------------------------------
    wanted = wanted_runs(task.name, opts)
    for _, _, rd in wanted:
        _check_owner(rd, task.name)
    if trained is None:                       # not trained up front by generate_report
        trained = train_missing([task.name], opts)
    models: dict[str, Any] = {}
    for i, (pe, seed, rd) in enumerate(wanted):
        label = f"{pe}/seed{seed}"
        entry = {"pe": pe, "seed": seed, "dir": str(rd), "status": "missing"}
        if str(rd) in trained:
            r = trained[str(rd)]
            entry["status"] = r["status"]
            entry["train_seconds"] = round(r.get("seconds", 0.0), 1)
            if r["status"] == "failed":
                entry["error"] = r.get("error", "")
                sec["problems"].append(f"training {label} failed: {r.get('error', '')}")
            elif r["status"] == "skipped":
                entry["error"] = r.get("error", "")
                sec["problems"].append(f"run {label} not trained: {r.get('error', '')}")
        elif (rd / "DONE").exists():
            entry["status"] = "reused"
            _log(opts, f"[report] {task.name} {label}: reusing {rd}")
        else:
            sec["problems"].append(f"run {label} is missing ({rd}); run `rasp report` without "
                                   "--no-train or `rasp train` to produce it")
        if entry["status"] in ("reused", "trained", "resumed"):
            try:
                from analysis import training
                model, cfg, _ = training.load_run(str(rd))
                rows = _read_json(rd / "accuracy.json")
                sec["accuracy"].setdefault(pe, []).extend(rows)
                sec["train_range"] = sec["train_range"] or _train_range(cfg, rows)
                models[label] = model
                entry.update(_run_summary(rows))
            except Exception as e:  # noqa: BLE001
                entry["status"] = "unreadable"
                sec["problems"].append(f"run {label} at {rd} cannot be read: {e}")
        sec["runs"].append(entry)
    sec["measured"] = measured_outcome(sec["accuracy"])

    # --- compile and probe ----------------------------------------------------------------
    lo, hi = sec["train_range"] or (getattr(task, "min_length", 1) or 1,
                                    getattr(task, "default_train_max_len", 10) or 10)
    lengths = opts.probe_lengths or sorted({max(lo, hi // 2), hi, hi + max(1, hi // 2)})
    compiled = None
    if sop is not None:
        _log(opts, f"[report] {task.name}: compiling the reference program")
        try:
            seqs = probing.probe_sequences(task, lengths, per_length=1, seed=0)
            compiled = _compile_reference(task, sop, max(len(s) for s in seqs) + 4)
            sec["compiled"] = _compiled_size(compiled)
        except Exception as e:  # noqa: BLE001
            sec["compiled"] = {"error": str(e)}
            sec["problems"].append(f"the reference program was not compiled: {e}")
    if models:
        _log(opts, f"[report] {task.name}: probing {len(models)} models at lengths {lengths}")
        try:
            res = probe_task_runs(task, models, compiled, lengths,
                                  per_length=int(preset["probe_per_length"]),
                                  variant=opts.variant)
            sec["probe"] = res
            sec["token_names"] = _token_names(task, res.sequences)
        except Exception as e:  # noqa: BLE001
            sec["problems"].append(f"probing failed: {e}")
    else:
        sec["problems"].append("no trained run available: nothing to probe")
    sec["seconds"] = round(time.time() - t0, 1)
    return sec


def _safe_json(path: Path) -> bool:
    try:
        _read_json(path)
        return True
    except (OSError, ValueError):
        return False


def _run_summary(rows: list[dict]) -> dict:
    ids = [r["em"] for r in rows if r.get("split") == "id" and r.get("em") is not None]
    oods = [r["em"] for r in rows if r.get("split") == "ood" and r.get("em") is not None]
    return {"id_em": float(np.mean(ids)) if ids else None,
            "ood_em": float(np.mean(oods)) if oods else None}


def _token_names(task, sequences) -> list[list[str]] | None:
    try:
        return [list(task.vocab.decode(list(s))) for s in sequences]
    except Exception:  # noqa: BLE001
        return None


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


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


def _figures_for_section(sec: dict, out_dir: Path) -> dict:
    """Draw a section's figures; returns name -> {"path", "uri", "caption"}."""
    figs: dict[str, dict] = {}
    slug = _slug(sec["name"])

    def add(key, path, caption):
        figs[key] = {"path": os.path.basename(path), "uri": _png_data_uri(path),
                     "caption": caption}

    if sec.get("accuracy"):
        tr = sec.get("train_range") or (1, 1)
        p = figures.accuracy_figure(sec["accuracy"], tr, out_dir / f"{slug}_accuracy.png",
                                    title=f"{sec['name']}: exact match by length")
        add("accuracy", p, "Exact match of greedy decoding per input length (mean over seeds; "
                           "band: 95% Wilson interval of the first seed); grey: training lengths.")
    comp = sec.get("compiled") or {}
    if comp.get("heads"):
        labels = {tuple(int(x) for x in k.split(",")): v
                  for k, v in (comp.get("head_names") or {}).items()}
        p = figures.layer_diagram(comp["heads"], comp["mlp"], out_dir / f"{slug}_compiled.png",
                                  title="compiled model", head_labels=labels)
        add("layers", p, "Layers of the compiled model: attention heads, then the MLP.")
    res: probing.ProbeResult | None = sec.get("probe")
    if res is not None:
        ref = next((a for (a, b) in res.pairwise), None)
        dists: dict[str, list[float]] = {}
        baseline = []
        for (a, b), d in res.pairwise.items():
            pe_b = b.split("/")[0]
            if pe_b == a.split("/")[0]:
                baseline.append(d.mean)
            else:
                dists.setdefault(pe_b, []).append(d.mean)
        if dists or baseline:
            p = figures.distance_chart(dists, out_dir / f"{slug}_distances.png",
                                       reference=(ref or "nope").split("/")[0],
                                       baseline=baseline or None,
                                       title=f"{sec['name']}: attention distance from {ref}")
            add("distances", p, "Kazemnejad et al.'s distance: per layer the minimum JSD over "
                                "head pairs, averaged over layers; dashed: the same PE with "
                                "another seed; diamonds: the paper's values.")
        figs["heatmaps"] = []
        tokens = None
        longest = int(np.argmax([len(s) for s in res.sequences]))
        n = len(res.sequences[longest])
        if sec.get("token_names"):
            tokens = sec["token_names"][longest]
        labels = [l for l in res.models if l != res.compiled_label]
        firsts = {}
        for l in labels:                       # heatmaps for the first seed of each PE only
            firsts.setdefault(l.split("/")[0], l)
        for label in firsts.values():
            pats = probing.as_layer_list(res.models[label])
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
                    cp = probing.as_layer_list(res.models[res.compiled_label])
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
                    "caption": f"{label} head L{t[0]}H{t[1]} | best compiled match | "
                               f"relative-position (T5 bucket) fit, on the longest probe "
                               f"sequence ({n} tokens)"})
    return figs


def _section_view(sec: dict) -> dict:
    """Tables of a section for the template (strings, already formatted)."""
    view: dict[str, Any] = {}
    res: probing.ProbeResult | None = sec.get("probe")
    if res is not None:
        view["pairwise"] = [{"a": a, "b": b, "mean": _fmt(d.mean),
                             "per_layer": ", ".join(_fmt(x) for x in d.per_layer)}
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
    meas = sec.get("measured") or {}
    view["per_pe"] = [{"pe": figures.PE_NAMES.get(pe, pe), "id_em": _fmt(v["id_em"], 2),
                       "ood_em": _fmt(v["ood_em"], 2)}
                      for pe, v in sorted((meas.get("per_pe") or {}).items(),
                                          key=lambda kv: figures.PE_ORDER.index(kv[0])
                                          if kv[0] in figures.PE_ORDER else 99)]
    pred = sec.get("prediction") or {}
    view["predicted"] = _find(pred, ("prediction", "predicted", "outcome"))
    view["paper_outcome"] = _find(pred, ("paper_outcome", "paper"))
    view["verdict"] = _find(pred, ("verdict",))
    view["agrees"] = (None if not view["predicted"] or meas.get("outcome") in
                      (None, "inconclusive", "no runs")
                      else str(view["predicted"]).startswith(str(meas.get("outcome"))[:4]))
    return view


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


def render_report(sections: list[dict], out_dir: str | os.PathLike,
                  title: str = "rasp-lab attention report", meta: dict | None = None) -> Path:
    """Write ``out_dir/report.html`` (self-contained) and the PNG figures.

    Args:
        sections: one dict per task as returned by :func:`collect_task` (keys: ``name``,
            ``description``, ``program``, ``measures``, ``raspl``, ``prediction``, ``measured``,
            ``accuracy`` (PE -> accuracy rows), ``train_range``, ``runs``, ``compiled``
            (``stats``, ``heads``, ``mlp`` or ``error``), ``probe`` (a ProbeResult),
            ``problems``); missing keys render as "not available".
        out_dir: the output directory (created).

    Returns:
        the path of ``report.html``.

    Raises:
        ReportError: the directory cannot be written.
    """
    import jinja2

    out = Path(out_dir)
    _check_writable(out)
    views = []
    for sec in sections:
        figs = _figures_for_section(sec, out)
        views.append({"sec": sec, "figs": figs, "view": _section_view(sec)})
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
        autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.ChainableUndefined)
    env.filters["fmt"] = _fmt
    env.filters["pename"] = lambda pe: figures.PE_NAMES.get(pe, pe)
    page = env.get_template("report.html.j2").render(
        title=title, sections=views, meta=meta or {},
        generated=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        thresholds={"ood": OOD_GENERALIZES, "id": ID_FIT})
    path = out / "report.html"
    tmp = out / ".report.html.tmp"
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, path)
    summary = [{"task": s["sec"]["name"], "measured": (s["sec"].get("measured") or {}),
                "predicted": s["view"].get("predicted"),
                "probe": s["sec"]["probe"].to_dict() if s["sec"].get("probe") is not None
                else None,
                "compiled": (s["sec"].get("compiled") or {}).get("stats"),
                "runs": s["sec"].get("runs"), "problems": s["sec"].get("problems")}
               for s in views]
    (out / "report.json").write_text(json.dumps(_to_plain(summary), indent=1))
    return path


def generate_report(task_names: Sequence[str] | None = None,
                    out_dir: str | os.PathLike = "reports",
                    opts: ReportOptions | None = None) -> Path:
    """Produce the report for ``task_names`` (default :data:`DEFAULT_TASKS`).

    Runs what is missing (see :func:`collect_task`), then :func:`render_report`. The output
    directory is checked first so an unwritable one fails before any training.

    Returns:
        the path of ``report.html``.

    Raises:
        ReportError: unknown task, unwritable output directory, runs of another task.
    """
    opts = opts or ReportOptions()
    opts.resolved()
    names = list(task_names or DEFAULT_TASKS)
    out = Path(out_dir)
    _check_writable(out)
    try:
        import tasks as _tasks
        known = set(_tasks.list_tasks())
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ReportError(f"unknown task(s) {', '.join(unknown)}; known tasks: "
                              f"{', '.join(sorted(known))}")
    except ImportError as e:
        raise ReportError(f"the task catalogue is not available ({e})")
    t0 = time.time()
    trained = train_missing(names, opts, budget_s=(None if opts.budget_s is None else
                                                   max(0.0, opts.budget_s - RENDER_RESERVE_S)))
    sections = [collect_task(n, opts, trained) for n in names]
    _log(opts, "[report] drawing figures and writing the page")
    path = render_report(sections, out, meta={
        "preset": opts.preset, "pes": opts.pes, "seconds": round(time.time() - t0, 1),
        "runs_root": opts.resolved()["runs_root"]})
    return path


# --------------------------------------------------------------------------------------------
# Probing run directories (``rasp probe``)
# --------------------------------------------------------------------------------------------

def _load_target(path: Path):
    """(label, model, task name or None) for a training run dir or a compiled export dir."""
    if (path / "config.json").exists():
        cfg = check_run_dir(path)
        from analysis import training
        try:
            model, cfg2, _ = training.load_run(str(path))
        except Exception as e:  # noqa: BLE001 - RunDirError and friends
            msg = str(e)
            raise ReportError(msg if msg.startswith(str(path)) else f"{path}: {msg}")
        cfg = cfg2 or cfg
        label = f"{cfg.get('pe', path.parent.name)}/seed{cfg.get('seed', '?')}"
        return label, model, cfg.get("task"), cfg
    if (path / "model.json").exists():
        import compiler
        try:
            compiled = compiler.load_compiled(str(path))
        except Exception as e:  # noqa: BLE001
            raise ReportError(f"{path}: cannot load the compiled model ({e})")
        return f"compiled:{path.name}", compiled, None, {}
    if not path.exists():
        raise ReportError(f"{path}: no such directory")
    raise ReportError(f"{path}: neither a training run (config.json) nor a compiled model "
                      "(model.json)")


def probe_run_dirs(paths: Sequence[str | os.PathLike], task_name: str | None = None,
                   lengths: Sequence[int] | None = None, per_length: int = 3,
                   variant: str = "standard", compile_reference: bool = True,
                   ) -> tuple[probing.ProbeResult, dict]:
    """Probe finished training runs (and/or compiled model exports) of one task.

    Args:
        paths: run directories (``config.json`` + ``DONE``) or compiled export directories
            (``model.json``, loaded with ``compiler.load_compiled``).
        task_name: the task (default: the runs' own; required for compiled dirs alone).
        lengths: input lengths to probe (default: middle and end of the training range and
            1.5x its end).
        compile_reference: also compile the task's reference program and match heads to it.

    Returns:
        (ProbeResult, info dict with ``task``, ``lengths``, ``compiled`` size or error).

    Raises:
        ReportError: missing/partial/corrupt run directories, runs of different tasks, an
            unknown task.
    """
    if not paths:
        raise ReportError("give at least one run directory")
    # the tasks first (cheap), so runs of different tasks are refused before loading weights
    owners = {}
    for p in paths:
        if (Path(p) / "config.json").exists():
            owners[str(p)] = check_run_dir(Path(p)).get("task")
    run_tasks = {t for t in owners.values() if t}
    if len(run_tasks) > 1:
        raise ReportError("the run directories belong to different tasks: "
                          + ", ".join(f"{p} ({t})" for p, t in owners.items()))
    if task_name and run_tasks and run_tasks != {task_name}:
        raise ReportError(f"the runs are of task {run_tasks.pop()!r}, not {task_name!r}")
    loaded = [_load_target(Path(p)) for p in paths]
    name = task_name or (run_tasks.pop() if run_tasks else None)
    if not name:
        raise ReportError("compiled model directories need --task")
    import tasks as _tasks
    try:
        task = _tasks.get_task(name)
    except KeyError as e:
        raise ReportError(str(e))
    models: dict[str, Any] = {}
    train_range = None
    for path, (label, model, _, cfg) in zip(paths, loaded):
        while label in models:
            label += "'"
        models[label] = model
        if cfg and train_range is None:
            rows = []
            rd = Path(path)
            if (rd / "accuracy.json").exists() and _safe_json(rd / "accuracy.json"):
                rows = _read_json(rd / "accuracy.json")
            train_range = _train_range(cfg, rows)
    if lengths is None:
        lo, hi = train_range or (getattr(task, "min_length", 1) or 1,
                                 getattr(task, "default_train_max_len", 10) or 10)
        lengths = sorted({max(lo, hi // 2), hi, hi + max(1, hi // 2)})
    info: dict[str, Any] = {"task": name, "lengths": list(lengths)}
    compiled = None
    if compile_reference:
        try:
            sop, _ = _load_program(task)
            seqs = probing.probe_sequences(task, lengths, per_length=1, seed=0)
            compiled = _compile_reference(task, sop, max(len(s) for s in seqs) + 4)
            info["compiled"] = _compiled_size(compiled)["stats"]
        except Exception as e:  # noqa: BLE001
            info["compiled_error"] = str(e)
    res = probe_task_runs(task, models, compiled, lengths, per_length=per_length,
                          variant=variant)
    return res, info
