"""The statement interpreter of the RASP dialect: parse trees -> values and IR.

A program is a sequence of statements (see ``docs/language.md``). Running it binds names in an
:class:`Environment`; operations on atoms (ints, floats, strings, bools) are computed directly,
operations involving s-ops or selectors build IR nodes through the Python API of
:mod:`rasp.ir` (``Map(Elementwise(...))``, ``SequenceMap``, ``Select``, ``Aggregate``, ...).
Every IR node created gets its source :class:`~rasp.ir.Span` and, when assigned, its name.

Semantics follow the original RASP REPL (Weiss et al. 2021, tech-srl/RASP ``Evaluator.py``):

* ``def f(a, b) { ...; return e1, e2; }`` makes a closure; names are resolved when the
  function runs (late binding), in a fresh scope whose parent is the defining scope.
* ``for x in list_or_dict { ... }`` binds in the current scope.
* ``load "file";`` runs ``file.rasp`` (only ``.rasp`` files) in a fresh scope whose parent is
  the base environment; each binding not starting with ``_`` (and not ``out``) reaches the
  loading scope as it is made (the original's ``stealing_env``). The file is searched next to
  the loading file, then in the working directory, then in ``rasp/stdlib``. With a
  :attr:`Session.reporter` (the REPL) a file runs as in the original REPL: failing statements
  are reported and the file goes on.
* the original REPL's commands (``set example EXPR``, ``show example``, ``examples on|off``,
  ``full seq display on|off``, ``exit``) stand wherever a statement may at the top of a source;
  sources are read in units as the original reads them (:mod:`rasp.repl.reader`).
* a bare expression statement stores its value as ``out``.
* a failed or interrupted statement leaves the environment unchanged (bindings are rolled back).
* **causal (RASP-L) mode**: a file whose leading comment lines contain ``#!causal`` (or
  ``#pragma causal``), a :class:`Session` with ``causal=True`` or ``run_source(...,
  causal=True)``: every ``select`` created is causal (ANDed with key_index <= query_index).
  A function defined in a causal file always creates causal selects when called.

The base environment holds the built-ins (``tokens`` ... ``length``, ``select``,
``aggregate``, ``selector_width``, ``kqv``, ``round``, ``indicator``, ``range``, ``zip``,
``len``, ``numerical``, ``categorical``, ``full``, ``draw``, ``True``, ``False``) and the original
RASP library ``rasplib`` (``count``, ``sort``, ...), like the original REPL. User definitions
override library names. The RASP-L library is loaded with ``load "rasp_l";``.

Values (environments, functions, statement results) are :mod:`rasp.values`; the built-in
functions and operators :mod:`rasp.repl.builtins`; how values are shown :mod:`rasp.repl.display`.

Public API: :func:`apply_to_input`, :data:`STDLIB_DIR`; the session and the functions that run
whole programs (``Session``, ``run_source``, ``run_file``, ``load_library``) are
:mod:`rasp.repl.session`.
"""

from __future__ import annotations

import os
import re
from typing import Any
import stat

import lark
import numpy as np

from .. import ir, limits, ops
from .builtins import BUILTIN_NODE_IDS, BUILTINS, RESERVED, binop, need_sop_or_atom, unop
from .display import describe_value, short_value, strdesc
from ..interpreter import evaluate_one
from ..ir import (Aggregate, Elementwise, Full, Map, Node, RASPError, RASPNameError,
                 RASPResourceError, RASPTypeError, RASPValueError, Select, Selector, SequenceMap,
                 SOp, Span, causal_mode)
from ..parser import RASPSyntaxError, directives, parse
from .reader import Chunk, LineReader
from ..stdlib import STDLIB_DIR, defined_in
from ..values import Builtin, Environment, RASPFunction, SelOp, StatementResult, is_atom, kind_of

__all__ = ["apply_to_input", "Applied", "ExitRequest", "STDLIB_DIR", "LIBRARY_ORIGIN"]


#: The scope name of the base library's functions, as the original REPL shows them
#: (``RASP_support/rasplib function: count(seq, atom)``).
LIBRARY_ORIGIN = "RASP_support/rasplib"

#: Names the original REPL reserves besides the library's and ours (``Environment.py``).
ORIGINAL_RESERVED = frozenset({"get"})

#: Source lines that may be REPL commands (only then is a source read unit by unit).
_COMMAND_LINE = re.compile(r"^[ \t]*(set|show|full|examples|s-op|selector|exit|quit)\b", re.M)


