"""The intermediate representation (IR): one DAG of s-ops and selectors.

Every part of rasp-lab reads or writes this IR: the parser builds it, the Python API builds it
(operator overloading as in the original RASP and Tracr), the interpreter evaluates it, the
measures and the RASP-L check analyse it, and the compiler lowers it to transformer weights.

Node kinds (Weiss et al. 2021, "Thinking Like Transformers", §2; Zhou et al. 2023, RASP-L):

* s-ops (a value per position): :class:`Tokens`, :class:`Indices`, :class:`Length`,
  :class:`Full` (constant s-op), :class:`Map` (one input), :class:`SequenceMap` (several inputs),
  :class:`Aggregate` (mean / max / min reduction, default), :class:`SelectorWidth`.
* selectors (a boolean ``[query, key]`` matrix per sequence): :class:`Select`,
  :class:`SelectorAnd`, :class:`SelectorOr`, :class:`SelectorNot`.

Elementwise work is described by an :class:`Elementwise` function object with a *finite* op
vocabulary (``add``, ``eq``, ``round``, ``lookup``, ...) so that analyses can reason about it
(the RASP-L index rule, value-set inference), plus ``python`` for arbitrary Python callables given
through the Python API.

Nodes are immutable after construction except for their ``name``, ``span`` and ``annotations``
(the encoding annotation used by the compiler: ``"categorical"`` or ``"numerical"``).
"""

from __future__ import annotations

import copy
from typing import Any, Callable, Container, Iterable, Sequence

import numpy as np

from . import ops  # the op table
from .errors import (RASPError, RASPNameError, RASPResourceError, RASPTypeError,  # re-exported
                     RASPValueError, Span)
from .limits import MAX_SELECTOR_DEPTH

__all__ = [
    "Span", "RASPError", "RASPTypeError", "RASPValueError", "RASPNameError", "RASPResourceError",
    "Node", "SOp", "Selector", "Tokens", "Indices", "Length", "Full", "Map", "SequenceMap",
    "Aggregate", "SelectorWidth", "Select", "SelectorAnd", "SelectorOr", "SelectorNot",
    "Elementwise", "COMPARISONS", "tokens", "tokens_str", "tokens_int", "tokens_float",
    "tokens_bool", "tokens_asis", "indices", "length", "select", "aggregate", "selector_width",
    "kqv", "numerical", "categorical", "full", "map_sop", "sequence_map", "causal_mode",
    "is_causal_mode", "as_sop", "walk", "topological_order", "Comparison", "last_node_id",
]

COMPARISON_OPS = ops.COMPARISON_OPS
ARITHMETIC_OPS = ops.ARITHMETIC_OPS


# --------------------------------------------------------------------------------------------
# Elementwise functions: a finite, analysable vocabulary
# --------------------------------------------------------------------------------------------

