"""A program printed in the dialect: one statement per operation, runnable by :func:`rasp.run_source`.

Used by the program search (``rasp search`` prints what it finds), the predictions document and
anyone who builds programs with the Python API and wants them as ``.rasp`` source. What it
prints runs as printed (in the REPL, ``rasp run`` and ``rasp verify --program``) and computes
the same values as the program it renders: a program that reads its input through
``tokens_int`` / ``tokens_asis`` (the search's programs do) starts with ``tokens =
tokens_asis;`` (the dialect's ``tokens`` converts to strings), and constants that stand for
tokens are written as the task's symbols (``symbols``), bound as atoms in the program's first
lines, and an input of the task becomes the REPL's running example (``set example [BOS, a,
SEP]``: the REPL rejects a statement that fails on its running example, ``"hello"`` by
default).
"""

from __future__ import annotations

import itertools
import re
from typing import Any, Container, Mapping, Sequence

from .ir import (Aggregate, Full, Indices, Length, Map, Node, Select, SelectorAnd, SelectorNot,
                 SelectorOr, SelectorWidth, SequenceMap, Tokens, topological_order)
from .ops import COMPARISON_OPS, OPS
from .parser import KEYWORDS

__all__ = ["program_to_source", "describe_node", "atom_source"]

#: names a printed program uses itself: a symbol with one of these names stays a number
_OWN_NAMES = frozenset({"tokens", "tokens_str", "tokens_int", "tokens_float", "tokens_bool",
                        "tokens_asis", "indices", "length", "select", "aggregate", "kqv",
                        "selector_width", "True", "False"}) | KEYWORDS
_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*\Z")
_GENERATED = re.compile(r"v\d+\Z")


def atom_source(value: Any) -> str:
    """An atom as the dialect writes it: ``3``, ``-1``, ``0.5``, ``True``, ``"a"`` (strings in
    double quotes: the dialect has no single-quoted strings).

    Raises:
        ValueError: a string the dialect cannot write (a double quote or a line break in it).
    """
    if isinstance(value, (bool, int, float)) or hasattr(value, "item"):
        value = value.item() if hasattr(value, "item") else value
        return repr(value)
    if isinstance(value, str):
        if '"' in value or "\n" in value:
            raise ValueError(f"the dialect has no literal for the string {value!r}")
        return f'"{value}"'
    return repr(value)


def _symbol_names(symbols: Mapping | None, name: str, reserved) -> tuple[dict, dict]:
    """``(named, unnamed)``: value -> symbol for the symbols a program can bind as atoms (a
    dialect name that is not a keyword, not a name the printed program uses or ``reserved``
    holds, and not the value's own text), and for the others (``'{0,1}'``, ``'+'``: named in
    a comment)."""
    named, unnamed = {}, {}
    for value, sym in (symbols or {}).items():
        sym = str(sym)
        if sym == atom_source(value) or sym == str(value):
            continue
        ok = (_NAME.match(sym) and sym not in _OWN_NAMES and sym not in reserved
              and sym != name and not _GENERATED.match(sym))
        (named if ok else unnamed)[_key(value)] = (value, sym)
    return named, unnamed


def _key(value):
    """A dictionary key for an atom that tells ``1`` from ``True`` and ``"1"``."""
    value = value.item() if hasattr(value, "item") else value
    return (type(value).__name__ if not isinstance(value, int) or isinstance(value, bool)
            else "int", value)


def _token_valued(order: list[Node], sop: Node) -> set[int]:
    """Ids of the s-ops whose values are tokens: the input (``tokens``), what is computed from
    it by shifting (``x + 1``), choosing (a ternary) or moving (an aggregate), and, read back
    from the output (a next-token program's value is a token), every s-op whose values the
    output takes through ternaries and aggregates."""
    tok: set[int] = set()
    for n in order:
        if isinstance(n, Tokens):
            tok.add(n.id)
        elif isinstance(n, Map) and n.fn.op in ("add", "sub") and n.inner.id in tok:
            tok.add(n.id)
        elif isinstance(n, SequenceMap) and n.fn.op == "ternary":
            if any(c.id in tok for c in n.inputs[1:]):
                tok.add(n.id)
        elif isinstance(n, Aggregate) and n.values.id in tok:
            tok.add(n.id)
    out = {sop.id}
    for n in reversed(order):
        if n.id not in out:
            continue
        if isinstance(n, SequenceMap) and n.fn.op == "ternary":
            out.update(c.id for c in n.inputs[1:])
        elif isinstance(n, Aggregate):
            out.add(n.values.id)
    return tok | out


