"""How values, s-ops and selectors are shown: the one owner of the dialect's display.

Used by the REPL (:mod:`rasp.repl`), the statement interpreter (``draw``, error messages),
the measures and the RASP-L check (descriptions of operations) and the command line
(``rasp run``). The REPL's display is the original RASP REPL's (Weiss et al. 2021,
tech-srl/RASP ``RASP_support/REPL.py`` and ``Support.py``) character for character
(:func:`format_named`, :func:`format_application`, :func:`format_show_example`,
:func:`format_error`, with the original's per-position int/float typing of values,
:func:`rasp.repl.original.original_values`): an s-op's value on an example as ``[h, e, l, l, o] (strings)``, two
or more equal values as ``[0]*5 (ints)``, floats rounded to 3 digits, booleans as ``T``/``F``;
a selector as its ``[query, key]`` matrix, ``1`` where selected and a blank where not.

Public API: :class:`DisplaySettings`, :func:`format_named`, :func:`format_application`,
:func:`format_show_example`, :func:`format_error`,
:func:`sequence_str`, :func:`format_sop_value`, :func:`format_selector_value`,
:func:`format_atom`, :func:`format_example`, :func:`format_function`, :func:`short_value`,
:func:`describe_value`, :func:`draw_text`, :func:`indent`,
:func:`html_table` (the notebook display of compiled models and predictions).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence
from html import escape

import numpy as np

from ..interpreter import Evaluator, evaluate
from .original import original_values
from .original import plain as _plain
from ..ir import (Aggregate, Full, Indices, Length, Map, Node, RASPError, RASPTypeError, Select,
                 Selector, SelectorAnd, SelectorNot, SelectorOr, SelectorWidth, SequenceMap,
                 SOp, Tokens, topological_order)
from ..ops import value_type
from ..source import describe_node
from ..values import Builtin, RASPFunction, SelOp, kind_of

__all__ = ["format_sop_value", "format_selector_value", "format_atom", "format_example",
           "format_function", "example_value", "short_value", "describe_value",
           "draw_text", "indent", "DisplaySettings", "formatstr", "small_str",
           "type_name", "sequence_str", "original_name", "strdesc", "function_origin", "format_named",
           "format_application", "format_show_example", "format_error", "written_size",
           "html_table"]


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


# --------------------------------------------------------------------------------------------
# The REPL's display, as the original REPL prints (tech-srl/RASP RASP_support/REPL.py:
# print_named_val, print_just_val, print_example, print_seq, print_select; Support.py:
# Sequence.__str__, small_str, lazy_type_check), character for character
# --------------------------------------------------------------------------------------------

@dataclass
class DisplaySettings:
    """What the REPL shows, as switched by the original REPL's commands.

    ``sop_example`` / ``selector_example``: the running examples on which new s-ops /
    selectors are shown (``set s-op example``, ``set selector example``; ``set example`` sets
    both); ``show_sop_examples`` / ``show_selector_examples``: whether they are shown at all
    (``s-op examples on|off``, ``selector examples on|off``, ``examples on|off``);
    ``full_seq_display``: an s-op's value as two aligned rows, input over output
    (``full seq display on|off``)."""

    sop_example: Any = "hello"
    selector_example: Any = "hello"
    show_sop_examples: bool = True
    show_selector_examples: bool = True
    full_seq_display: bool = False


def formatstr(v: Any) -> str:
    """The original's ``formatstr``: a string in double quotes, anything else as Python's
    ``str`` (so a list example prints as ``[1, 2, 3]`` or ``['a', 'b']``)."""
    v = _plain(v)
    if isinstance(v, str):
        return '"' + v + '"'
    return str(v)


def small_str(v: Any) -> str:
    """One s-op value as the original shows it: floats rounded to 3 digits, booleans T/F."""
    v = _plain(v)
    if isinstance(v, bool):
        return "T" if v else "F"
    if isinstance(v, float):
        return str(round(v, 3))
    return str(v)


def type_name(values: Sequence) -> str:
    """The original's ``lazy_type_check``: ``string``, ``bool``, ``int`` or ``float`` (ints
    and floats together are floats)."""
    values = [_plain(v) for v in values]
    for t, name in ((str, "string"), (bool, "bool"), (int, "int"), (float, "float")):
        if all(isinstance(v, t) for v in values):
            return name
    if all(isinstance(v, (int, float)) for v in values):
        return "float"
    return "mismatched"


def sequence_str(values: Sequence) -> str:
    """An s-op's values as the original's ``Sequence.__str__``: ``[h, e, l, l, o] (strings)``;
    two or more identical values as ``[5]*5 (ints)``."""
    values = [_plain(v) for v in values]
    if len(values) > 1 and len(set(values)) == 1:
        body = "[" + small_str(values[0]) + "]*" + str(len(values))
    else:
        body = "[" + ", ".join(small_str(v) for v in values) + "]"
    return body + " (" + type_name(values) + "s)"


def _verbose_seq(example: Any, values: list, still_on_prev_line: bool = False,
                 extra_pref: str = "", lastpref_if_shortprint: str = "") -> str:
    """The original's ``print_seq`` (``full seq display on``): input and output rows, or one
    ``[v]*n`` line for identical values."""
    if len(set(values)) == 1:
        return ((extra_pref if not still_on_prev_line else "") + " " + lastpref_if_shortprint
                + " " + sequence_str(values) + " [skipped full display: identical values]")
    lines = [""] if still_on_prev_line else []

    def clean_bools(seq):
        if seq and isinstance(seq[0], bool):
            t = "T" if seq.count(True) <= seq.count(False) else ""
            f = "F" if seq.count(False) <= seq.count(True) else ""
            return [t if v else f for v in seq]
        return seq

    ex = clean_bools(_plain(list(example)))
    seqtype = type_name(values)
    out = [str(v) for v in clean_bools(list(values))]
    ex = [str(v) for v in ex]
    width = max(len(v) for v in ex + out)

    def neat(row):
        return " ".join(" " * (width - len(v)) + v for v in row)
    lines.append(f"{extra_pref} \t\tinput:   {neat(ex)} \t ({type_name(ex)}s)")
    lines.append(f"{extra_pref} \t\toutput:  {neat(out)} \t ({seqtype}s)")
    return "\n".join(lines)


def _select_matrix(example: Any, matrix: Any, extra_pref: str = "") -> str:
    """The original's ``print_select``: the example's tokens over the columns (keys), one row
    per query: ``1`` where the query selects the key, blank where not."""
    ex = _plain(list(example))
    lines = [f"{extra_pref} \t\t\t     " + " ".join(str(v) for v in ex)]
    for v, row in zip(ex, np.asarray(matrix)):
        lines.append(f"{extra_pref} \t\t\t {v} | " + " ".join("1" if x else " " for x in row))
    return "\n".join(lines)


def strdesc(o: Any, desc_cap: int | None = None) -> str:
    """The original's ``strdesc`` (how a call's arguments appear in the name of its result,
    ``f(tokens , "l")``): an s-op or selector by its name, a string quoted, a list or dict
    element by element, or ``(list)`` / ``(dict)`` when longer than ``desc_cap``."""
    if isinstance(o, Node):
        return o.label
    if isinstance(o, (list, dict)):
        if isinstance(o, list):
            res = "[" + ", ".join(strdesc(v) for v in o) + "]"
        else:
            res = "{" + ", ".join(strdesc(k) + ": " + strdesc(v) for k, v in o.items()) + "}"
        if desc_cap is not None and len(res) > desc_cap:
            return "(list)" if isinstance(o, list) else "(dict)"
        return res
    if isinstance(o, (RASPFunction, Builtin)):
        return o.name
    return formatstr(o)


#: Built-ins that the original defines in its library (shown as its library functions, with
#: their parameters there).
LIBRARY_BUILTINS = {"selector_width": ("sel",)}


def original_name(node: Node) -> str:
    """The name the original shows for an s-op or selector shown without one (an element of
    a list or dict): its own name, else ``plain select`` (a select), ``sel`` (another
    selector) or ``s-op``; names longer than 30 characters are shortened to the latter two."""
    name = node.name
    if name is None:
        return "plain select" if isinstance(node, Select) else \
            "sel" if isinstance(node, Selector) else "s-op"
    if len(name) > 30:
        return "sel" if isinstance(node, Selector) else "s-op"
    return name


def function_origin(fn: RASPFunction) -> str:
    """Where a function was defined, as the original names it: ``console`` (the REPL),
    the name given to ``load`` for a loaded file, ``RASP_support/rasplib`` for the library,
    with a ``'`` per enclosing function."""
    return fn.closure.name if fn.closure is not None else "console"