class Elementwise:
    """An elementwise function: what a :class:`Map` or :class:`SequenceMap` computes.

    ``op`` is one of the binary ops (``add sub mul div mod pow eq ne lt le gt ge and or``), unary
    ops (``neg pos not round indicator identity``), ``ternary`` (inputs: condition, then-value,
    else-value), ``in`` (membership in a constant container), ``lookup`` (index a constant
    list / string / dict by the value) or ``python`` (an arbitrary Python callable, Python API
    only).

    For a :class:`Map`, a binary op has one constant operand: ``const`` and ``const_side``
    (``"right"`` for ``x + c``, ``"left"`` for ``c - x``).

    :meth:`apply` takes NumPy arrays of equal shape (``[batch, seq]``) and returns one array of
    that shape; :meth:`scalar` applies the function to Python scalars (used by value-set
    inference and the compiler's lookup tables).
    """

    __slots__ = ("op", "const", "const_side", "container", "fn", "label")

    def __init__(self, op: str, const: Any = None, const_side: str | None = None,
                 container: Any = None, fn: Callable | None = None, label: str | None = None):
        if op not in ops.OPS and op not in ops.PARAMETRIC_OPS:
            raise ValueError(f"unknown elementwise op {op!r}")
        self.op = op
        self.const = const
        self.const_side = const_side
        self.container = container
        self.fn = fn
        self.label = label

    @property
    def is_comparison(self) -> bool:
        return self.op in ops.COMPARISON_OPS

    # -- evaluation -------------------------------------------------------------------------
    def apply(self, *arrays: np.ndarray) -> np.ndarray:
        """Apply to NumPy arrays of one shape (``[batch, seq]``) with the dialect's semantics
        (:func:`rasp.ops.apply`: type rule, checked int64 arithmetic, ...)."""
        return ops.apply(self, arrays)

    def scalar(self, *values: Any) -> Any:
        """Apply to Python scalars; returns a Python scalar."""
        out = self.apply(*[np.asarray([v]) for v in values]).reshape(-1)[0]
        return out.item() if isinstance(out, np.generic) else out

    def describe(self, *args: str) -> str:
        """A readable form such as ``x + 1`` or ``round(x)`` for printing and errors."""
        op = self.op
        if op == "in":
            return f"{args[0]} in {self.container!r}"
        if op == "lookup":
            return f"{self.container!r}[{args[0]}]"
        if op == "python":
            return f"{self.label or getattr(self.fn, '__name__', 'f')}({', '.join(args)})"
        if self.const_side == "right":
            args = (args[0], repr(self.const))
        elif self.const_side == "left":
            args = (repr(self.const), args[0])
        return ops.OPS[op].describe(*args)

    def key(self) -> tuple:
        """A hashable identity used for common-subexpression elimination."""
        def freeze(c):
            if isinstance(c, dict):
                return ("dict", tuple(sorted(((repr(k), freeze(v)) for k, v in c.items()))))
            if isinstance(c, (list, tuple)):
                return ("list", tuple(freeze(v) for v in c))
            return (type(c).__name__, c)
        return (self.op, freeze(self.const), self.const_side, freeze(self.container),
                id(self.fn) if self.fn is not None else None)

    def __repr__(self) -> str:
        return f"Elementwise({self.op!r})"


# --------------------------------------------------------------------------------------------
# Nodes
# --------------------------------------------------------------------------------------------

class _IdCounter:
    """Node ids in creation order; :meth:`peek` is the id the next node will get (the parser
    uses it to tell the nodes a statement created)."""

    def __init__(self, start: int = 1):
        self._next = start

    def __iter__(self):
        return self

    def __next__(self) -> int:
        v = self._next
        self._next += 1
        return v

    def peek(self) -> int:
        return self._next


_ids = _IdCounter(1)

# Causal (RASP-L) mode of the Python API: new `select`s are causal while it is on.
_CAUSAL_STACK: list[bool] = [False]


class causal_mode:
    """Context manager (and decorator-free switch) for RASP-L causal mode in the Python API.

    Inside ``with causal_mode():`` every :func:`select` created is causal (ANDed with
    ``key_index <= query_index``). ``causal_mode(False)`` switches it off in a nested block.
    """

    def __init__(self, on: bool = True):
        self.on = on

    def __enter__(self):
        _CAUSAL_STACK.append(self.on)
        return self

    def __exit__(self, *exc):
        _CAUSAL_STACK.pop()
        return False


def is_causal_mode() -> bool:
    """Whether the Python API is currently in causal (RASP-L) mode."""
    return _CAUSAL_STACK[-1]


class Node:
    """Base of s-ops and selectors: a unique ``id``, optional ``name``, ``span``, annotations.

    Two methods come from the modules that own them (``ir`` imports neither):
    ``node(inp)``, the value on one input (``reverse("hello") == ["o", "l", "l", "e", "h"]``,
    :func:`rasp.interpreter.evaluate_one`), and ``node.draw(example, path)``, the picture
    (:func:`rasp.repl.draw.draw`)."""

    kind = "node"

    def __init__(self):
        self.id: int = next(_ids)
        self.name: str | None = None
        self.span: Span | None = None
        self.annotations: dict[str, Any] = {}

    @property
    def children(self) -> tuple["Node", ...]:
        return ()

    @property
    def label(self) -> str:
        """The node's name, or ``kind_id`` when unnamed."""
        return self.name if self.name is not None else f"{self.kind}_{self.id}"

    def named(self, name: str | None) -> "Node":
        """Set the name (returns self, for chaining)."""
        if name is not None:
            self.name = name
        return self

    def at(self, span: Span | None) -> "Node":
        """Set the source span if none is set yet (returns self)."""
        if span is not None and self.span is None:
            self.span = span
        return self

    def key(self) -> tuple:
        """Structural identity (used for common-subexpression elimination)."""
        raise NotImplementedError

    def copy(self) -> "Node":
        """A shallow copy with a fresh ``id`` and its own ``annotations`` (same children,
        name and span): a new node of the DAG that computes the same values."""
        new = copy.copy(self)
        new.id = next(_ids)
        new.annotations = dict(self.annotations)
        return new

    __hash__ = object.__hash__

    def __bool__(self):
        raise RASPTypeError(
            f"{self.kind} '{self.label}' has no truth value before evaluation; "
            "use it in an elementwise expression instead")


