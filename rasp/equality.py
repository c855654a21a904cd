"""Equality of s-op output values: the one definition used wherever two evaluations of a
program are compared (compiled model vs interpreter, program vs ground truth, REPL, benchmarks).

A compiled model computes in float64, so numerical s-ops (means, scaled means) carry rounding
error of about ``1e-12``; strings must be identical; bools and ints compare as numbers
(``True == 1``), as the dialect's ``==`` does.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

__all__ = ["values_equal", "VALUES_TOL"]

#: absolute and relative tolerance for numbers
VALUES_TOL = 1e-9

_NUM = (bool, int, float, Fraction, np.bool_, np.integer, np.floating)


def _scalar_equal(a: Any, b: Any, tol: float) -> bool:
    a_num, b_num = isinstance(a, _NUM), isinstance(b, _NUM)
    if a_num and b_num:
        fa, fb = float(a), float(b)
        return abs(fa - fb) <= tol * max(1.0, abs(fa), abs(fb))
    if a_num or b_num:
        return False
    return bool(a == b) if isinstance(a, str) and isinstance(b, str) else a is b or a == b


def _as_array(x: Any) -> np.ndarray:
    """``x`` as an array, without NumPy's silent promotion of mixed lists (``[0, "a"]``
    would become the strings ``["0", "a"]``)."""
    if isinstance(x, np.ndarray):
        return x
    arr = np.empty(len(x), dtype=object)
    arr[:] = [v.item() if isinstance(v, np.generic) else v for v in x]
    if all(isinstance(v, str) for v in arr):
        return arr.astype(str)
    if all(isinstance(v, _NUM) for v in arr):
        return arr.astype(np.float64)
    return arr


def values_equal(a: Any, b: Any, tol: float = VALUES_TOL) -> bool:
    """Whether two output values are equal.

    Args:
        a, b: scalars, or sequences / arrays of the same shape (``[seq]`` or ``[batch, seq]``,
            as returned by ``rasp.evaluate`` and ``CompiledModel.run``; lists of per-sequence
            arrays for ragged batches).
        tol: tolerance for numbers, absolute below 1 and relative above.

    Returns:
        ``True`` when the shapes agree and every pair of elements is equal: numbers (ints,
        floats, bools, ``Fraction``) within ``tol``, strings identical, a string never equal to
        a number.
    """
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and (
            len(a) != len(b) or any(isinstance(x, (list, tuple, np.ndarray)) for x in a)):
        return len(a) == len(b) and all(values_equal(x, y, tol) for x, y in zip(a, b))
    if not isinstance(a, (list, tuple, np.ndarray)) and not isinstance(b, (list, tuple,
                                                                           np.ndarray)):
        return _scalar_equal(a, b, tol)
    try:
        xa, xb = _as_array(a), _as_array(b)
    except ValueError:
        return False
    if xa.shape != xb.shape:
        return False
    ka, kb = xa.dtype.kind, xb.dtype.kind
    if ka in "fiub" and kb in "fiub":
        fa, fb = xa.astype(np.float64), xb.astype(np.float64)
        scale = np.maximum(1.0, np.maximum(np.abs(fa), np.abs(fb)))
        return bool(np.all(np.abs(fa - fb) <= tol * scale))
    if ka == "U" and kb == "U":
        return bool(np.array_equal(xa, xb))
    return all(_scalar_equal(x, y, tol) for x, y in zip(xa.reshape(-1).tolist(),
                                                       xb.reshape(-1).tolist()))
