"""Stage 2 (graph), lowering: the IR DAG to compiler nodes (:mod:`compiler.graph.nodes`).

:class:`Lowerer` walks the IR in topological order and makes one :class:`~compiler.graph.nodes.CNode`
per residual s-op from the value sets it is given (never recomputed here). Rewrites:
``length`` becomes a selector width of an all-true select; a selector width is an ``sw_attn``
head followed by an MLP ``1/(w+1) -> w``; ``kqv``'s truncated mean is a numerical mean
followed by a truncating MLP; numerical s-ops used where a categorical one is needed get a
conversion MLP (:meth:`Lowerer.categorical`); selectors become a conjunction of factors (one
key s-op, one query s-op, a boolean table), ``and`` adds factors, ``not`` of a select negates
its table, ``or``/``not`` over the same key and query s-ops become one table; a map of one
categorical s-op used as a select key or query is absorbed into the table.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Callable

import numpy as np

from rasp.ops import compare, homogeneous_array
from rasp.errors import RASPError
from rasp.ir import (Aggregate, Elementwise, Full, Indices, Length, Map, Select,
                     Selector, SelectorAnd, SelectorNot, SelectorOr, SelectorWidth, SequenceMap,
                     SOp, Tokens, topological_order)
from rasp.analyses.value_sets import (ValueSets, apply_elementwise_table, selects_at_most_one,
                             selects_equal_values, sort_values, values_array)

from ..encoding import CATEGORICAL, NUMERICAL, aggregate_encoding, explicit_encoding
from ..errors import CompilerError, UnsupportedError
from .expr import Expr, eval_expr
from .mlp_pricing import FUSE_LIMIT
from .nodes import CNode, Factor, SelectorSpec

__all__ = ["Lowerer", "MLP_TABLE_LIMIT"]

#: the largest input table (product of the categorical inputs' value sets) of one MLP
MLP_TABLE_LIMIT = 200_000


def _unbounded_error(node, leaf) -> UnsupportedError:
    return UnsupportedError(
        f"it needs the individual values of '{leaf.name}', a numerical s-op whose value set is "
        f"too large to enumerate at this max_seq_len (more than {MLP_TABLE_LIMIT} values); "
        "compile for a smaller max_seq_len or vocabulary", node)


def _is_numeric_values(values) -> bool:
    return all(isinstance(v, (int, float, bool, np.integer, np.floating, np.bool_))
               for v in values)


def _ew_fn(fn: Elementwise) -> Callable:
    return fn.apply


def _sw_fn(t):
    t = np.asarray(t, dtype=np.float64)
    return np.rint(1.0 / t - 1.0).astype(np.int64)


def _trunc_fn(x):
    return np.trunc(np.asarray(x, dtype=np.float64)).astype(np.int64)


def _none_or(m, flag):
    """``None`` where ``flag`` is ``None`` (no key selected), else the mean ``m``."""
    m, flag = np.broadcast_arrays(np.asarray(m), np.asarray(flag, dtype=object))
    return homogeneous_array([None if f is None else v for v, f in
                              zip(m.reshape(-1).tolist(), flag.reshape(-1).tolist())]
                             ).reshape(m.shape)


def _none_or_trunc(m, flag):
    """:func:`_none_or` of ``kqv``'s truncated mean."""
    return _none_or(_trunc_fn(m), flag)


def _cmp_pred(op: str, predicate: Callable | None = None) -> Callable:
    if op == "python":       # a Python predicate(key, query) (Tracr's Select with a callable)
        f = np.frompyfunc(lambda k, q: bool(predicate(k, q)), 2, 1)
        return lambda K, Q: f(np.asarray(K, dtype=object)[None, :],
                              np.asarray(Q, dtype=object)[:, None]).astype(bool)
    if op == "TRUE":
        return lambda K, Q: np.ones((len(Q), len(K)), dtype=bool)
    if op == "FALSE":
        return lambda K, Q: np.zeros((len(Q), len(K)), dtype=bool)
    return lambda K, Q: compare(K[None, :], Q[:, None], op)


#: the most input combinations on which :func:`affine_python_expr` checks a callable
AFFINE_CHECK_LIMIT = 4096
_AFFINE_DENOMINATOR = 10 ** 6