def format_named(name: str | None, value: Any, settings: DisplaySettings, ntabs: int = 0,
                 extra_first_pref: str = "") -> str:
    """A named value as the original's ``print_named_val``: ``s-op: NAME`` and its value on
    the s-op example, ``selector: NAME`` and its matrix on the selector example,
    ``console function: f(a, b)``, ``list: NAME = [...]`` / ``dict: NAME = {...}`` (element by
    element when they hold lists, dicts, s-ops or selectors), ``value: NAME =  3``.

    Raises RASPError when an s-op or selector fails on its example."""
    pref = "\t" * ntabs
    if name is None and isinstance(value, Node):
        name = original_name(value)
    if isinstance(value, SOp):
        lines = [f"{pref} {extra_first_pref}    s-op: {name}"]
        if settings.show_sop_examples:
            ex = settings.sop_example
            vals = original_values(value, ex)
            desc = f"{name}({formatstr(ex)}) ="
            if settings.full_seq_display:
                lines.append(f"{pref} \t Example:" + _verbose_seq(
                    settings.selector_example, vals, True, pref, desc))
            else:
                lines.append(f"{pref} \t Example: {desc} {sequence_str(vals)}")
        return "\n".join(lines)
    if isinstance(value, Selector):
        lines = [f"{pref} {extra_first_pref}    selector: {name}"]
        if settings.show_selector_examples:
            ex = settings.selector_example
            lines.append(f"{pref} \t Example:")
            lines.append(_select_matrix(ex, example_value(value, ex), pref))
        return "\n".join(lines)
    if isinstance(value, RASPFunction):
        return (f"{pref} {extra_first_pref}    {function_origin(value)} function: "
                f"{value.name}({', '.join(value.params)})")
    if isinstance(value, Builtin):
        if value.name in LIBRARY_BUILTINS:   # a function of the original's library
            return (f"{pref} {extra_first_pref}    RASP_support/rasplib function: "
                    f"{value.name}({', '.join(LIBRARY_BUILTINS[value.name])})")
        return f"{pref} {extra_first_pref}    built-in function: {value.name}"
    if isinstance(value, (list, dict)):
        is_list = isinstance(value, list)
        named = ("   list: " if is_list else "   dict: ") + (
            (name + " = ") if name is not None else "")
        head = f"{pref} {extra_first_pref} {named}"
        items = value if is_list else list(value.values())
        if not any(isinstance(v, (list, dict, Node)) for v in items):
            return head + _python_str(value)
        lines = [head + f"{pref} " + ("[" if is_list else "{")]
        if is_list:
            for v in value:
                lines.append(format_named(None, v, settings, ntabs + 2))
        else:
            for k, v in value.items():
                lines.append(format_named(None, v, settings, ntabs + 3, formatstr(k) + " : "))
        lines.append(pref + " " * (len(named) + 2) + ("]" if is_list else "}"))
        return "\n".join(lines)
    namestr = (name + " = ") if name is not None else ""
    return f"{pref}    value: {namestr} {formatstr(value)}"


