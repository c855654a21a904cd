"""``docs/predictions.md`` written from runs of the predictor, never by hand.

One command (``make predictions``, or ``python -m analysis.reporting.predictions_doc``) computes every
table of the document and writes it with the command, the date, the machine, the searches'
work budgets (candidates: :mod:`analysis.prediction.budget`, so every verdict is the same on
any machine) and the seconds each part took at its top:

1. per positional encoding, the predictions for Zhou et al.'s tasks (part A) and Huang et al.'s
   tasks (:func:`analysis.prediction.predict.predict` with ``pe``; the shortest-program searches of
   :mod:`analysis.prediction.search`, longer ones for the tasks named by ``--deep-tasks``, whose programs
   need the search's combination and deep aggregates);
2. the predictions checked against our own training (:func:`analysis.experiment.validate.validate`:
   trains through the grid runner, reusing finished runs under ``--runs``);
3. the predictions registered before their runs on tasks outside the catalogue (every
   ``*.json`` of ``--registered-dir``, written by ``rasp score ... --register``; read as written
   by :mod:`analysis.prediction.registered`, never recomputed), checked against our own training
   in tables of their own (:func:`analysis.experiment.validate.validate` with ``registered``);
4. the RASP-L conjecture alone on the shipped programs (:func:`analysis.prediction.predict.predict_all`).

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
from analysis.prediction.budget import (DEEP_SEARCH_BUDGET, DEFAULT_CRASP_BUDGET,
                                        DEFAULT_SEARCH_BUDGET, BudgetError, parse_budget)
from analysis.prediction.registered import (RegisteredError, read_registration,
                                            registered_predictions, registered_tasks)
from analysis.prediction.theories import CERTIFICATE, DECIDED
from analysis.experiment.validate import format_validation, validate
from analysis.reporting.presets import REPORT_PRESETS, VALIDATION_TASKS

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
* **Verdicts from evidence** (labels that say what the evidence is). `generalizes` needs a
  program in the theory's fragment (the RASP-L check, or the C-RASP check of the variant)
  verified at every length up to the longest the protocol tests (`analysis.prediction.verify.
  protocol_max_length`: 150 for Huang et al.'s algorithmic and membership tasks, the top of
  their released bins for the next-character-set languages, up to 700; twice the training
  length for our own runs); a program of C-RASP[] serves C-RASP[periodic, local] too (it is
  one). `no program <= s` is a bounded search certificate ("no program of size <= s in this
  search grammar"), shown with its bound and theory and **counted apart from decisions in every
  table**: it rules out small programs of one grammar, not generalization. `fails` needs a
  proof (a cited impossibility result, or one the tool checks). Otherwise `unknown`, with its
  reason (a refused search; `unknown (time cap)` for a search stopped by a wall-clock safety
  cap). Existence decides, not size: the program's *expression size*
  (operations counted at every use; `tokens`/`indices` count 0) is reported as the strength of
  the evidence and never flips a verdict, so a padded or obfuscated program gives the same
  verdict (`tests/test_prediction_theories.py`, every task with a program).
* **What "verified" means.** At every length 1..N: K random examples, plus, for a formal
  language, every string when a length has at most 4,096, and otherwise every DFA transition
  taken towards acceptance and towards rejection and every member's symbols reordered (sorted,
  rotated: what a program of counts cannot tell apart) — `tasks.huang.LanguageTask.
  verification_prompts`. Sampling alone had let a Dyck-1 program that ignores the depth bound
  12 through (`a^13 b^13` is never sampled); `tests/test_language_verification.py`.
* **Budgets are work, not seconds.** Each search stops after a fixed number of candidates (the
  budgets above: the RASP-L search counts candidate programs, the C-RASP search candidate
  Booleans and counts), so every row is a function of the task, the PE, the budget and the
  code version — the same on a busy machine, with one thread or two. A certificate's `s` is
  what the budget reached.
* **Two theories for a learned APE** (each a sufficient condition): `generalizes` when one has
  a verified program — a bounded certificate of the other ("no program of size <= s") rules out
  only its small programs, not generalization, and the row says so; `disagree` only against a
  cited impossibility result.
* **Decided verdicts for regular languages** (`analysis.prediction.crasp_decision`). For a task
  defined by a finite automaton (Huang et al.'s formal languages in both formats, every
  `--regex` task), a *counter* in the automaton proves that no C-RASP[] program exists at any
  size: words `u v^n w` whose output cycles with a period >= 2, while every C-RASP[] program's
  output on them is constant for large `n` (the eventual-constancy lemma, proved in the
  module). For C-RASP[periodic, local] the same holds for a counter among the words of the
  stable length `s` (`S_s = S_2s`), which exist at every multiple of any period. Such a cell is
  `fails` (decided), its witness printed and re-run on the automaton, and its fragment is not
  searched. The other side (`analysis.prediction.crasp_piecewise`): a *piecewise testable*
  task — its output a function of which words up to some length its prefix contains as
  subsequences; for membership, exactly the languages whose syntactic monoid is J-trivial
  (Simon 1975), which the decision tests first — has a C-RASP[] program, constructed as
  `S_{v a^r}(i) = #[j<=i] (Q_a(j) and S_v(j)) >= r` and proved right at every length by an
  exhaustive search over the reachable (state, subsequence set) pairs: `generalizes`
  (decided), the program printed; past the construction's budget a J-trivial language still
  reads `generalizes` with the theorem as its evidence ("program not constructed"). Any other
  task whose minimal automaton's strongly connected components each have a *potential* —
  integers `phi` on the component's states and a balanced morphism `h` on the symbols (every
  loop sums to 0) with `phi(r) - phi(p) = h(a)` on each transition, telling the states apart —
  gets a constructed C-RASP[] program too (`analysis.prediction.crasp_potential`): it follows
  the run component by component (the entry, `h` summed over the symbols since the entry, the
  first exit), right at every length by the induction in the module; partially ordered
  automata (R-trivial languages) are the case without loops, `(ab)*` has `h(a) = 1, h(b) = -1`.
  Neither side speaks for an aperiodic language whose components have no separating potential
  (`Σ*ab`, one that must read the symbol before the last): the research code
  `pentagonalize/crasp_reg` labels those "not in C-RASP", but we found no published proof of
  that direction, so the cell keeps its program, certificate or `unknown`. On that code's
  1,000 expressions every one we decide is on its side, and all 492 it labels "in" get a
  constructed program. For C-RASP[periodic, local] (the learned APE) the same construction
  runs on the automaton's product with the position mod `p` and the `c` symbols before it (its
  letters are that fragment's Booleans: `Q_a(j) and j % p == t and Q_b(j-1)`), for `(p, c)`
  from (2, 0) to (1, 3): `(aa)*`, `(aaaa)*`, `(abab)*` (mod 2, 4, 4) and Tomita 4 (two symbols
  before) get a program that way. We found no decision procedure for the fragment's "not" side
  in the literature — the regular languages of first-order logic with modular predicates are
  decidable (Barrington, Compton, Straubing & Thérien 1992: quasi-aperiodic), but that logic
  is not the fragment's — so beyond the counter test and the construction its cells keep the
  search's verdict.
  Outside check: `python -m bench.bench_crasp_decision` (`docs/benchmarks.md`).
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

**Where the theory speaks.** The theories are limits ("sufficiently long training"); a task whose
paper states the training length its outcome holds from (`tasks.base.Regime`: count 60, Zhou et
al. 2023 Fig. 1b; copy_unique 30; Huang et al.'s tasks 50) is trained on lengths up to it here
(runs `seed<k>-<preset>-L<n>`, OOD on L+1..2L). A check on runs trained below it would be
labelled "inconclusive: outside the theory's regime", never contradicted (`--protocol-lengths`).
How OOD exact match moves with the training length: `rasp curve TASK --train-lengths 10,20,40,60`.
"""