def _plain_number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(
        v, (bool, np.bool_)) and math.isfinite(v)


def affine_python_expr(fn: Elementwise, leaves: list, desc: str) -> Expr | None:
    """An affine :class:`Expr` (``c1*x1 + ... + ck*xk + c0`` in the dialect's arithmetic) for a
    Python callable that computes exactly that on every combination of its inputs' value sets,
    else None.

    Tracr programs write affine maps as callables (``numerical(Map(lambda x: 2 * x + 1, s))``);
    as an opaque callable a numerical one is a discretising MLP with two hidden units per step,
    as arithmetic it is one affine MLP (two units per numerical input). The coefficients are
    read off the callable's values (exact rationals, integers where they are whole) and the
    rewrite is kept only when the dialect's arithmetic on them gives the callable's value
    *bitwise* (same value and type: int stays int, float64 equal to the last bit) on every
    combination — so value sets, MLP tables and the model's arithmetic are unchanged.
    Inputs must be enumerated plain numbers (no bool, None, strings, unbounded or
    float-spread s-ops), at most :data:`AFFINE_CHECK_LIMIT` combinations.
    """
    if not leaves or any(l.kind == "full" or l.unbounded or l.spread or not l.values
                         or not all(_plain_number(v) for v in l.values) for l in leaves):
        return None
    cols = [sort_values(l.values) for l in leaves]
    if math.prod(len(c) for c in cols) > AFFINE_CHECK_LIMIT:
        return None
    combos = list(itertools.product(*cols))
    rows = apply_elementwise_table(fn.apply, [list(c) for c in zip(*combos)])
    if not all(ok and _plain_number(v) for ok, v in rows):
        return None
    out = [v for _, v in rows]
    base = combos[0]
    f0 = Fraction(out[0])
    coefs = []
    for i, col in enumerate(cols):
        if len(col) < 2:
            coefs.append(Fraction(0))
            continue
        # the combination that differs from the first only in input i (product order)
        j = math.prod(len(c) for c in cols[i + 1:])
        # float values carry rounding: the simplest nearby rational (checked bitwise below)
        coefs.append(((Fraction(out[j]) - f0) / (Fraction(col[1]) - Fraction(col[0])))
                     .limit_denominator(_AFFINE_DENOMINATOR))
    const = (f0 - sum(c * Fraction(b) for c, b in zip(coefs, base))).limit_denominator(
        _AFFINE_DENOMINATOR)

    def num(q: Fraction):
        return int(q) if q.denominator == 1 else float(q)

    terms = []
    for leaf, c in zip(leaves, coefs):
        if c == 0:
            continue
        x = Expr(leaf=leaf)
        if c != 1:
            ew = Elementwise("mul", const=num(c), const_side="right")
            x = Expr(fn=ew.apply, args=(x,), ew=ew)
        terms.append(x)
    if not terms:
        return None                      # a constant: the table is as small
    expr = terms[0]
    plus = Elementwise("add")
    for t in terms[1:]:
        expr = Expr(fn=plus.apply, args=(expr, t), ew=plus)
    if const != 0:
        ew = Elementwise("add", const=num(const), const_side="right")
        expr = Expr(fn=ew.apply, args=(expr,), ew=ew)
    env = {id(l): values_array([c[i] for c in combos])[None, :] for i, l in enumerate(leaves)}
    try:
        got = np.asarray(eval_expr(expr, env)).reshape(-1).tolist()
    except Exception:  # noqa: BLE001 - checked int64 arithmetic may overflow: keep the table
        return None
    if any(type(a) is not type(b) or a != b for a, b in zip(got, (_py_num(v) for v in out))):
        return None
    if expr.leaf is not None:            # the identity
        ew = Elementwise("identity")
        return Expr(fn=ew.apply, args=(expr,), ew=ew, desc=desc)
    return Expr(fn=expr.fn, args=expr.args, ew=expr.ew, desc=desc)


def _py_num(v):
    return v.item() if isinstance(v, np.generic) else v


# --------------------------------------------------------------------------------------------


