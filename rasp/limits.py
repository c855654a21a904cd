"""Resource limits of the interpreter: every growing operation is refused with a
:class:`~rasp.errors.RASPResourceError` (naming the limit) before it exhausts memory or time.

Raise a limit by assigning the module attribute (``rasp.limits.MAX_ITERATIONS = 10**7``) or, for
the memory budget, with the environment variable ``RASP_MEMORY_BUDGET_MB``. The limits are
listed in ``docs/language.md`` ("Limits").
"""

from __future__ import annotations

import os
import sys

__all__ = ["MAX_CALL_DEPTH", "MAX_COLLECTION", "MAX_EXPR_DEPTH", "MAX_SELECTOR_DEPTH", "MAX_INT_BITS", "MAX_ITERATIONS",
           "MAX_LINE_CHARS", "MAX_BRACKET_DEPTH", "MAX_STATEMENT_TOKENS", "MAX_SOURCE_BYTES",
           "MEMORY_BUDGET_BYTES", "memory_budget_bytes", "max_int_digits", "allow_int_digits"]

#: Nested user-function calls (recursion is not part of RASP).
MAX_CALL_DEPTH = 60

#: Parse-tree levels one statement may nest (``1 + 1 + ... + 1`` with this many operators, or
#: brackets inside brackets); deeper statements are refused before they run. Chains of
#: statements are not limited.
MAX_EXPR_DEPTH = 200

#: Source bounds checked before parsing, in time proportional to the bound (a scan of the text
#: that stops at the first excess; :func:`rasp.parser.parse`): characters of one line, levels
#: of brackets ``( [ {`` open at once (nested lists, dicts, calls, ``def`` and ``for`` bodies),
#: and tokens of one statement (a list literal of 25,000 items is ~50,000 tokens).
MAX_LINE_CHARS = 100_000
#: Largest program file ``load`` / ``rasp run`` / ``rasp repl FILE`` reads, in bytes.
MAX_SOURCE_BYTES = 16 * 1024 * 1024
MAX_BRACKET_DEPTH = 2_000
MAX_STATEMENT_TOKENS = 50_000

#: Levels of ``and``/``or``/``not`` one selector may combine (``s = s and select(...)`` in a
#: chain of statements); deeper selectors are refused when built. Chains of s-op statements
#: (maps, aggregates) are not limited.
MAX_SELECTOR_DEPTH = 200

#: Longest list or string a program may build (atoms: ``+``, ``*``, ``range``; s-op string
#: values: ``+`` of strings), in elements / characters.
MAX_COLLECTION = 1_000_000

#: Largest integer atom a program may compute, in bits (``x = x * x`` in a loop).
MAX_INT_BITS = 100_000

def max_int_digits() -> int:
    """Decimal digits of the largest integer atom (:data:`MAX_INT_BITS` bits)."""
    return MAX_INT_BITS * 30103 // 100000 + 1


def allow_int_digits() -> None:
    """Let Python convert integers of up to :data:`MAX_INT_BITS` bits to and from text: its own
    limit (4,300 digits, ``sys.set_int_max_str_digits``) is below it, so ``2 ^ 20000`` was a
    legal value that could not be displayed. Raised, never lowered; called at import and
    wherever a large integer is made (the attribute may have been raised since)."""
    need = max_int_digits() + 1
    current = sys.get_int_max_str_digits()
    if current and current < need:
        sys.set_int_max_str_digits(need)


#: Loop iterations plus comprehension items one statement may run (nested comprehensions over
#: large ranges).
MAX_ITERATIONS = 1_000_000

#: Memory the interpreter may use for one batch's ``[batch, query, key]`` selector work and
#: s-op values, and for the atom values (strings, lists, dicts, integers) one statement builds,
#: in bytes (default 1 GiB; environment variable ``RASP_MEMORY_BUDGET_MB``).
def positive_from_environment(name: str, default: float, unit: str) -> float:
    """The environment variable ``name`` as a positive finite number (``default`` when unset);
    a value that is not one is ignored with one warning line on stderr (a bad variable must
    not break every command). ``unit`` names it in the warning (``"megabytes"``)."""
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value > 0 and value < float("inf")):
        print(f"rasp: {name}={text!r} is not a positive number of {unit}; using {default:g}",
              file=sys.stderr)
        value = default
    return value


def _budget_from_environment(default_mb: float = 1024.0) -> int:
    """``RASP_MEMORY_BUDGET_MB`` in bytes (:func:`positive_from_environment`)."""
    return int(positive_from_environment("RASP_MEMORY_BUDGET_MB", default_mb, "megabytes")
               * 2 ** 20)


MEMORY_BUDGET_BYTES = _budget_from_environment()
allow_int_digits()


def memory_budget_bytes() -> int:
    """The current memory budget in bytes (:data:`MEMORY_BUDGET_BYTES`)."""
    return MEMORY_BUDGET_BYTES
