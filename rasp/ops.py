"""The dialect's elementwise operations: ONE table, read by the IR, the interpreter, the
statement interpreter, the analyses and the program search.

Each :class:`Op` of :data:`OPS` gives an operation's IR name (``add``), its surface symbol
(``+``), its arity, its NumPy semantics on ``[batch, seq]`` arrays (``kernel``), its semantics on
Python atoms (``atom``: what ``3 + 4`` computes in a program, as in the original RASP, Weiss et
al. 2021, tech-srl/RASP ``Evaluator.py``) and its type rule (``types``, see :data:`TYPE_RULES`).
Operations parametrised by a value rather than listed here are ``in`` (membership in a constant
container), ``lookup`` (index a constant list / string / dict) and ``python`` (a Python callable,
Python API only); :data:`PARAMETRIC_OPS`.

:func:`apply` is the one place where an :class:`~rasp.ir.Elementwise` function meets arrays
(type rule, bool arithmetic as in Python, string concatenation, checked 64-bit integer
arithmetic, non-finite results); :func:`compare` is a select's comparison; :func:`homogeneous_array`
builds a sequence's array from Python values and refuses mixed types; :func:`value_type` names
an array's value type as the original REPL does.

Integer s-op values are int64. Arithmetic that would leave the int64 range raises
:class:`~rasp.errors.RASPValueError` ("integer overflow") instead of wrapping (NumPy wraps
silently); atoms are Python ints, exact up to :data:`rasp.limits.MAX_INT_BITS` bits.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from . import limits
from .errors import MixedBatchError, RASPResourceError, RASPTypeError, RASPValueError

if TYPE_CHECKING:  # pragma: no cover
    from .ir import Elementwise

__all__ = ["Op", "OPS", "TYPE_RULES", "PARAMETRIC_OPS", "COMPARISON_OPS", "ARITHMETIC_OPS",
           "BINARY_OPS", "UNARY_OPS", "SELECT_OPS", "apply", "compare", "check_types",
           "homogeneous_array", "value_type", "value_kind", "INT64_MIN", "INT64_MAX",
           "check_int64", "atom_int_guard"]

INT64_MIN = -(2 ** 63)
INT64_MAX = 2 ** 63 - 1



# --------------------------------------------------------------------------------------------
# NumPy kernels
# --------------------------------------------------------------------------------------------

def _magnitude(a: np.ndarray) -> int:
    """The largest absolute value of an integer array, as a Python int (0 when empty)."""
    if a.size == 0:
        return 0
    return max(abs(int(a.min())), abs(int(a.max())))


def _overflow(sym: str, exact: np.ndarray) -> RASPValueError:
    big = exact.reshape(-1)[np.argmax([abs(int(x)) for x in exact.reshape(-1)])]
    text = str(int(big))
    if len(text) > 40:
        text = f"{text[:12]}...({len(text)} digits)"
    return RASPValueError(f"integer overflow: '{sym}' gives {text}, outside the 64-bit range "
                          f"of s-op values [{INT64_MIN}, {INT64_MAX}]")


def _exact_int(sym: str, f: Callable, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``f(a, b)`` computed with Python ints; int64 when every result fits, else an overflow
    error naming the largest result."""
    exact = np.asarray(f(np.asarray(a).astype(object), np.asarray(b).astype(object)))
    if exact.size and (max(exact.reshape(-1).tolist()) > INT64_MAX
                       or min(exact.reshape(-1).tolist()) < INT64_MIN):
        raise _overflow(sym, exact)
    return exact.astype(np.int64)


def _both_int(a, b) -> bool:
    return a.dtype.kind in "iu" and b.dtype.kind in "iu"


