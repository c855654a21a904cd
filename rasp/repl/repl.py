"""The rasp-lab REPL: the original RASP REPL (Weiss et al. 2021, ``tech-srl/RASP``,
``RASP_support/REPL.py``), faithfully, plus line editing, history, completion and analysis.

Input is read as the original reads it (:mod:`rasp.repl.reader`): prompt ``>> ``, continuation
``.. `` (two more spaces per ``def``) while a statement or block is unfinished; the original's
commands (``set [s-op|selector] example EXPR``, ``show [s-op|selector] example``,
``[s-op|selector] examples on|off``, ``full seq display on|off``, ``exit``) stand wherever a
statement may, in loaded files too. Values print exactly as the original prints them
(:func:`rasp.repl.display.format_named`)::

    >> reverse = aggregate(select(indices, length - indices - 1, ==), tokens);
         s-op: reverse
     \t Example: reverse("hello") = [o, l, l, e, h] (strings)

As in the original, a statement whose s-ops fail on the running example is rejected, the
library's names are reserved, ``load`` prints the values of the names a file defines and goes
on after a failing statement, and errors are printed as ``\t\t!!ignoring input:`` and the
message (ours carries ``file:line:col``). When standard input is not a terminal
(``rasp < session.rasp``) the prompts and everything else go to standard output exactly as
the original writes them, so a piped session reads like the original's.

On top of the original: prompt_toolkit line editing and persistent history (``$RASP_HISTORY``
or ``~/.rasp_history``), tab completion of names and command words, ``info NAME`` (layers,
heads, length, RASP-L verdict), ``set causal on|off``, ``names``, ``help`` and commands
injected from outside (the CLI injects ``compile``; ``rasp`` may not import ``compiler``).

Public API: :class:`Repl`, :func:`needs_more_input`, :func:`parse_literal`, :class:`ReplError`,
:func:`default_history_path`, :data:`COMMANDS`.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, TextIO

import numpy as np
from lark import Lark, Tree
from lark.exceptions import LarkError, UnexpectedInput

from ..analyses import measures, raspl
from .builtins import BUILTINS, CONSTANTS
from .display import (describe_value, example_value, format_application, format_atom,
                      format_error, format_example, format_function, format_named,
                      format_show_example, function_origin, short_value)
from ..ir import RASPError, Selector, SOp, Span
from ..parser import RASPSyntaxError, needs_more_input, parse
from .reader import CONTINUATION, PROMPT, Chunk, LineReader, match_command
from .runtime import ExitRequest
from .session import Session
from ..stdlib import STDLIB_FILES
from ..ops import OPS
from ..values import RASPFunction, StatementResult, kind_of

__all__ = ["Repl", "ReplError", "needs_more_input", "parse_literal", "default_history_path",
           "COMMANDS", "ExtraCommand", "CommandArgs"]

#: An injected command: called as ``fn(repl, argtext)`` where ``argtext`` is the text after the
#: command word; returns text to print (or ``None``). It may raise :class:`~rasp.ir.RASPError`
#: (printed as one message). Its docstring's first line is shown by ``help``.
ExtraCommand = Callable[["Repl", str], "str | None"]

#: Built-in commands: name -> list of (usage, one-line description) shown by ``help``.
COMMANDS: dict[str, list[tuple[str, str]]] = {
    "help": [("help", "list the commands")],
    "info": [("info NAME [vocab] [max_len]",
              "layers, heads per layer, length, attention/MLP ops, RASP-L verdict")],
    "set": [("set [s-op|selector] example EXPR",
             "change the running example(s): a string or a list, e.g. \"abc\", [1, 2, 3]"),
            ("set causal on|off", "RASP-L causal mode: every new select is causal")],
    "show": [("show [s-op|selector] example", "print the running example(s)"),
             ("show causal", "print the causal mode")],
    "examples": [("[s-op|selector] examples on|off",
                  "show new s-ops / selectors on the running example, or not")],
    "full": [("full seq display on|off", "show s-op values as input / output rows")],
    "names": [("names", "list the names defined in this session")],
    "exit": [("exit | quit | Ctrl-D", "leave the REPL")],
    "quit": [],
}

#: Command words offered by tab completion at the start of a line.
COMMAND_WORDS = ["help", "info", "names", "set example", "set s-op example",
                 "set selector example", "set causal", "show example", "show s-op example",
                 "show selector example", "show causal", "examples on", "examples off",
                 "s-op examples on", "s-op examples off", "selector examples on",
                 "selector examples off", "full seq display on", "full seq display off",
                 "exit", "quit"]

_NO_ARG_COMMANDS = ("help", "names", "exit", "quit")

#: A line of bare words (no operator, bracket, string or ``;``): ``ls``, ``show names``.
_BARE_WORDS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[ \t]+[A-Za-z_][A-Za-z0-9_]*)*")

#: The dialect's keywords (docs/language.md §1) and literals: a line of bare words holding one
#: may start a statement that goes on (``def f(x) {`` is not bare; ``for x in xs`` is).
_STATEMENT_KEYWORDS = frozenset(("def", "return", "for", "in", "if", "else", "and", "or",
                                 "not", "load", "True", "False"))

_KEYWORDS = ["def", "for", "in", "return", "if", "else", "not", "and", "or", "True", "False",
             "load", "select", "aggregate", "selector_width", "tokens", "indices", "length",
             "draw", "range", "zip", "len", "round", "indicator"]


class ReplError(RASPError):
    """A bad REPL command (unknown name, malformed example or arguments)."""


class _Cancel(Exception):
    """Ctrl-D on a continuation line: drop the pending input (as Ctrl-C does)."""


def default_history_path() -> str:
    """The history file: ``$RASP_HISTORY`` if set, else ``~/.rasp_history``."""
    return os.environ.get("RASP_HISTORY") or os.path.join(os.path.expanduser("~"),
                                                          ".rasp_history")


# --------------------------------------------------------------------------------------------
# Is the input complete?
# --------------------------------------------------------------------------------------------

def _strip_comments(text: str) -> str:
    out, in_string = [], False
    for line in text.split("\n"):
        buf = []
        for c in line:
            if c == '"':
                in_string = not in_string
            if c == "#" and not in_string:
                break
            buf.append(c)
        in_string = False
        out.append("".join(buf))
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# Literals for `set example` and command arguments (a small lark grammar; never eval)
# --------------------------------------------------------------------------------------------

_LITERAL_GRAMMAR = r"""
?start: args
args: NAME? value*
?value: STRING -> string
      | SIGNED_INT -> int
      | SIGNED_FLOAT -> float
      | "True" -> true
      | "False" -> false
      | "[" [value ("," value)*] "]" -> list
