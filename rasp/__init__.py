"""rasp-lab's RASP dialect: the IR, the Python API, the batched interpreter.

Quick use::

    from rasp import tokens, indices, length, select, aggregate, evaluate
    flip = select(indices, length - indices - 1, "==")
    reverse = aggregate(flip, tokens).named("reverse")
    evaluate(reverse, ["hello", "world"])   # -> [batch, seq] array
    evaluate(reverse, ["hi", "world"])      # ragged: a list of [seq] arrays
    reverse("hello")                        # one input -> ["o", "l", "l", "e", "h"]
    rasp.draw(reverse)                      # the computation flow (inline in a notebook)

``rasp.run_source(text)`` runs a program in the dialect and returns its environment
(``rasp.run_file(path)``, ``rasp.Session`` for the REPL, ``rasp.load_library(name)``).

``import rasp`` (and so ``import rasp.ir``) loads the language alone: the IR, the operations
and the interpreter. The REPL front end (:mod:`rasp.repl`: sessions, drawing, value display)
and the parser (with ``lark``) load on first use of a name that needs them
(``rasp.Session``, ``rasp.draw``, ``rasp.RASPSyntaxError``, ...: :data:`_LAZY`);
``tests/test_architecture.py`` checks it.
"""

import importlib
import sys

from .ir import *  # noqa: F401,F403
from .ir import __all__ as _ir_all
from .interpreter import Evaluator, evaluate, to_batch
from .tracr_import import TracrImportError, from_tracr

__all__ = list(_ir_all) + ["evaluate", "Evaluator", "to_batch", "format_sop_value",
                           "format_selector_value", "run_source", "run_file", "load_library",
                           "Session", "RASPSyntaxError", "from_tracr", "TracrImportError", "draw"]

#: public names reached on first use (a module-level ``__getattr__``, PEP 562), with the module
#: that owns each: the REPL front end and the parser stay unloaded until a name asks for them
_LAZY = {
    "format_sop_value": "rasp.repl.display", "format_selector_value": "rasp.repl.display",
    "draw": "rasp.repl.draw", "svg": "rasp.repl.draw",
    "Session": "rasp.repl.session", "load_library": "rasp.repl.session",
    "run_file": "rasp.repl.session", "run_source": "rasp.repl.session",
    "RASPSyntaxError": "rasp.parser",
}

#: subpackages and modules reached as attributes (``rasp.repl.session`` after ``import rasp``)
_LAZY_MODULES = ("repl", "parser")


def __getattr__(name: str):
    """A public name of :data:`_LAZY` (its module imported now, the name kept in this module
    for the next lookup) or a module of :data:`_LAZY_MODULES`.

    Raises:
        AttributeError: any other name.
    """
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _LAZY_MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_LAZY_MODULES))


def _notebook_svg(node):
    """An s-op's or selector's computation flow on the default example, as SVG, for Jupyter's
    display (None when it cannot be drawn: Jupyter then shows the text repr)."""
    # start-up: the drawing (the REPL front end) loads when a notebook first shows a node
    from .repl.draw import svg
    try:
        return svg(node)
    except (RASPError, ValueError, TypeError):  # noqa: F405
        return None


def _register_notebook_display() -> None:
    """In IPython / Jupyter, s-ops and selectors render as their computation-flow picture
    (IPython's formatter registry; nothing happens outside IPython)."""
    if "IPython" not in sys.modules:
        return
    # start-up: IPython loads only when this runs
    from IPython import get_ipython
    shell = get_ipython()
    if shell is None:
        return
    formatter = shell.display_formatter.formatters["image/svg+xml"]
    for cls in (SOp, Selector):  # noqa: F405
        formatter.for_type(cls, _notebook_svg)


_register_notebook_display()
