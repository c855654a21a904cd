"""`rasp score [TASK...] [--task-file FILE.py] [--regex PATTERN] [--pe PE|all] [--json]
[--search] [--search-budget N] [--crasp-budget N] [--search-time-cap S] [--max-length N]
[--samples K] [--program FILE [--name NAME]] [--register FILE.json [--runs DIR]]`: the
length-generalization predictor
(``analysis.prediction.predict``) for each task (or one program of your own on one task's
format), per positional encoding.

A prediction is a verdict from evidence (``analysis.prediction.theories``): ``generalizes``
with a verified program of the theory's fragment (RASP-L for Zhou et al. 2023; C-RASP[] for
NoPE and C-RASP[periodic, local] for a learned APE trained with random offsets, Huang et al.
2025) checked at every length up to the longest the protocol tests; ``no program <= s`` with a
bounded search certificate (not a decision: counted apart); ``fails`` with a cited
impossibility result; ``unknown`` otherwise (with its reason; ``unknown (time cap)`` for a
search stopped by ``--search-time-cap``); ``no theory`` for a PE no paper predicts for.
Without ``--search`` only the shipped (or given) program is evidence, so a task without a valid
verified program is ``unknown``: ``rasp score --search`` runs the shortest-program searches
with their default work budgets (``--search-budget N`` candidate programs for RASP-L,
``--crasp-budget N`` candidate Booleans and counts for C-RASP; ``analysis.prediction.budget``),
so a row is the same on any machine at any load.

Your own task (``tasks/custom.py``): ``--task-file FILE.py`` (a Python file defining ``NAME``,
``VOCAB``, ``KIND``, ``inputs(rng, n)``, ``target(tokens)``; loading it runs its code) or
``--regex PATTERN`` (a language; ``--format membership|next_set``). Such a task has no shipped
program, so the searches run by default with the default work budgets (``--no-search``: only
``--program FILE --name NAME``, your own program, is evidence; ``--program`` adds it to the
searches' evidence otherwise).

``--register FILE.json`` writes the predictions with the code commit (only from a clean tree;
else "uncommitted changes" and the sha256 of ``git diff HEAD``), the budgets, each task's
source (a task file's sha256, a regular expression) and the time
(``analysis.prediction.registered``), and prints one sha256 over the whole file to publish or
commit; it refuses a (task, PE) whose runs already exist under ``--runs DIR`` (default runs/).
``rasp validate-predictor --registered FILE.json`` later checks runs against them as written.

A prediction names the training protocol it assumes: a learned APE's theories (RASP-L,
C-RASP[periodic, local]) assume random position offsets -- a ``conditions:`` line in the
table, the ``theory`` sentence and ``assumes`` in the JSON and the registration.

``--json`` prints one object per task and PE (``Prediction.to_dict``): ``prediction``,
``theory``, ``verdict_evidence`` (per theory: ``kind`` program / certificate / impossibility /
none, ``detail``, ``size``, ``certified_below``, ``source``, ``verified_up_to``),
``theories``, ``assumes`` (the training protocol the theories need, e.g.
``{"position_offsets": "random"}``, or null), ``disagreement``, ``size``, ``size_lower_bound``,
``size_upper_bound``, ``rasp_l``, ``verdict`` (the RASP-L status of the program used),
``length`` and the other measures, ``violations``, ``paper``, ``search``, ``crasp``.

Exit codes: 0 printed; 2 bad input (unknown task: the message lists the known ones; a part-B
sequence program; a broken task file: one line naming FILE:LINE; ``--register`` of a cell whose
runs exist).
"""

from __future__ import annotations

import json
import sys
import textwrap

from rasp_cli.common import (UsageError, add_search_args, add_task_source_args, load_program,
                             parse_pes, search_settings, tasks_from_args)

#: how to read a printed C-RASP program (Huang et al. 2025's next-token form)
CRASP_READING = ("(the output at position i is the token x of the first line NEXT_x whose "
                 "condition holds, else the 'otherwise' token; #[j<=i] P(j) counts the "
                 "positions j <= i where P holds)")

#: the one-line help of `rasp score` (shown by `rasp --help` without importing the command)
HELP = 'length-generalization prediction per task and positional encoding, with its evidence'


#: lines of a shown program printed in the table (a constructed program's definitions
#: and decision list are longer than a searched one)
_SHOWN_LINES = 40

