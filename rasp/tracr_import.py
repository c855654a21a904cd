"""Tracr programs in: :func:`from_tracr` converts a ``tracr.rasp`` program into rasp-lab's IR.

Tracr (Lindner et al. 2023, github.com/google-deepmind/tracr; PyPI ``tracr-pypi``) writes RASP
as Python objects. Its library (``tracr.compiler.lib``) and benchmarks built on it, such as
InterpBench, are written against ``tracr.rasp``; :func:`from_tracr` brings such a program into
the interpreter, the REPL and the compiler without rewriting it.

==================================  =========================================================
``tracr.rasp``                      rasp-lab IR
==================================  =========================================================
``tokens`` / ``indices`` / ``length``  ``tokens_asis`` (values as given) / ``indices`` / ``length``
``Full(v)``                          ``full(v)``
``Map(f, x)``                        ``map_sop(f, x)`` (Python callable; the compiler builds
                                     it as an affine MLP where ``f`` is affine on ``x``'s values,
                                     checked bitwise)
``SequenceMap(f, x, y)``            ``sequence_map(f, x, y)``
``LinearSequenceMap(x, y, a, b)``    ``x * a + y * b`` (the IR's arithmetic, which the
                                     compiler prices as one affine MLP)
``Select(k, q, Comparison.X)``       ``select(k, q, "==" | "<" | "<=" | ">" | ">=" | "!=" |
                                     "TRUE" | "FALSE")``; with keys or queries that may be
                                     ``None``, Tracr's comparison itself (it raises on ``None``)
``Select(k, q, predicate)``          ``Select(k, q, "python", predicate=predicate)``; the
                                     compiler decides from the value sets whether it selects
                                     at most one key, and (``causal=True``) from its matrix at
                                     max_seq_len whether it is causal when ``k``, ``q`` are
                                     functions of the position (``shift_by``)
``SelectorAnd/Or/Not``               ``&`` / ``|`` / ``~``
``Aggregate(s, x, default)``         ``aggregate(s, x, default)`` (mean); ``default=None``
                                     stays ``None``
``SelectorWidth(s)``                 ``selector_width(s)``
``numerical`` annotation            ``numerical`` (an annotated copy; categorical is the
                                     default of both)
==================================  =========================================================

Semantics follow Tracr's evaluator (``tracr.rasp.rasp.evaluate``): a map or sequence map gives
``None`` where an input is ``None`` (the callable is not called) — except a
``LinearSequenceMap``, whose arithmetic refuses a ``None`` input (a ``RASPTypeError``) where
Tracr gives ``None``. Names given with
``.named(...)`` are kept as given (``reverse``, not Tracr's unique label ``reverse_5``; several
nodes may share one, as in Tracr); unnamed nodes keep rasp-lab's default label. Refused with :class:`TracrImportError` naming the construct:
``ConstantSOp``, ``ConstantSelector`` (test-only constants of a fixed length) and any other
class. ``tracr`` itself is imported only to recognise its classes (lazily).
"""

from __future__ import annotations

from typing import Any

from .errors import RASPError
from .ir import (
    Node, Select, aggregate, full, indices, length, map_sop, numerical, select,
    selector_width, sequence_map, tokens_asis)

__all__ = ["from_tracr", "TracrImportError"]


class TracrImportError(RASPError):
    """A ``tracr.rasp`` construct with no rasp-lab counterpart (the message names it), or an
    argument that is not a Tracr expression / Tracr not installed."""


_COMPARISON_SYMBOLS = {"EQ": "==", "LT": "<", "LEQ": "<=", "GT": ">", "GEQ": ">=", "NEQ": "!=",
                       "TRUE": "TRUE", "FALSE": "FALSE"}


def _none_safe(f):
    """Tracr's map semantics: ``None`` in, ``None`` out (``f`` not called)."""
    def g(*xs):
        return None if any(x is None for x in xs) else f(*xs)
    return g


