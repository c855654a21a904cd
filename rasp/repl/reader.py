"""The original RASP REPL's line reader and its commands (Weiss et al. 2021, tech-srl/RASP,
``RASP_support/REPL.py``: ``LineReader.get_input_tree`` and the grammar's ``replstatement``).

Input (typed, piped or a loaded file) is read line by line. Lines are collected until they
make a complete unit: a REPL command, or statements the parser accepts. While the text is
unfinished (an open bracket or block, a missing ``;``; blank and comment-only lines) the next
line continues it, after the continuation prompt ``..`` (indented two spaces per ``def`` in
the text, as the original). Text the parser rejects before its end is a syntax error; the
next line starts afresh. Both REPL modes and ``load`` read this way, so a REPL command may
stand wherever a statement may, in files too.

The original's commands (a command ends at its line's end, no ``;`` needed; a trailing ``;``
or ``# comment`` is allowed):

- ``set [s-op|selector] example EXPR`` (EXPR any expression, e.g. a name bound to a string),
- ``show [s-op|selector] example``,
- ``[s-op|selector] examples on|off``, ``full seq display on|off``,
- ``exit``, ``exit()``, ``quit``, ``quit()``.

Public API: :class:`Command`, :func:`match_command`, :class:`Chunk`, :class:`LineReader`,
:data:`PROMPT`, :data:`CONTINUATION`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ..parser import RASPSyntaxError, parse

__all__ = ["Command", "match_command", "Chunk", "LineReader", "PROMPT", "CONTINUATION",
           "NEEDS_MORE", "strip_comment"]

#: Units longer than this many lines are parsed only when a line ends in ``;`` or ``}`` (the
#: original parses after every line; this keeps reading a long unit linear in its length).
_EAGER_LINES = 50

PROMPT = ">> "
CONTINUATION = ".. "

#: :func:`match_command`'s answer for ``set example`` with an unfinished expression.
NEEDS_MORE = "needs more"


@dataclass(frozen=True)
class Command:
    """One of the original REPL's commands.

    ``word`` is ``set_example``, ``show_example``, ``examples``, ``full_seq_display`` or
    ``exit``; ``subset`` is ``"both"``, ``"s-op"`` or ``"selector"``; ``switch`` is ``True``
    for ``on``; ``expr`` is the source of ``set example``'s expression and ``expr_offset`` its
    character offset in the unit's text (for error positions)."""

    word: str
    subset: str = "both"
    switch: bool | None = None
    expr: str | None = None
    expr_offset: int = 0


def strip_comment(text: str) -> str:
    """``text`` without its ``#`` comments (strings hold no ``#`` comment; they have no
    escapes and do not span lines)."""
    # one alternation, no repeated group: linear time and constant memory per character (the
    # old ``((?:[^"#]|"[^"]*")*)`` kept ~150 bytes of backtracking state per character of a
    # line); a closed string is kept, a comment or an unclosed quote ends the line's text
    return _COMMENT_OR_STRING.sub(lambda m: m.group() if m.group().endswith('"') and
                                  len(m.group()) > 1 and m.group()[0] == '"' else "", text)


_COMMENT_OR_STRING = re.compile(r'"[^"\n]*"|#[^\n]*|"[^\n]*')


_SUBSET = r"(?:(?P<subset>s-op|selector)\s+)?"
_END = r"\s*;?\s*\Z"
_SET = re.compile(r"\s*set\s+" + _SUBSET + r"example(?![A-Za-z0-9_])(?P<expr>.*)\Z", re.S)
_SHOW = re.compile(r"\s*show\s+" + _SUBSET + r"example" + _END)
_EXAMPLES = re.compile(r"\s*" + _SUBSET + r"examples\s+(?P<switch>on|off)" + _END)
_FULL = re.compile(r"\s*full\s+seq\s+display\s+(?P<switch>on|off)" + _END)
_EXIT = re.compile(r"\s*(?:exit|quit)(?:\s*\(\s*\))?" + _END)


def _expression_needs_more(expr: str) -> bool:
    """Whether the expression ``expr`` is unfinished (an open bracket, a trailing operator):
    it fails to parse at its end for a reason other than the statement's missing ``;``."""
    try:
        parse(expr + ";", "<command>")
    except RASPSyntaxError:
        try:
            parse(expr, "<command>")
        except RASPSyntaxError as e:
            return e.at_end and "';'" not in e.expected
    return False


