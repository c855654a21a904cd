"""`rasp verify TASK [--max-length N] [--samples K] [--seed S] [--program FILE --name NAME]
[--json]`: check a task's program at every length against the ground truth.

By default the task's reference program (``tasks/programs/<task>.rasp``) is decoded
(``tasks.decode_with_program`` semantics; ``analysis.prediction.verify``) on ``K`` seeded
examples at every length ``1..N`` the task allows, and compared with the task's plain-Python
ground truth. The output names the method used: ``teacher_forcing`` (one evaluation of the
whole reference sequence; exact for a program that reads only the prefix, which
``rasp.analyses.raspl.is_prefix_causal`` proves) or ``greedy`` (token by token, as a model decodes). With
``--program FILE`` (and ``--name NAME``, default the task's reference name) any program is
checked on the task's format instead; ``--task-file FILE.py`` / ``--regex PATTERN`` give a
task of your own (``tasks/custom.py``; loading a task file runs its Python code), checked with
``--program``.

Exit codes: 0 every example decoded exactly; 1 a mismatch (the first counterexample is printed)
or a program that fails at some length; 2 bad input (unknown task, impossible lengths, a
program file that does not exist or parse, an unknown name).
"""

from __future__ import annotations

import json

from rasp_cli.common import (UsageError, add_task_source_args, load_program, seed_flag,
                             tasks_from_args)

#: the one-line help of `rasp verify` (shown by `rasp --help` without importing the command)
HELP = "check a task's program against the ground truth at every length"


def add_arguments(p) -> None:
    p.description = (
        "Greedy decoding with the task's reference RASP program (or --program) "
        "on K seeded examples at every length 1..N the task allows, compared with "
        "the plain-Python ground truth. Exit 0 all correct, 1 a mismatch (the first "
        "counterexample is printed), 2 bad input.")
    p.add_argument("task", metavar="TASK", nargs="?", default=None,
                   help="a task name (see `rasp tasks`), or --task-file / --regex")
    p.add_argument("--max-length", "-N", type=int, default=100, metavar="N",
                   help="check every allowed length 1..N (default 100)")
    p.add_argument("--samples", "-K", type=int, default=5, metavar="K",
                   help="examples per length (default 5)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    p.add_argument("--program", metavar="FILE", default=None,
                   help="a .rasp file to verify instead of the reference program")
    p.add_argument("--name", default=None,
                   help="the s-op of --program to decode with (default: the task's reference "
                        "name)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_task_source_args(p, many=False)


def _load_task(name: str):
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    import tasks
    try:
        return tasks.get_task(name)
    except tasks.UnknownTaskError as e:
        raise UsageError(str(e)) from None


def run(args) -> int:
    """Verify and print; returns 0 (all correct) or 1 (a mismatch or program failure)."""
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.prediction.verify import VerifyError, verify_program_on_task, verify_task
    own = tasks_from_args(args)
    if (args.task is not None) + len(own) != 1:
        raise UsageError("give a TASK, --task-file FILE.py or --regex PATTERN (one of them)")
    task = own[0] if own else _load_task(args.task)
    if not args.program and not task.reference_file:
        raise UsageError(f"task {task.name!r} has no reference program: verify yours with "
                         "--program FILE --name NAME")
    if args.samples < 1:
        raise UsageError("--samples must be a positive integer")
    if args.max_length < 1:
        raise UsageError("--max-length must be a positive integer")
    if args.name and not args.program:
        raise UsageError("--name needs --program FILE")
    seed_flag(args.seed)                 # a negative seed is a usage error, not a failing program
    try:
        if args.program:
            sop = load_program(task, args.program, args.name)
            res = verify_program_on_task(task, sop, max_length=args.max_length,
                                         samples=args.samples, seed=args.seed,
                                         progress=not args.no_progress,
                                         program_label=f"{args.program}:"
                                                       f"{args.name or task.reference_name}")
        else:
            res = verify_task(task, max_length=args.max_length, samples=args.samples,
                              seed=args.seed, progress=not args.no_progress)
    except VerifyError as e:
        raise UsageError(str(e)) from None
    if args.json:
        print(json.dumps(res.to_dict()))
    else:
        print(res.summary())
        c = res.counterexample
        if c is not None:
            print(f"  first counterexample (length {c['length']}):")
            print(f"    prompt:   {' '.join(c['prompt'])}")
            print(f"    expected: {' '.join(c['expected'])}")
            print(f"    got:      {' '.join(c['got'])}")
    return 0 if res.ok else 1
