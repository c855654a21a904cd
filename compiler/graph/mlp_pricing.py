"""Stage 2 (graph), MLP pricing: how many hidden units an MLP will need, and how many of its
weights are non-zero.

:func:`mlp_units` estimates the units ``graph_to_blocks.build_mlp`` will build for an
expression into an s-op of a given encoding (affine, discretising steps, ternary branch by
branch, or a lookup table); :func:`mlp_nonzeros` the non-zero entries of that MLP's ``W_in``
and ``W_out`` (one owner for both: the same choice of construction); :func:`head_size` the width and
non-zeros of an attention head. The encoding pass and
fusion (:mod:`compiler.graph.passes`) and the size estimate of ``compile_program`` compare
models with them. The limits on one MLP's table (:data:`FUSE_LIMIT`,
:data:`STEP_COUNT_LIMIT`) live here.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from rasp.analyses.value_sets import apply_elementwise_table, sort_values

from ..encoding import CATEGORICAL, NUMERICAL
from .expr import Expr, affine_form, affine_reads, affine_steps, eval_expr, ternary_parts

__all__ = ["mlp_units", "mlp_nonzeros", "head_size", "mlp_cost", "affine_mlp", "FUSE_LIMIT",
           "STEP_COUNT_LIMIT", "SWITCH_OFF_NONZEROS", "lookup_cubes", "cube_nonzeros"]

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


def lookup_cubes(domains: list, table: dict) -> list[tuple[tuple, tuple, object]]:
    """A lookup table as disjoint *cubes*: ``[(pos, neg, result)]`` per unit, ``pos`` a partial
    assignment ``((input, value), ...)`` of the categorical inputs and ``neg`` values
    ``((input, value), ...)`` excluded, on whose combinations ``table`` (``{combination of one
    value per input: result}``, every combination of ``domains``; a result None writes
    nothing) is ``result``. The unit ``ReLU(sum of pos's directions - sum of neg's - (|pos| -
    1))`` is 1 exactly on its combinations (every input one-hot), 0 elsewhere: ``x and y and
    z`` of three bools (Tracr's ``detect_pattern``) needs 6 units of 1-3 reads instead of 18 of
    3, and ``tokens == "a"`` over ``abc`` writes False with one unit ``ReLU(1 - tokens:a)``.

    A decision tree: split on the input whose values separate the results best (the fewest
    distinct results summed over its values), until the results agree; the leaves of one
    split with one result become one unit excluding the split's other values where that has
    fewer weights. Exact, and never more units or weights than one unit per combination."""
    out: list = []
    idx = list(itertools.product(*[range(len(d)) for d in domains]))
    keyed = {i: table[tuple(d[j] for d, j in zip(domains, i))] for i in idx}
    stack = [(idx, tuple(range(len(domains))), ())]
    while stack:
        rows, free, fixed = stack.pop()
        results = {keyed[r] for r in rows}
        if len(results) == 1:
            res = next(iter(results))
            if res is not None:
                out.append((tuple((i, domains[i][v]) for i, v in fixed), (), res))
            continue
        best = None
        for i in free:
            parts: dict = {}
            for r in rows:
                parts.setdefault(r[i], set()).add(keyed[r])
            score = (sum(len(p) for p in parts.values()), len(parts))
            if best is None or score < best[0]:
                best = (score, i)
        i = best[1]
        groups: dict = {}
        for r in rows:
            groups.setdefault(r[i], []).append(r)
        rest = tuple(j for j in free if j != i)
        # the values of input i whose whole sub-table is one result: merged per result
        same: dict = {}
        for v, rs in groups.items():
            rv = {keyed[r] for r in rs}
            if len(rv) == 1 and None not in rv:
                same.setdefault(next(iter(rv)), []).append(v)
        merged: set = set()
        for res, vs in same.items():
            w = len(res) if isinstance(res, tuple) else 1
            apart = len(vs) * (cube_nonzeros(fixed + ((i, 0),)) + w)
            together = cube_nonzeros(fixed) + len(groups) - len(vs) + w
            if len(vs) > 1 and together < apart:
                neg = tuple((i, domains[i][v]) for v in sorted(groups) if v not in vs)
                out.append((tuple((j, domains[j][v]) for j, v in fixed), neg, res))
                merged.update(vs)
        for v in sorted(groups, reverse=True):
            if v not in merged:
                stack.append((groups[v], rest, fixed + ((i, v),)))
    return out


def cube_nonzeros(pos: tuple, neg: tuple = ()) -> int:
    """The ``W_in`` weights of a cube's unit: its directions and the bias ``1 - |pos|`` from
    ``one`` (none for one positive direction)."""
    m = len(pos)
    return m + len(neg) + (m != 1)


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


#: non-zero ``W_in`` weights a hidden unit has besides the directions it reads: none since
#: issue 38 (units were switched off at BOS and PAD by ``-BIG`` from ``bos`` and ``pad``, two
#: weights each; assembly now tracks the BOS position through the MLPs and switches off only
#: the few units it cannot track, ``blocks_to_model``; PAD positions need no switch-off)
SWITCH_OFF_NONZEROS = 0


def mlp_nonzeros(encoding: str, expr: Expr, leaves: list | None = None,
                 values: list | None = None) -> int:
    """Estimated non-zero weights (entries of ``W_in`` and ``W_out``) of the MLP
    :func:`mlp_units` prices, built the way ``graph_to_blocks.build_mlp`` chooses:

    * **affine**: one unit per non-zero term (a value of a categorical input with a non-zero
      coefficient, two per numerical input, one for a non-zero constant), each reading one
      direction and writing one: 1 + 1;
    * **steps over an integer affine form** ``z`` (when fewer units than the table): two units
      per step, each reading every direction ``z`` reads (a numerical input's; each non-zero
      value of a categorical input) and ``one``, writing the change of the output (two
      directions categorical, one numerical); one unit writing the first value;
    * **lookup table** (``k`` categorical inputs): per combination, one unit reading its ``k``
      directions (and ``one`` unless ``k == 1``) and writing one direction; a numerical output
      of 0 writes nothing (no unit, counted on the table up to ``STEP_COUNT_LIMIT`` rows);
    * **discretising** (one numerical input): per categorical combination, that lookup unit
      for the first value and two units per step where the output changes, each reading the
      ``k`` gates, the input and ``one`` and writing the change; a ternary branch by branch.

    ``values``: the output's value set, when known (a numerical table without the value 0
    writes every row: not evaluated). Every unit also has :data:`SWITCH_OFF_NONZEROS`
    weights. Beyond the counted tables (an
    unbounded input, more than ``STEP_COUNT_LIMIT`` rows) :func:`mlp_cost` units each reading
    every input once. Units: weights (exact on the constructions above; the builder's few
    exceptions -- merged near-equal values, steps with no change -- make it an estimate).
    Cached like :func:`mlp_units`."""
    leaves = expr.leaves() if leaves is None else leaves
    key = ("nonzeros", encoding) + tuple((id(l), l.encoding) for l in leaves)
    if key not in expr._units:
        if affine_mlp(encoding, expr, leaves):
            nz = _affine_nonzeros(expr, leaves)
        else:
            zs = affine_steps(expr, leaves)
            if zs is not None and (len([l for l in leaves if l.encoding != CATEGORICAL]) > 1
                                   or 1 + 2 * (len(zs) - 1) < mlp_cost(leaves)):
                nz = _affine_steps_nonzeros(expr, leaves, encoding, zs)
            else:
                split = _branch_size(expr, leaves, encoding)
                nz = (split if split is not None else _table_size(
                    expr, leaves, encoding, no_zero=values is not None and not any(
                        _is_zero(v) for v in values)))[1]
        expr._units[key] = nz
    return expr._units[key]


def head_size(node) -> tuple[int, int]:
    """``(width, non-zeros)`` of the attention head of an ``aggregate`` or ``sw_attn`` node
    as ``graph_to_blocks.build_head`` builds it (an estimate: factors sharing an s-op are
    counted apart). Width: ``r_qk + r_ov`` (query-key dimensions: the narrower side's
    directions and the BOS dimension; value-output dimensions: one per value of a categorical
    output, one numerical). Non-zeros: the selected (query, key) pairs of every factor's table
    (the bilinear form, stored on the wider side) and the rank terms of a max / min, one per
    direction of the narrower side, four for BOS and PAD; the value and output weights (one
    each per value categorical; one per non-zero value and one numerical; two for a selector
    width). Units: dimensions and weights."""
    q_dirs = k_dirs = pairs = 0
    seen_q: set = set()
    seen_k: set = set()
    for f in node.selector.factors:
        for is_query, side, seen in ((True, f.query, seen_q), (False, f.key, seen_k)):
            if id(side) not in seen:
                seen.add(id(side))
                d = 1 if side is None else (len(side.values) if side.encoding == CATEGORICAL
                                            else 1)
                if is_query:
                    q_dirs += d
                else:
                    k_dirs += d
        pairs += int(np.count_nonzero(f.table()))
    if not node.selector.factors:
        q_dirs = k_dirs = 1
    narrow = min(q_dirs, k_dirs)
    vn = node.values_node
    if node.kind == "sw_attn":
        r_ov, ov = 1, 2
    elif node.encoding == CATEGORICAL:
        r_ov = len(node.values)
        ov = 2 * len(vn.values)
        pairs += len(vn.values) if node.reduction in ("max", "min") else 0
    else:
        r_ov = 1
        ov = 1 + (sum(1 for v in vn.values if not _is_zero(v))
                  if vn.encoding == CATEGORICAL else 1)
    return narrow + 1 + r_ov, pairs + narrow + 4 + ov


def _terms(expr: Expr, leaves: list) -> tuple[int, int, float] | None:
    """``(categorical terms, numerical terms, constant)`` of an affine expression: how many
    directions it reads (:func:`~compiler.graph.expr.affine_reads`, as the builder reads them); None
    when not affine or a value is not a number."""
    form = affine_form(expr)
    if form is None:
        return None
    try:
        cat, num, const = affine_reads(
            form, leaves, lambda l: ([(v, None) for v in l.values]
                                     if l.encoding == CATEGORICAL else None))
    except (TypeError, ValueError):
        return None
    return len(cat), len(num), const


def _affine_nonzeros(expr: Expr, leaves: list) -> int:
    per_unit = 1 + SWITCH_OFF_NONZEROS + 1
    t = _terms(expr, leaves)
    if t is None:
        return per_unit * mlp_units(NUMERICAL, expr, leaves)
    cat, num, const = t
    return per_unit * (cat + 2 * num + (const != 0))


def _affine_steps_nonzeros(expr: Expr, leaves: list, encoding: str, zs: list) -> int:
    t = _terms(expr, leaves)
    reads = (t[0] + t[1]) if t is not None else len(leaves)
    out = 2 if encoding == CATEGORICAL else 1
    first = 1 + SWITCH_OFF_NONZEROS + 1 if (encoding == CATEGORICAL or zs[0] != 0) else 0
    return first + 2 * (len(zs) - 1) * (reads + 1 + SWITCH_OFF_NONZEROS + out)


def _ternary_units(expr: Expr, leaves: list) -> int:
    """Units of a ternary MLP built branch by branch (``graph_to_blocks.build_mlp``): per
    branch, the table of its own and its conditions' inputs on which the conditions lead to
    it (:func:`_branch_size`); else :func:`_step_units`."""
    split = _branch_size(expr, leaves, None)
    return split[0] if split is not None else _step_units(expr, leaves)


def _step_units(expr: Expr, leaves: list) -> int:
    return _table_size(expr, leaves, None)[0]


def _is_zero(v) -> bool:
    try:
        return bool(v == 0) and not isinstance(v, str)
    except (TypeError, ValueError):
        return False


def _table(expr: Expr, leaves: list, rows: list) -> list:
    """``(ok, value)`` of ``expr`` on each row (one value per leaf, in order)."""
    ids = [id(l) for l in leaves]
    if not leaves:
        return apply_elementwise_table(lambda *_: eval_expr(expr, {}), [[0]]) * len(rows)
    cols = [[r[i] for r in rows] for i in range(len(leaves))]
    return apply_elementwise_table(lambda *a: eval_expr(expr, dict(zip(ids, a))), cols)


def _table_size(expr: Expr, leaves: list, encoding: str | None,
                combos: list | None = None, no_zero: bool = False) -> tuple[int, int]:
    """``(units, non-zeros)`` of a lookup table or a discretising MLP (one numerical input,
    counted on its values up to ``STEP_COUNT_LIMIT`` rows): see :func:`mlp_units` and
    :func:`mlp_nonzeros`; non-zeros 0 when ``encoding`` is None (units only). ``combos``: the
    combinations of the categorical leaves the table covers (a ternary's branch), else all;
    ``no_zero``: the output is never 0 (a lookup writes every row)."""
    num = [l for l in leaves if l.encoding != CATEGORICAL]
    cat = [l for l in leaves if l.encoding == CATEGORICAL]
    if combos is None:
        n_combos = math.prod(len(l.values) for l in cat) if cat else 1
    else:
        n_combos = len(combos)
    k = sum(l.kind != "full" for l in cat)       # a constant input reads the one direction
    first_in = k + (k != 1) + SWITCH_OFF_NONZEROS      # a lookup unit / the first value's
    step_in = k + 2 + SWITCH_OFF_NONZEROS              # gates, the input, one
    out = 2 if encoding == CATEGORICAL else 1

    def fallback() -> tuple[int, int]:
        units = mlp_cost(leaves) if combos is None else n_combos * (
            1 + 2 * max(len(num[0].values) - 1, 0) if num else 1)
        return units, (units * (k + len(num) + 1 + SWITCH_OFF_NONZEROS + 1)
                       if encoding is not None else 0)
    if not num:
        if encoding is None:
            return fallback()[0], 0
        if combos is None and n_combos <= STEP_COUNT_LIMIT and all(
                l.kind != "full" for l in cat):
            # the builder's decision tree (lookup_cubes) over the whole table
            domains = [list(l.values) for l in cat]
            rows = list(itertools.product(*domains))
            table = {r: (None if ok and encoding != CATEGORICAL and _is_zero(v)
                         else (ok, repr(v))) for r, (ok, v) in zip(rows, _table(expr, cat,
                                                                                  rows))}
            cubes = lookup_cubes(domains, table)
            return len(cubes), sum(cube_nonzeros(p, q) + 1 for p, q, _ in cubes)
        if encoding == CATEGORICAL or no_zero or n_combos > STEP_COUNT_LIMIT:
            return n_combos, n_combos * (first_in + 1)
        rows = combos if combos is not None else list(
            itertools.product(*[l.values for l in cat]))
        written = sum(1 for ok, v in _table(expr, cat, rows) if not ok or not _is_zero(v))
        return n_combos, written * (first_in + 1)
    if len(num) != 1 or num[0].unbounded or not num[0].values or \
            n_combos * len(num[0].values) > STEP_COUNT_LIMIT:
        return fallback()
    x = num[0]
    us = sort_values(v for v in x.values if isinstance(v, (int, float, bool, np.integer,
                                                           np.floating, np.bool_)))
    cs = combos if combos is not None else list(itertools.product(*[l.values for l in cat]))
    rows = [tuple(c) + (u,) for c in cs for u in us]
    if not rows:
        return fallback()
    key = ("table",) + tuple((id(l), l.encoding) for l in cat + [x])
    if combos is not None:
        res = _table(expr, cat + [x], rows)
    else:               # the whole table, shared by the units and the non-zeros
        if key not in expr._units:
            expr._units[key] = _table(expr, cat + [x], rows)
        res = expr._units[key]
    units = nz = 0
    m = len(us)
    for i in range(0, len(res), m):
        block = res[i: i + m]
        seq = [repr(v) if ok else None for ok, v in block]
        changes = sum(a != b for a, b in zip(seq, seq[1:]))
        units += 1 + 2 * changes
        if encoding is not None:
            ok0, v0 = block[0]
            if not ok0 or encoding == CATEGORICAL or not _is_zero(v0):
                nz += first_in + 1
            for (ok1, v1), (ok2, v2), a, b in zip(block, block[1:], seq, seq[1:]):
                if a == b:
                    continue
                if ok1 and ok2:
                    w = out
                else:       # to or from the error flag: the flag and the value written
                    w = 1 + (1 if encoding == CATEGORICAL or
                             not _is_zero(v1 if ok1 else v2) else 0)
                nz += 2 * (step_in + w)
    return units, nz


def _branch_size(expr: Expr, leaves: list, encoding: str) -> tuple[int, int] | None:
    """``(units, non-zeros)`` of a ternary built branch by branch as
    ``graph_to_blocks._branch_tables`` builds it: per branch, the combinations of its own and
    its conditions' categorical inputs on which the conditions lead to it; None when the
    builder would not split (not a ternary, a condition reading a numerical input or failing,
    values mixing strings and numbers, no fewer combinations than the whole table; tables
    beyond ``STEP_COUNT_LIMIT`` rows are not counted)."""
    parts = ternary_parts(expr)
    if len(parts) < 2:
        return None
    truth: dict[int, dict] = {}
    kinds: set = set()              # strings or not, among the values the branches give
    units = nz = rows_total = 0
    for branch, conds in parts:
        cat: list = []
        for c, _ in conds:
            for l in c.leaves():
                if l.encoding != CATEGORICAL:
                    return None
                if all(l is not m for m in cat):
                    cat.append(l)
        for l in branch.leaves():
            if l.encoding == CATEGORICAL and all(l is not m for m in cat):
                cat.append(l)
        if math.prod(len(l.values) for l in cat) > STEP_COUNT_LIMIT:
            return None
        for c, _ in conds:
            if id(c) not in truth:
                cl = c.leaves()
                if not cl:
                    return None
                rows = list(itertools.product(*[l.values for l in cl]))
                t = {}
                for r, (ok, v) in zip(rows, _table(c, cl, rows)):
                    if not ok or not isinstance(v, (bool, int, float, np.bool_, np.integer,
                                                    np.floating)):
                        return None
                    t[r] = bool(v)
                truth[id(c)] = t
        pos = {id(l): i for i, l in enumerate(cat)}
        combos = [combo for combo in itertools.product(*[l.values for l in cat])
                  if all(truth[id(c)][tuple(combo[pos[id(l)]] for l in c.leaves())] == want
                         for c, want in conds)]
        rows_total += len(combos)
        x = [l for l in branch.leaves() if l.encoding != CATEGORICAL]
        rows = [tuple(c) + tuple(u) for c in combos
                for u in itertools.product(*[l.values for l in x])]
        if len(rows) > STEP_COUNT_LIMIT:
            return None
        kinds |= {isinstance(v, str) for ok, v in _table(branch, cat + x, rows) if ok}
        u, z = _table_size(branch, cat + x, encoding, combos)
        units += u
        nz += z
    whole = math.prod(len(l.values) for l in leaves if l.encoding == CATEGORICAL)
    return (units, nz) if rows_total < whole and len(kinds) < 2 else None
