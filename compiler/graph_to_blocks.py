"""Stage 4: blocks. Each compiler node becomes an MLP or an attention head (NumPy weights over
the residual space of :mod:`compiler.residual_space`).

MLPs (ReLU; biases come from the ``one`` direction; no unit reads ``bos`` or ``pad`` here:
assembly switches off, with ``-BIG`` from ``bos``, only the units whose output at BOS it cannot
track exactly, :mod:`compiler.blocks_to_model`):

* **lookup table** (categorical inputs): one unit per combination of input values,
  ``ReLU(x_a + y_b + ... - (k-1))`` is 1 exactly for that combination; it writes the output
  value (categorical: its direction; numerical: the number, negatives included).
* **affine** (numerical output, ``+ - * /`` by constants): two units ``ReLU(x)``, ``ReLU(-x)``
  per numerical input (no clamping of negatives: Tracr's failure mode 3), one per value of a
  categorical input, one for the constant.
* **discretising** (one numerical input ``x`` with known sorted values ``u1 < ... < um``): a
  step between ``u_j`` and ``u_j+1`` is ``ReLU(a(x-t)+1/2) - ReLU(a(x-t)-1/2)`` with
  ``t = (u_j + u_j+1)/2`` and slope ``a = 2/(u_j+1 - u_j)`` from *that* gap (Tracr used a
  fixed slope of 100: failure mode 1); exact (flat) within a quarter gap of every value.
  Values closer than ``MERGE_TOL`` are one value rounded two ways: they form a group whose
  output is the function at the group's simplest rational (``trunc`` of ``{0.9999999999999999,
  1}`` is 1), and steps sit midway between groups.
  Categorical inputs gate the steps (a large negative term unless the combination matches).

Attention heads (the ``bos`` key gets a logit of its own through one extra head dimension):

* **aggregate (mean)**: logit ``S`` where every factor of the selector holds, ``<= 0``
  elsewhere; BOS gets ``S/2``, so a query attends to BOS only when no key is selected, and
  BOS's value is the default (Tracr's failure mode 5: defaults decoded as a zero vector).
* **max / min**: the same logits plus ``delta * rank(value)`` on the key side, with ``S`` larger
  than every rank term: a near-zero-temperature mean over the best-ranked selected keys.
* **selector width**: BOS gets ``S`` (the weight of a selected key); the value is 1 at BOS only,
  so the head writes ``1/(w+1)``; the following MLP turns it into ``w``.
* PAD keys get a logit of ``-1e4 * S``; the BOS *query* attends only to BOS (``+F``).

The key and value rows of the ``bos`` direction are completed at assembly
(:mod:`compiler.blocks_to_model`), when the BOS position's residual is known, so that the BOS key is
exactly the extra dimension and the BOS value exactly the default.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from typing import Any

import numpy as np

from rasp.analyses.value_sets import apply_elementwise_table, sequence_kind, sort_values

from .encoding import NUMERICAL
from .errors import CompilerError, FloatPrecisionError
from .float_spread import same_result, simplest_float
from .graph.expr import affine_form, affine_reads, affine_steps, eval_expr, ternary_parts
from .graph.mlp_pricing import lookup_cubes
from .graph.nodes import CNode
from .residual_space import ResidualSpace

__all__ = ["MLPBlock", "HeadBlock", "build_mlp", "build_head", "SCORE", "RANK_STEP", "BIG",
           "PAD_SCALE"]

#: attention logit of a selected key (mean, selector width): unselected keys get e^-80 weight
SCORE = 80.0
#: logit step between adjacent value ranks of a max / min aggregate
RANK_STEP = 40.0
#: the switch-off term of an MLP unit at BOS (from the ``bos`` direction; assembly)
BIG = 1e9
#: PAD keys get ``-PAD_SCALE`` times the BOS logit
PAD_SCALE = 1e4


@dataclass
class MLPBlock:
    """One compiled MLP: ``W_in [d_model, hidden]``, ``W_out [hidden, d_model]``."""

    node: CNode
    W_in: np.ndarray
    W_out: np.ndarray
    kind: str = "lookup"

    @property
    def hidden(self) -> int:
        return self.W_in.shape[1]


@dataclass
class HeadBlock:
    """One compiled attention head before assembly.

    ``W_Q, W_K [d_model, r_qk]`` (the last column is the BOS dimension), ``k_bos [r_qk]`` the
    BOS key vector to enforce, ``W_V [d_model, r_ov]``, ``W_O [r_ov, d_model]``, ``v_bos
    [r_ov]`` the BOS value vector to enforce (the default)."""

    node: CNode
    W_Q: np.ndarray
    W_K: np.ndarray
    k_bos: np.ndarray
    W_V: np.ndarray
    W_O: np.ndarray
    v_bos: np.ndarray
    kind: str = "mean"

    @property
    def r_qk(self) -> int:
        return self.W_Q.shape[1]

    @property
    def r_ov(self) -> int:
        return self.W_V.shape[1]


# --------------------------------------------------------------------------------------------
# MLPs
# --------------------------------------------------------------------------------------------

class _Units:
    def __init__(self, d: int):
        self.d = d
        self.ins: list[dict] = []
        self.outs: list[dict] = []

    def add(self, w_in: dict, w_out: dict):
        self.ins.append(w_in)
        self.outs.append(w_out)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        H = len(self.ins)
        W_in = np.zeros((self.d, H))
        W_out = np.zeros((H, self.d))
        for W, table, transpose in ((W_in, self.ins, True), (W_out, self.outs, False)):
            rows, cols, vals = [], [], []
            for j, dct in enumerate(table):
                rows.extend(dct.keys())
                vals.extend(dct.values())
                cols.extend([j] * len(dct))
            if rows:
                if transpose:
                    np.add.at(W, (np.asarray(rows), np.asarray(cols)), np.asarray(vals))
                else:
                    np.add.at(W, (np.asarray(cols), np.asarray(rows)), np.asarray(vals))
        return W_in, W_out


def _is_number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(
        v, (bool, np.bool_))


def _out_vec(node: CNode, space: ResidualSpace, y, sign: float = 1.0) -> dict:
    if space.is_categorical(node):
        dirs = space.dirs(node)
        if y not in dirs:
            raise CompilerError(f"internal: value {y!r} of '{node.name}' missing from its value "
                                "set", node.span)
        return {dirs[y]: sign}
    if not _is_number(y) and not isinstance(y, (bool, np.bool_)):
        raise CompilerError(f"numerical s-op '{node.name}' takes the non-numeric value {y!r}",
                            node.span)
    return {space.dir(node): sign * float(y)} if float(y) != 0 else {}


def _sub(a: dict, b: dict) -> dict:
    d = dict(a)
    for k, v in b.items():
        d[k] = d.get(k, 0.0) - v
    return {k: v for k, v in d.items() if v != 0}


def build_mlp(node: CNode, space: ResidualSpace, hazards: list[str] | None = None) -> MLPBlock:
    """The MLP computing ``node`` (kind ``mlp``) from its leaves (see module docstring).

    Raises :class:`FloatPrecisionError` when the MLP's output differs between floats the
    interpreter may hold for one value of its numerical input (``CNode.spread``), or, with a
    ``hazards`` list, records that message there and builds the MLP from the reference value.

    A ternary ``x if c else y`` (nested ones too) is built branch by branch
    (:func:`~compiler.graph.expr.ternary_parts`): each branch's table runs over the values
    of its own inputs and of the conditions leading to it, gated by those conditions, instead
    of over every input of the whole expression (``digit if is_hint else next_hint``: 10 + 125
    combinations, not 2 x 10 x 125)."""
    leaves = node.expr.leaves()
    units = _Units(space.d_model)
    if node.encoding == NUMERICAL and _try_affine(node, leaves, space, units):
        W_in, W_out = units.arrays()
        return MLPBlock(node, W_in, W_out, "affine")
    if _try_affine_steps(node, leaves, space, units):
        W_in, W_out = units.arrays()
        return MLPBlock(node, W_in, W_out, "discretising")
    num = [l for l in leaves if not space.is_categorical(l)]
    if len(num) > 1:
        raise CompilerError(f"internal: MLP '{node.name}' reads {len(num)} numerical s-ops",
                            node.span)
    parts = _branch_tables(node, space)
    if parts is None:
        cat = [l for l in leaves if space.is_categorical(l)]
        parts = [(node.expr, cat, list(itertools.product(
            *[list(space.dirs(l).keys()) for l in cat])))]
    for expr, cat, combos in parts:
        x = [l for l in expr.leaves() if not space.is_categorical(l)]
        if x:
            _discretising_units(node, expr, cat, combos, x[0], space, units, hazards)
        else:
            _lookup_units(node, expr, cat, combos, space, units)
    W_in, W_out = units.arrays()
    return MLPBlock(node, W_in, W_out, "discretising" if num else "lookup")


def _try_affine_steps(node: CNode, leaves: list, space: ResidualSpace, units: _Units) -> bool:
    """An integer affine expression of integer inputs (``length - indices - 1``) as one
    discretising MLP over ``z = sum_i c_i x_i + b`` read linearly from the residual stream (a
    numerical input from its direction, a categorical one as ``sum_v v * onehot_v``): two
    units per step between consecutive values of ``z`` (``expr.affine_steps``),
    instead of one unit per combination of the inputs. False (nothing added) when the
    expression is not of that form or the table is not larger."""
    z_values = affine_steps(node.expr, leaves)
    if z_values is None or node.error is not None or any(l.spread for l in leaves):
        return False
    cat = [l for l in leaves if space.is_categorical(l) and l.kind != "full"]
    num = [l for l in leaves if not space.is_categorical(l)]
    table = math.prod(len(space.dirs(l)) for l in cat)       # the lookup's units
    if len(num) == 1:                                        # the discretising MLP's
        table *= 1 + 2 * (len(num[0].values) - 1)
    if len(num) <= 1 and 1 + 2 * (len(z_values) - 1) >= table:
        return False
    form = _checked_affine_form(node, leaves)
    if form is None:
        return False
    cat_terms, num_terms, const = _affine_terms(leaves, form, space)
    w: dict[int, float] = {}
    for d, x in cat_terms + num_terms:
        w[d] = w.get(d, 0.0) + x
    outs = []
    for z in z_values:
        if not _representable(node, space, z):
            return False
        outs.append(_out_vec(node, space, z))
    if outs[0]:
        units.add({ResidualSpace.ONE: 1.0}, outs[0])
    for u1, u2, v1, v2 in zip(z_values, z_values[1:], outs, outs[1:]):
        delta = _sub(v2, v1)
        if not delta:
            continue
        a = 2.0 / (u2 - u1)
        t = (u1 + u2) / 2.0
        for off, sign in ((0.5, 1.0), (-0.5, -1.0)):
            w_in = {d: a * x for d, x in w.items()}
            w_in[ResidualSpace.ONE] = w_in.get(ResidualSpace.ONE, 0.0) + a * (const - t) + off
            units.add(w_in, {d: sign * x for d, x in delta.items()})
    return True


def _branch_tables(node: CNode, space: ResidualSpace) -> list | None:
    """``[(branch expression, categorical leaves, their value combinations)]`` of a ternary
    MLP: per branch, the combinations of the branch's and its conditions' categorical inputs
    on which the conditions lead to it. None when the MLP is not a ternary, when it flags
    errors (the interpreter evaluates both branches everywhere, so every combination is
    needed), when its values mix strings and numbers (chosen per sequence), when a
    condition reads a numerical input, or when the split is not smaller."""
    parts = ternary_parts(node.expr)
    if len(parts) < 2 or node.error is not None:
        return None
    if len({isinstance(v, str) for v in node.values}) > 1:
        return None
    truth: dict[int, dict] = {}              # id(condition) -> {combo of its leaves: bool}
    out, total = [], 0
    for branch, conds in parts:
        cat: list = []
        for c, _ in conds:
            for l in c.leaves():
                if not space.is_categorical(l):
                    return None
                if all(l is not m for m in cat):
                    cat.append(l)
        for l in branch.leaves():
            if space.is_categorical(l) and all(l is not m for m in cat):
                cat.append(l)
        for c, _ in conds:
            if id(c) not in truth:
                t = _truth_table(c, space)
                if t is None:
                    return None
                truth[id(c)] = t
        pos = {id(l): i for i, l in enumerate(cat)}
        combos = []
        for combo in itertools.product(*[list(space.dirs(l).keys()) for l in cat]):
            if all(truth[id(c)][tuple(combo[pos[id(l)]] for l in c.leaves())] == want
                   for c, want in conds):
                combos.append(combo)
        total += len(combos)
        out.append((branch, cat, combos))
    full = math.prod(len(space.dirs(l)) for l in node.expr.leaves() if space.is_categorical(l))
    return out if total < full else None


def _truth_table(cond, space: ResidualSpace) -> dict | None:
    """``{combination of the condition's leaf values: truthiness}`` (``astype(bool)``, the
    ternary's rule); None when it fails or is not a bool / number on some combination."""
    leaves = cond.leaves()
    combos = list(itertools.product(*[list(space.dirs(l).keys()) for l in leaves]))
    ids = [id(l) for l in leaves]
    cols = [[c[i] for c in combos] for i in range(len(leaves))]
    rows = apply_elementwise_table(lambda *a: eval_expr(cond, dict(zip(ids, a))), cols) \
        if leaves else []
    table = {}
    for combo, (ok, v) in zip(combos, rows):
        if not ok or not isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating)):
            return None
        table[combo] = bool(v)
    return table if leaves else None


