"""Hyperparameter sweeps selected as Huang et al. (2025) do, run on the grid runner.

A sweep file is plain TOML (stdlib ``tomllib``) in which every key is a training setting
(:mod:`analysis.training.configs`: model or training key); a list is the values to sweep, a scalar is
fixed for every configuration (a list-valued setting such as ``betas`` is fixed with a one-element
list of lists, ``betas = [[0.9, 0.98]]``)::

    # Huang et al.'s sweep, scaled down
    n_layers = [1, 2, 4]
    n_heads = [1, 2, 4]
    d_model = [16, 64]
    lr = [1e-3, 1e-4]
    steps = 600

The configurations are the Cartesian product of the swept values. Every configuration is trained
for every seed and PE (``analysis.training.grid``), and for each PE the configurations are **selected**
with the protocol of Huang et al. 2025 (arXiv 2410.02140, §5 / App.; ``/work/shared/spec``
predictor.md §3): they trained on lengths 0–50, selected among the configurations that fit the
training lengths (100% in distribution) the one with the best accuracy on the validation range
51–100, and reported its accuracy on 101–150. Ours, scaled: training lengths 1..L, evaluation up
to 2L; **validation** = the OOD lengths up to 1.5L, **test** = the OOD lengths above 1.5L. A
seed *fits* when its mean ID exact match is at least ``fit`` (default 1.0, the paper's 100%);
a configuration fits when one of its seeds fits, and its scores are means over its fitting seeds.

Selection inflates the best (among the configurations that fit unique-token copy, Huang et al.
saw 0% to 99% at 101–150, median 6%), so both are reported: the selected configuration's test
exact match, and the median, minimum and maximum test exact match across all fitting
configurations.
"""

from __future__ import annotations

import itertools
import math
import re
import statistics
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from analysis.training import configs
from rasp_model import files
from rasp.errors import RASPError

__all__ = ["SweepError", "load_sweep", "expand", "config_tag", "RunScores", "run_scores",
           "ConfigOutcome", "Selection", "select", "RESERVED_KEYS", "MAX_CONFIGURATIONS",
           "MAX_SWEEP_FILE_BYTES"]

#: Most configurations a sweep file may expand to (the product of its lists' lengths; each is
#: trained for every seed and PE). Checked before expanding: ten lines of ``[1, ..., 8]`` are
#: 10^9 configurations.
MAX_CONFIGURATIONS = 10_000

#: Largest sweep file read, in bytes (a sweep file is a few lines; ``/dev/zero`` never ends).
MAX_SWEEP_FILE_BYTES = 1 << 20

#: Settings a sweep may not set: the run sets them (``--pe``, the task's vocabulary, lengths).
RESERVED_KEYS = {"pe", "d_vocab", "n_ctx"}


class SweepError(RASPError, ValueError):
    """A bad sweep file: TOML syntax, an unknown or reserved key, an empty list. The message
    starts ``FILE:LINE:``."""


def _line_of(text: str, key: str) -> int:
    pat = re.compile(r'^\s*(?:"|\')?' + re.escape(key) + r'(?:"|\')?\s*[=.]')
    for n, line in enumerate(text.splitlines(), 1):
        if pat.match(line):
            return n
    return 1