def program_to_source(sop: Node, name: str = "program", symbols: Mapping | None = None,
                      example: Sequence | None = None, reserved: Container[str] = ()) -> str:
    """Render a program as one RASP-L statement per operation (``v1 = ...;``), runnable as
    printed.

    ``aggregate`` with a ``max``/``min`` reduction or a truncated mean is written as the
    RASP-L head ``kqv(keys, queries, values, op, default, reduction)`` where its selector is a
    single select, else as ``aggregate(sel, values, default, "max")``. A program whose input is
    ``tokens_int`` / ``tokens_asis`` (the search's) first rebinds ``tokens`` to it, as the
    shipped programs do (``tokens = tokens_int;``).

    Args:
        sop: the program's output s-op.
        name: the name of the output's statement.
        symbols: program value -> the token it stands for (a task's vocabulary,
            ``dict(zip(vocab.values, vocab.tokens))``). A constant that stands for a token
            (compared with token values, chosen or aggregated into them, or the output itself)
            is written as its symbol, and each symbol used is bound as an atom in the lines
            after ``tokens = ...;`` (``yes = 4; EOS = -3;``), so the program reads in the
            task's symbols and still computes the same values; a symbol that is no dialect name
            (``'{0,1}'``, ``'+'``) stays a number, named in a comment on its statement. Offsets
            (``x + 1``) and counts stay numbers.
        example: an input of the program's task (program values, e.g. ``BOS w SEP``), written
            as the REPL command ``set example [BOS, a, c, SEP]`` before the statements: the
            REPL checks every statement on its running example (``"hello"`` by default, on
            which a program over numbers fails), ``run_source`` accepts the command.
        reserved: names the printed program must not bind (the REPL's built-ins and library
            names, which it refuses to rebind); such a symbol stays a number.

    A program whose selects are causal starts with the directive ``#!causal`` (a file the REPL
    loads, ``rasp repl FILE``, ``rasp run``, ``run_source`` then create causal selects; pasted
    into a running REPL the line acts as ``set causal on``).

    Raises:
        ValueError: a string constant the dialect cannot write (:func:`atom_source`); causal
            and bidirectional selects in one program.
    """
    names: dict[int, str] = {}
    lines: list[str] = []
    order = topological_order(sop)
    uses: dict[int, int] = {}
    for n in order:
        for c in n.children:
            uses[c.id] = uses.get(c.id, 0) + 1
    named, unnamed = _symbol_names(symbols, name, reserved)
    tokish = _token_valued(order, sop) if symbols else set()
    bound: dict = {}                  # the symbols used, bound in the program's first lines
    notes: list[str] = []             # this statement's unnamed symbols

    def const(value, is_token: bool) -> str:
        k = _key(value)
        if is_token and k in named:
            bound[k] = named[k]
            return named[k][1]
        if is_token and k in unnamed:
            notes.append(f"{atom_source(value)} = {unnamed[k][1]!r}")
        return atom_source(value)

    conv = [n.conversion for n in order if isinstance(n, Tokens)]
    rebind = max(set(conv) - {"str"}, key=conv.count) if set(conv) - {"str"} else None

    def ref(n: Node, is_token: bool = False) -> str:
        if isinstance(n, Tokens):
            return ("tokens" if n.conversion == (rebind or "str") else f"tokens_{n.conversion}")
        if isinstance(n, Indices):
            return "indices"
        if isinstance(n, Full):
            return const(n.value, is_token)
        return names[n.id]

    def tok(n: Node) -> bool:
        return n.id in tokish

    counter = itertools.count(1)
    for n in order:
        if isinstance(n, (Tokens, Indices, Full)):
            continue
        if isinstance(n, Select) and all(isinstance(p, Aggregate) and p.selector is n
                                         for p in order if n in p.children) \
                and uses.get(n.id, 0) == 1 and _single_agg(order, n):
            continue  # printed inside its kqv
        notes.clear()
        if isinstance(n, Select):
            expr = (f"select({ref(n.keys, tok(n.queries))}, {ref(n.queries, tok(n.keys))}, "
                    f"{n.op})" if n.op != "TRUE" else 'select(indices, indices, "TRUE")')
        elif isinstance(n, Map):
            f = n.fn
            if f.op == "not":
                expr = f"not {ref(n.inner)}"
            else:
                c = const(f.const, f.op in COMPARISON_OPS and tok(n.inner))
                expr = (f"{c} {OPS[f.op].symbol} {ref(n.inner)}" if f.const_side == "left"
                        else f"{ref(n.inner)} {OPS[f.op].symbol} {c}")
        elif isinstance(n, SequenceMap) and n.fn.op == "ternary":
            c, a, b = n.inputs
            expr = f"{ref(a, tok(n))} if {ref(c)} else {ref(b, tok(n))}"
        elif isinstance(n, SequenceMap):
            a, b = n.inputs[:2]
            cmp = n.fn.op in COMPARISON_OPS
            expr = f"{ref(a, cmp and tok(b))} {OPS[n.fn.op].symbol} {ref(b, cmp and tok(a))}"
        elif isinstance(n, (SelectorAnd, SelectorOr)):
            word = "and" if isinstance(n, SelectorAnd) else "or"
            expr = f"{ref(n.children[0])} {word} {ref(n.children[1])}"
        elif isinstance(n, SelectorWidth):
            expr = f"selector_width({ref(n.selector)})"
        elif isinstance(n, Aggregate):
            s = n.selector
            vals, dflt = ref(n.values, tok(n)), const(n.default, tok(n))
            if isinstance(s, Select) and s.id not in names and n.truncate == (
                    n.reduction == "mean"):
                op = s.op if s.op != "TRUE" else '"TRUE"'
                expr = (f"kqv({ref(s.keys, tok(s.queries))}, {ref(s.queries, tok(s.keys))}, "
                        f"{vals}, {op}, {dflt}, \"{n.reduction}\")")
            else:
                expr = f"aggregate({ref(s)}, {vals}, {dflt}, \"{n.reduction}\")"
        else:
            expr = n.label
        nm = name if n is sop else f"v{next(counter)}"
        names[n.id] = nm
        lines.append(f"{nm} = {expr};" + (f"  # {', '.join(dict.fromkeys(notes))}"
                                          if notes else ""))
    if sop.id not in names:
        notes.clear()
        out = ref(sop, bool(symbols))
        if isinstance(sop, Full):                   # an atom: the constant s-op is full(c)
            out = f"full({out})"
        lines.append(f"{name} = {out};" + (f"  # {', '.join(notes)}" if notes else ""))
    shown = [const(v, True) for v in example] if example is not None else None
    modes = {n.causal for n in order if isinstance(n, Select)}
    if len(modes) > 1:
        raise ValueError("the program mixes causal and bidirectional selects: no mode of the "
                         "dialect creates both, so no source text computes it")
    head = ["#!causal"] if modes == {True} else []
    head += [f"tokens = tokens_{rebind};"] if rebind else []
    order_of = {k: i for i, k in enumerate(named)}
    if bound:
        head.append(" ".join(f"{sym} = {atom_source(v)};" for k, (v, sym) in
                             sorted(bound.items(), key=lambda kv: order_of[kv[0]])))
    if shown:
        head.append(f"set example [{', '.join(shown)}]")
    return "\n".join(head + lines)


