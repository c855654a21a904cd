"""The parser of the RASP dialect: source text -> lark parse tree.

The grammar (``rasp/grammar.lark``) is LALR(1) and follows the original RASP grammar of
Weiss et al. 2021 (tech-srl/RASP ``RASP_support/RASP.g4``), including its operator precedence;
see ``docs/language.md``. The statement interpreter is :mod:`rasp.repl.runtime`.

Public API:

* :func:`parse` ``(text, filename="<string>") -> lark.Tree`` (``start`` with one child per
  top-level statement; nodes carry ``meta.line`` / ``meta.column`` positions).
* :class:`RASPSyntaxError` — every syntax error, never a lark exception.
* :func:`directives` — the file directives (``#!causal``) at the top of a program.
* :func:`needs_more_input` — whether REPL input is an unfinished statement.
"""

from __future__ import annotations

import functools
import gc
import os
import re

import lark
from lark.exceptions import (LarkError, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput,
                             UnexpectedToken)

from . import limits
from .errors import safe_excerpt
from .ir import RASPError, Span

__all__ = ["parse", "RASPSyntaxError", "directives", "needs_more_input", "GRAMMAR_PATH",
           "KEYWORDS"]

GRAMMAR_PATH = os.path.join(os.path.dirname(__file__), "grammar.lark")

#: Words of the grammar; they cannot be used as names.
KEYWORDS = frozenset({"def", "return", "for", "in", "if", "else", "and", "or", "not", "load"})

# readable names of lark's terminal names, for error messages
_TERMINALS = {
    "SEMICOLON": "';'", "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'",
    "LBRACE": "'{'", "RBRACE": "'}'", "COMMA": "','", "COLON": "':'", "EQUAL": "'='",
    "PLUS": "'+'", "MINUS": "'-'", "STAR": "'*'", "SLASH": "'/'", "PERCENT": "'%'",
    "CIRCUMFLEX": "'^'", "LESSTHAN": "'<'", "MORETHAN": "'>'", "NAME": "a name",
    "INT": "an integer", "FLOAT": "a float", "STRING": "a string", "$END": "end of input",
}


class RASPSyntaxError(RASPError):
    """A syntax error: ``str(err)`` is ``file:line:col: message`` followed by the offending
    source line and a caret under the column.

    Attributes: ``span`` (:class:`~rasp.ir.Span` with ``file``, ``line``, ``column`` and
    ``text`` = the offending source line), ``message``, ``expected`` (set of readable token
    names, possibly empty).
    """

    def __init__(self, message: str, span: Span | None = None, expected=None,
                 at_end: bool = False):
        super().__init__(message, span)
        self.expected = set(expected or ())
        self.at_end = at_end

    def __str__(self) -> str:
        if self.span is None:
            return self.message
        out = f"{self.span}: {self.message}"
        if self.span.text is not None:
            shown, at = safe_excerpt(self.span.text, self.span.column)
            out += f"\n    {shown}\n    {' ' * max(0, (at or 1) - 1)}^"
        return out


#: One token of the dialect for :func:`check_bounds`: a string, a comment, a name or number, a
#: newline, or any other single character.
_TOKEN = re.compile(r'"[^"\r\n]*"|#[^\r\n]*|[A-Za-z_0-9.]+|\n|\S')


