"""Errors of the dialect and source positions (re-exported by :mod:`rasp.ir`).

Every error the toolkit raises derives from :class:`RASPError`; ``str(err)`` reads
``file:line:col: message`` when the source position is known.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Span", "RASPError", "RASPTypeError", "RASPValueError", "RASPNameError",
           "RASPResourceError"]


@dataclass(frozen=True)
class Span:
    """A source position: 1-based ``line`` and ``column`` of the start of an expression.

    ``file`` is the file name (``"<repl>"``, ``"<string>"`` or a path); ``text`` the source text
    of the expression (possibly truncated) for error messages.
    """

    file: str | None
    line: int
    column: int
    end_line: int | None = None
    end_column: int | None = None
    text: str | None = None

    def __str__(self) -> str:
        return f"{self.file or '<string>'}:{self.line}:{self.column}"


#: Longest source excerpt an error message shows (characters of the offending line); the rest
#: is cut, marked with ``…``.
MAX_EXCERPT = 160


def safe_excerpt(text: str, column: int | None = None,
                 width: int = MAX_EXCERPT) -> tuple[str, int | None]:
    """A source line as an error message may print it: at most about ``width`` displayed
    characters around ``column`` (1-based; cuts marked ``…``), every control character (a
    terminal escape, a bell, a carriage return) written as a Python escape (``\\x1b``), so an
    excerpt never drives the terminal. Returns ``(excerpt, the column's 1-based position in
    the excerpt, or None without a column)``. Time and memory are proportional to ``width``."""
    col = None if column is None else max(1, int(column))
    at = 0 if col is None else min(col - 1, len(text))
    lo = max(0, at - width // 2)
    hi = min(len(text), lo + width)
    lo = max(0, min(lo, hi - width))

    def shown(ch: str) -> str:
        if ch == "\t" or (ch.isprintable() and ch not in "\x85\u2028\u2029"):
            return ch
        return ch.encode("unicode_escape").decode("ascii")

    pieces = [shown(ch) for ch in text[lo:hi]]
    # escapes are up to 10 characters wide: keep the displayed width near ``width``
    while sum(map(len, pieces)) > width and len(pieces) > 1:
        if at - lo > (hi - lo) - (at - lo):
            pieces.pop(0)
            lo += 1
        else:
            pieces.pop()
            hi -= 1
    head = "…" if lo > 0 else ""
    out = head + "".join(pieces) + ("…" if hi < len(text) else "")
    if col is None:
        return out, None
    return out, len(head) + sum(len(p) for p in pieces[:max(0, at - lo)]) + 1


class RASPError(Exception):
    """Base error of the dialect. ``span`` (optional) locates the offending source text.

    ``str(err)`` is ``file:line:col: message`` when a span is known, else the message.
    """

    def __init__(self, message: str, span: Span | None = None):
        super().__init__(message)
        self.message = message
        self.span = span
        #: statements of the same input that ran before the failing one (set by a Session)
        self.partial_results: list = []

    def __str__(self) -> str:
        if self.span is not None:
            loc = str(self.span)
            extra = (f"\n    {safe_excerpt(self.span.text, self.span.column)[0]}"
                     if self.span.text else "")
            return f"{loc}: {self.message}{extra}"
        return self.message


class RASPTypeError(RASPError):
    """A value of the wrong type (averaging strings, mixed sequences, wrong arity, ...)."""


class MixedBatchError(RASPTypeError):
    """Raised inside an evaluation when the sequences of one batch would hold values of
    different types (strings in some sequences, numbers in others: an aggregate's default of
    another type, or ``x if c else y`` with a string and a number branch). Each sequence is
    valid on its own, so :class:`rasp.interpreter.Evaluator` then evaluates the batch sequence
    by sequence, as the original RASP evaluates one input at a time."""


class RASPValueError(RASPError):
    """A value that is out of range or otherwise invalid."""


class RASPNameError(RASPError):
    """An unknown name, or an assignment to a reserved name."""


class RASPResourceError(RASPValueError):
    """An evaluation refused because it would exceed a documented resource limit (memory of a
    ``[batch, query, key]`` selector, length of a string or list, size of an integer, ...).
    The message names the limit and how to raise it (see ``docs/language.md``, "Limits")."""
