"""Recipes of the C-RASP search (nested tuples: ``("cnt", ("Q", 1))`` = ``#[j <= i] Q_1``), their
size and notation, their values on a batch of examples (NumPy, every uniform construct for all
symbols at once), decision lists of them, and the IR program they stand for (the shape
:func:`rasp.analyses.crasp.check_crasp` accepts). Part of :mod:`analysis.prediction.crasp_search`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rasp.ir import (Elementwise, Full, Indices, Map, Select, SelectorAnd, SelectorWidth,
                     SequenceMap, Tokens)

_REL = {"eq": np.equal, "lt": np.less, "gt": np.greater}
_CMP = {"lt": np.less, "le": np.less_equal, "eq": np.equal}
_SYM = {"eq": "==", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_KMAX = 15


def _kcost(k: int) -> int:
    """Size of a constant in a comparison: its binary digits beyond the first (0 and 1 are
    free, 2-3 cost 1, 4-7 cost 2, 8-15 cost 3)."""
    return max(0, int(k).bit_length() - 1)


# --------------------------------------------------------------------------------------------
# Recipes: nested tuples; evaluation on a batch
# --------------------------------------------------------------------------------------------

def is_param(rec) -> bool:
    """Whether a recipe depends on the uniform symbol parameter ``a``."""
    op = rec[0]
    if op in ("Qa", "lta", "gta"):
        return True
    if op in ("Q", "content", "per", "true", "relT", "any", "ref"):
        return False
    return any(is_param(x) for x in rec[1:] if isinstance(x, tuple))


def recipe_size(rec) -> int:
    """C-RASP size of a recipe (module docstring)."""
    op = rec[0]
    if op in ("Q", "content", "Qa", "lta", "gta", "per", "true", "ref"):
        return 1
    if op == "relT":
        return 3 if rec[1] == "peq" else 2
    if op in ("not", "cnt", "any"):
        return 1 + recipe_size(rec[1])
    if op in ("and", "or", "add", "sub"):
        return 1 + recipe_size(rec[1]) + recipe_size(rec[2])
    if op == "cmp":
        return 1 + recipe_size(rec[2]) + recipe_size(rec[3])
    if op == "cmpk":
        return 1 + _kcost(rec[2]) + recipe_size(rec[3])
    if op in ("rel", "loc"):
        return (3 if rec[1] == "peq" else 2) + recipe_size(rec[2])
    if op == "argmax":
        return 2 + recipe_size(rec[1])
    raise ValueError(rec)


_VARS = "ijklmnpqrstuvwxyz"


def recipe_text(rec, names: dict | None = None, pos: str = "i", depth: int = 0) -> str:
    """C-RASP notation of a recipe (``a`` is the uniform symbol parameter), every
    position-dependent atom with its position written out: ``Q_x(i)``, ``(i % 2 == 0)``, and
    inside a count over ``j`` the same atoms at ``j`` (``#[j<=i] Q_x(j)``; a count nested in
    it runs over ``k``), so a printed program reads one way only.

    Args:
        rec: the recipe (nested tuples, :mod:`analysis.prediction.crasp_search.recipes`).
        names: symbol value -> the task's symbol name (default: the value).
        pos: the position the recipe is evaluated at (``"i"``, ``"j"``, ``"i-1"``...).
        depth: how many counts enclose it (picks the next position variable).

    Raises:
        ValueError: an unknown operation.
    """
    op = rec[0]
    nm = (lambda v: names.get(v, str(v))) if names else str
    inner = _VARS[depth + 1] if depth + 1 < len(_VARS) else f"j{depth + 1}"
    sub = lambda r, p=pos, d=depth: recipe_text(r, names, p, d)  # noqa: E731
    if op == "Q":
        return f"Q_{nm(rec[1])}({pos})"
    if op == "ref":
        return f"{rec[1]}({pos})"
    if op == "content":
        return f"content({pos})"
    if op == "Qa":
        return f"Q_a({pos})"
    if op == "lta":
        return f"tok({pos}) < a"
    if op == "gta":
        return f"tok({pos}) > a"
    if op == "per":
        return f"({pos} % {rec[1]} == {rec[2]})"
    if op == "true":
        return f"#[{inner}<={pos}] true"
    if op == "relT":
        return f"#[{inner}<={pos}] {_reltxt(rec[1], inner, pos)}"
    if op == "not":
        return f"not {sub(rec[1])}"
    if op in ("and", "or"):
        return f"({sub(rec[1])} {op} {sub(rec[2])})"
    if op == "cnt":
        return f"#[{inner}<={pos}] {sub(rec[1], inner, depth + 1)}"
    if op == "rel":
        return (f"#[{inner}<={pos}] ({sub(rec[2], inner, depth + 1)} and "
                f"{_reltxt(rec[1], inner, pos)})")
    if op == "loc":
        return sub(rec[2], f"{pos}-{rec[1]}")
    if op in ("add", "sub"):
        return f"({sub(rec[1])} {'+' if op == 'add' else '-'} {sub(rec[2])})"
    if op == "cmp":
        return f"({sub(rec[2])} {_SYM[rec[1]]} {sub(rec[3])})"
    if op == "cmpk":
        return f"({sub(rec[3])} {_SYM[rec[1]]} {rec[2]})"
    if op == "argmax":
        return f"argmax_a[{sub(rec[1])}]"
    if op == "any":
        return f"(exists a: {sub(rec[1])})"
    raise ValueError(rec)


def decision_list_text(entries, default, names) -> str:
    """A decision list of recipes in C-RASP notation, one ``NEXT_x := condition`` line per
    entry (an alphabet-uniform entry as ``for each symbol a: NEXT_a := ...``) and the
    ``otherwise`` token; ``names`` maps output values to the task's symbols."""
    lines = []
    for v, rec in entries:
        if isinstance(v, str):
            lines.append(f"for each symbol a: NEXT_a := {recipe_text(rec, names)}  "
                         "(first a in order)")
        else:
            lines.append(f"NEXT_{names.get(v, v)} := {recipe_text(rec, names)}")
    lines.append(f"otherwise: {names.get(default, default)}")
    return "\n".join(lines)