_DIFFER = """\
## Where these predictions can differ from the papers, and why

Properties of the method, to read the tables with:

* **Huang et al.'s 50 cells are in-sample.** The C-RASP search grammar and its validation batch
  were extended with those cells in view, so agreement on them measures fit, not prediction.
  Predictions that count as evidence are registered before any run on tasks outside the
  catalogue: `rasp score --task-file FILE.py` (or `--regex PATTERN`) `--register FILE.json`
  writes them with the code commit, the budgets, each task file's sha256 and the time;
  `rasp validate-predictor --registered FILE.json` checks later runs against them as written
  (refused if a task file changed) and reports them apart from the catalogue's cells, as they
  accumulate.
* **C-RASP programs lie beyond a RASP-L-shaped search.** Huang et al.'s programs are short in
  C-RASP's own terms (majority: two counts and a comparison) but size 10 and more as RASP-L
  expressions; where a search certifies only small sizes, the row says `no program <= s` (not
  a decision) or `unknown`, while Huang et al. report a program. Such a row tests the
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
    Agreement is counted for decisions only; bounded certificates (``no program <= s``) and
    ``unknown`` are counted apart."""
    rows = ["| task | PE | Huang et al. EM, OOD bin 1 / bin 2 | their outcome | our verdict | "
            "agrees |", "| --- | --- | --- | --- | --- | --- |"]
    n = {"agree": 0, "disagree": 0, "unknown": 0}
    certs = {"generalizes": 0, "fails": 0}
    for p in preds:
        got = huang_outcome_em(p.paper, p.pe)
        if got is None:
            continue
        em = {"51-100": got[0], "101-150": got[1]}
        theirs = ("generalizes" if em["51-100"] >= 0.85 and em["101-150"] >= 0.75
                  else "fails")
        if p.prediction in DECIDED:
            ok = p.prediction == theirs
            n["agree" if ok else "disagree"] += 1
            mark = "yes" if ok else "**no**"
        elif p.prediction == CERTIFICATE:
            certs[theirs] += 1
            mark = f"— (certificate; their outcome {theirs})"
        else:
            n["unknown"] += 1
            mark = f"— ({p.prediction_label})"
        rows.append(f"| {p.task} | {p.pe} | {em['51-100']:.2f} / {em['101-150']:.2f} | "
                    f"{theirs} | {p.prediction_label} | {mark} |")
    total = sum(n.values()) + sum(certs.values())
    rows += ["", f"Of {total} cells with released numbers: {n['agree']} decided and agreeing, "
                 f"{n['disagree']} decided and disagreeing; {sum(certs.values())} with only a "
                 f"bounded search certificate (`no program <= s`, not a decision: their "
                 f"outcome fails in {certs['fails']}, generalizes in {certs['generalizes']}); "
                 f"{n['unknown']} not decided (unknown / no theory / disagree). These cells are "
                 "in-sample for the search grammars (built with them in view): agreement here "
                 "is a fit, not a registered prediction."]
    return "\n".join(rows)


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _per_pe(names, pes, budget_of, crasp_budget, n, k):
    # start-up: lark loads only when this runs
    from analysis.prediction.predict import clear_search_caches, predict
    out = []
    for name in names:
        b = budget_of(name)
        t0 = time.perf_counter()
        for pe in pes:
            out.append(predict(name, pe=pe, verify_max_length=n, samples=k, search=True,
                               search_budget=b, crasp_budget=crasp_budget))
        clear_search_caches()                 # memory bounded by one task's searches
        _log(f"predictions: {name} ({b:,} candidates per RASP-L search) in "
             f"{time.perf_counter() - t0:.0f} s")
    return out