class ExitRequest(Exception):
    """The ``exit`` / ``quit`` command: stops the input it stands in (the REPL, or the rest of
    a loaded file or source text, as in the original REPL). Not an error."""


class Applied(list):
    """The value of an s-op or selector applied to an input (``sop("abc")``): a list of values
    (``[query][key]`` bools for a selector) that remembers ``node`` and ``input`` for the
    REPL's display."""

    def __init__(self, values: list, node: Node, inp: Any):
        super().__init__(values)
        self.node = node
        self.input = inp



# --------------------------------------------------------------------------------------------
# The interpreter
# --------------------------------------------------------------------------------------------

class _Ctx:
    """Per-source context: file name, text (for spans), directory (for load), causal flag."""

    def __init__(self, filename: str, text: str, causal: bool):
        self.filename = filename
        self.text = text
        self.causal = causal
        self.dir = os.path.dirname(os.path.abspath(filename)) if os.path.isfile(filename) \
            else None


def _span(ctx: _Ctx, tree) -> Span | None:
    meta = getattr(tree, "meta", None)
    if isinstance(tree, lark.Token):
        line, col = tree.line, tree.column
        return Span(ctx.filename, line, col, tree.end_line, tree.end_column, str(tree)[:80])
    if meta is None or getattr(meta, "empty", True):
        return None
    text = ctx.text[meta.start_pos:meta.end_pos]
    if len(text) > 80:
        text = text[:77] + "..."
    return Span(ctx.filename, meta.line, meta.column, meta.end_line, meta.end_column,
                " ".join(text.split()))


def _mark() -> int:
    """The largest id of an existing node: nodes created after this call have larger ids."""
    return ir.last_node_id()


def _set_spans(value: Any, span: Span | None, mark: int) -> None:
    """Give nodes created since ``mark`` (reachable without crossing older nodes) the span."""
    if span is None or not isinstance(value, Node):
        return
    stack = [value]
    while stack:
        n = stack.pop()
        if n.id <= mark or n.span is not None:
            continue
        n.span = span
        stack.extend(n.children)