NAME: /(?!(True|False)\b)[A-Za-z_][A-Za-z0-9_]*/
STRING: /"[^"\n]*"/
SIGNED_FLOAT: /[+-]?\d+\.\d+/
SIGNED_INT: /[+-]?\d+/
%ignore /[ \t]+/
%ignore /;\s*$/
"""

_literal_parser = None


def _get_literal_parser():
    global _literal_parser
    if _literal_parser is None:
        _literal_parser = Lark(_LITERAL_GRAMMAR, parser="lalr")
    return _literal_parser


def _to_value(tree) -> Any:
    data = tree.data
    if data == "string":
        return str(tree.children[0])[1:-1]
    if data == "int":
        return int(tree.children[0])
    if data == "float":
        return float(tree.children[0])
    if data == "true":
        return True
    if data == "false":
        return False
    if data == "list":
        return [_to_value(c) for c in tree.children if c is not None]
    raise ReplError(f"unexpected value {tree}")  # pragma: no cover


def _parse_args(text: str) -> tuple[str | None, list[Any]]:
    try:
        tree = _get_literal_parser().parse(text.strip())
    except LarkError as e:
        col = e.column if isinstance(e, UnexpectedInput) else None
        where = f" (at column {col})" if isinstance(col, int) and col > 0 else ""
        raise ReplError(f"cannot read {text.strip()!r}{where}: expected a name, strings in "
                        'double quotes ("abc"), numbers or lists ([1, 2, 3])') from None
    name = None
    values = []
    for c in tree.children:
        if c is None:
            continue
        if isinstance(c, Tree):
            values.append(_to_value(c))
        else:
            name = str(c)
    return name, values


def parse_literal(text: str) -> Any:
    """Read one literal: a double-quoted string, an int, a float, ``True``/``False`` or a list
    of those (``[1, 2, 3]``). A trailing ``;`` is allowed. Uses a small lark grammar, never
    Python ``eval``.

    Raises:
        ReplError: for anything else (with what was expected).
    """
    name, values = _parse_args(text)
    if name is not None or len(values) != 1:
        raise ReplError(f"expected one value such as \"hello\" or [1, 2, 3], got {text.strip()!r}")
    return values[0]


@dataclass
class CommandArgs:
    """Arguments of ``info``/``compile``: ``NAME [vocab] [max_len]``.

    ``vocab`` (a sorted list of token values) defaults to the running example's distinct tokens;
    ``max_len`` (int) to the example's length. A string vocab ``"abc"`` means its characters.
    """

    name: str
    value: Any
    vocab: list
    max_len: int


# --------------------------------------------------------------------------------------------
# Completion
# --------------------------------------------------------------------------------------------

def _make_completer(repl: "Repl"):
    # start-up: prompt_toolkit loads only when this runs
    from prompt_toolkit.completion import Completer, Completion

    class _ReplCompleter(Completer):
        """Completes names of the session's environment, commands and keywords."""

        def get_completions(self, document, complete_event):
            word = document.get_word_before_cursor(WORD=False)
            if word and not (word[0].isalpha() or word[0] == "_"):
                word = ""
            before = document.text_before_cursor
            at_start = before.lstrip(" :") == word
            seen = set()
            for cand in repl.completion_candidates(command_position=at_start):
                if cand.startswith(word) and cand not in seen:
                    seen.add(cand)
                    yield Completion(cand, start_position=-len(word))

    return _ReplCompleter()


