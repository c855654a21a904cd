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
import os

#: the one-line help of `rasp verify` (shown by `rasp --help` without importing the command)
HELP = "check a task's program against the ground truth at every length"


def register(sub) -> None:
    """Add the ``verify`` subcommand to the CLI's subparsers."""
    p = sub.add_parser(
        "verify", help=HELP,
        description="Greedy decoding with the task's reference RASP program (or --program) "
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
    from rasp_cli.main import add_task_source_args
    add_task_source_args(p, many=False)
    p.set_defaults(func=verify_command)


def _load_task(name: str):
    from rasp_cli.main import UsageError
    import tasks
    try:
        return tasks.get_task(name)
    except tasks.UnknownTaskError as e:
        raise UsageError(str(e)) from None


def load_program(task, path: str, name: str | None):
    """Run a .rasp file (causal mode when the task's programs are causal) and return the s-op
    ``name``. Raises UsageError for a missing file or name, RASPError for a program error."""
    from rasp_cli.main import UsageError
    from rasp.ir import SOp
    if not os.path.isfile(path):
        raise UsageError(f"no such file: {path}")
    name = name or task.reference_name
    if name is None:
        raise UsageError(f"task {task.name!r} has no reference program to name the s-op: give "
                         f"the s-op of {path} with --name")
    from rasp.repl.session import run_source
    from rasp_model.files import read_text
    env = run_source(read_text(path, "a RASP program"), filename=path,
                     causal=bool(task.causal))        # the one reader: a regular file, capped
    if name is None or name not in env:
        own = [n for n in env.own_names() if not n.startswith("_")]
        raise UsageError(f"{path} defines no s-op {name!r}; defined: "
                         + (", ".join(own) if own else "(nothing)") + " (choose with --name)")
    sop = env[name]
    if not isinstance(sop, SOp):
        raise UsageError(f"{name!r} in {path} is not an s-op (it is {type(sop).__name__})")
    return sop


def verify_command(args) -> int:
    """Verify and print; returns 0 (all correct) or 1 (a mismatch or program failure)."""
    from rasp_cli.main import UsageError
    from analysis.prediction.verify import VerifyError, verify_program_on_task, verify_task
    from rasp_cli.main import tasks_from_args
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
    from rasp_cli.main import seed_flag
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
