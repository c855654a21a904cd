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
"""

import sys

from .ir import *  # noqa: F401,F403
from .ir import __all__ as _ir_all
from .repl.display import format_selector_value, format_sop_value
from .interpreter import Evaluator, evaluate, to_batch

from .repl.draw import draw
from .parser import RASPSyntaxError
from .repl.session import Session, load_library, run_file, run_source
from .tracr_import import TracrImportError, from_tracr
from .repl.draw import svg

__all__ = list(_ir_all) + ["evaluate", "Evaluator", "to_batch", "format_sop_value",
                           "format_selector_value", "run_source", "run_file", "load_library",
                           "Session", "RASPSyntaxError", "from_tracr", "TracrImportError", "draw"]


def _notebook_svg(node):
    """An s-op's or selector's computation flow on the default example, as SVG, for Jupyter's
    display (None when it cannot be drawn: Jupyter then shows the text repr)."""
    try:
        return svg(node)
    except (RASPError, ValueError, TypeError):
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