def _reltxt(rel: str, j: str, i: str) -> str:
    """The relation of a relational count between its position ``j`` and the query ``i``."""
    return {"eq": f"tok({j}) == tok({i})", "lt": f"tok({j}) < tok({i})",
            "gt": f"tok({j}) > tok({i})", "peq": f"tok({j}-1) == tok({i})"}[rel]


class _Batch:
    """Examples as padded ``[B, T]`` arrays (inputs = each example without its last token) with
    the next-token targets, and the per-batch constants of the operations."""

    def __init__(self, rows: list, content: np.ndarray, uniform: bool):
        self.rows = rows
        B = len(rows)
        T = max(len(v) - 1 for v, _ in rows)
        tok = np.full((B, T), -1000, dtype=np.int64)
        valid = np.zeros((B, T), dtype=bool)
        tmask = np.zeros((B, T), dtype=bool)
        target = np.zeros((B, T), dtype=np.int64)
        for b, (v, first) in enumerate(rows):
            n = len(v) - 1
            tok[b, :n] = v[:-1]
            valid[b, :n] = True
            for t in range(max(first - 1, 0), n):
                tmask[b, t] = True
                target[b, t] = v[t + 1]
        self.B, self.T = B, T
        self.tok, self.valid, self.tmask, self.target = tok, valid, tmask, target
        self.content = content
        self.uniform = uniform
        self.A = len(content) if uniform else 1
        self.idx = np.broadcast_to(np.arange(T), (B, T))
        causal = np.tril(np.ones((T, T), dtype=bool))[None] & valid[:, None, :]
        self.rel = {op: (f(tok[:, None, :], tok[:, :, None]) & causal).astype(np.int16)
                    for op, f in _REL.items()} if uniform else {}
        if uniform:
            prev = np.full((B, T), -1001, dtype=np.int64)
            prev[:, 1:] = tok[:, :-1]
            self.rel["peq"] = ((prev[:, None, :] == tok[:, :, None]) & causal).astype(np.int16)
        self.vmask = valid.astype(np.int8)
        self.tflat = np.flatnonzero(tmask.ravel())
        self.tgt = target.ravel()[self.tflat]
        cpos = {int(c): k for k, c in enumerate(content)}
        self.tgt_cidx = np.array([cpos.get(int(x), -1) for x in self.tgt], dtype=np.int64)

    # --- operations on arrays [..., B, T] (uniform: [..., A, B, T]) ---
    def atom(self, rec) -> np.ndarray:
        op = rec[0]
        tok = self.tok
        if op == "Q":
            v = tok == rec[1]
        elif op == "content":
            v = tok >= 0
        elif op == "per":
            v = self.idx % rec[1] == rec[2]
        elif op in ("Qa", "lta", "gta"):
            a = self.content[:, None, None]
            f = {"Qa": np.equal, "lta": np.less, "gta": np.greater}[op]
            v = f(tok[None], a)
        elif op == "true":
            return (np.cumsum(self.vmask, axis=-1) * self.vmask).astype(np.int16)
        elif op == "relT":
            return self.rel[rec[1]].sum(axis=-1).astype(np.int16) * self.vmask
        else:
            raise ValueError(rec)
        return (v & self.valid).astype(np.int8)

    def count(self, x):
        return (np.cumsum(x, axis=-1, dtype=np.int16) * self.vmask).astype(np.int16)

    def relcount(self, op, x):
        return np.einsum("bij,...bj->...bi", self.rel[op], x.astype(np.int16)
                         ).astype(np.int16) * self.vmask

    def local(self, c, x):
        y = np.zeros_like(x)
        if c < self.T:
            y[..., c:] = x[..., :-c]
        return (y * self.vmask).astype(np.int8)

    def argmax(self, x, axis=-3):
        top = x.max(axis=axis, keepdims=True)
        is_max = x == top
        uniq = is_max.sum(axis=axis, keepdims=True) == 1
        return ((is_max & uniq) * self.vmask).astype(np.int8)

    def unary(self, op, x, arg=None):
        if op == "not":
            return ((1 - x) * self.vmask).astype(np.int8)
        if op == "cnt":
            return self.count(x)
        if op == "rel":
            return self.relcount(arg, x)
        if op == "loc":
            return self.local(arg, x)
        if op == "argmax":
            return self.argmax(x)
        if op == "any":
            return x.max(axis=-3).astype(np.int8)
        if op == "cmpk":
            o, k = arg
            v = (x == k) if o == "eq" else (x > k)
            return (v * self.vmask).astype(np.int8)
        raise ValueError(op)

    def binary(self, op, x, y):
        if op == "and":
            return (x & y).astype(np.int8)
        if op == "or":
            return (x | y).astype(np.int8)
        if op == "add":
            return (x + y).astype(np.int16)
        if op == "sub":
            return (x - y).astype(np.int16)
        o = op[4:]
        return (_CMP[o](x, y) * self.vmask).astype(np.int8)


