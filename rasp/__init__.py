"""rasp-lab's RASP dialect: the IR, the Python API, the batched interpreter.

Quick use::

    from rasp import tokens, indices, length, select, aggregate, evaluate
    flip = select(indices, length - indices - 1, "==")
    reverse = aggregate(flip, tokens).named("reverse")
    evaluate(reverse, ["hello", "world"])   # -> [batch, seq] array

``rasp.run_source(text)`` (the parser, once available) returns the environment of a program.
"""

from .ir import *  # noqa: F401,F403
from .ir import __all__ as _ir_all
from .interpreter import Evaluator, evaluate, format_selector_value, format_sop_value, to_batch

__all__ = list(_ir_all) + ["evaluate", "Evaluator", "to_batch", "format_sop_value",
                           "format_selector_value"]
