"""The output of a mean of bools typed as the interpreter types it (issue 51, D3).

The interpreter evaluates the sequences of a batch as one ``[batch, seq]`` NumPy array, and the
type of a mean of bools depends on the whole batch (``rasp/interpreter.py``: ``_finish_mean``,
``_aggregate_none_default``, ``_aggregate_objects``):

* every query selects at most one key and the default is a bool: the moved **bools**;
* else the means as numbers: **ints** when every value (the default where nothing is selected)
  is integral and the default an int or a bool, else **floats**;
* a ``None`` default: the above with the default ``False`` (bools) or ``0`` (numbers), then an
  **object** array with ``None`` where nothing was selected, whenever that happens anywhere in
  the batch;
* a mean over such an object array moves each value as it is (``None`` included) and, when
  every value of the batch is integral, turns them all into ints: a moved ``False`` becomes
  ``0`` in the whole batch as soon as one sequence of it holds a ``None``.

The compiled model computes the values; :func:`type_rows` replays these rules for a chain of
means (innermost first, down to the bools) from what the model has in its residual stream:
each mean's count head (``1/(w+1)``: nothing, one key, several keys selected) and its value,
and the decoded output. :func:`chain_spec` writes the chain as JSON-able data
(``CompiledModel.bool_typing``).
"""

from __future__ import annotations

import numpy as np

from rasp.ops import homogeneous_array

__all__ = ["chain_spec", "type_rows"]


def chain_spec(cg, space) -> list | None:
    """``CompilerGraph.typing`` as data: ``[{"count": dir, "dirs": [dirs], "values": [values]
    or None (numerical), "default": the IR default, "truncate": kqv's truncated mean}]``,
    innermost first (each mean's value read before truncation); None when the output is not
    such a chain."""
    if not cg.typing:
        return None
    out = []
    for count, node, default, truncate in cg.typing:
        if space.is_categorical(node):
            items = list(space.dirs(node).items())
            vals, dirs = [v for v, _ in items], [d for _, d in items]
        else:
            vals, dirs = None, [space.dir(node)]
        d = default.item() if isinstance(default, np.generic) else default
        out.append({"count": int(space.dir(count)), "dirs": [int(x) for x in dirs],
                    "values": vals, "default": d, "truncate": bool(truncate)})
    return out


def _counts(resid: np.ndarray, d: int) -> np.ndarray:
    """0, 1 or 2 (two or more) keys selected, from a count head's ``1/(w+1)``."""
    r = resid[:, :, d]
    return np.where(r > 0.75, 0, np.where(r > 0.4, 1, 2))


def _values(resid: np.ndarray, level: dict) -> np.ndarray:
    """A mean's value at every position (floats), read from its residual directions."""
    block = resid[:, :, level["dirs"]]
    if level["values"] is None:
        return block[:, :, 0].astype(np.float64)
    vals = [np.nan if v is None else float(v) for v in level["values"]]
    return np.asarray(vals)[block.argmax(-1)]


def _integral(x: float) -> bool:
    return abs(x - round(x)) < 1e-6


def _level(prev: tuple, counts: np.ndarray, vals: np.ndarray, default,
           truncate: bool) -> list:
    """One mean of the chain over the previous array ``prev = (kind, element type, has
    None)``: the interpreter's result as Python values ``[B][n]``."""
    kind, elem, has_none = prev
    B, n = counts.shape
    if kind == "O" and has_none:                      # _aggregate_objects
        flat, all_ints = [], True
        for b in range(B):
            row = []
            for q in range(n):
                c, v = counts[b, q], vals[b, q]
                if c == 0:
                    row.append(default)
                elif np.isnan(v):                     # a None moved as it is
                    row.append(None)
                elif truncate:
                    all_ints &= c == 1 or elem in (bool, int)
                    row.append(int(np.trunc(v)))
                elif c == 1:                          # the value moved as it is
                    row.append(elem(round(v)) if elem in (bool, int) else float(v))
                else:
                    all_ints &= elem in (bool, int)
                    row.append(float(v))
            flat.append(row)
        cells = [x for row in flat for x in row if x is not None]
        if all_ints and all(isinstance(x, (int, float)) and float(x).is_integer()
                            for x in cells):
            flat = [[None if x is None else int(x) for x in row] for row in flat]
        return flat
    # a typed array (bool, int, float): _finish_mean, then None where nothing was selected
    d = (False if kind == "b" else 0) if default is None else default
    if kind == "b" and isinstance(d, (bool, np.bool_)) and counts.max(initial=0) <= 1:
        # the moved bools (before any truncation)
        rows = [[bool(d) if counts[b, q] == 0 else bool(round(vals[b, q]))
                 for q in range(n)] for b in range(B)]
    else:
        out = np.where(counts == 0, float(d), vals)
        if truncate:
            rows = [[int(np.trunc(x)) for x in row] for row in out]
        elif kind in "bi" and isinstance(d, (int, np.integer)) and all(
                _integral(x) for x in out.reshape(-1)):
            rows = [[int(round(x)) for x in row] for row in out]
        else:
            rows = [[float(x) for x in row] for row in out]
    if default is None and np.any(counts == 0):
        rows = [[None if counts[b, q] == 0 else rows[b][q] for q in range(n)]
                for b in range(B)]
    return rows


def _array(rows: list) -> tuple:
    """The ``[B, n]`` array the interpreter builds from ``rows`` (``homogeneous_array``:
    raises, as the interpreter does, on bools mixed with numbers) and its state ``(kind,
    element type, has None)``."""
    B = len(rows)
    arr = homogeneous_array([x for row in rows for x in row]).reshape(B, -1)
    rest = [x for x in arr.reshape(-1).tolist() if x is not None]
    elem = bool if rest and all(isinstance(x, bool) for x in rest) else \
        int if all(isinstance(x, int) for x in rest) else float
    if len(rest) < arr.size:
        return arr, ("O", elem, True)
    return arr, ({bool: "b", int: "i", float: "f"}[elem], elem, False)


def type_rows(levels: list, resid: np.ndarray, out_rows: list) -> list:
    """The output rows of one batch (the sequences of one length, as the interpreter evaluates
    them) typed as the interpreter types them.

    Args:
        levels: :func:`chain_spec`'s list (innermost first; the last is the output).
        resid: the final residual stream of the batch's real positions ``[B, n, d_model]``.
        out_rows: the decoded output, one row of ``n`` values per sequence.

    Returns:
        one array per sequence, the rows of the batch's array (bool, int, float, or object
        with ``None``).

    Raises:
        RASPTypeError: where the interpreter raises (a mean's batch mixing bools and numbers).
    """
    state = ("b", bool, False)                    # the bools the first mean averages
    arr = None
    for i, level in enumerate(levels):
        counts = _counts(resid, level["count"])
        if i == len(levels) - 1:
            vals = np.array([[np.nan if v is None else float(v) for v in np.asarray(r).tolist()]
                             for r in out_rows], dtype=np.float64).reshape(counts.shape)
        else:
            vals = _values(resid, level)
        arr, state = _array(_level(state, counts, vals, level["default"],
                                   level.get("truncate", False)))
    return [arr[b] for b in range(arr.shape[0])]