def evaluate_recipe(rec, batch: _Batch, memo: dict | None = None) -> np.ndarray:
    """Value of a recipe on a batch: ``[B, T]`` (``[A, B, T]`` when uniform)."""
    memo = {} if memo is None else memo
    if rec in memo:
        return memo[rec]
    op = rec[0]
    if op in ("Q", "content", "per", "Qa", "lta", "gta", "true", "relT"):
        v = batch.atom(rec)
    elif op in ("not", "cnt", "argmax", "any"):
        v = batch.unary(op, evaluate_recipe(rec[1], batch, memo))
    elif op in ("rel", "loc"):
        v = batch.unary(op, evaluate_recipe(rec[2], batch, memo), rec[1])
    elif op == "cmpk":
        v = batch.unary("cmpk", evaluate_recipe(rec[3], batch, memo), (rec[1], rec[2]))
    elif op in ("and", "or", "add", "sub"):
        v = batch.binary(op, evaluate_recipe(rec[1], batch, memo),
                         evaluate_recipe(rec[2], batch, memo))
    elif op == "cmp":
        v = batch.binary("cmp_" + rec[1], evaluate_recipe(rec[2], batch, memo),
                         evaluate_recipe(rec[3], batch, memo))
    else:
        raise ValueError(rec)
    memo[rec] = v
    return v


def _decide(entries, default, batch: _Batch) -> np.ndarray:
    """Output values ``[B, T]`` of a decision list of (value | "U", recipe) entries."""
    out = np.full((batch.B, batch.T), default, dtype=np.int64)
    done = np.zeros((batch.B, batch.T), dtype=bool)
    memo: dict = {}
    for val, rec in entries:
        v = evaluate_recipe(rec, batch, memo).astype(bool)
        if isinstance(val, str):
            if v.ndim == 2:
                v = np.broadcast_to(v, (batch.A,) + v.shape)
            anyv = v.any(axis=0)
            first = batch.content[np.argmax(v, axis=0)]
            take = anyv & ~done
            out[take] = first[take]
        else:
            take = v & ~done
            out[take] = val
            anyv = v
        done |= anyv
    return out


# --------------------------------------------------------------------------------------------
# IR construction
# --------------------------------------------------------------------------------------------

