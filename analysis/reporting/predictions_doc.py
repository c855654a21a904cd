"""``docs/predictions.md`` written from runs of the predictor, never by hand.

One command (``make predictions``, or ``python -m analysis.reporting.predictions_doc``) computes every
table of the document and writes it with the command, the date, the machine and the seconds
each part took at its top:

1. per positional encoding, the predictions for Zhou et al.'s tasks (part A) and Huang et al.'s
   tasks (:func:`analysis.prediction.predict.predict` with ``pe``; the shortest-program searches of
   :mod:`analysis.prediction.search`, longer ones for the tasks named by ``--deep-tasks``, whose programs
   need the search's combination and deep aggregates);
2. the predictions checked against our own training (:func:`analysis.prediction.validate.validate`:
   trains through the grid runner, reusing finished runs under ``--runs``);
3. the RASP-L conjecture alone on the shipped programs (:func:`analysis.prediction.predict.predict_all`).

The prose around the tables explains how a row is computed; every number and every label in the
tables comes from the run. The file is written atomically (a temporary file, then a rename).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["build", "main"]

DEEP_TASKS = ("count", "mode", "copy_unique", "sort_unique", "boolean_and", "parity_scratchpad")

_HOW = """\
## How a prediction is made (`analysis.prediction.predict`, `analysis.prediction.theories`)

Nothing depends on the task's name or on a stored outcome: the prediction is computed from
programs — the shipped one (`tasks/programs/`, when there is one), one you give
(`predict(task, program=...)`, `rasp score --program FILE`), and the ones the search finds
(`analysis.prediction.search`, `rasp search`).

* **Which theory.** One table (`analysis.prediction.theories`): NoPE -> C-RASP[] (Huang et al.
  2025); a learned APE trained with random position offsets -> RASP-L (Zhou et al. 2023) and
  C-RASP[periodic, local] (Huang et al. 2025); every other PE, and a learned APE trained without
  offsets -> "no theory" (no paper predicts for it; nothing is borrowed).
* **Verdicts from evidence.** `generalizes` needs a program in the theory's fragment (the RASP-L
  check, or the C-RASP check of the variant) verified at every length 1..N; `fails` needs
  evidence of absence: a search certificate ("no program of expression size <= s in this
  grammar") or a cited impossibility result; otherwise `unknown` (a refused or timed-out search
  is `unknown` with its reason). Existence decides, not size: the program's *expression size*
  (operations counted at every use; `tokens`/`indices` count 0) is reported as the strength of
  the evidence and never flips a verdict, so a padded or obfuscated program gives the same
  verdict (`tests/test_prediction_theories.py`, every task with a program).
* **What "verified" means.** At every length 1..N: K random examples, plus, for a formal
  language, every string when a length has at most 4,096, and otherwise every DFA transition
  taken towards acceptance and towards rejection and every member's symbols reordered (sorted,
  rotated: what a program of counts cannot tell apart) — `tasks.huang.LanguageTask.
  verification_prompts`. Sampling alone had let a Dyck-1 program that ignores the depth bound
  12 through (`a^13 b^13` is never sampled); `tests/test_language_verification.py`.
* **A certificate is bounded evidence.** "no program of size <= s" rules out small programs in
  the search grammar only; the searches are limited in wall time (the seconds above), so `s` is
  what the search reached on this machine. A `fails` row names its `s`.
* **Two theories for a learned APE** (each a sufficient condition): `generalizes` when one has
  a verified program — a bounded certificate of the other ("no program of size <= s") rules out
  only its small programs, not generalization, and the row says so; `disagree` only against a
  cited impossibility result.