class _Interp:
    def __init__(self, session):
        """``session``: the :class:`rasp.repl.session.Session` whose example, output, reporter
        and base library the statements use."""
        self.session = session
        self.depth = 0
        self.loading: list[str] = []
        self.last_draw: str | None = None
        self.iterations = 0          # loop iterations + comprehension items of this statement
        self.built = 0               # bytes of atom values this statement built (charge())
        self.library_mode = False

    def count_iteration(self) -> None:
        """Count one loop iteration or comprehension item; refuse past
        :data:`rasp.limits.MAX_ITERATIONS` per statement (nested loops over large ranges)."""
        self.iterations += 1
        if self.iterations > limits.MAX_ITERATIONS:
            raise RASPResourceError(
                f"more than {limits.MAX_ITERATIONS} loop iterations and comprehension items in "
                "one statement (rasp.limits.MAX_ITERATIONS)")

    def charge(self, value: Any, nested: bool = False) -> Any:
        """Count the memory of a new atom value (:func:`_new_bytes`) against the memory budget
        of this statement; refuse past :data:`rasp.limits.MEMORY_BUDGET_BYTES`. Every atom
        value is charged where it is made (operators, list and dict literals and
        comprehensions, built-in results), garbage included, so one statement cannot exhaust
        memory with many values that each pass :data:`rasp.limits.MAX_COLLECTION`. Returns
        ``value``."""
        self.built += _new_bytes(value, nested)
        if self.built > limits.MEMORY_BUDGET_BYTES:
            budget = limits.MEMORY_BUDGET_BYTES
            raise RASPResourceError(
                f"this statement built more than {budget / 2**20:.0f} MiB of strings, lists, "
                f"dicts and numbers, the memory budget (RASP_MEMORY_BUDGET_MB)")
        return value

    @property
    def example(self):
        return self.session.example

    def output(self, text: str) -> None:
        self.session.output(text)

    # ---- statements -----------------------------------------------------------------------
    def exec_stmt(self, t, env: Environment, ctx: _Ctx) -> list[StatementResult]:
        mark = _mark()
        span = _span(ctx, t)
        try:
            with causal_mode(True) if ctx.causal else _nullctx():
                return self._exec(t, env, ctx, mark, span)
        except RASPError as e:
            if e.span is None:
                e.span = span
            raise

    def _exec(self, t, env, ctx, mark, span) -> list[StatementResult]:
        kind = t.data
        if kind == "expr_stmt":
            expr = t.children[0]
            self.last_draw = None
            value = self.ev(expr, env, ctx)
            if self.last_draw is not None and value is None:
                text, self.last_draw = self.last_draw, None
                return [StatementResult(None, None, "none", span, text)]
            if value is None:
                return [StatementResult(None, None, "none", span)]
            if isinstance(value, Applied):
                return [StatementResult(None, value, "application", span)]
            name = "out"
            if expr.data == "var":
                name = str(expr.children[0])
            elif isinstance(value, Node) and value.id > mark and value.name is None:
                value.named("out")
            env.vars["out"] = value
            return [StatementResult(name, value, kind_of(value), span)]
        if kind == "assign":
            names = [str(n) for n in t.children[0].children]
            values = [self.ev(e, env, ctx) for e in t.children[1].children]
            if len(values) == 1 and len(names) > 1:
                v = values[0]
                if not isinstance(v, list):
                    raise RASPTypeError(f"expected {len(names)} values to unpack, got "
                                        f"{describe_value(v)}")
                values = list(v)
            if len(values) != len(names) and not (len(names) == 1):
                raise RASPTypeError(f"expected {len(names)} values, got {len(values)}")
            if len(names) == 1 and len(values) > 1:
                values = [values]
            for n in names:
                self._check_assignable(n, t, ctx)
            out = []
            for n, v in zip(names, values):
                self._bind(env, n, v, mark)
                out.append(StatementResult(n, v, kind_of(v), span))
            return out
        if kind == "funcdef":
            fname = str(t.children[0])
            self._check_assignable(fname, t, ctx)
            params, defaults = [], {}
            for ptree in (t.children[1].children if t.children[1] is not None else []):
                p = str(ptree.children[0])
                if p in RESERVED and p != "tokens":
                    raise RASPNameError(f"cannot use the reserved name '{p}' as a parameter",
                                        _span(ctx, ptree))
                if p in params:
                    raise RASPNameError(f"duplicate parameter name '{p}' in {fname}",
                                        _span(ctx, ptree))
                if ptree.children[1] is not None:
                    defaults[p] = self.ev(ptree.children[1], env, ctx)
                elif defaults:
                    raise RASPNameError(f"parameter '{p}' without a default follows one with "
                                        "a default", _span(ctx, ptree))
                params.append(p)
            fn = RASPFunction(fname, params, t.children[2].children, t.children[3], env, ctx,
                              True if ctx.causal else None, defaults)
            self._set(env, fname, fn)
            return [StatementResult(fname, fn, "function", span)]
        if kind == "forloop":
            names = [str(n) for n in t.children[0].children]
            for n in names:
                self._check_assignable(n, t, ctx)
            iterable = self.ev(t.children[1], env, ctx)
            for item in self._iterate(iterable, "for loop"):
                self.count_iteration()
                self._bind_iter(env, names, item, mark)
                for s in t.children[2].children:
                    self.exec_stmt(s, env, ctx)
            return [StatementResult(None, None, "none", span)]
        if kind == "load":
            name = str(t.children[0])[1:-1]
            imported = self.load(name, env, ctx)
            return [StatementResult(None, imported, "none", span)]
        raise AssertionError(kind)  # pragma: no cover

    def _check_assignable(self, name: str, t, ctx) -> None:
        if self.library_mode and name in BUILTINS:
            return    # a base library may define a built-in (the original's defines selector_width)
        if name in RESERVED and name != "tokens":
            raise RASPNameError(f"cannot assign to the reserved name '{name}'", _span(ctx, t))

    def _bind(self, env: Environment, name: str, value: Any, mark: int) -> None:
        if isinstance(value, Node) and value.id not in BUILTIN_NODE_IDS and (
                value.id > mark or value.name == "out"):
            value.named(name)   # a new node, or one only named `out` by a bare expression
        self._set(env, name, value)

    def _set(self, env: Environment, name: str, value: Any) -> None:
        """Bind ``name`` in ``env`` and in the scopes it exports to (a loaded file's names
        reach the loading scope binding by binding, as in the original REPL). A name of the
        RASP library cannot be bound in a session that reserves them."""
        self.session.check_library_name(name, env)
        env.vars[name] = value
        target = env.exports_to
        while target is not None and not name.startswith("_") and name != "out":
            self.session.check_library_name(name, target)
            target.vars[name] = value
            target = target.exports_to

    def _iterate(self, iterable, what):
        if isinstance(iterable, (list, dict)):
            return list(iterable)
        raise RASPTypeError(f"{what} needs a list or dict to iterate over, got "
                            f"{describe_value(iterable)}")

    def _bind_iter(self, env, names, item, mark):
        if len(names) == 1:
            self._bind(env, names[0], item, mark)
            return
        if not isinstance(item, list) or len(item) != len(names):
            raise RASPTypeError(f"cannot unpack {describe_value(item)} into {len(names)} names")
        for n, v in zip(names, item):
            self._bind(env, n, v, mark)

    # ---- load -----------------------------------------------------------------------------
    def resolve(self, name: str, ctx: _Ctx) -> str:
        """The file that ``load "name";`` runs: ``name.rasp`` (``name`` itself when it ends in
        ``.rasp``), next to the loading file, else in the working directory, else in the
        standard library. Only ``.rasp`` files are loaded, as in the original (which appends
        ``.rasp`` to the name), so ``load "/etc/passwd";`` looks for ``/etc/passwd.rasp``."""
        fname = name if name.endswith(".rasp") else name + ".rasp"
        dirs = ([ctx.dir] if ctx.dir else []) + [os.getcwd(), STDLIB_DIR]
        for d in dirs:
            p = os.path.join(d, fname)
            if os.path.isfile(p):
                return os.path.abspath(p)
        where = f"next to {ctx.filename}, " if ctx.dir else ""
        raise RASPNameError(f"could not find file: {fname} (looked {where}in the working "
                            "directory and in the standard library)")

    def load(self, name: str, env: Environment, ctx: _Ctx) -> list[str]:
        """Run ``name.rasp`` in a fresh scope whose parent is the base environment; each of its
        bindings whose name does not start with ``_`` (and is not ``out``) reaches ``env`` as
        it is made. In a session with a :attr:`Session.reporter` (the REPL) the file runs as
        in the original REPL: a failing statement is reported and the rest of the file runs,
        and the values of the names it defined are reported when it ends; otherwise the first
        error is raised. Returns the names exported."""
        path = self.resolve(name, ctx)
        if path in self.loading:
            raise RASPValueError(f"circular load of {path}")
        text = read_source(path)
        causal = ctx.causal or "causal" in directives(text)
        scope = Environment(self.session._base(causal), name=name)
        scope.exports_to = env
        self.loading.append(path)
        try:
            if self.session.reporter is None:
                self.run_units(text, path, scope, causal)
            else:
                self.run_reporting(text, path, scope, causal)
        finally:
            self.loading.pop()
        return [k for k in scope.vars if not k.startswith("_") and k != "out"]

    def units(self, text: str, filename: str, first_line: int = 1,
              quote: bool = True) -> list[Chunk]:
        """``text`` as the units the original REPL reads (commands, statements, syntax
        errors). Parsed whole when no line can be a command. ``quote=False`` (loaded files):
        syntax errors do not quote the file."""
        if first_line == 1 and not _COMMAND_LINE.search(text):
            try:
                return [Chunk("statements", text, 1, tree=_parse_cached(text, filename))]
            except RASPSyntaxError:
                pass                       # read unit by unit: report each error where it is
        reader = LineReader.from_text(text, filename, first_line)
        chunks = list(reader)
        if reader.pending:
            start = reader.lineno - reader.pending.count("\n")
            try:
                parse("\n" * (start - 1) + reader.pending, filename)
            except RASPSyntaxError as e:
                chunks.append(Chunk("error", reader.pending, start, error=e))
        if not quote:
            for c in chunks:
                if c.kind == "error":
                    c.error = _unquoted(c.error)
        return chunks

    def run_units(self, text: str, filename: str, env: Environment, causal: bool,
                  first_line: int = 1, quote: bool = False) -> list[StatementResult]:
        """Run a source strictly: its first syntax error is raised before anything runs,
        then its units run in order (``exit`` stops them); the first error is raised."""
        return self.run_chunks(self.units(text, filename, first_line, quote), filename, env,
                               causal)

    def run_chunks(self, chunks: list[Chunk], filename: str, env: Environment,
                   causal: bool) -> list[StatementResult]:
        """Run units strictly (see :meth:`run_units`)."""
        for c in chunks:
            if c.kind == "error":
                raise c.error
        results: list[StatementResult] = []
        for c in chunks:
            try:
                if c.kind == "command":
                    results.extend(self.session.run_command(c, filename, env))
                    continue
                ctx = _Ctx(filename, _padded(c), causal)
                for st in c.tree.children:
                    results.extend(self.session.run_guarded(st, env, ctx))
            except ExitRequest:
                break
            except RASPError as e:
                e.partial_results = list(results)
                raise
        return results

    def run_reporting(self, text: str, filename: str, env: Environment, causal: bool,
                      silent: bool = False) -> None:
        """Run a loaded file as the original REPL does (``REPL.loadFile``): examples off while
        it runs; a syntax error is reported at once; a failing statement is reported and
        rolled back and the file goes on; ``exit`` stops the file; at its end the session's
        pending reports (the values of the names it defined, its ``show example`` s, its
        errors) go to the reporter."""
        session = self.session
        d = session.display
        saved = (d.show_sop_examples, d.show_selector_examples)
        d.show_sop_examples = d.show_selector_examples = False
        try:
            for c in self.units(text, filename, quote=False):
                if c.kind == "error":
                    session.reporter.syntax_error(c.error)
                    continue
                if c.kind == "command":
                    try:
                        res = session.run_command(c, filename, env)
                    except ExitRequest:
                        break
                    except RASPError as e:
                        session.pending.append(("error", e))
                        continue
                    session.pending.extend(("result", r) for r in res if r.kind == "example")
                    continue
                ctx = _Ctx(filename, _padded(c), causal)
                for st in c.tree.children:
                    try:
                        res = session.run_guarded(st, env, ctx)
                    except RASPError as e:
                        session.pending.append(("error", e))
                        continue
                    session.pending.extend(("result", r) for r in res if _reported(r))
            pending, session.pending = session.pending, []
            session.reporter.dump(pending, silent)
        finally:
            d.show_sop_examples, d.show_selector_examples = saved
            if session.pending and not self.loading[:-1]:
                session.pending = []

    # ---- expressions ----------------------------------------------------------------------
    def ev(self, t, env: Environment, ctx: _Ctx) -> Any:
        mark = _mark()
        try:
            method = getattr(self, "e_" + str(t.data), None)
            if method is None:
                raise RASPError(f"cannot evaluate a {t.data} here")
            value = method(t, env, ctx)
        except RASPError as e:
            if e.span is None:
                e.span = _span(ctx, t)
            raise
        if isinstance(value, Node) and value.id > mark:
            _set_spans(value, _span(ctx, t), mark)
        return value

    def e_int(self, t, env, ctx):
        text = str(t.children[0])
        if len(text) > 4000:                   # Python's own conversion limit is 4,300 digits
            if len(text.lstrip("0")) > limits.max_int_digits():
                raise RASPResourceError(
                    f"an integer literal of {len(text)} digits is larger than the limit of "
                    f"{limits.MAX_INT_BITS} bits (rasp.limits.MAX_INT_BITS)")
            limits.allow_int_digits()
        return self.charge(int(text))

    def e_float(self, t, env, ctx):
        v = float(t.children[0])
        if not np.isfinite(v):                 # 1e999 would be inf: refused as an int is
            raise RASPResourceError(f"the float literal {str(t.children[0])[:40]} is too "
                                    f"large for a 64-bit float (largest: 1.8e308)")
        return v

    def e_string(self, t, env, ctx):
        return str(t.children[0])[1:-1]

    def e_var(self, t, env, ctx):
        name = str(t.children[0])
        try:
            return env.lookup(name)
        except KeyError:
            libs = defined_in(name)
            hint = (" (defined in the standard library: " + " or ".join(
                f'load "{lib}";' for lib in libs) + ")") if libs else ""
            raise RASPNameError(f"unknown name '{name}'{hint}", _span(ctx, t)) from None

    def e_list(self, t, env, ctx):
        if t.children[0] is None:
            return []
        return self.charge([self.ev(c, env, ctx) for c in t.children[0].children])

    def e_dict(self, t, env, ctx):
        out = {}
        if t.children[0] is None:
            return out
        for pair in t.children[0].children:
            k = self.ev(pair.children[0], env, ctx)
            if not is_atom(k):
                raise RASPTypeError(f"dict keys must be atoms, got {describe_value(k)}",
                                    _span(ctx, pair.children[0]))
            out[k] = self.ev(pair.children[1], env, ctx)
        return self.charge(out)

    def _comp(self, t, env, ctx, kind):
        it_tree = t.children[-1]
        names = [str(n) for n in t.children[-2].children]
        for n in names:
            self._check_assignable(n, t, ctx)
        iterable = self.ev(it_tree, env, ctx)
        items = self._iterate(iterable, f"{kind} comprehension")
        res_l, res_d = [], {}
        mark = _mark()
        for item in items:
            self.count_iteration()
            scope = env.child(f"{env.name}'")
            self._bind_iter(scope, names, item, mark)
            self.charge(None)                  # one slot of the list or dict (_SLOT_BYTES)
            if kind == "list":
                res_l.append(self.ev(t.children[0], scope, ctx))
            else:
                k = self.ev(t.children[0], scope, ctx)
                if not is_atom(k):
                    raise RASPTypeError(f"dict keys must be atoms, got {describe_value(k)}")
                res_d[k] = self.ev(t.children[1], scope, ctx)
        return res_l if kind == "list" else res_d

    def e_listcomp(self, t, env, ctx):
        return self._comp(t, env, ctx, "list")

    def e_dictcomp(self, t, env, ctx):
        return self._comp(t, env, ctx, "dict")

    def e_not_(self, t, env, ctx):
        return self.charge(unop("not", self.ev(t.children[0], env, ctx)))

    def e_neg(self, t, env, ctx):
        return self.charge(unop("neg", self.ev(t.children[0], env, ctx)))

    def e_pos(self, t, env, ctx):
        return self.charge(unop("pos", self.ev(t.children[0], env, ctx)))

    def e_ternary(self, t, env, ctx):
        cond = self.ev(t.children[1], env, ctx)
        if isinstance(cond, SOp):
            a = self.ev(t.children[0], env, ctx)
            b = self.ev(t.children[2], env, ctx)
            a = need_sop_or_atom(a, "the value of a ternary on an s-op")
            b = need_sop_or_atom(b, "the value of a ternary on an s-op")
            return SequenceMap(Elementwise("ternary"), (cond, a, b))
        if isinstance(cond, Selector):
            raise RASPTypeError("a ternary condition cannot be a selector")
        if isinstance(cond, (RASPFunction, Builtin)):
            raise RASPTypeError("a ternary condition cannot be a function")
        return self.ev(t.children[0] if cond else t.children[2], env, ctx)

    def e_contains(self, t, env, ctx):
        x = self.ev(t.children[0], env, ctx)
        c = self.ev(t.children[1], env, ctx)
        if isinstance(x, SOp):
            if isinstance(c, (list, dict)) or (isinstance(c, str) and not isinstance(c, SelOp)):
                if isinstance(c, (list, dict)) and not all(is_atom(v) for v in c):
                    raise RASPTypeError("'s-op in X' needs X to hold atoms only")
                return Map(Elementwise("in", container=c), x)
            raise RASPTypeError(f"'s-op in X' needs a list, dict or string X, got {describe_value(c)}")
        if is_atom(x):
            if isinstance(c, (list, dict)):
                return x in c
            if isinstance(c, str) and not isinstance(c, SelOp):
                if not isinstance(x, str):
                    raise RASPTypeError(f"'{short_value(x)} in string' needs a string")
                return x in c
            if isinstance(c, SOp):
                seen = Aggregate(Select(ir.indices, ir.indices, "TRUE"),
                                 Map(Elementwise("indicator"),
                                     Map(Elementwise("eq", const=x, const_side="right"), c)))
                return Map(Elementwise("gt", const=0, const_side="right"), seen)
            raise RASPTypeError(f"'atom in X' needs a list, dict, string or s-op X, got "
                                f"{describe_value(c)}")
        raise RASPTypeError(f"'A in X' needs A to be an s-op or an atom, got {describe_value(x)}")

    def e_index(self, t, env, ctx):
        x = self.ev(t.children[0], env, ctx)
        i = self.ev(t.children[1], env, ctx)
        if isinstance(x, (list, str)) and not isinstance(x, SelOp):
            what = "list" if isinstance(x, list) else "string"
            if isinstance(i, SOp):
                return Map(Elementwise("lookup", container=x), i)
            if not isinstance(i, int) or isinstance(i, bool):
                raise RASPTypeError(f"index into a {what} must be an int, got {describe_value(i)}")
            if i >= len(x) or -i > len(x):
                raise RASPValueError(f"index {i} out of range for a {what} of length {len(x)}")
            return x[i]
        if isinstance(x, dict):
            if isinstance(i, SOp):
                return Map(Elementwise("lookup", container=x), i)
            if not is_atom(i):
                raise RASPTypeError(f"index into a dict must be an atom, got {describe_value(i)}")
            if i not in x:
                raise RASPValueError(f"key {short_value(i)} not in the dict")
            return x[i]
        if isinstance(x, SOp):
            if not isinstance(i, int) or isinstance(i, bool):
                raise RASPTypeError(f"index into an s-op must be an int, got {describe_value(i)}")
            target = Full(i) if i >= 0 else Map(
                Elementwise("add", const=i, const_side="right"), ir.length)
            return Aggregate(Select(ir.indices, target, "=="), x)
        raise RASPTypeError(f"can only index a list, dict, string or s-op, not {describe_value(x)}")

    def e_call(self, t, env, ctx):
        fn = self.ev(t.children[0], env, ctx)
        args = []
        if t.children[1] is not None:
            for a in t.children[1].children:
                if isinstance(a, lark.Tree) and a.data == "selop":
                    args.append(SelOp(str(a.children[0])))
                else:
                    args.append(self.ev(a, env, ctx))
        if isinstance(fn, Builtin):
            return self.charge(fn.fn(self, args), nested=True)
        if isinstance(fn, RASPFunction):
            try:
                return self.call(fn, args)
            except RASPError as e:
                site = _span(ctx, t)
                if e.span is not None and site is not None and e.span != site and \
                        e.message.count("\n    called from") < 4:
                    e.message += f"\n    called from {site}: {site.text}"
                raise
        if isinstance(fn, Node):
            if len(args) != 1:
                raise RASPTypeError(f"applying {describe_value(fn)} takes one input, got {len(args)}")
            return Applied(apply_to_input(fn, args[0]), fn, args[0])
        raise RASPTypeError(f"{describe_value(fn)} is not callable")

    def call(self, fn: RASPFunction, args: list) -> Any:
        n_max = len(fn.params)
        n_min = n_max - len(fn.defaults)
        if not n_min <= len(args) <= n_max:
            want = str(n_max) if n_min == n_max else f"{n_min} to {n_max}"
            raise RASPTypeError(f"{fn.name} takes {want} argument"
                                f"{'s' if n_max != 1 else ''}, got {len(args)}")
        given = list(args)
        args = list(args) + [fn.defaults[p] for p in fn.params[len(args):]]
        for a in args:
            if isinstance(a, SelOp):
                raise RASPTypeError(f"a bare comparison {str(a)} can only be passed to select "
                                    f'or kqv; write it as a string ("{str(a)}")')
        if self.depth >= limits.MAX_CALL_DEPTH:
            raise RASPValueError(f"calls nested too deeply in {fn.name} (recursion is not "
                                 "supported in RASP)")
        mark = _mark()
        scope = Environment(fn.closure, name=f"{fn.closure.name}'")
        for p, a in zip(fn.params, args):
            scope.vars[p] = a
        ctx = fn.ctx
        self.depth += 1
        try:
            with causal_mode(True) if fn.causal else _nullctx():
                for st in fn.body:
                    self.exec_stmt(st, scope, ctx)
                rets = [self.ev(e, scope, ctx) for e in fn.returns.children]
        finally:
            self.depth -= 1
        res = rets[0] if len(rets) == 1 else rets
        if isinstance(res, Node) and res.id > mark:
            # the original's name of a call's result: `f(tokens , "l")` (given arguments)
            res.named(f"{fn.name}(" + " , ".join(strdesc(a, desc_cap=20) for a in given) + ")")
        return res


