"""Huang et al. 2025's experiment run as they ran it: their lengths, sweep, selection and seeds.

Source: Huang, Yang, Hahn, Hahn et al., "A Formal Framework for Understanding Length
Generalization in Transformers", ICLR 2025 (arXiv 2410.02140), §5 and App. E.3, and their
released code (github.com/lacoco-lab/length_generalization, ``algorithmic/
language_modeling_train.py`` for the sweep, ``algorithmic/run_multiple_seeds.py`` for the seeds).
Where the paper and the code differ, the code is followed (listed in :data:`CODE_NOT_PAPER`);
where we differ from their code, :data:`NOT_THEIRS` says so. The settings and tables (scales,
per-language grids, fallbacks, their selections) live in :mod:`analysis.evidence.huang_protocol`.

One **cell** is a (task, PE) pair, PE ``ape_learned`` (GPT-2's learned absolute positions, trained
with a random position offset per example) or ``nope``. A cell runs in two stages:

1. **Sweep** (:attr:`Scale.configs`, their ``configs``): every configuration (layers x heads x
   d_model x lr) trained once with seed 0 for ``steps`` optimizer steps (batch 64, AdamW, weight
   decay 0.01, linear decay, no warmup), evaluated every ``fit_every`` steps on the
   in-distribution bin and stopped early once it is 100% right (their ``myCallback``); at the
   end, exact match on every bin (:func:`analysis.training.evaluation.evaluate_bins`: 2,000
   examples per bin, lengths uniform in the bin, every answer position right).
2. **Selection** (:func:`select_config`): among the configurations at 100% in distribution, the
   one with the best exact match on the first out-of-distribution bin (51-100); ties go to the
   first in their sweep order (their sweep stops at the first configuration that is 100% on both
   the ID bin and 51-100, so no later one can be chosen over it). When none fits, their 12-layer
   model at the learning rate their scripts chose for the cell (:func:`fallback_config`:
   ``big`` 1e-4 or ``bigsmalllr`` 3e-5), for which every seed counts (``threshold = 0.0``).
3. **Seeds** (their ``run_multiple_seeds.py``): seeds 0, 1, 2, ... of the selected configuration
   until five fit (ID exact match 100% at the early stop or at the last step), at most 1,000
   tried as theirs (``range(1000)``); the cell's number per bin is the mean over those five,
   reported with its spread and the number of seeds tried.
4. **Agreement** (:func:`agreement`): per out-of-distribution bin, our outcome against theirs by
   the claims rule, but "their model did not fit" first where their ID mean is below 100%
   (their fallback's seeds count at any ID accuracy): a number of a model that did not learn
   the training lengths says nothing about length generalization.

The training engine is the project's own (:func:`analysis.training.trainer.train` through the
grid, :mod:`analysis.training.grid`: a local Ray instance, a cluster or in-process); finished runs
are reused and interrupted ones resume, so a rerun of a cell finishes only what is missing.

``--scale small`` (:data:`SMALL`) cuts the protocol so one cell finishes on 2 CPU cores in
minutes: training lengths 1-10 and bins 11-20 / 21-30 (their 1:2:3 ratio), four configurations
(1-2 layers x 1-2 heads, d_model 64, lr 1e-3), 3,000 steps with a fit check every 500, 200
examples per bin, at most 10 seeds. Its numbers are **not** theirs to compare: it says so
wherever they are shown.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Sequence

import numpy as np

from analysis.evidence import statistics as _stats
from analysis.training import runs as _runs
from analysis.training.study import Study
from analysis.experiment.pipeline import StageOptions
from analysis.experiment.pipeline import train as train_stage
from analysis.experiment.plan import Plan
from rasp_model import files as _files   # the one bounded, type-checked reader
from rasp_model.pe_names import theory_protocol
from rasp_model.positional import PE_LABELS
from analysis.training.trainer import git_commit
# the protocol's settings and tables (split out; re-exported: callers use replication.X)
from analysis.evidence.huang_protocol import (  # noqa: F401
    CODE_NOT_PAPER, FALLBACKS, FIT_EM, FORMAL_NOT_THEIRS, FORMAL_PROTOCOL, FULL, HUANG_PES,
    NOT_THEIRS, SCALES, SMALL, THEIR_SELECTED, FormalProtocol, ReplicationError, Scale,
    SweepConfig, fallback_config, formal_language, formal_scale, replication_tasks, scale_for,
    their_bins, their_fit_label, their_n_positions, their_numbers, their_range_min)

__all__ = ["ReplicationError", "SweepConfig", "Scale", "FULL", "SMALL", "SCALES", "HUANG_PES",
           "replication_tasks", "their_n_positions", "run_overrides", "select_config",
           "Selected", "fitting_seeds", "bin_summary", "agreement", "cell_path", "read_cell",
           "replicate_cell", "CODE_NOT_PAPER", "estimate_flops", "their_numbers",
           "measured_compute", "read_cells", "THEIR_SELECTED", "prediction_check",
           "prediction_checks", "prediction_checks_of", "cell_rows", "DEFAULT_CELLS_DIR",
           "FORMAL_NOT_THEIRS", "formal_language", "formal_scale", "scale_for", "their_bins",
           "NOT_THEIRS", "FALLBACKS", "fallback_config", "FORMAL_PROTOCOL", "IN_SAMPLE",
           "cell_compute", "GENERATOR_REVISION", "stale_reason"]

#: Every cell of their experiment is in-sample for our search grammars (spec predictor.md §5:
#: the grammars were built with Huang et al.'s 50 cells in view): agreement on one is a fit.
IN_SAMPLE = ("in-sample: the search grammars were built with Huang et al.'s 50 cells in view, "
             "so agreement here is a fit, not an out-of-sample test")

#: The cell files this checkout keeps (``make replication``): ``docs/replication``.
DEFAULT_CELLS_DIR = Path(__file__).resolve().parents[2] / "docs" / "replication"


def _gpt2(cfg: SweepConfig) -> dict:
    """The model settings of HuggingFace's ``GPT2LMHeadModel`` at one sweep configuration
    (both of their code bases): pre-LN, GELU, MLP 4 d_model, tied embeddings, init std 0.02,
    no dropout."""
    return {"n_layers": cfg.n_layers, "n_heads": cfg.n_heads, "d_model": cfg.d_model,
            "d_head": max(1, cfg.d_model // cfg.n_heads), "d_mlp": 4 * cfg.d_model,
            "act_fn": "gelu", "normalization_type": "LN", "tied_embeddings": True,
            "embed_init_std": 0.02, "initializer_range": 0.02, "dropout": 0.0}


def run_overrides(task: str, pe: str, cfg: SweepConfig, scale: Scale,
                  fallback: bool = False) -> dict:
    """The training settings (:mod:`analysis.training.configs` keys) of one of their runs.

    Their model is HuggingFace's ``GPT2LMHeadModel`` (pre-LN, GELU, MLP 4 d_model, tied
    embeddings, init std 0.02, no dropout) trained with ``Trainer`` (AdamW betas (0.9, 0.999),
    weight decay 0.01, linear decay to 0, gradient clipping 1.0, batch 64). Ours: the same
    settings of :class:`rasp_model.Transformer` (its GELU is exact, GPT-2's the tanh
    approximation). The random offsets span their ``n_positions`` (:func:`their_n_positions`)
    where our model has as many positions; addition's 2 x 150 exceeds them and is cut to ours.
    """
    if pe not in HUANG_PES:
        raise ReplicationError(f"Huang et al. trained {' and '.join(HUANG_PES)}, not {pe!r}")
    if scale.train_set:
        return _formal_overrides(pe, cfg, scale)
    lo, hi = scale.train_lengths
    top = scale.bins[-1][1]
    out = {**_gpt2(cfg), "lr": cfg.lr, "weight_decay": 0.01, "betas": [0.9, 0.999],
           "warmup_steps": scale.fallback_warmup if fallback else 0,
           "schedule": "linear", "min_lr_ratio": 0.0, "grad_clip": 1.0,
           "batch_size": scale.batch_size,
           "steps": scale.fallback_steps if fallback else scale.steps,
           "train_min_len": their_range_min(task, lo), "train_max_len": hi,
           "position_offsets": theory_protocol(pe),
           "eval_bins": [list(b) for b in scale.bins], "bin_samples": scale.bin_samples,
           "fit_every": scale.fit_every, "fit_em": 1.0,
           "eval_max_factor": top / hi, "eval_stride": scale.eval_stride,
           "eval_samples": scale.eval_samples, "probe_every": 0,
           "checkpoint_every": max(scale.fit_every, 500)}
    if pe == "ape_learned":
        out["offset_span"] = their_n_positions(task, top) - 1   # our inputs drop the last token
    return out


def _formal_overrides(pe: str, cfg: SweepConfig, scale: Scale) -> dict:
    """:func:`run_overrides` of their formal languages (``train_with_ce.py``): HuggingFace
    ``GPT2LMHeadModel`` with ``n_positions`` = 2 x the longest input (``$ w #``: the last
    bin's longest string + 2), trained on a fixed set in order, AdamW (torch defaults but lr
    and weight decay), no scheduler, no clipping; with APE each training example shifted by an
    offset uniform in ``[0, n_positions / 2)``, none at test; NoPE without offsets."""
    lo, hi = scale.train_lengths
    top = scale.bins[-1][1]
    n_positions = 2 * (top + 2)
    out = {**_gpt2(cfg), "lr": cfg.lr, "weight_decay": scale.weight_decay,
           "betas": [0.9, 0.999],
           "warmup_steps": 0, "schedule": "constant", "min_lr_ratio": 1.0, "grad_clip": 0.0,
           "batch_size": scale.batch_size, "steps": scale.steps,
           "train_min_len": max(1, lo), "train_max_len": hi,
           "train_set": scale.train_set, "train_set_seed": 0,
           "position_offsets": theory_protocol(pe),
           "eval_bins": [list(b) for b in scale.bins], "bin_samples": scale.bin_samples,
           "fit_every": 0, "eval_max_factor": max(1.0, top / hi),
           "eval_stride": scale.eval_stride, "eval_samples": scale.eval_samples,
           "probe_every": 0, "checkpoint_every": max(500, scale.steps // 10)}
    if pe == "ape_learned":
        out.update(offset_span=n_positions, offset_range=n_positions // 2)
    return out


# ------------------------------------------------------------------------------------------
# selection and seeds
# ------------------------------------------------------------------------------------------

@dataclass
class Selected:
    """The outcome of :func:`select_config`: the chosen configuration (None: none fits and
    the fallback is used), why, and whether every seed counts (the fallback's threshold 0)."""

    config: SweepConfig | None
    reason: str
    fallback: bool
    fitting_configs: list = field(default_factory=list)


def _em(bins: list | None, i: int) -> float | None:
    if not bins or len(bins) <= i:
        return None
    return bins[i].get("em")


def select_config(rows: Sequence[tuple[SweepConfig, list | None]],
                  fit_em: float = 1.0, fallback_model: bool = True) -> Selected:
    """Their selection: among the configurations whose in-distribution exact match (bin 0)
    is >= ``fit_em`` (100%), the best exact match on bin 1 (51-100); ties to the earliest in
    ``rows`` (their sweep order). None fits: :attr:`Selected.fallback` True, and with
    ``fallback_model`` False (the formal languages, which have no fallback model) the
    configuration with the best bin 0, then the best bin 1, ties to sweep order.

    Args:
        rows: ``(config, bins.json rows or None)`` in sweep order (None: the run did not
            finish; it cannot be selected).
    """
    fitting = [(i, c, b) for i, (c, b) in enumerate(rows)
               if _em(b, 0) is not None and _em(b, 0) >= fit_em]
    if not fitting:
        ran = [(i, c, b) for i, (c, b) in enumerate(rows) if _em(b, 0) is not None]
        if not fallback_model and ran:
            def key(t):
                return (_em(t[2], 0), _em(t[2], 1) if _em(t[2], 1) is not None else -1.0,
                        -t[0])
            best = max(ran, key=key)
            return Selected(best[1], f"none of {len(rows)} configurations reached "
                                     f"{fit_em:.0%} in distribution: the best bin-0 exact "
                                     f"match {_em(best[2], 0)}, every seed counts", True)
        return Selected(None, f"none of {len(rows)} configurations reached {fit_em:.0%} in "
                              f"distribution: their fallback model, every seed counts", True)
    best = max(fitting, key=lambda t: (_em(t[2], 1) if _em(t[2], 1) is not None else -1.0,
                                       -t[0]))
    return Selected(best[1], f"best bin-1 exact match {_em(best[2], 1)} among "
                             f"{len(fitting)} of {len(rows)} configurations at {fit_em:.0%} "
                             f"in distribution", False, [c.tag for _, c, _ in fitting])


def fitting_seeds(per_seed: Sequence[tuple[int, list | None]], need: int,
                  threshold: float = 1.0) -> list[int]:
    """The first ``need`` seeds (in seed order) whose in-distribution exact match is >=
    ``threshold`` (their ``run_multiple_seeds.py``; the fallback's threshold is 0)."""
    out = [s for s, b in sorted(per_seed) if _em(b, 0) is not None and _em(b, 0) >= threshold]
    return out[:need]


def bin_summary(per_seed: dict, seeds: Sequence[int], bins: Sequence,
                task: str | None = None) -> list[dict]:
    """Per bin, over ``seeds``: mean, min, max and standard deviation of the exact match
    (``per_seed``: seed -> bins.json rows). A bin is shown from the shortest length drawn in
    it (:func:`their_range_min` of ``task``: 0-50 for parity; None: from 1)."""
    out = []
    for i, (lo, hi) in enumerate(bins):
        vals = [_em(per_seed[s], i) for s in seeds]
        vals = [v for v in vals if v is not None]
        out.append({"bin": [their_range_min(task or "", lo), hi],
                    "split": "id" if i == 0 else "ood",
                    "mean": float(np.mean(vals)) if vals else None,
                    "min": min(vals) if vals else None, "max": max(vals) if vals else None,
                    "std": float(np.std(vals, ddof=1)) if len(vals) > 1 else None,
                    "seeds": len(vals), "per_seed": vals})
    return out


def agreement(task: str, pe: str, per_seed: dict, seeds: Sequence[int],
              theirs: Sequence[float] | None, bins: Sequence) -> list[dict]:
    """Per out-of-distribution bin, whether our seeds agree with their number by the claims
    rule (:func:`analysis.evidence.statistics.task_outcome`): our outcome ``generalizes`` /
    ``fails`` / ``inconclusive`` against the threshold ``max(0.5, chance + 0.1)``
    (:func:`~analysis.evidence.statistics.generalization_threshold`, chance at the bin's
    lengths), theirs the side of the threshold their mean lies on; ``agrees`` /
    ``disagrees`` when ours is decided, else ``inconclusive`` (with fewer than five fitting
    seeds the rule cannot decide); checked before these, ``their model did not fit (ID x)``
    where their in-distribution mean ``theirs[0]`` is below :data:`FIT_EM` (their fallback or
    their plotted formal-language run did not learn the training lengths: its bins are no
    evidence about length generalization); ``no test (chance)`` where the threshold exceeds 1
    (a guess from the answer distribution is already right, as for a language with one string
    per length)."""
    out = []
    for i, (lo, hi) in enumerate(bins):
        if i == 0:
            continue
        try:
            # ten lengths spread over the bin: chance only sets the threshold
            step = max(1, (hi - max(1, lo)) // 10)
            chance = _stats.chance_em(task, list(range(max(1, lo), hi + 1, step)))
        except (KeyError, ValueError):
            chance = None
        thr = _stats.generalization_threshold(chance)
        if thr > 1.0:       # e.g. Tomita 1 (1*): one string per length, a guess is right
            out.append({"bin": [max(1, lo), hi], "threshold": thr, "chance": chance,
                        "ours": "inconclusive", "why": f"chance exact match {chance:.2f} at "
                        f"these lengths: no exact match can clear it by the margin",
                        "theirs": None, "their_em": None if theirs is None else theirs[i],
                        "label": "no test (chance)"})
            continue
        recs = []
        for s in seeds:
            row = per_seed[s][i]
            recs.append(SimpleNamespace(
                seed=s, id_em=_em(per_seed[s], 0), ood_em=row.get("em"),
                accuracy=[{"split": "ood", "em": row.get("em"), "n": row.get("n")}]))
        measured, why, _ = _stats.task_outcome({pe: recs}, thr) if recs else \
            ("inconclusive", "no fitting seeds", {})
        their = None if theirs is None else ("generalizes" if theirs[i] >= thr else "fails")
        if their is None:
            label = "no published number"
        elif their_fit_label(theirs):
            label = their_fit_label(theirs)
        elif measured == "inconclusive":
            label = "inconclusive"
        else:
            label = "agrees" if measured == their else "disagrees"
        out.append({"bin": [max(1, lo), hi], "threshold": thr, "chance": chance,
                    "ours": measured, "why": why, "theirs": their,
                    "their_em": None if theirs is None else theirs[i], "label": label})
    return out


# ------------------------------------------------------------------------------------------
# compute
# ------------------------------------------------------------------------------------------

def _params(cfg: SweepConfig, d_vocab: int, n_ctx: int) -> int:
    d = cfg.d_model
    return cfg.n_layers * (12 * d * d + 13 * d) + d_vocab * d + n_ctx * d


def estimate_flops(task: str, scale: Scale, d_vocab: int = 160) -> dict:
    """An upper bound on a cell's training compute (no early stop): ``6 x parameters x
    tokens`` (Kaplan et al. 2020) per run, for the sweep and for ``fitting`` seeds of the
    largest configuration, with tokens = steps x batch x the mean training sequence
    (copy and sort tasks: ~2 n + 3, the others: ~n + 4, n uniform in the training lengths)."""
    if formal_language(task) is not None and not scale.train_set:
        scale = formal_scale(task, scale.name)
    lo, hi = max(1, scale.train_lengths[0]), scale.train_lengths[1]
    n = (lo + hi) / 2
    if scale.train_set:                              # formal: $ w, n_positions 2 x ($ w #)
        seq, n_ctx = n + 1, 2 * (scale.bins[-1][1] + 2)
    else:
        seq = 2 * n + 3 if task in ("copy_unique_150", "copy_ab", "sort_150",
                                    "addition_binary") else n + 4
        n_ctx = their_n_positions(task, scale.bins[-1][1])
    tokens = scale.steps * scale.batch_size * seq
    sweep = sum(6 * _params(c, d_vocab, n_ctx) * tokens for c in scale.configs)
    biggest = max(scale.configs, key=lambda c: _params(c, d_vocab, n_ctx))
    seeds = scale.fitting * 6 * _params(biggest, d_vocab, n_ctx) * tokens
    return {"sweep_flops": float(sweep), "seed_flops_max": float(seeds),
            "total_flops_max": float(sweep + seeds), "runs": len(scale.configs) + scale.fitting}


# ------------------------------------------------------------------------------------------
# running a cell
# ------------------------------------------------------------------------------------------

def cell_path(out_dir: str | os.PathLike, task: str, pe: str, scale: Scale) -> Path:
    """The cell's result file: ``<out_dir>/<scale>/<task>--<pe>.json``."""
    return Path(out_dir) / scale.name / f"{task}--{pe}.json"


_NONE, _BIN = type(None), [int, int]
_OPT_NUM, _OPT_STR = (float, _NONE), (str, _NONE)
#: the fields of a cell file its readers use (:func:`replicate_cell` writes them), checked
#: field by field (:func:`rasp_model.files.check_json`; a missing field is null)
CELL_SCHEMA = {
    "task": str, "pe": str, "scale": str, "comparable": (bool, _NONE), "protocol": _OPT_STR,
    "status": _OPT_STR, "started": _OPT_STR, "finished": _OPT_STR, "git_commit": _OPT_STR,
    "prediction": ({"prediction": _OPT_STR, "prediction_label": _OPT_STR, "label": _OPT_STR,
                    "registered": _OPT_STR}, _NONE),
    "sweep": ([dict], _NONE), "sweep_not_run": ([str], _NONE),
    "selection": ({"config": _OPT_STR, "reason": _OPT_STR, "fallback": (bool, _NONE),
                   "fitting_configs": ([str], _NONE)}, _NONE),
    "seeds_tried": ([int], _NONE), "fitting_seeds": ([int], _NONE),
    "seeds": ({str: ([dict], _NONE)}, _NONE),
    "bins": ([{"bin": _BIN, "mean": _OPT_NUM, "min": _OPT_NUM, "max": _OPT_NUM,
               "seeds": (int, _NONE)}], _NONE),
    "theirs": ([float], _NONE), "their_bins": ([str], _NONE), "their_selected": _OPT_STR,
    "agreement": ([{"bin": _BIN, "ours": str, "label": _OPT_STR}], _NONE),
    "compute": ({"runs": int, "train_seconds": float, "steps": int, "flops": float,
                 "counted_once": (bool, _NONE)}, _NONE),
    "wall_seconds": _OPT_NUM, "generator_revision": (int, _NONE),
}

#: The revision of our generator of each of their tasks whose draws changed after cells had
#: been run (a cell file records the one it ran with, ``generator_revision``; a file without
#: it: 2 when it lists ``not_theirs``, which cells carry since revision 2, else 1), with what
#: changed at each revision. A cell of an older revision is stale (:func:`stale_reason`).
GENERATOR_REVISION = {"majority_binary": 2, "majority_interleave": 3, "parity_bits": 3}
_REVISIONS = {
    2: "iid bits, before the count of zeros (parity: of ones) was drawn uniformly and shuffled "
       "as their generators do",
    3: {"majority_interleave": "lengths uniform over the multiples of 3, before their rounded "
                               "total (3 weighs 2/48, 48 weighs 4/48 on 3..50)",
        "parity_bits": "no length 0, before their ParityDataset's 0..50 (training and the "
                       "0-50 bin)"},
}


def stale_reason(cell: dict) -> str | None:
    """Why a cell file is stale (its runs drew strings our generator no longer draws: a
    ``generator_revision`` below :data:`GENERATOR_REVISION`'s), or None. A stale cell's
    finished runs are reused by a rerun only where their settings still match the plan
    (parity's and interleave's ``train_min_len`` changed with revision 3, so theirs are not)."""
    if "error" in cell:
        return None
    have = cell.get("generator_revision") or (2 if "not_theirs" in cell else 1)
    now = GENERATOR_REVISION.get(cell.get("task"), 1)
    if have >= now:
        return None
    whys = [_REVISIONS[r] if isinstance(_REVISIONS[r], str) else _REVISIONS[r].get(cell["task"])
            for r in range(have + 1, now + 1)]
    return f"revision {have} of {now}: " + "; ".join(w for w in whys if w)


def read_cell(path: str | os.PathLike) -> dict:
    """A cell file (:func:`replicate_cell`) through the one bounded reader, checked field by
    field (:data:`CELL_SCHEMA`) and to be a cell of their experiment (a task of
    :func:`replication_tasks`, a PE of :data:`HUANG_PES`).

    Raises:
        ReplicationError: one line naming the file and the first bad field.
    """
    what = "replication cell"
    try:
        d = _files.read_json(Path(path), what, schema=CELL_SCHEMA)
    except _files.FileReadError as e:
        raise ReplicationError(str(e)) from None
    except OSError as e:           # FileNotFoundError too
        raise ReplicationError(f"{path}: cannot read {what} ({e.strerror or e})") from None
    for key, known in (("task", replication_tasks()), ("pe", HUANG_PES)):
        if d[key] not in known:
            raise ReplicationError(f"{path}: {what}: field {key} must be one of "
                                   f"{', '.join(known)}, got {d[key][:40]!r}")
    return d


def read_cells(cells_dir: str | os.PathLike) -> list[dict]:
    """Every cell file under ``cells_dir`` (``<scale>/<task>--<pe>.json``), sorted by scale,
    task and PE; damaged files are skipped with a warning line in the cell's place
    (``{"task", "pe", "scale", "error"}``)."""
    out = []
    for path in sorted(Path(cells_dir).glob("*/*--*.json")):
        try:
            out.append(read_cell(path))
        except ReplicationError as e:
            task, _, pe = path.stem.partition("--")
            out.append({"task": task, "pe": pe, "scale": path.parent.name, "error": str(e)})
    return out


def _run_dir(runs_root: Path, scale: Scale, task: str, pe: str, tag: str, seed: int) -> Path:
    return Path(runs_root) / "huang" / scale.name / task / pe / tag / f"seed{seed}"


def _bins_of(run_dir: Path) -> list | None:
    """A finished run's ``bins.json`` rows, or None (not finished or no bins)."""
    if not (run_dir / "DONE").exists() or not (run_dir / "bins.json").exists():
        return None
    try:
        rows = _runs.read_json(run_dir / "bins.json", "length bins")
    except _runs.RunDirError:
        return None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        return None
    return rows


def measured_compute(run_dirs: Sequence[Path]) -> dict:
    """What finished runs cost: ``{"runs", "train_seconds", "steps", "flops"}`` with ``flops``
    = 6 x parameters x tokens trained (Kaplan et al. 2020; tokens from ``DONE``'s throughput
    and training time). A run listed twice (the sweep's seed 0 of the selected configuration
    is also the cell's seed 0) is counted once (``counted_once``: True)."""
    out = {"runs": 0, "train_seconds": 0.0, "steps": 0, "flops": 0.0}
    for d in dict.fromkeys(Path(d).resolve() for d in run_dirs):   # each run once
        try:
            done = _runs.read_done(d)
        except _runs.RunDirError:
            continue
        sec = float(done.get("train_seconds") or 0.0)
        out["runs"] += 1
        out["train_seconds"] += sec
        out["steps"] += int(done.get("steps") or 0)
        out["flops"] += 6.0 * int(done.get("params") or 0) * \
            float(done.get("tokens_per_second") or 0.0) * sec
    out["train_seconds"] = round(out["train_seconds"], 1)
    out["counted_once"] = True
    return out


def cell_compute(cell: dict) -> dict:
    """A cell file's compute with every run counted once: ``{"runs", "train_seconds",
    "exact", "note"}``. Cell files written before issue 47 (no ``counted_once``) counted the
    selected sweep configuration's seed 0 twice (a sweep run and the cell's seed 0): their run
    count is corrected here; their training seconds include that run twice (``exact`` False,
    an upper bound) since a cell file keeps no per-run times."""
    comp = dict(cell.get("compute") or {})
    runs, sec = int(comp.get("runs") or 0), float(comp.get("train_seconds") or 0.0)
    if comp.get("counted_once") or not comp:
        return {"runs": runs, "train_seconds": sec, "exact": True, "note": ""}
    chosen = (cell.get("selection") or {}).get("config")
    twice = chosen in [r.get("config") for r in cell.get("sweep") or []] and \
        0 in (cell.get("seeds_tried") or [])
    if not twice:
        return {"runs": runs, "train_seconds": sec, "exact": True, "note": ""}
    return {"runs": runs - 1, "train_seconds": sec, "exact": False,
            "note": f"the cell file says {runs} runs: written before issue 47, it counted "
                    f"{chosen} seed 0 twice; its seconds still include that run twice"}


def replicate_cell(task: str, pe: str, scale: Scale = FULL, runs_root="runs",
                   out_dir="replication", prediction: dict | None = None,
                   grid_kwargs: dict | None = None, waves: int = 2,
                   log: Callable[[str], None] = print) -> dict:
    """Run one cell of their experiment (module docstring) and write its file
    (:func:`cell_path`) atomically; returns its contents.

    Args:
        prediction: our prediction for the cell, registered before any run of it: written to
            the cell file before training starts; a cell file that already holds one keeps the
            first (the time it was registered is kept with it).
        grid_kwargs: :func:`analysis.training.grid.run_grid` keywords (``address``,
            ``serial``, ``device``, ``num_cpus``, ``force``, ``budget_s`` (of each wave), ...),
            passed on through the experiment's train stage
            (:func:`analysis.experiment.pipeline.train`).
        waves: runs started at once (the parallel workers): the sweep stops launching
            configurations once one is 100% on the ID bin and bin 1, as theirs does; seeds are
            started ``max(waves, seeds still needed)`` at a time.

    Concurrent replications of one cell (the same runs root, task, PE and scale) are refused:
    the cell holds a lock (:class:`analysis.training.runs.RunLock` on its runs' directory)
    while it runs, and a run of it locked by another process stops the cell instead of being
    counted as a failed seed (which would train an extra seed the protocol would not choose).

    Raises:
        ReplicationError: a task or PE outside their experiment; the cell or one of its runs
            in use by another process.
        analysis.experiment.pipeline.ExperimentError: the grid cannot run (its
            :class:`~analysis.training.grid.GridError`'s message).
    """
    if task not in replication_tasks():
        raise ReplicationError(f"{task!r} is not one of Huang et al.'s tasks with released "
                               f"numbers ({', '.join(replication_tasks())})")
    if pe not in HUANG_PES:
        raise ReplicationError(f"Huang et al. trained {' and '.join(HUANG_PES)}, not {pe!r}")
    formal = formal_language(task) is not None
    if formal and not scale.train_set:
        scale = formal_scale(task, scale.name)      # their formal_lang_suite protocol
    lock = _runs.RunLock(Path(runs_root) / "huang" / scale.name / task / pe)
    try:
        lock.acquire()
    except _runs.RunDirError as e:
        if "in use by" not in str(e):
            raise ReplicationError(str(e)) from None
        raise ReplicationError(f"the cell {task} / {pe} ({scale.name}) is being replicated by "
                               f"another process ({e}); rerun when it has finished") from None
    try:
        return _replicate_locked(task, pe, scale, formal, runs_root, out_dir, prediction,
                                 grid_kwargs, waves, log)
    finally:
        lock.release()


def _new_cell(task, pe, scale, formal, old: dict, prediction: dict | None) -> dict:
    """A cell's file as it stands before any run: its protocol, what of it is not theirs, the
    prediction (the one ``old``, the file already there, holds; else ``prediction``, registered
    now)."""
    cell = {"task": task, "pe": pe, "scale": scale.name, "comparable": scale.comparable,
            "protocol": scale.describe(),
            "code_not_paper": ([] if scale.comparable else [
                f"scale {scale.name} is a CPU cut of their protocol: the notes below compare "
                "their code with ours at full scale (sizes, seeds, steps); this cell's own "
                "settings are its protocol line"])
            + list(FORMAL_NOT_THEIRS if formal else CODE_NOT_PAPER),
            "not_theirs": [] if formal else list(NOT_THEIRS),
            "status": "running", "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "git_commit": git_commit()}
    if old.get("prediction") is not None:
        cell["prediction"] = old["prediction"]
    elif prediction is not None:
        cell["prediction"] = {**prediction, "registered": cell["started"],
                              "git_commit": cell["git_commit"]}
    return cell


def _stage_options(grid_kwargs: dict | None, log) -> tuple[StageOptions, float | None]:
    """The train stage's options from :func:`replicate_cell`'s ``grid_kwargs`` (the
    :func:`analysis.training.grid.run_grid` keywords; no progress bar unless asked), and the
    budget of each wave."""
    gk = {"progress": False, **(grid_kwargs or {})}
    named = {k: gk.pop(k) for k in ("device", "progress", "address", "serial", "force")
             if k in gk}
    budget_s = gk.pop("budget_s", None)
    return StageOptions(**named, grid=gk, sink=log), budget_s


def _train_wave(task, pe, scale, root: Path, cfgs_seeds: list, fallback: bool,
                opts: StageOptions, budget_s: float | None) -> None:
    """Train one wave of a cell (``(configuration, seed)`` pairs) through the experiment's
    train stage (:func:`analysis.experiment.pipeline.train`): each run planned (its task's
    source record, its spec resolved once); a run whose settings do not resolve is the grid's
    failed run, a failed seed of the protocol, and is logged.

    Raises:
        ReplicationError: a run of the cell is in use by another process."""
    plan = Plan.joined([Plan.of(Study(
        tasks=[task], pes=[pe], seeds=[s], overrides=run_overrides(task, pe, c, scale, fallback),
        runs_root=str(_run_dir(root, scale, task, pe, c.tag, s).parent), flat=True,
        tag=c.tag)) for c, s in cfgs_seeds])
    trained = train_stage(plan, opts, budget_s, tag=f"{task} {pe}")
    for p in plan.runs:
        t = trained.get(str(p.run_dir))
        if t is None or t.status != "failed":
            continue
        if "in use by" in (t.error or ""):
            # another process trains this run: not a failed seed of this cell
            raise ReplicationError(f"{task} / {pe}: a run of the cell is in use by another "
                                   f"process ({t.error[:300]}); rerun when it has finished")
        opts.log(f"  failed: {p.run.label()}: FAILED: {t.error} -> {t.run_dir}")


def _replicate_locked(task, pe, scale, formal, runs_root, out_dir, prediction, grid_kwargs,
                      waves, log) -> dict:
    """:func:`replicate_cell` with the cell's lock held."""
    path = cell_path(out_dir, task, pe, scale)
    path.parent.mkdir(parents=True, exist_ok=True)
    cell = _new_cell(task, pe, scale, formal, read_cell(path) if path.exists() else {},
                     prediction)
    _runs.atomic_json(path, cell)                    # the prediction is on disk before any run
    opts, budget_s = _stage_options(grid_kwargs, log)
    waves, root = max(1, int(waves)), Path(runs_root)
    train = partial(_train_wave, task, pe, scale, root, opts=opts, budget_s=budget_s)

    # 1. the sweep, in waves, stopping at the first configuration perfect on bins 0 and 1
    rows: list = []
    t0 = time.time()
    configs = list(scale.configs)
    for at in range(0, len(configs), waves):
        wave = configs[at:at + waves]
        log(f"[{task} {pe}] sweep {at + 1}-{at + len(wave)}/{len(configs)}: "
            f"{', '.join(c.tag for c in wave)}")
        train([(c, 0) for c in wave], False)
        rows += [(c, _bins_of(_run_dir(root, scale, task, pe, c.tag, 0))) for c in wave]
        if scale.sweep_stops and any(_em(b, 0) == 1.0 and _em(b, 1) == 1.0 for _, b in rows):
            log(f"[{task} {pe}] a configuration is 100% on the ID bin and bin 1: the sweep "
                f"stops there, as theirs does")
            break
    sel = select_config(rows, fallback_model=scale.fallback is not None)
    cfg = sel.config if sel.config is not None else fallback_config(task, pe, scale)
    threshold = 0.0 if sel.fallback else 1.0
    log(f"[{task} {pe}] selected {cfg.tag if cfg else 'nothing'}: {sel.reason}")

    # 2. seeds of the selected configuration until `fitting` fit
    per_seed: dict = {}
    tried: list[int] = []
    while cfg is not None and len(tried) < scale.max_seeds:
        have = fitting_seeds([(s, per_seed[s]) for s in tried], scale.fitting, threshold)
        if len(have) >= scale.fitting:
            break
        n = min(max(waves, scale.fitting - len(have)), scale.max_seeds - len(tried))
        batch = list(range(len(tried), len(tried) + n))
        log(f"[{task} {pe}] seeds {batch[0]}-{batch[-1]} of {cfg.tag} "
            f"({len(have)}/{scale.fitting} fit so far)")
        train([(cfg, s) for s in batch], sel.fallback)
        for s in batch:
            per_seed[s] = _bins_of(_run_dir(root, scale, task, pe, cfg.tag, s))
            tried.append(s)
    fit = fitting_seeds([(s, per_seed[s]) for s in tried], scale.fitting, threshold)
    theirs = their_numbers(task, pe)
    dirs = [_run_dir(root, scale, task, pe, c.tag, 0) for c in configs] + \
        ([_run_dir(root, scale, task, pe, cfg.tag, s) for s in tried] if cfg else [])
    cell.update({
        "status": "done" if len(fit) >= scale.fitting else "incomplete",
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "sweep": [{"config": c.tag, **asdict(c), "bins": b,
                   "fits": _em(b, 0) is not None and _em(b, 0) >= 1.0} for c, b in rows],
        "sweep_not_run": [c.tag for c in configs[len(rows):]],
        "selection": {"config": cfg.tag if cfg else None, "reason": sel.reason,
                      "fallback": sel.fallback,
                      "fitting_configs": sel.fitting_configs},
        "seeds_tried": tried, "fitting_seeds": fit,
        "seeds": {str(s): per_seed[s] for s in tried},
        "bins": bin_summary(per_seed, fit, scale.bins, task) if fit else [],
        "generator_revision": GENERATOR_REVISION.get(task, 1),
        "theirs": theirs,
        "their_source": ("tasks/huang.py RELEASED_FORMAL (formal_lang_suite/visualise/"
                         "data_local.py)" if formal else
                         "tasks/huang.py RELEASED (lm-out-new-multi-run)"),
        "their_selected": THEIR_SELECTED[pe].get(task),
        "their_bins": their_bins(task),
        "agreement": agreement(task, pe, per_seed, fit, theirs, scale.bins) if fit else [],
        "compute": measured_compute([d for d in dirs if d.exists()]),
        "wall_seconds": round(time.time() - t0, 1),
    })
    if len(fit) < scale.fitting:
        cell["why_incomplete"] = (f"{len(fit)} of {len(tried)} seeds fit (at most "
                                  f"{scale.max_seeds:,} tried"
                                  + (", as theirs)" if scale.max_seeds >= 1_000 else
                                     f"; theirs: up to 1,000)"))
    _runs.atomic_json(path, cell)
    return cell


# ------------------------------------------------------------------------------------------
# predictions checked against replications
# ------------------------------------------------------------------------------------------

def prediction_check(cell: dict) -> dict:
    """Our prediction registered in a cell checked against the cell's runs at the protocol's
    lengths: ``{"task", "pe", "scale", "comparable", "predicted", "measured", "label",
    "reason"}``.

    ``measured`` is the claims rule's outcome (:func:`agreement`'s ``ours``) on the farthest
    bin (their 101-150: the longest lengths the protocol tests). ``label``: ``supported`` when
    a decided prediction (``generalizes`` / ``fails``) equals it, ``contradicted`` when it is
    the other decided outcome, else ``inconclusive`` (no registered prediction, a bounded
    search certificate ``no program <= k`` or ``unknown``, which decide nothing, or an
    undecided measurement). ``in_sample`` (with ``caveat``, :data:`IN_SAMPLE`): true for
    every cell of their experiment; a supported label there is a fit."""
    pred = (cell.get("prediction") or {}).get("prediction")
    ag = cell.get("agreement") or []
    measured = ag[-1]["ours"] if ag else "inconclusive"
    far = f"{ag[-1]['bin'][0]}-{ag[-1]['bin'][1]}" if ag else "–"
    if pred not in ("generalizes", "fails"):
        label, reason = "inconclusive", f"no decided prediction ({pred or 'none registered'})"
    elif measured not in ("generalizes", "fails"):
        label, reason = "inconclusive", f"measured outcome at {far} undecided"
    else:
        label = "supported" if pred == measured else "contradicted"
        reason = f"predicted {pred}, measured {measured} at lengths {far}"
    return {"task": cell.get("task"), "pe": cell.get("pe"), "scale": cell.get("scale"),
            "comparable": cell.get("comparable", False), "predicted": pred,
            "measured": measured, "label": label, "reason": reason,
            "in_sample": cell.get("task") in replication_tasks(), "caveat": IN_SAMPLE,
            "registered": (cell.get("prediction") or {}).get("registered")}


def prediction_checks(cells_dir: str | os.PathLike, task: str | None = None) -> list[dict]:
    """:func:`prediction_check` of every finished cell under ``cells_dir`` (of ``task`` only
    when given); cells at their scale first."""
    return prediction_checks_of(read_cells(cells_dir), task)


def prediction_checks_of(cells: Sequence[dict], task: str | None = None) -> list[dict]:
    """:func:`prediction_checks` of cell contents already read (:func:`read_cells`)."""
    out = [prediction_check(c) for c in cells
           if "error" not in c and c.get("status") == "done"
           and (task is None or c.get("task") == task)]
    return sorted(out, key=lambda r: (r["scale"] != "full", r["task"], r["pe"]))


def cell_rows(task: str, cells_dir: str | os.PathLike | None = None) -> list[dict]:
    """The finished cells of Huang et al.'s experiment for ``task`` (``rasp replicate huang``;
    ``cells_dir`` None: ``docs/replication`` of this checkout), one row per cell: our mean
    exact match per bin, theirs, the selected configurations and our registered prediction
    checked against the runs (:func:`prediction_check`; ``rasp report`` shows them).
    Empty when there is none."""
    if task not in replication_tasks():
        return []
    root = Path(cells_dir) if cells_dir else DEFAULT_CELLS_DIR
    if not root.is_dir():
        return []
    rows = []
    for cell in read_cells(root):
        if cell.get("task") != task or cell.get("status") != "done":
            continue
        check = prediction_check(cell)
        bins = cell.get("bins") or []
        rows.append({**check, "pe_label": PE_LABELS.get(cell["pe"], cell["pe"]),
                     "bins": " / ".join(f"{b['bin'][0]}-{b['bin'][1]}: {b['mean']:.3f}"
                                        for b in bins if b.get("mean") is not None),
                     "theirs": " / ".join(f"{x:.4f}" for x in (cell.get("theirs") or [])),
                     "selected": (cell.get("selection") or {}).get("config"),
                     "their_selected": THEIR_SELECTED.get(cell["pe"], {})
                     .get(task)})
    return sorted(rows, key=lambda r: (r["scale"] != "full", r["pe"]))