def check_bounds(text: str, filename: str = "<string>") -> None:
    """Refuse a source that exceeds :data:`rasp.limits.MAX_LINE_CHARS`,
    :data:`~rasp.limits.MAX_BRACKET_DEPTH` or :data:`~rasp.limits.MAX_STATEMENT_TOKENS`
    before it is parsed. One pass over the tokens that stops at the first excess, so the time
    and memory are proportional to the bound, not to the text (a 1 MB line, 100,000 nested
    brackets or a 300,000-item list are refused in milliseconds).

    Raises:
        RASPSyntaxError: naming the bound, the limit and where it was passed.
    """
    line, line_start, depth, tokens = 1, 0, 0, 0
    max_line, max_depth, max_tokens = (limits.MAX_LINE_CHARS, limits.MAX_BRACKET_DEPTH,
                                       limits.MAX_STATEMENT_TOKENS)

    def refuse(what: str, pos: int) -> None:
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        snippet = text[line_start:min(end, line_start + 2 * max_line)]
        raise RASPSyntaxError(what, Span(filename, line, pos - line_start + 1, text=snippet))

    for m in _TOKEN.finditer(text):
        tok, pos = m.group(), m.start()
        if tok == "\n":
            if pos - line_start > max_line:
                refuse(f"line longer than {max_line:,} characters (rasp.limits.MAX_LINE_CHARS)",
                       line_start + max_line)
            line, line_start = line + 1, pos + 1
            continue
        if pos - line_start > max_line:
            refuse(f"line longer than {max_line:,} characters (rasp.limits.MAX_LINE_CHARS)",
                   line_start + max_line)
        if tok[0] == "#":
            continue
        tokens += 1
        if tok in "([{":
            depth += 1
            if depth > max_depth:
                refuse(f"brackets nested more than {max_depth} levels deep "
                       f"(rasp.limits.MAX_BRACKET_DEPTH); split the statement", pos)
        elif tok in ")]}":
            depth = max(0, depth - 1)
        if tok in (";", "{", "}"):
            tokens = 0
        elif tokens > max_tokens:
            refuse(f"statement longer than {max_tokens:,} tokens "
                   f"(rasp.limits.MAX_STATEMENT_TOKENS); split it into several statements", pos)
    if len(text) - line_start > max_line:
        refuse(f"line longer than {max_line:,} characters (rasp.limits.MAX_LINE_CHARS)",
               line_start + max_line)


@functools.lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    with open(GRAMMAR_PATH, encoding="utf-8") as f:
        grammar = f.read()
    return lark.Lark(grammar, parser="lalr", propagate_positions=True,
                     maybe_placeholders=True, start="start", cache=True)


def _readable(names) -> list[str]:
    out = []
    for n in names:
        if n in _TERMINALS:
            out.append(_TERMINALS[n])
            continue
        try:
            pattern = _parser().get_terminal(n).pattern
            if pattern.type == "str":
                out.append(repr(pattern.value))
                continue
        except (KeyError, AttributeError):
            pass
        out.append(n)
    return sorted(set(out))


def _line_text(text: str, line: int) -> str:
    lines = text.splitlines() or [""]
    if 1 <= line <= len(lines):
        return lines[line - 1].rstrip("\r\n")
    return ""


def _convert(err: UnexpectedInput, text: str, filename: str) -> RASPSyntaxError:
    line = getattr(err, "line", None)
    col = getattr(err, "column", None)
    if not isinstance(line, int) or line < 1:
        # at end of input: point just past the last character
        lines = text.splitlines() or [""]
        line, col = len(lines), len(lines[-1]) + 1
    if not isinstance(col, int) or col < 1:
        col = 1
    expected: list[str] = []
    at_end = False
    if isinstance(err, UnexpectedToken):
        tok = err.token
        expected = _readable(err.expected or err.accepts or ())
        if tok.type == "$END":
            at_end = True
            what = "unexpected end of input"
            lines = text.splitlines() or [""]
            line, col = len(lines), len(lines[-1]) + 1
        else:
            what = f"unexpected {tok.value!r}"
            if tok.value in KEYWORDS:
                what += " (a keyword)"
        if "';'" in expected:
            expected = ["';'"] + [e for e in expected if e != "';'"]
        if expected:
            shown = ", ".join(expected[:10]) + (" ..." if len(expected) > 10 else "")
            msg = f"syntax error: {what}; expected {shown}"
        else:
            msg = f"syntax error: {what}"
        if "';'" in expected:
            msg += " (a missing ';'? statements end with ';')"
    elif isinstance(err, UnexpectedCharacters):
        ch = text[err.pos_in_stream] if 0 <= err.pos_in_stream < len(text) else "?"
        if ch == '"':
            msg = "syntax error: unterminated string (strings are double-quoted, on one line)"
        elif ch == "'":
            msg = "syntax error: unexpected character \"'\" (strings use double quotes)"
        else:
            msg = f"syntax error: unexpected character {ch!r}"
    elif isinstance(err, UnexpectedEOF):
        expected = _readable(err.expected or ())
        msg = "syntax error: unexpected end of input"
        at_end = True
        lines = text.splitlines() or [""]
        line, col = len(lines), len(lines[-1]) + 1
    else:  # pragma: no cover - lark has no other UnexpectedInput kinds
        msg = f"syntax error: {err}"
    span = Span(filename, line, col, text=_line_text(text, line))
    return RASPSyntaxError(msg, span, expected, at_end)


