"""`rasp score [TASK...] [--pe PE|all] [--json] [--search SECONDS] [--max-length N]
[--samples K] [--program FILE [--name NAME]]`: the length-generalization predictor
(``analysis.prediction.predict``) for each task (or for one program of your own on one task's format),
optionally per positional encoding.

Each row shows [certified lower bound, upper bound] of the program's expression size (the lower
bound from the search; the upper bound = the program the prediction used), which program that
is (``shipped``, ``search`` or ``user``), and with ``--pe`` every theory for that encoding
(RASP-L, C-RASP[] for NoPE, C-RASP[periodic, local] for a learned APE); where they disagree the
row says so and shows both programs.

Per task: the program length, attention ops, layers and heads of the shortest known valid
RASP-L program (else of the natural program), whether it is RASP-L (or the violations of the
natural program, with rule and line:column), the expected-generalization score, the prediction
("generalizes" | "fails") and what Zhou et al. 2023 report. Valid programs are verified by
greedy decoding at every length 1..N. Default tasks: every generalization task (part A).

``--json`` prints a list of objects with keys ``task``, ``rasp_l``, ``length``,
``attention_ops``, ``layers``, ``heads``, ``violations``, ``prediction``, ``paper`` (plus
``score``, ``verdict``, ``program``, ``reasons``, ``pe``, ``length_lower_bound``,
``length_upper_bound``, ``program_source``, ``crasp``, ``theories``, ``disagreement``; see
``Prediction.to_dict``), one object per task and PE.

Exit codes: 0 printed; 2 bad input (unknown task: the message lists the known ones; a part-B
sequence program).
"""

from __future__ import annotations

import json


def register(sub) -> None:
    """Add the ``score`` subcommand to the CLI's subparsers."""
    p = sub.add_parser(
        "score", help="shortest RASP-L program per task and the length-generalization "
                      "prediction",
        description="For each task: program length, attention ops, layers, heads, RASP-L "
                    "validity (or the natural program's violations), the prediction "
                    "(generalizes | fails) from the RASP-Generalization Conjecture "
                    "(Zhou et al. 2023) and the paper's outcome.")
    p.add_argument("tasks", metavar="TASK", nargs="*",
                   help="task names (default: every generalization task; 'huang' = Huang et "
                        "al.'s tasks)")
    p.add_argument("--json", action="store_true", help="print a JSON list of objects")
    p.add_argument("--pe", action="append", default=None, metavar="PE",
                   help="predict for this positional encoding (repeatable, or 'all'): "
                        "nope, ape_learned, ape_sinusoidal, t5, alibi, rope")
    p.add_argument("--search", type=float, default=0.0, metavar="SECONDS",
                   help="also run the shortest-program search for up to SECONDS per task")
    p.add_argument("--max-length", "-N", type=int, default=100, metavar="N",
                   help="verify valid programs at lengths 1..N (default 100)")
    p.add_argument("--samples", "-K", type=int, default=5, metavar="K",
                   help="verification examples per length (default 5)")
    p.add_argument("--program", metavar="FILE", default=None,
                   help="score this .rasp program on the (single) TASK's format instead of "
                        "the shipped one")
    p.add_argument("--name", default=None,
                   help="the s-op of --program (default: the task's reference name)")
    p.set_defaults(func=score_command)


def _bounds(p) -> str:
    hi = p.length_upper_bound if p.length_upper_bound is not None else "-"
    return f"[{p.length_lower_bound if p.length_lower_bound is not None else 0}, {hi}]"


def _row(p) -> str:
    if p.rasp_l:
        status = "RASP-L"
    elif p.verdict == "unverified":
        status = "RASP-L, fails verification"
    else:
        rules = sorted({v["rule"] for v in p.violations})
        status = "not RASP-L (rules " + ",".join(str(r) for r in rules) + ")"
    paper = p.zhou_outcome or "-"
    agree = {True: "yes", False: "NO", None: "-"}[p.agrees]
    pe = p.pe or "-"
    return (f"{p.task:22s} {pe:14s} {p.length:6d} {_bounds(p):>9s} "
            f"{(p.program_source or '-'):8s} {p.attention_ops:4d} {p.layers:6d}  "
            f"{status:28s} {p.score:5.2f}  {p.prediction:12s} {paper:17s} {agree}")


def score_command(args) -> int:
    """Predict and print each task; returns 0."""
    from rasp_cli.main import UsageError
    import tasks
    from analysis.prediction.predict import PredictError, predict
    names = args.tasks or list(tasks.GENERALIZATION_TASKS)
    if names == ["huang"]:
        names = list(tasks.HUANG_TASKS)
    pes = [None]
    if args.pe:
        from rasp_cli.commands.train import parse_pes
        pes = [pe for x in args.pe for pe in parse_pes(x)]
    if args.max_length < 1:
        raise UsageError("--max-length must be a positive integer")
    if args.samples < 1:
        raise UsageError("--samples must be a positive integer")
    if args.search < 0:
        raise UsageError("--search takes a non-negative number of seconds")
    resolved = []
    for n in names:          # check every name before the (slower) predictions start
        try:
            resolved.append(tasks.get_task(n))
        except tasks.UnknownTaskError as e:
            raise UsageError(str(e)) from None
    if args.name and not args.program:
        raise UsageError("--name needs --program FILE")
    if args.program and len(resolved) != 1:
        raise UsageError("--program scores one program: give exactly one TASK")
    preds = []
    for t in resolved:
        try:
            if args.program:
                from analysis.prediction.predict import predict_program
                from rasp_cli.commands.verify import load_program
                if t.kind != "next_token":
                    raise PredictError(f"task {t.name!r} is a part-B sequence program; "
                                       "predictions are for next-token tasks")
                sop = load_program(t, args.program, args.name)
                label = f"{args.program}:{args.name or t.reference_name}"
                if args.search > 0 or args.pe:
                    for pe in pes:
                        preds.append(predict(t, verify_max_length=args.max_length,
                                             samples=args.samples, search_seconds=args.search,
                                             progress=not args.json, pe=pe, program=sop,
                                             program_label=label))
                else:
                    preds.append(predict_program(
                        sop, t, verify_max_length=args.max_length, samples=args.samples,
                        label=label))
            else:
                for pe in pes:
                    preds.append(predict(t, verify_max_length=args.max_length,
                                         samples=args.samples, search_seconds=args.search,
                                         progress=not args.json, pe=pe))
        except PredictError as e:
            raise UsageError(str(e)) from None
    if args.json:
        print(json.dumps([p.to_dict() for p in preds]))
        return 0
    print(f"{'task':22s} {'pe':14s} {'length':>6s} {'[lo, hi]':>9s} {'program':8s} "
          f"{'attn':>4s} {'layers':>6s}  {'RASP-L':28s} {'score':>5s}  {'prediction':12s} "
          f"{'Zhou et al.':17s} agree")
    for p in preds:
        print(_row(p))
        if p.program_source:
            print(f"{'':26s}program used ({p.program_source}; size bounds [certified lower, "
                  f"used] = [{p.length_lower_bound}, {p.length_upper_bound}]): "
                  + (p.program if p.program_source != "search" else "below"))
        for th in (p.theories or {}).values():
            print(f"{'':26s}{th['theory']}: {th['prediction']} - {th['reason']}")
            if p.disagreement and th.get("program"):
                for line in str(th["program"]).splitlines()[:12]:
                    print(f"{'':30s}{line}")
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
                      + f" ({s['explored']} programs, {s['seconds']} s)")
                if s.get("program"):
                    for line in s["program"].splitlines():
                        print(f"{'':28s}{line}")
    return 0
