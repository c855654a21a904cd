"""The built-in functions and operators of the RASP dialect.

:data:`BUILTINS` maps each built-in function's name to ``(fn(interp, args), doc)``: ``select``,
``aggregate``, ``selector_width``, ``kqv``, ``round``, ``indicator``, ``range``, ``zip``,
``len``, ``numerical``, ``categorical``, ``full``, ``draw``. :data:`CONSTANTS` holds ``tokens_*``,
``indices``, ``length``, ``True``, ``False``; :data:`RESERVED` the names that cannot be
assigned. :func:`binop` / :func:`unop` apply the operators of the op table
(:data:`rasp.ops.OPS`) to atoms (directly, as the original RASP) or s-ops / selectors (as IR).
Growing operations are bounded by :mod:`rasp.limits`.
"""

from __future__ import annotations

from typing import Any, Callable

from .. import ir, limits
from .display import describe_value, draw_text, short_value
from ..ir import (Aggregate, Elementwise, Full, Map, Node, RASPResourceError, RASPTypeError,
                 RASPValueError, Select, Selector, SelectorAnd, SelectorNot, SelectorOr,
                 SelectorWidth, SequenceMap, SOp)
from ..ops import OPS, SELECT_OPS, atom_int_guard, check_int64
from ..parser import KEYWORDS
from ..values import Builtin, RASPFunction, SelOp, is_atom

__all__ = ["BUILTINS", "CONSTANTS", "RESERVED", "BUILTIN_NODE_IDS", "binop", "unop",
           "need_sop_or_atom"]


# --------------------------------------------------------------------------------------------
# Built-in functions
# --------------------------------------------------------------------------------------------

def need_sop_or_atom(v, what):
    if isinstance(v, SOp):
        return v
    if is_atom(v):
        return Full(v)
    raise RASPTypeError(f"{what} must be an s-op or an atom, got {describe_value(v)}")


def _comparison(v, fname):
    if isinstance(v, str) and v in SELECT_OPS:
        return str(v)
    raise RASPTypeError(f"{fname} expects a comparison (one of == != < <= > >=, or "
                        f'"TRUE" / "FALSE"), got {describe_value(v)}')


def _arity(fname, args, lo, hi):
    if not lo <= len(args) <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise RASPTypeError(f"{fname} takes {want} arguments, got {len(args)}")


def _bi_select(it, args):
    _arity("select", args, 3, 3)
    k = need_sop_or_atom(args[0], "select keys")
    q = need_sop_or_atom(args[1], "select queries")
    return Select(k, q, _comparison(args[2], "select"))


def _default_atom(v, fname):
    if v is None or is_atom(v):
        return v
    raise RASPTypeError(f"{fname} default must be an atom, got {describe_value(v)}")


def _reduction(v, fname):
    if isinstance(v, str) and v in ir.REDUCTIONS:
        return str(v)
    raise RASPValueError(f'{fname} reduction must be "mean", "max" or "min", got {describe_value(v)}')


def _bi_aggregate(it, args):
    _arity("aggregate", args, 2, 4)
    sel = args[0]
    if not isinstance(sel, Selector):
        raise RASPTypeError(f"aggregate expects a selector first, got {describe_value(sel)}")
    vals = need_sop_or_atom(args[1], "aggregate values")
    default = _default_atom(args[2], "aggregate") if len(args) > 2 else 0
    red = _reduction(args[3], "aggregate") if len(args) > 3 else "mean"
    return Aggregate(sel, vals, default, red)


def _bi_selector_width(it, args):
    _arity("selector_width", args, 1, 1)
    if not isinstance(args[0], Selector):
        raise RASPTypeError(f"selector_width expects a selector, got {describe_value(args[0])}")
    return SelectorWidth(args[0])


def _bi_kqv(it, args):
    _arity("kqv", args, 4, 6)
    k = need_sop_or_atom(args[0], "kqv keys")
    q = need_sop_or_atom(args[1], "kqv queries")
    v = need_sop_or_atom(args[2], "kqv values")
    op = _comparison(args[3], "kqv")
    default = _default_atom(args[4], "kqv") if len(args) > 4 else 0
    red = _reduction(args[5], "kqv") if len(args) > 5 else "mean"
    return Aggregate(Select(k, q, op), v, default, red, truncate=(red == "mean"))


def _bi_round(it, args):
    _arity("round", args, 1, 1)
    x = args[0]
    if isinstance(x, SOp):
        return Map(Elementwise("round"), x)
    if isinstance(x, (int, float)) and not isinstance(x, SelOp):
        try:
            return round(x)
        except (OverflowError, ValueError) as e:
            raise RASPValueError(f"round: {e}") from None
    raise RASPTypeError(f"round expects an s-op or a number, got {describe_value(x)}")


def _bi_indicator(it, args):
    _arity("indicator", args, 1, 1)
    x = args[0]
    if isinstance(x, SOp):
        return Map(Elementwise("indicator"), x)
    if is_atom(x):
        return 1 if x else 0
    raise RASPTypeError(f"indicator expects an s-op, got {describe_value(x)}")