def _registered_section(args, pe_presets: dict) -> str:
    """The section of the registered predictions on tasks outside the catalogue: for each
    registration file of ``args.registered_dir`` (sorted), what it registered (time, commit,
    budgets) and its predictions checked against our runs (``args.validate_seeds`` seeds of
    ``args.validate_preset``, the same per-PE presets as the catalogue's check), counted apart.

    Raises:
        analysis.prediction.registered.RegisteredError: an unreadable file or a changed task
            file (its predictions are about the file as it was).
    """
    head = ["## Registered predictions on tasks outside the catalogue (out of sample)", "",
            "Predictions written by `rasp score --regex PATTERN ... --register FILE.json` (or "
            "`--task-file`) before any run of the task, read back as written (never "
            "recomputed; a changed task file is refused) and checked against our own training "
            "by the same rule as above: `rasp validate-predictor --registered FILE.json "
            f"--seeds 0-{args.validate_seeds - 1} --preset {args.validate_preset}"
            + "".join(f" --pe-preset {pe}={p}" for pe, p in pe_presets.items())
            + "`. Unlike Huang et al.'s 50 cells, no search grammar was built with these tasks "
            "in view. They accumulate here: add a file to "
            f"`{args.registered_dir}` and regenerate.", ""]
    files_ = sorted(Path(args.registered_dir).glob("*.json")) \
        if Path(args.registered_dir).is_dir() else []
    if not files_:
        return "\n".join(head + ["None registered yet."])
    out = list(head)
    for f in files_:
        doc = read_registration(f)
        names = [t.name for t in registered_tasks(doc)]
        preds = registered_predictions(doc)
        pes = [pe for pe in args.pe.split(",") if pe and any(k[1] == pe for k in preds)]
        b = doc.get("budgets") or {}
        srcs = "; ".join(f"`{t['name']}`: " + (f"/{t['source']['regex']}/ "
                                                f"({t['source'].get('format')})"
                                                if "regex" in t["source"] else
                                                f"{Path(t['source'].get('task_file', '?')).name}"
                                                f" (sha256 {str(t['source'].get('sha256'))[:12]}"
                                                "...)")
                         for t in doc["tasks"])
        val = validate(names, pes, list(range(args.validate_seeds)),
                       preset=args.validate_preset, runs_root=args.runs, progress=False,
                       log=_log, pe_presets={pe: p for pe, p in pe_presets.items()
                                             if pe in pes}, registered=preds)
        out += [f"**{f.name}**: registered {doc.get('registered_at')} at commit "
                f"{str(doc.get('commit'))[:10]}, budgets {b.get('raspl'):,} candidate programs "
                f"(RASP-L) / {b.get('crasp'):,} candidate Booleans and counts (C-RASP); "
                f"tasks {srcs}.", "", format_validation(val), ""]
    return "\n".join(out).rstrip("\n")