def _python_str(v: Any) -> str:
    """Python's ``str`` of a list or dict of atoms (functions inside by their description)."""
    v = _plain(v)
    if isinstance(v, list):
        return "[" + ", ".join(_python_item(x) for x in v) + "]"
    return "{" + ", ".join(f"{_python_item(k)}: {_python_item(x)}" for k, x in v.items()) + "}"


def _python_item(x: Any) -> str:
    if isinstance(x, (RASPFunction, Builtin)):
        return repr(x)
    return repr(x)


def format_application(value: list, node: Node, inp: Any, settings: DisplaySettings) -> str:
    """The value of an s-op or selector applied to an input (``sop("abc");``), as the
    original's ``print_just_val``: ``\\t =  [a, b, c] (strings)`` or ``\\t = `` and the
    selector's matrix over the input."""
    if isinstance(node, Selector):
        return "\t = \n" + _select_matrix(inp, value)
    try:
        value = original_values(node, inp)     # the original's int / float / bool typing
    except RASPError:
        pass
    if settings.full_seq_display:
        return "\t = " + _verbose_seq(inp, value, still_on_prev_line=True)
    return "\t =  " + sequence_str(value)


def format_show_example(subset: str, settings: DisplaySettings) -> str:
    """``show example`` as the original's ``print_example``."""
    lines = []
    if subset in ("both", "s-op"):
        lines.append(f"\ts-op example: {formatstr(settings.sop_example)}")
    if subset in ("both", "selector"):
        lines.append(f"\tselector example: {formatstr(settings.selector_example)}")
    return "\n".join(lines)


