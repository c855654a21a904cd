"""The `rasp` command line. `rasp` alone opens the REPL; `rasp --help` lists the subcommands.

Each subcommand lives in its own module under :mod:`rasp_cli.commands` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` (called with the parsed
arguments, returning an exit code). Exit codes: 0 success, 1 a failed check (mismatch, invalid
program), 2 a usage error or bad input. Errors of the toolkit are printed as one clear message,
never a traceback.
"""

from __future__ import annotations

import os
import signal
import sys


def _interrupted_while_starting(signum, frame):  # pragma: no cover - timing dependent
    """Ctrl-C before a command runs (while its modules import): nothing was written yet, so
    one line and exit 130, never a traceback from inside an import."""
    sys.stderr.write("interrupted\n")
    os._exit(130)


if __name__ in ("__main__", "rasp_cli.main") and sys.argv and \
        os.path.basename(sys.argv[0]) in ("rasp", "main.py", "-m"):
    try:                      # only as the `rasp` program (not when a test imports main)
        signal.signal(signal.SIGINT, _interrupted_while_starting)
    except ValueError:        # not the main thread
        pass

import argparse
import importlib
import pkgutil
import re

from rasp.ir import RASPError

import rasp_cli.commands as _commands


class UsageError(RASPError):
    """Bad input detected by a subcommand: printed, exit code 2."""


def finite_number(value: float | None, flag: str, minimum: float = 0.0,
                  allow_equal: bool = False) -> float | None:
    """``value`` if it is a finite number above ``minimum`` (or equal, with ``allow_equal``),
    else :class:`UsageError` naming ``flag``: NaN, inf and negative values never reach a
    time limit, a budget or a memory size. None passes through (the flag was not given)."""
    import math
    if value is None:
        return None
    ok = math.isfinite(value) and (value >= minimum if allow_equal else value > minimum)
    if not ok:
        bound = f">= {minimum:g}" if allow_equal else f"> {minimum:g}"
        raise UsageError(f"{flag} must be a finite number {bound}, got {value!r}")
    return value


#: The largest seed (NumPy's and torch's generators take seeds in 0..2^32-1).
MAX_SEED = 2 ** 32 - 1


def whole_number(value: int | None, flag: str, minimum: int = 0,
                 maximum: int | None = None) -> int | None:
    """``value`` if it is an integer in ``minimum..maximum``, else :class:`UsageError`
    naming ``flag`` and the range (exit 2): every integer flag is checked before any work
    (a run directory, Ray, a thread pool). None passes through (the flag was not given)."""
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, int) or value < minimum
            or (maximum is not None and value > maximum)):
        rng = f"{minimum:,}..{maximum:,}" if maximum is not None else f">= {minimum:,}"
        raise UsageError(f"{flag} must be an integer in {rng}, got {value!r}")
    return value


def seed_flag(value: int | None, flag: str = "--seed") -> int | None:
    """A ``--seed`` value: :func:`whole_number` in ``0..MAX_SEED``."""
    return whole_number(value, flag, 0, MAX_SEED)


#: The most torch threads a command may ask for (``--threads``): more is no faster, and
#: torch crashes on a million.
MAX_THREADS = 256

#: The most seeds one command line may name (a range such as 0-999999 is refused before
#: anything is planned).
MAX_SEEDS = 1000


def parse_seeds(text: str, flag: str = "--seeds") -> list[int]:
    """The seeds a ``--seeds`` value names, in every subcommand the same way: a comma list of
    seeds and inclusive ranges (``0,1,2``, ``0-4``, ``3``, ``0-2,7``), each seed >= 0, at most
    :data:`MAX_SEEDS`, no duplicates. :class:`UsageError` otherwise (one line)."""
    seeds: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise UsageError(f"{flag} takes seeds and ranges such as 0,1,2 or 0-4 (integers "
                             f">= 0), got {text!r}") from None
        if b < a:
            raise UsageError(f"{flag}: the range {part!r} is empty (write low-high)")
        if b - a + 1 + len(seeds) > MAX_SEEDS:
            raise UsageError(f"{flag}: at most {MAX_SEEDS} seeds, got {text!r}")
        seeds.extend(range(a, b + 1))
    if not seeds:
        raise UsageError(f"{flag} needs at least one seed, e.g. 0 or 0-4")
    if len(set(seeds)) != len(seeds):
        raise UsageError(f"{flag} names a seed twice: {text!r}")
    return seeds