def match_command(text: str) -> Command | str | None:
    """The original REPL command that ``text`` (a complete unit, possibly several lines) is,
    :data:`NEEDS_MORE` for ``set example`` whose expression is not finished yet, or ``None``
    when ``text`` is not a command (then it is statements)."""
    bare = strip_comment(text)
    m = _SET.match(bare)
    if m:
        expr = m.group("expr")
        body = expr.strip()
        if body.endswith(";"):
            body = body[:-1].rstrip()
        if not body or _expression_needs_more(body):
            return NEEDS_MORE
        return Command("set_example", m.group("subset") or "both", None, expr,
                       m.start("expr"))
    m = _SHOW.match(bare)
    if m:
        return Command("show_example", m.group("subset") or "both")
    m = _EXAMPLES.match(bare)
    if m:
        return Command("examples", m.group("subset") or "both", m.group("switch") == "on")
    m = _FULL.match(bare)
    if m:
        return Command("full_seq_display", "both", m.group("switch") == "on")
    if _EXIT.match(bare):
        return Command("exit")
    return None


@dataclass
class Chunk:
    """A complete unit of input: ``kind`` is ``"command"`` (``command`` set; an injected
    command of the REPL has ``command=None`` and ``extra=True``), ``"statements"`` or
    ``"error"`` (``error``: the syntax error). ``text`` holds its lines and ``line`` the
    number of its first line in the whole input (1-based)."""

    kind: str
    text: str
    line: int
    command: Command | None = None
    error: RASPSyntaxError | None = None
    extra: bool = False
    tree: Any = None


class LineReader:
    """Reads :class:`Chunk` s from lines, as the original REPL does.

    Args:
        read_line: ``read_line(prompt) -> str | None`` gives the next line (``None`` at the
            end of input); ``prompt`` is ``">> "`` for a fresh unit, ``".. "`` (plus two
            spaces per ``def`` in the text so far) for a continuation.
        filename: for the positions of syntax errors.
        is_extra_command: ``f(line) -> bool`` says whether a one-line unit is a command of
            the REPL itself (``info``, ``help``, ...); read no further lines then.

    Attributes: ``lineno`` (lines read so far), ``pending`` (the unfinished text left when
    the input ended; empty when none).
    """

    def __init__(self, read_line: Callable[[str], str | None], filename: str = "<stdin>",
                 is_extra_command: Callable[[str], bool] | None = None, first_line: int = 1):
        self.read_line = read_line
        self.filename = filename
        self.is_extra_command = is_extra_command
        self.lineno = first_line - 1
        self.pending = ""

    @classmethod
    def from_text(cls, text: str, filename: str, first_line: int = 1) -> "LineReader":
        """A reader over ``text``'s lines (no prompts)."""
        lines = iter(text.split("\n"))
        return cls(lambda prompt: next(lines, None), filename, first_line=first_line)

    def __iter__(self) -> Iterator[Chunk]:
        while True:
            chunk = self.next_chunk()
            if chunk is None:
                return
            yield chunk

    def next_chunk(self) -> Chunk | None:
        """The next complete unit, or ``None`` at the end of input (the unfinished text, if
        any, is then in :attr:`pending`)."""
        lines: list[str] = []
        nest_text = ""
        start = self.lineno + 1
        while True:
            prompt = (CONTINUATION + "  " * nest_text.split().count("def")) if lines else PROMPT
            line = self.read_line(prompt)
            if line is None:
                self.pending = "\n".join(lines) if strip_comment("\n".join(lines)).strip() \
                    else ""
                return None
            self.lineno += 1
            line = line.rstrip("\r\n")
            if line.strip().startswith("#") and not (
                    line.strip().startswith("#!") and self.is_extra_command is not None
                    and self.is_extra_command(line)):
                line = ""          # as the original: a comment line is an empty line (a
                #                    directive the REPL knows, ``#!causal``, is its command)
            lines.append(line)
            nest_text += " " + line
            text = "\n".join(lines)
            if not text.strip():
                continue           # blank lines: the unit has not started yet
            if (len(lines) == 1 or not "\n".join(lines[:-1]).strip()) and \
                    self.is_extra_command is not None and self.is_extra_command(line):
                return Chunk("command", text, start, extra=True)
            cmd = match_command(text)
            if cmd == NEEDS_MORE:
                continue
            if cmd is not None:
                return Chunk("command", text, start, command=cmd)
            if len(lines) > _EAGER_LINES and not strip_comment(text).rstrip().endswith(
                    (";", "}")):
                continue           # a long unit: parse only where it may end (linear time)
            try:
                tree = parse("\n" * (start - 1) + text, self.filename)
            except RASPSyntaxError as e:
                if e.at_end:
                    continue
                return Chunk("error", text, start, error=e)
            return Chunk("statements", text, start, tree=tree)