def _tuple_fn(*arrays):
    n = np.asarray(arrays[0]).reshape(-1).shape[0]
    cols = [np.asarray(a).reshape(-1).tolist() for a in arrays]
    out = np.empty(n, dtype=object)
    for i in range(n):
        out[i] = tuple(c[i] for c in cols)
    return out.reshape(np.asarray(arrays[0]).shape)


class Lowerer:
    """Lowers one program's IR to compiler nodes (``lower``); ``extra_roots`` are nodes
    computed only so that the model raises where the interpreter does."""

    def __init__(self, vocab, max_seq_len: int, causal: bool, vs: ValueSets):
        self.vocab = list(vocab)
        self.n = max_seq_len
        self.causal = causal
        self.vs = vs
        self.memo: dict[int, CNode] = {}
        self.names: set[str] = set()
        self.conv_memo: dict[int, CNode] = {}
        #: nodes computed only so that the model raises where the interpreter does
        self.extra_roots: list[CNode] = []
        #: ``[(count head, mean node, IR default)]`` of the output's chain of means of bools
        #: (``CompilerGraph.typing``), innermost first
        self.typing: list = []
        self.warnings: list[str] = []
        self._indices: CNode | None = None
        self.root_id: int | None = None

    # -- names -------------------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        base = base.replace(":", "_").replace(" ", "_") or "sop"
        name, k = base, 1
        while name in self.names or name in ("one", "bos", "pad"):
            k += 1
            name = f"{base}_{k}"
        self.names.add(name)
        return name

    def indices_node(self) -> CNode:
        for c in self.memo.values():
            if c.kind == "indices":
                return c
        if self._indices is None:
            self._indices = CNode("indices", self.fresh("indices"), values=list(range(self.n)))
        return self._indices

    # -- s-ops -------------------------------------------------------------------------------
    def lower(self, root: SOp) -> CNode:
        self.root_id = root.id
        for node in topological_order(root):
            if isinstance(node, SOp) and node.id not in self.memo:
                try:
                    c = self._lower_sop(node)
                except CompilerError:
                    raise
                except RASPError as e:
                    raise UnsupportedError(e.message, node) from None
                self.memo[node.id] = c
        return self.memo[root.id]

    def _lower_sop(self, node: SOp) -> CNode:
        enc = explicit_encoding(node)
        if isinstance(node, Tokens):
            vals = self.vs.sets[node.id]
            if node.conversion == "str" and "tokens" not in self.names:
                name = self.fresh("tokens")
            else:
                name = self.fresh(node.label)
            return CNode("tokens", name, node, enc or CATEGORICAL, vals,
                         conversion=node.conversion)
        if isinstance(node, Indices):
            if self._indices is not None:
                self._indices.ir = node
                if enc:
                    self._indices.encoding = enc
                return self._indices
            c = CNode("indices", self.fresh("indices"), node, enc or CATEGORICAL,
                      list(range(self.n)))
            self._indices = c
            return c
        if isinstance(node, Full):
            v = node.value.item() if isinstance(node.value, np.generic) else node.value
            return CNode("full", self.fresh(node.name or f"full_{v}"), node, CATEGORICAL, [v],
                         value=v)
        if isinstance(node, Length):
            if self.causal:
                raise UnsupportedError(
                    "'length' is the total input length, which a causal (decoder-only) model "
                    "cannot know at earlier positions; use the prefix length "
                    "selector_width(select(indices, indices, <=)) in RASP-L", node)
            spec = SelectorSpec([], None)
            return self._selector_width(node, spec, self.vs.sets[node.id], enc)
        if isinstance(node, (Map, SequenceMap)):
            inputs = [node.inner] if isinstance(node, Map) else list(node.inputs)
            leaves = [self.memo[x.id] for x in inputs]
            desc = node.fn.describe(*[l.name for l in leaves])
            expr = None
            if node.fn.op == "python":
                expr = affine_python_expr(node.fn, leaves, desc)
            if expr is None:
                expr = Expr(fn=_ew_fn(node.fn), args=tuple(Expr(leaf=l) for l in leaves),
                            ew=node.fn, desc=desc)
            if node.id in self.vs.unbounded:
                # an affine map of numbers whose value set is too large to enumerate: one
                # numerical direction, computed exactly by an affine MLP; only consumers that
                # need the values (a discretising MLP, a select) are refused.
                return CNode("mlp", self.fresh(node.label), node, NUMERICAL, [], expr=expr,
                             unbounded=True)
            # a sum / difference of dependent means (value_sets.ValueSets.rounded): its value
            # set is exact but the interpreter's floats may differ from it by an ulp, so it is
            # kept as a number (read by discretising MLPs, which merge such near-duplicates)
            default = NUMERICAL if node.id in self.vs.rounded else CATEGORICAL
            c = CNode("mlp", self.fresh(node.label), node, enc or default,
                      self.vs.sets[node.id], expr=expr, spread=self.vs.spread.get(node.id, {}))
            c.error = self.vs.errors.get(node.id)
            return c
        if isinstance(node, SelectorWidth):
            spec = self.lower_selector(node.selector)
            return self._selector_width(node, spec, self.vs.sets[node.id], enc)
        if isinstance(node, Aggregate):
            return self._aggregate(node, enc)
        raise UnsupportedError("no compilation rule for this node kind", node)

    def _selector_width(self, node: SOp, spec: SelectorSpec, widths: list, enc) -> CNode:
        tvals = sort_values(1.0 / (w + 1) for w in widths)
        attn = CNode("sw_attn", self.fresh(f"{node.label}_sw"), node, NUMERICAL, tvals,
                     selector=spec, internal=True)
        expr = Expr(fn=_sw_fn, args=(Expr(leaf=attn),), desc=f"1/({attn.name}) - 1")
        return CNode("mlp", self.fresh(node.label), node, enc or CATEGORICAL,
                     sort_values(widths), expr=expr)

    def _aggregate(self, node: Aggregate, enc) -> CNode:
        vals_c = self.memo[node.values.id]
        spec = self.lower_selector(node.selector)
        V = vals_c.values
        at_most_one = selects_at_most_one(node.selector, self.vs.sets) or \
            selects_equal_values(node.selector, node.values)
        may_average = (node.reduction == "mean" and len(V) > 1 and not at_most_one)
        if node.reduction == "mean" and any(v is None for v in V) and (
                may_average or node.id in self.vs.unbounded):
            # before the unbounded branch (issue 51, D4: a None-padded mean feeding a mean
            # whose value set is too large to enumerate reached the head builder as a number)
            big = "" if may_average else " (a value set too large to enumerate)"
            raise UnsupportedError(
                f"a mean of '{node.values.label}', which may be None, over a selector that may "
                f"select several keys{big}: the interpreter raises where None is among several "
                "selected values and averages the others, which the compiled model cannot tell "
                "apart; make the selector select one key, or give the inner aggregate a "
                "numeric default", node)
        if node.id in self.vs.unbounded:
            # a numerical mean whose value set is too large to enumerate (the value-set pass
            # accepted it: mean reduction, numeric default, no truncation)
            agg = CNode("aggregate", self.fresh(node.label), node, NUMERICAL, [],
                        selector=spec, values_node=vals_c, default=node.default,
                        reduction="mean", unbounded=True)
            self._bool_typing(agg, V, may_average)
            return agg
        numeric = _is_numeric_values(V)
        default = node.default.item() if isinstance(node.default, np.generic) else node.default
        out_vals = self.vs.means.get(node.id, self.vs.sets[node.id])
        needs_trunc = node.truncate and any(
            isinstance(v, float) and not float(v).is_integer() for v in out_vals)
        if needs_trunc:
            agg_enc = NUMERICAL
        elif default is None and node.reduction in ("max", "min"):
            agg_enc = CATEGORICAL     # None is a value of its own, a number cannot hold it
        else:
            agg_enc = aggregate_encoding(node, numeric, may_average)
        if agg_enc == NUMERICAL and default is None and numeric and None in out_vals:
            return self._none_default_mean(node, spec, vals_c, out_vals, needs_trunc)
        if agg_enc == CATEGORICAL and may_average and numeric:
            raise UnsupportedError(
                "a categorical aggregate that averages: the selector may select several keys "
                "with different values, whose mean is a new number a categorical encoding "
                "cannot hold (Tracr silently returned one of the values); remove the "
                "categorical annotation (the mean is then numerical) or make the selector "
                "select one key", node)
        if agg_enc == NUMERICAL and not numeric:
            raise UnsupportedError("a numerical aggregate needs numeric values, got "
                                   f"{', '.join(map(repr, V[:3]))}", node)
        if agg_enc == NUMERICAL and isinstance(default, str):
            raise UnsupportedError(f"string default {default!r} for a numerical aggregate",
                                   node)
        if node.reduction in ("max", "min") or agg_enc == CATEGORICAL:
            vals_c = self.categorical(vals_c)
        name = self.fresh(node.label + ("_mean" if needs_trunc else ""))
        spread = (self.vs.means_spread if node.id in self.vs.means else self.vs.spread
                  ).get(node.id, {})
        agg = CNode("aggregate", name, node, agg_enc, out_vals, selector=spec,
                    values_node=vals_c, default=default, reduction=node.reduction,
                    may_average=may_average and not numeric,
                    internal=needs_trunc, spread=spread)
        if node.reduction == "mean" and any(isinstance(v, str) for v in V) and not (
                selects_at_most_one(node.selector, self.vs.sets)):
            # the interpreter raises when a mean of strings selects several keys (even equal
            # ones): a head computing 1/(w+1) lets the compiled model raise there too
            agg.count_check = self._count_head(name, node, spec)
        self._bool_typing(agg, V, may_average)
        if not needs_trunc:
            return agg
        expr = Expr(fn=_trunc_fn, args=(Expr(leaf=agg),), desc=f"trunc({agg.name})")
        tvals = sort_values(int(math.trunc(v)) for v in out_vals)
        return CNode("mlp", self.fresh(node.label), node, enc or CATEGORICAL, tvals, expr=expr)

    def _count_head(self, name: str, node: Aggregate, spec: SelectorSpec) -> CNode:
        """A head writing ``1/(w+1)`` for the ``w`` keys ``spec`` selects, read only by the
        compiled model's run-time checks."""
        return CNode("sw_attn", self.fresh(f"{name}_count"), node, NUMERICAL,
                     sort_values(1.0 / (w + 1) for w in range(self.n + 1)), selector=spec,
                     internal=True, is_check=True)

    def _bool_typing(self, agg: CNode, V: list, may_average: bool) -> None:
        """The program's output is a mean of bools with a bool or ``None`` default: the
        interpreter returns the moved bools when every query of the batch selects at most one
        key, else numbers (0/1 when integral); a count head lets ``CompiledModel.run`` type
        the output the same way (``CompiledModel.bool_typing``)."""
        node = agg.ir
        if node.id == self.root_id and may_average and node.reduction == "mean" and V and all(
                isinstance(v, (bool, np.bool_)) for v in V) and (
                node.default is None or isinstance(node.default, (bool, np.bool_))):
            agg.count_check = self._count_head(agg.name, node, agg.selector)
            self.typing = [(agg.count_check, agg, node.default, node.truncate)]
        elif node.id == self.root_id:
            self._bool_chain(agg)

    def _bool_chain(self, agg: CNode) -> None:
        """The output is a mean (bool or ``None`` default) of a mean of bools, possibly through
        several such means (issue 51, D3): the interpreter's values are bools only when every
        mean of the chain selected at most one key for every query of the batch (an inner
        mean that averaged gives numbers, which the outer ones move or average) and no inner
        ``None`` padding made the batch an object array (whose bools a mean turns into 0/1),
        else numbers. Every mean of the chain gets a count head; ``CompiledModel.run`` types
        the output from them and the means' values (:mod:`compiler.bool_typing`)."""
        chain = [agg]
        while True:
            node = chain[-1].ir
            if not (isinstance(node, Aggregate) and chain[-1].kind == "aggregate"
                    and node.reduction == "mean"
                    and (node.default is None or isinstance(node.default, (bool, np.bool_)))):
                return
            V = self.vs.sets.get(node.values.id) or []
            if V and all(isinstance(v, (bool, np.bool_)) for v in V):
                break
            inner = self.memo.get(node.values.id)
            if inner is not None and inner.kind == "mlp" and inner.expr is not None:
                # a mean with the default None (_none_default_mean) or truncated (kqv): its
                # numerical mean node
                inner = next((l for l in inner.expr.leaves() if l.kind == "aggregate"
                              and l.ir is inner.ir and l.reduction == "mean"), None)
            if inner is None or inner.selector is None:
                return
            chain.append(inner)
        if len(chain) < 2:
            return
        for c in chain:
            if c.count_check is None:
                c.count_check = self._count_head(c.name, c.ir, c.selector)
        self.typing = [(c.count_check, c, c.ir.default, c.ir.truncate)
                       for c in reversed(chain)]

    def _none_default_mean(self, node: Aggregate, spec: SelectorSpec, vals_c: CNode,
                           out_vals: list, needs_trunc: bool) -> CNode:
        """A mean of numbers with the default ``None`` (issue 38): ``None`` is a value of its
        own, the mean a number. Three nodes: the numerical mean with the default 0 (a head),
        whether the row selected anything (a head over the same selector moving the constant
        ``True``, default ``None``), and one MLP writing ``None`` where nothing was selected,
        else the mean (truncated for ``kqv``): categorical, with ``None`` among its values, so
        every consumer applies the interpreter's rule to ``None`` as to any value (``None *
        0.5`` raises in both)."""
        spread = (self.vs.means_spread if node.id in self.vs.means else self.vs.spread
                  ).get(node.id, {})
        mean = CNode("aggregate", self.fresh(node.label + "_mean"), node, NUMERICAL,
                     sort_values([v for v in out_vals if v is not None] + [0]), selector=spec,
                     values_node=vals_c, default=0, reduction="mean", internal=True,
                     spread=spread)
        self._bool_typing(mean, self.memo[node.values.id].values, True)
        true = CNode("full", self.fresh("true"), None, CATEGORICAL, [True], value=True)
        flag = CNode("aggregate", self.fresh(node.label + "_selected"), node, CATEGORICAL,
                     [True, None], selector=spec, values_node=true, default=None,
                     reduction="mean", internal=True)
        fn = _none_or_trunc if needs_trunc else _none_or
        desc = f"None if {flag.name} is None else {'trunc(' * needs_trunc}{mean.name}" \
               f"{')' * needs_trunc}"
        return CNode("mlp", self.fresh(node.label), node, CATEGORICAL, self.vs.sets[node.id],
                     expr=Expr(fn=fn, args=(Expr(leaf=mean), Expr(leaf=flag)), desc=desc))

    def categorical(self, c: CNode) -> CNode:
        """``c`` itself when categorical, else its conversion MLP (numerical -> categorical)."""
        if c.encoding == CATEGORICAL:
            return c
        if c.unbounded:
            raise _unbounded_error(c.ir, c)
        if id(c) in self.conv_memo:
            return self.conv_memo[id(c)]
        expr = Expr(fn=lambda x: x, args=(Expr(leaf=c),), desc=f"categorical({c.name})")
        conv = CNode("mlp", self.fresh(f"{c.name}_cat"), c.ir, CATEGORICAL, list(c.values),
                     expr=expr, internal=True, spread=c.spread)
        self.conv_memo[id(c)] = conv
        return conv

    # -- selectors ---------------------------------------------------------------------------
    def lower_selector(self, sel: Selector) -> SelectorSpec:
        causal_flags = {s.causal for s in _selects(sel)}
        factors = self._conj(sel)
        if not self.causal and True in causal_flags:
            # Every causal node of the interpreter masks with key <= query; inside that region
            # the masks are the identity, outside it the (causal) root is false: the selector
            # is its unmasked formula AND key index <= query index.
            idx = self.indices_node()
            factors.append(Factor(idx, idx, lambda K, Q: K[None, :] <= Q[:, None],
                                  "causal: key index <= query index"))
        return SelectorSpec(factors, sel)

    def _conj(self, sel: Selector) -> list:
        if isinstance(sel, Select):
            return self._leaf_factors(sel, negate=False)
        if isinstance(sel, SelectorAnd):
            return self._conj(sel.a) + self._conj(sel.b)
        if isinstance(sel, SelectorNot) and isinstance(sel.a, Select):
            return self._leaf_factors(sel.a, negate=True)
        return [self._formula_factor(sel)]

    def _side(self, sop: SOp) -> "_Side":
        """The key or query side of a select: a categorical node and an optional transform of
        its values. Maps of one categorical s-op (``indices - 1``, ``tokens == "a"``) are
        absorbed into the select's table, which saves an MLP layer."""
        c = self.memo[sop.id]
        if c.kind == "full":
            return _Side(None, None, c.value)
        expr = Expr(leaf=c)
        absorbed = False
        while c.kind == "mlp":
            leaves = c.expr.leaves()
            if len(leaves) != 1 or leaves[0].encoding != CATEGORICAL or len(
                    leaves[0].values) > FUSE_LIMIT or c.error is not None:
                break   # (a map failing on some values keeps its MLP, which flags the error)
            expr = expr.substitute(c, c.expr)
            c = leaves[0]
            absorbed = True
        if not absorbed:
            return _Side(self.categorical(c), None, None)
        if c.kind == "full":
            rows = apply_elementwise_table(lambda a: eval_expr(expr, {id(c): a}), [[c.value]])
            if not rows[0][0]:
                raise UnsupportedError("a select compares a constant that fails to evaluate",
                                       sop)
            return _Side(None, None, rows[0][1])
        return _Side(c, expr, None)

    def _leaf_factors(self, s: Select, negate: bool) -> list:
        if s.op in ("TRUE", "FALSE"):
            self._keep_if_may_raise(s)
        if s.op == "TRUE" and not negate or s.op == "FALSE" and negate:
            return []
        if s.op in ("TRUE", "FALSE"):
            return [Factor(None, None, lambda K, Q: np.zeros((len(Q), len(K)), dtype=bool),
                           "false")]
        ks, qs = self._side(s.keys), self._side(s.queries)
        base = _cmp_pred(s.op, s.predicate)

        def pred(K, Q, base=base, ks=ks, qs=qs, negate=negate):
            Kx, km = ks.apply(K)
            Qx, qm = qs.apply(Q)
            m = np.asarray(base(Kx, Qx), dtype=bool).reshape(len(Qx), len(Kx))
            m = ~m if negate else m
            return m & qm[:, None] & km[None, :]
        return [Factor(ks.node, qs.node, pred, f"{'not ' if negate else ''}{s.label}")]

    def _joint(self, nodes: list, sel: Selector):
        """One categorical node for several key (or query) s-ops of an 'or'/'not' selector:
        an MLP writing the tuple of their values (a combined key/query space). Returns the
        node (None for none) and ``{id(part): tuple position}`` (None for a single node)."""
        if not nodes:
            return None, None
        if len(nodes) == 1:
            return nodes[0], None
        nodes = sorted(nodes, key=lambda c: c.name)
        total = math.prod(len(c.values) for c in nodes)
        if total > FUSE_LIMIT * 4:
            raise UnsupportedError(
                f"'or' / 'not' of selects over {', '.join(c.name for c in nodes)} needs a "
                f"combined key/query space of {total} values (limit {FUSE_LIMIT * 4}); rewrite "
                "it as an 'and' of selects", sel)
        expr = Expr(fn=_tuple_fn, args=tuple(Expr(leaf=c) for c in nodes),
                    desc="(" + ", ".join(c.name for c in nodes) + ")")
        vals = sort_values(itertools.product(*[c.values for c in nodes]))
        name = self.fresh("_".join(c.name for c in nodes) + "_joint")
        j = CNode("mlp", name, sel, CATEGORICAL, vals, expr=expr, internal=True)
        return j, {id(c): i for i, c in enumerate(nodes)}

    def _keep_if_may_raise(self, s: Select) -> None:
        """A ``TRUE``/``FALSE`` select does not read its keys and queries, but the interpreter
        evaluates them: where they may raise, they are computed for the runtime checks."""
        for x in (s.keys, s.queries):
            if self._may_raise(x) and self.memo[x.id].kind != "full":
                self.extra_roots.append(self.memo[x.id])

    def _may_raise(self, sop: SOp) -> bool:
        vs = self.vs
        for x in topological_order(sop):
            if isinstance(x, Select) and x.op in ("<", "<=", ">", ">="):
                kinds = [{isinstance(v, str) for v in vs.sets.get(side.id, [])}
                         for side in (x.keys, x.queries)]
                if kinds[0] and kinds[1] and kinds[0] != kinds[1]:
                    return True       # orders strings against numbers: the interpreter raises
            if not isinstance(x, SOp) or x.id in vs.unbounded:
                continue
            vals = vs.sets.get(x.id, [])
            if x.id in vs.errors or (any(isinstance(v, str) for v in vals)
                                     and not all(isinstance(v, str) for v in vals)):
                return True
            if isinstance(x, Aggregate) and x.reduction == "mean" and any(
                    isinstance(v, str) for v in vs.sets.get(x.values.id, [])):
                return True
        return False

    def _formula_factor(self, sel: Selector) -> Factor:
        leaves = _selects(sel)
        for s in leaves:
            if s.op in ("TRUE", "FALSE"):
                self._keep_if_may_raise(s)
        sides = {}
        for s in leaves:
            if s.op not in ("TRUE", "FALSE"):
                sides[s.id] = (self._side(s.keys), self._side(s.queries))
        keys = {id(k.node): k.node for k, _ in sides.values() if k.node is not None}
        queries = {id(q.node): q.node for _, q in sides.values() if q.node is not None}
        key, kpos = self._joint(list(keys.values()), sel)
        query, qpos = self._joint(list(queries.values()), sel)

        def component(arr, pos, node):
            if pos is None:
                return arr
            i = pos[id(node)]
            return values_array([t[i] for t in arr.tolist()])

        def pred(K, Q, sel=sel):
            def ev(s):
                if isinstance(s, Select):
                    if s.op in ("TRUE", "FALSE"):
                        return np.full((len(Q), len(K)), s.op == "TRUE")
                    ks, qs = sides[s.id]
                    Kx, km = ks.apply(component(K, kpos, ks.node) if ks.node is not None else K)
                    Qx, qm = qs.apply(component(Q, qpos, qs.node) if qs.node is not None else Q)
                    m = np.asarray(_cmp_pred(s.op, s.predicate)(Kx, Qx), dtype=bool
                                   ).reshape(len(Q), len(K))
                    return m & qm[:, None] & km[None, :]
                if isinstance(s, SelectorAnd):
                    return ev(s.a) & ev(s.b)
                if isinstance(s, SelectorOr):
                    return ev(s.a) | ev(s.b)
                if isinstance(s, SelectorNot):
                    return ~ev(s.a)
                raise AssertionError(s)
            return ev(sel)
        return Factor(key, query, pred, sel.label)