def format_error(message: str) -> str:
    """An error as the original REPL frames a rejected input: ``\\t\\t!!ignoring input:`` and
    the message, each of its lines after a tab and a space."""
    return "\t\t!!ignoring input:\n\t " + str(message).replace("\n", "\n\t ")


# --------------------------------------------------------------------------------------------
# Operations
# --------------------------------------------------------------------------------------------

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


def written_size(value: Any, cap: int) -> int:
    """About how many characters ``value`` (an atom: string, number, list, dict, or a NumPy
    array of an s-op's values) takes written out as Python or JSON text, counted only until
    it passes ``cap`` (then some number above ``cap`` is returned). A shared element counts
    every time it appears, as it is written: ``[s for i in range(5000)]`` with ``s`` a
    million characters holds 40 KB but writes 5 GB. Every element adds at least one
    character, so the walk costs no more than writing the text would (iterative: any
    nesting depth)."""
    total, stack = 0, [value]
    while stack and total <= cap:
        v = stack.pop()
        if isinstance(v, np.ndarray):
            total += v.size * max(2, v.dtype.itemsize) + 2
        elif isinstance(v, str):
            total += len(v) + 2
        elif isinstance(v, bool) or v is None:
            total += 5
        elif isinstance(v, int):
            total += v.bit_length() * 30103 // 100000 + 2
        elif isinstance(v, (list, tuple)):
            total += 2 + 2 * len(v)
            stack.extend(v)
        elif isinstance(v, dict):
            total += 2 + 4 * len(v)
            stack.extend(v.keys())
            stack.extend(v.values())
        else:
            total += 24
    return total


# --------------------------------------------------------------------------------------------
# Notebooks
# --------------------------------------------------------------------------------------------

def html_table(rows: Sequence[Sequence[Any]], header: Sequence[str] | None = None,
               caption: str | None = None, pre: str | None = None) -> str:
    """A small HTML table for a notebook's ``_repr_html_``.

    Args:
        rows: one sequence of cells per row (any values; shown with ``str`` and escaped).
        header: the column names (a ``<thead>`` row), or None.
        caption: the table's caption (escaped), or None.
        pre: text shown after the table in a ``<pre>`` block (escaped), e.g. a program's
            source, or None.

    Returns:
        well-formed HTML: one ``<div>`` holding the ``<table>`` (and the ``<pre>``); every
        cell's text is escaped, so a value such as ``"<b>"`` shows as written.
    """
    out = ['<div class="rasp-lab"><table>']
    if caption is not None:
        out.append(f"<caption>{escape(str(caption))}</caption>")
    if header is not None:
        out.append("<thead><tr>" + "".join(f"<th>{escape(str(h))}</th>" for h in header)
                   + "</tr></thead>")
    out.append("<tbody>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>")
    out.append("</tbody></table>")
    if pre is not None:
        out.append(f"<pre>{escape(pre)}</pre>")
    out.append("</div>")
    return "".join(out)
