"""`rasp search TASK [--max-length K] [--budget N] [--time-cap S] [--mode raspl|crasp|crasp_pl]
[--json]` and
`rasp search --examples FILE.jsonl ...` / `rasp search --task-file FILE.py ...` /
`rasp search --regex PATTERN ...`: the shortest-program search alone
(:func:`analysis.prediction.search.search`, one call for every grammar and target).

For a catalogue task: the search batch is the task's examples at lengths 1..6 (3 per length); a
program found must also reproduce 10 examples at each length 1..20. It prints the certified
lower bound ("no program of expression size <= k reproduces the task") and the program found
(by exhaustive enumeration: a shortest one; by combining terms with ``where``: an upper bound)
as ``.rasp`` source that runs as printed (the REPL, ``rasp verify --program FILE --name
program``), its token constants written as the task's symbols and bound as atoms in its first
lines (:func:`rasp.source.program_to_source`), with a progress bar of the programs evaluated. The search stops after ``--budget`` candidate
programs (work, not seconds: the result is the same on any machine at any load;
``analysis.prediction.budget``); ``--time-cap S`` adds a wall-clock safety stop whose result
says ``time_cap`` and certifies nothing a verdict may rest on. ``--memory-mb M`` (RASP-L
default 2048, 3072 above a 40M budget) bounds the whole search, counted in bytes of arrays
(the same on every machine): where it is spent the search ends with ``stopped: memory``, the
sizes it completed certified.

``--examples FILE.jsonl``: your own task, one example per line, ``{"prompt": [...], "answer":
[...]}`` with token values (all integers in [-128, 127], or all strings); the program sees
``prompt + answer`` and must predict each answer token from the prefix before it. Malformed
lines, mixed value types and contradictory examples (the same prefix followed by different
tokens) are refused with a message naming the example (exit code 2).

``--task-file FILE.py`` / ``--regex PATTERN``: a task of your own (``tasks/custom.py``; loading
a task file runs its Python code), searched as a catalogue task.

``--mode crasp`` / ``--mode crasp_pl``: the C-RASP grammar instead
(``analysis.prediction.crasp_search``: C-RASP[] or C-RASP[periodic, local] decision lists,
size = C-RASP size, budget in candidate Booleans and counts); it needs a task (not
``--examples``). Every mode returns one ``SearchResult`` and prints its ``text()``.

``--json``: one object (``SearchResult.to_dict`` in the grammar's shape, plus ``mode`` and
``program``; RASP-L: ``found``, ``length``, ``certified_no_program_up_to``,
``certified_lower_bound``, ``upper_bound``, ``found_by``, ``explored``, ``programs_per_s``, ...;
C-RASP: ``variant``, ``size``, ``certified_below``, ``schema``, ``notes``, ...).
"""

from __future__ import annotations

import argparse
import json

from rasp_cli.common import UsageError, add_task_source_args, finite_number, tasks_from_args

#: the one-line help of `rasp search` (shown by `rasp --help` without importing the command)
HELP = 'shortest-program search for a task (RASP-L or C-RASP)'


def add_arguments(p) -> None:
    p.description = (
        "Enumerate programs smallest first (families of candidates evaluated as "
        "array operations) until one reproduces the task's next-token function; "
        "print the certified lower bound and the program found.")
    p.add_argument("task", metavar="TASK", nargs="?", default=None,
                   help="a next-token task of the catalogue (or use --examples, --task-file, "
                        "--regex)")
    p.add_argument("--examples", metavar="FILE.jsonl", default=None,
                   help="search a program for your own examples (one JSON object per line: "
                        "{\"prompt\": [...], \"answer\": [...]})")
    p.add_argument("--max-length", "-K", type=int, default=None, metavar="K",
                   help="largest size to enumerate: expression size for RASP-L (default 8), "
                        "C-RASP size for --mode crasp / crasp_pl (default 14)")
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.prediction.budget import (DEFAULT_CRASP_BUDGET, DEFAULT_SEARCH_BUDGET,
                                            parse_budget)
    p.add_argument("--budget", "-b", type=parse_budget, default=None, metavar="N",
                   help=f"candidate programs to evaluate (default {DEFAULT_SEARCH_BUDGET:,}; "
                        f"for --mode crasp / crasp_pl candidate Booleans and counts, default "
                        f"{DEFAULT_CRASP_BUDGET:,}; 40M, 500k also read)")
    p.add_argument("--time-cap", type=float, default=None, metavar="S",
                   help="a wall-clock safety stop in seconds (default none)")
    p.add_argument("--seconds", "-s", default=None, help=argparse.SUPPRESS)
    p.add_argument("--mode", choices=("raspl", "crasp", "crasp_pl"), default="raspl",
                   help="grammar: RASP-L (default), C-RASP[] or C-RASP[periodic, local] "
                        "(the C-RASP search, analysis.prediction.crasp_search)")
    p.add_argument("--memory-mb", type=float, default=None, metavar="M",
                   help="the search's memory in MB (RASP-L: every array it keeps and its "
                        "temporaries, counted in bytes, default 2048, 3072 for budgets above "
                        "40M; C-RASP: stored values, default 768); where it is spent the "
                        "search stops with 'stopped: memory', the sizes it completed certified")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="worker threads computing the candidate families (default: "
                        "$RASP_SEARCH_THREADS, else the usable cores, at most 2); the result "
                        "does not depend on it")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_task_source_args(p, many=False)