class SOp(Node):
    """A sequence operator: a value per position (``[batch, seq]`` when evaluated)."""

    kind = "sop"

    # --- encoding annotation (compiler) ---
    @property
    def encoding(self) -> str:
        return self.annotations.get("encoding", "categorical")

    # --- elementwise operator overloading (Python API) ---
    def _bin(self, other, op, reverse=False):
        if isinstance(other, Selector):
            return NotImplemented
        if isinstance(other, SOp):
            a, b = (other, self) if reverse else (self, other)
            return SequenceMap(Elementwise(op), (a, b))
        _check_atom(other)
        return Map(Elementwise(op, const=other, const_side="left" if reverse else "right"), self)

    def __add__(self, o): return self._bin(o, "add")
    def __radd__(self, o): return self._bin(o, "add", True)
    def __sub__(self, o): return self._bin(o, "sub")
    def __rsub__(self, o): return self._bin(o, "sub", True)
    def __mul__(self, o): return self._bin(o, "mul")
    def __rmul__(self, o): return self._bin(o, "mul", True)
    def __truediv__(self, o): return self._bin(o, "div")
    def __rtruediv__(self, o): return self._bin(o, "div", True)
    def __mod__(self, o): return self._bin(o, "mod")
    def __rmod__(self, o): return self._bin(o, "mod", True)
    def __pow__(self, o): return self._bin(o, "pow")
    def __rpow__(self, o): return self._bin(o, "pow", True)
    def __xor__(self, o): return self._bin(o, "pow")      # RASP's ^ is power
    def __rxor__(self, o): return self._bin(o, "pow", True)
    def __eq__(self, o): return self._bin(o, "eq")        # type: ignore[override]
    def __ne__(self, o): return self._bin(o, "ne")        # type: ignore[override]
    def __lt__(self, o): return self._bin(o, "lt")
    def __le__(self, o): return self._bin(o, "le")
    def __gt__(self, o): return self._bin(o, "gt")
    def __ge__(self, o): return self._bin(o, "ge")
    def __and__(self, o): return self._bin(o, "and")
    def __rand__(self, o): return self._bin(o, "and", True)
    def __or__(self, o): return self._bin(o, "or")
    def __ror__(self, o): return self._bin(o, "or", True)
    def __neg__(self): return Map(Elementwise("neg"), self)
    def __pos__(self): return Map(Elementwise("pos"), self)
    def __invert__(self): return Map(Elementwise("not"), self)
    __hash__ = Node.__hash__

    def __repr__(self) -> str:
        return f"<s-op {self.label}>"


def _selector_depth(*children: "Selector") -> int:
    """Combination depth of a new ``and``/``or``/``not`` over ``children`` (a :class:`Select` is
    0), computed in O(1) from the children's stored depth, so no traversal recurses.

    Raises:
        RASPResourceError: above ``limits.MAX_SELECTOR_DEPTH``.
    """
    depth = 1 + max(c.selector_depth for c in children)
    if depth > MAX_SELECTOR_DEPTH:
        raise RASPResourceError(
            f"selector combined more than {MAX_SELECTOR_DEPTH} levels deep with and/or/not "
            f"(limit MAX_SELECTOR_DEPTH in rasp/limits.py)")
    return depth


class Selector(Node):
    """A selector: a boolean ``[batch, query, key]`` matrix when evaluated."""

    kind = "selector"
    #: combination depth of nested and/or/not (a :class:`Select` is 0; see _selector_depth)
    selector_depth = 0

    @property
    def causal(self) -> bool:
        raise NotImplementedError

    def __and__(self, other):
        if not isinstance(other, Selector):
            raise RASPTypeError("'and' of a selector needs another selector")
        return SelectorAnd(self, other)

    def __or__(self, other):
        if not isinstance(other, Selector):
            raise RASPTypeError("'or' of a selector needs another selector")
        return SelectorOr(self, other)

    def __invert__(self):
        return SelectorNot(self)

    def __repr__(self) -> str:
        return f"<selector {self.label}>"