def _lookup_units(node: CNode, expr, cat: list, combos: list, space: ResidualSpace,
                  units: _Units) -> None:
    """One unit per combination of the categorical inputs ``cat``: ``ReLU(x_a + y_b + ... -
    (k-1))`` writes ``expr``'s value there (or the error flag where it fails)."""
    ids = [id(l) for l in cat]

    def f(*arrays):
        return eval_expr(expr, dict(zip(ids, arrays)))

    cols = [[c[i] for c in combos] for i in range(len(cat))]
    rows = apply_elementwise_table(f, cols) if cat else [_const_row(f)]
    k = len(cat)
    err = space.err.get(node.name)
    domains = [list(space.dirs(l).keys()) for l in cat]
    if cat and len(combos) == math.prod(len(d) for d in domains) and \
            len({id(l) for l in cat}) == k and all(space.dirs(l) and l.kind != "full"
                                                   for l in cat):
        # every combination: one unit per cube of the decision tree (mlp_pricing.lookup_cubes)
        table = {}
        for combo, (ok, y) in zip(combos, rows):
            if not ok:
                table[tuple(combo)] = (("err", err),) if err is not None else None
            else:
                out = _out_vec(node, space, y)
                table[tuple(combo)] = tuple(sorted(out.items())) if out else None
        for pos, neg, res in lookup_cubes(domains, table):
            w_in: dict[int, float] = {}
            for (i, v), sign in [(x, 1.0) for x in pos] + [(x, -1.0) for x in neg]:
                d = space.dirs(cat[i])[v]
                w_in[d] = w_in.get(d, 0.0) + sign
            if len(pos) != 1:
                w_in[ResidualSpace.ONE] = w_in.get(ResidualSpace.ONE, 0.0) + 1 - len(pos)
            units.add(w_in, {err: 1.0} if res[0][0] == "err" else dict(res))
        return
    for combo, (ok, y) in zip(combos, rows):
        if not ok:
            if err is not None:   # flag the interpreter's error at this combination
                w_in = _merge_in(cat, combo, space)
                w_in[ResidualSpace.ONE] = w_in.get(ResidualSpace.ONE, 0.0) - (k - 1)
                units.add(w_in, {err: 1.0})
            continue
        out = _out_vec(node, space, y)
        if not out:
            continue
        w_in = _merge_in(cat, combo, space)
        w_in[ResidualSpace.ONE] = w_in.get(ResidualSpace.ONE, 0.0) - (k - 1)
        units.add(w_in, out)