def read_examples(path: str) -> list[tuple[list, int]]:
    """Read ``FILE.jsonl`` into ``(values, first_target)`` pairs for
    :func:`analysis.prediction.raspl_search.problem_from_examples`.

    Raises:
        ValueError: unreadable file, malformed line, mixed value types, values outside int8,
            or contradictory examples — the message names the line(s).
    """
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from rasp_model.files import FileReadError, read_text
    try:                                # a regular file only: a named pipe never blocks
        lines = read_text(path, "an examples file").splitlines()
    except FileReadError as e:
        raise ValueError(str(e)) from None
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror}") from None
    out, kinds, nexts = [], {}, {}
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{no}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{where}: not a JSON object ({e.msg})") from None
        except RecursionError:
            raise ValueError(f"{where}: nested too deeply") from None
        if not isinstance(obj, dict) or not {"prompt", "answer"} <= set(obj):
            raise ValueError(f"{where}: expected {{\"prompt\": [...], \"answer\": [...]}}")
        prompt, answer = obj["prompt"], obj["answer"]
        if not isinstance(prompt, list) or not isinstance(answer, list) or not prompt \
                or not answer:
            raise ValueError(f"{where}: prompt and answer must be non-empty lists")
        values = prompt + answer
        kind = set()
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, str)):
                raise ValueError(f"{where}: token {v!r} is neither an integer nor a string")
            kind.add(type(v).__name__)
            if isinstance(v, int) and not -128 <= v <= 127:
                raise ValueError(f"{where}: token {v} is outside the int8 range [-128, 127] "
                                 "(RASP-L rule 2)")
        if len(kind) > 1:
            raise ValueError(f"{where}: the example mixes integer and string tokens")
        kinds.setdefault(kind.pop(), no)
        if len(kinds) > 1:
            raise ValueError(f"{where}: its tokens are {list(kinds)[-1]}s but line "
                             f"{kinds[list(kinds)[0]]} has {list(kinds)[0]}s: examples mix "
                             "value types")
        for t in range(len(prompt), len(values)):
            key = tuple(values[:t])
            prev = nexts.get(key)
            if prev is not None and prev[0] != values[t]:
                raise ValueError(f"{where}: contradicts line {prev[1]}: after the same prefix "
                                 f"{list(key)} one says {prev[0]!r}, the other "
                                 f"{values[t]!r}")
            nexts.setdefault(key, (values[t], no))
        out.append((values, len(prompt)))
    if not out:
        raise ValueError(f"{path}: no examples")
    return out


def run(args) -> int:
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    import tasks
    from analysis.prediction.budget import DEFAULT_CRASP_BUDGET, DEFAULT_SEARCH_BUDGET
    from analysis.prediction.raspl_search import problem_from_examples
    from analysis.prediction.search import SearchError, search
    own = tasks_from_args(args)
    if (args.task is not None) + (args.examples is not None) + len(own) != 1:
        raise UsageError("give a TASK, --examples FILE.jsonl, --task-file FILE.py or --regex "
                         "PATTERN (one of them)")
    crasp = args.mode != "raspl"
    if crasp and args.examples:
        raise UsageError("--mode crasp / crasp_pl searches a task (TASK, --task-file or "
                         "--regex): the C-RASP search samples its own batches and verifies "
                         "against the task, which --examples does not give")
    if args.max_length is None:
        args.max_length = 14 if crasp else 8
    if args.budget is None:
        args.budget = DEFAULT_CRASP_BUDGET if crasp else DEFAULT_SEARCH_BUDGET
    if args.max_length < 1 or args.max_length > 20:
        raise UsageError("--max-length must be between 1 and 20")
    if args.seconds is not None:
        raise UsageError("--seconds is gone: the search stops on work, not seconds (a result "
                         "must not depend on the machine's load); use --budget N (candidate "
                         "programs, e.g. 40M) and optionally --time-cap S as a safety stop")
    finite_number(args.time_cap, "--time-cap")
    if args.budget < 1:
        raise UsageError("--budget must be at least 1 candidate program")
    finite_number(args.memory_mb, "--memory-mb")
    if args.threads is not None and not 1 <= args.threads <= 64:
        raise UsageError("--threads must be between 1 and 64")
    try:
        if args.examples:
            try:
                ex = read_examples(args.examples)
            except ValueError as e:
                raise UsageError(str(e)) from None
            strs = sorted({v for vals, _ in ex for v in vals if isinstance(v, str)})
            consts = [0, 1, 2] + (strs if len(strs) <= 12 else [])
            target = problem_from_examples(ex, constants=consts, defaults=[0] + strs[:1],
                                           name=args.examples)
        else:
            try:
                target = own[0] if own else tasks.get_task(args.task)
            except tasks.UnknownTaskError as e:
                raise UsageError(str(e)) from None
        if crasp and args.threads is not None:
            print("note: --threads applies to the RASP-L search only", flush=True)
        res = search(target, args.mode, args.budget, max_size=args.max_length,
                     time_cap=args.time_cap, max_memory_mb=args.memory_mb,
                     progress=not args.json, threads=args.threads)
    except SearchError as e:
        raise UsageError(str(e)) from None
    if args.json:
        d = res.to_dict()
        d["mode"] = args.mode
        d["program"] = res.source
        print(json.dumps(d))
        return 0
    print(res.text())      # the program runs as printed, in the task's symbols
    return 0