_SLOT_BYTES = 8        # one reference in a list (a dict entry is charged _DICT_ENTRY_BYTES)
_DICT_ENTRY_BYTES = 100


def _new_bytes(value: Any, nested: bool = False) -> int:
    """Memory (CPython, 64-bit) a new atom value takes itself: a string its characters, an
    integer its digits, a list or dict its slots — not the elements it refers to, which are
    charged where they were made. ``nested``: also the lists and numbers one level down
    (built-in results such as ``range`` and ``zip`` make their elements). None: one slot."""
    if value is None:
        return _SLOT_BYTES
    if isinstance(value, str):
        return 49 + len(value) if not isinstance(value, SelOp) else 0
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return 28 + value.bit_length() // 8
    if isinstance(value, float):
        return 24
    if isinstance(value, list):
        inner = sum(_new_bytes(v) for v in value if not isinstance(v, str)) if nested else 0
        return 56 + _SLOT_BYTES * len(value) + inner
    if isinstance(value, dict):
        return 64 + _DICT_ENTRY_BYTES * len(value)
    return 0


def _binary_method(op: str):
    def method(self, t, env, ctx):
        a = self.ev(t.children[0], env, ctx)
        b = self.ev(t.children[1], env, ctx)
        return self.charge(binop(op, a, b))
    method.__name__ = f"e_{op}"
    return method