def _check_atom(v):
    if isinstance(v, (bool, int, float, str, np.integer, np.floating, np.bool_)):
        ops.check_int64(v)
        return
    raise RASPTypeError(f"cannot combine an s-op with {type(v).__name__} {v!r}")


class Tokens(SOp):
    """The input tokens. ``conversion`` is ``str``, ``int``, ``float``, ``bool`` or ``asis``
    (the original RASP's ``tokens_str`` ... ``tokens_asis``)."""

    kind = "tokens"

    def __init__(self, conversion: str = "str"):
        super().__init__()
        if conversion not in ("str", "int", "float", "bool", "asis"):
            raise ValueError(conversion)
        self.conversion = conversion
        self.name = "tokens" if conversion == "str" else f"tokens_{conversion}"

    def key(self):
        return ("tokens", self.conversion)


class Indices(SOp):
    """The position of each token, 0-based."""

    kind = "indices"

    def __init__(self):
        super().__init__()
        self.name = "indices"

    def key(self):
        return ("indices",)


class Length(SOp):
    """The total input length at every position. Costs one attention layer (original library:
    a selector width of an all-true select). Not RASP-L: a causal model sees only a prefix."""

    kind = "length"

    def __init__(self):
        super().__init__()
        self.name = "length"

    def key(self):
        return ("length",)


class Full(SOp):
    """A constant s-op: ``value`` at every position."""

    kind = "full"

    def __init__(self, value: Any):
        super().__init__()
        _check_atom(value)
        self.value = value

    def key(self):
        return ("full", type(self.value).__name__, self.value)


class Map(SOp):
    """An elementwise function of one s-op (an MLP in a transformer)."""

    kind = "map"

    def __init__(self, fn: Elementwise, inner: SOp):
        super().__init__()
        if not isinstance(inner, SOp):
            raise RASPTypeError(f"map input must be an s-op, got {type(inner).__name__}")
        self.fn = fn
        self.inner = inner

    @property
    def children(self):
        return (self.inner,)

    def key(self):
        return ("map", self.fn.key(), self.inner.id)


class SequenceMap(SOp):
    """An elementwise function of several s-ops (an MLP reading several subspaces)."""

    kind = "sequence_map"

    def __init__(self, fn: Elementwise, inputs: Sequence[SOp]):
        super().__init__()
        inputs = tuple(inputs)
        for x in inputs:
            if not isinstance(x, SOp):
                raise RASPTypeError(
                    f"sequence map inputs must be s-ops, got {type(x).__name__}")
        self.fn = fn
        self.inputs = inputs

    @property
    def children(self):
        return self.inputs

    def key(self):
        return ("sequence_map", self.fn.key(), tuple(x.id for x in self.inputs))


class Comparison:
    """Names of select comparisons: ``== != < <= > >=`` plus ``TRUE`` / ``FALSE``."""

    OPS = ops.SELECT_OPS


#: A select comparison's semantics on atoms, by symbol (from the op table).
COMPARISONS = {o.symbol: o.atom for o in ops.OPS.values() if o.is_comparison}


class Select(Selector):
    """``select(keys, queries, op)``: entry ``[q, k]`` is true when ``keys[k] op queries[q]``.

    ``causal`` ANDs the matrix with ``key_index <= query_index`` (RASP-L causal mode).
    ``op="python"`` with ``predicate(key, query) -> bool`` is an arbitrary Python predicate
    (Tracr's ``rasp.Select`` with a callable; Python API only, see :mod:`rasp.tracr_import`).
    """

    kind = "select"

    def __init__(self, keys: SOp, queries: SOp, op: str, causal: bool | None = None,
                 predicate: Callable[[Any, Any], Any] | None = None):
        super().__init__()
        if (op == "python") != (predicate is not None) or (
                predicate is not None and not callable(predicate)):
            raise RASPValueError("a select with op 'python' needs a callable predicate "
                                 "(and only it)")
        self.predicate = predicate
        if op not in Comparison.OPS and op != "python":
            raise RASPValueError(f"unknown select comparison {op!r}; "
                                 f"expected one of {' '.join(Comparison.OPS)}")
        if not isinstance(keys, SOp) or not isinstance(queries, SOp):
            raise RASPTypeError("select keys and queries must be s-ops or atoms")
        self.keys = keys
        self.queries = queries
        self.op = op
        self._causal = is_causal_mode() if causal is None else bool(causal)

    @property
    def causal(self) -> bool:
        return self._causal

    @property
    def children(self):
        return (self.keys, self.queries)

    def key(self):
        return ("select", self.keys.id, self.queries.id, self.op, self._causal,
                id(self.predicate) if self.predicate is not None else None)