def _add(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if _both_int(a, b) and _magnitude(a) + _magnitude(b) > INT64_MAX:
        return _exact_int("+", np.add, a, b)
    return np.add(a, b)


def _sub(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if _both_int(a, b) and _magnitude(a) + _magnitude(b) > INT64_MAX:
        return _exact_int("-", np.subtract, a, b)
    return np.subtract(a, b)


def _mul(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "U" and b.dtype.kind in "iub":
        return _repeat(a, b)
    if b.dtype.kind == "U" and a.dtype.kind in "iub":
        return _repeat(b, a)
    if _both_int(a, b) and _magnitude(a) * _magnitude(b) > INT64_MAX:
        return _exact_int("*", np.multiply, a, b)
    return np.multiply(a, b)


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
        big_a, big_b = _magnitude(a), (int(b.max()) if b.size else 0)
        if big_a > 1 and big_b * math.log2(big_a) >= 62:
            # only where the result may leave int64: exact, refused when it does
            bits = np.where(np.abs(a) > 1, b * np.log2(np.maximum(np.abs(a), 1)), 0.0)
            if np.any(bits > 64):
                i = int(np.argmax(bits))
                raise RASPValueError(
                    f"integer overflow: '^' gives {int(a.reshape(-1)[i])} ^ "
                    f"{int(b.reshape(-1)[i]) if b.ndim else int(b)} (about 2^{bits.max():.0f}), "
                    f"outside the 64-bit range of s-op values")
            return _exact_int("^", np.power, a, b)
        return np.power(a, b)
    af = a.astype(float)
    if np.any((af == 0) & (np.asarray(b) < 0)):
        raise RASPValueError("zero raised to a negative power")
    return np.power(af, b)


def _neg(a):
    a = np.asarray(a)
    if a.dtype.kind == "i" and a.size and int(a.min()) == INT64_MIN:
        raise RASPValueError(f"integer overflow: '-' of {INT64_MIN} is outside the 64-bit "
                             "range of s-op values")
    return np.negative(a)


def _round(a):
    # Python's round (banker's rounding), as the original RASP's round(); returns ints.
    a = np.asarray(a)
    if a.dtype.kind in "iub":
        return a.astype(np.int64)
    r = np.round(a)
    if r.size and (r.max() > INT64_MAX or r.min() < INT64_MIN):
        raise RASPValueError("integer overflow: round gives a value outside the 64-bit range "
                             "of s-op values")
    return r.astype(np.int64)


def _indicator(a):
    return np.asarray(a).astype(bool).astype(np.int64)


def _truthy(a):
    return np.asarray(a).astype(bool)


def _not(a):
    return np.logical_not(_truthy(a))


def _and(a, b):
    return np.logical_and(_truthy(a), _truthy(b))


def _or(a, b):
    return np.logical_or(_truthy(a), _truthy(b))


def _ternary(cond, a, b):
    """``a if cond else b`` per position. Branches of one kind (strings, or numbers) are
    chosen with ``np.where``. A string branch and a number branch are chosen per sequence, as
    the original RASP (tech-srl/RASP ``Evaluator.py`` zips the three sequences and
    ``Support.py`` checks the result's type): a sequence (the last axis) that ends up mixing
    strings and numbers raises :class:`RASPTypeError` naming its first position of each kind;
    a batch whose sequences are each homogeneous but of different kinds raises
    :class:`MixedBatchError` (the evaluator then runs it sequence by sequence)."""
    c, a, b = _truthy(cond), np.asarray(a), np.asarray(b)
    if (a.dtype.kind == "U") == (b.dtype.kind == "U"):
        return np.where(c, a, b)
    shape = np.broadcast_shapes(c.shape, a.shape, b.shape)
    c = np.broadcast_to(c, shape)
    if c.ndim == 0:
        return a if c else b
    rows = c.reshape(-1, shape[-1])
    takes_a, takes_b = rows.all(axis=1), ~rows.any(axis=1)
    mixed = ~(takes_a | takes_b)
    if mixed.any():
        r = rows[int(np.flatnonzero(mixed)[0])]
        kind = {"a": "strings" if a.dtype.kind == "U" else "numbers",
                "b": "strings" if b.dtype.kind == "U" else "numbers"}
        raise RASPTypeError(
            f"'x if c else y' gives {kind['a']} at position {int(np.flatnonzero(r)[0])} and "
            f"{kind['b']} at position {int(np.flatnonzero(~r)[0])} of one sequence; a "
            "sequence cannot mix strings and numbers")
    if takes_a.all():
        return np.broadcast_to(a, shape)
    if takes_b.all():
        return np.broadcast_to(b, shape)
    raise MixedBatchError("'x if c else y': sequences of strings and of numbers in one batch")


def _repeat(s: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``s * k`` of strings and integers (bools count 0/1): the string repeated ``k`` times,
    empty for ``k <= 0``, as Python and the original RASP (``'ab' * 2 == 'abab'``). Refused
    before allocating when one value would exceed :data:`rasp.limits.MAX_COLLECTION`
    characters or the result the memory budget."""
    k = np.asarray(k).astype(np.int64)
    check_string_size("'*' of a string by an integer",
                      s.dtype.itemsize // 4 * max(int(k.max(initial=0)), 0), max(s.size, k.size))
    return np.char.multiply(s, np.maximum(k, 0))


def check_string_size(what: str, width: int, count: int) -> None:
    """Refuse, before allocating, string s-op values of up to ``width`` characters for
    ``count`` positions when one value would exceed :data:`rasp.limits.MAX_COLLECTION`
    characters or all of them the memory budget (NumPy stores ``width`` UCS-4 characters per
    value). Raises :class:`~rasp.errors.RASPResourceError` naming ``what`` and both limits."""
    need = width * 4 * count
    if width > limits.MAX_COLLECTION or need > limits.MEMORY_BUDGET_BYTES:
        raise RASPResourceError(
            f"{what} would make values of up to {width} characters ({need / 2**20:.0f} MiB); "
            f"the limits are {limits.MAX_COLLECTION} characters (rasp.limits.MAX_COLLECTION) "
            f"and {limits.MEMORY_BUDGET_BYTES / 2**20:.0f} MiB (RASP_MEMORY_BUDGET_MB)")


# --------------------------------------------------------------------------------------------
# Atom semantics (Python values, as the original RASP computes them)
# --------------------------------------------------------------------------------------------

def _atom_indicator(x):
    return 1 if x else 0


def _atom_round(x):
    return round(x)


# --------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------

#: Type rules: which operand value types an operation accepts.
TYPE_RULES = {
    "sum": "numbers (bools count as 0/1), or strings on both sides (concatenation)",
    "arithmetic": "numbers (bools count as 0/1)",
    "product": "numbers (bools count as 0/1), or a string and an integer (repetition)",
    "order": "any values, but not strings with numbers",
    "equality": "any values; a string never equals a number",
    "logical": "any values, by truthiness",
    "round": "numbers",
    "any": "any values",
    "branches": "a condition and two values; a sequence may not end up mixing strings and numbers",
}


@dataclass(frozen=True)
class Op:
    """One elementwise operation of the dialect.

    Attributes:
        name: the IR name (``Elementwise.op``), e.g. ``"add"``.
        symbol: the surface syntax, e.g. ``"+"`` (``"round"`` for a function).
        arity: number of operands (1, 2, or 3 for the ternary).
        kernel: NumPy semantics: arrays of one shape (``[batch, seq]``) -> array.
        atom: semantics on Python atoms (the statement interpreter's ``3 + 4``), or ``None``
            where atoms are handled by the statement interpreter itself (the ternary).
        types: the type rule, a key of :data:`TYPE_RULES`.
    """

    name: str
    symbol: str
    arity: int
    kernel: Callable
    atom: Callable | None
    types: str

    @property
    def is_comparison(self) -> bool:
        return self.types in ("order", "equality")

    @property
    def is_arithmetic(self) -> bool:
        return self.types in ("sum", "arithmetic", "product")

    def describe(self, *args: str) -> str:
        """The readable form of the operation on operand texts: ``x + 1``, ``round(x)``,
        ``-x``, ``a if c else b`` (arguments in the order condition, then, else)."""
        if self.arity == 3:
            return f"{args[1]} if {args[0]} else {args[2]}"
        if self.arity == 1:
            return f"{self.symbol}({args[0]})" if self.symbol.isalpha() else \
                f"{self.symbol}{args[0]}"
        return f"{args[0]} {self.symbol} {args[1]}"


OPS: dict[str, Op] = {op.name: op for op in (
    Op("add", "+", 2, _add, operator.add, "sum"),
    Op("sub", "-", 2, _sub, operator.sub, "arithmetic"),
    Op("mul", "*", 2, _mul, operator.mul, "product"),
    Op("div", "/", 2, _div, operator.truediv, "arithmetic"),
    Op("mod", "%", 2, _mod, operator.mod, "arithmetic"),
    Op("pow", "^", 2, _pow, operator.pow, "arithmetic"),
    Op("eq", "==", 2, np.equal, operator.eq, "equality"),
    Op("ne", "!=", 2, np.not_equal, operator.ne, "equality"),
    Op("lt", "<", 2, np.less, operator.lt, "order"),
    Op("le", "<=", 2, np.less_equal, operator.le, "order"),
    Op("gt", ">", 2, np.greater, operator.gt, "order"),
    Op("ge", ">=", 2, np.greater_equal, operator.ge, "order"),
    Op("and", "and", 2, _and, lambda a, b: a and b, "logical"),
    Op("or", "or", 2, _or, lambda a, b: a or b, "logical"),
    Op("neg", "-", 1, _neg, operator.neg, "arithmetic"),
    Op("pos", "+", 1, np.positive, operator.pos, "arithmetic"),
    Op("not", "not", 1, _not, operator.not_, "logical"),
    Op("round", "round", 1, _round, _atom_round, "round"),
    Op("indicator", "indicator", 1, _indicator, _atom_indicator, "any"),
    Op("identity", "identity", 1, np.asarray, lambda x: x, "any"),
    Op("ternary", "if", 3, _ternary, None, "branches"),
)}

#: Elementwise operations parametrised by a value (a container or a Python callable).
PARAMETRIC_OPS = ("in", "lookup", "python")

BINARY_OPS = tuple(k for k, o in OPS.items() if o.arity == 2)
UNARY_OPS = tuple(k for k, o in OPS.items() if o.arity == 1)
COMPARISON_OPS = tuple(k for k, o in OPS.items() if o.is_comparison)
ARITHMETIC_OPS = tuple(k for k, o in OPS.items() if o.is_arithmetic)

#: Comparisons of ``select``: the six orderings plus the always-true / always-false selectors.
SELECT_OPS = ("==", "!=", "<", "<=", ">", ">=", "TRUE", "FALSE")


# --------------------------------------------------------------------------------------------
# Value types
# --------------------------------------------------------------------------------------------

_TYPE_NAMES = {"U": "string", "b": "bool", "i": "int", "u": "int", "f": "float", "O": "object"}


def value_type(arr: np.ndarray) -> str:
    """The original RASP's type name of an array's values: ``string``, ``bool``, ``int``,
    ``float``."""
    return _TYPE_NAMES.get(np.asarray(arr).dtype.kind, "object")


def value_kind(v: Any) -> str:
    """The value type of one Python or NumPy scalar: ``bool``, ``int``, ``float``, ``str``, or
    its Python type name."""
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, (int, np.integer)):
        return "int"
    if isinstance(v, (float, np.floating)):
        return "float"
    if isinstance(v, str):
        return "str"
    return type(v).__name__


def check_int64(v: Any) -> None:
    """Raise :class:`~rasp.errors.RASPValueError` when an int atom does not fit the int64
    values of an s-op."""
    if isinstance(v, int) and not isinstance(v, bool) and not INT64_MIN <= v <= INT64_MAX:
        text = str(v) if len(str(v)) <= 40 else f"{str(v)[:12]}...({len(str(v))} digits)"
        raise RASPValueError(f"integer {text} is outside the 64-bit range of s-op values "
                             f"[{INT64_MIN}, {INT64_MAX}]")


# Sets of exact Python types that convert directly (the common case: a list of ints, floats,
# strings or bools); anything else (NumPy scalars, subclasses, mixtures) takes the checked path.
_FAST_DTYPES = {frozenset({int}): np.int64, frozenset({float}): np.float64,
                frozenset({int, float}): np.float64, frozenset({str}): str,
                frozenset({bool}): bool}


def homogeneous_array(vals: list) -> np.ndarray:
    """Build a 1-D array from Python values, refusing mixed types (bool / number / str).

    ints -> int64, floats (or ints with floats) -> float64, bools -> bool, strings -> ``<U``.
    ``None`` (an aggregate's ``None`` default, Tracr's padding) mixes with any one type: the
    array is then ``object`` (Python values and ``None``).
    Raises :class:`~rasp.errors.RASPTypeError` for a mixture or an unsupported type and
    :class:`~rasp.errors.RASPValueError` for an int outside int64.
    """
    types = set(map(type, vals))          # one C-level pass; exact Python types
    fast = _FAST_DTYPES.get(frozenset(types))
    if fast is not None:
        try:
            if fast is str:
                return np.array(vals, dtype=str)
            return np.fromiter(vals, dtype=fast, count=len(vals))
        except OverflowError:
            for v in vals:
                check_int64(int(v))
            raise  # pragma: no cover
    kinds = {value_kind(v) for v in vals}
    if kinds == {"tuple"}:   # Tracr's make_nary_sequencemap: tuple values (an object array)
        out = np.empty(len(vals), dtype=object)
        for i, v in enumerate(vals):
            out[i] = v
        return out
    if "NoneType" in kinds:
        rest = [v for v in vals if v is not None]
        typed = homogeneous_array(rest) if rest else np.array([], dtype=object)
        out = np.empty(len(vals), dtype=object)
        it = iter(typed.tolist())
        for i, v in enumerate(vals):
            out[i] = None if v is None else next(it)
        return out
    if kinds == {"int", "float"}:
        kinds = {"float"}
    if len(kinds) > 1:
        raise RASPTypeError(f"mixed value types in a sequence: {sorted(kinds)}")
    if kinds == {"str"}:
        return np.array(vals, dtype=object).astype(str)
    if kinds == {"bool"}:
        return np.array(vals, dtype=bool)
    if kinds == {"int"}:
        try:
            return np.array(vals, dtype=np.int64)
        except OverflowError:
            for v in vals:
                check_int64(int(v))
            raise  # pragma: no cover
    if kinds == {"float"}:
        return np.array(vals, dtype=np.float64)
    if not vals:
        return np.array([], dtype=np.int64)
    raise RASPTypeError(f"unsupported value types: {sorted(kinds)}")


# --------------------------------------------------------------------------------------------
# Applying an elementwise function to arrays
# --------------------------------------------------------------------------------------------

def _is_num(arr) -> bool:
    return np.asarray(arr).dtype.kind in "iufb"


def _operands(fn: "Elementwise", arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The operands in source order (a map's constant on its side)."""
    arrays = [np.asarray(a) for a in arrays]
    if fn.const_side == "right":
        return arrays + [np.asarray(fn.const)]
    if fn.const_side == "left":
        return [np.asarray(fn.const)] + arrays
    return arrays


def check_types(fn: "Elementwise", arrays: Sequence[np.ndarray]) -> None:
    """Apply the op's type rule to its operands; raise
    :class:`~rasp.errors.RASPTypeError` naming the operand types in source order."""
    op = OPS.get(fn.op)
    if op is None:
        return
    operands = _operands(fn, arrays) if fn.op != "ternary" else list(arrays)
    rule = op.types
    if rule in ("sum", "arithmetic", "product"):
        if rule == "sum" and all(a.dtype.kind == "U" for a in operands):
            return
        if rule == "product" and sorted(a.dtype.kind == "U" for a in operands) == [False, True] \
                and all(a.dtype.kind in "Uiub" for a in operands):
            return
        if not all(_is_num(a) for a in operands):
            names = " and ".join(value_type(a) for a in operands)
            if len(operands) == 1:
                raise RASPTypeError(f"cannot apply unary '{op.symbol}' to {names} values")
            raise RASPTypeError(f"cannot apply '{op.symbol}' to {names} values")
    elif rule == "order":
        kinds = {("U" if a.dtype.kind == "U" else "n") for a in operands}
        if len(kinds) > 1:
            names = " and ".join(value_type(a) for a in operands)
            raise RASPTypeError(f"cannot order-compare strings with numbers ('{op.symbol}' "
                                f"on {names} values)")
    elif rule == "round":
        if not _is_num(operands[0]):
            raise RASPTypeError(f"round needs numbers, got {value_type(operands[0])} values")


def apply(fn: "Elementwise", arrays: Sequence[np.ndarray]) -> np.ndarray:
    """Apply an elementwise function to its input arrays (all of one shape, ``[batch, seq]``)
    with the dialect's semantics; returns an array of that shape.

    Raises :class:`~rasp.errors.RASPTypeError` (type rule), :class:`~rasp.errors.RASPValueError`
    (division / modulo by zero, integer overflow, a non-finite result, a failed lookup).
    """
    arrays = [np.asarray(a) for a in arrays]
    if fn.op in PARAMETRIC_OPS:
        out = _apply_parametric(fn, arrays)
        return _finish(out, arrays)
    check_types(fn, arrays)
    op = OPS[fn.op]
    if op.is_arithmetic:
        # arithmetic on booleans follows Python (True + True == 2, -True == -1), as the
        # original RASP; NumPy's bool add is a logical or and bool subtract an error.
        arrays = [a.astype(np.int64) if a.dtype.kind == "b" else a for a in arrays]
    operands = _operands(fn, arrays) if fn.op != "ternary" else arrays
    if fn.op == "add" and any(a.dtype.kind == "U" for a in operands):
        return _finish(_concat(operands[0].astype(str), operands[1].astype(str)), arrays)
    if op.types == "equality":
        kinds = [a.dtype.kind for a in operands]
        if "U" in kinds and any(k != "U" for k in kinds):
            return np.full(arrays[0].shape, fn.op == "ne")
    if op.is_arithmetic and fn.const_side is not None:
        operands = [a.astype(np.int64) if a.dtype.kind == "b" else a for a in operands]
    return _finish(np.asarray(op.kernel(*operands)), arrays)


def _concat(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """String concatenation of s-op values, refused before allocating when one value would
    be longer than :data:`rasp.limits.MAX_COLLECTION` characters or the result larger than
    the memory budget (``x = x + x`` on strings in a loop)."""
    check_string_size("'+' of strings", a.dtype.itemsize // 4 + b.dtype.itemsize // 4,
                      max(a.size, b.size))
    return np.char.add(a, b)


def _finish(out: np.ndarray, arrays: Sequence[np.ndarray]) -> np.ndarray:
    shape = arrays[0].shape
    if out.shape != shape:
        out = np.broadcast_to(out, shape).copy()
    if out.dtype.kind == "f" and not np.all(np.isfinite(out)):
        raise RASPValueError("arithmetic produced a non-finite value")
    if out.dtype == object:
        out = homogeneous_array(out.reshape(-1).tolist()).reshape(out.shape)
    return out


def _apply_parametric(fn: "Elementwise", arrays: list[np.ndarray]) -> np.ndarray:
    if fn.op == "in":
        return _membership(arrays[0], fn.container)
    if fn.op == "lookup":
        return _lookup(arrays[0], fn.container)
    return _apply_python(fn.fn, arrays)


def _membership(a: np.ndarray, container) -> np.ndarray:
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
    hit = np.array([u in items for u in uniq.tolist()], dtype=bool)
    return hit[inv].reshape(a.shape)


def _lookup(a: np.ndarray, container) -> np.ndarray:
    uniq, inv = np.unique(a, return_inverse=True)
    out = []
    for u in uniq.tolist():
        try:
            if isinstance(container, dict):
                out.append(container[u])
            else:
                # an int, a bool (False / True index 0 / 1, as Python and the original RASP)
                # or an integral float
                if isinstance(u, float) and u.is_integer():
                    u = int(u)
                if not isinstance(u, int):
                    raise RASPTypeError(f"cannot index a list or string by {u!r}")
                out.append(container[u])
        except (KeyError, IndexError):
            raise RASPValueError(f"lookup of {u!r} failed: not in {container!r}") from None
    return homogeneous_array(out)[inv].reshape(a.shape)


def _apply_python(fn, arrays):
    shape = arrays[0].shape
    if len(arrays) == 1 and arrays[0].dtype != object:
        uniq, inv = np.unique(arrays[0], return_inverse=True)
        vals = [fn(u) for u in uniq.tolist()]
        return homogeneous_array(vals)[inv].reshape(shape)
    cols = [x.reshape(-1).tolist() for x in arrays]
    vals = [fn(*t) for t in zip(*cols)]
    return homogeneous_array(vals).reshape(shape)


def compare(keys: np.ndarray, queries: np.ndarray, op: str) -> np.ndarray:
    """A select's comparison ``keys op queries`` (broadcast; ``op`` in ``== != < <= > >=``).

    A string never equals a number (``==`` all false, ``!=`` all true); ordering strings
    against numbers raises :class:`~rasp.errors.RASPTypeError`. Values holding ``None`` (an
    ``object`` array: an aggregate's ``None`` default) compare element by element with
    Python's operators, as the original RASP's ``select`` does (``None == "a"`` is false,
    ``None != "a"`` true); ordering ``None`` raises :class:`~rasp.errors.RASPTypeError`."""
    kk, qk = keys.dtype.kind, queries.dtype.kind
    if kk == "O" or qk == "O":
        k, q = np.broadcast_arrays(keys, queries)
        fn = _PY_COMPARE[op]
        try:
            return np.frompyfunc(fn, 2, 1)(k, q).astype(bool)
        except TypeError:
            raise RASPTypeError(f"select cannot order None against other values using "
                                f"'{op}'") from None
    if (kk == "U") != (qk == "U"):
        if op == "==":
            return np.zeros(np.broadcast_shapes(keys.shape, queries.shape), dtype=bool)
        if op == "!=":
            return np.ones(np.broadcast_shapes(keys.shape, queries.shape), dtype=bool)
        raise RASPTypeError(f"select cannot compare strings with numbers using '{op}'")
    return _SELECT_KERNELS[op](keys, queries)


_PY_COMPARE = {"==": lambda k, q: k == q, "!=": lambda k, q: k != q,
               "<": lambda k, q: k < q, "<=": lambda k, q: k <= q,
               ">": lambda k, q: k > q, ">=": lambda k, q: k >= q}

_SELECT_KERNELS = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
                   ">": np.greater, ">=": np.greater_equal}


def atom_int_guard(sym: str, a: Any, b: Any) -> None:
    """Refuse an atom operation whose integer result would exceed
    :data:`rasp.limits.MAX_INT_BITS` bits,
    before computing it (raises :class:`~rasp.errors.RASPResourceError`)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return
    bits = None
    if sym in ("*",) and isinstance(a, int) and isinstance(b, int):
        bits = a.bit_length() + b.bit_length()
    elif sym == "^" and isinstance(a, (int, float)) and isinstance(b, int) and abs(a) > 1 \
            and b > 0:
        bits = b * math.log2(abs(a))
    if bits is not None and bits > limits.MAX_INT_BITS:
        raise RASPResourceError(
            f"'{sym}' would give an integer of about {int(bits)} bits, more than the limit of "
            f"{limits.MAX_INT_BITS} bits (rasp.limits.MAX_INT_BITS)")
    if bits is not None and bits > 14_000:    # displayable (Python's limit: 4,300 digits)
        limits.allow_int_digits()
