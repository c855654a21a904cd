"""Stage 2 (graph), MLP pricing: how many hidden units an MLP will need.

:func:`mlp_units` estimates the units ``graph_to_blocks.build_mlp`` will build for an
expression into an s-op of a given encoding (affine, discretising steps, ternary branch by
branch, or a lookup table); the encoding pass and fusion (:mod:`compiler.graph_passes`) and the
size estimate of ``compile_program`` compare models with it. The limits on one MLP's table
(:data:`FUSE_LIMIT`, :data:`STEP_COUNT_LIMIT`) live here.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from rasp.value_sets import apply_elementwise_table, sort_values

from .encoding import CATEGORICAL, NUMERICAL
from .expr import Expr, affine_form, affine_steps, eval_expr, ternary_parts

__all__ = ["mlp_units", "mlp_cost", "affine_mlp", "FUSE_LIMIT", "STEP_COUNT_LIMIT"]

#: fusion is skipped when the fused MLP's input table would exceed this many rows
FUSE_LIMIT = 4096


def mlp_cost(leaves: list) -> int:
    """Estimated hidden units of an MLP reading ``leaves`` (categorical: one unit per input
    combination; one numerical input: two units per step, per categorical combination).
    An affine numerical MLP costs less: :func:`mlp_units`."""
    cat = [l for l in leaves if l.encoding == CATEGORICAL]
    num = [l for l in leaves if l.encoding != CATEGORICAL]
    combos = math.prod(len(l.values) for l in cat) if cat else 1
    if num:
        return combos * (1 + 2 * max(len(num[0].values) - 1, 0))
    return combos


def _numbers_only(values) -> bool:
    return all(isinstance(v, (int, float, np.integer, np.floating))
               and not isinstance(v, (bool, np.bool_)) for v in values)


def affine_mlp(encoding: str, expr: Expr, leaves: list) -> bool:
    """Whether an MLP of this output encoding and expression is built as an affine MLP
    (``graph_to_blocks._try_affine``): numerical output, affine expression, number inputs."""
    return (encoding == NUMERICAL and affine_form(expr) is not None
            and all(l.kind == "full" or l.unbounded or _numbers_only(l.values) for l in leaves))


#: a discretising MLP's units are counted exactly (its function evaluated on every input
#: combination) up to this many combinations, estimated by :func:`mlp_cost` above
STEP_COUNT_LIMIT = 20_000


def mlp_units(encoding: str, expr: Expr, leaves: list | None = None) -> int:
    """Estimated hidden units of an MLP computing ``expr`` into an s-op of ``encoding``
    (``graph_to_blocks.build_mlp``): an affine numerical MLP needs two units per numerical
    input, one per value of a categorical input and one for the constant; a discretising MLP
    (one numerical input) one unit per categorical combination plus two per step where the
    output changes (counted on the values, up to ``STEP_COUNT_LIMIT`` combinations); any other
    MLP :func:`mlp_cost`. Cached per expression and encodings of its leaves."""
    leaves = expr.leaves() if leaves is None else leaves
    key = (encoding,) + tuple((id(l), l.encoding) for l in leaves)
    if key not in expr._units:
        if affine_mlp(encoding, expr, leaves):
            units = 1 + sum(2 if l.encoding != CATEGORICAL else len(l.values)
                            for l in leaves if l.kind != "full")
        else:
            units = _ternary_units(expr, leaves)
            zs = affine_steps(expr, leaves)
            if zs is not None:
                units = min(units, 1 + 2 * (len(zs) - 1))
        expr._units[key] = units
    return expr._units[key]


def _ternary_units(expr: Expr, leaves: list) -> int:
    """Units of a ternary MLP built branch by branch (``graph_to_blocks.build_mlp``): per
    branch, the table of its own and its conditions' inputs; else :func:`_step_units`."""
    parts = ternary_parts(expr)
    if len(parts) < 2 or len({isinstance(v, str) for l in leaves for v in l.values}) > 1:
        return _step_units(expr, leaves)
    total = 0
    for branch, conds in parts:
        part: list = []
        for c, _ in conds:
            for l in c.leaves():
                if l.encoding != CATEGORICAL:
                    return _step_units(expr, leaves)
                if all(l is not m for m in part):
                    part.append(l)
        part += [l for l in branch.leaves() if all(l is not m for m in part)]
        total += _step_units(branch, part)
    return min(total, _step_units(expr, leaves))


def _step_units(expr: Expr, leaves: list) -> int:
    num = [l for l in leaves if l.encoding != CATEGORICAL]
    cat = [l for l in leaves if l.encoding == CATEGORICAL]
    combos = math.prod(len(l.values) for l in cat) if cat else 1
    if len(num) != 1 or num[0].unbounded or not num[0].values or \
            combos * len(num[0].values) > STEP_COUNT_LIMIT:
        return mlp_cost(leaves)
    x = num[0]
    us = sort_values(v for v in x.values if isinstance(v, (int, float, bool, np.integer,
                                                           np.floating, np.bool_)))
    rows = [(c, u) for c in itertools.product(*[l.values for l in cat]) for u in us]
    if not rows:
        return mlp_cost(leaves)
    cols = [[r[0][i] for r in rows] for i in range(len(cat))] + [[r[1] for r in rows]]
    ids = [id(l) for l in cat] + [id(x)]
    out = apply_elementwise_table(lambda *a: eval_expr(expr, dict(zip(ids, a))), cols)
    units = 0
    m = len(us)
    for i in range(0, len(out), m):
        seq = [repr(v) if ok else None for ok, v in out[i: i + m]]
        units += 1 + 2 * sum(a != b for a, b in zip(seq, seq[1:]))
    return units
