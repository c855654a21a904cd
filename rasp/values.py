"""The values a RASP program computes with, besides IR nodes: scopes, functions, statement
results, and the kinds of values.

A program's values are **atoms** (``int``, ``float``, ``str``, ``bool``), **lists**, **dicts**
(atom keys), **functions** (:class:`RASPFunction` for a ``def``, :class:`Builtin` for the
built-ins), **s-ops** and **selectors** (IR nodes, :mod:`rasp.ir`). A comparison written bare
in a call (``select(k, q, ==)``) is a :class:`SelOp`. Names are bound in an :class:`Environment`.
How values are shown is :mod:`rasp.repl.display`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from .ir import Selector, SOp, Span

__all__ = ["SelOp", "is_atom", "kind_of", "StatementResult", "Environment", "Builtin",
           "RASPFunction"]


class SelOp(str):
    """A comparison written bare in a call, as in ``select(k, q, ==)``."""


def is_atom(v: Any) -> bool:
    """Whether ``v`` is an atom of the dialect (bool, int, float or string; not a bare
    comparison)."""
    return isinstance(v, (bool, int, float, str)) and not isinstance(v, SelOp)


def kind_of(value: Any) -> str:
    """The kind of a value: ``"sop"``, ``"selector"``, ``"atom"``, ``"list"``, ``"dict"``,
    ``"function"`` or ``"none"``."""
    if isinstance(value, SOp):
        return "sop"
    if isinstance(value, Selector):
        return "selector"
    if isinstance(value, (RASPFunction, Builtin)):
        return "function"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "dict"
    if value is None:
        return "none"
    return "atom"


@dataclass
class StatementResult:
    """What one statement produced: ``name`` (the assigned name, ``"out"`` for a bare
    expression, the function name for ``def``; ``None`` for ``load`` / ``for`` / ``draw``),
    ``value``, ``kind`` (see :func:`kind_of`), ``span`` of the statement and, for ``draw``,
    the ``text`` it printed."""

    name: str | None
    value: Any
    kind: str
    span: Span | None = None
    text: str | None = None


_MISSING = object()


class _Vars(dict):
    """A scope's bindings. While journals are open (one per running statement, nested for
    statements run inside a statement, such as a ``load``), the innermost records each name's
    value before its first change, so a failed statement is undone in time proportional to
    what it changed, not to the size of the scope."""

    __slots__ = ("journals",)

    def __init__(self):
        super().__init__()
        self.journals: list[dict[str, Any]] = []

    def _note(self, k: str) -> None:
        if self.journals:
            j = self.journals[-1]
            if k not in j:
                j[k] = dict.get(self, k, _MISSING)

    def __setitem__(self, k: str, v: Any) -> None:
        self._note(k)
        dict.__setitem__(self, k, v)

    def __delitem__(self, k: str) -> None:
        self._note(k)
        dict.__delitem__(self, k)

    def pop(self, k: str, *default: Any) -> Any:
        self._note(k)
        return dict.pop(self, k, *default)


class Environment(Mapping):
    """A scope: a mapping name -> value with a parent scope (looked up when a name is missing).

    ``env[name]`` and ``name in env`` see the parents; iteration (``keys()``) lists every
    visible name (own names first); :meth:`own_names` only this scope's names.
    :meth:`begin` / :meth:`commit` / :meth:`rollback` undo the bindings of a failed statement.
    """

    def __init__(self, parent: "Environment | None" = None, name: str = "env"):
        self.vars: _Vars = _Vars()
        self.parent = parent
        self.name = name
        #: the scope that also receives every binding made here whose name does not start
        #: with ``_`` and is not ``out`` (a loaded file's scope exports to the loading scope,
        #: binding by binding, as the original RASP's ``stealing_env``); ``None``: none
        self.exports_to: Environment | None = None

    def begin(self) -> None:
        """Start recording this scope's changes (one statement; calls nest)."""
        self.vars.journals.append({})

    def commit(self) -> None:
        """Keep the changes made since the matching :meth:`begin` (an enclosing statement
        can still undo them)."""
        journal = self.vars.journals.pop()
        if self.vars.journals:
            outer = self.vars.journals[-1]
            for k, old in journal.items():
                outer.setdefault(k, old)

    def rollback(self) -> None:
        """Undo every change made to this scope since the matching :meth:`begin`."""
        journal = self.vars.journals.pop()
        for k, old in journal.items():
            if old is _MISSING:
                dict.pop(self.vars, k, None)
            else:
                dict.__setitem__(self.vars, k, old)

    def lookup(self, name: str) -> Any:
        env: Environment | None = self
        while env is not None:
            if name in env.vars:
                return env.vars[name]
            env = env.parent
        raise KeyError(name)

    def __getitem__(self, name: str) -> Any:
        return self.lookup(name)

    def __contains__(self, name: object) -> bool:
        env: Environment | None = self
        while env is not None:
            if name in env.vars:
                return True
            env = env.parent
        return False

    def __iter__(self) -> Iterator[str]:
        seen: set[str] = set()
        env: Environment | None = self
        while env is not None:
            for k in env.vars:
                if k not in seen:
                    seen.add(k)
                    yield k
            env = env.parent

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def own_names(self) -> list[str]:
        """Names bound in this scope itself (not its parents), in binding order."""
        return list(self.vars)

    def child(self, name: str = "scope") -> "Environment":
        return Environment(self, name)

    def __repr__(self) -> str:
        return f"<Environment {self.name}: {', '.join(self.own_names()[:8])}>"


class Builtin:
    """A built-in function of the dialect (``select``, ``aggregate``, ...): ``fn(interp,
    args)`` with the statement interpreter and the evaluated arguments."""

    def __init__(self, name: str, fn: Callable, doc: str):
        self.name = name
        self.fn = fn
        self.doc = doc

    def __repr__(self) -> str:
        return f"built-in function: {self.name}"


class RASPFunction:
    """A user function (``def``): a closure over its defining environment.

    Calling checks the arity, binds the arguments in a fresh scope whose parent is the defining
    scope, runs the body statements and returns the return expressions' value (a list when
    there are several). ``causal`` is ``True`` for functions defined in a causal file: they
    create causal selects whatever the caller's mode. ``defaults`` maps parameter names to
    their default values (evaluated once, at the definition).
    """

    def __init__(self, name, params, body, returns, closure, ctx, causal, defaults=None):
        self.name = name
        self.params = list(params)
        self.defaults = dict(defaults or {})
        self.body = body
        self.returns = returns
        self.closure = closure
        self.ctx = ctx
        self.causal = causal

    def __repr__(self) -> str:
        return f"function: {self.name}({', '.join(self.params)})"