"""

_HUANG_NOTE = """\
"paper" gives Huang et al.'s released mean exact match at lengths 101-150 (learned APE with
random offsets, or NoPE; `tasks/huang.py` `RELEASED`), for comparison only. The formal
languages are membership tasks here, not the paper's next-character-set format, so no paper
number is attached to them.
"""

_VALIDATION_RULE = """\
The measured outcome and the label are the report's rule (`analysis.evidence.claims.prediction_claim`
with the tests of `analysis/evidence/statistics.py`, per task and PE): a PE generalizes when it
fits its training lengths on every seed and an exact sign test over >= 5 seeds and the bootstrap
95% interval put its OOD exact match above max(0.5, chance + 0.1), fails when they put it below,
otherwise inconclusive. A prediction is supported when it names the measured outcome,
contradicted when it names the other one; `unknown` and `no theory` are never decided. The "ID
EM per seed" column shows whether the models fit their training lengths.
"""

_DIFFER = """\
## Where these predictions can differ from the papers, and why

Properties of the method, to read the tables with:

* **C-RASP programs lie beyond a RASP-L-shaped search.** Huang et al.'s programs are short in
  C-RASP's own terms (majority: two counts and a comparison) but size 10 and more as RASP-L
  expressions; where our search certifies only small sizes, the C-RASP rows say `fails` with
  that small bound or `unknown`, while Huang et al. report a program. Such a row tests the
  search's reach, not their theory.
* **Token values outside int8** (sort_150 and copy_unique_150 use values up to 149) break
  RASP-L's rule 2: the search refuses them and the verdict is `unknown` with that reason.
* **Formal languages** come in two formats: membership (`tomita3`: BOS w SEP -> yes/no, ours)
  and Huang et al.'s next-character sets (`tomita3_nextchar`: the set of allowed next symbols
  at every position of a positive string, as their generators write it). Only the second is
  compared with their numbers. A next-set program is searched on one next-token example per
  string position and verified per position on positive strings (every string when there are
  at most 4,096 of a length, else every DFA transition completed to a member and counting
  adversaries), so a verdict is about their function. Their bins 1 and 2 are the languages'
  own out-of-distribution lengths (e.g. 101-150 for Tomita), not 51-100 / 101-150.
