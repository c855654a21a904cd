"""A search over C-RASP programs in C-RASP's own terms (Huang et al. 2025, arXiv 2410.02140, §3).

The RASP-L search (:mod:`analysis.prediction.search`) enumerates RASP-L expressions; a C-RASP
program that is short in C-RASP's terms (binary majority: two counts and a comparison) is an
expression of size 10+ there. This module enumerates C-RASP Booleans and counts directly,
bottom-up by size with observational equivalence, and assembles a next-token program from them
as a decision list with one entry per output value.

**Grammar.** Booleans (``B``) and counts (``C``), each either *concrete* or *alphabet-uniform*
(a construct with a symbol parameter ``a`` ranging over the task's content alphabet, counted
once, evaluated for every ``a`` at once):

* Boolean atoms (size 1): ``Q_s(i)`` for every symbol ``s`` of the batch (content symbols only
  when the alphabet is not uniform), the class ``content(i)`` (token >= 0); uniform atoms
  ``Q_a(i)``, ``tok(i) < a``, ``tok(i) > a``; in ``crasp_pl`` the periodic predicates
  ``i mod p == r`` (p in 2..4).
* Count atoms: ``#[j <= i] true`` (= i + 1; size 1); with a uniform alphabet the relative
  counts ``#[j <= i] tok(j) op tok(i)`` (op in ``==, <, >``; size 2: a count over a Boolean of
  the key's token case-split over the query's token).
* Boolean rules: ``not B`` (+1), ``B and B``, ``B or B`` (sizes + 1), ``C op C`` for op in
  ``<, <=, ==`` (sizes + 1; ``>``/``>=`` are the swapped pairs), ``C op k`` for ``==, >`` and
  k in 0..2 (size + 1), in ``crasp_pl`` the local ``P(i - c)`` = ``#[j <= i, j = i - c] P(j) > 0``
  for c in 1..2 (size + 2), and for a uniform count ``argmax C`` = ``C(a) > C(b) for every
  b != a`` (size + 2).
* Count rules: ``#[j <= i] P(j)`` (size + 1), with a uniform alphabet ``#[j <= i] P(j) and
  tok(j) op tok(i)`` (size + 2), ``C + C``, ``C - C`` (sizes + 1).

**Output.** A decision list ``v1 if B1 else (v2 if B2 else ... v_m)`` with one entry per output
value occurring in the targets (special tokens, labels, and the content symbols: one concrete
entry each, or, for a uniform alphabet, one uniform entry ``a if B(a)`` for the first ``a`` in
ascending order whose ``B(a)`` holds); the last value is the default (no condition). A
membership task is the same with the targets ``yes|no`` at SEP and EOS after it.

**Size** (C-RASP size): every operation of the grammar counted once per use, an
alphabet-uniform construct (``Q_a``, a count or comparison with the parameter ``a``, ``argmax``)
once for the whole alphabet, constants 0, plus one per decision-list entry with a condition.

**Certificate.** ``certified_below = s``: the enumeration of every Boolean of size <= s (up to
observational equivalence on the search batch: one representative per distinct value vector,
smallest first, which is exact for size because every rule is a function of its arguments'
values on the batch) found no decision list whose conditions all have size <= s; so no program
of this grammar of total size <= s reproduces the task (a program of total size <= s has every
condition of size <= s). For each order of the output values the entry for the t-th value must
equal the target indicator on the positions left by earlier entries, so existence is decided
exactly per order.

**Refinement.** Found candidates are checked on a validation batch (lengths 1..
``validation_max_length``); a failing candidate's shortest failing example joins the search
batch and the enumeration restarts (counterexample-guided; the batch only grows, so each
round's certificate holds). A returned program is built as IR (``selector_width`` of causal
selects whose key predicate is the Boolean: the shape :func:`rasp.crasp.check_crasp` accepts),
checked with ``check_crasp`` for the variant and verified with
:func:`tasks.decode.verify_program` at every length 1..``verify_max_length``.

Public API: :func:`crasp_search` -> :class:`CRaspResult`.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["crasp_search", "CRaspResult", "evaluate_recipe", "recipe_size", "recipe_text",
           "build_program", "is_param"]

_REL = {"eq": np.equal, "lt": np.less, "gt": np.greater}
_CMP = {"lt": np.less, "le": np.less_equal, "eq": np.equal}
_SYM = {"eq": "==", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_KMAX = 15


def _kcost(k: int) -> int:
    """Size of a constant in a comparison: its binary digits beyond the first (0 and 1 are
    free, 2-3 cost 1, 4-7 cost 2, 8-15 cost 3)."""
    return max(0, int(k).bit_length() - 1)


_RELTXT = {"eq": "tok(j) == tok(i)", "lt": "tok(j) < tok(i)", "gt": "tok(j) > tok(i)",
           "peq": "tok(j-1) == tok(i)"}


@dataclass
class CRaspResult:
    """Outcome of :func:`crasp_search`.

    Attributes:
        found: a program was found, passed ``rasp.crasp.check_crasp`` for ``variant`` and was
            verified at every length 1..``verify_max_length``.
        program: the IR s-op (causal next-token program) or None.
        source: the program as RASP source (:func:`rasp.source.program_to_source`).
        schema: the program in C-RASP notation (uniform constructs written once).
        size: its C-RASP size (module docstring) or None.
        certified_below: no program of the grammar of size <= this exists (None: no level
            completed).
        stopped: ``"found"``, ``"time_limit"``, ``"max_size"``, ``"memory_limit"``,
            ``"rounds"`` or ``"refused: <why>"``.
        seconds, variant, task; explored / distinct: candidates evaluated / kept;
        counterexamples_added; verification: the verification summary line.
    """

    task: str
    variant: str
    found: bool
    program: Any = None
    source: str | None = None
    schema: str | None = None
    size: int | None = None
    certified_below: int | None = None
    stopped: str = ""
    seconds: float = 0.0
    explored: int = 0
    distinct: int = 0
    counterexamples_added: int = 0
    level_reached: int = 0
    verification: str | None = None
    notes: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"task": self.task, "variant": self.variant, "found": self.found,
                "size": self.size, "certified_below": self.certified_below,
                "stopped": self.stopped, "seconds": round(self.seconds, 2),
                "explored": self.explored, "distinct": self.distinct,
                "counterexamples_added": self.counterexamples_added,
                "level_reached": self.level_reached, "schema": self.schema,
                "verification": self.verification, "notes": self.notes}


class _Timeout(Exception):
    pass


class _Memory(Exception):
    pass


# --------------------------------------------------------------------------------------------
# Recipes: nested tuples; evaluation on a batch
# --------------------------------------------------------------------------------------------

def is_param(rec) -> bool:
    """Whether a recipe depends on the uniform symbol parameter ``a``."""
    op = rec[0]
    if op in ("Qa", "lta", "gta"):
        return True
    if op in ("Q", "content", "per", "true", "relT"):
        return False
    return any(is_param(x) for x in rec[1:] if isinstance(x, tuple))


def recipe_size(rec) -> int:
    """C-RASP size of a recipe (module docstring)."""
    op = rec[0]
    if op in ("Q", "content", "Qa", "lta", "gta", "per", "true"):
        return 1
    if op == "relT":
        return 3 if rec[1] == "peq" else 2
    if op in ("not", "cnt"):
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


def recipe_text(rec, names: dict | None = None) -> str:
    """C-RASP notation of a recipe (``a`` is the uniform symbol parameter)."""
    op = rec[0]
    nm = (lambda v: names.get(v, str(v))) if names else str
    if op == "Q":
        return f"Q_{nm(rec[1])}"
    if op == "content":
        return "content"
    if op == "Qa":
        return "Q_a"
    if op == "lta":
        return "tok < a"
    if op == "gta":
        return "tok > a"
    if op == "per":
        return f"(i % {rec[1]} == {rec[2]})"
    if op == "true":
        return "#[j<=i] true"
    if op == "relT":
        return f"#[j<=i] {_RELTXT[rec[1]]}"
    if op == "not":
        return f"not {recipe_text(rec[1], names)}"
    if op in ("and", "or"):
        return f"({recipe_text(rec[1], names)} {op} {recipe_text(rec[2], names)})"
    if op == "cnt":
        return f"#[j<=i] {recipe_text(rec[1], names)}"
    if op == "rel":
        return f"#[j<=i] ({recipe_text(rec[2], names)} and {_RELTXT[rec[1]]})"
    if op == "loc":
        return f"[{recipe_text(rec[2], names)}](i-{rec[1]})"
    if op in ("add", "sub"):
        return f"({recipe_text(rec[1], names)} {'+' if op == 'add' else '-'} " \
               f"{recipe_text(rec[2], names)})"
    if op == "cmp":
        return f"({recipe_text(rec[2], names)} {_SYM[rec[1]]} {recipe_text(rec[3], names)})"
    if op == "cmpk":
        return f"({recipe_text(rec[3], names)} {_SYM[rec[1]]} {rec[2]})"
    if op == "argmax":
        return f"argmax_a[{recipe_text(rec[1], names)}]"
    raise ValueError(rec)


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
    elif op in ("not", "cnt", "argmax"):
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
        from rasp.ir import Full, Indices, Tokens
        self.tokens = Tokens("asis").named("tokens")
        self.indices = Indices()
        self.one = Full(1)
        self.memo: dict = {}
        self._true = None
        self._prev = None
        self.vocab_values: list = []

    def _sel_true(self):
        from rasp.ir import Select
        if self._true is None:
            self._true = Select(self.tokens, self.tokens, "TRUE", causal=True)
        return self._true

    def relsel(self, op):
        """The selector of a relation between the key's token (or its predecessor's, for
        ``peq``) and the query's token."""
        from rasp.ir import Elementwise, Full, Map, Select, SelectorAnd, SelectorWidth, \
            SequenceMap
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
        from rasp.ir import (Elementwise, Map, Select, SelectorAnd, SelectorWidth,
                             SequenceMap)
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


