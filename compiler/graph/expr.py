"""Stage 2 (graph), its expressions: what one MLP computes.

An :class:`Expr` is an elementwise expression over compiler nodes (a leaf, or ``fn(*args)``);
fusion substitutes one MLP's expression into its consumer's. Every walk over an expression
is iterative (:meth:`Expr.postorder`), and its leaves and affine form are computed once per
expression, so a chain of thousands of fused maps is linear (issue 13). Leaves are read only
through their attributes (``kind``, ``values``, ``value``, ``unbounded``): this module imports
no other compiler module.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from rasp.ir import Elementwise

__all__ = ["Expr", "eval_expr", "affine_form", "affine_steps", "affine_reads", "ternary_parts",
           "int_values", "AFFINE_STEPS_LIMIT", "NUMERICAL_INT_LIMIT"]

_UNSET = object()   # an Expr attribute not computed yet


class Expr:
    """An elementwise expression: a :class:`CNode` leaf or ``fn(*args)``.

    ``fn`` maps NumPy arrays to an array (the interpreter's elementwise semantics); ``ew`` is
    the IR :class:`~rasp.ir.Elementwise` when known (used to find affine maps)."""

    __slots__ = ("leaf", "fn", "args", "ew", "desc", "_leaves", "_affine", "_units")

    def __init__(self, leaf: "Any | None" = None, fn: Callable | None = None,
                 args: tuple = (), ew: Elementwise | None = None, desc: str = ""):
        self.leaf, self.fn, self.args, self.ew, self.desc = leaf, fn, tuple(args), ew, desc
        self._leaves = None          # cached: an Expr is never changed after construction
        self._affine = _UNSET
        self._units: dict = {}       # mlp_units, per tuple of the leaves' encodings

    def leaves(self) -> list:
        """Distinct leaf nodes, in first-occurrence order (computed once per expression, from
        the arguments' cached leaves, so fusing a chain of maps stays linear)."""
        if self._leaves is None:
            for e in self.postorder(skip=lambda x: x._leaves is not None):
                if e.leaf is not None:
                    e._leaves = (e.leaf,)
                    continue
                out, seen = [], set()
                for a in e.args:
                    for l in a._leaves:
                        if id(l) not in seen:
                            seen.add(id(l))
                            out.append(l)
                e._leaves = tuple(out)
        return list(self._leaves)

    def postorder(self, skip: Callable[["Expr"], bool] | None = None) -> list["Expr"]:
        """The distinct sub-expressions (by identity), every one after its arguments;
        sub-expressions for which ``skip`` is true are neither listed nor entered (the root
        always is).

        Iterative, so a chain of thousands of fused maps is not bounded by Python's recursion
        limit (issue 13); every traversal of an :class:`Expr` goes through it."""
        out, done, stack = [], set(), [(self, False)]
        while stack:
            e, expanded = stack.pop()
            if id(e) in done:
                continue
            if expanded or e.leaf is not None:
                done.add(id(e))
                out.append(e)
                continue
            stack.append((e, True))
            stack.extend((a, False) for a in reversed(e.args)
                         if id(a) not in done and not (skip is not None and skip(a)))
        return out

    def substitute(self, node, expr: "Expr") -> "Expr":
        """This expression with every leaf ``node`` replaced by ``expr``; sub-expressions that
        do not read ``node`` are shared, not copied."""
        new: dict[int, Expr] = {}
        for e in self.postorder(skip=lambda x: not any(l is node for l in x.leaves())):
            if e.leaf is not None:
                new[id(e)] = expr if e.leaf is node else e
            else:
                args = tuple(new.get(id(a), a) for a in e.args)
                same = all(a is b for a, b in zip(args, e.args))
                new[id(e)] = e if same else Expr(fn=e.fn, args=args, ew=e.ew, desc=e.desc)
        return new[id(self)]

    def describe(self) -> str:
        text: dict[int, str] = {}
        for e in self.postorder():
            if e.leaf is not None:
                text[id(e)] = e.leaf.name
            else:
                text[id(e)] = e.desc or "f(" + ", ".join(text[id(a)] for a in e.args) + ")"
        return text[id(self)]


def eval_expr(expr: Expr, env: dict[int, np.ndarray]) -> np.ndarray:
    """Evaluate ``expr`` given ``env[id(leaf)] -> array`` (iteratively, in post-order)."""
    val: dict[int, np.ndarray] = {}
    for e in expr.postorder():
        val[id(e)] = env[id(e.leaf)] if e.leaf is not None else \
            e.fn(*[val[id(a)] for a in e.args])
    return val[id(expr)]


#: the most values of ``z`` an affine discretising MLP is built for (:func:`affine_steps`)
AFFINE_STEPS_LIMIT = 4096


def affine_steps(expr: Expr, leaves: list | None = None) -> list | None:
    """The sorted values of ``expr`` when it is an affine form with integer coefficients and
    constant of leaves whose values are all integers (``length - indices - 1``), computed as a
    sumset; None otherwise or beyond ``AFFINE_STEPS_LIMIT`` values. Such an expression is
    built as steps over ``z`` read linearly from the residual stream
    (``graph_to_blocks._try_affine_steps``)."""
    form = affine_form(expr)
    if form is None:
        return None
    coefs, const = form
    leaves = expr.leaves() if leaves is None else leaves
    if not float(const).is_integer():
        return None
    zs = {int(const)}
    for l in leaves:
        c = coefs.get(id(l), 0.0)
        if c == 0:
            continue
        if not float(c).is_integer() or l.unbounded:
            return None
        vals = [l.value] if l.kind == "full" else l.values
        if not int_values(vals) and not (l.kind == "full" and int_values([l.value])):
            return None
        zs = {z + int(c) * int(v) for z in zs for v in vals}
        if len(zs) > AFFINE_STEPS_LIMIT:
            return None
    return sorted(zs)


def ternary_parts(expr: Expr) -> list[tuple[Expr, list]]:
    """The branches of a (nested) ternary ``x if c else y``: ``[(branch, [(condition,
    truth), ...])]``, each branch with the conditions that lead to it (``[(expr, [])]`` when
    ``expr`` is not a ternary). Iterative."""
    out, stack = [], [(expr, [])]
    while stack:
        e, conds = stack.pop()
        if e.ew is not None and e.ew.op == "ternary" and len(e.args) == 3:
            c, x, y = e.args
            stack.append((y, conds + [(c, False)]))
            stack.append((x, conds + [(c, True)]))
        else:
            out.append((e, conds))
    return out


def affine_form(expr: Expr) -> tuple[dict[int, float], float] | None:
    """``({id(leaf): coefficient}, constant)`` when ``expr`` is an affine function of its
    leaves built from ``+ - neg pos identity`` and multiplication/division by constants; None
    otherwise. Computed once per expression, iteratively over :meth:`Expr.postorder`."""
    if expr._affine is _UNSET:
        for e in expr.postorder(skip=lambda x: x._affine is not _UNSET):
            e._affine = _affine_step(e, [a._affine for a in e.args])
    return expr._affine


def affine_reads(form: tuple[dict[int, float], float], leaves: list,
                 value_dirs: Callable[[Any], "list | None"]) -> tuple[list, list, float]:
    """What an affine MLP of ``form`` (:func:`affine_form`) reads from the residual stream:
    ``(categorical, numerical, constant)`` with ``categorical = [(direction, coefficient *
    value)]`` for each value of a categorical input whose product with its coefficient is not
    0 (a categorical input is ``sum_v v * onehot_v``), ``numerical = [(leaf, coefficient)]``
    for each numerical input with a non-zero coefficient, and the constant with constant
    (``full``) inputs folded in. ``value_dirs(leaf)`` gives a categorical leaf's ``(value,
    direction)`` pairs and None for a numerical one (the builder passes the residual space's
    directions, the pricing ``None`` for each).

    Raises:
        TypeError, ValueError: a value that is not a number."""
    coefs, const = form
    cat, num = [], []
    for l in leaves:
        c = coefs.get(id(l), 0.0)
        if c == 0:
            continue
        if l.kind == "full":
            const += c * float(l.value)
            continue
        dirs = value_dirs(l)
        if dirs is None:
            num.append((l, c))
        else:
            cat.extend((d, c * float(v)) for v, d in dirs if float(v) * c)
    return cat, num, const


def _affine_step(expr: Expr, sub: list) -> tuple[dict[int, float], float] | None:
    """The affine form of ``expr`` given its arguments' forms ``sub`` (None: not affine)."""
    if expr.leaf is not None:
        return {id(expr.leaf): 1.0}, 0.0
    ew = expr.ew
    if ew is None:
        return None
    if any(f is None for f in sub):
        return None

    def scale(f, c):
        return {k: v * c for k, v in f[0].items()}, f[1] * c

    def add(f, g, sign=1.0):
        d = dict(f[0])
        for k, v in g[0].items():
            d[k] = d.get(k, 0.0) + sign * v
        return d, f[1] + sign * g[1]

    c = ew.const
    numeric_const = isinstance(c, (int, float)) and not isinstance(c, bool)
    op = ew.op
    if op in ("pos", "identity") and len(sub) == 1:
        return sub[0]
    if op == "neg" and len(sub) == 1:
        return scale(sub[0], -1.0)
    if op in ("add", "sub"):
        sign = 1.0 if op == "add" else -1.0
        if ew.const_side is None and len(sub) == 2:
            return add(sub[0], sub[1], sign)
        if numeric_const and len(sub) == 1:
            if ew.const_side == "right":
                return sub[0][0], sub[0][1] + sign * c
            return scale(sub[0], sign)[0], c + sign * sub[0][1]
        return None
    if op == "mul" and numeric_const and len(sub) == 1:
        return scale(sub[0], float(c))
    if op == "div" and numeric_const and ew.const_side == "right" and c != 0 and len(sub) == 1:
        return scale(sub[0], 1.0 / c)
    return None


#: :func:`compiler.graph.passes.numerical_where_smaller` (sums of such values stay exact in float64)
NUMERICAL_INT_LIMIT = 2 ** 31


def int_values(values) -> bool:
    return bool(values) and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
        and abs(int(v)) <= NUMERICAL_INT_LIMIT for v in values)
