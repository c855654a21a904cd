"""How values, s-ops and selectors are shown: the one owner of the dialect's display.

Used by the REPL (:mod:`rasp.repl`), the statement interpreter (``draw``, error messages),
the measures and the RASP-L check (descriptions of operations) and the command line
(``rasp run``). Follows the original RASP REPL (Weiss et al. 2021, tech-srl/RASP
``RASP_support/REPL.py``): an s-op's value on an example as ``[h, e, l, l, o] (strings)``,
a constant sequence as ``[0]*5 (ints)``, floats rounded to 3 digits, booleans as ``T``/``F``;
a selector as its ``[query, key]`` matrix of 0/1.

Public API: :func:`format_sop_value`, :func:`format_selector_value`, :func:`format_atom`,
:func:`format_example`, :func:`format_function`, :func:`format_result`, :func:`short_value`,
:func:`describe_value`, :func:`describe_node`, :func:`draw_text`, :func:`indent`.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .interpreter import Evaluator, evaluate
from .ir import (Aggregate, Full, Indices, Length, Map, Node, RASPError, RASPTypeError, Select,
                 Selector, SelectorAnd, SelectorNot, SelectorOr, SelectorWidth, SequenceMap,
                 SOp, Tokens, topological_order)
from .ops import value_type
from .values import Builtin, RASPFunction, SelOp, kind_of

__all__ = ["format_sop_value", "format_selector_value", "format_atom", "format_example",
           "format_function", "format_result", "example_value", "short_value",
           "describe_value", "describe_node", "draw_text", "indent"]


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------

def format_atom(v: Any) -> str:
    """An atom as written in the dialect: ``"abc"``, ``3``, ``2.5``, ``True``."""
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, (bool, np.bool_)):
        return "True" if v else "False"
    if isinstance(v, np.generic):
        return str(v.item())
    return str(v)


def format_example(ex: Any) -> str:
    """A running example: ``"hello"`` or ``[1, 2, 3]``."""
    if isinstance(ex, str):
        return f'"{ex}"'
    return "[" + ", ".join(format_atom(x) for x in ex) + "]"


def short_value(v: Any, cap: int | None = 30, tagged: bool = False) -> str:
    """A value in one short line (for messages and for lists / dicts in the REPL): atoms as
    written, an IR node by its label (``tagged``: ``s-op NAME`` / ``selector NAME``,
    ``function NAME``), lists and dicts element by element; cut to ``cap`` characters."""
    if isinstance(v, Node):
        s = (("s-op " if isinstance(v, SOp) else "selector ") if tagged else "") + v.label
    elif isinstance(v, (RASPFunction, Builtin)):
        s = f"function {v.name}" if tagged else v.name
    elif isinstance(v, SelOp):
        s = str(v)
    elif isinstance(v, list):
        s = "[" + ", ".join(short_value(x, cap, tagged) for x in v) + "]"
    elif isinstance(v, dict):
        s = "{" + ", ".join(f"{short_value(k, cap, tagged)}: {short_value(x, cap, tagged)}"
                            for k, x in v.items()) + "}"
    else:
        s = format_atom(v)
    return s if cap is None or len(s) <= cap else s[: cap - 3] + "..."


def describe_value(v: Any) -> str:
    """What a value is, for error messages: ``an s-op``, ``a selector``, ``a function``,
    ``a list``, ``a dict``, ``nothing``, ``the comparison ==``, or its type and value
    (``int 3``, ``str "a"``)."""
    k = kind_of(v)
    if k in ("sop", "selector", "function", "list", "dict"):
        return {"sop": "an s-op", "selector": "a selector", "function": "a function",
                "list": "a list", "dict": "a dict"}[k]
    if k == "none":
        return "nothing"
    if isinstance(v, SelOp):
        return f"the comparison {str(v)}"
    return f"{type(v).__name__} {short_value(v)}"


def format_function(fn: RASPFunction | Builtin) -> str:
    """``function: f(a, b=0)`` for a user function, ``built-in function: select``."""
    if isinstance(fn, Builtin):
        return f"built-in function: {fn.name}"
    ps = [p + (f"={short_value(fn.defaults[p])}" if p in fn.defaults else "")
          for p in fn.params]
    return f"function: {fn.name}({', '.join(ps)})"


def indent(text: str, n: int) -> str:
    """Every line of ``text`` indented by ``n`` spaces."""
    return "\n".join(" " * n + line for line in text.split("\n"))


# --------------------------------------------------------------------------------------------
# s-op and selector values
# --------------------------------------------------------------------------------------------

def _small_str(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "T" if v else "F"
    if isinstance(v, (float, np.floating)):
        r = round(float(v), 3)
        return str(r)
    return str(v)


def format_sop_value(values: Sequence | np.ndarray) -> str:
    """Format one sequence's values as the original REPL: ``[h, e, l, l, o] (strings)``;
    a constant sequence as ``[0]*5 (ints)``; floats rounded to 3 digits, bools as T/F."""
    arr = np.asarray(values)
    items = arr.tolist()
    tname = value_type(arr) + "s"
    if len(items) > 1 and len(set(items)) == 1:
        body = f"[{_small_str(items[0])}]*{len(items)}"
    else:
        body = "[" + ", ".join(_small_str(x) for x in items) + "]"
    return f"{body} ({tname})"


def format_selector_value(matrix: np.ndarray, keys: Sequence | None = None,
                          queries: Sequence | None = None) -> str:
    """Format a ``[query, key]`` selector matrix as rows of 0/1 (query labels on the left, key
    labels on top), like the original REPL's selector display."""
    m = np.asarray(matrix).astype(int)
    n_q, n_k = m.shape
    klabels = [str(k) for k in (keys if keys is not None else range(n_k))]
    qlabels = [str(q) for q in (queries if queries is not None else range(n_q))]
    w = max([len(s) for s in qlabels] + [1])
    cw = max([len(s) for s in klabels] + [1])
    lines = [" " * (w + 3) + " ".join(s.rjust(cw) for s in klabels)]
    for q in range(n_q):
        lines.append(f"{qlabels[q].rjust(w)} |" + " " + " ".join(str(x).rjust(cw) for x in m[q]))
    return "\n".join(lines)


