"""Stage 1: value sets (Tracr's ``basis_inference``), computed once per compilation.

Runs :func:`compiler.float_spread.float_spread_pass` (the value sets of
:mod:`rasp.analyses.value_sets` with their float spreads) over the IR and returns its
:class:`~compiler.float_spread.FloatSpreads`: the sorted values of every s-op (the basis of its
categorical residual subspace, or the known values of a numerical one), the untruncated means
of a ``kqv`` aggregate, the maps that fail on some input values, and the numerical s-ops whose
sets are too large to enumerate but that the compiler computes without their values (an
explicitly ``numerical`` affine map such as ``opens - closes``, or a numerical mean). Every
later stage reads these sets; none recomputes them.
"""

from __future__ import annotations

from typing import Any

from rasp.ir import Aggregate, Map, SequenceMap, SOp
from rasp.analyses.value_sets import ValueSetError

from .encoding import CATEGORICAL, NUMERICAL, explicit_encoding
from .errors import FloatPrecisionError, UnsupportedError
from .graph.expr import Expr, affine_form
from .float_spread import FloatSpreads, PrecisionError, float_spread_pass

__all__ = ["infer_bases"]


def _accept_unbounded(node: SOp) -> bool:
    """Whether the compiler can compute ``node`` without enumerating its values."""
    if isinstance(node, (Map, SequenceMap)):
        if explicit_encoding(node) != NUMERICAL:
            return False
        inputs = [node.inner] if isinstance(node, Map) else list(node.inputs)
        expr = Expr(fn=None, args=tuple(Expr(leaf=x) for x in inputs), ew=node.fn)
        return affine_form(expr) is not None
    if isinstance(node, Aggregate):
        return (node.reduction == "mean" and not node.truncate
                and explicit_encoding(node) != CATEGORICAL
                and not isinstance(node.default, str) and node.default is not None)
    return False


def infer_bases(sop: SOp, vocab: list[Any], max_seq_len: int, causal: bool = False,
                hazards: list[str] | None = None) -> FloatSpreads:
    """The value sets of every s-op of the program rooted at ``sop``.

    ``hazards``: a list to collect the precision-sensitive operations in, instead of refusing
    them (when the verification gate will compare every input).

    Raises:
        UnsupportedError: (a :class:`CompilerError`) a value set that cannot be made exact or is too large (the message
            names the operation and its ``line:column``), estimated before enumerating.
        FloatPrecisionError: (an ``UnsupportedError``) an operation whose result depends on
            how the interpreter's float64 arithmetic rounds a mean (``round(mean * 10)`` of
            non-dyadic floats): the value sets hold, per exact value, every float the
            interpreter may compute instead (``FloatSpreads.spread``).
    """
    try:
        return float_spread_pass(sop, vocab, max_seq_len, causal,
                                 accept_unbounded=_accept_unbounded, hazards=hazards)
    except PrecisionError as e:
        raise FloatPrecisionError(e.message, None, e.span) from None
    except ValueSetError as e:
        raise UnsupportedError(e.message, None, e.span) from None
