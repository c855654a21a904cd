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

import itertools
import math
import operator
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

__all__ = [
    "Span", "RASPError", "RASPTypeError", "RASPValueError", "RASPNameError",
    "Node", "SOp", "Selector", "Tokens", "Indices", "Length", "Full", "Map", "SequenceMap",
    "Aggregate", "SelectorWidth", "Select", "SelectorAnd", "SelectorOr", "SelectorNot",
    "Elementwise", "COMPARISONS", "tokens", "tokens_str", "tokens_int", "tokens_float",
    "tokens_bool", "tokens_asis", "indices", "length", "select", "aggregate", "selector_width",
    "kqv", "numerical", "categorical", "full", "map_sop", "sequence_map", "causal_mode",
    "is_causal_mode", "as_sop", "walk", "topological_order", "Comparison",
]

# --------------------------------------------------------------------------------------------
# Errors and source positions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    """A source position: 1-based ``line`` and ``column`` of the start of an expression.

    ``file`` is the file name (``"<repl>"``, ``"<string>"`` or a path); ``text`` the source text
    of the expression (possibly truncated) for error messages.
    """

    file: str | None
    line: int
    column: int
    end_line: int | None = None
    end_column: int | None = None
    text: str | None = None

    def __str__(self) -> str:
        return f"{self.file or '<string>'}:{self.line}:{self.column}"


class RASPError(Exception):
    """Base error of the dialect. ``span`` (optional) locates the offending source text.

    ``str(err)`` is ``file:line:col: message`` when a span is known, else the message.
    """

    def __init__(self, message: str, span: Span | None = None):
        super().__init__(message)
        self.message = message
        self.span = span

    def __str__(self) -> str:
        if self.span is not None:
            loc = str(self.span)
            extra = f"\n    {self.span.text}" if self.span.text else ""
            return f"{loc}: {self.message}{extra}"
        return self.message


class RASPTypeError(RASPError):
    """A value of the wrong type (averaging strings, mixed sequences, wrong arity, ...)."""


class RASPValueError(RASPError):
    """A value that is out of range or otherwise invalid."""


class RASPNameError(RASPError):
    """An unknown name, or an assignment to a reserved name."""


# --------------------------------------------------------------------------------------------
# Elementwise functions: a finite, analysable vocabulary
# --------------------------------------------------------------------------------------------

def _div(a, b):
    a = np.asarray(a)
    b = np.asarray(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        res = np.true_divide(a, b)
    if np.any(b == 0):
        raise RASPValueError("division by zero")
    return res


def _mod(a, b):
    b = np.asarray(b)
    if np.any(b == 0):
        raise RASPValueError("modulo by zero")
    return np.mod(a, b)


def _pow(a, b):
    a = np.asarray(a)
    b = np.asarray(b)
    if a.dtype.kind in "iu" and b.dtype.kind in "iu" and np.all(b >= 0):
        return np.power(a, b)
    return np.power(a.astype(float), b)


def _round(a):
    # Python's round (banker's rounding), as the original RASP's round(); returns ints.
    a = np.asarray(a)
    if a.dtype.kind in "iub":
        return a.astype(np.int64)
    return np.round(a).astype(np.int64)


def _indicator(a):
    return np.asarray(a).astype(bool).astype(np.int64)


def _not(a):
    return np.logical_not(np.asarray(a).astype(bool))


def _truthy(a):
    return np.asarray(a).astype(bool)


def _and(a, b):
    return np.logical_and(_truthy(a), _truthy(b))


def _or(a, b):
    return np.logical_or(_truthy(a), _truthy(b))


def _ternary(cond, a, b):
    return np.where(_truthy(cond), a, b)


_BINARY = {
    "add": (np.add, "+"),
    "sub": (np.subtract, "-"),
    "mul": (np.multiply, "*"),
    "div": (_div, "/"),
    "mod": (_mod, "%"),
    "pow": (_pow, "^"),
    "eq": (np.equal, "=="),
    "ne": (np.not_equal, "!="),
    "lt": (np.less, "<"),
    "le": (np.less_equal, "<="),
    "gt": (np.greater, ">"),
    "ge": (np.greater_equal, ">="),
    "and": (_and, "and"),
    "or": (_or, "or"),
}
_UNARY = {
    "neg": (np.negative, "-"),
    "pos": (np.positive, "+"),
    "not": (_not, "not"),
    "round": (_round, "round"),
    "indicator": (_indicator, "indicator"),
    "identity": (lambda a: np.asarray(a), "identity"),
}
COMPARISON_OPS = ("eq", "ne", "lt", "le", "gt", "ge")
ARITHMETIC_OPS = ("add", "sub", "mul", "div", "mod", "pow", "neg", "pos")


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
        known = set(_BINARY) | set(_UNARY) | {"ternary", "in", "lookup", "python"}
        if op not in known:
            raise ValueError(f"unknown elementwise op {op!r}")
        self.op = op
        self.const = const
        self.const_side = const_side
        self.container = container
        self.fn = fn
        self.label = label

    # -- arity ----------------------------------------------------------------------------
    def arity(self) -> int | None:
        """Number of s-op inputs (``None`` for ``python``: any)."""
        if self.op in _UNARY or self.op in ("in", "lookup"):
            return 1
        if self.op in _BINARY:
            return 1 if self.const_side is not None else 2
        if self.op == "ternary":
            return 3 - (1 if self.const_side is not None else 0)
        return None

    @property
    def is_comparison(self) -> bool:
        return self.op in COMPARISON_OPS

    # -- evaluation -------------------------------------------------------------------------
    def apply(self, *arrays: np.ndarray) -> np.ndarray:
        op = self.op
        if op in _UNARY:
            return np.asarray(_UNARY[op][0](arrays[0]))
        if op in _BINARY:
            f = _BINARY[op][0]
            if self.const_side == "right":
                return np.asarray(f(arrays[0], _const_array(self.const, arrays[0])))
            if self.const_side == "left":
                return np.asarray(f(_const_array(self.const, arrays[0]), arrays[0]))
            return np.asarray(f(arrays[0], arrays[1]))
        if op == "ternary":
            return _ternary(*arrays)
        if op == "in":
            return _membership(arrays[0], self.container)
        if op == "lookup":
            return _lookup(arrays[0], self.container)
        if op == "python":
            return _apply_python(self.fn, arrays)
        raise AssertionError(op)

    def scalar(self, *values: Any) -> Any:
        """Apply to Python scalars; returns a Python scalar."""
        arrays = [np.asarray([v]) for v in values]
        out = self.apply(*arrays)
        return out.reshape(-1)[0].item() if hasattr(out.reshape(-1)[0], "item") else out.reshape(-1)[0]

    def describe(self, *args: str) -> str:
        """A readable form such as ``x + 1`` or ``round(x)`` for printing and errors."""
        op = self.op
        if op in _UNARY:
            sym = _UNARY[op][1]
            return f"{sym}({args[0]})" if sym.isalpha() else f"{sym}{args[0]}"
        if op in _BINARY:
            sym = _BINARY[op][1]
            if self.const_side == "right":
                return f"{args[0]} {sym} {self.const!r}"
            if self.const_side == "left":
                return f"{self.const!r} {sym} {args[0]}"
            return f"{args[0]} {sym} {args[1]}"
        if op == "ternary":
            return f"{args[1]} if {args[0]} else {args[2]}"
        if op == "in":
            return f"{args[0]} in {self.container!r}"
        if op == "lookup":
            return f"{self.container!r}[{args[0]}]"
        return f"{self.label or getattr(self.fn, '__name__', 'f')}({', '.join(args)})"

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


def _const_array(c, like):
    return np.asarray(c)


def _membership(a: np.ndarray, container) -> np.ndarray:
    a = np.asarray(a)
    if isinstance(container, dict):
        items = list(container.keys())
    elif isinstance(container, str):
        # `x in "abc"`: membership of single characters / substrings
        flat = np.array([str(v) in container for v in a.reshape(-1).tolist()], dtype=bool)
        return flat.reshape(a.shape)
    else:
        items = list(container)
    if not items:
        return np.zeros(a.shape, dtype=bool)
    uniq, inv = np.unique(a, return_inverse=True)
    hit = np.array([u.item() in items if hasattr(u, "item") else u in items for u in uniq],
                   dtype=bool)
    return hit[inv].reshape(a.shape)


def _lookup(a: np.ndarray, container) -> np.ndarray:
    a = np.asarray(a)
    uniq, inv = np.unique(a, return_inverse=True)
    out = []
    for u in uniq.tolist():
        try:
            if isinstance(container, dict):
                out.append(container[u])
            else:
                if isinstance(u, float) and u.is_integer():
                    u = int(u)
                if not isinstance(u, (int, np.integer)) or isinstance(u, bool):
                    raise RASPTypeError(f"cannot index a list or string by {u!r}")
                out.append(container[u])
        except (KeyError, IndexError):
            raise RASPValueError(f"lookup of {u!r} failed: not in {container!r}") from None
    return _homogeneous(out)[inv].reshape(a.shape)


def _apply_python(fn, arrays):
    shape = np.asarray(arrays[0]).shape
    if len(arrays) == 1:
        uniq, inv = np.unique(np.asarray(arrays[0]), return_inverse=True)
        vals = [fn(u) for u in uniq.tolist()]
        return _homogeneous(vals)[inv].reshape(shape)
    cols = [np.asarray(x).reshape(-1).tolist() for x in arrays]
    vals = [fn(*t) for t in zip(*cols)]
    return _homogeneous(vals).reshape(shape)


def _homogeneous(vals: list) -> np.ndarray:
    """Build a 1-D array from Python values, refusing mixed types (bool / number / str)."""
    kinds = {_kind(v) for v in vals}
    if kinds == {"int", "float"}:
        kinds = {"float"}
    if len(kinds) > 1:
        raise RASPTypeError(f"mixed value types in a sequence: {sorted(kinds)}")
    if kinds == {"str"}:
        return np.array(vals, dtype=object).astype(str)
    if kinds == {"bool"}:
        return np.array(vals, dtype=bool)
    if kinds == {"int"}:
        return np.array(vals, dtype=np.int64)
    if kinds == {"float"}:
        return np.array(vals, dtype=np.float64)
    if not vals:
        return np.array([], dtype=np.int64)
    raise RASPTypeError(f"unsupported value types: {sorted(kinds)}")


def _kind(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, (int, np.integer)):
        return "int"
    if isinstance(v, (float, np.floating)):
        return "float"
    if isinstance(v, str):
        return "str"
    return type(v).__name__


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
    """Base of s-ops and selectors: a unique ``id``, optional ``name``, ``span``, annotations."""

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


class Selector(Node):
    """A selector: a boolean ``[batch, query, key]`` matrix when evaluated."""

    kind = "selector"

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

    OPS = ("==", "!=", "<", "<=", ">", ">=", "TRUE", "FALSE")


COMPARISONS = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge,
}


class Select(Selector):
    """``select(keys, queries, op)``: entry ``[q, k]`` is true when ``keys[k] op queries[q]``.

    ``causal`` ANDs the matrix with ``key_index <= query_index`` (RASP-L causal mode).
    """

    kind = "select"

    def __init__(self, keys: SOp, queries: SOp, op: str, causal: bool | None = None):
        super().__init__()
        if op not in Comparison.OPS:
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
        return ("select", self.keys.id, self.queries.id, self.op, self._causal)


class SelectorAnd(Selector):
    """Both selectors hold."""

    kind = "selector_and"

    def __init__(self, a: Selector, b: Selector):
        super().__init__()
        self.a, self.b = a, b

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

    Per query row: no key selected -> ``default``; ``mean`` (original RASP): exactly one key ->
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
        self.default = 0 if default is None else default
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


def numerical(sop: SOp) -> SOp:
    """Annotate ``sop`` with the numerical encoding (one residual direction). Returns ``sop``."""
    sop.annotations["encoding"] = "numerical"
    return sop


def categorical(sop: SOp) -> SOp:
    """Annotate ``sop`` with the categorical encoding (one direction per value)."""
    sop.annotations["encoding"] = "categorical"
    return sop


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


def topological_order(roots: Node | Iterable[Node]) -> list[Node]:
    """Nodes reachable from ``roots``, children before parents (iterative, no recursion limit)."""
    if isinstance(roots, Node):
        roots = [roots]
    order: list[Node] = []
    state: dict[int, int] = {}
    for root in roots:
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
                if not state.get(c.id):
                    stack.append((c, False))
    return order
