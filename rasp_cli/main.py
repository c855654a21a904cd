"""The `rasp` command line. `rasp` alone opens the REPL; `rasp --help` lists the subcommands.

Each subcommand lives in its own module under :mod:`rasp_cli.commands` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` (called with the parsed
arguments, returning an exit code). Exit codes: 0 success, 1 a failed check (mismatch, invalid
program), 2 a usage error or bad input. Errors of the toolkit are printed as one clear message,
never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys

from rasp.ir import RASPError

import rasp_cli.commands as _commands


class UsageError(Exception):
    """Bad input detected by a subcommand: printed, exit code 2."""


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


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse usage errors: exit 2 with the usage line
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rasp",
        description="rasp-lab: think like a transformer. Write RASP/RASP-L programs, measure "
                    "them, compile them to transformer weights, train transformers with six "
                    "positional encodings and probe their attention. With no subcommand, "
                    "opens the REPL.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for mod in sorted(pkgutil.iter_modules(_commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"rasp_cli.commands.{mod.name}")
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:                       # the REPL is the default
        args = parser.parse_args(["repl"])
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