def add_arguments(p) -> None:
    """Tasks and PEs, the verification size, the searches (:func:`rasp_cli.common.add_search_args`),
    a program of your own, your own tasks and ``--register``."""
    p.description = (
        "For each task (and --pe): the prediction (generalizes | no program <= s "
        "| fails | unknown | no theory) with the theory it comes from and its "
        "evidence (a verified program and its expression size, or a bounded search "
        "certificate, which is not a decision), the RASP-L status of the program "
        "used and what the papers report. Without --search only the shipped "
        "program is evidence; the searches stop on work budgets (candidates), so a "
        "row is the same on any machine.")
    p.add_argument("tasks", metavar="TASK", nargs="*",
                   help="task names (default: every generalization task, or none with "
                        "--task-file / --regex; 'huang' = Huang et al.'s tasks)")
    p.add_argument("--json", action="store_true", help="print a JSON list of objects")
    p.add_argument("--pe", action="append", default=None, metavar="PE",
                   help="predict for this positional encoding (repeatable, or 'all'): "
                        "nope, ape_learned, ape_sinusoidal, t5, alibi, rope")
    add_search_args(p)
    p.add_argument("--max-length", "-N", type=int, default=None, metavar="N",
                   help="verify valid programs at lengths 1..N (default: the longest length "
                        "the protocol tests, e.g. 150 for Huang et al.'s tasks; less cannot "
                        "give 'generalizes')")
    p.add_argument("--samples", "-K", type=int, default=5, metavar="K",
                   help="verification examples per length (default 5)")
    p.add_argument("--program", metavar="FILE", default=None,
                   help="score this .rasp program on the (single) TASK's format instead of "
                        "the shipped one")
    p.add_argument("--name", default=None,
                   help="the s-op of --program (default: the task's reference name)")
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.prediction.budget import DEFAULT_CRASP_BUDGET, DEFAULT_SEARCH_BUDGET
    add_task_source_args(p)
    p.add_argument("--no-search", action="store_true",
                   help="with --task-file / --regex: do not run the searches (by default they "
                        f"run there, with {DEFAULT_SEARCH_BUDGET:,} candidate programs for "
                        f"RASP-L and {DEFAULT_CRASP_BUDGET:,} candidate Booleans and counts "
                        "per C-RASP search: about a minute per task on 2 cores)")
    p.add_argument("--register", metavar="FILE.json", default=None,
                   help="register the predictions in FILE.json (code commit from a clean "
                        "tree, budgets, each task's source and sha256, time; one sha256 over "
                        "the file, printed to publish) for `rasp validate-predictor "
                        "--registered`; refused for a task and PE whose runs exist in --runs")
    p.add_argument("--runs", default="runs", metavar="DIR",
                   help="with --register: the runs root the checks will train into (default "
                        "runs/); a task and PE with runs there is not registered")


#: the text table's columns, printed under it
LEGEND = ("size = expression size of the verified RASP-L program used (every operation at "
          "every use), [lo] = certified lower bound (no smaller program in the search "
          "grammar; 0 without --search); program = where it comes from (shipped / search / "
          "user); RASP-L = the status of that program; prediction = the verdict for the PE "
          "from its theories (see the lines under each row; 'no program <= s' is a bounded "
          "search certificate, not a decision); Zhou et al. = the paper's outcome, agree = "
          "whether the RASP-L verdict matches it (- when not a decision or not studied).")


def _row(p) -> str:
    status = p.raspl_status(short=True)
    paper = p.zhou_outcome or "-"
    agree = {True: "yes", False: "NO", None: "-"}[p.agrees]
    size = f"{p.size if p.size is not None else '-'} [{p.size_lower_bound}]"
    return (f"{p.task:22s} {(p.pe or '-'):14s} {size:>9s} {(p.program_source or '-'):8s} "
            f"{status:28s} {p.prediction_label:18s} {paper:17s} {agree}")