# e_add, e_sub, ..., e_and_, e_or_ (the grammar's aliases for binary operators)
for _op in ops.BINARY_OPS:
    setattr(_Interp, f"e_{_op}_" if _op in ("and", "or") else f"e_{_op}", _binary_method(_op))


class _nullctx:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def apply_to_input(node: Node, inp: Any) -> list:
    """Evaluate an s-op (or selector) on one input (a string of characters or a list of atoms),
    as the original REPL's ``sop("hello")``: a list of values (s-op) or a ``[query][key]`` list
    of bools (selector)."""
    if not ((isinstance(inp, str) and not isinstance(inp, SelOp)) or (
            isinstance(inp, list) and all(is_atom(v) for v in inp))):
        raise RASPTypeError(f"an s-op applies to a string or a list of atoms, got {describe_value(inp)}")
    return evaluate_one(node, inp)


# --------------------------------------------------------------------------------------------
# Sources, caching, base environments
# --------------------------------------------------------------------------------------------

#: virtual file systems a program is never read from (their "files" are process and device
#: state: /proc/self/environ would echo the environment into a syntax error)
_VIRTUAL_ROOTS = ("/proc/", "/sys/", "/dev/")


def _read_bytes(path: str) -> bytes:
    """The bytes of a program file: a regular file (opened with ``O_NONBLOCK``, so a named pipe
    never blocks) of at most :data:`rasp.limits.MAX_SOURCE_BYTES`, never from ``/proc``,
    ``/sys`` or ``/dev``. The one reader of ``.rasp`` files (``load``, ``rasp run``, ``rasp
    repl FILE``)."""
    real = os.path.realpath(path)
    if real.startswith(_VIRTUAL_ROOTS):
        raise RASPValueError(f"cannot read {path}: a program is read from a regular file, not "
                             f"from {real.split('/')[1]}/")
    cap = limits.MAX_SOURCE_BYTES
    too_big = RASPValueError(f"cannot read {path}: more than the {cap:,} bytes of a program "
                             f"(rasp.limits.MAX_SOURCE_BYTES)")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise RASPValueError(f"cannot read {path}: not a regular file")
            if st.st_size > cap:
                raise too_big
            data = f.read(cap + 1)
    except FileNotFoundError:
        raise RASPNameError(f"no such file: {path}") from None
    except OSError as e:
        raise RASPValueError(f"cannot read {path}: {e.strerror or e}") from None
    if len(data) > cap:
        raise too_big
    return data


