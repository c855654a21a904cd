"""Equality of s-op output values: the one definition used wherever two evaluations of a
program are compared (compiled model vs interpreter, program vs ground truth, REPL, benchmarks).

A compiled model computes in float64, so numerical s-ops (means, scaled means) carry rounding
error of about ``1e-12``; strings must be identical; bools and ints compare as numbers
(``True == 1``), as the dialect's ``==`` does. ``strict=True`` (the compiler's verification
gate) is type-aware: bools equal only bools, ints equal ints exactly (no float64 rounding of
large ints), and only a comparison involving a float uses the tolerance.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

__all__ = ["values_equal", "VALUES_TOL"]

#: absolute and relative tolerance for numbers
VALUES_TOL = 1e-9

_NUM = (bool, int, float, Fraction, np.bool_, np.integer, np.floating)


def _kind(x: Any) -> str:
    """``"bool"``, ``"int"``, ``"float"`` (floats and Fractions), ``"str"`` or ``"other"``."""
    if isinstance(x, (bool, np.bool_)):
        return "bool"
    if isinstance(x, (int, np.integer)):
        return "int"
    if isinstance(x, (float, Fraction, np.floating)):
        return "float"
    return "str" if isinstance(x, str) else "other"


def _close(fa: float, fb: float, tol: float) -> bool:
    return abs(fa - fb) <= tol * max(1.0, abs(fa), abs(fb))


def _scalar_equal(a: Any, b: Any, tol: float, strict: bool = False) -> bool:
    a_num, b_num = isinstance(a, _NUM), isinstance(b, _NUM)
    if a_num and b_num:
        if strict:
            ka, kb = _kind(a), _kind(b)
            if "bool" in (ka, kb):
                return ka == kb and bool(a) == bool(b)
            if ka == kb == "int":
                return int(a) == int(b)
        return _close(float(a), float(b), tol)
    if a_num or b_num:
        return False
    return bool(a == b) if isinstance(a, str) and isinstance(b, str) else a is b or a == b


def _as_array(x: Any, strict: bool = False) -> np.ndarray:
    """``x`` as an array, without NumPy's silent promotion of mixed lists (``[0, "a"]``
    would become the strings ``["0", "a"]``); ``strict``: bools and ints keep their kind."""
    if isinstance(x, np.ndarray):
        return x
    arr = np.empty(len(x), dtype=object)
    arr[:] = [v.item() if isinstance(v, np.generic) else v for v in x]
    if all(isinstance(v, str) for v in arr):
        return arr.astype(str)
    if all(isinstance(v, _NUM) for v in arr):
        if strict:
            kinds = {_kind(v) for v in arr}
            if kinds == {"bool"}:
                return arr.astype(bool)
            if kinds == {"int"} and all(-2 ** 63 <= v < 2 ** 63 for v in arr):
                return arr.astype(np.int64)
            if "bool" in kinds or kinds == {"int"}:
                return arr            # compared element by element
        return arr.astype(np.float64)
    return arr


def values_equal(a: Any, b: Any, tol: float = VALUES_TOL, strict: bool = False) -> bool:
    """Whether two output values are equal.

    Args:
        a, b: scalars, or sequences / arrays of the same shape (``[seq]`` or ``[batch, seq]``,
            as returned by ``rasp.evaluate`` and ``CompiledModel.run``; lists of per-sequence
            arrays for ragged batches).
        tol: tolerance for numbers, absolute below 1 and relative above.
        strict: type-aware (the compiler's verification gate): a bool equals only a bool
            (``True != 1``), two ints are compared exactly (not through float64), and ``tol``
            applies only where a float is involved (an int and a float: the interpreter keeps
            an all-integral mean integer-typed, a model may hold it as a float).

    Returns:
        ``True`` when the shapes agree and every pair of elements is equal: numbers (ints,
        floats, bools, ``Fraction``) within ``tol``, strings identical, a string never equal to
        a number.
    """
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and (
            len(a) != len(b) or any(isinstance(x, (list, tuple, np.ndarray)) for x in a)):
        return len(a) == len(b) and all(values_equal(x, y, tol, strict) for x, y in zip(a, b))
    if not isinstance(a, (list, tuple, np.ndarray)) and not isinstance(b, (list, tuple,
                                                                           np.ndarray)):
        return _scalar_equal(a, b, tol, strict)
    try:
        xa, xb = _as_array(a, strict), _as_array(b, strict)
    except ValueError:
        return False
    if xa.shape != xb.shape:
        return False
    ka, kb = xa.dtype.kind, xb.dtype.kind
    if strict and "b" in (ka, kb) and ka in "fiub" and kb in "fiub":
        return ka == kb and bool(np.array_equal(xa, xb))
    if strict and ka in "iu" and kb in "iu":
        return bool(np.array_equal(xa, xb))
    if ka in "fiub" and kb in "fiub":
        fa, fb = xa.astype(np.float64), xb.astype(np.float64)
        scale = np.maximum(1.0, np.maximum(np.abs(fa), np.abs(fb)))
        return bool(np.all(np.abs(fa - fb) <= tol * scale))
    if ka == "U" and kb == "U":
        return bool(np.array_equal(xa, xb))
    return all(_scalar_equal(x, y, tol, strict) for x, y in zip(xa.reshape(-1).tolist(),
                                                               xb.reshape(-1).tolist()))