def load_sweep(path: str | Path) -> tuple[dict[str, list], dict]:
    """Read a sweep file: ``(swept, fixed)`` — setting -> values to sweep (in file order), and
    setting -> fixed value.

    Raises:
        SweepError: unreadable file, not a regular file or larger than
            :data:`MAX_SWEEP_FILE_BYTES`, TOML syntax error (with its line), nested too
            deeply, a table, an unknown or reserved key (its line), an empty list of values,
            more than :data:`MAX_CONFIGURATIONS` configurations.
    """
    path = Path(path)
    try:                       # the one reader: a regular file only (a named pipe never blocks)
        text = files.read_text(path, "the sweep file", MAX_SWEEP_FILE_BYTES)
    except files.FileReadError as e:
        raise SweepError(f"{e}; a sweep file is a few lines") from None
    except OSError as e:
        raise SweepError(f"{path}: cannot read the sweep file ({e.strerror or e})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SweepError(f"{path}: {e}") from None
    except RecursionError:
        raise SweepError(f"{path}: nested too deeply (a sweep file is flat: KEY = value or "
                         f"KEY = [values])") from None
    known = (configs.MODEL_KEYS | configs.TRAIN_KEYS) - RESERVED_KEYS
    swept, fixed = {}, {}
    for key, value in data.items():
        where = f"{path}:{_line_of(text, key)}"
        if isinstance(value, dict):
            raise SweepError(f"{where}: [{key}] is a table; every key of a sweep file is a "
                             f"training setting (no tables)")
        if key in RESERVED_KEYS:
            raise SweepError(f"{where}: {key!r} is set by the run (--pe, the task), not by a "
                             f"sweep")
        if key not in known:
            raise SweepError(f"{where}: unknown training setting {key!r}; known: "
                             f"{', '.join(sorted(known))}")
        if isinstance(value, list):
            if not value:
                raise SweepError(f"{where}: {key} = [] sweeps no value")
            swept[key] = value
        else:
            fixed[key] = value
    n = math.prod(len(v) for v in swept.values())
    if n > MAX_CONFIGURATIONS:
        raise SweepError(f"{path}: {n:,} configurations (the product of the swept lists' "
                         f"lengths), more than the limit of {MAX_CONFIGURATIONS:,} "
                         f"(analysis.training.sweep.MAX_CONFIGURATIONS)")
    return swept, fixed


def expand(swept: dict[str, list], fixed: dict) -> list[dict]:
    """The configurations: every combination of the swept values, plus the fixed settings,
    as ``config_overrides`` dicts (the first key varies slowest)."""
    keys = list(swept)
    return [{**fixed, **dict(zip(keys, combo))}
            for combo in itertools.product(*(swept[k] for k in keys))]


def config_tag(overrides: dict, swept_keys) -> str:
    """A short name of a configuration: its swept settings, ``key=value`` joined by commas."""
    return ",".join(f"{k}={overrides[k]}" for k in swept_keys) or "base"


@dataclass
class RunScores:
    """One run's exact match: mean over the ID lengths, the validation and the test lengths
    (None when the run evaluated no such length or every row is null)."""

    id_em: float | None
    val_em: float | None
    test_em: float | None
    train_max: int


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def run_scores(accuracy: list[dict]) -> RunScores:
    """Split a run's ``accuracy.json`` rows ``[{length, split, em, ...}]``: ID rows, OOD rows
    up to 1.5x the longest training length (validation) and above it (test)."""
    ids = [r for r in accuracy if r["split"] == "id"]
    train_max = max((int(r["length"]) for r in ids), default=0)
    cut = 1.5 * train_max
    ood = [r for r in accuracy if r["split"] == "ood"]
    return RunScores(_mean(r["em"] for r in ids),
                     _mean(r["em"] for r in ood if r["length"] <= cut),
                     _mean(r["em"] for r in ood if r["length"] > cut), train_max)


@dataclass
class ConfigOutcome:
    """A configuration's outcome over its seeds. ``fitting`` are the seeds whose ID EM reached
    the fit threshold; the means are over those seeds (None when none fits)."""

    tag: str
    overrides: dict
    seeds: list[int]
    fitting: list[int]
    id_em: float | None
    val_em: float | None
    test_em: float | None
    test_min: float | None = None
    test_max: float | None = None
    missing: int = 0                      # seeds without a finished run

    @property
    def fits(self) -> bool:
        return bool(self.fitting)


@dataclass
class Selection:
    """Huang et al.'s selection for one (task, PE): the best fitting configuration by the
    validation range, and the spread of the test exact match across fitting configurations."""

    task: str
    pe: str
    fit: float
    configs: list[ConfigOutcome]
    best: ConfigOutcome | None
    median_test: float | None
    min_test: float | None
    max_test: float | None
    n_fitting: int
    validation: str = "OOD lengths <= 1.5 L"
    test: str = "OOD lengths > 1.5 L"
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        """A few lines: the selected configuration's test EM, then median and spread."""
        def f(x):
            return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"
        head = f"{self.task} {self.pe}: {self.n_fitting}/{len(self.configs)} configuration(s) " \
               f"fit the training lengths (ID EM >= {self.fit:g})"
        if self.best is None:
            return head + "; nothing to select (train longer or lower --fit)"
        b = self.best
        return (f"{head}\n  selected (best validation EM {f(b.val_em)}): {b.tag}: test EM "
                f"{f(b.test_em)} over {len(b.fitting)}/{len(b.seeds)} fitting seed(s) "
                f"[{f(b.test_min)}, {f(b.test_max)}]\n"
                f"  across fitting configurations: median test EM {f(self.median_test)}, "
                f"range [{f(self.min_test)}, {f(self.max_test)}] (the selected value is "
                f"inflated by the selection)")


def select(task: str, pe: str, per_config: list[tuple[str, dict, dict[int, list | None]]],
           fit: float = 1.0) -> Selection:
    """Huang et al.'s selection.

    Args:
        per_config: ``(tag, overrides, {seed: accuracy rows or None})`` per configuration
            (None: the run did not finish).
        fit: ID exact match a seed needs to count as fitting (Huang et al.: 1.0).
    """
    outcomes = []
    for tag, overrides, by_seed in per_config:
        scores = {s: run_scores(a) for s, a in by_seed.items() if a is not None}
        fitting = [s for s, sc in scores.items() if sc.id_em is not None and sc.id_em >= fit]
        tests = [scores[s].test_em for s in fitting if scores[s].test_em is not None]
        outcomes.append(ConfigOutcome(
            tag, overrides, sorted(by_seed), fitting,
            _mean(scores[s].id_em for s in fitting) if fitting else
            _mean(sc.id_em for sc in scores.values()),
            _mean(scores[s].val_em for s in fitting) if fitting else None,
            _mean(tests) if fitting else None,
            min(tests) if tests else None, max(tests) if tests else None,
            missing=sum(a is None for a in by_seed.values())))
    fitting = [o for o in outcomes if o.fits and o.val_em is not None]
    best = max(fitting, key=lambda o: o.val_em) if fitting else None
    tests = [o.test_em for o in fitting if o.test_em is not None]
    notes = []
    if any(o.missing for o in outcomes):
        notes.append(f"{sum(o.missing for o in outcomes)} run(s) did not finish and are "
                     f"left out")
    return Selection(task, pe, fit, outcomes, best,
                     statistics.median(tests) if tests else None,
                     min(tests) if tests else None, max(tests) if tests else None,
                     len([o for o in outcomes if o.fits]), notes=notes)