class SelectorAnd(Selector):
    """Both selectors hold."""

    kind = "selector_and"

    def __init__(self, a: Selector, b: Selector):
        super().__init__()
        self.a, self.b = a, b
        self.selector_depth = _selector_depth(a, b)

    @property
    def causal(self):
        return self.a.causal or self.b.causal

    @property
    def children(self):
        return (self.a, self.b)

    def key(self):
        return ("selector_and", self.a.id, self.b.id)


class SelectorOr(Selector):
    """Either selector holds."""

    kind = "selector_or"

    def __init__(self, a: Selector, b: Selector):
        super().__init__()
        self.a, self.b = a, b
        self.selector_depth = _selector_depth(a, b)

    @property
    def causal(self):
        return self.a.causal or self.b.causal

    @property
    def children(self):
        return (self.a, self.b)

    def key(self):
        return ("selector_or", self.a.id, self.b.id)


class SelectorNot(Selector):
    """The selector does not hold (in causal mode: among keys at or before the query)."""

    kind = "selector_not"

    def __init__(self, a: Selector):
        super().__init__()
        self.a = a
        self.selector_depth = _selector_depth(a)

    @property
    def causal(self):
        return self.a.causal

    @property
    def children(self):
        return (self.a,)

    def key(self):
        return ("selector_not", self.a.id)


REDUCTIONS = ("mean", "max", "min")


class Aggregate(SOp):
    """``aggregate(selector, values, default, reduction)``.

    Per query row: no key selected -> ``default`` (``None`` is a value of its own, Tracr's
    usual padding: the result holds ``None`` there); ``mean`` (original RASP): exactly one key ->
    its value (any type), several -> the arithmetic mean (an error for non-numbers);
    ``max``/``min`` (RASP-L): the largest / smallest selected value. ``truncate`` (RASP-L
    ``kqv``) truncates the mean toward zero to an integer.
    """

    kind = "aggregate"

    def __init__(self, selector: Selector, values: SOp, default: Any = 0,
                 reduction: str = "mean", truncate: bool = False):
        super().__init__()
        if not isinstance(selector, Selector):
            raise RASPTypeError(
                f"aggregate expects a selector first, got {_describe_type(selector)}")
        if not isinstance(values, SOp):
            raise RASPTypeError(
                f"aggregate expects an s-op of values, got {_describe_type(values)}")
        if reduction not in REDUCTIONS:
            raise RASPValueError(f"unknown reduction {reduction!r}; expected mean, max or min")
        if default is not None:
            _check_atom(default)
        self.selector = selector
        self.values = values
        self.default = default
        self.reduction = reduction
        self.truncate = truncate

    @property
    def children(self):
        return (self.selector, self.values)

    def key(self):
        return ("aggregate", self.selector.id, self.values.id, type(self.default).__name__,
                self.default, self.reduction, self.truncate)


class SelectorWidth(SOp):
    """``selector_width(selector)``: the number of selected keys per query (a primitive)."""

    kind = "selector_width"

    def __init__(self, selector: Selector):
        super().__init__()
        if not isinstance(selector, Selector):
            raise RASPTypeError(
                f"selector_width expects a selector, got {_describe_type(selector)}")
        self.selector = selector

    @property
    def children(self):
        return (self.selector,)

    def key(self):
        return ("selector_width", self.selector.id)


def _describe_type(v) -> str:
    if isinstance(v, SOp):
        return "an s-op"
    if isinstance(v, Selector):
        return "a selector"
    return f"{type(v).__name__} {v!r}"


# --------------------------------------------------------------------------------------------
# Python API
# --------------------------------------------------------------------------------------------

tokens = Tokens("str")
tokens_str = tokens
tokens_int = Tokens("int")
tokens_float = Tokens("float")
tokens_bool = Tokens("bool")
tokens_asis = Tokens("asis")
indices = Indices()
length = Length()


def as_sop(x: Any) -> SOp:
    """An s-op as is; an atom becomes a :class:`Full` constant s-op."""
    if isinstance(x, SOp):
        return x
    if isinstance(x, Selector):
        raise RASPTypeError("expected an s-op or an atom, got a selector")
    _check_atom(x)
    return Full(x)


def full(value: Any) -> Full:
    """A constant s-op (Tracr's ``rasp.Full``)."""
    return Full(value)