def build_program(entries, default, content, vocab_values=()) -> Any:
    """The IR s-op of a decision list: ``v if B else ...`` (a uniform entry expands into one
    ternary per content symbol, ascending)."""
    from rasp.ir import Elementwise, Full, SequenceMap
    bld = _IRBuilder()
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


# --------------------------------------------------------------------------------------------
# The enumerator
# --------------------------------------------------------------------------------------------

def entries_size(entries) -> int:
    """Size of a decision list's entries: each condition's size plus one per entry."""
    return sum(recipe_size(r) + 1 for _, r in entries)


class _Enum:
    def __init__(self, batch: _Batch, variant: str, deadline: float, max_size: int,
                 max_memory: int, values: list, names: dict, rng_seed: int = 0):
        self.b = batch
        self.pl = variant == "crasp_pl"
        self.deadline = deadline
        self.max_size = max_size
        self.max_memory = max_memory
        self.mem = 0
        self.explored = 0
        self.distinct = 0
        rng = np.random.default_rng(rng_seed)
        P = batch.B * batch.T
        self.hv = {False: rng.random(P), True: rng.random(P * batch.A)}
        self.seen = {(k, p): set() for k in "BC" for p in (False, True)}
        # pools[(kind, param)][size] = (values [M, ...], recipes)
        self.pools: dict = {(k, p): {} for k in "BC" for p in (False, True)}
        # output values: lists of ints (concrete values) and strings (uniform entries: "U" =
        # every content target, "U@x" = the content targets where the current token is x,
        # "U@c" where it is a content symbol)
        self.value_lists = values
        self.names = names
        tgt = batch.tgt
        cur = batch.tok.ravel()[batch.tflat]
        isc = batch.tgt_cidx >= 0
        curc = cur >= 0
        self.ind = {}
        for vl in values:
            for v in vl:
                if v == "U":
                    self.ind[v] = isc
                elif isinstance(v, str):
                    g = v[2:]
                    self.ind[v] = isc & (curc if g == "c" else (cur == int(g)) & ~curc)
                else:
                    self.ind[v] = tgt == v
        self.want = {v: np.where(self.ind[v], batch.tgt_cidx, -1) for v in self.ind
                     if isinstance(v, str)}
        # requirements (earlier-set, value) -> best (size, recipe) or None
        self.req: dict = {}
        for vl in values:
            for v in vl:
                others = [w for w in vl if w != v]
                for r in range(len(others) + 1):
                    for S in itertools.combinations(others, r):
                        self.req[(frozenset(S), v)] = []
        self.g_tv: list = []
        self.g_first: list = []
        self.greedy_rows = 0
        self.req_R = {}
        for (S, v) in self.req:
            R = np.ones(len(tgt), dtype=bool)
            for w in S:
                R &= ~self.ind[w]
            self.req_R[(S, v)] = R

    # ---- bookkeeping ----
    def _check_time(self):
        if time.perf_counter() > self.deadline:
            raise _Timeout

    def _shape(self, param):
        return ((self.b.A,) if param else ()) + (self.b.B, self.b.T)

    def _add(self, kind, size, vals, recs_fn, param):
        """Add candidate rows ``vals`` ([n, *shape]); ``recs_fn(i)`` gives row i's recipe."""
        n = vals.shape[0]
        if n == 0:
            return
        self.explored += n
        flat = vals.reshape(n, -1)
        if param:
            # a uniform value equal for every a is a concrete one
            A = self.b.A
            r3 = flat.reshape(n, A, -1)
            const = (r3 == r3[:, :1]).all(axis=(1, 2))
            if const.any():
                idx = np.flatnonzero(const)
                self._add(kind, size, vals[idx][:, 0], lambda i: recs_fn(idx[i]), False)
                self.explored -= len(idx)
                keep = np.flatnonzero(~const)
                if keep.size == 0:
                    return
                vals, flat = vals[keep], flat[keep]
                old = recs_fn
                recs_fn = (lambda k: lambda i: old(k[i]))(keep)
                n = len(keep)
        h = flat.astype(np.float64) @ self.hv[param]
        _, first = np.unique(h, return_index=True)
        seen = self.seen[(kind, param)]
        new = []
        for i in np.sort(first):
            hh = h[i]
            if hh not in seen:
                seen.add(hh)
                new.append(i)
        if not new:
            return
        new = np.asarray(new)
        nv = np.ascontiguousarray(vals[new])
        recs = [recs_fn(int(i)) for i in new]
        self.mem += nv.nbytes
        if self.mem > self.max_memory:
            raise _Memory
        pool = self.pools[(kind, param)]
        if size in pool:
            ov, orec = pool[size]
            pool[size] = (np.concatenate([ov, nv]), orec + recs)
        else:
            pool[size] = (nv, recs)
        self.distinct += len(new)
        if kind == "B":
            self._check_req(nv, recs, size, param)

    def _check_req(self, nv, recs, size, param):
        b = self.b
        n = nv.shape[0]
        flat = nv.reshape(n, -1) if not param else nv.reshape(n, b.A, -1)
        if not param:
            tv = flat[:, b.tflat].astype(bool)
        else:
            tv3 = flat[:, :, b.tflat].astype(bool)
            anyv = tv3.any(axis=1)
            first = np.where(anyv, np.argmax(tv3, axis=1), -1)
        if self.greedy_rows < 300_000:
            if param:
                self.g_first.append((first.astype(np.int16), size, recs))
            else:
                self.g_tv.append((tv, size, recs))
            self.greedy_rows += n
        for (S, v), lst in self.req.items():
            if len(lst) >= 4:
                continue
            if isinstance(v, str) != param:
                continue
            R = self.req_R[(S, v)]
            if param:
                ok = ~((first != self.want[v][None]) & R[None]).any(axis=1)
            else:
                ok = ~((tv != self.ind[v][None]) & R[None]).any(axis=1)
            for i in np.flatnonzero(ok)[:4 - len(lst)]:
                lst.append((size, recs[int(i)]))

    def programs(self):
        """Complete decision lists from the requirements met so far, smallest first."""
        out = []
        orders = [o for vl in self.value_lists for o in itertools.permutations(vl)]
        for order in orders:
            last = order[-1]
            steps = order if isinstance(last, str) else order[:-1]
            opts = []
            S = set()
            okk = True
            for v in steps:
                lst = self.req[(frozenset(S), v)]
                if not lst:
                    okk = False
                    break
                opts.append([(v, sz, r) for sz, r in lst])
                S.add(v)
            if not okk:
                continue
            default = last if not isinstance(last, str) else None
            for combo in itertools.product(*opts):
                size = sum(sz for _, sz, _ in combo) + len(combo)
                out.append((size, [(v, r) for v, _, r in combo], default))
        out.sort(key=lambda t: t[0])
        return out

    def greedy(self, max_entries: int, vbatch: "_Batch | None" = None, checks: int = 60):
        """A decision list with repeated values (Rivest's greedy: each entry consistent on the
        positions left and covering the most of them, the smallest on ties), or None. With
        ``vbatch``, an entry must also be consistent on the validation positions left (the
        best ``checks`` candidates of a step are tried). Not part of the certificate: found
        programs are upper bounds."""
        b = self.b
        tgt = b.tgt
        if not self.g_tv and not self.g_first:
            return None
        tv = np.concatenate([t for t, _, _ in self.g_tv]) if self.g_tv else None
        tsz = np.concatenate([np.full(len(r), sz) for _, sz, r in self.g_tv]) \
            if self.g_tv else None
        trec = [x for _, _, r in self.g_tv for x in r]
        fv = np.concatenate([f for f, _, _ in self.g_first]) if self.g_first else None
        fsz = np.concatenate([np.full(len(r), sz) for _, sz, r in self.g_first]) \
            if self.g_first else None
        frec = [x for _, _, r in self.g_first for x in r]
        concrete = sorted({int(v) for v, c in zip(tgt, b.tgt_cidx)
                           if c < 0 or not b.uniform})
        R = np.ones(len(tgt), dtype=bool)
        Rv = np.ones(len(vbatch.tgt), dtype=bool) if vbatch is not None else None
        memo: dict = {}
        entries: list = []

        def vfires(rec, v):
            """(consistent on the validation positions left, fired there) or None."""
            val = evaluate_recipe(rec, vbatch, memo)
            if isinstance(v, str):
                if val.ndim == 2:
                    return None
                t3 = val.reshape(val.shape[0], -1)[:, vbatch.tflat].astype(bool)
                fired = t3.any(axis=0)
                first = np.where(fired, np.argmax(t3, axis=0), -1)
                ok = not ((fired & Rv) & (first != vbatch.tgt_cidx)).any()
            else:
                fired = val.ravel()[vbatch.tflat].astype(bool)
                ok = not (fired & Rv & (vbatch.tgt != v)).any()
            return (ok, fired)

        while True:
            left = set(tgt[R].tolist())
            if not left:
                return self._g_done(entries_size(entries), entries, None)
            if len(left) == 1 and not (b.uniform and b.tgt_cidx[R][0] >= 0):
                return self._g_done(entries_size(entries), entries, int(next(iter(left))))
            if len(entries) >= max_entries:
                return None
            cands = []
            if tv is not None:
                cover = (tv & R[None]).sum(axis=1)
                for v in concrete:
                    bad = R & (tgt != v)
                    ok = ~(tv & bad[None]).any(axis=1) & (cover > 0)
                    idx = np.flatnonzero(ok)
                    if idx.size:
                        score = cover[idx] * 1000 - tsz[idx]
                        top = idx[np.argsort(-score, kind="stable")[:checks]]
                        cands += [(int(cover[i] * 1000 - tsz[i]), v, trec[i], int(tsz[i]),
                                   tv[i]) for i in top]
            if fv is not None and b.uniform:
                fired = (fv >= 0) & R[None]
                cover = fired.sum(axis=1)
                ok = ~(fired & (fv != b.tgt_cidx[None])).any(axis=1) & (cover > 0)
                idx = np.flatnonzero(ok)
                if idx.size:
                    score = cover[idx] * 1000 - fsz[idx]
                    top = idx[np.argsort(-score, kind="stable")[:checks]]
                    cands += [(int(cover[i] * 1000 - fsz[i]), "U", frec[i], int(fsz[i]),
                               fv[i] >= 0) for i in top]
            cands.sort(key=lambda c: -c[0])
            chosen = None
            for c in cands[:checks]:
                if vbatch is None:
                    chosen = (c, None)
                    break
                self._check_time()
                vf = vfires(c[2], c[1])
                if vf is not None and vf[0]:
                    chosen = (c, vf[1])
                    break
            if chosen is None:
                return None
            (_, v, rec, sz, fires), vfired = chosen
            entries.append((v, rec))
            R &= ~fires
            if vfired is not None:
                Rv &= ~vfired

    @staticmethod
    def _g_done(size, entries, default):
        return size, entries, default

    # ---- levels ----
    def level(self, s):
        b = self.b
        uni = b.uniform
        pools = self.pools
        if s == 1:
            for rec in self.atoms:
                self._add_one(rec, 1)
        if s == 2 and uni:
            for op in ("eq", "lt", "gt"):
                self._add_one(("relT", op), 2)
        if s == 3 and uni and self.pl:
            self._add_one(("relT", "peq"), 3)
        for p in (False, True):
            # unary from size s-1
            pb = pools[("B", p)].get(s - 1)
            if pb is not None:
                self._unary("B", "not", pb, s, p)
                self._unary("C", "cnt", pb, s, p)
            for k in range(_KMAX + 1):
                pc = pools[("C", p)].get(s - 1 - _kcost(k))
                if pc is not None:
                    for o in ("eq", "gt"):
                        self._unary("B", "cmpk", pc, s, p, (o, k))
            pb2 = pools[("B", p)].get(s - 2)
            if pb2 is not None:
                if uni:
                    for o in ("eq", "lt", "gt"):
                        self._unary("C", "rel", pb2, s, p, o)
                if uni and self.pl:
                    pb3 = pools[("B", p)].get(s - 3)
                    if pb3 is not None:
                        self._unary("C", "rel", pb3, s, p, "peq")
                if self.pl:
                    for c in (1, 2):
                        self._unary("B", "loc", pb2, s, p, c)
            if p:
                pc2 = pools[("C", True)].get(s - 2)
                if pc2 is not None:
                    self._unary("B", "argmax", pc2, s, True)
        # binary: sizes s1 + s2 = s - 1
        for s1 in range(1, s - 1):
            s2 = s - 1 - s1
            if s2 < 1:
                continue
            for p1 in (False, True):
                for p2 in (False, True):
                    if s1 > s2:
                        continue
                    if s1 == s2 and p1 and not p2:
                        continue
                    xb, yb = pools[("B", p1)].get(s1), pools[("B", p2)].get(s2)
                    if xb is not None and yb is not None:
                        sym = s1 == s2 and p1 == p2
                        for o in ("and", "or"):
                            self._pairs("B", o, xb, yb, s, p1, p2, sym)
                    xc, yc = pools[("C", p1)].get(s1), pools[("C", p2)].get(s2)
                    if xc is not None and yc is not None:
                        sym = s1 == s2 and p1 == p2
                        self._pairs("C", "add", xc, yc, s, p1, p2, sym)
                        self._pairs("B", "cmp_eq", xc, yc, s, p1, p2, sym)
                        for o in ("sub", "cmp_lt", "cmp_le"):
                            self._pairs("C" if o == "sub" else "B", o, xc, yc, s, p1, p2,
                                        False)
                            if not (s1 == s2 and p1 == p2):
                                self._pairs("C" if o == "sub" else "B", o, yc, xc, s, p2,
                                            p1, False)

    def _add_one(self, rec, size):
        v = self.b.atom(rec)
        kind = "C" if rec[0] in ("true", "relT") else "B"
        self._add(kind, size, v[None], lambda i: rec, is_param(rec))

    def _unary(self, kind, op, pool, s, p, arg=None):
        vals, recs = pool
        step = max(1, int(4e6 // max(1, vals[0].size)))
        for lo in range(0, len(recs), step):
            self._check_time()
            x = vals[lo:lo + step]
            if op == "argmax":
                y = self.b.argmax(x, axis=1)
            else:
                y = self.b.unary(op, x, arg)
            if op in ("not", "cnt", "argmax"):
                mk = (lambda o: lambda i: (o, recs[lo + i]))(op)
            elif op == "cmpk":
                mk = lambda i: ("cmpk", arg[0], arg[1], recs[lo + i])  # noqa: E731
            else:
                mk = (lambda o: lambda i: (o, arg, recs[lo + i]))(op)
            self._add(kind, s, y, mk, p)

    def _pairs(self, kind, op, xp, yp, s, p1, p2, sym):
        xv, xr = xp
        yv, yr = yp
        b = self.b
        pout = p1 or p2
        if p1 and not p2:
            yv = yv[:, None]
        if p2 and not p1:
            xv = xv[:, None]
        L = int(np.prod(self._shape(pout)))
        M2 = len(yr)
        step = max(1, int(4e6 // max(1, M2 * L)))
        if op.startswith("cmp_"):
            o = op[4:]

            def mk(i, j):
                return ("cmp", o, xr[i], yr[j])
        else:
            def mk(i, j):
                return (op, xr[i], yr[j])
        for lo in range(0, len(xr), step):
            self._check_time()
            x = xv[lo:lo + step]
            if sym:
                # pairs i < j only (commutative op on one pool)
                jlo = lo + 1
                if jlo >= M2:
                    break
                y = yv[jlo:]
            else:
                jlo = 0
                y = yv
            res = b.binary(op, x[:, None], y[None])
            n1, n2 = res.shape[0], res.shape[1]
            if sym:
                ii, jj = np.meshgrid(np.arange(n1), np.arange(n2), indexing="ij")
                keep = (lo + ii) < (jlo + jj)
                flat_idx = np.flatnonzero(keep.ravel())
                res = res.reshape((n1 * n2,) + res.shape[2:])[flat_idx]
                pairs = [(lo + int(k // n2), jlo + int(k % n2)) for k in flat_idx]
                self._add(kind, s, res, lambda t: mk(*pairs[t]), pout)
            else:
                res = res.reshape((n1 * n2,) + res.shape[2:])
                self._add(kind, s, res, (lambda lo_: lambda t: mk(lo_ + t // n2, t % n2))(lo),
                          pout)


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------

def _rows(task, lengths, samples, seed, mutants: int = 0):
    """Examples ``(values of prompt + answer, len(prompt))``; ``mutants`` near misses per
    example (two adjacent body tokens swapped, or one replaced by another content symbol, the
    answer from ``task.ground_truth``), since a task's sampler rarely draws them."""
    rng = np.random.default_rng(seed)
    rows, seen = [], set()
    content = [i for i, v in enumerate(task.vocab.values) if isinstance(v, int) and v >= 0]

    def add(p, a):
        ids = list(p) + list(a)
        if tuple(ids) in seen:
            return
        seen.add(tuple(ids))
        rows.append(([int(task.vocab.values[i]) for i in ids], len(p)))

    for n in lengths:
        if not task.length_ok(n):
            continue
        for _ in range(samples):
            p, a = task.sample(n, rng)
            add(p, a)
            body = [k for k in range(1, len(p)) if task.vocab.values[p[k]] >= 0]
            for _ in range(mutants if body else 0):
                q = list(p)
                k = int(rng.choice(body))
                if rng.random() < 0.5 and k + 1 in body:
                    q[k], q[k + 1] = q[k + 1], q[k]
                else:
                    q[k] = int(rng.choice(content))
                try:
                    ans = task.ground_truth(q)
                except Exception:  # noqa: BLE001 - not a valid prompt of the task
                    continue
                add(q, ans)
    return rows


def _content(task) -> list[int]:
    k = getattr(task, "k", None)
    if k is None:
        k = sum(1 for v in task.vocab.values if isinstance(v, int) and 0 <= v < 2)
    return list(range(int(k)))


def crasp_search(task, variant: str = "crasp", time_limit: float = 60.0, max_size: int = 14,
                 lengths=None, samples: int | None = None, seed: int = 0,
                 validation_max_length: int | None = None, validation_samples: int = 3,
                 verify_max_length: int = 60, verify_samples: int = 3,
                 uniform: bool | None = None, max_memory_mb: float = 768,
                 max_rounds: int = 30, nope_first: float = 0.35,
                 greedy: bool = True, search_mutants: int = 1) -> CRaspResult:
    """Search a C-RASP next-token program for a catalogue task (module docstring).

    Args:
        task: a :class:`tasks.base.Task` (next-token kind) or its catalogue name.
        variant: ``"crasp"`` (C-RASP[], NoPE) or ``"crasp_pl"`` (C-RASP[periodic, local]).
        time_limit: seconds for the whole search (enumeration, refinement, verification).
        max_size: largest Boolean size enumerated.
        lengths, samples, seed: the search batch (``samples`` examples per length; default
            lengths 1..6 with 3 samples, 1..4 with 2 for content alphabets over 30 symbols).
        search_mutants: near misses per search example (:func:`_rows`; not for alphabets over
            30 symbols).
        validation_max_length, validation_samples: the batch candidates are checked on
            (lengths 1..``validation_max_length``, default ``verify_max_length``, seed + 1); a
            failure of the final verification also joins the search batch.
        verify_max_length, verify_samples: final verification with
            :func:`tasks.decode.verify_program` at every length 1..``verify_max_length``.
        uniform: use alphabet-uniform constructs for the content symbols (default: when the
            content alphabet has 5 symbols or more).
        max_memory_mb: memory for stored values (the search stops at the level it is in).
        max_rounds: counterexample rounds at most.
        greedy: after each level without a one-entry-per-value program, also try a decision
            list whose entries may repeat a value (Rivest's greedy over every Boolean kept,
            at most two entries more than values); such a program is an upper bound outside
            the certificate's grammar (``notes`` says so).
        nope_first: for ``crasp_pl``, the share of ``time_limit`` first spent on the smaller
            C-RASP[] grammar (every C-RASP[] program is a C-RASP[periodic, local] program, and
            the smaller grammar reaches larger sizes); its program, when it finds one, is
            returned (``notes`` says so; ``certified_below`` then is None: no level of the
            larger grammar was completed). 0 disables it.

    Returns:
        :class:`CRaspResult` (never raises for a task it cannot handle: ``stopped`` says
        ``"refused: ..."``).
    """
    from rasp.crasp import VARIANTS
    t0 = time.perf_counter()
    if isinstance(task, str):
        import tasks as _tasks
        task = _tasks.get_task(task)
    if variant not in VARIANTS:
        raise ValueError(f"unknown C-RASP variant {variant!r}")
    kw = dict(max_size=max_size, lengths=lengths, samples=samples, seed=seed,
              validation_max_length=validation_max_length,
              validation_samples=validation_samples, verify_max_length=verify_max_length,
              verify_samples=verify_samples, uniform=uniform, max_memory_mb=max_memory_mb,
              max_rounds=max_rounds, nope_first=0.0, greedy=greedy,
              search_mutants=search_mutants)
    if variant == "crasp_pl" and nope_first > 0:
        # three passes: the larger grammar briefly (small programs with periodic / local
        # predicates), the smaller grammar (larger C-RASP[] programs), the larger one again
        rp = crasp_search(task, "crasp_pl", time_limit=0.2 * time_limit, **kw)
        if rp.found or rp.stopped.startswith("refused") or rp.stopped == "max_size":
            rp.seconds = time.perf_counter() - t0
            return rp
        r0 = crasp_search(task, "crasp", time_limit=nope_first * time_limit, **kw)
        if r0.found:
            from rasp.crasp import check_crasp
            if check_crasp(r0.program, "crasp_pl").valid:
                r0.variant = "crasp_pl"
                r0.certified_below = rp.certified_below
                r0.explored += rp.explored
                r0.notes.append("found by the pass over C-RASP[] (a C-RASP[] program is a "
                                "C-RASP[periodic, local] program); certified_below is the "
                                "first pass's over C-RASP[periodic, local]")
                r0.seconds = time.perf_counter() - t0
                return r0
        r1 = crasp_search(task, "crasp_pl", time_limit=max(time_limit -
                                                           (time.perf_counter() - t0), 1e-3),
                          **kw)
        r1.explored += r0.explored + rp.explored
        if rp.certified_below is not None:
            r1.certified_below = max(r1.certified_below or 0, rp.certified_below)
        r1.counterexamples_added += rp.counterexamples_added
        r1.notes.append(f"C-RASP[] pass: {r0.stopped}, certified_below "
                        f"{r0.certified_below} in C-RASP[]")
        r1.seconds = time.perf_counter() - t0
        return r1
    res = CRaspResult(task=task.name, variant=variant, found=False)

    def done(stopped):
        res.stopped = stopped
        res.seconds = time.perf_counter() - t0
        return res

    if task.kind != "next_token":
        return done("refused: not a next-token task")
    try:
        if not all(isinstance(v, int) for v in task.vocab.values):
            return done("refused: non-integer token values")
        content = np.array(_content(task), dtype=np.int64)
        if uniform is None:
            uniform = len(content) >= 5
        big = uniform and len(content) > 30
        if lengths is None:
            lengths = range(1, 5) if big else range(1, 7)
        if samples is None:
            samples = 2 if big else 3
        rows = _rows(task, lengths, samples, seed, mutants=search_mutants if not big else 0)
        if validation_max_length is None:
            validation_max_length = verify_max_length
        vrows = _rows(task, range(1, validation_max_length + 1), validation_samples,
                      seed + 1, mutants=0 if big else 2)
    except Exception as e:  # noqa: BLE001 - a task's generator may refuse
        return done(f"refused: cannot sample the task ({e})")
    if not rows:
        return done("refused: no example at the search lengths")
    names = {int(v): t for t, v in zip(task.vocab.tokens, task.vocab.values)}
    eos = int(task.vocab.values[task.vocab.eos]) if task.vocab.eos is not None else 0
    deadline = t0 + time_limit
    vbatch = _Batch(vrows, content, uniform)
    best_cert = None
    rounds = 0
    greedy_restarts = 0
    while True:
        batch = _Batch(rows, content, uniform)
        tv = sorted({int(x) for x in batch.tgt})
        cset = {int(c) for c in content}
        if uniform and any(v in cset for v in tv):
            nonc = [v for v in tv if v not in cset]
            values = [nonc + ["U"]]
            cur = batch.tok.ravel()[batch.tflat]
            cats = sorted({"c" if c >= 0 else str(int(c))
                           for c, i in zip(cur, batch.tgt_cidx) if i >= 0})
            if len(cats) > 1:
                values.append(nonc + [f"U@{g}" for g in cats])
        else:
            values = [tv]
        en = _Enum(batch, variant, deadline, max_size, int(max_memory_mb * 2**20), values,
                   names, seed)
        present = sorted({int(x) for x in batch.tok[batch.valid]})
        atoms = [("Q", v) for v in present if not (uniform and v in cset)]
        atoms.append(("content",))
        if uniform:
            atoms += [("Qa",), ("lta",), ("gta",)]
        if variant == "crasp_pl":
            atoms += [("per", p, r) for p in (2, 3, 4) for r in range(p)]
        atoms.append(("true",))
        en.atoms = atoms
        cand = None
        stopped = None
        s = 0
        if len(values[0]) == 1 and not isinstance(values[0][0], str):
            cand = [(0, [], values[0][0])]
        try:
            while cand is None:
                s += 1
                if s > max_size:
                    stopped = "max_size"
                    break
                en.level(s)
                res.level_reached = max(res.level_reached, s)
                progs = en.programs()
                good = None
                for size, entries, default in progs[:40]:
                    dflt = default if default is not None else eos
                    out = _decide(entries, dflt, vbatch)
                    if np.array_equal(out[vbatch.tmask], vbatch.target[vbatch.tmask]):
                        good = (size, entries, dflt)
                        break
                if good is not None:
                    cand = [good]
                    break
                if not progs:
                    best_cert = s if best_cert is None else max(best_cert, s)
                    if greedy and s >= 3 and greedy_restarts < 10:
                        g = en.greedy(len(values[0]) + 2, vbatch)
                        if g is not None:
                            size, entries, default = g
                            dflt = default if default is not None else eos
                            out = _decide(entries, dflt, vbatch)
                            if np.array_equal(out[vbatch.tmask], vbatch.target[vbatch.tmask]):
                                cand = [(size, entries, dflt)]
                                res.notes.append("found by the greedy decision list (entries "
                                                 "may repeat a value): an upper bound, "
                                                 "outside the certificate's grammar")
                                break
                            progs = [g]
                            greedy_restarts += 1
                if progs:
                    # chance fits: the shortest failing validation example joins the batch
                    size, entries, default = progs[0]
                    dflt = default if default is not None else eos
                    out = _decide(entries, dflt, vbatch)
                    bad = ((out != vbatch.target) & vbatch.tmask).any(axis=1)
                    lens = vbatch.valid.sum(axis=1)
                    rows_bad = np.flatnonzero(bad)
                    r = int(rows_bad[np.argmin(lens[rows_bad])])
                    rows = rows + [vbatch.rows[r]]
                    res.counterexamples_added += 1
                    stopped = "refine"
                    break
        except _Timeout:
            stopped = "time_limit"
        except _Memory:
            stopped = "memory_limit"
        res.explored += en.explored
        res.distinct = max(res.distinct, en.distinct)
        res.certified_below = best_cert
        if cand is not None:
            size, entries, default = cand[0]
            fin = _finish(res, task, variant, entries, default, size, content, names,
                          verify_max_length, verify_samples, seed, t0)
            if fin.found or fin.stopped != "refine":
                return fin
            # verification found a counterexample the validation batch missed
            rows = rows + [fin.notes.pop()]
            vbatch = _Batch(vbatch.rows + [rows[-1]], content, uniform)
            res.counterexamples_added += 1
            res.found, res.program, res.size, res.schema = False, None, None, None
            stopped = "refine"
        if stopped == "refine":
            rounds += 1
            if rounds >= max_rounds:
                return done("rounds")
            if time.perf_counter() > deadline:
                return done("time_limit")
            continue
        return done(stopped)


def _finish(res, task, variant, entries, default, size, content, names, vmax, vsamples, seed,
            t0):
    from rasp.crasp import check_crasp
    from rasp.source import program_to_source
    from tasks.decode import verify_program
    prog = build_program(entries, default, content, task.vocab.values)
    res.schema = _schema(entries, default, names)
    res.size = size
    rep = check_crasp(prog, variant)
    if not rep.valid:
        res.notes.append(rep.format())
        res.stopped = "refused: the program failed the C-RASP check"
        res.seconds = time.perf_counter() - t0
        return res
    ver = verify_program(task, prog, task.lengths(vmax), samples=vsamples, seed=seed + 7)
    res.verification = ver.summary()
    if not ver.ok:
        f = ver.failures[0] if ver.failures else None
        if f is not None:
            ids = task.vocab.encode(f["prompt"])
            try:
                ans = task.ground_truth(ids)
                vals = [int(task.vocab.values[i]) for i in list(ids) + list(ans)]
                res.notes.append((vals, len(ids)))
                res.stopped = "refine"
                return res
            except Exception:  # noqa: BLE001 - fall through to the refusal
                pass
        res.stopped = "refused: verification failed beyond the validation lengths"
        res.seconds = time.perf_counter() - t0
        return res
    res.found = True
    res.program = prog
    try:
        res.source = program_to_source(prog)
    except Exception:  # noqa: BLE001 - printing is best effort
        res.source = res.schema
    res.stopped = "found"
    res.seconds = time.perf_counter() - t0
    return res


def _schema(entries, default, names) -> str:
    lines = []
    for v, rec in entries:
        if isinstance(v, str):
            lines.append(f"for each symbol a: NEXT_a := {recipe_text(rec, names)}  "
                         "(first a in order)")
        else:
            lines.append(f"NEXT_{names.get(v, v)} := {recipe_text(rec, names)}")
    lines.append(f"otherwise: {names.get(default, default)}")
    return "\n".join(lines)
