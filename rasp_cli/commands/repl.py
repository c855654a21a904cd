"""`rasp repl [--causal] [--no-history] [FILE...]`: the interactive RASP REPL (also what `rasp`
runs with no subcommand).

FILEs are run into the session first (like ``python -i``), then the REPL starts; a FILE with a
``#!causal`` directive switches the session to RASP-L causal mode. When standard
input is not a terminal, statements are read from it without prompts (``rasp < prog.rasp``);
the exit status is then 1 if a statement failed.

The CLI injects the ``compile NAME [vocab] [max_len]`` command into the REPL (``rasp`` may not
import ``compiler``; this module may).
"""

from __future__ import annotations

import os
import sys

import compiler
from rasp.repl.display import format_sop_value
from rasp.equality import values_equal
from rasp.ir import RASPError
from rasp.parser import directives

#: the one-line help of `rasp repl` (shown by `rasp --help` without importing the command)
HELP = 'the interactive RASP REPL (the default when no subcommand is given)'


def add_arguments(p) -> None:
    p.description = (
        "The interactive RASP REPL: prompt '>> ', continuation '.. ', running "
        "example \"hello\", history in $RASP_HISTORY or ~/.rasp_history. Type "
        "'help' inside for the commands. Reads statements from stdin when it is "
        "not a terminal.")
    p.add_argument("files", nargs="*", metavar="FILE",
                   help=".rasp files to run into the session before the REPL starts")
    p.add_argument("--causal", action="store_true",
                   help="start in RASP-L causal mode (every select is causal)")
    p.add_argument("--no-history", action="store_true",
                   help="do not read or write the history file")
    p.add_argument("--allow-library-override", action="store_true",
                   help="let statements assign the names of the RASP library (count, sort, "
                        "...); the original REPL reserves them, and so do we by default")
    p.add_argument("--base-library", metavar="FILE",
                   help="a .rasp file to use as the base library instead of rasplib (run as "
                        "the original runs its library: every error is reported, then the "
                        "REPL starts)")


def compile_command(repl, argtext: str) -> str:
    """compile to transformer weights, show the size, check on the example"""
    a = repl.parse_name_args(argtext, "compile")
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from rasp.repl.repl import ReplError
    from rasp.ir import SOp
    if not isinstance(a.value, SOp):
        raise ReplError(f"{a.name} is not an s-op; compile takes an s-op")
    cm = compiler.compile_program(a.value, a.vocab, a.max_len, causal=repl.causal)
    stats = dict(cm.stats)
    lines = [f"  compiled {a.name} (vocab {_fmt(a.vocab)}, max_len {a.max_len}"
             f"{', causal' if repl.causal else ''})"]
    order = ["layers", "heads", "d_model", "d_head", "mlp_hidden", "params", "nonzero_params",
             "compile_seconds"]
    keys = [k for k in order if k in stats] + [k for k in stats if k not in order]
    if keys:
        w = max(len(k) for k in keys)
        for k in keys:
            v = stats[k]
            if isinstance(v, float):
                v = f"{v:.3g}"
            lines.append(f"    {k.ljust(w)}  {v}")
    ex = list(repl.example)
    if len(ex) <= a.max_len and all(t in set(a.vocab) for t in ex):
        try:
            got = cm.run([ex])[0]
            want = repl.eval_on_example(a.value)
            same = len(got) == len(want) and values_equal(list(got), list(want))
            lines.append(f"  compiled model on the example: {format_sop_value(got)} "
                         f"({'matches' if same else 'DIFFERS from'} the interpreter)")
        except RASPError as e:
            lines.append(f"  compiled model on the example failed: {e}")
    return "\n".join(lines)


compile_command.usage = "compile NAME [vocab] [max_len]"


def _fmt(v) -> str:
    return "[" + ", ".join(f'"{x}"' if isinstance(x, str) else str(x) for x in v) + "]"


def _is_causal_file(text: str) -> bool:
    return "causal" in directives(text)


def run(args) -> int:
    """Start the REPL (``args``: this subcommand's options).

    Returns 0; 2 when a FILE or the base library cannot be read, or a FILE fails; in the
    piped mode 1 when an error was reported.
    """
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from rasp.repl.repl import Repl
    files = list(args.files)
    if args.base_library is not None and not os.path.isfile(args.base_library):
        print(f"rasp repl: error: cannot read the base library {args.base_library}: no such "
              "file", file=sys.stderr)
        return 2
    try:
        repl = Repl(extra_commands={"compile": compile_command},
                    history_file=False if args.no_history else None, causal=args.causal,
                    base_library=args.base_library,
                    reserve_library=not args.allow_library_override)
    except RASPError as e:
        print(f"rasp repl: {e}", file=sys.stderr)
        return 2
    session = repl.session
    for path in files:
        # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
        from rasp_model.files import FileReadError, read_text
        try:                            # a regular file only: a named pipe never blocks
            text = read_text(path, "a RASP file")
        except (OSError, FileReadError) as e:
            print(f"rasp repl: error: cannot read {path}: {getattr(e, 'strerror', None) or e}",
                  file=sys.stderr)
            return 2
        # FILEs run as programs (like `python -i`): strictly, not checked on the example
        reporter, check = session.reporter, session.check_example
        session.reporter, session.check_example = None, False
        try:
            session.execute(text, filename=path)
        except RASPError as e:
            print(f"rasp repl: {e}", file=sys.stderr)
            return 2
        finally:
            session.reporter, session.check_example = reporter, check
        if not session.causal and _is_causal_file(text):
            session.causal = True     # a RASP-L file (#!causal) puts the session in causal mode
    if files and sys.stdin is not None and sys.stdin.isatty():
        print("loaded " + ", ".join(os.path.basename(p) for p in files))
    try:
        return repl.run()
    except KeyboardInterrupt:
        return 130
