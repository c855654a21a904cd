"""The REPL's stateful session and the entry points that run whole programs.

:class:`Session` holds a console environment over the base environment (built-ins plus the
original RASP library ``rasplib``), the running examples and the display settings; each
statement runs through the statement interpreter (:mod:`rasp.repl.runtime`) and a failed or
interrupted statement rolls back. :func:`run_source`, :func:`run_file` and
:func:`load_library` run a program in a fresh session and return its environment.

Public API: :class:`Session`, :func:`run_source`, :func:`run_file`, :func:`load_library`,
:func:`base_environment`.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from .. import ir
from .builtins import BUILTINS, CONSTANTS
from .display import LIBRARY_BUILTINS, DisplaySettings, describe_value, short_value
from .original import original_evaluation
from ..ir import RASPError, RASPNameError, RASPTypeError, RASPValueError, Span
from ..parser import directives, parse
from .reader import Chunk, Command, strip_comment
from .runtime import (LIBRARY_ORIGIN, ORIGINAL_RESERVED, STDLIB_DIR, Applied, ExitRequest,
                      _Ctx, _Interp, _nodes, _parse_cached, _read, _span, read_source)
from ..values import Builtin, Environment, SelOp, StatementResult, is_atom

__all__ = ["Session", "run_source", "run_file", "load_library", "base_environment"]


_BASES: dict[bool, Environment] = {}


def _builtins_env() -> Environment:
    env = Environment(None, name="builtins")
    for k, (fn, doc) in BUILTINS.items():
        env.vars[k] = Builtin(k, fn, doc)
    env.vars.update(CONSTANTS)
    env.vars["tokens"] = ir.tokens
    return env


def base_environment(causal: bool = False) -> Environment:
    """The base environment: built-ins plus the original RASP library (``rasplib``), built once
    per process and per mode (in causal mode the library's selectors are causal). Its parent
    holds the built-ins. Do not modify it: run programs in a child scope."""
    causal = bool(causal)
    if causal not in _BASES:
        builtins = _builtins_env()
        lib = Environment(builtins, name=LIBRARY_ORIGIN)
        sess = Session.__new__(Session)
        sess._init_fields(causal, example="hello", output=print)
        it = _Interp(sess)
        path = os.path.join(STDLIB_DIR, "rasplib.rasp")
        text = _read(path)
        ctx = _Ctx(path, text, causal)
        for st in _parse_cached(text, path).children:
            it.exec_stmt(st, lib, ctx)
        lib.vars.pop("out", None)
        _BASES[causal] = lib
    return _BASES[causal]


class Session:
    """A stateful interpreter session (the REPL's back end).

    Args:
        causal: RASP-L causal mode (every select created is causal); settable later.
        example: the running example shown by the REPL (default ``"hello"``).
        output: where ``draw`` prints (default ``print``).
        base_library: a ``.rasp`` file to use as the base library instead of ``rasplib``
            (run as the original REPL runs its library: each failing statement is reported
            to ``reporter`` and the rest runs).
        reporter: see :attr:`reporter`.

    Attributes:
        env: the session's :class:`Environment` (named ``console``, as in the original); its
            parent is the base environment. ``base_env``, ``causal``.
        display: the :class:`~rasp.repl.display.DisplaySettings` (running examples of s-ops and
            selectors, what is shown); ``example`` is the s-op example (setting it sets both).
        check_example: reject a statement whose s-ops or selectors fail on the running
            example, as the original REPL does (default ``False``; the REPL turns it on).
        reserve_library: the base library's names cannot be assigned in the session, as in
            the original REPL (default ``False``; the REPL turns it on).
        reporter: ``None`` (errors raise), or an object with ``syntax_error(err)`` and
            ``dump(items, silent)`` (the REPL): ``load`` then runs files as the original REPL
            (see :meth:`_Interp.run_reporting`); ``items`` are ``("result",
            StatementResult)`` and ``("error", RASPError)`` pairs in order.
    """

    def __init__(self, causal: bool = False, example: Any = "hello",
                 output: Callable[[str], None] | None = None, base_library: str | None = None,
                 reporter: Any = None):
        self._init_fields(causal, example, output or print)
        self.reporter = reporter
        if base_library is not None:
            self._custom_base = self._build_library(base_library)
        self.env = Environment(self._base(self._causal), name="console")

    def _init_fields(self, causal, example, output):
        self._causal = bool(causal)
        self.display = DisplaySettings(example, example)
        self.output = output
        self.check_example = False
        self.reserve_library = False
        self.reporter = None
        self.pending: list = []
        self._custom_base: Environment | None = None
        self.env: Environment | None = None       # set by __init__ (None while the base
        self._interp = _Interp(self)              # library itself is being loaded)

    def _build_library(self, path: str) -> Environment:
        text = read_source(path)
        lib = Environment(_builtins_env(), name=LIBRARY_ORIGIN)
        self._interp.library_mode = True
        try:
            if self.reporter is None:
                self._interp.run_units(text, path, lib, self._causal)
            else:
                self._interp.run_reporting(text, path, lib, self._causal, silent=True)
        finally:
            self._interp.library_mode = False
        lib.vars.pop("out", None)
        return lib

    def _base(self, causal: bool) -> Environment:
        if self._custom_base is not None:
            return self._custom_base
        return base_environment(causal)

    @property
    def base_env(self) -> Environment:
        return self._base(self._causal)

    @property
    def example(self) -> Any:
        """The running example of s-ops (``display.sop_example``); setting it sets the
        selectors' one too, as ``set example``."""
        return self.display.sop_example

    @example.setter
    def example(self, value: Any) -> None:
        self.display.sop_example = self.display.selector_example = value

    @property
    def causal(self) -> bool:
        return self._causal

    @causal.setter
    def causal(self, on: bool) -> None:
        self._causal = bool(on)
        if self.env is not None:
            self.env.parent = self._base(self._causal)

    def names(self) -> list[str]:
        """Names defined in this session (not the base environment's)."""
        return self.env.own_names()

    def library_names(self) -> set[str]:
        """The names the base library defines (reserved when :attr:`reserve_library`)."""
        return set(self.base_env.own_names())

    def check_library_name(self, name: str, env: Environment) -> None:
        """Raise RASPNameError when ``name`` may not be bound in ``env``: a library name in
        the session's own scope of a session that reserves them."""
        if self.reserve_library and env is self.env and \
                (name in self.library_names() or name in ORIGINAL_RESERVED):
            what = "a name of the RASP library" if name in self.library_names() else \
                "a word the original REPL reserves"
            raise RASPNameError(
                f"cannot assign to the reserved name '{name}' ({what}, reserved as in the "
                "original REPL; `rasp repl --allow-library-override` allows it)")

    def execute(self, text: str, filename: str = "<repl>",
                first_line: int = 1) -> list[StatementResult]:
        """Parse and run ``text`` (statements, and the original REPL's commands such as
        ``set example "abc"``; ``exit`` ends the text) in this session; ``first_line`` is
        the number of its first line in ``filename`` (for positions).

        Returns one :class:`StatementResult` per assigned name / expression / definition /
        ``show example`` (kind ``"example"``, value the subset). Raises
        :class:`~rasp.parser.RASPSyntaxError` (nothing runs) or another
        :class:`~rasp.ir.RASPError` (message ``file:line:col: ...``); the failed statement's
        bindings are rolled back, earlier statements of ``text`` stay (their results are in the
        error's ``partial_results``). Raises :class:`ExitRequest` when ``text`` is an
        ``exit`` command alone.
        """
        causal = self._causal or "causal" in directives(text)
        chunks = self._interp.units(text, filename, first_line)
        if len(chunks) == 1 and chunks[0].kind == "command" and \
                chunks[0].command.word == "exit":
            raise ExitRequest()
        return self._interp.run_chunks(chunks, filename, self.env, causal)

    def run_guarded(self, st, env: Environment, ctx: _Ctx) -> list[StatementResult]:
        """Run one statement in ``env``; on any failure (an error, or an interrupt such as
        Ctrl-C) every binding it made, in ``env`` and in the scopes ``env`` exports to, is
        rolled back. With :attr:`check_example`, its s-ops and selectors must work on the
        running example, else it fails."""
        chain = []
        e: Environment | None = env
        while e is not None:
            e.begin()          # a journal of what the statement changes (undone in O(changes))
            chain.append(e)
            e = e.exports_to
        saved_iterations, self._interp.iterations = self._interp.iterations, 0
        saved_built, self._interp.built = self._interp.built, 0
        try:
            results = self._interp.exec_stmt(st, env, ctx)
            if self.check_example:
                self._check_on_example(results, ctx, st)
        except BaseException as exc:    # any failure, Ctrl-C included: roll back, re-raise
            for scope in chain:
                scope.rollback()
            if isinstance(exc, RecursionError):
                raise RASPValueError("program nested too deeply", _span(ctx, st)) from None
            raise
        finally:
            self._interp.iterations = saved_iterations
            self._interp.built = saved_built
        for scope in chain:
            scope.commit()
        return results

    def _check_on_example(self, results: list[StatementResult], ctx: _Ctx, st) -> None:
        for r in results:
            if isinstance(r.value, Builtin) and r.value.name not in LIBRARY_BUILTINS:
                raise RASPNameError(
                    f"'{r.value.name}' is a built-in function, not a value (as in the original "
                    f"REPL): call it, e.g. {r.value.name}(...)", _span(ctx, st))
            if r.kind == "application":    # as the original evaluates it, on its input
                try:
                    original_evaluation(r.value.node, r.value.input)
                except RASPError as e:
                    if e.span is None:
                        e.span = _span(ctx, st)
                    raise
                continue
            for node in _nodes(r.value):
                try:
                    original_evaluation(node, self.display.sop_example)
                except RASPError as e:
                    if e.span is None:
                        e.span = _span(ctx, st)
                    e.message = f"{e.message} (on the running example " \
                                f"{short_value(self.display.sop_example, 40)})"
                    raise

    # ---- the original REPL's commands -----------------------------------------------------
    def run_command(self, chunk: Chunk, filename: str = "<repl>",
                    env: Environment | None = None) -> list[StatementResult]:
        """Run one of the original REPL's commands (:class:`~rasp.repl.reader.Command`): ``set
        [s-op|selector] example EXPR`` (EXPR evaluated in ``env``; it must give a non-empty
        string or list of atoms of one type, else RASPTypeError and the example is
        unchanged), ``show [s-op|selector] example`` (a result of kind ``"example"``),
        ``[s-op|selector] examples on|off``, ``full seq display on|off``, ``exit`` (raises
        :class:`ExitRequest`)."""
        cmd: Command = chunk.command
        d = self.display
        word = cmd.word
        if word == "exit":
            raise ExitRequest()
        if word == "show_example":
            return [StatementResult(None, cmd.subset, "example")]
        if word == "examples":
            if cmd.subset in ("both", "s-op"):
                d.show_sop_examples = cmd.switch
            if cmd.subset in ("both", "selector"):
                d.show_selector_examples = cmd.switch
            return []
        if word == "full_seq_display":
            d.full_seq_display = cmd.switch
            return []
        # set example EXPR: the expression at its place in the source, for positions
        head = chunk.text[:cmd.expr_offset]
        expr = strip_comment(cmd.expr).rstrip()
        if expr.endswith(";"):
            expr = expr[:-1]
        src = "\n" * (chunk.line - 1) + "".join(c if c == "\n" else " " for c in head) + \
            expr + "\n;"
        tree = parse(src, filename)
        ctx = _Ctx(filename, src, self._causal)
        stmt = tree.children[0]
        if len(tree.children) != 1 or stmt.data != "expr_stmt":
            raise RASPTypeError("set example takes one expression", _span(ctx, stmt))
        value = self._interp.ev(stmt.children[0], env if env is not None else self.env, ctx)
        value = _example_value_checked(value, _span(ctx, stmt.children[0]))
        if cmd.subset in ("both", "s-op"):
            d.sop_example = value
        if cmd.subset in ("both", "selector"):
            d.selector_example = value
        return []

    def run_file(self, path: str) -> list[StatementResult]:
        """Run a file in this session (its ``#!causal`` directive applies to the file)."""
        text = _read(path)
        return self.execute(text, filename=path)


def _example_value_checked(value: Any, span: Span | None) -> Any:
    """A running example: a non-empty string, or a non-empty list of atoms of one type."""
    if isinstance(value, str) and not isinstance(value, SelOp):
        if not value:
            raise RASPValueError("the example must not be empty", span)
        return str(value)
    if isinstance(value, list) and not isinstance(value, Applied):
        if not value:
            raise RASPValueError("the example must not be empty", span)
        if not all(is_atom(v) for v in value):
            raise RASPTypeError("the example must be a string or a list of atoms, got a list "
                                f"holding {describe_value(next(v for v in value if not is_atom(v)))}",
                                span)
        kinds = {"number" if isinstance(v, (int, float)) and not isinstance(v, bool)
                 else type(v).__name__ for v in value}
        if len(kinds) > 1:
            raise RASPTypeError("the example's tokens must be of one type (all strings, all "
                                "numbers or all booleans)", span)
        return list(value)
    raise RASPTypeError(f"example not iterable: set example needs a string or a list of atoms, "
                        f"got {describe_value(value)}", span)


def run_source(text: str, filename: str = "<string>", causal: bool = False) -> Environment:
    """Run a program and return its environment (a Mapping name -> value: s-ops
    (:class:`~rasp.ir.SOp`), selectors, atoms, lists, dicts, functions; the base environment's
    names are visible through it).

    ``causal=True`` (or a ``#!causal`` line among the leading comment lines) runs in RASP-L
    causal mode: every ``select`` created is causal.

    Raises:
        RASPSyntaxError: the text does not parse (``file:line:col``).
        RASPError: any other error (unknown name, type error, ...), with its position.
    """
    s = Session(causal=causal or "causal" in directives(text))
    s.execute(text, filename=filename)
    return s.env


def run_file(path: str | os.PathLike, causal: bool = False) -> Environment:
    """Run a ``.rasp`` file (see :func:`run_source`); ``load`` resolves relative to it.
    Raises RASPError (a :class:`~rasp.ir.RASPNameError`) when the file does not exist."""
    path = os.fspath(path)
    text = _read(path)
    return run_source(text, filename=path, causal=causal)


def load_library(name: str, causal: bool | None = None) -> Environment:
    """Run a standard-library file (``"rasplib"``, ``"rasp_l"``, ``"examples"``) in a fresh
    scope whose parent is the base environment and return that environment.

    ``causal=None`` uses the file's own directive (``rasp_l`` is causal). Raises RASPNameError
    for an unknown library."""
    path = os.path.join(STDLIB_DIR, name if name.endswith(".rasp") else name + ".rasp")
    if not os.path.isfile(path):
        known = sorted(f[:-5] for f in os.listdir(STDLIB_DIR) if f.endswith(".rasp"))
        raise RASPNameError(f"unknown library {name!r}; known: {', '.join(known)}")
    text = _read(path)
    c = ("causal" in directives(text)) if causal is None else bool(causal)
    s = Session(causal=c)
    s.execute(text, filename=path)
    return s.env