def example_value(node: SOp | Selector, example: Any) -> np.ndarray:
    """An s-op's values ``[seq]`` (or a selector's ``[query, key]`` matrix) on one example (a
    string or a list of atoms). Each select keeps its own causal flag."""
    return evaluate(node, [list(example)], causal=None)[0]


def format_result(name: str | None, value: Any, example: Any, kind: str | None = None) -> str:
    """Text shown for a statement's value, as the original REPL prints it:
    ``s-op: NAME`` + ``Example: NAME("hello") = [...] (type)``, ``selector: NAME`` + the
    matrix, ``value: NAME = 3``, ``list: NAME = [...]``, ``dict: ...``, ``function: ...``;
    empty for a statement without a value. An example that fails is reported in the text."""
    kind = kind or kind_of(value)
    if kind == "none" or value is None and kind != "atom":
        return ""
    label = name or (value.label if isinstance(value, Node) else None) or "out"
    if kind == "sop":
        head = f"     s-op: {label}"
        try:
            vals = example_value(value, example)
        except RASPError as e:
            return head + f"\n  !! statement executed, but the example fails: {e}"
        return (head + f"\n         Example: {label}({format_example(example)}) = "
                + format_sop_value(vals))
    if kind == "selector":
        head = f"     selector: {label}"
        try:
            m = example_value(value, example)
        except RASPError as e:
            return head + f"\n  !! statement executed, but the example fails: {e}"
        toks = [str(t) for t in example]
        matrix = format_selector_value(m, keys=toks, queries=toks)
        return head + "\n         Example:\n" + indent(matrix, 13)
    if kind == "function":
        return f"     {format_function(value)}"
    if kind == "list":
        return f"     list: {label} = [" + ", ".join(short_value(v, None, True)
                                                     for v in value) + "]"
    if kind == "dict":
        return (f"     dict: {label} = {{" + ", ".join(
            f"{short_value(k, None, True)}: {short_value(v, None, True)}"
            for k, v in value.items()) + "}")
    return f"     value: {label} = {format_atom(value)}"


# --------------------------------------------------------------------------------------------
# Operations
# --------------------------------------------------------------------------------------------

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


def draw_text(node: Node, example: Any) -> str:
    """A text computation-flow summary of ``node`` on one input ``example`` (a string or list):
    every operation in dependency order with its value on the example, then the number of
    attention and MLP operations. Raises RASPError when the program fails on the example."""
    if isinstance(example, str):
        seq = list(example)
    elif isinstance(example, list):
        seq = example
    else:
        raise RASPTypeError(f"draw input must be a string or a list, got "
                            f"{describe_value(example)}")
    ev = Evaluator([seq])
    ev(node)
    order = topological_order(node)
    lines = [f"computation flow of {node.label} on {short_value(example, 60)}:"]
    width = max(len(n.label) for n in order)
    heads = mlps = 0
    for n in order:
        if isinstance(n, (Aggregate, SelectorWidth, Length)):
            heads += 1          # length costs one attention op, as in the original library
        elif isinstance(n, (Map, SequenceMap)):
            mlps += 1
        val = ev.values[n.id][0]
        if isinstance(n, Selector):
            shown = "selector: " + " ".join("".join("1" if x else "0" for x in row) for row in val)
        else:
            shown = format_sop_value(val)
        causal = " [causal]" if isinstance(n, Select) and n.causal else ""
        lines.append(f"  {n.label.ljust(width)} = {describe_node(n, 0)}{causal}")
        lines.append(f"  {' ' * width}   -> {shown}")
    lines.append(f"  ({heads} attention ops: aggregates, selector widths, length; "
                 f"{mlps} MLP ops: maps and sequence maps)")
    return "\n".join(lines)