def _single_agg(order, sel) -> bool:
    parents = [p for p in order if sel in p.children]
    return len(parents) == 1 and isinstance(parents[0], Aggregate) and \
        parents[0].truncate == (parents[0].reduction == "mean")


def _ref(n: Node, depth: int = 3) -> str:
    """How an operand is shown: its name, or (unnamed) its own description, nested up to
    ``depth`` levels; deeper unnamed operands show as ``kind_id``."""
    if isinstance(n, Full):
        return repr(n.value)
    if n.name is not None or depth <= 0 or isinstance(n, (Aggregate, SelectorWidth)):
        return n.label
    text = describe_node(n, depth - 1)
    if isinstance(n, (SequenceMap, SelectorAnd, SelectorOr)) or (
            isinstance(n, Map) and n.fn.const_side is not None):
        text = f"({text})"
    return text


def describe_node(n: Node, depth: int = 3) -> str:
    """A one-line readable form of an operation, e.g. ``length - indices``,
    ``select(tokens, tokens, ==)``, ``aggregate(flip, tokens)``, ``selector_width(same)``."""
    if isinstance(n, (Tokens, Indices, Length)):
        return n.label
    if isinstance(n, Full):
        return f"full({n.value!r})"
    if isinstance(n, Map):
        return n.fn.describe(_ref(n.inner, depth))
    if isinstance(n, SequenceMap):
        return n.fn.describe(*[_ref(c, depth) for c in n.inputs])
    if isinstance(n, Select):
        return f"select({_ref(n.keys, depth)}, {_ref(n.queries, depth)}, {n.op})"
    if isinstance(n, SelectorAnd):
        return f"{_ref(n.a, depth)} and {_ref(n.b, depth)}"
    if isinstance(n, SelectorOr):
        return f"{_ref(n.a, depth)} or {_ref(n.b, depth)}"
    if isinstance(n, SelectorNot):
        return f"not {_ref(n.a, depth)}"
    if isinstance(n, Aggregate):
        extra = ""
        if n.default != 0:
            extra += f", default={n.default!r}"
        if n.reduction != "mean":
            extra += f", reduction={n.reduction}"
        return f"aggregate({_ref(n.selector, depth)}, {_ref(n.values, depth)}{extra})"
    if isinstance(n, SelectorWidth):
        return f"selector_width({_ref(n.selector, depth)})"
    return n.label