def _discretising_units(node: CNode, expr, cat: list, combos: list, x: CNode,
                        space: ResidualSpace, units: _Units,
                        hazards: list[str] | None = None) -> None:
    """Steps along the numerical input ``x`` per combination of the categorical inputs
    ``cat`` (which gate them), writing ``expr``'s value (module docstring)."""
    ids = [id(l) for l in cat] + [id(x)]

    def f(*arrays):
        return eval_expr(expr, dict(zip(ids, arrays)))

    xdir = space.dir(x)
    us = sort_values(v for v in x.values if _is_number(v) or isinstance(v, (bool, np.bool_)))
    groups = _spread_groups(us, x.spread)
    k = len(cat)
    span = (groups[-1].hi - groups[0].lo) if len(groups) > 1 else 1.0
    # a group is one value for the model: its canonical values (several when closer than
    # MERGE_TOL) and every float the interpreter may hold for them (x.spread). f is evaluated
    # at all of them: the group's output is f at its reference value (the canonical value
    # nearest the group's simplest rational), and every other result must be the same up to
    # float rounding, else the model could not follow the interpreter (refused)
    combos_x = [(c, u) for c in combos for g in groups for u in g.points]
    cols = [[cx[0][i] for cx in combos_x] for i in range(k)] + [[cx[1] for cx in combos_x]]
    rows = apply_elementwise_table(f, cols)
    table = {}
    for (c, u), r in zip(combos_x, rows):
        table[(c, u)] = r
    err = space.err.get(node.name)
    for c in combos:
        seq = []                      # (lowest, highest value of a group, output vector)
        for g in groups:
            ok, y = table[(c, g.ref)]
            for u in g.points:
                if not _equivalent_output(node, space, (ok, y), table[(c, u)]):
                    other = table[(c, u)]
                    perr = FloatPrecisionError(
                        f"precision-sensitive: its input '{x.name}' takes {g.ref!r} and "
                        f"{u!r}, one value up to float64 rounding (a mean's sum rounded "
                        f"differently), where it gives {_shown(ok, y)} and {_shown(*other)}; "
                        "the compiled model cannot tell them apart", node.ir)
                    if hazards is None:
                        raise perr
                    hazards.append(perr.message)
                    break
            if ok and _representable(node, space, y):
                vec = _out_vec(node, space, y)
            elif err is not None and not ok:
                vec = {err: 1.0}      # the function fails here: flag the interpreter's error
            else:
                continue
            seq.append((g.lo, g.hi, vec))
        if not seq:
            continue
        gate = _merge_in(cat, c, space)          # sum of matching directions
        base_in = dict(gate)
        base_in[ResidualSpace.ONE] = base_in.get(ResidualSpace.ONE, 0.0) - (k - 1)
        if seq[0][2]:
            units.add(base_in, seq[0][2])
        for (_, u1, v1), (u2, _, v2) in zip(seq, seq[1:]):
            delta = _sub(v2, v1)
            if not delta:
                continue
            # the step sits midway between the two groups and is flat (exact) within a
            # quarter gap of it: every known value maps exactly to its own group's output
            gap = u2 - u1
            a = 2.0 / gap
            t = (u1 + u2) / 2.0
            M = a * span + 4.0
            for off, sign in ((0.5, 1.0), (-0.5, -1.0)):
                w_in = {d: M * w for d, w in gate.items()}
                w_in[xdir] = w_in.get(xdir, 0.0) + a
                w_in[ResidualSpace.ONE] = w_in.get(ResidualSpace.ONE, 0.0) - a * t + off - M * k
                units.add(w_in, {d: sign * v for d, v in delta.items()})