def _read(path: str) -> str:
    try:
        return _read_bytes(path).decode("utf-8")
    except UnicodeDecodeError as e:
        raise RASPValueError(f"cannot read {path}: {e}") from None


_PARSE_CACHE: dict[tuple[str, str], lark.Tree] = {}


def _parse_cached(text: str, filename: str) -> lark.Tree:
    key = (filename, text)
    tree = _PARSE_CACHE.get(key)
    if tree is None:
        tree = parse(text, filename)
        if len(_PARSE_CACHE) > 64:
            _PARSE_CACHE.clear()
        _PARSE_CACHE[key] = tree
    return tree


def read_source(path: str) -> str:
    """The text of a ``.rasp`` file to load. A file that is not text (NUL bytes, not UTF-8)
    is refused with a message that quotes none of it."""
    data = _read_bytes(path)
    if b"\0" in data:
        raise RASPValueError(f"{path} is not RASP source (binary content); nothing loaded")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise RASPValueError(f"{path} is not RASP source (not UTF-8 text); nothing loaded") \
            from None


def _unquoted(err: RASPSyntaxError) -> RASPSyntaxError:
    """A syntax error of a loaded file without the file's text: position and what the
    grammar expected only (an error must not print a file that may not be RASP source)."""
    span = err.span
    expected = sorted(err.expected)
    msg = "syntax error" + ("; expected " + ", ".join(expected[:10]) if expected else "")
    if span is not None:
        span = Span(span.file, span.line, span.column)
    out = RASPSyntaxError(msg, span, err.expected, err.at_end)
    return out


def _padded(chunk: Chunk) -> str:
    """A unit's text at its place in the source (its tree's positions index this text)."""
    return "\n" * (chunk.line - 1) + chunk.text


def _reported(r: StatementResult) -> bool:
    """Whether a loaded file's statement result is shown when the file ends (the original's
    ``assigned_to_top``: a named value not starting with ``_`` and not ``out``)."""
    return r.name is not None and not r.name.startswith("_") and r.name != "out" and \
        r.kind not in ("none", "application")


def _nodes(value: Any):
    """The s-ops and selectors in a value (lists and dicts searched)."""
    if isinstance(value, Node):
        yield value
    elif isinstance(value, list) and not isinstance(value, Applied):
        for v in value:
            yield from _nodes(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _nodes(v)