def _selects(sel: Selector) -> list:
    """The ``select`` leaves of a selector tree (``and``/``or``/``not``), not the selects
    inside the s-ops it compares."""
    if isinstance(sel, Select):
        return [sel]
    if isinstance(sel, (SelectorAnd, SelectorOr)):
        out = _selects(sel.a)
        return out + [s for s in _selects(sel.b) if all(s is not t for t in out)]
    if isinstance(sel, SelectorNot):
        return _selects(sel.a)
    raise AssertionError(sel)


class _Side:  # noqa: E302
    """One side of a select: ``node`` (None: the constant ``const``) and an optional
    transform ``expr`` of the node's values (an absorbed map)."""

    def __init__(self, node, expr, const):
        self.node, self.expr, self.const = node, expr, const

    def apply(self, arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The compared values for ``arr`` (the node's values, or a dummy for a constant) and
        a mask of the values the transform is defined on."""
        n = len(arr)
        if self.node is None:
            return homogeneous_array([self.const] * n), np.ones(n, dtype=bool)
        if self.expr is None:
            return arr, np.ones(n, dtype=bool)
        node = self.node
        rows = apply_elementwise_table(lambda a: eval_expr(self.expr, {id(node): a}),
                                       [list(arr.tolist())])
        ok = np.array([r[0] for r in rows], dtype=bool)
        good = [r[1] for r in rows if r[0]]
        if not good:
            return arr, np.zeros(n, dtype=bool)
        vals = [r[1] if r[0] else good[0] for r in rows]
        return homogeneous_array(vals), ok


# --------------------------------------------------------------------------------------------
# Fusion and the graph