def select(keys: Any, queries: Any, op: str, causal: bool | None = None) -> Select:
    """``select(keys, queries, op)``: ``[q, k]`` true when ``keys[k] op queries[q]``.

    Atoms broadcast. ``op`` is one of ``== != < <= > >= TRUE FALSE``. ``causal`` defaults to
    the current :class:`causal_mode`.
    """
    return Select(as_sop(keys), as_sop(queries), op, causal)


def aggregate(selector: Selector, values: Any, default: Any = 0, reduction: str = "mean",
              truncate: bool = False) -> Aggregate:
    """``aggregate(sel, values[, default])`` (see :class:`Aggregate`)."""
    return Aggregate(selector, as_sop(values), default, reduction, truncate)


def selector_width(selector: Selector) -> SelectorWidth:
    """Number of selected keys per query."""
    return SelectorWidth(selector)


def kqv(keys: Any, queries: Any, values: Any, op: str, default: Any = 0,
        reduction: str = "mean") -> Aggregate:
    """The RASP-L head: ``aggregate(select(keys, queries, op), values, default, reduction)``.

    A ``mean`` is truncated toward zero to an integer, as in the RASP-L reference
    implementation (Zhou et al. 2023, Appendix: ``kqv``).
    """
    return Aggregate(select(keys, queries, op), as_sop(values), default, reduction,
                     truncate=(reduction == "mean"))


def _annotated(sop: SOp, encoding: str) -> SOp:
    if not isinstance(sop, SOp):
        raise RASPTypeError(f"{encoding} expects an s-op, got {_describe_type(sop)}")
    new = sop.copy()
    new.annotations["encoding"] = encoding
    return new


def numerical(sop: SOp) -> SOp:
    """A copy of ``sop`` annotated with the numerical encoding (one residual direction).

    As Tracr's ``rasp.numerical`` / ``annotate``: the argument is not modified, so annotating a
    shared node (``numerical(indices)``) cannot change other programs."""
    return _annotated(sop, "numerical")


def categorical(sop: SOp) -> SOp:
    """A copy of ``sop`` annotated with the categorical encoding (one direction per value);
    the argument is not modified."""
    return _annotated(sop, "categorical")


def last_node_id() -> int:
    """The id of the most recently created node: nodes created later have larger ids (the
    statement interpreter uses it to tell the nodes a statement created)."""
    return _ids.peek() - 1


def map_sop(fn: Callable[[Any], Any], sop: SOp, label: str | None = None) -> Map:
    """A map of an arbitrary Python callable (Tracr's ``rasp.Map``), Python API only."""
    return Map(Elementwise("python", fn=fn, label=label), sop)


def sequence_map(fn: Callable[..., Any], *sops: SOp, label: str | None = None) -> SequenceMap:
    """A sequence map of an arbitrary Python callable (Tracr's ``rasp.SequenceMap``)."""
    return SequenceMap(Elementwise("python", fn=fn, label=label), sops)


# --------------------------------------------------------------------------------------------
# Graph traversal
# --------------------------------------------------------------------------------------------

def walk(roots: Node | Iterable[Node]) -> list[Node]:
    """All nodes reachable from ``roots`` (each once), in no particular order."""
    if isinstance(roots, Node):
        roots = [roots]
    seen: dict[int, Node] = {}
    stack = list(roots)
    while stack:
        n = stack.pop()
        if n.id in seen:
            continue
        seen[n.id] = n
        stack.extend(n.children)
    return list(seen.values())


def topological_order(roots: Node | Iterable[Node], known: Container[int] = ()) -> list[Node]:
    """Nodes reachable from ``roots``, children before parents (iterative, no recursion limit).

    Nodes whose id is in ``known`` (for example the node values an evaluator already holds) are
    neither listed nor entered, so extending a long chain by one node costs O(1), not O(chain).
    """
    if isinstance(roots, Node):
        roots = [roots]
    order: list[Node] = []
    state: dict[int, int] = {}
    for root in roots:
        if root.id in known:
            continue
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:
            n, done = stack.pop()
            if done:
                if state.get(n.id) != 2:
                    state[n.id] = 2
                    order.append(n)
                continue
            if state.get(n.id):
                continue
            state[n.id] = 1
            stack.append((n, True))
            for c in reversed(n.children):
                if not state.get(c.id) and c.id not in known:
                    stack.append((c, False))
    return order
