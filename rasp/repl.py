"""The rasp-lab REPL: an interactive read-eval-print loop for the RASP dialect.

Modelled on the original RASP REPL (Weiss et al. 2021, ``tech-srl/RASP``,
``RASP_support/REPL.py``): prompt ``>> ``, continuation prompt ``.. `` while a statement, ``def``
or ``for`` block is incomplete, a running example (``"hello"`` by default) on which every new
s-op is shown::

    >> reverse = aggregate(select(indices, length - indices - 1, ==), tokens);
         s-op: reverse
             Example: reverse("hello") = [o, l, l, e, h] (strings)

and selectors shown as a ``[query, key]`` matrix with the example's tokens as key labels on top
and query labels on the left. Errors are printed as one message and survived; a failed statement
leaves the environment unchanged (guaranteed by :class:`rasp.runtime.Session`).

On top of the original: line editing and persistent history (prompt_toolkit ``FileHistory`` at
``$RASP_HISTORY`` or ``~/.rasp_history``), tab completion of names and commands, ``info NAME``
(layers, heads per layer, program length, attention/MLP ops, RASP-L verdict with violations),
``set causal on|off`` (RASP-L mode), and commands injected from outside (the CLI injects
``compile NAME [vocab] [max_len]``, because ``rasp`` may not import ``compiler``).

When standard input is not a terminal (``rasp < prog.rasp``, ``echo ... | rasp``) the REPL reads
statements from it without prompts, prints results and exits with status 1 if any statement
failed, else 0.

Public API: :class:`Repl`, :func:`needs_more_input`, :func:`parse_literal`, :class:`ReplError`,
:func:`default_history_path`, :data:`COMMANDS`.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, TextIO

import numpy as np
from lark import Lark, Tree
from lark.exceptions import LarkError, UnexpectedInput

from . import measures, raspl
from .display import example_value, format_atom, format_example, format_result, short_value
from .ir import RASPError, Selector, SOp
from .parser import needs_more_input
from .runtime import Session
from .values import kind_of

__all__ = ["Repl", "ReplError", "needs_more_input", "parse_literal", "default_history_path",
           "COMMANDS", "ExtraCommand", "CommandArgs"]

PROMPT = ">> "
CONTINUATION = ".. "

#: An injected command: called as ``fn(repl, argtext)`` where ``argtext`` is the text after the
#: command word; returns text to print (or ``None``). It may raise :class:`~rasp.ir.RASPError`
#: (printed as one message). Its docstring's first line is shown by ``help``.
ExtraCommand = Callable[["Repl", str], "str | None"]

#: Built-in commands: name -> list of (usage, one-line description) shown by ``help``.
COMMANDS: dict[str, list[tuple[str, str]]] = {
    "help": [("help", "list the commands")],
    "info": [("info NAME [vocab] [max_len]",
              "layers, heads per layer, length, attention/MLP ops, RASP-L verdict")],
    "set": [('set example "text" | [1, 2]', "change the running example"),
            ("set causal on|off", "RASP-L causal mode: every new select is causal")],
    "show": [("show example | causal", "print the running example / the causal mode")],
    "names": [("names", "list the names defined in this session")],
    "exit": [("exit | quit | Ctrl-D", "leave the REPL")],
    "quit": [],
}

_NO_ARG_COMMANDS = ("help", "names", "exit", "quit")

_KEYWORDS = ["def", "for", "in", "return", "if", "else", "not", "and", "or", "True", "False",
             "load", "select", "aggregate", "selector_width", "tokens", "indices", "length",
             "draw", "range", "zip", "len", "round", "indicator"]


class ReplError(RASPError):
    """A bad REPL command (unknown name, malformed example or arguments)."""


class _Exit(Exception):
    """Raised by the exit command to end the loop."""


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
        session: a :class:`rasp.runtime.Session` (a fresh one, non-causal, when ``None``).
        extra_commands: commands injected from outside, ``{name: fn}`` with
            ``fn(repl, argtext) -> str | None`` (see :data:`ExtraCommand`); the CLI injects
            ``compile``. They override nothing built in (a clash raises ``ValueError``).
        input, output: prompt_toolkit ``Input``/``Output`` (e.g. ``create_pipe_input()`` and
            ``DummyOutput()`` in tests); ``None`` uses the terminal, or the non-interactive mode
            when standard input is not a TTY.
        stdout: where results are printed (default ``sys.stdout``).
        stderr: where errors go in the non-interactive mode (default ``sys.stderr``); in the
            interactive mode errors are printed to ``stdout`` between the results.
        history_file: path of the persistent history (default :func:`default_history_path`);
            ``False`` disables the file (in-memory history).

    Attributes:
        session: the Session; ``session.example`` is the running example,
            ``session.causal`` the RASP-L mode.
        errors: number of inputs that failed so far.
    """

    def __init__(self, session: Session | None = None, extra_commands: Mapping[str, ExtraCommand] | None = None,
                 input=None, output=None, stdout: TextIO | None = None,
                 stderr: TextIO | None = None, history_file: str | bool | None = None):
        if session is None:
            session = Session()
        self.session = session
        self.extra_commands: dict[str, ExtraCommand] = dict(extra_commands or {})
        for name in self.extra_commands:
            if name in COMMANDS:
                raise ValueError(f"extra command {name!r} clashes with a built-in command")
        self.input = input
        self.output = output
        self._stdout = stdout
        self._stderr = stderr
        self.history_file = history_file
        self.errors = 0
        self._interactive = True
        self.completer = _make_completer(self)
        session.output = self.write     # `draw(...)` prints through the REPL

    # ---- output ------------------------------------------------------------------------
    @property
    def stdout(self) -> TextIO:
        return self._stdout if self._stdout is not None else sys.stdout

    @property
    def stderr(self) -> TextIO:
        if self._interactive:
            return self.stdout
        return self._stderr if self._stderr is not None else sys.stderr

    def write(self, text: str = "") -> None:
        """Print ``text`` (and a newline) to the REPL's output."""
        print(text, file=self.stdout, flush=True)

    def error(self, message: str) -> None:
        """Print an error message (counted in :attr:`errors`)."""
        self.errors += 1
        print(f"  !! {message}", file=self.stderr, flush=True)

    # ---- state --------------------------------------------------------------------------
    @property
    def example(self) -> Any:
        """The running example (a string or a list of atoms)."""
        return self.session.example

    @property
    def causal(self) -> bool:
        return self.session.causal

    def command_names(self) -> list[str]:
        return sorted(set(COMMANDS) | set(self.extra_commands))

    def completion_candidates(self, command_position: bool = True) -> list[str]:
        """Names for tab completion: commands (at the start of a line), then the environment's
        names and the dialect's keywords."""
        names: list[str] = []
        if command_position:
            names += self.command_names()
        names += sorted(self.session.env.keys())
        names += _KEYWORDS
        return names

    # ---- display ------------------------------------------------------------------------
    def _example_tokens(self) -> list:
        ex = self.example
        return list(ex)

    def eval_on_example(self, value: SOp | Selector) -> np.ndarray:
        """Evaluate an s-op (``[seq]``) or selector (``[query, key]``) on the running example.
        Each select keeps its own causal flag (selects created in causal mode are causal)."""
        return example_value(value, self._example_tokens())

    def format_value(self, name: str | None, value: Any, kind: str | None = None) -> str:
        """Text shown for a statement's value on the running example
        (:func:`rasp.display.format_result`)."""
        return format_result(name, value, self.example, kind)

    # ---- one complete input -------------------------------------------------------------
    def handle(self, text: str, filename: str = "<repl>") -> bool:
        """Run one complete input: a command or one or more statements; print the results.

        Returns ``False`` when the input asks to leave (``exit``), else ``True``. Errors are
        printed (never raised) and counted in :attr:`errors`.
        """
        stripped = _strip_comments(text).strip()
        if not stripped:
            return True
        try:
            cmd = self._match_command(stripped)
            if cmd is not None:
                name, argtext = cmd
                out = self.run_command(name, argtext)
                if out:
                    self.write(out)
                return True
            results = self.session.execute(text, filename=filename)
        except _Exit:
            return False
        except RASPError as e:
            # earlier statements of a multi-statement input ran: show them, then the error
            self._show_results(e.partial_results)
            self.error(str(e))
            return True
        except RecursionError:
            self.error("recursion too deep (a recursive definition?); input ignored")
            return True
        self._show_results(results)
        return True

    def _show_results(self, results) -> None:
        for r in results:
            shown = self.format_value(r.name, r.value, r.kind)
            if shown:
                self.write(shown)

    def _match_command(self, text: str) -> tuple[str, str] | None:
        """``(command, argtext)`` when ``text`` is a REPL command, else ``None`` (a statement).
        A leading ``:`` forces a command; otherwise the first word must be a command and the
        line must not be an assignment or a call (so ``help = 3;`` stays a statement, and
        ``help;`` evaluates a variable named ``help`` if the user defined one)."""
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
        if not known:
            return None
        if not rest and had_semicolon and word in self.session_names_defined():
            return None   # `help;` evaluates the user's own variable of that name
        if rest and word in _NO_ARG_COMMANDS:
            return None   # `names = [1, 2];`, `help if c else d;`: statements
        if rest and (rest.startswith(("=", "(", ",", "[", ".")) or rest[0] in "+-*/%^<>!"):
            return None
        if word == "set" and not rest.startswith(("example", "causal")):
            return None
        if word == "show" and not rest.startswith(("example", "causal")):
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
                "quit": self.cmd_exit}

    def cmd_help(self, argtext: str = "") -> str:
        lines = ["Statements end in ';' (def/for blocks end at their '}') and may span "
                 "several lines ('.. ' prompt).",
                 "Commands (a leading ':' is optional: ':info x' = 'info x'):"]
        rows = [r for k in ("help", "info", "set", "show", "names") for r in COMMANDS[k]]
        for name, fn in sorted(self.extra_commands.items()):
            doc = (fn.__doc__ or "").strip().splitlines()
            usage = getattr(fn, "usage", name)   # an injected function may carry its usage
            rows.append((usage, doc[0] if doc else ""))
        rows += COMMANDS["exit"]
        rows.append(('load "file";', "(a statement) run file.rasp, import its names"))
        rows.append(("draw(sop);", "(a statement) the computation flow on the example"))
        w = max(len(u) for u, _ in rows)
        lines += [f"  {u.ljust(w)}  {d}" for u, d in rows]
        lines.append(f"History: {self._history_desc()}. Tab completes names and commands.")
        return "\n".join(lines)

    def _history_desc(self) -> str:
        if self.history_file is False:
            return "in memory only"
        return f"kept in {self.history_file or default_history_path()}"

    def cmd_exit(self, argtext: str = "") -> str:
        raise _Exit()

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
        what = argtext.strip().rstrip(";").strip()
        if what == "example":
            return f"  running example: {format_example(self.example)}"
        if what == "causal":
            return f"  causal (RASP-L) mode: {'on' if self.causal else 'off'}"
        raise ReplError("usage: show example | show causal")

    def cmd_set(self, argtext: str) -> str:
        what, _, rest = argtext.strip().partition(" ")
        rest = rest.strip()
        if what == "example":
            if not rest:
                raise ReplError('usage: set example "hello"  or  set example [1, 2, 3]')
            ex = parse_literal(rest)
            if isinstance(ex, (int, float, bool)):
                raise ReplError(f"the example must be a string or a list, not {format_atom(ex)}")
            if len(ex) == 0:
                raise ReplError("the example must not be empty")
            if isinstance(ex, list):
                kinds = {("num" if isinstance(x, (int, float)) and not isinstance(x, bool)
                          else type(x).__name__) for x in ex}
                if len(kinds) > 1 or any(isinstance(x, list) for x in ex):
                    raise ReplError("the example's tokens must all be of one type "
                                    "(all strings, all numbers or all booleans)")
            self.session.example = ex
            return f"  running example: {format_example(ex)}"
        if what == "causal":
            sw = rest.rstrip(";").strip().lower()
            if sw not in ("on", "off"):
                raise ReplError("usage: set causal on|off")
            self.session.causal = sw == "on"
            extra = (" (every new select is causal: key index <= query index)"
                     if sw == "on" else "")
            return f"  causal (RASP-L) mode: {sw}{extra}"
        raise ReplError('usage: set example "text" | set example [1, 2, 3] | set causal on|off')

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
            return (f"  {a.name} is a {kind}, not an s-op; info measures s-ops "
                    "(apply a function to s-ops first)")
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
        no ``input`` was given and standard input is not a TTY, in which case statements are
        read from stdin without prompts.

        Returns the exit status: 0, or 1 in the non-interactive mode when an input failed.
        """
        if self.input is None and not _stdin_is_tty():
            return self.run_lines(sys.stdin)
        return self.run_interactive()

    def run_lines(self, lines: Iterable[str], filename: str = "<stdin>") -> int:
        """Non-interactive mode: read statements from ``lines`` (no prompts), print results.
        Returns 1 if any input failed, else 0."""
        self._interactive = False
        start_errors = self.errors
        buf = ""
        for line in lines:
            buf += line if line.endswith("\n") else line + "\n"
            if self._match_line_command(buf) or not needs_more_input(buf):
                keep = self.handle(buf, filename=filename)
                buf = ""
                if not keep:
                    break
        else:
            if _strip_comments(buf).strip():
                self.handle(buf, filename=filename)   # the parser reports what is missing
        return 1 if self.errors > start_errors else 0

    def _match_line_command(self, buf: str) -> bool:
        """A REPL command is one line: complete as soon as it is typed."""
        s = _strip_comments(buf).strip()
        if not s or "\n" in s:
            return False
        try:
            return self._match_command(s) is not None
        except ReplError:
            return True

    def run_interactive(self) -> int:
        """Interactive mode with prompt_toolkit: line editing, persistent history, tab
        completion; ``>> `` and ``.. `` prompts. Ctrl-C drops the current input, Ctrl-D
        leaves. Returns 0."""
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
        self.write(self.banner())
        buf = ""
        while True:
            try:
                line = ps.prompt(CONTINUATION if buf else PROMPT)
            except KeyboardInterrupt:
                buf = ""
                continue
            except EOFError:
                if buf.strip():
                    self.handle(buf)
                break
            buf += line + "\n"
            if self._match_line_command(buf) or not needs_more_input(buf):
                text, buf = buf, ""
                try:
                    keep = self.handle(text)
                except KeyboardInterrupt:   # Ctrl-C during a long evaluation
                    self.write("  interrupted")
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
