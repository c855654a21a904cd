"""The original RASP's semantics on one example: its per-position Python typing and its checks.

The batched interpreter (:mod:`rasp.interpreter`) computes NumPy arrays of one dtype per
s-op; the original RASP REPL (Weiss et al. 2021, tech-srl/RASP ``RASP_support/Support.py``)
computes Python values whose type varies by position: a mean of two or more values is a
float, a mean of one value is that value, ``/`` gives floats, ``round`` and selector widths
ints. This module owns that typing rule (:func:`original_values`), the original's refusal
of a mean of booleans, and the cache of evaluators of the last few examples that makes a
REPL session or a ``load``ed file O(n) in its statements (:func:`original_evaluation`).

Used by the display (:mod:`rasp.repl.display`) and the statement interpreter (:mod:`rasp.repl.runtime`).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from ..interpreter import Evaluator
from ..ir import (Aggregate, Full, Indices, Length, Map, Node, RASPTypeError, SelectorWidth,
                 SequenceMap, SOp, Tokens, topological_order)

__all__ = ["plain", "original_evaluation", "original_values"]


def plain(v: Any) -> Any:
    """``v`` with NumPy scalars made Python values (lists and dicts element by element)."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {plain(k): plain(x) for k, x in v.items()}
    return v


def _kind_of_atom(v: Any) -> str:
    v = plain(v)
    return "b" if isinstance(v, bool) else "f" if isinstance(v, float) else \
        "i" if isinstance(v, int) else "o"


def _kinds(n: Node, arr: np.ndarray, ev: Evaluator, done: dict[int, np.ndarray],
           example: list) -> np.ndarray:
    """The Python type the original computes at each position of a bool or numeric s-op's
    value: ``"b"`` (bool), ``"i"`` (int) or ``"f"`` (float), ``[seq]``. A mean of two or more
    values is a float, a mean of one value is that value, an empty selection gives the default
    (``False`` stays a bool), ``/`` gives floats, ``round``, ``indicator``, ``indices``,
    ``length`` and selector widths give ints, arithmetic gives a float where an operand is one
    (an int where bools meet numbers, as Python), a ternary the kind of the branch taken."""
    base = np.full(arr.shape, {"b": "b", "f": "f"}.get(arr.dtype.kind, "i"))

    def of(child: Node) -> np.ndarray:
        if child.id in done:
            return done[child.id]
        v = ev.values[child.id][0]
        return np.full(v.shape, {"b": "b", "f": "f"}.get(v.dtype.kind, "i"))

    if arr.dtype.kind == "b":
        return base
    if isinstance(n, (Indices, Length, SelectorWidth)):
        return np.full(arr.shape, "i")
    if isinstance(n, Tokens):
        if n.conversion in ("int", "float"):
            return np.full(arr.shape, n.conversion[0])
        return np.array([_kind_of_atom(v) for v in example])
    if isinstance(n, Full):
        return np.full(arr.shape, _kind_of_atom(n.value))
    if isinstance(n, (Map, SequenceMap)):
        op = n.fn.op
        inputs = [n.inner] if isinstance(n, Map) else list(n.inputs)
        if op == "div":
            return np.full(arr.shape, "f")
        if op in ("round", "indicator"):
            return np.full(arr.shape, "i")
        if op == "ternary":
            cond = ev.values[inputs[0].id][0].astype(bool)
            return np.where(cond, of(inputs[1]), of(inputs[2]))
        if op in ("add", "sub", "mul", "mod", "pow", "neg", "pos", "identity"):
            kinds = [of(c) for c in inputs]
            if isinstance(n, Map) and n.fn.const is not None:
                kinds.append(np.full(arr.shape, _kind_of_atom(n.fn.const)))
            f = np.zeros(arr.shape, bool)
            for k in kinds:
                f = f | (k == "f")
            if op == "pow" and arr.dtype.kind == "f":
                with np.errstate(invalid="ignore"):
                    f = f | np.asarray(arr != np.round(arr))
            if op == "identity" and len(kinds) == 1:
                return kinds[0]
            return np.where(f, "f", "i")
        if op == "lookup" and isinstance(n.fn.container, (list, dict, str)):
            keys = ev.values[inputs[0].id][0].tolist()
            try:
                return np.array([_kind_of_atom(n.fn.container[k]) for k in keys])
            except (KeyError, IndexError, TypeError):
                return base
        return base
    if isinstance(n, Aggregate) and n.reduction == "mean" and not n.truncate:
        sel = ev.values[n.selector.id][0]
        count = sel.sum(axis=1)
        vk = of(n.values)
        out = np.empty(arr.shape, dtype="<U1")
        for q in range(arr.shape[0]):
            if count[q] == 0:
                out[q] = _kind_of_atom(n.default)
            elif count[q] == 1:
                out[q] = vk[int(np.flatnonzero(sel[q])[0])]
            else:
                out[q] = "f"
        return out
    return base