class _IRBuilder:
    def __init__(self):
        self.tokens = Tokens("asis").named("tokens")
        self.indices = Indices()
        self.one = Full(1)
        self.memo: dict = {}
        self._true = None
        self._prev = None
        self.vocab_values: list = []
        #: named definitions a ``("ref", name)`` recipe reads (shared, built once)
        self.defs: dict = {}

    def _sel_true(self):
        if self._true is None:
            self._true = Select(self.tokens, self.tokens, "TRUE", causal=True)
        return self._true

    def relsel(self, op):
        """The selector of a relation between the key's token (or its predecessor's, for
        ``peq``) and the query's token."""
        if op != "peq":
            return Select(self.tokens, self.tokens, _SYM[op], causal=True)
        if self._prev is None:
            # the previous token as a symbol: a ternary over the local Booleans
            # [Q_s](j - 1) = #[k <= j, k = j - 1] Q_s(k) > 0, one per symbol of the vocabulary
            q = Map(Elementwise("add", const=-1, const_side="right"), self.indices)
            local = Select(self.indices, q, "==", causal=True)
            out = Full(-1001)
            for v in sorted(self.vocab_values, reverse=True):
                qs = Map(Elementwise("eq", const=int(v), const_side="right"), self.tokens)
                cnt = SelectorWidth(SelectorAnd(local, Select(qs, self.one, "==", causal=True)))
                has = Map(Elementwise("gt", const=0, const_side="right"), cnt)
                out = SequenceMap(Elementwise("ternary"), (has, Full(int(v)), out))
            self._prev = out
        return Select(self._prev, self.tokens, "==", causal=True)

    def node(self, rec, a=None):
        key = (rec, a if is_param(rec) else None)
        if key in self.memo:
            return self.memo[key]
        op = rec[0]

        def mapc(o, c, x):
            return Map(Elementwise(o, const=c, const_side="right"), x)

        def seq(o, *xs):
            return SequenceMap(Elementwise(o), xs)

        def key_pred(p):
            return Select(p, self.one, "==", causal=True)

        if op == "Q":
            n = mapc("eq", int(rec[1]), self.tokens)
        elif op == "content":
            n = mapc("ge", 0, self.tokens)
        elif op == "Qa":
            n = mapc("eq", int(a), self.tokens)
        elif op == "lta":
            n = mapc("lt", int(a), self.tokens)
        elif op == "gta":
            n = mapc("gt", int(a), self.tokens)
        elif op == "per":
            n = mapc("eq", rec[2], mapc("mod", rec[1], self.indices))
        elif op == "true":
            n = SelectorWidth(self._sel_true())
        elif op == "relT":
            n = SelectorWidth(self.relsel(rec[1]))
        elif op == "ref":
            n = self.node(self.defs[rec[1]], a)
        elif op == "not":
            n = Map(Elementwise("not"), self.node(rec[1], a))
        elif op in ("and", "or"):
            n = seq(op, self.node(rec[1], a), self.node(rec[2], a))
        elif op == "cnt":
            n = SelectorWidth(key_pred(self.node(rec[1], a)))
        elif op == "rel":
            n = SelectorWidth(SelectorAnd(key_pred(self.node(rec[2], a)), self.relsel(rec[1])))
        elif op == "loc":
            q = mapc("add", -rec[1], self.indices)
            n = mapc("gt", 0, SelectorWidth(SelectorAnd(
                Select(self.indices, q, "==", causal=True), key_pred(self.node(rec[2], a)))))
        elif op in ("add", "sub"):
            n = seq(op, self.node(rec[1], a), self.node(rec[2], a))
        elif op == "cmp":
            n = seq(rec[1], self.node(rec[2], a), self.node(rec[3], a))
        elif op == "cmpk":
            n = mapc(rec[1], rec[2], self.node(rec[3], a))
        elif op == "any":
            n = None
            for b in self.content:
                c = self.node(rec[1], b)
                n = c if n is None else seq("or", n, c)
        elif op == "argmax":
            mine = self.node(rec[1], a)
            n = None
            for b in self.content:
                if b == a:
                    continue
                c = seq("gt", mine, self.node(rec[1], b))
                n = c if n is None else seq("and", n, c)
            if n is None:
                n = mapc("ge", 0, mine)
        else:
            raise ValueError(rec)
        self.memo[key] = n
        return n


def build_program(entries, default, content, vocab_values=(), defs=None) -> Any:
    """The IR s-op of a decision list: ``v if B else ...`` (a uniform entry expands into one
    ternary per content symbol, ascending); ``defs`` names the recipes a ``("ref", name)``
    reads (each built once, so a program whose definitions share parts stays linear)."""
    bld = _IRBuilder()
    bld.defs = dict(defs or {})
    bld.content = [int(c) for c in content]
    bld.vocab_values = [int(v) for v in vocab_values]
    out = Full(int(default))
    for val, rec in reversed(entries):
        if isinstance(val, str):
            for a in reversed(bld.content):
                out = SequenceMap(Elementwise("ternary"), (bld.node(rec, a), Full(a), out))
        else:
            out = SequenceMap(Elementwise("ternary"), (bld.node(rec), Full(int(val)), out))
    return out
