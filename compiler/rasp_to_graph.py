"""Stage 1: the IR as a compiler graph (a ``networkx.DiGraph``).

The IR DAG (:mod:`rasp.ir`) is lowered to *compiler nodes* (:class:`CNode`), one per residual
s-op, each computed by one block of the transformer:

==============  =====================================================================
kind            computed by
==============  =====================================================================
``tokens``      the token embedding ``W_E`` (one per token conversion)
``indices``     the position embedding ``W_pos`` (BOS at position 0, so index ``p - 1``)
``full``        the constant ``one`` direction (a constant s-op costs nothing)
``mlp``         an MLP: a fused expression (:class:`Expr`) of its leaf nodes
``aggregate``   an attention head (mean / max / min), default from the BOS token
``sw_attn``     the attention half of a selector width: ``1/(w+1)`` in one direction
==============  =====================================================================

Rewrites done here (Tracr's shape, plus fixes of its failure modes, ``docs/compiler.md``):
``length`` becomes a selector width of an all-true select; a selector width is an ``sw_attn``
head followed by an MLP ``1/(w+1) -> w``; ``kqv``'s truncated mean is a numerical mean followed
by a truncating MLP; chains of elementwise ops whose intermediate results have one consumer are
fused into one MLP (also after a selector width or a truncation); numerical s-ops used where a
categorical one is needed get a conversion MLP; selectors become a conjunction of *factors*
(one key s-op, one query s-op, a boolean table), ``and`` adds factors, ``not`` of a select
negates its table, ``or``/``not`` over the same key and query s-ops become one table.

:func:`build_graph` returns a :class:`CompilerGraph` with ``.graph`` (``networkx.DiGraph``,
edges child -> parent, node attribute ``cnode``), ``.nodes`` (topological order), ``.output``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import networkx as nx
import numpy as np

from rasp.ops import compare, homogeneous_array
from rasp.errors import RASPError
from rasp.ir import (Aggregate, Elementwise, Full, Indices, Length, Map, Node, Select,
                     Selector, SelectorAnd, SelectorNot, SelectorOr, SelectorWidth, SequenceMap,
                     SOp, Tokens, topological_order)
from rasp.value_sets import (ValueSets, apply_elementwise_table, selects_at_least_one,
                             selects_at_most_one,
                             selects_equal_values, sort_values, values_array,
                             kind_groups)

from .encoding import CATEGORICAL, NUMERICAL, aggregate_encoding, explicit_encoding
from .errors import CompilerError, UnsupportedError

__all__ = ["CNode", "Expr", "Factor", "SelectorSpec", "CompilerGraph", "build_graph",
           "eval_expr", "affine_form", "ternary_parts", "mlp_units", "FUSE_LIMIT"]

#: fusion is skipped when the fused MLP's input table would exceed this many rows
FUSE_LIMIT = 4096
#: the largest input table (product of the categorical inputs' value sets) of one MLP
MLP_TABLE_LIMIT = 200_000


# --------------------------------------------------------------------------------------------
# Expressions (what an MLP computes) and compiler nodes
# --------------------------------------------------------------------------------------------

_UNSET = object()   # an Expr attribute not computed yet


class Expr:
    """An elementwise expression: a :class:`CNode` leaf or ``fn(*args)``.

    ``fn`` maps NumPy arrays to an array (the interpreter's elementwise semantics); ``ew`` is
    the IR :class:`~rasp.ir.Elementwise` when known (used to find affine maps)."""

    __slots__ = ("leaf", "fn", "args", "ew", "desc", "_leaves", "_affine", "_units")

    def __init__(self, leaf: "CNode | None" = None, fn: Callable | None = None,
                 args: tuple = (), ew: Elementwise | None = None, desc: str = ""):
        self.leaf, self.fn, self.args, self.ew, self.desc = leaf, fn, tuple(args), ew, desc
        self._leaves = None          # cached: an Expr is never changed after construction
        self._affine = _UNSET
        self._units: dict = {}       # mlp_units, per tuple of the leaves' encodings

    def leaves(self) -> list["CNode"]:
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

    def substitute(self, node: "CNode", expr: "Expr") -> "Expr":
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
        if not _int_values(vals) and not (l.kind == "full" and _int_values([l.value])):
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


@dataclass(eq=False)
class Factor:
    """One conjunct of a selector: ``table[q_value_index, k_value_index]`` over the values of
    ``query`` and ``key`` (None: a constant side, read from the ``one`` direction)."""

    key: "CNode | None"
    query: "CNode | None"
    pred: Callable[[np.ndarray, np.ndarray], np.ndarray]   # (keys [K], queries [Q]) -> [Q, K]
    desc: str = ""

    def table(self) -> np.ndarray:
        """``[Q, K]`` booleans over the query's and key's values. The predicate is applied per
        kind of value (bools, numbers, strings, tuples by their components' kinds), as the
        interpreter compares sequences of one kind: never to a mixed array as a whole."""
        kv = list(self.key.values) if self.key is not None else [0]
        qv = list(self.query.values) if self.query is not None else [0]
        out = np.zeros((len(qv), len(kv)), dtype=bool)
        for qi in kind_groups(qv):
            Q = values_array([qv[i] for i in qi])
            for ki in kind_groups(kv):
                K = values_array([kv[i] for i in ki])
                block = np.asarray(self.pred(K, Q), dtype=bool).reshape(len(qi), len(ki))
                out[np.ix_(qi, ki)] = block
        return out


def _tuple_fn(*arrays):
    n = np.asarray(arrays[0]).reshape(-1).shape[0]
    cols = [np.asarray(a).reshape(-1).tolist() for a in arrays]
    out = np.empty(n, dtype=object)
    for i in range(n):
        out[i] = tuple(c[i] for c in cols)
    return out.reshape(np.asarray(arrays[0]).shape)


@dataclass(eq=False)
class SelectorSpec:
    """A selector as a conjunction of :class:`Factor` (empty: always true)."""

    factors: list
    ir: Node | None = None


@dataclass(eq=False)
class CNode:
    """A compiler node: one s-op living in the residual stream (see module docstring)."""

    kind: str
    name: str
    ir: Node | None = None
    encoding: str = CATEGORICAL
    values: list = field(default_factory=list)
    conversion: str | None = None          # tokens
    value: Any = None                      # full
    expr: Expr | None = None               # mlp
    selector: SelectorSpec | None = None   # aggregate / sw_attn
    values_node: "CNode | None" = None     # aggregate
    default: Any = 0                       # aggregate
    reduction: str = "mean"                # aggregate
    may_average: bool = False              # aggregate: several different values may be averaged
    internal: bool = False                 # created by the compiler (conversion, sw/trunc MLP)
    unbounded: bool = False                # numerical, value set too large to enumerate
    error: str | None = None               # mlp: the interpreter's error on some input values
    count_check: "CNode | None" = None     # aggregate of strings: its selector width head
    is_check: bool = False                 # a head only read by the runtime checks

    def deps(self) -> list["CNode"]:
        """The nodes this node reads."""
        out: list[CNode] = []
        if self.kind == "mlp":
            out.extend(self.expr.leaves())
        if self.selector is not None:
            for f in self.selector.factors:
                for x in (f.key, f.query):
                    if x is not None:
                        out.append(x)
        if self.values_node is not None:
            out.append(self.values_node)
        uniq, seen = [], set()
        for x in out:
            if id(x) not in seen:
                seen.add(id(x))
                uniq.append(x)
        return uniq

    @property
    def is_attention(self) -> bool:
        return self.kind in ("aggregate", "sw_attn")

    @property
    def is_embedded(self) -> bool:
        return self.kind in ("tokens", "indices", "full")

    @property
    def span(self):
        return self.ir.span if self.ir is not None else None

    def __repr__(self) -> str:
        return f"<CNode {self.kind} {self.name} {self.encoding} |{len(self.values)}|>"


@dataclass
class CompilerGraph:
    """The lowered program: ``graph`` (``networkx.DiGraph`` child -> parent, attribute
    ``cnode``), ``nodes`` in topological order, the ``output`` node, ``causal``."""

    graph: nx.DiGraph
    nodes: list
    output: CNode
    causal: bool
    max_seq_len: int
    warnings: list


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


# --------------------------------------------------------------------------------------------
# Lowering
# --------------------------------------------------------------------------------------------

class _Lowerer:
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
        self.warnings: list[str] = []
        self._indices: CNode | None = None

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
            expr = Expr(fn=_ew_fn(node.fn), args=tuple(Expr(leaf=l) for l in leaves),
                        ew=node.fn, desc=node.fn.describe(*[l.name for l in leaves]))
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
                      self.vs.sets[node.id], expr=expr)
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
        if node.id in self.vs.unbounded:
            # a numerical mean whose value set is too large to enumerate (the value-set pass
            # accepted it: mean reduction, numeric default, no truncation)
            return CNode("aggregate", self.fresh(node.label), node, NUMERICAL, [],
                         selector=spec, values_node=vals_c, default=node.default,
                         reduction="mean", unbounded=True)
        V = vals_c.values
        numeric = _is_numeric_values(V)
        at_most_one = selects_at_most_one(node.selector, self.vs.sets) or \
            selects_equal_values(node.selector, node.values)
        empty_possible = not selects_at_least_one(node.selector)
        default = node.default.item() if isinstance(node.default, np.generic) else node.default
        may_average = (node.reduction == "mean" and len(V) > 1 and not at_most_one)
        out_vals = self.vs.means.get(node.id, self.vs.sets[node.id])
        needs_trunc = node.truncate and any(
            isinstance(v, float) and not float(v).is_integer() for v in out_vals)
        if needs_trunc:
            agg_enc = NUMERICAL
        elif default is None and explicit_encoding(node) is None:
            # a None default (Tracr's padding) is a value of its own: categorical, as in Tracr;
            # a query that averages different values is caught at run time (checks)
            agg_enc = CATEGORICAL
        else:
            agg_enc = aggregate_encoding(node, numeric, may_average)
        if agg_enc == CATEGORICAL and may_average and numeric and default is not None:
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
        agg = CNode("aggregate", name, node, agg_enc, out_vals, selector=spec,
                    values_node=vals_c, default=default, reduction=node.reduction,
                    may_average=may_average and (not numeric or default is None),
                    internal=needs_trunc)
        if node.reduction == "mean" and any(isinstance(v, str) for v in V) and not (
                selects_at_most_one(node.selector, self.vs.sets)):
            # the interpreter raises when a mean of strings selects several keys (even equal
            # ones): a head computing 1/(w+1) lets the compiled model raise there too
            agg.count_check = CNode(
                "sw_attn", self.fresh(f"{name}_count"), node, NUMERICAL,
                sort_values(1.0 / (w + 1) for w in range(self.n + 1)), selector=spec,
                internal=True, is_check=True)
        if not needs_trunc:
            return agg
        expr = Expr(fn=_trunc_fn, args=(Expr(leaf=agg),), desc=f"trunc({agg.name})")
        tvals = sort_values(int(math.trunc(v)) for v in out_vals)
        return CNode("mlp", self.fresh(node.label), node, enc or CATEGORICAL, tvals, expr=expr)

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
                     expr=expr, internal=True)
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
# --------------------------------------------------------------------------------------------

def _consumers(nodes: list, output: CNode, extra: tuple = ()) -> dict[int, list]:
    cons: dict[int, list] = {id(n): [] for n in nodes}
    for n in nodes:
        for d in n.deps():
            cons.setdefault(id(d), []).append(n)
    for r in (output,) + tuple(extra):
        cons.setdefault(id(r), []).append(None)
    return cons


def _reachable(output: CNode, extra: tuple = ()) -> list:
    """The nodes ``output`` (and the ``extra`` roots: nodes computed only for the runtime
    checks) depend on, in a topological order."""
    order, seen = [], set()
    stack = [(r, False) for r in reversed(tuple(extra))] + [(output, False)]
    while stack:
        n, done = stack.pop()
        if done:
            order.append(n)
            continue
        if id(n) in seen:
            continue
        seen.add(id(n))
        stack.append((n, True))
        extra = [n.count_check] if n.count_check is not None else []
        for d in n.deps() + extra:
            if id(d) not in seen:
                stack.append((d, False))
    return order


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


def _affine_mlp(encoding: str, expr: Expr, leaves: list) -> bool:
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
        if _affine_mlp(encoding, expr, leaves):
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


#: the largest magnitude of an integer s-op given a numerical encoding by
#: :func:`_numerical_where_smaller` (sums of such values stay exact in float64)
NUMERICAL_INT_LIMIT = 2 ** 31


def _int_values(values) -> bool:
    return bool(values) and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
        and abs(int(v)) <= NUMERICAL_INT_LIMIT for v in values)


def _numerical_where_smaller(nodes: list, output: CNode, extra: tuple = ()) -> int:
    """Encoding pass: give an integer-valued MLP s-op a **numerical** encoding (one residual
    direction instead of one per value) where every reader can read it as a number and the
    model gets smaller (``compiler/encoding.py`` rule 5). Returns the number of s-ops changed.

    Candidates: categorical MLP nodes (maps, sequence maps, selector widths) and mean
    aggregates that copy one value per query (never average different values: the head then
    writes the number instead of its one-hot) with no encoding annotation, whose values are all integers (``|v| <= NUMERICAL_INT_LIMIT``: a discretising
    MLP reads them with gaps >= 1, an affine MLP adds them exactly in float64), that are not the
    program's output and do not flag an error. Readers allowed: an MLP that then reads at most
    one numerical input, or is itself an affine numerical MLP of numbers; a numerical mean
    aggregate reading it as its values. A select (key or query), a max/min aggregate, a
    categorical aggregate or the output need the categorical encoding, so their inputs stay.

    Nodes are visited from the output down (each reader's encoding is decided before its
    inputs'), and a change is kept when the parameters saved by the fewer residual directions
    exceed the parameters of the extra MLP units (the readers' :func:`mlp_units` before and
    after), with the model's current size as the price of one direction and one unit."""
    cons = _consumers(nodes, output, extra)
    roots = {id(output)} | {id(r) for r in extra}

    def dims(n: CNode) -> int:
        if n.kind == "full":
            return 0
        return len(n.values) if n.encoding == CATEGORICAL else 1

    units = {id(p): mlp_units(p.encoding, p.expr) for p in nodes if p.kind == "mlp"}
    d_model = 3 + sum(dims(n) for n in nodes)
    changed = 0
    for n in reversed(nodes):
        copy = (n.kind == "aggregate" and n.reduction == "mean" and not n.may_average
                and n.count_check is None)
        if ((n.kind != "mlp" and not copy) or n.encoding != CATEGORICAL or n.internal
                or n.unbounded or id(n) in roots or n.error is not None or len(n.values) < 2
                or (n.ir is not None and explicit_encoding(n.ir) is not None)
                or not _int_values(n.values)):
            continue
        readers = cons.get(id(n), [])
        if not readers or any(r is None for r in readers):
            continue
        new_units, ok = {}, True
        n.encoding = NUMERICAL                     # tentatively, to cost the readers
        for r in readers:
            if r.kind == "mlp":
                leaves = r.expr.leaves()
                nums = [l for l in leaves if l.encoding != CATEGORICAL]
                if len(nums) > 1 and not _affine_mlp(r.encoding, r.expr, leaves) and \
                        affine_steps(r.expr, leaves) is None:
                    ok = False
                    break
                # a one-reader MLP input of r with a numerical input of its own would fuse
                # into r (one layer less); a second numerical input of r would prevent that
                fusing = [l for l in leaves if l is not n and l.kind == "mlp"
                          and len(cons.get(id(l), [])) == 1 and any(
                              x.encoding != CATEGORICAL for x in l.expr.leaves())]
                if fusing and not _affine_mlp(r.encoding, r.expr, leaves):
                    ok = False
                    break
                new_units[id(r)] = mlp_units(r.encoding, r.expr, leaves)
            elif (r.kind == "aggregate" and r.encoding == NUMERICAL and r.reduction == "mean"
                  and r.values_node is n and not any(
                      x is n for f in r.selector.factors for x in (f.key, f.query))):
                continue
            else:
                ok = False
                break
        if ok:
            extra_units = sum(u - units[k] for k, u in new_units.items())
            total_units = sum(units.values())
            saved = (len(n.values) - 1) * (2 * total_units + d_model)
            if copy:        # the head's value / output weights: one column, not one per value
                saved += 2 * d_model * (len(n.values) - 1)
            ok = saved > 2 * d_model * extra_units
        if not ok:
            n.encoding = CATEGORICAL
            continue
        units.update(new_units)
        d_model -= len(n.values) - 1
        changed += 1
    return changed


def _fusion_ok(p: CNode, new_expr: Expr, old_cost: int) -> bool:
    new_leaves = new_expr.leaves()
    if any(l.unbounded for l in new_leaves) and not (p.encoding == NUMERICAL and affine_form(
            new_expr)):
        return False
    nums = [l for l in new_leaves if l.encoding != CATEGORICAL]
    if len(nums) > 1 and not (p.encoding == NUMERICAL and affine_form(new_expr)) and \
            affine_steps(new_expr, new_leaves) is None:
        return False
    cat_rows = math.prod(len(l.values) for l in new_leaves if l.encoding == CATEGORICAL)
    if cat_rows > FUSE_LIMIT:
        return False
    return mlp_units(p.encoding, new_expr, new_leaves) <= max(1.5 * old_cost, old_cost + 64)


def _fuse(nodes: list, output: CNode, extra: tuple = ()) -> int:
    """Fuse single-consumer MLP nodes into their MLP consumer. Returns the number of fusions.

    For each MLP, first the whole tree of single-consumer MLPs below it is tried at once (so
    ``f(a) + g(a)`` becomes one MLP of ``a``), then single leaves, greedily; a fusion is kept
    when it does not blow up the MLP (at most 1.5x the units of the separate MLPs). Passes
    over the nodes in topological order repeat until nothing fuses; within a pass the
    consumer table is updated per fusion (not rebuilt), so a chain of n maps fuses in O(n)."""
    fused = 0
    changed = True
    while changed:
        changed = False
        cons = _consumers(nodes, output, extra)
        gone: set[int] = set()

        def eligible(leaf, parent_ids) -> bool:
            if leaf.kind != "mlp" or leaf is output:
                return False
            users = cons.get(id(leaf), [])
            return len(users) == 1 and users[0] is not None and id(users[0]) in parent_ids

        def absorbed(p, into_p: list) -> None:
            """``into_p`` were fused into ``p``: ``p`` now reads their leaves directly."""
            ids = {id(t) for t in into_p}
            for leaf in p.expr.leaves():
                users = [u for u in cons.get(id(leaf), []) if u is None or id(u) not in ids]
                if not any(u is p for u in users):
                    users.append(p)
                cons[id(leaf)] = users
            gone.update(ids)

        for p in list(nodes):
            if p.kind != "mlp" or id(p) in gone:
                continue
            # whole tree
            tree = {id(p): p}
            expr = p.expr
            old_cost = mlp_units(p.encoding, p.expr)
            grew = True
            while grew:
                grew = False
                for leaf in expr.leaves():
                    if eligible(leaf, tree):
                        expr = expr.substitute(leaf, leaf.expr)
                        tree[id(leaf)] = leaf
                        old_cost += mlp_units(leaf.encoding, leaf.expr)
                        grew = True
                        break
            if len(tree) > 2 and _fusion_ok(p, expr, old_cost):
                p.expr = expr
                p.error = p.error or next((t.error for t in tree.values() if t.error), None)
                fused += len(tree) - 1
                absorbed(p, [t for t in tree.values() if t is not p])
                changed = True
                continue
            for leaf in p.expr.leaves():
                if not eligible(leaf, {id(p)}):
                    continue
                new_expr = p.expr.substitute(leaf, leaf.expr)
                old = mlp_units(p.encoding, p.expr) + mlp_units(leaf.encoding, leaf.expr)
                if not _fusion_ok(p, new_expr, old):
                    continue
                p.expr = new_expr
                p.error = p.error or leaf.error
                fused += 1
                absorbed(p, [leaf])
                changed = True
                break
        if changed:
            nodes[:] = _reachable(output, extra)
    return fused


def _convert_extra_numericals(low: _Lowerer, nodes: list) -> None:
    for p in list(nodes):
        if p.kind != "mlp":
            continue
        leaves = p.expr.leaves()
        nums = [l for l in leaves if l.encoding != CATEGORICAL]
        if len(nums) <= 1:
            continue
        if p.encoding == NUMERICAL and affine_form(p.expr) is not None:
            continue
        if p.error is None and affine_steps(p.expr, leaves) is not None:
            continue       # built as steps over the affine form (graph_to_blocks)
        keep = max(nums, key=lambda l: len(l.values))
        for l in nums:
            if l is not keep:
                p.expr = p.expr.substitute(l, Expr(leaf=low.categorical(l)))


def build_graph(sop: SOp, vocab, max_seq_len: int, causal: bool = False,
                value_sets: ValueSets | None = None) -> CompilerGraph:
    """Lower the IR rooted at ``sop`` to a :class:`CompilerGraph`.

    Args:
        value_sets: the result of the value-set pass
            (:func:`compiler.basis_inference.infer_bases`); computed here when None.

    Raises :class:`~compiler.errors.UnsupportedError` naming the operation, its
    ``line:column`` and why, or :class:`~compiler.errors.CompilerError`."""
    if not isinstance(sop, SOp):
        raise CompilerError(f"compile_program expects an s-op, got {type(sop).__name__}")
    if value_sets is None:
        from .basis_inference import infer_bases
        value_sets = infer_bases(sop, vocab, max_seq_len, causal)
    low = _Lowerer(vocab, max_seq_len, causal, value_sets)
    out = low.lower(sop)
    extra = tuple(low.extra_roots)
    nodes = _reachable(out, extra)
    _numerical_where_smaller(nodes, out, extra)
    _fuse(nodes, out, extra)
    _convert_extra_numericals(low, nodes)
    nodes = _reachable(out, extra)
    g = nx.DiGraph()
    for n in nodes:
        g.add_node(n.name, cnode=n)
    for n in nodes:
        for d in n.deps():
            g.add_edge(d.name, n.name)
    order = [g.nodes[x]["cnode"] for x in nx.topological_sort(g)]
    return CompilerGraph(g, order, out, causal, max_seq_len, low.warnings)