def from_tracr(expr: Any) -> Node:
    """The rasp-lab IR of a ``tracr.rasp`` expression (an s-op or a selector).

    Shared sub-expressions stay shared (one IR node per Tracr node). The result evaluates
    with :func:`rasp.evaluate` equal to Tracr's ``rasp.evaluate`` on the same inputs (a list of
    token values per sequence), compiles with :func:`compiler.compile_program`, and can be
    named into a REPL session.

    Raises:
        TracrImportError: ``tracr`` is not installed, ``expr`` is not a Tracr expression, or it
            uses a construct rasp-lab does not have (``ConstantSOp``, ``ConstantSelector``,
            an unknown subclass) — the message names it and its Tracr label.
    """
    try:
        # start-up: tracr loads only when this runs
        from tracr.rasp import rasp as tr
    except ImportError:
        raise TracrImportError("tracr is not installed; pip install tracr-pypi==1.0.0"
                               ) from None
    if not isinstance(expr, tr.RASPExpr):
        raise TracrImportError(f"from_tracr expects a tracr.rasp expression, got "
                               f"{type(expr).__name__}")
    memo: dict[int, Node] = {}
    none_memo: dict[int, bool] = {}

    def may_be_none(e) -> bool:
        """Whether a Tracr s-op can hold None: an aggregate with a None default, or a map /
        sequence map of such (None in, None out)."""
        if id(e) not in none_memo:
            if isinstance(e, tr.Aggregate):
                r = e.default is None
            elif isinstance(e, tr.Map):
                r = may_be_none(e.inner)
            elif isinstance(e, tr.SequenceMap):
                r = may_be_none(e.fst) or may_be_none(e.snd)
            else:
                r = False
            none_memo[id(e)] = r
        return none_memo[id(e)]

    def conv(e) -> Node:
        if id(e) in memo:
            return memo[id(e)]
        out = build(e)
        if isinstance(e, tr.SOp) and tr.is_numerical(e):   # categorical is the default
            out = numerical(out)
        if out.name is None and not isinstance(
                e, (tr.TokensType, tr.IndicesType, tr.LengthType)):
            out.name = _given_name(e, tr)
        memo[id(e)] = out
        return out

    def build(e) -> Node:
        t = type(e)
        if t is tr.TokensType:
            return tokens_asis
        if t is tr.IndicesType:
            return indices
        if t is tr.LengthType:
            return length
        if t is tr.Full:
            return full(e.fill)
        if t is tr.Map:
            return map_sop(_none_safe(e.f), conv(e.inner), label=_given_name(e, tr))
        if t is tr.LinearSequenceMap:
            # fst_fac * x + snd_fac * y as the IR's arithmetic (the compiler prices it as
            # one affine MLP; an opaque callable is a lookup table over every value pair)
            out = conv(e.fst) * e.fst_fac + conv(e.snd) * e.snd_fac
            out.name = None
            return out
        if t is tr.SequenceMap:
            return sequence_map(_none_safe(e.f), conv(e.fst), conv(e.snd),
                                label=_given_name(e, tr))
        if t is tr.Select:
            keys, queries = conv(e.keys), conv(e.queries)
            if isinstance(e.predicate, tr.Comparison) and not (
                    may_be_none(e.keys) or may_be_none(e.queries)):
                return select(keys, queries, _COMPARISON_SYMBOLS[e.predicate.name], causal=False)
            # a key or query that may be None: Tracr's Comparison itself, which raises on None
            # ("key is None!") as Tracr's evaluator does
            if callable(e.predicate):
                return Select(keys, queries, "python", causal=False, predicate=e.predicate)
            raise TracrImportError(f"Select {_label(e)!r} has a predicate that is neither a "
                                   f"rasp.Comparison nor callable: {e.predicate!r}")
        if t is tr.SelectorAnd:
            return conv(e.fst) & conv(e.snd)
        if t is tr.SelectorOr:
            return conv(e.fst) | conv(e.snd)
        if t is tr.SelectorNot:
            return ~conv(e.inner)
        if t is tr.Aggregate:
            return aggregate(conv(e.selector), conv(e.sop), default=e.default)
        if t is tr.SelectorWidth:
            return selector_width(conv(e.selector))
        if t in (tr.ConstantSOp, tr.ConstantSelector):
            raise TracrImportError(
                f"unsupported Tracr construct {t.__name__} ({_label(e)!r}): a constant of a "
                f"fixed length has no rasp-lab counterpart; use Full or a Select")
        raise TracrImportError(f"unsupported Tracr construct {t.__name__} ({_label(e)!r})")

    return conv(expr)


def _given_name(e, tr) -> str | None:
    """The name a Tracr expression was given (``.named("reverse")``: ``"reverse"``, not
    Tracr's unique ``label`` ``reverse_5``); ``None`` for Tracr's default name of its class
    (``aggregate``, ``select``, ...), so that the node keeps rasp-lab's own (``aggregate_12``).
    A node explicitly named like its class's default (``.named("map")``) reads as unnamed."""
    try:
        name = e.name
        return None if name == tr.default_name(e) else str(name)
    except Exception:  # noqa: BLE001 - a name is only for display
        return None


def _label(e) -> str:
    try:
        return str(e.label)
    except Exception:  # noqa: BLE001 - a label is only for messages
        return type(e).__name__