def build(args: argparse.Namespace, command: str) -> str:
    """The document's Markdown for the settings ``args`` (see :func:`main`); runs every search,
    verification and (missing) training run it reports.

    Raises:
        analysis.prediction.predict.PredictError, analysis.training.trainer.TrainingError, analysis.training.grid.GridError:
            as the commands it runs (a bad task or PE, an unusable run directory).
    """
    # start-up: lark loads only when this runs
    import tasks
    from analysis.prediction.predict import markdown_pe_report, markdown_report, predict_all
    pes = [p for p in args.pe.split(",") if p]
    deep = {t for t in args.deep_tasks.split(",") if t}
    secs = {}
    t0 = time.perf_counter()
    part_a = _per_pe(tasks.GENERALIZATION_TASKS, pes,
                     lambda t: args.deep_search_budget if t in deep else args.search_budget,
                     args.crasp_budget, args.max_length, args.samples)
    secs["per-PE, part A"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    huang = _per_pe(tasks.HUANG_TASKS, pes, lambda t: args.search_budget, args.crasp_budget,
                    args.max_length, args.samples)
    secs["per-PE, Huang et al."] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if args.validate_tasks is None:
        vtasks = list(VALIDATION_TASKS)
    else:
        vtasks = [t for t in args.validate_tasks.split(",") if t]
    # the main job's per-PE presets (the learned APE with random offsets, its theories'
    # protocol), so that these are the runs of docs/results.md, never other runs of one name
    pe_presets = dict(REPORT_PRESETS["main"].get("pe_train_presets") or {}) \
        if args.validate_preset == REPORT_PRESETS["main"]["train_preset"] else {}
    val = validate(vtasks, pes, list(range(args.validate_seeds)), preset=args.validate_preset,
                   runs_root=args.runs, search=True, search_budget=args.search_budget,
                   crasp_budget=args.crasp_budget, verify_max_length=args.max_length,
                   progress=False,
                   log=_log, pe_presets=pe_presets)
    secs["validate-predictor"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    registered = _registered_section(args, pe_presets)
    secs["registered"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    alone = predict_all(None, samples=5)
    secs["RASP-L alone"] = time.perf_counter() - t0
    took = ", ".join(f"{k} {v:.0f} s" for k, v in secs.items())
    lines = [
        "# Predictions: which tasks length-generalize, per positional encoding?", "",
        "Generated by `make predictions`; do not edit by hand. Command:", "", "```sh",
        command, "```", "",
        f"Written {_dt.datetime.now().strftime('%Y-%m-%d %H:%M')} on {os.cpu_count()} cores "
        f"({platform.machine()}), Python {platform.python_version()}; "
        f"load average at the end {os.getloadavg()[0]:.1f}. Seconds per part: {took} (the "
        f"seconds depend on the machine; the rows do not). Search budgets (work, not seconds): "
        f"{args.search_budget:,} candidate programs per RASP-L search, "
        f"{args.deep_search_budget:,} for {', '.join(sorted(deep)) or 'none'}; "
        f"{args.crasp_budget:,} candidate Booleans and counts per C-RASP search; no time "
        f"cap. Verification at every length up to "
        + (f"{args.max_length}" if args.max_length else "the longest the protocol tests "
           "(`protocol_max_length`)")
        + f", {args.samples} examples per length.", "",
        f"The same rows as JSON: `rasp score [TASK...] --pe nope --pe ape_learned "
        f"--search-budget {args.search_budget} --crasp-budget {args.crasp_budget} --json` "
        "(each row's `prediction`, `prediction_label`, `theory` and `verdict_evidence`).", "",
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
        + f"--search-budget {args.search_budget} --crasp-budget {args.crasp_budget} "
        f"--runs {args.runs}` (runs of `rasp train --grid`'s runner, "
        "reused when finished).", "",
        _VALIDATION_RULE,
        format_validation(val), "",
        registered, "",
        "## RASP-L alone (Zhou et al.'s conjecture, shipped programs)", "",
        "`python -m analysis.prediction.predict --markdown` (no PE, no search; verification at "
        "every length up to the protocol's longest, 5 examples per length):", "",
        markdown_report(alone), "",
        _DIFFER,
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    """``python -m analysis.reporting.predictions_doc [-o docs/predictions.md]
    [--search-budget N] [--deep-search-budget N] [--crasp-budget N] [--deep-tasks a,b]
    [--pe nope,ape_learned] [-N LEN] [-K 3] [--validate-tasks a,b] [--validate-seeds N]
    [--validate-preset P] [--runs DIR]``. Exit 0 written; 2 bad input (one line on stderr)."""
    ap = argparse.ArgumentParser(
        prog="python -m analysis.reporting.predictions_doc",
        description="Regenerate docs/predictions.md from runs of the predictor: per-PE "
                    "predictions with program searches, the check against our own training, "
                    "and the RASP-L conjecture alone. Takes about an hour on 2 cores with the "
                    "defaults; the searches stop on work budgets, so the rows are the same on "
                    "any machine.")
    ap.add_argument("-o", "--out", default="docs/predictions.md")
    ap.add_argument("--search-budget", default=DEFAULT_SEARCH_BUDGET,
                    help=f"candidate programs per RASP-L search (default "
                         f"{DEFAULT_SEARCH_BUDGET:,}; 20M, 500k also read)")
    ap.add_argument("--deep-search-budget", default=DEEP_SEARCH_BUDGET,
                    help=f"candidate programs per RASP-L search for --deep-tasks (default "
                         f"{DEEP_SEARCH_BUDGET:,})")
    ap.add_argument("--crasp-budget", default=DEFAULT_CRASP_BUDGET,
                    help=f"candidate Booleans and counts per C-RASP search (default "
                         f"{DEFAULT_CRASP_BUDGET:,})")
    for gone in ("--search", "--deep-search", "--validate-search"):
        ap.add_argument(gone, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--deep-tasks", default=",".join(DEEP_TASKS),
                    help="part-A tasks searched with --deep-search-budget (comma list)")
    ap.add_argument("--pe", default="nope,ape_learned", help="comma-separated PEs")
    ap.add_argument("-N", "--max-length", type=int, default=None,
                    help="verify programs at every length up to N (default: the longest "
                         "length the protocol tests, per task; less cannot give "
                         "'generalizes')")
    ap.add_argument("-K", "--samples", type=int, default=3, help="examples per length (3)")
    ap.add_argument("--validate-tasks", default=None,
                    help="tasks checked against our own training (default: the report's six, "
                         "as rasp validate-predictor)")
    ap.add_argument("--validate-seeds", type=int, default=5,
                    help="training seeds (5: the fewest with which a label can be decided)")
    ap.add_argument("--validate-preset", default="demo",
                    help="training preset (default demo: the report's 3,000 steps; quick: "
                         "600)")
    ap.add_argument("--runs", default="runs", help="run directories of the grid (runs/)")
    ap.add_argument("--registered-dir", default="docs/registered",
                    help="registration files (`rasp score ... --register`) of tasks outside "
                         "the catalogue, checked against our own training (default "
                         "docs/registered)")
    args = ap.parse_args(argv)
    # start-up: lark and torch load only when this runs
    from analysis.experiment.pipeline import GridError
    from analysis.prediction.predict import PredictError
    from analysis.training.trainer import RunDirError, TrainingError
    old = [f"--{k.replace('_', '-')}" for k in ("search", "deep_search", "validate_search")
           if getattr(args, k) is not None]
    if old:
        print(f"predictions_doc: {', '.join(old)} took seconds; searches now stop on work "
              "budgets (a verdict must not depend on the machine's load): use "
              "--search-budget N, --deep-search-budget N and --crasp-budget N (candidates)",
              file=sys.stderr)
        return 2
    try:
        for k in ("search_budget", "deep_search_budget", "crasp_budget"):
            setattr(args, k, parse_budget(getattr(args, k), "--" + k.replace("_", "-")))
    except BudgetError as e:
        print(f"predictions_doc: {e}", file=sys.stderr)
        return 2
    if (args.max_length is not None and args.max_length < 1) or args.samples < 1 \
            or args.validate_seeds < 1:
        print("predictions_doc: -N, -K and --validate-seeds must be >= 1", file=sys.stderr)
        return 2
    command = "python -m analysis.reporting.predictions_doc " + " ".join(
        a for a in (argv if argv is not None else sys.argv[1:]))
    try:
        text = build(args, command.strip())
    except (PredictError, TrainingError, RunDirError, GridError, RegisteredError) as e:
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