def _bi_range(it, args):
    _arity("range", args, 1, 3)
    for a in args:
        if not isinstance(a, int) or isinstance(a, bool):
            raise RASPTypeError(f"range expects integers, got {describe_value(a)}")
    r = range(*args) if args[-1] != 0 or len(args) < 3 else None
    if r is None:
        raise RASPValueError("range step must not be zero")
    n = max(0, (r.stop - r.start + r.step - (1 if r.step > 0 else -1)) // r.step)
    if n > limits.MAX_COLLECTION:       # (len() of a huge range overflows)
        raise RASPResourceError(f"range of {n} elements is longer than the limit of "
                                f"{limits.MAX_COLLECTION} (rasp.limits.MAX_COLLECTION)")
    return list(r)


def _bi_zip(it, args):
    if not args:
        raise RASPTypeError("zip needs at least one list")
    for i, a in enumerate(args):
        if not isinstance(a, list):
            raise RASPTypeError(f"zip expects lists, argument {i + 1} is {describe_value(a)}")
    n = len(args[0])
    for i, a in enumerate(args):
        if len(a) != n:
            raise RASPValueError(f"zip of lists of different lengths ({n} and {len(a)})")
    return [list(t) for t in zip(*args)]


def _bi_len(it, args):
    _arity("len", args, 1, 1)
    x = args[0]
    if isinstance(x, (list, dict)) or (isinstance(x, str) and not isinstance(x, SelOp)):
        return len(x)
    raise RASPTypeError(f"len expects a list, dict or string, got {describe_value(x)}")


def _bi_numerical(it, args):
    _arity("numerical", args, 1, 1)
    if not isinstance(args[0], SOp):
        raise RASPTypeError(f"numerical expects an s-op, got {describe_value(args[0])}")
    return ir.numerical(args[0])


def _bi_categorical(it, args):
    _arity("categorical", args, 1, 1)
    if not isinstance(args[0], SOp):
        raise RASPTypeError(f"categorical expects an s-op, got {describe_value(args[0])}")
    return ir.categorical(args[0])


def _bi_full(it, args):
    _arity("full", args, 1, 2)
    value = args[-1]
    if len(args) == 2 and not isinstance(args[0], SOp):
        raise RASPTypeError(f"full(x, value) expects an s-op x, got {describe_value(args[0])}")
    if not is_atom(value):
        raise RASPTypeError(f"full expects an atom value, got {describe_value(value)}")
    return Full(value)


def _bi_draw(it, args):
    _arity("draw", args, 1, 3)
    node = args[0]
    if not isinstance(node, Node):
        raise RASPTypeError(f"draw expects an s-op or selector, got {describe_value(node)}")
    example = args[1] if len(args) > 1 else it.example
    text = draw_text(node, example)
    if len(args) > 2:                  # draw(sop, input, "flow.svg"): also the picture
        path = args[2]
        if not isinstance(path, str):
            raise RASPTypeError(f"draw's third argument is a .svg or .png file name, got "
                                f"{describe_value(path)}")
        # breaks an import cycle: .draw imports this module
        from .draw import draw_file
        try:
            draw_file(node, path, example)
        except OSError as e:
            raise RASPValueError(f"draw: cannot write {path}: {e.strerror or e}") from None
        text += f"\n  (picture: {path})"
    it.output(text)
    it.last_draw = text
    return None


BUILTINS: dict[str, tuple[Callable, str]] = {
    "select": (_bi_select, "select(keys, queries, op): selector, [q, k] true when keys[k] op "
               "queries[q]"),
    "aggregate": (_bi_aggregate, 'aggregate(sel, values[, default[, "mean"|"max"|"min"]])'),
    "selector_width": (_bi_selector_width, "selector_width(sel): selected keys per query"),
    "kqv": (_bi_kqv, 'kqv(keys, queries, values, op[, default[, reduction]]): RASP-L head; '
            'mean truncated toward zero'),
    "round": (_bi_round, "round(x): nearest integer (elementwise on s-ops)"),
    "indicator": (_bi_indicator, "indicator(x): 1 where x is true, else 0"),
    "range": (_bi_range, "range(stop) / range(start, stop[, step]): a list of ints"),
    "zip": (_bi_zip, "zip(list1, list2, ...): list of lists"),
    "len": (_bi_len, "len(list_or_dict_or_string)"),
    "numerical": (_bi_numerical, "numerical(sop): numerical encoding annotation (compiler)"),
    "categorical": (_bi_categorical, "categorical(sop): categorical encoding (default)"),
    "full": (_bi_full, "full(value) or full(x, value): a constant s-op"),
    "draw": (_bi_draw, 'draw(sop[, input[, "flow.svg"]]): print the computation flow on an '
             "input; with a file name also draw it (boxes, values, selector matrices)"),
}

CONSTANTS = {
    "tokens_str": ir.tokens_str, "tokens_int": ir.tokens_int, "tokens_float": ir.tokens_float,
    "tokens_bool": ir.tokens_bool, "tokens_asis": ir.tokens_asis, "indices": ir.indices,
    "length": ir.length, "True": True, "False": False,
}

#: Names that cannot be assigned (``tokens`` is the one reassignable built-in; ``out`` is set
#: only by bare expression statements, as in the original REPL).
RESERVED = frozenset(set(BUILTINS) | set(CONSTANTS) | set(KEYWORDS) | {"out"})
BUILTIN_NODE_IDS = frozenset(n.id for n in CONSTANTS.values() if isinstance(n, Node))


# --------------------------------------------------------------------------------------------
# Operators on values (the op table's atom semantics; s-ops and selectors build IR)
# --------------------------------------------------------------------------------------------

def _sym(op: str) -> str:
    return OPS[op].symbol


def _check_size(sym: str, a: Any, b: Any) -> None:
    """Refuse a string or list result longer than :data:`rasp.limits.MAX_COLLECTION` before
    building it (``x = x + x`` in a loop), and an integer larger than
    :data:`rasp.limits.MAX_INT_BITS`."""
    n = None
    if sym == "+" and isinstance(a, (str, list)) and isinstance(b, type(a)):
        n = len(a) + len(b)
    elif sym == "*":
        for s, k in ((a, b), (b, a)):
            if isinstance(s, (str, list)) and isinstance(k, int):
                n = k * len(s)
    if n is not None and n > limits.MAX_COLLECTION:
        raise RASPResourceError(f"'{sym}' would build a {'string' if isinstance(a, str) or isinstance(b, str) else 'list'} "
                                f"of {n} elements, more than the limit of {limits.MAX_COLLECTION} "
                                "(rasp.limits.MAX_COLLECTION)")
    atom_int_guard(sym, a, b)


def _atom_binop(op: str, a: Any, b: Any) -> Any:
    sym = _sym(op)
    if op in ("and", "or"):
        return OPS[op].atom(a, b)
    _check_size(sym, a, b)
    if op not in ("eq", "ne"):
        for x in (a, b):
            if isinstance(x, (dict, Builtin, RASPFunction, SelOp)) or x is None:
                raise RASPTypeError(f"cannot apply '{sym}' to {describe_value(x)}")
    try:
        res = OPS[op].atom(a, b)
    except ZeroDivisionError:
        raise RASPValueError({"div": "division by zero", "mod": "modulo by zero"}.get(
            op, f"{short_value(a)} {sym} {short_value(b)}: zero raised to a negative power"
        )) from None
    except OverflowError:
        raise RASPValueError(f"'{sym}' overflowed") from None
    except TypeError:
        raise RASPTypeError(f"cannot apply '{sym}' to {describe_value(a)} and "
                            f"{describe_value(b)}") from None
    if isinstance(res, complex):
        raise RASPValueError(f"{short_value(a)} ^ {short_value(b)} is not a real number")
    return res


def binop(op: str, a: Any, b: Any) -> Any:
    """Apply a binary operator (an :data:`~rasp.ops.OPS` name): atoms directly (Python
    semantics, as the original RASP), s-ops as IR maps / sequence maps, selectors with
    ``and`` / ``or``. Raises RASPTypeError / RASPValueError / RASPResourceError."""
    if isinstance(a, Selector) or isinstance(b, Selector):
        if op in ("and", "or"):
            if isinstance(a, Selector) and isinstance(b, Selector):
                return SelectorAnd(a, b) if op == "and" else SelectorOr(a, b)
            other = b if isinstance(a, Selector) else a
            raise RASPTypeError(f"cannot apply '{op}' between a selector and "
                                f"{describe_value(other)}")
        raise RASPTypeError(f"cannot apply '{_sym(op)}' to a selector")
    if isinstance(a, SOp) or isinstance(b, SOp):
        for x in (a, b):
            if not isinstance(x, SOp) and not is_atom(x):
                raise RASPTypeError(f"cannot apply '{_sym(op)}' to an s-op and "
                                    f"{describe_value(x)}")
        if isinstance(a, SOp) and isinstance(b, SOp):
            return SequenceMap(Elementwise(op), (a, b))
        check_int64(b if isinstance(a, SOp) else a)
        if isinstance(a, SOp):
            return Map(Elementwise(op, const=b, const_side="right"), a)
        return Map(Elementwise(op, const=a, const_side="left"), b)
    return _atom_binop(op, a, b)


def unop(op: str, x: Any) -> Any:
    """Apply a unary operator (``not``, ``neg``, ``pos``) to an atom, s-op or selector."""
    if op == "not":
        if isinstance(x, SOp):
            return Map(Elementwise("not"), x)
        if isinstance(x, Selector):
            return SelectorNot(x)
        if isinstance(x, (RASPFunction, Builtin)) or isinstance(x, SelOp):
            raise RASPTypeError(f"cannot apply 'not' to {describe_value(x)}")
        return not x
    sym = _sym(op)
    if isinstance(x, SOp):
        return Map(Elementwise(op), x)
    if isinstance(x, (int, float)) and not isinstance(x, SelOp):
        return OPS[op].atom(x)
    raise RASPTypeError(f"cannot apply unary '{sym}' to {describe_value(x)}")