def run(args) -> int:
    """Predict and print each task; returns 0."""
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    import tasks
    from analysis.prediction.predict import PredictError, predict
    from rasp.repl.progress import working
    found = search_settings(args, args.tasks)
    own = tasks_from_args(args)
    if own and not args.no_search:
        found["search"] = True          # a task of your own has no shipped program
    elif args.no_search:
        if found["search"]:
            raise UsageError("--no-search contradicts --search / --search-budget / "
                             "--crasp-budget")
    names = args.tasks or ([] if own else list(tasks.GENERALIZATION_TASKS))
    if names == ["huang"]:
        names = list(tasks.HUANG_TASKS)
    pes = [None]
    if args.pe:
        pes = [pe for x in args.pe for pe in parse_pes(x)]
    if args.max_length is not None and args.max_length < 1:
        raise UsageError("--max-length must be a positive integer")
    if args.samples < 1:
        raise UsageError("--samples must be a positive integer")
    resolved = []
    for n in names:          # check every name before the (slower) predictions start
        try:
            resolved.append(tasks.get_task(n))
        except tasks.UnknownTaskError as e:
            raise UsageError(str(e)) from None
    resolved += own
    if args.name and not args.program:
        raise UsageError("--name needs --program FILE")
    if args.program and len(resolved) != 1:
        raise UsageError("--program scores one program: give exactly one TASK")
    if args.register:
        # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
        from analysis.prediction.registered import refuse_existing_runs
        # before the (slower) predictions: a cell trained already cannot be predicted blind
        refuse_existing_runs(args.runs, [(t.name, pe) for t in resolved for pe in pes])
    preds = []
    for t in resolved:
        try:
            if args.program:
                # start-up: a command's own dependencies load when it runs (`rasp --help` loads n...
                from analysis.prediction.predict import predict_program
                if t.kind != "next_token":
                    raise PredictError(f"task {t.name!r} is a {t.kind} task; --program "
                                       "scores a next-token program (next_token tasks)")
                sop = load_program(t, args.program, args.name)
                label = f"{args.program}:{args.name or t.reference_name}"
                if found["search"]:
                    for pe in pes:
                        preds.append(predict(t, verify_max_length=args.max_length,
                                             samples=args.samples, **found,
                                             progress=not args.json, pe=pe, program=sop,
                                             program_label=label))
                else:
                    preds += [predict_program(
                        sop, t, verify_max_length=args.max_length, samples=args.samples,
                        label=label, pe=pe) for pe in pes]
            else:
                for pe in pes:
                    # the C-RASP searches report no progress of their own: a log line at least
                    # every RASP_PROGRESS_EVERY seconds while they run (issue 50)
                    with working(f"score {t.name} / {pe}", show=not args.json):
                        preds.append(predict(t, verify_max_length=args.max_length,
                                             samples=args.samples, **found,
                                             progress=not args.json, pe=pe))
        except PredictError as e:
            raise UsageError(str(e)) from None
    doc = None
    if args.register:
        # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
        from analysis.prediction.registered import write_registration
        doc = write_registration(args.register, preds, resolved, found,
                                 getattr(args, "command_line", None))
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.prediction.theories import PROTOCOL_SENTENCE, required_offsets
    if args.json:
        print(json.dumps([{**p.to_dict(), "assumes": {"position_offsets": need}
                           if (need := required_offsets(p.pe)) else None} for p in preds]))
        if doc is not None:
            _print_registered(args.register, preds, doc, file=sys.stderr)
        return 0
    print(f"{'task':22s} {'pe':14s} {'size [lo]':>9s} {'program':8s} {'RASP-L':28s} "
          f"{'prediction':18s} {'Zhou et al.':17s} agree")
    for p in preds:
        print(_row(p))
        if p.program_source:
            print(f"{'':26s}RASP-L program ({p.program_source}): "
                  + (p.program if p.program_source != "search" else "below"))
        if not p.theories:
            print(f"{'':26s}theory: {p.theory}")
        elif p.pe in PROTOCOL_SENTENCE:
            print(f"{'':26s}conditions: {PROTOCOL_SENTENCE[p.pe]}")
        for th in (p.theories or {}).values():
            print(f"{'':26s}{th['theory']}: {th.get('label', th['prediction'])} - "
                  f"{th['reason']}")
            shown = th.get("program")
            raspl_used = th["theory"].startswith("RASP-L") and p.program_source
            if shown and (p.disagreement or not raspl_used):
                # the program the verdict rests on, whenever it is not the one printed above
                if "NEXT_" in str(shown):
                    print(f"{'':30s}{CRASP_READING}")
                lines = str(shown).splitlines()
                for line in lines[:_SHOWN_LINES]:
                    print(f"{'':30s}{line}")
                if len(lines) > _SHOWN_LINES:
                    print(f"{'':30s}... {len(lines) - _SHOWN_LINES} more lines (--json prints "
                          "the whole program)")
                runnable = (th.get("evidence") or {}).get("runnable")
                if runnable:
                    print(f"{'':30s}as .rasp (runs as printed: rasp verify --program FILE "
                          "--name program):")
                    for line in runnable.splitlines():
                        print(f"{'':32s}{line}")
        if not p.rasp_l:
            for v in p.violations[:3]:
                where = v.get("span") or "?"
                print(f"{'':26s}rule {v['rule']} ({v['rule_name']}) at {where}: "
                      f"{v['operation']}")
            if len(p.violations) > 3:
                print(f"{'':26s}... {len(p.violations) - 3} more")
        if p.search:
            s = p.search
            if "error" in s:
                print(f"{'':26s}search: {s['error']}")
            else:
                print(f"{'':26s}search: no program of expression size <= "
                      f"{s['certified_no_program_up_to']}"
                      + (f"; found size {s['length']} (length {s.get('measured_length')}, "
                         f"by {s.get('found_by')})" if s["found"] else "")
                      + f" ({s['explored']:,} candidate programs of a budget of "
                        f"{s.get('budget') or 0:,}; stopped: {s['stopped']}; {s['seconds']} s)")
                if s.get("program"):
                    for line in s["program"].splitlines():
                        print(f"{'':28s}{line}")
    print()
    print(textwrap.fill(LEGEND, width=100))
    if doc is not None:
        print()
        _print_registered(args.register, preds, doc)
    return 0


def _print_registered(path, preds, doc, file=None) -> None:
    """What a registration is: the count, the sha256 to publish and the code it names."""
    code = doc["code"]
    print(f"registered {len(preds)} prediction(s) in {path}\nsha256 {doc['sha256']}: "
          f"publish or commit it; `rasp validate-predictor --registered {path} "
          f"--registered-sha256 {doc['sha256']}` refuses any other file", file=file)
    if code["state"] == "clean":
        print(f"code: commit {code['head']}", file=file)
    else:
        print(f"code: {code['state']}"
              + (f" on {code['head'][:12]} (git diff HEAD sha256 {code['diff_sha256']}; "
                 f"{code['untracked']} untracked file(s)): no commit recorded; commit the code "
                 "first for a registration that names it" if code["head"] else ""), file=file)