def _check_means(n: Aggregate, ev: Evaluator, kinds: np.ndarray) -> None:
    """The original refuses a mean of several values unless the whole value sequence holds
    numbers (``Support.py``: "asked to average multiple values, but they are non-numbers");
    booleans are not numbers to it."""
    if n.reduction != "mean" or n.truncate:
        return
    sel = ev.values[n.selector.id][0]
    if not np.any(sel.sum(axis=1) > 1):
        return
    vals = ev.values[n.values.id][0]
    if vals.dtype.kind == "b" or (vals.dtype.kind in "iuf" and np.all(kinds == "b")):
        raise RASPTypeError(
            f"aggregate '{n.label}' asked to average several values, but they are not numbers "
            "(booleans: T/F); the original REPL refuses a "
            "mean of booleans: average indicator(...) instead", n.span)


#: evaluators of the last few running examples, reused across statements (keyed by the
#: example's values and their Python types): a REPL session or a ``load``ed file that extends a
#: chain of s-ops by one node then evaluates that node only, not the whole chain again
_EXAMPLE_EVALUATORS: "OrderedDict[tuple, tuple[Evaluator, dict, set]]" = OrderedDict()
_EXAMPLE_CACHE_SIZE = 4


def original_evaluation(node: Node, example: Any) -> tuple[Evaluator, dict[int, np.ndarray]]:
    """Evaluate ``node`` on one example as the original REPL would: the
    :class:`~rasp.interpreter.Evaluator` with every node's value and the per-position Python
    types of the bool and numeric s-ops (see :func:`_kinds`). Raises RASPError where the
    original fails (the program fails on the example, or a mean of several booleans).

    IR nodes never change, so the values and checks of nodes already evaluated on the same
    example are kept (for the last :data:`_EXAMPLE_CACHE_SIZE` examples) and only new nodes are
    computed: checking a chain of n statements costs O(n), not O(n^2)."""
    seq = list(example)
    key = tuple((type(v).__name__, v) for v in seq)
    if key in _EXAMPLE_EVALUATORS:
        _EXAMPLE_EVALUATORS.move_to_end(key)
    else:
        _EXAMPLE_EVALUATORS[key] = (Evaluator([seq], causal=None), {}, set())
        while len(_EXAMPLE_EVALUATORS) > _EXAMPLE_CACHE_SIZE:
            _EXAMPLE_EVALUATORS.popitem(last=False)
    ev, done, checked = _EXAMPLE_EVALUATORS[key]
    ev(node)
    for n in topological_order(node, known=checked):
        if isinstance(n, SOp):
            arr = ev.values[n.id][0]
            if arr.dtype.kind in "biuf":
                done[n.id] = _kinds(n, arr, ev, done, seq)
        if isinstance(n, Aggregate) and n.values.id in done:
            _check_means(n, ev, done[n.values.id])
        elif isinstance(n, Aggregate) and ev.values[n.values.id][0].dtype.kind == "b":
            _check_means(n, ev, np.full(1, "b"))
        checked.add(n.id)
    return ev, done


def original_values(node: SOp, example: Any) -> list:
    """An s-op's values on one example (a string or a list of atoms) as the original REPL
    computes them: Python values, bools, ints and floats per position as the original types
    them (a mean of several values is a float, ``[2.0]*5``; of one value that value, ``0``).
    Raises RASPError when the s-op fails on the example (or would in the original)."""
    ev, done = original_evaluation(node, example)
    values = plain(ev.values[node.id][0].tolist())
    if node.id in done:
        conv = {"b": bool, "f": float}
        values = [conv[k](v) if k in conv else (int(v) if float(v).is_integer() else v)
                  for v, k in zip(values, done[node.id])]
    return values