def parse(text: str, filename: str = "<string>") -> lark.Tree:
    """Parse a program (a sequence of statements) into a lark ``Tree`` rooted at ``start``.

    Args:
        text: the program source.
        filename: the name shown in error positions (``file:line:col``).

    Returns:
        a ``lark.Tree`` whose children are the statements (``expr_stmt``, ``assign``, ``load``,
        ``funcdef``, ``forloop``); every subtree has ``meta.line`` / ``meta.column``.

    Raises:
        RASPSyntaxError: on any syntax error (lark's exceptions never escape), with the line,
            column and offending source line.
    """
    if not isinstance(text, str):
        raise RASPSyntaxError(f"source must be text, got {type(text).__name__}")
    check_bounds(text, filename)
    # The parse tree of a large file is millions of objects without reference cycles: the
    # cyclic garbage collector's full passes over them made parsing superlinear in the file's
    # size. It is paused while lark builds the tree (restored after).
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as e:
        raise _convert(e, text, filename) from None
    except LarkError as e:  # pragma: no cover - defensive
        raise RASPSyntaxError(f"syntax error: {e}", Span(filename, 1, 1)) from None
    except RecursionError:  # pragma: no cover - LALR is iterative; defensive
        raise RASPSyntaxError("program nested too deeply", Span(filename, 1, 1)) from None
    finally:
        if gc_was_on:
            gc.enable()
    check_depth(tree, filename)
    return tree


def check_depth(tree: lark.Tree, filename: str = "<string>") -> None:
    """Refuse a statement nested deeper than :data:`rasp.limits.MAX_EXPR_DEPTH` parse-tree
    levels (for example ``x + 1 + 1 + ...`` with hundreds of operators in one expression).

    The evaluator walks expressions recursively; this documented limit, checked iteratively
    before anything runs, keeps it far from Python's recursion limit, so a deep expression is
    a clear error with its position rather than a crash at an unknown depth. Chains of
    *statements* (``x = x + 1;`` repeated) have no depth limit.

    Raises:
        RASPSyntaxError: naming the depth, the limit and the statement's line:column.
    """
    limit = limits.MAX_EXPR_DEPTH
    stack = [(st, 1) for st in tree.children if isinstance(st, lark.Tree)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            meta = node.meta
            line = getattr(meta, "line", 1) if not meta.empty else 1
            col = getattr(meta, "column", 1) if not meta.empty else 1
            raise RASPSyntaxError(
                f"expression nested more than {limit} levels deep (rasp.limits.MAX_EXPR_DEPTH); "
                f"split it into several statements", Span(filename, line, col))
        stack.extend((c, depth + 1) for c in node.children if isinstance(c, lark.Tree))


def needs_more_input(text: str) -> bool:
    """Whether ``text`` is an unfinished program: it fails to parse only because the input
    ended (an open bracket, string-free block or a missing ``;``). Blank text is complete;
    any other syntax error is complete too (running it reports the error)."""
    if not text.strip():
        return False
    try:
        parse(text, "<repl>")
    except RASPSyntaxError as e:
        return e.at_end
    return False


_DIRECTIVE = re.compile(r"^\s*#\s*(?:!|pragma\s+)\s*(\w+)\s*$")


def directives(text: str) -> set[str]:
    """The directives of a program: lines ``#!NAME`` (or ``#pragma NAME``) before the first
    statement, e.g. ``#!causal`` for RASP-L causal mode. Returns lower-cased names."""
    found: set[str] = set()
    for raw in text.splitlines():
        s = raw.strip()
        if not s:
            continue
        if not s.startswith("#"):
            break
        m = _DIRECTIVE.match(s)
        if m:
            found.add(m.group(1).lower())
    return found