# --------------------------------------------------------------------------------------------
# The REPL
# --------------------------------------------------------------------------------------------

class Repl:
    """The RASP REPL.

    Args:
        session: a :class:`rasp.repl.session.Session` (a fresh one when ``None``, built with
            ``causal`` and ``base_library``). The REPL makes it behave as the original REPL:
            statements failing on the running example are rejected
            (``session.check_example``), the library's names are reserved
            (``session.reserve_library``, unless ``reserve_library=False``) and ``load``
            reports through the REPL (``session.reporter``).
        extra_commands: commands injected from outside, ``{name: fn}`` with
            ``fn(repl, argtext) -> str | None`` (see :data:`ExtraCommand`); the CLI injects
            ``compile``. They override nothing built in (a clash raises ``ValueError``).
        input, output: prompt_toolkit ``Input``/``Output`` (e.g. ``create_pipe_input()`` and
            ``DummyOutput()`` in tests); ``None`` uses the terminal, or the piped mode when
            standard input is not a TTY.
        stdout: where prompts (piped mode), results and errors are printed (default
            ``sys.stdout``).
        history_file: path of the persistent history (default :func:`default_history_path`);
            ``False`` disables the file (in-memory history).
        causal, base_library: for a session built here (see :class:`~rasp.repl.session.Session`);
            a broken base library reports each error and the REPL still starts.
        reserve_library: reserve the library's names, as the original (default ``True``).

    Attributes:
        session: the Session; ``session.example`` is the running example,
            ``session.display`` what is shown, ``session.causal`` the RASP-L mode.
        errors: number of errors reported so far.
    """

    def __init__(self, session: Session | None = None,
                 extra_commands: Mapping[str, ExtraCommand] | None = None,
                 input=None, output=None, stdout: TextIO | None = None,
                 stderr: TextIO | None = None, history_file: str | bool | None = None,
                 causal: bool = False, base_library: str | None = None,
                 reserve_library: bool = True):
        self.extra_commands: dict[str, ExtraCommand] = dict(extra_commands or {})
        for name in self.extra_commands:
            if name in COMMANDS:
                raise ValueError(f"extra command {name!r} clashes with a built-in command")
        self.input = input
        self.output = output
        self._stdout = stdout
        self.history_file = history_file
        self.errors = 0
        self._interactive = True
        self.completer = _make_completer(self)
        fresh = session is None
        if session is None:
            session = Session(causal=causal, base_library=base_library, reporter=self)
        self.session = session
        session.reporter = self
        session.check_example = True
        session.reserve_library = bool(reserve_library)
        session.output = self.write     # `draw(...)` prints through the REPL
        if fresh and base_library is not None:
            # as the original REPL, which runs `tokens = tokens_str;` after its library
            self.handle_text("tokens = tokens_str;", "<start>", quiet=True)

    # ---- output ------------------------------------------------------------------------
    @property
    def stdout(self) -> TextIO:
        return self._stdout if self._stdout is not None else sys.stdout

    @property
    def stderr(self) -> TextIO:
        """Errors go to :attr:`stdout`, between the results, as in the original."""
        return self.stdout

    def write(self, text: str = "", end: str = "\n") -> None:
        """Print ``text`` (and ``end``) to the REPL's output."""
        self.stdout.write(text + end)
        self.stdout.flush()

    def error(self, message: Any) -> None:
        """Print an error as the original frames a rejected input (counted in
        :attr:`errors`)."""
        self.errors += 1
        self.write(format_error(str(message)))

    # ---- the session's reporter (load) --------------------------------------------------
    def syntax_error(self, err: RASPError) -> None:
        """A loaded file's syntax error: printed at once, as the original."""
        self.error(err)

    def dump(self, items: list, silent: bool = False) -> None:
        """What a loaded file reports when it ends, as the original's
        ``filter_and_dump_prints``: the values of the names it defined (the last value of
        each, unless the file had errors), its ``show example`` s and its errors, in order.
        ``silent``: errors only (the base library)."""
        if not any(kind == "error" for kind, _ in items):
            seen: set[str] = set()
            kept = []
            for kind, r in reversed(items):
                if r.name is not None:
                    if r.name in seen:
                        continue
                    seen.add(r.name)
                kept.append((kind, r))
            items = kept[::-1]
        for kind, item in items:
            if kind == "error":
                self.error(item)
            elif not silent:
                self.show_result(item)

    # ---- state --------------------------------------------------------------------------
    @property
    def example(self) -> Any:
        """The running example of s-ops (a string or a list of atoms)."""
        return self.session.example

    @property
    def causal(self) -> bool:
        return self.session.causal

    def command_names(self) -> list[str]:
        return sorted(set(COMMANDS) | set(self.extra_commands))

    def completion_candidates(self, command_position: bool = True) -> list[str]:
        """Names for tab completion: command words (at the start of a line), then the
        environment's names and the dialect's keywords."""
        names: list[str] = []
        if command_position:
            names += COMMAND_WORDS + sorted(self.extra_commands)
        names += sorted(self.session.env.keys())
        names += _KEYWORDS
        return names

    # ---- display ------------------------------------------------------------------------
    def _example_tokens(self) -> list:
        return list(self.example)

    def eval_on_example(self, value: SOp | Selector) -> np.ndarray:
        """Evaluate an s-op (``[seq]``) or selector (``[query, key]``) on the running example.
        Each select keeps its own causal flag (selects created in causal mode are causal)."""
        return example_value(value, self._example_tokens())

    def format_value(self, name: str | None, value: Any, kind: str | None = None) -> str:
        """Text shown for a named value, as the original (:func:`rasp.repl.display.format_named`)."""
        return format_named(name, value, self.session.display)

    def show_result(self, r: StatementResult) -> None:
        """Print one statement's result as the original: a named value, an application's
        value (``\t =  [...]``) or ``show example``."""
        d = self.session.display
        try:
            if r.kind == "example":
                self.write(format_show_example(r.value, d))
            elif r.kind == "application":
                self.write(format_application(list(r.value), r.value.node, r.value.input, d))
            elif r.kind == "none":
                pass            # `draw` printed through session.output as it ran
            else:
                self.write(format_named(r.name, r.value, d))
        except RASPError as e:
            self.errors += 1
            self.write("\t!!statement executed, but result fails on evaluation:\n\t\t "
                       + str(e).replace("\n", "\n\t\t "))

    # ---- one complete input -------------------------------------------------------------
    def run_chunk(self, chunk: Chunk, filename: str) -> bool:
        """Run one unit read by the :class:`~rasp.repl.reader.LineReader` and print what it gives.
        Returns ``False`` when it asks to leave (``exit``), else ``True``. Errors are printed
        (never raised) and counted in :attr:`errors`."""
        if chunk.kind == "error":
            self.error(chunk.error)
            return True
        try:
            if chunk.extra:
                try:
                    name, argtext = self._match_command(chunk.text.strip())
                    out = self.run_command(name, argtext)
                except RASPError as e:
                    if e.span is None:
                        e.span = Span(filename, chunk.line, 1)
                    raise
                if out:
                    self.write(out)
                return True
            results = self.session.execute(chunk.text, filename=filename,
                                           first_line=chunk.line)
        except ExitRequest:
            return False
        except RASPError as e:
            for r in e.partial_results:  # statements of the input that ran before the error
                self.show_result(r)
            self.error(e)
            return True
        for r in results:
            self.show_result(r)
        return True

    def handle(self, text: str, filename: str = "<repl>") -> bool:
        """Run a complete input (statements and commands, possibly several lines) and print
        what it gives, as if typed. Returns ``False`` when it asks to leave."""
        return self.handle_text(text, filename)

    def handle_text(self, text: str, filename: str = "<repl>", quiet: bool = False) -> bool:
        lines = iter(text.split("\n"))
        reader = LineReader(lambda prompt: next(lines, None), filename, self._is_extra_command)
        for chunk in reader:
            if quiet:
                try:
                    self.session.execute(chunk.text, filename, chunk.line)
                except RASPError as e:
                    self.error(e)
                continue
            if not self.run_chunk(chunk, filename):
                return False
        if reader.pending:
            self._unfinished(reader, filename)
        return True

    def _unfinished(self, reader: LineReader, filename: str) -> None:
        start = reader.lineno - reader.pending.count("\n")
        try:
            parse("\n" * (start - 1) + reader.pending, filename)
        except RASPSyntaxError as e:
            self.error(e)

    def _is_extra_command(self, line: str) -> bool:
        """Whether a one-line input is a command of this REPL (not of the original, which
        the session runs): ``help``, ``info``, ``names``, ``set/show causal``, injected
        commands, or any command forced by a leading ``:``."""
        try:
            return self._match_command(line.strip()) is not None
        except ReplError:
            return True

    def _match_command(self, text: str) -> tuple[str, str] | None:
        """``(command, argtext)`` when ``text`` is a command of this REPL, else ``None`` (a
        statement, or one of the original's commands). A leading ``:`` forces a command;
        otherwise the first word must be a command and the line must not be an assignment or
        a call (so ``help = 3;`` stays a statement, and ``help;`` evaluates a variable named
        ``help`` if the user defined one).

        Raises:
            ReplError: a forced unknown command, or a line of bare words that is neither a
                command nor the start of a statement (``ls``, ``show names``, ``clear``: its
                first word is no name, no keyword; see :meth:`_unknown_words`), which the
                original would read on into the next line.
        """
        if "".join(text.split()).lower() == "#!causal":
            # the directive a printed causal program starts with (rasp.source), pasted into a
            # running REPL: it acts as in a file, i.e. `set causal on`
            return "set", "causal on"
        found = self._match_known_command(text)
        if found is None:
            self._unknown_words(text)
        return found

    def _unknown_words(self, text: str) -> None:
        """Raise :class:`ReplError` ("unknown command or name (try `help`)") when the one-line
        ``text`` is bare words without ``;`` (``ls``, ``show names``) that no statement can
        start with: no word is a keyword of the dialect, the first is not a defined name,
        and the line is none of the original's commands (``exit``, ``set example ...``)."""
        body = _strip_comments(text).strip()
        if not _BARE_WORDS.fullmatch(body) or match_command(body) is not None:
            return
        words = body.split()
        if any(w in _STATEMENT_KEYWORDS for w in words) or words[0] in self.session.env:
            return
        if words[0] in COMMANDS:          # `show names`: the command's forms
            hint = "; usage: " + " | ".join(u for u, _ in COMMANDS[words[0]])
        else:
            pool = [w.split()[0] for w in COMMAND_WORDS] + list(self.extra_commands) + [
                k for k in self.session.env.keys() if not k.startswith("_")]
            close = difflib.get_close_matches(words[0], list(dict.fromkeys(pool)), n=3,
                                              cutoff=0.75)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ReplError(f"unknown command or name `{body}` (try `help`){hint}")

    def _match_known_command(self, text: str) -> tuple[str, str] | None:
        text = _strip_comments(text).strip()
        forced = text.startswith(":")
        body = text[1:].lstrip() if forced else text
        body = body.rstrip()
        had_semicolon = body.endswith(";")
        while body.endswith(";"):
            body = body[:-1].rstrip()
        parts = body.split(None, 1)
        if not parts:
            return None
        word = parts[0]
        rest = parts[1].strip() if len(parts) > 1 else ""
        if word in ("exit()", "quit()"):
            word, rest = word[:-2], ""
        known = word in COMMANDS or word in self.extra_commands
        if forced:
            if not known:
                raise ReplError(f"unknown command {word!r}; known: "
                                + ", ".join(self.command_names()))
            return word, rest
        if not known or word in ("exit", "quit", "examples", "full"):
            return None   # the original's commands: the session runs them
        if word == "set":
            return (word, rest) if rest.split(None, 1)[:1] == ["causal"] else None
        if word == "show":
            return (word, rest) if rest == "causal" else None
        if not rest and had_semicolon and word in self.session_names_defined():
            return None   # `help;` evaluates the user's own variable of that name
        if word == "help" and len(rest.split()) == 1 and not rest.startswith(("=", "(", "[")):
            return word, rest     # `help NAME`, `help +` (a statement would be `help = ...;`)
        if rest and word in _NO_ARG_COMMANDS:
            return None   # `names = [1, 2];`, `help if c else d;`: statements
        if rest and (rest.startswith(("=", "(", ",", "[", ".")) or rest[0] in "+-*/%^<>!"):
            return None
        return word, rest

    def session_names_defined(self) -> set[str]:
        return set(self.session.env.keys())

    # ---- commands -----------------------------------------------------------------------
    def run_command(self, name: str, argtext: str) -> str | None:
        """Run a command by name (built-in or injected); returns the text to print."""
        if name in self.extra_commands:
            return self.extra_commands[name](self, argtext)
        return self._commands()[name](argtext)

    def _commands(self) -> dict[str, Callable[[str], "str | None"]]:
        return {"help": self.cmd_help, "info": self.cmd_info, "set": self.cmd_set,
                "show": self.cmd_show, "names": self.cmd_names, "exit": self.cmd_exit,
                "quit": self.cmd_exit, "examples": self.cmd_original,
                "full": self.cmd_original}

    def cmd_original(self, argtext: str) -> str | None:  # pragma: no cover - never forced
        raise ReplError("write this command without ':'")

    def cmd_help(self, argtext: str = "") -> str:
        if argtext.strip():
            return self.help_name(argtext.strip().rstrip(";").strip())
        lines = ["Statements end in ';' (def/for blocks end at their '}') and may span "
                 "several lines ('.. ' prompt).",
                 "Commands (a leading ':' forces one of ours: ':info x' = 'info x'):"]
        rows = [r for k in ("help", "info", "set", "show", "examples", "full", "names")
                for r in COMMANDS[k]]
        for name, fn in sorted(self.extra_commands.items()):
            doc = (fn.__doc__ or "").strip().splitlines()
            usage = getattr(fn, "usage", name)   # an injected function may carry its usage
            rows.append((usage, doc[0] if doc else ""))
        rows += COMMANDS["exit"]
        rows.append(('load "file";', "(a statement) run file.rasp, print and import its names"))
        rows += [(f'load "{lib}";', what) for lib, what in STDLIB_FILES.items()
                 if lib != "rasplib"]
        rows.append(("draw(sop);", "(a statement) the computation flow on the example"))
        w = max(len(u) for u, _ in rows)
        lines += [f"  {u.ljust(w)}  {d}" for u, d in rows]
        lines.append("Built-in functions: " + ", ".join(sorted(BUILTINS)) + ".")
        lines.append("Built-in s-ops: " + ", ".join(sorted(
            k for k, v in CONSTANTS.items() if not isinstance(v, bool))) + "; operators: "
            + " ".join(sorted({op.symbol for op in OPS.values() if op.symbol.isascii()
                               and not op.symbol.isalpha()})) + ", and, or, not, x if c else y.")
        lines.append("The library (rasplib): " + ", ".join(sorted(
            k for k in self.session.base_env.vars if not k.startswith("_"))) + ".")
        lines.append("help NAME explains a built-in, a library or your own function, a "
                     "command, an operator or a name you defined.")
        lines.append(f"History: {self._history_desc()}. Tab completes names and commands.")
        return "\n".join(lines)

    def help_name(self, name: str) -> str:
        """``help NAME``: what a built-in function, built-in s-op, operator, command, library
        or user function, or user name is; "did you mean" for a near miss."""
        if name in BUILTINS:
            return f"{name}: built-in function. {BUILTINS[name][1]}"
        if name in CONSTANTS:
            v = CONSTANTS[name]
            return f"{name}: built-in {describe_value(v)}"
        ops = [op for op in OPS.values() if name in (op.symbol, op.name)]
        if ops:
            return "; ".join(f"{op.symbol}: {op.name}, {op.arity} operand(s), elementwise on "
                             "s-ops (values [batch, seq]) and on atoms" for op in ops)
        if name in COMMANDS or name in self.extra_commands:
            rows = COMMANDS.get(name) or [(name, (self.extra_commands[name].__doc__ or "")
                                           .strip().splitlines()[0])]
            return "\n".join(f"{u}: {d}" for u, d in rows)
        env = self.session.env
        if name in env:
            v = env[name]
            if isinstance(v, RASPFunction):
                where = function_origin(v)
                return f"{format_function(v)} (defined in {where})"
            return f"{name}: {describe_value(v)}"
        pool = (list(BUILTINS) + list(CONSTANTS) + list(COMMANDS) + list(self.extra_commands)
                + [k for k in env.keys() if not k.startswith("_")])
        close = difflib.get_close_matches(name, list(dict.fromkeys(pool)), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ReplError(f"no built-in, command, operator or name {name!r}{hint}")

    def _history_desc(self) -> str:
        if self.history_file is False:
            return "in memory only"
        return f"kept in {self.history_file or default_history_path()}"

    def cmd_exit(self, argtext: str = "") -> str:
        raise ExitRequest()

    cmd_quit = cmd_exit

    def cmd_names(self, argtext: str = "") -> str:
        names = self.user_names()
        if not names:
            return "  (no names defined yet)"
        return "  " + ", ".join(names)

    def user_names(self) -> list[str]:
        """Names defined in this session (the base environment's library names excluded)."""
        return sorted(self.session.names())

    def cmd_show(self, argtext: str) -> str:
        if argtext.strip().rstrip(";").strip() == "causal":
            return f"  causal (RASP-L) mode: {'on' if self.causal else 'off'}"
        raise ReplError("usage: show [s-op|selector] example | show causal")

    def cmd_set(self, argtext: str) -> str:
        what, _, rest = argtext.strip().partition(" ")
        if what == "causal":
            sw = rest.rstrip(";").strip().lower()
            if sw not in ("on", "off"):
                raise ReplError("usage: set causal on|off")
            self.session.causal = sw == "on"
            extra = (" (every new select is causal: key index <= query index)"
                     if sw == "on" else "")
            return f"  causal (RASP-L) mode: {sw}{extra}"
        raise ReplError("usage: set [s-op|selector] example EXPR | set causal on|off")

    def parse_name_args(self, argtext: str, command: str) -> CommandArgs:
        """Read ``NAME [vocab] [max_len]`` (for ``info`` and injected commands such as
        ``compile``). Raises :class:`ReplError` for a missing/unknown name or bad arguments."""
        name, values = _parse_args(argtext)
        if name is None:
            raise ReplError(f"usage: {command} NAME [vocab] [max_len], e.g. "
                            f'{command} reverse "abc" 8')
        env = self.session.env
        if name not in env:
            raise ReplError(f"unknown name {name!r}")
        vocab, max_len = None, None
        for v in values:
            if isinstance(v, int) and not isinstance(v, bool) and max_len is None:
                if v < 1:
                    raise ReplError(f"max_len must be a positive int, got {v}")
                max_len = v
            elif isinstance(v, (str, list)) and vocab is None:
                vocab = list(v)
            else:
                raise ReplError(f"unexpected argument {format_atom(v)}; usage: "
                                f"{command} NAME [vocab] [max_len]")
        ex = self._example_tokens()
        if vocab is None:
            vocab = list(ex)
        try:
            vocab = sorted(set(vocab))
        except TypeError:
            raise ReplError("the vocab's tokens must all be of one type") from None
        if not vocab:
            raise ReplError("the vocab must not be empty")
        return CommandArgs(name=name, value=env[name], vocab=vocab,
                           max_len=max_len if max_len is not None else len(ex))

    def cmd_info(self, argtext: str) -> str:
        a = self.parse_name_args(argtext, "info")
        v = a.value
        kind = kind_of(v)
        if kind not in ("sop", "selector"):
            what = {"function": "a function", "list": "a list", "dict": "a dict",
                    "atom": "an atom", "none": "nothing"}[kind]
            hint = (f" (call it on s-ops first: x = {a.name}(tokens, ...); info x)"
                    if kind == "function" else "")
            return (f"  {a.name} is {what}, not an s-op or a selector; info measures s-ops "
                    f"and selectors{hint}")
        lines = [f"  {a.name}: {'s-op' if kind == 'sop' else 'selector'}"]
        try:
            d = measures.measure(v).to_dict()
            lines.append(f"  layers: {d['layers']}   heads per layer: {d['heads_per_layer']}   "
                         f"max heads: {d['max_heads']}")
            lines.append(f"  length: {d['length']} operations   attention ops: "
                         f"{d['attention_ops']}   MLP ops: {d['mlp_ops']}")
            lines.append(f"  selects: {d['selects']}   aggregates: {d['aggregates']}"
                         f"   selector widths: {d['selector_widths']}   maps: "
                         f"{d['maps']}   sequence maps: {d['sequence_maps']}")
        except RASPError as e:
            lines.append(f"  measures: cannot measure: {e}")
        try:
            rep = raspl.check(v, vocab=set(a.vocab), max_seq_len=a.max_len, causal=None)
            viol = rep.violations
            verdict = "valid RASP-L" if rep.valid else "not valid RASP-L"
            lines.append(f"  RASP-L: {verdict} (vocab {short_value(a.vocab, None)}, max_len "
                         f"{a.max_len}, {len(viol)} violation{'s' if len(viol) != 1 else ''})")
            for x in viol:
                where = f" at {x.span}" if x.span else ""
                lines.append(f"    rule {x.rule}: {x.operation}{where}: {x.message}")
            for note in rep.undecided:
                lines.append(f"    undecided: {note}")
        except RASPError as e:
            lines.append(f"  RASP-L: cannot check: {e}")
        return "\n".join(lines)

    # ---- loops --------------------------------------------------------------------------
    def banner(self) -> str:
        return ("rasp-lab REPL: RASP (Weiss et al. 2021) + RASP-L (Zhou et al. 2023)\n"
                f"running example: {format_example(self.example)}"
                f"{'   causal (RASP-L) mode: on' if self.causal else ''}\n"
                "type help for the commands, exit or Ctrl-D to leave")

    def run(self) -> int:
        """Run the loop until ``exit`` or end of input. Interactive (prompt_toolkit) unless
        no ``input`` was given and standard input is not a TTY: then the piped mode.

        Returns the exit status: 0, or 1 in the piped mode when an error was reported.
        """
        if self.input is None and not _stdin_is_tty():
            return self.run_lines(sys.stdin)
        return self.run_interactive()

    def run_lines(self, lines: Iterable[str], filename: str = "<stdin>") -> int:
        """Piped mode: read ``lines`` as the original REPL reads its standard input, writing
        its prompts (``>> ``, ``.. ``) to the output before each line as Python's ``input``
        does, the results and errors after them, and a newline at the end of input (not after
        ``exit``). An unfinished statement at the end of input is reported. Returns 1 if an
        error was reported, else 0."""
        self._interactive = False
        start_errors = self.errors
        it = iter(lines)

        def read_line(prompt: str) -> str | None:
            self.write(prompt, end="")
            return next(it, None)

        reader = LineReader(read_line, filename, self._is_extra_command)
        while True:
            chunk = reader.next_chunk()
            if chunk is None:
                self.write("")
                if reader.pending:
                    self._unfinished(reader, filename)
                break
            if not self.run_chunk(chunk, filename):
                break
        return 1 if self.errors > start_errors else 0

    def run_interactive(self) -> int:
        """Interactive mode with prompt_toolkit: line editing, persistent history, tab
        completion; the original's ``>> `` and ``.. `` prompts. Ctrl-C drops the input typed
        so far (or interrupts a running statement, which is then rolled back); Ctrl-D on an
        empty ``>>`` line leaves, on a ``..`` line drops the pending input as Ctrl-C does.
        Returns 0."""
        # start-up: prompt_toolkit loads only when this runs
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, InMemoryHistory

        self._interactive = True
        if self.history_file is False:
            history = InMemoryHistory()
        else:
            path = self.history_file or default_history_path()
            try:
                d = os.path.dirname(os.path.abspath(path))
                os.makedirs(d, exist_ok=True)
                with open(path, "ab"):     # writable? (FileHistory appends on every line)
                    pass
                history = FileHistory(path)
            except OSError as e:
                self.write(f"  (history not saved: {e.strerror or e}: {path})")
                history = InMemoryHistory()
        ps = PromptSession(history=history, completer=self.completer, input=self.input,
                           output=self.output, complete_while_typing=False)

        def read_line(prompt: str) -> str | None:
            try:
                return ps.prompt(prompt)
            except EOFError:
                if prompt.startswith(CONTINUATION):
                    raise _Cancel() from None
                return None

        self.write(self.banner())
        reader = LineReader(read_line, "<repl>", self._is_extra_command)
        while True:
            try:
                chunk = reader.next_chunk()
            except (KeyboardInterrupt, _Cancel):
                continue                    # the pending input is dropped
            if chunk is None:
                break
            try:
                keep = self.run_chunk(chunk, "<repl>")
            except KeyboardInterrupt:       # Ctrl-C during a long evaluation: rolled back
                self.write("  interrupted (the statement was rolled back)")
                keep = True
            if not keep:
                break
        return 0


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------

def _stdin_is_tty() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, AttributeError):  # closed or replaced stdin
        return False