"""


def huang_outcome_em(paper: dict | None, pe: str | None) -> tuple[float, float] | None:
    """Huang et al.'s released exact match of a cell in their two out-of-distribution bins:
    lengths 51-100 and 101-150 for the algorithmic tasks (``paper["huang_em"]``,
    ``tasks/huang.py`` ``RELEASED``), bins 1 and 2 of their plotted data for the formal
    languages' next-character-set tasks (``paper["huang_bins"]``, percent, ``RELEASED_FORMAL``;
    the bins' lengths are in the task's paper field). None: no released number."""
    key = {"nope": "nope", "ape_learned": "ape"}.get(pe or "")
    if not key or not paper:
        return None
    em = (paper.get("huang_em") or {}).get(key)
    if em:
        return em["51-100"], em["101-150"]
    bins = (paper.get("huang_bins") or {}).get(key)
    if bins:
        return bins[1] / 100.0, bins[2] / 100.0
    return None


def huang_comparison(preds) -> str:
    """Our verdicts next to Huang et al.'s released outcomes (comparison only; the predictor
    never reads them): a cell generalizes in their runs when the mean exact match is >= 0.85 in
    their first out-of-distribution bin and >= 0.75 in the second (:func:`huang_outcome_em`).
    Agreement is counted separately for decided verdicts and for ``unknown``."""
    rows = ["| task | PE | Huang et al. EM, OOD bin 1 / bin 2 | their outcome | our verdict | "
            "agrees |", "| --- | --- | --- | --- | --- | --- |"]
    n = {"agree": 0, "disagree": 0, "unknown": 0}
    for p in preds:
        got = huang_outcome_em(p.paper, p.pe)
        if got is None:
            continue
        em = {"51-100": got[0], "101-150": got[1]}
        theirs = ("generalizes" if em["51-100"] >= 0.85 and em["101-150"] >= 0.75
                  else "fails")
        if p.prediction in ("generalizes", "fails"):
            ok = p.prediction == theirs
            n["agree" if ok else "disagree"] += 1
            mark = "yes" if ok else "**no**"
        else:
            n["unknown"] += 1
            mark = f"— ({p.prediction})"
        rows.append(f"| {p.task} | {p.pe} | {em['51-100']:.2f} / {em['101-150']:.2f} | "
                    f"{theirs} | {p.prediction} | {mark} |")
    total = sum(n.values())
    rows += ["", f"Of {total} cells with released numbers: {n['agree']} decided and agreeing, "
                 f"{n['disagree']} decided and disagreeing, {n['unknown']} not decided "
                 "(unknown / no theory / disagree; counted as disagreement against the "
                 "issue's target)."]
    return "\n".join(rows)


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _per_pe(names, pes, seconds_of, n, k):
    from analysis.prediction.predict import clear_search_caches, predict
    out = []
    for name in names:
        s = seconds_of(name)
        t0 = time.perf_counter()
        for pe in pes:
            out.append(predict(name, pe=pe, verify_max_length=n, samples=k, search_seconds=s))
        clear_search_caches()                 # memory bounded by one task's searches
        _log(f"predictions: {name} ({s:g} s per search) in {time.perf_counter() - t0:.0f} s")
    return out


def build(args: argparse.Namespace, command: str) -> str:
    """The document's Markdown for the settings ``args`` (see :func:`main`); runs every search,
    verification and (missing) training run it reports.

    Raises:
        analysis.prediction.predict.PredictError, analysis.training.trainer.TrainingError, analysis.training.grid.GridError:
            as the commands it runs (a bad task or PE, an unusable run directory).
    """
    import tasks
    from analysis.prediction.predict import markdown_pe_report, markdown_report, predict_all
    from analysis.prediction.validate import format_validation, validate
    pes = [p for p in args.pe.split(",") if p]
    deep = {t for t in args.deep_tasks.split(",") if t}
    secs = {}
    t0 = time.perf_counter()
    part_a = _per_pe(tasks.GENERALIZATION_TASKS, pes,
                     lambda t: args.deep_search if t in deep else args.search, args.max_length,
                     args.samples)
    secs["per-PE, part A"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    huang = _per_pe(tasks.HUANG_TASKS, pes, lambda t: args.search, args.max_length,
                    args.samples)
    secs["per-PE, Huang et al."] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if args.validate_tasks is None:
        from analysis.reporting.presets import VALIDATION_TASKS
        vtasks = list(VALIDATION_TASKS)
    else:
        vtasks = [t for t in args.validate_tasks.split(",") if t]
    # the main job's per-PE presets (the learned APE with random offsets, its theories'
    # protocol), so that these are the runs of docs/results.md, never other runs of one name
    from analysis.reporting.presets import REPORT_PRESETS
    pe_presets = dict(REPORT_PRESETS["demo"].get("pe_train_presets") or {}) \
        if args.validate_preset == REPORT_PRESETS["demo"]["train_preset"] else {}
    val = validate(vtasks, pes, list(range(args.validate_seeds)), preset=args.validate_preset,
                   runs_root=args.runs, search_seconds=args.validate_search, progress=False,
                   log=_log, pe_presets=pe_presets)
    secs["validate-predictor"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    alone = predict_all(None, verify_max_length=100, samples=5)
    secs["RASP-L alone"] = time.perf_counter() - t0
    took = ", ".join(f"{k} {v:.0f} s" for k, v in secs.items())
    lines = [
        "# Predictions: which tasks length-generalize, per positional encoding?", "",
        "Generated by `make predictions`; do not edit by hand. Command:", "", "```sh",
        command, "```", "",
        f"Written {_dt.datetime.now().strftime('%Y-%m-%d %H:%M')} on {os.cpu_count()} cores "
        f"({platform.machine()}), Python {platform.python_version()}; "
        f"load average at the end {os.getloadavg()[0]:.1f}. Seconds per part: {took}. Searches: "
        f"{args.search:g} s per search, {args.deep_search:g} s for "
        f"{', '.join(sorted(deep)) or 'none'}; verification at every length 1..{args.max_length}, "
        f"{args.samples} examples per length.", "",
        "The same rows as JSON: `rasp score [TASK...] --pe nope --pe ape_learned --search S "
        "--json` (each row's `prediction`, `theory` and `verdict_evidence`).", "",
        _HOW,
        "## Predictions per PE", "",
        "### Zhou et al.'s tasks (part A)", "",
        markdown_pe_report(part_a), "",
        "### Huang et al.'s tasks", "",
        markdown_pe_report(huang), "",
        _HUANG_NOTE,
        "### Against Huang et al.'s released outcomes", "",
        huang_comparison(huang), "",
        "## Predictions checked against our own training", "",
        f"`rasp validate-predictor {' '.join(vtasks)} {' '.join('--pe ' + p for p in pes)} "
        f"--seeds 0-{args.validate_seeds - 1} --preset {args.validate_preset} "
        + "".join(f"--pe-preset {pe}={p} " for pe, p in pe_presets.items() if pe in pes)
        + f"--search "
        f"{args.validate_search:g} --runs {args.runs}` (runs of `rasp train --grid`'s runner, "
        "reused when finished).", "",
        _VALIDATION_RULE,
        format_validation(val), "",
        "## RASP-L alone (Zhou et al.'s conjecture, shipped programs)", "",
        "`python -m analysis.prediction.predict --markdown` (no PE, no search; verification at every length "
        "1..100, 5 examples per length):", "",
        markdown_report(alone), "",
        _DIFFER,
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    """``python -m analysis.reporting.predictions_doc [-o docs/predictions.md] [--search S]
    [--deep-search S] [--deep-tasks a,b] [--pe nope,ape_learned] [-N 40] [-K 3]
    [--validate-tasks a,b] [--validate-seeds N] [--validate-preset P] [--validate-search S]
    [--runs DIR]``. Exit 0 written; 2 bad input (one line on stderr)."""
    ap = argparse.ArgumentParser(
        prog="python -m analysis.reporting.predictions_doc",
        description="Regenerate docs/predictions.md from runs of the predictor: per-PE "
                    "predictions with program searches, the check against our own training, "
                    "and the RASP-L conjecture alone. Takes about an hour on 2 cores with the "
                    "defaults (the searches are limited in wall time).")
    ap.add_argument("-o", "--out", default="docs/predictions.md")
    ap.add_argument("--search", type=float, default=20.0,
                    help="seconds per program search (default 20)")
    ap.add_argument("--deep-search", type=float, default=90.0,
                    help="seconds per search for --deep-tasks (default 90)")
    ap.add_argument("--deep-tasks", default=",".join(DEEP_TASKS),
                    help="part-A tasks searched for --deep-search seconds (comma list)")
    ap.add_argument("--pe", default="nope,ape_learned", help="comma-separated PEs")
    ap.add_argument("-N", "--max-length", type=int, default=40,
                    help="verify programs at every length up to N (default 40)")
    ap.add_argument("-K", "--samples", type=int, default=3, help="examples per length (3)")
    ap.add_argument("--validate-tasks", default=None,
                    help="tasks checked against our own training (default: the report's six, "
                         "as rasp validate-predictor)")
    ap.add_argument("--validate-seeds", type=int, default=5,
                    help="training seeds (5: the fewest with which a label can be decided)")
    ap.add_argument("--validate-preset", default="demo",
                    help="training preset (default demo: the report's 3,000 steps; quick: "
                         "600)")
    ap.add_argument("--validate-search", type=float, default=5.0,
                    help="seconds per search of the validation's predictions (5)")
    ap.add_argument("--runs", default="runs", help="run directories of the grid (runs/)")
    args = ap.parse_args(argv)
    from analysis.training.grid import GridError
    from analysis.prediction.predict import PredictError
    from analysis.training.trainer import RunDirError, TrainingError
    if min(args.search, args.deep_search, args.validate_search) < 0 or args.max_length < 1 \
            or args.samples < 1 or args.validate_seeds < 1:
        print("predictions_doc: seconds must be >= 0, -N, -K and --validate-seeds >= 1",
              file=sys.stderr)
        return 2
    command = "python -m analysis.reporting.predictions_doc " + " ".join(
        a for a in (argv if argv is not None else sys.argv[1:]))
    try:
        text = build(args, command.strip())
    except (PredictError, TrainingError, RunDirError, GridError) as e:
        print(f"predictions_doc: {e}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=out.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text.rstrip() + "\n")
    os.replace(tmp, out)
    _log(f"wrote {out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