def output_dir(path: str) -> str:
    """Create the output directory ``path`` (and parents) or raise :class:`UsageError` with a
    one-line reason (an existing file, a read-only or virtual file system such as /proc)."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{path} exists and is not a directory; choose another output "
                         f"directory with -o")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create the output directory {path}: {e.strerror or e}") \
            from None
    return path


#: what ``--help`` says about a task file (the user's own Python, run when it loads)
TASK_FILE_HELP = (
    "your own task, defined in a Python file: NAME, VOCAB (input tokens), KIND (seq2seq | "
    "membership | next_set), inputs(rng, n) and target(tokens), optional LENGTHS (training "
    "lengths, default 1-20); example: tasks/examples/more_a_than_b.py, contract: tasks/custom.py. "
    "Loading the file RUNS ITS PYTHON CODE (it is imported as a module): give only your own "
    "or trusted files")


def add_task_source_args(p, regex: bool = True, many: bool = True) -> None:
    """The options of a task outside the catalogue: ``--task-file FILE.py`` (repeatable when
    ``many``) and, with ``regex``, ``--regex PATTERN`` with its ``--alphabet``, ``--format``,
    ``--next-set-components`` and ``--task-name`` (:mod:`tasks.custom`)."""
    g = p.add_argument_group("your own task (outside the catalogue)")
    g.add_argument("--task-file", action="append" if many else "store", default=None,
                   metavar="FILE.py", help=TASK_FILE_HELP + (" (repeatable)" if many else ""))
    if not regex:
        return
    g.add_argument("--regex", default=None, metavar="PATTERN",
                   help="a language over single-character symbols as a regular expression "
                        "(e.g. '(aa)*', '1*', '[ab]*d[bc]*'), served by the code of Huang et "
                        "al.'s languages; tested up to length 150 as theirs")
    g.add_argument("--alphabet", default=None, metavar="SYMBOLS",
                   help="the regex's symbols in value order, e.g. 01 (default: the "
                        "expression's, sorted)")
    g.add_argument("--format", choices=("membership", "next_set"), default="membership",
                   help="the regex task's format: membership (BOS w SEP -> yes|no EOS, "
                        "default) or next_set (Huang et al.'s next-character sets)")
    g.add_argument("--next-set-components", default=None, metavar="LIST",
                   help="next_set: the comma-separated symbols and/or EOS a label lists "
                        "(default: every symbol and EOS)")
    g.add_argument("--task-name", default=None, metavar="NAME",
                   help="the regex task's name (default regex_<hash>)")


def tasks_from_args(args) -> list:
    """The tasks of :func:`add_task_source_args`' options, loaded and registered
    (:func:`tasks.catalogue.register_task`) so every consumer finds them by name.

    Raises:
        tasks.custom.TaskFileError: a broken task file or bad expression (one line, exit 2).
        UsageError: regex-only options without ``--regex``.
    """
    from tasks.catalogue import register_task
    from tasks.custom import load_task_file, regex_task
    files = getattr(args, "task_file", None) or []
    files = [files] if isinstance(files, str) else files
    out = [register_task(load_task_file(f)) for f in files]
    pattern = getattr(args, "regex", None)
    if pattern is None:
        extra = [f for f in ("alphabet", "next_set_components", "task_name")
                 if getattr(args, f, None) is not None]
        if extra:
            raise UsageError(f"--{extra[0].replace('_', '-')} is an option of --regex")
        return out
    comps = args.next_set_components
    if comps is not None and args.format != "next_set":
        raise UsageError("--next-set-components is for --format next_set")
    out.append(register_task(regex_task(
        pattern, args.format, list(args.alphabet) if args.alphabet else None, args.task_name,
        [c.strip() for c in comps.split(",") if c.strip()] if comps is not None else None)))
    return out


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # a value that starts with a negative number is a value, not an option: our special
        # tokens are negative, so `--vocab -3,-2,1` and `--input -1,2` must parse (argparse's
        # own matcher accepts only a single number such as -3)
        self._negative_number_matcher = re.compile(r"^-\d+(\.\d+)?([,;:\s]-?[\w.]+)*$")

    def error(self, message):  # argparse usage errors: exit 2 with the usage line
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _command_word(argv: list[str], names: set[str]) -> str | None:
    """The subcommand ``argv`` invokes: its first argument that is not an option (the parser
    has no top-level option that takes a value), or None."""
    for a in argv:
        if not a.startswith("-"):
            return a if a in names else None
    return None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The ``rasp`` parser. Every subcommand module is listed with its one-line ``HELP``; only
    the invoked one (the first non-option word of ``argv``; all of them when ``argv`` is None)
    builds its full parser, so ``rasp --help`` and ``rasp run`` import neither torch nor the
    other commands' dependencies."""
    parser = _Parser(
        prog="rasp",
        description="rasp-lab: think like a transformer. Write RASP/RASP-L programs, measure "
                    "them, compile them to transformer weights, train transformers with six "
                    "positional encodings and probe their attention. With no subcommand, "
                    "opens the REPL.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    mods = {m.name.replace("_", "-"): m.name for m in pkgutil.iter_modules(_commands.__path__)}
    wanted = None if argv is None else (_command_word(argv, set(mods)) or "repl")
    for name in sorted(mods):
        module = importlib.import_module(f"rasp_cli.commands.{mods[name]}")
        if wanted is None or name == wanted:
            module.register(sub)
        else:
            sub.add_parser(name, help=module.HELP, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = build_parser(argv)                # imports the command (torch: seconds)
        args = parser.parse_args(argv)
        if args.command is None:                   # the REPL is the default
            args = parser.parse_args(["repl"])
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    # the command line as typed (documents generated by a command name it, e.g. results.md)
    args.command_line = "rasp " + " ".join(argv)
    if signal.getsignal(signal.SIGINT) is _interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)   # the command's own handling
    try:
        return int(args.func(args) or 0)
    except UsageError as e:
        print(f"rasp {args.command}: error: {e}", file=sys.stderr)
        return 2
    except RASPError as e:
        print(f"rasp {args.command}: {e}", file=sys.stderr)
        return 2
    except OSError as e:                 # a file the command cannot read or write
        where = f"{e.filename}: " if e.filename else ""
        print(f"rasp {args.command}: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    # `python -m rasp_cli.main`: run the package module, so that the commands' UsageError (from
    # rasp_cli.main) is the class caught here, not a second copy in __main__
    from rasp_cli.main import main as _main
    sys.exit(_main())