#: values of a numerical s-op closer than this (relative) are one value (float rounding of the
#: same mean computed two ways, e.g. 1.1666666666666665 and 1.1666666666666667, or
#: 0.9999999999999999 and 1)
MERGE_TOL = 1e-10
#: the largest denominator tried when looking for the exact value behind a group of values
MAX_DENOMINATOR = 10 ** 9


def _cluster(us: list[float]) -> list[list[float]]:
    """Sorted values grouped: near-duplicates (float rounding, within ``MERGE_TOL`` of the
    group's first value) form one group."""
    out: list[list[float]] = []
    for u in us:
        if out and u - out[-1][0] <= MERGE_TOL * max(1.0, abs(u)):
            out[-1].append(u)
            continue
        out.append([u])
    return out


def _simplest(group: list[float]) -> float:
    """The float of the simplest rational within ``MERGE_TOL`` of the group
    (:func:`compiler.float_spread.simplest_float`): the exact value that its members are roundings
    of (1 for ``0.9999999999999999`` and ``1``; 7/6 for ``1.1666666666666665`` and
    ``1.1666666666666667``); the group's middle member when there is none."""
    s = simplest_float(group[0], group[-1], MERGE_TOL, MAX_DENOMINATOR)
    return group[len(group) // 2] if s is None else s


@dataclass
class _Group:
    """Values of a numerical input that the model cannot tell apart: ``lo..hi`` spans
    ``points`` (its canonical values and every float the interpreter may hold for them);
    ``ref`` is the canonical value the group's output is computed at."""

    lo: float
    hi: float
    ref: Any
    points: list


def _spread_groups(us: list, spread: dict) -> list[_Group]:
    """The sorted values ``us`` grouped: near-duplicates (:func:`_cluster`) and values whose
    float spreads (``spread``: ``{value: floats}``) meet are one group."""
    by_float: dict[float, list] = {}
    for u in us:
        by_float.setdefault(float(u), []).append(u)
    out: list[_Group] = []
    for cl in _cluster(sorted(by_float)):
        canon = [u for x in cl for u in by_float[x]]
        pts = list(canon) + [m for u in canon for m in spread.get(u, ())]
        lo, hi = min(float(p) for p in pts), max(float(p) for p in pts)
        if out and lo - out[-1].hi <= MERGE_TOL * max(1.0, abs(lo)):
            g = out[-1]
            g.hi = max(g.hi, hi)
            g.points.extend(pts)
            continue
        s = _simplest(cl)
        ref = min(canon, key=lambda u: (abs(float(u) - s), float(u)))
        out.append(_Group(lo, hi, ref, pts))
    return out


def _shown(ok: bool, y) -> str:
    return repr(y) if ok else "an error"


def _equivalent_output(node: CNode, space: ResidualSpace, ref: tuple, other: tuple) -> bool:
    """Whether ``other`` (an ``(ok, value)`` result) is ``ref`` up to float rounding for
    ``node``'s encoding: a numerical output within ``SPREAD_TOL``; a categorical one equal, or
    one of the floats the interpreter may hold for it (``node.spread``)."""
    if ref[0] != other[0] or not ref[0]:
        return ref[0] == other[0]
    if not space.is_categorical(node):
        return same_result(ref, other)
    y, z = ref[1], other[1]
    if sequence_kind(y) == sequence_kind(z) and y == z:
        return True
    return sequence_kind(z) == "num" and any(z == m for m in node.spread.get(y, ()))


def _representable(node: CNode, space: ResidualSpace, y) -> bool:
    """Whether ``node``'s encoding can hold ``y`` (a value of its value set, or a number)."""
    try:
        _out_vec(node, space, y)
    except (CompilerError, TypeError, ValueError):
        return False
    return True


def _const_row(f):
    rows = apply_elementwise_table(lambda *_: f(), [[0]])
    return rows[0]


def _merge_in(cat: list, combo, space: ResidualSpace) -> dict:
    w: dict[int, float] = {}
    for l, v in zip(cat, combo):
        d = space.dirs(l)[v]
        w[d] = w.get(d, 0.0) + 1.0
    return w


def _checked_affine_form(node: CNode, leaves: list):
    """``affine_form(node.expr)`` when every leaf holds numbers and the form agrees with the
    expression on 24 sample combinations (guards against dtype surprises); else None."""
    form = affine_form(node.expr)
    if form is None:
        return None
    for l in leaves:
        if any(not _is_number(v) for v in l.values):
            return None
    coefs, const = form
    rng = random.Random(0)
    ids = [id(l) for l in leaves]
    samples = [[rng.choice(l.values) if l.values else rng.uniform(-2, 2) for l in leaves]
               for _ in range(24)]
    for s in samples:
        ok, y = apply_elementwise_table(
            lambda *arrays: eval_expr(node.expr, dict(zip(ids, arrays))), [[v] for v in s])[0]
        if not ok or not _is_number(y):
            continue
        y = float(y)
        pred = const + sum(coefs.get(i, 0.0) * float(v) for i, v in zip(ids, s))
        if not math.isclose(y, pred, rel_tol=1e-9, abs_tol=1e-9):
            return None
    return form


def _affine_terms(leaves: list, form, space: ResidualSpace):
    """The affine form's reads of the residual stream (:func:`~compiler.graph.expr.affine_reads`)
    with numerical inputs as ``(direction, coefficient)``."""
    cat, num, const = affine_reads(
        form, leaves, lambda l: list(space.dirs(l).items()) if space.is_categorical(l) else None)
    return cat, [(space.dir(l), c) for l, c in num], const


def _try_affine(node: CNode, leaves: list, space: ResidualSpace, units: _Units) -> bool:
    form = _checked_affine_form(node, leaves)
    if form is None:
        return False
    cat, num, const = _affine_terms(leaves, form, space)
    out = space.dir(node)
    for d, w in cat:
        units.add({d: 1.0}, {out: w})
    for d, c in num:
        units.add({d: 1.0}, {out: c})
        units.add({d: -1.0}, {out: -c})
    if const != 0:
        units.add({ResidualSpace.ONE: 1.0}, {out: const})
    return True


# --------------------------------------------------------------------------------------------
# Attention heads
# --------------------------------------------------------------------------------------------

def _factor_dirs(node_or_none, space: ResidualSpace) -> list[int]:
    if node_or_none is None:
        return [ResidualSpace.ONE]
    return [space.dirs(node_or_none)[v] for v in space.dirs(node_or_none).keys()]


def build_head(node: CNode, space: ResidualSpace) -> HeadBlock:
    """The attention head of an ``aggregate`` or ``sw_attn`` node (see module docstring)."""
    d = space.d_model
    ONE, BOS, PAD = ResidualSpace.ONE, ResidualSpace.BOS, ResidualSpace.PAD
    spec = node.selector
    reduction = node.reduction if node.kind == "aggregate" else "mean"
    rank_terms: dict[int, float] = {}
    if reduction in ("max", "min"):
        vdirs = space.dirs(node.values_node)
        vals = sort_values(vdirs.keys())
        R = len(vals)
        for i, v in enumerate(vals):
            r = i if reduction == "max" else R - 1 - i
            if r:
                rank_terms[vdirs[v]] = RANK_STEP * r
        S = 2.0 * RANK_STEP * max(R - 1, 0) + SCORE
    else:
        S = SCORE
    M: dict[tuple[int, int], float] = {}

    def addm(q, k, w):
        if w:
            M[(q, k)] = M.get((q, k), 0.0) + w
    nf = len(spec.factors)
    for fac in spec.factors:
        tab = fac.table()
        kd = _factor_dirs(fac.key, space)
        qd = _factor_dirs(fac.query, space)
        # columns constant across queries go on the query's ONE; rows constant likewise
        for qi, q in enumerate(qd):
            for ki, k in enumerate(kd):
                if tab[qi, ki]:
                    addm(q, k, S)
    addm(ONE, ONE, -S * (nf - 1))
    for k, w in rank_terms.items():
        addm(ONE, k, w)
    M = {key: w for key, w in M.items() if w != 0}
    qdirs = sorted({q for q, _ in M})
    kdirs = sorted({k for _, k in M})
    big_sel = S * (nf + 1) + sum(abs(w) for w in rank_terms.values()) + abs(S * (nf - 1))
    F = 2.0 * big_sel + 100.0
    if len(kdirs) <= len(qdirs):
        r = len(kdirs) + 1
        W_Q = np.zeros((d, r))
        W_K = np.zeros((d, r))
        for j, k in enumerate(kdirs):
            W_K[k, j] = 1.0
        for (q, k), w in M.items():
            W_Q[q, kdirs.index(k)] += w
    else:
        r = len(qdirs) + 1
        W_Q = np.zeros((d, r))
        W_K = np.zeros((d, r))
        for i, q in enumerate(qdirs):
            W_Q[q, i] = 1.0
        for (q, k), w in M.items():
            W_K[k, qdirs.index(q)] += w
    b = r - 1
    bos_logit = S if node.kind == "sw_attn" else S / 2.0
    W_Q[ONE, b] += bos_logit
    W_Q[BOS, b] += F
    W_K[PAD, b] = -PAD_SCALE
    k_bos = np.zeros(r)
    k_bos[b] = 1.0
    # -- values / output ---------------------------------------------------------------------
    cols_v: list[dict] = []
    cols_o: list[dict] = []
    bos_v: list[float] = []
    if node.kind == "sw_attn":
        cols_v.append({})
        cols_o.append({space.dir(node): 1.0})
        bos_v.append(1.0)
        kind = "selector_width"
    else:
        vn = node.values_node
        kind = reduction
        if not space.is_categorical(node):
            out = space.dir(node)
            if space.is_categorical(vn):
                cols_v.append({dd: float(v) for v, dd in space.dirs(vn).items() if float(v)})
            else:
                cols_v.append({space.dir(vn): 1.0})
            cols_o.append({out: 1.0})
            bos_v.append(float(node.default) if _is_number(node.default) or isinstance(
                node.default, (bool, np.bool_)) else 0.0)
        else:
            outdirs = space.dirs(node)
            vdirs = space.dirs(vn)
            default_col = None
            by_out: dict[int, int] = {}
            for v, dd in vdirs.items():
                if v not in outdirs:
                    raise CompilerError(f"internal: value {v!r} missing from '{node.name}'",
                                        node.span)
                od = outdirs[v]
                if od not in by_out:
                    by_out[od] = len(cols_v)
                    cols_v.append({})
                    cols_o.append({od: 1.0})
                    bos_v.append(0.0)
                cols_v[by_out[od]][dd] = cols_v[by_out[od]].get(dd, 0.0) + 1.0
            if node.default in outdirs and node.values:
                od = outdirs[node.default]
                if od in by_out:
                    default_col = by_out[od]
                else:
                    default_col = len(cols_v)
                    cols_v.append({})
                    cols_o.append({od: 1.0})
                    bos_v.append(0.0)
                bos_v[default_col] = 1.0
    rv = len(cols_v)
    W_V = np.zeros((d, rv))
    W_O = np.zeros((rv, d))
    for j, (cv, co) in enumerate(zip(cols_v, cols_o)):
        for k, w in cv.items():
            W_V[k, j] += w
        for k, w in co.items():
            W_O[j, k] += w
    return HeadBlock(node, W_Q, W_K, k_bos, W_V, W_O, np.asarray(bos_v, dtype=float), kind)
