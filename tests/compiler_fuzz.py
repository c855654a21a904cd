"""Differential fuzzing of the compiler (issue 16 item 6), shared by the test
(``tests/test_compiler_fuzz.py``, a fixed-seed quick profile) and the benchmark
(``bench/bench_compiler_fuzz.py``, the long profile).

Random programs over the whole op vocabulary of the IR (maps with every elementwise op of
``rasp.ops.OPS`` and the parametric ``in`` / ``lookup`` / Python callables, sequence maps,
the ternary, ``select`` with every comparison and ``TRUE``/``FALSE``, ``and``/``or``/``not``
selectors, causal selects, ``aggregate`` with mean / max / min and defaults of every type,
``kqv``'s truncated mean, ``selector_width``, ``length``, constants, ``numerical`` /
``categorical`` annotations) are compiled and run on random inputs, and both the compiled model
and the interpreter are compared with :func:`reference`, a plain-Python evaluator written here
from ``docs/language.md`` (one sequence at a time, Python scalars, no NumPy and no code of the
interpreter).

An outcome is a list of values or an error; two outcomes agree when both are errors or the
values are equal (:func:`rasp.equality.values_equal`).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import rasp
from compiler import (CompilerError, ModelTooLargeError, UnsupportedError, VerificationError,
                      compile_program)
from rasp import ir
from rasp.equality import values_equal

VOCAB = ["1", "2", "3"]
MAX_LEN = 6


class RefError(Exception):
    """The reference evaluator's error: the program is undefined on this input."""


# --------------------------------------------------------------------------------------------
# The reference evaluator (plain Python, one sequence)
# --------------------------------------------------------------------------------------------

def _is_str(v) -> bool:
    return isinstance(v, str)


def _is_num(v) -> bool:
    return isinstance(v, (bool, int, float)) and not isinstance(v, str)


def _seq_kind(vals: list) -> str:
    """A sequence holds strings or numbers (bools count as numbers), never both."""
    kinds = {"str" if _is_str(v) else "num" for v in vals}
    if len(kinds) > 1:
        raise RefError("a sequence mixes strings and numbers")
    return kinds.pop() if kinds else "num"


def _num(v):
    return int(v) if isinstance(v, bool) else v


def _finite(vals: list) -> list:
    for v in vals:
        if isinstance(v, float) and not math.isfinite(v):
            raise RefError("non-finite value")
    return vals


def _binary(op: str, xs: list, ys: list) -> list:
    kx, ky = _seq_kind(xs), _seq_kind(ys)
    if op in ("add", "sub", "mul", "div", "mod", "pow"):
        if op == "add" and kx == ky == "str":
            return [a + b for a, b in zip(xs, ys)]
        if op == "mul" and (kx == "str") != (ky == "str"):
            # docs/language.md: a string times an integer repeats it (Python's rule)
            s, k = (xs, ys) if kx == "str" else (ys, xs)
            if all(isinstance(v, (bool, int)) for v in k):
                return [a * int(b) for a, b in zip(s, k)]
        if kx == "str" or ky == "str":
            raise RefError(f"{op} of strings")
        xs, ys = [_num(a) for a in xs], [_num(b) for b in ys]
        if op in ("div", "mod") and any(b == 0 for b in ys):
            raise RefError("division by zero")
        if op == "add":
            return [a + b for a, b in zip(xs, ys)]
        if op == "sub":
            return [a - b for a, b in zip(xs, ys)]
        if op == "mul":
            return [a * b for a, b in zip(xs, ys)]
        if op == "div":
            return _finite([a / b for a, b in zip(xs, ys)])
        if op == "mod":
            return [a % b for a, b in zip(xs, ys)]
        ints = all(isinstance(a, int) for a in xs) and all(isinstance(b, int) for b in ys)
        if ints and all(b >= 0 for b in ys):
            return [a ** b for a, b in zip(xs, ys)]
        if any(a == 0 and b < 0 for a, b in zip(xs, ys)):
            raise RefError("zero to a negative power")
        return _finite([float(a) ** b for a, b in zip(xs, ys)])
    if op in ("eq", "ne"):
        if kx != ky:
            return [op == "ne"] * len(xs)
        return [(a == b) if op == "eq" else (a != b) for a, b in zip(xs, ys)]
    if op in ("lt", "le", "gt", "ge"):
        if kx != ky:
            raise RefError("order comparison of strings with numbers")
        f = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
             "ge": lambda a, b: a >= b}[op]
        return [f(a, b) for a, b in zip(xs, ys)]
    if op == "and":
        return [bool(a) and bool(b) for a, b in zip(xs, ys)]
    if op == "or":
        return [bool(a) or bool(b) for a, b in zip(xs, ys)]
    raise AssertionError(op)


def _unary(op: str, xs: list) -> list:
    k = _seq_kind(xs)
    if op in ("neg", "pos", "round") and k == "str":
        raise RefError(f"{op} of strings")
    if op == "neg":
        return [-_num(a) for a in xs]
    if op == "pos":
        return [_num(a) for a in xs]
    if op == "round":
        return [round(a) for a in xs]
    if op == "not":
        return [not a for a in xs]
    if op == "indicator":
        return [1 if a else 0 for a in xs]
    if op == "identity":
        return list(xs)
    raise AssertionError(op)


def _elementwise(fn: ir.Elementwise, args: list[list]) -> list:
    op = fn.op
    if op == "python":
        return [fn.fn(*t) for t in zip(*args)]
    if op == "in":
        c = fn.container
        if isinstance(c, str):
            return [str(v) in c for v in args[0]]
        return [v in list(c) for v in args[0]]
    if op == "lookup":
        out = []
        for v in args[0]:
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            if isinstance(fn.container, dict):
                if v not in fn.container:
                    raise RefError("lookup failed")
                out.append(fn.container[v])
                continue
            if not isinstance(v, int) or not -len(fn.container) <= v < len(fn.container):
                raise RefError("lookup failed")
            out.append(fn.container[v])
        _seq_kind(out)
        return out
    if op == "ternary":
        cond, a, b = args if fn.const_side is None else (args + [None])[:3]
        # docs/language.md: branches of different kinds are chosen per sequence; only a
        # sequence whose result mixes strings and numbers is an error
        out = [x if c else y for c, x, y in zip(cond, a, b)]
        if {_is_str(v) for v in out} == {True, False}:
            raise RefError("ternary mixes strings and numbers")
        return out
    if op in ("neg", "pos", "round", "not", "indicator", "identity"):
        return _unary(op, args[0])
    n = len(args[0])
    if fn.const_side == "right":
        return _binary(op, args[0], [fn.const] * n)
    if fn.const_side == "left":
        return _binary(op, [fn.const] * n, args[0])
    return _binary(op, args[0], args[1])


def _compare(k, q, op: str) -> bool:
    if _is_str(k) != _is_str(q):
        if op in ("==", "!="):
            return op == "!="
        raise RefError("select orders strings against numbers")
    return {"==": k == q, "!=": k != q, "<": k < q, "<=": k <= q, ">": k > q,
            ">=": k >= q}[op]


def reference(sop: ir.SOp, tokens: list, causal: bool = False) -> list:
    """The value of ``sop`` on one input sequence, computed from ``docs/language.md``'s
    definitions in plain Python; raises :class:`RefError` where the program is undefined."""
    n = len(tokens)
    memo: dict[int, Any] = {}

    def sel(s) -> list[list[bool]]:
        if s.id in memo:
            return memo[s.id]
        if isinstance(s, ir.Select):
            if s.op in ("TRUE", "FALSE"):
                val(s.keys), val(s.queries)      # evaluated (and may fail) all the same
                m = [[s.op == "TRUE"] * n for _ in range(n)]
            else:
                ks, qs = val(s.keys), val(s.queries)
                m = [[_compare(ks[k], qs[q], s.op) for k in range(n)] for q in range(n)]
        elif isinstance(s, ir.SelectorAnd):
            a, b = sel(s.a), sel(s.b)
            m = [[a[q][k] and b[q][k] for k in range(n)] for q in range(n)]
        elif isinstance(s, ir.SelectorOr):
            a, b = sel(s.a), sel(s.b)
            m = [[a[q][k] or b[q][k] for k in range(n)] for q in range(n)]
        elif isinstance(s, ir.SelectorNot):
            a = sel(s.a)
            m = [[not a[q][k] for k in range(n)] for q in range(n)]
        else:
            raise AssertionError(s)
        if causal or s.causal:
            m = [[m[q][k] and k <= q for k in range(n)] for q in range(n)]
        memo[s.id] = m
        return m

    def val(x) -> list:
        if x.id in memo:
            return memo[x.id]
        if isinstance(x, ir.Tokens):
            if x.conversion == "int":
                out = [int(t) for t in tokens]
            elif x.conversion in ("str", "asis"):
                out = list(tokens)
            else:
                raise AssertionError(x.conversion)
        elif isinstance(x, ir.Indices):
            out = list(range(n))
        elif isinstance(x, ir.Length):
            out = [n] * n
        elif isinstance(x, ir.Full):
            out = [x.value] * n
        elif isinstance(x, ir.Map):
            out = _elementwise(x.fn, [val(x.inner)])
        elif isinstance(x, ir.SequenceMap):
            out = _elementwise(x.fn, [val(i) for i in x.inputs])
        elif isinstance(x, ir.SelectorWidth):
            m = sel(x.selector)
            out = [sum(row) for row in m]
        elif isinstance(x, ir.Aggregate):
            out = _aggregate(x, sel(x.selector), val(x.values))
        else:
            raise AssertionError(x)
        _seq_kind(out)
        memo[x.id] = out
        return out

    return val(sop)


def _aggregate(x: ir.Aggregate, m: list[list[bool]], vals: list) -> list:
    n = len(vals)
    d = x.default
    strings = _seq_kind(vals) == "str"
    picked = [[vals[k] for k in range(n) if m[q][k]] for q in range(n)]
    empty = [not p for p in picked]
    if _is_str(d) != strings and any(empty):
        # a default of the other type: only a sequence where nothing is selected takes it
        if not all(empty):
            raise RefError("default of another type beside selected values")
        return [d] * n
    if x.reduction in ("max", "min"):
        f = max if x.reduction == "max" else min
        return [f(p) if p else d for p in picked]
    if strings:
        if any(len(p) > 1 for p in picked):
            raise RefError("mean of several strings")
        return [p[0] if p else d for p in picked]
    out = []
    for p in picked:
        if not p:
            out.append(d)
        elif len(p) == 1:
            out.append(p[0])
        else:
            out.append(sum(_num(v) for v in p) / len(p))
    if x.truncate:
        return [math.trunc(v) for v in out]
    return out


# --------------------------------------------------------------------------------------------
# Random programs
# --------------------------------------------------------------------------------------------

_MAP_OPS = ["add", "sub", "mul", "div", "mod", "pow", "eq", "ne", "lt", "le", "gt", "ge",
            "and", "or", "neg", "pos", "not", "round", "indicator", "identity", "in", "lookup",
            "python"]
_SEQ_OPS = ["add", "sub", "mul", "eq", "ne", "lt", "ge", "and", "or", "ternary", "python"]
_SELECT_OPS = ["==", "!=", "<", "<=", ">", ">=", "TRUE", "FALSE"]
_CONSTS = [-1, 0, 1, 2, 3, "1", "a", True, 0.5]


def _py_len(v) -> int:
    return len(str(v)) % 3


def _py_pair(a, b) -> int:
    return int(a == b) + len(str(b)) % 2


def _map(op: str, a, c):
    if op in ("neg", "pos", "not", "round", "indicator", "identity"):
        return ir.Map(ir.Elementwise(op), a)
    if op == "in":
        return ir.Map(ir.Elementwise("in", container=[1, 2, "3"]), a)
    if op == "lookup":
        return ir.Map(ir.Elementwise("lookup", container=[-3, 0, 5, 7]), a)
    if op == "python":
        return ir.map_sop(_py_len, a, label="len3")
    if op in ("div", "mod") and c == 0:
        c = 2
    if op == "pow":
        c = c if isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 2 else 2
    side = "left" if op in ("sub", "div", "lt") and c == 1 else "right"
    return ir.Map(ir.Elementwise(op, const=c, const_side=side), a)


@st.composite
def programs(draw, causal: bool = False):
    """A random program (an s-op) over ``tokens`` (strings ``"1".."3"``), ``tokens_int``,
    ``indices`` and (bidirectional) ``length``."""
    pool = [ir.tokens, ir.tokens_int, ir.indices] + ([] if causal else [ir.length])
    with ir.causal_mode(causal):
        for _ in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from(["map", "map", "seqmap", "agg", "agg", "sw", "kqv",
                                         "full"]))
            a, b, v = (draw(st.sampled_from(pool)) for _ in range(3))
            c = draw(st.sampled_from(_CONSTS))
            if kind == "map":
                new = _map(draw(st.sampled_from(_MAP_OPS)), a, c)
            elif kind == "seqmap":
                op = draw(st.sampled_from(_SEQ_OPS))
                if op == "python":
                    new = ir.sequence_map(_py_pair, a, b, label="pair")
                elif op == "ternary":
                    new = ir.SequenceMap(ir.Elementwise("ternary"), [a == c, b, v])
                else:
                    new = ir.SequenceMap(ir.Elementwise(op), [a, b])
            elif kind == "full":
                new = ir.full(draw(st.sampled_from([0, 2, "a"]))) + a if draw(
                    st.booleans()) else a * 1
            else:
                s = ir.select(a, b, draw(st.sampled_from(_SELECT_OPS)),
                              causal=True if causal or draw(st.booleans()) else None)
                shape = draw(st.sampled_from(["plain", "and", "or", "not"]))
                other = ir.select(ir.indices, ir.indices, draw(st.sampled_from(
                    ["<=", "<", "!=", "=="])))
                if shape == "and":
                    s = s & other
                elif shape == "or":
                    s = s | other
                elif shape == "not":
                    s = ~s
                if kind == "sw":
                    new = ir.selector_width(s)
                elif kind == "kqv":
                    new = ir.Aggregate(s, v, default=draw(st.sampled_from([0, -1])),
                                       truncate=True)
                else:
                    red = draw(st.sampled_from(["mean", "mean", "max", "min"]))
                    d = draw(st.sampled_from([0, 0, -1, "a", "z", False]))
                    new = ir.aggregate(s, v, default=d, reduction=red)
                    ann = draw(st.sampled_from([None, None, "numerical", "categorical"]))
                    if ann == "numerical":
                        new = ir.numerical(new)
                    elif ann == "categorical":
                        new = ir.categorical(new)
            pool.append(new)
    return pool[-1]


# --------------------------------------------------------------------------------------------
# Running it
# --------------------------------------------------------------------------------------------

def _outcome(fn):
    try:
        return fn()
    except (rasp.RASPError, RefError) as e:
        return e


def _agree(a, b) -> bool:
    ea, eb = isinstance(a, Exception), isinstance(b, Exception)
    if ea or eb:
        return ea and eb
    return values_equal(list(a), list(b))


def refusal_reason(e: CompilerError) -> str:
    """A short class of a compiler refusal, for the counts in ``docs/compiler.md``."""
    m = str(e)
    if isinstance(e, VerificationError):
        return "verification gate (mismatch)"
    for key, reason in (                        ("too large to enumerate", "value set too large"),
                        ("possible means", "value set too large"),
                        ("would have", "value set too large"),
                        ("combinations", "value set too large"),
                        ("fails on every possible input", "op fails on every value"),
                        ("categorical aggregate that averages", "categorical mean"),
                        ("numerical aggregate needs numeric", "numerical aggregate of strings"),
                        ("string default", "numerical aggregate of strings"),
                        ("combined key/query space", "or/not selector too large"),
                        ("compare strings with numbers", "select orders strings vs numbers"),
                        ("internal error", "internal error")):
        if key in m:
            return reason
    if isinstance(e, ModelTooLargeError):
        return "model too large"
    if isinstance(e, UnsupportedError):
        return "unsupported: " + m.split(": ")[-1][:50]
    return "other: " + m[:60]


def run_fuzz(max_examples: int, seed_value: int = 0, inputs_per_program: int = 16,
             max_len: int = MAX_LEN) -> dict:
    """Fuzz ``max_examples`` programs (hypothesis, seeded); returns the counts::

        {"programs", "compiled", "refused": Counter(reason), "inputs",
         "compiled_mismatches", "interpreter_mismatches", "gate_refusals",
         "examples": [first mismatches and gate refusals]}

    ``gate_refusals`` counts :class:`~compiler.VerificationError`: the compiler's own
    verification gate found the assembled model differs from the interpreter (a
    miscompilation turned into a refusal, also counted in ``refused``).
    """
    stats = {"programs": 0, "compiled": 0, "refused": Counter(), "inputs": 0,
             "compiled_mismatches": 0, "interpreter_mismatches": 0, "gate_refusals": 0,
             "examples": []}

    @seed(seed_value)
    @settings(max_examples=max_examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(st.booleans().flatmap(lambda c: st.tuples(st.just(c), programs(c))),
           st.lists(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=max_len),
                    min_size=inputs_per_program, max_size=inputs_per_program))
    def body(case, inputs):
        causal, prog = case
        stats["programs"] += 1
        try:
            cm = compile_program(prog, VOCAB, max_len, causal=causal)
        except CompilerError as e:
            stats["refused"][refusal_reason(e)] += 1
            if isinstance(e, VerificationError):
                stats["gate_refusals"] += 1
                if len(stats["examples"]) < 5:
                    stats["examples"].append(("gate", prog, causal, str(e)))
            cm = None
        else:
            stats["compiled"] += 1
        for x in inputs:
            ref = _outcome(lambda: reference(prog, x, causal))
            interp = _outcome(lambda: rasp.evaluate(prog, [x], causal=True if causal else None)[0])
            stats["inputs"] += 1
            if not _agree(ref, interp):
                stats["interpreter_mismatches"] += 1
                if len(stats["examples"]) < 5:
                    stats["examples"].append(("interpreter", prog, x, ref, interp))
            if cm is not None:
                got = _outcome(lambda: cm.run([x])[0])
                if not _agree(ref, got):
                    stats["compiled_mismatches"] += 1
                    if len(stats["examples"]) < 5:
                        stats["examples"].append(("compiled", prog, x, ref, got))

    body()
    return stats


# --------------------------------------------------------------------------------------------
# Issue 38's profiles: None defaults and causal programs, every input of every length
# --------------------------------------------------------------------------------------------

_NONE_CONSUMERS = ["none", "none", "mul", "add", "eq", "lt", "round", "is_none", "select",
                   "mean_of_it"]


def _is_none(v) -> bool:
    return v is None


@st.composite
def none_programs(draw):
    """A program with an aggregate whose default is ``None``: a mean (annotated or not),
    ``kqv``'s truncated mean, or a max / min, of numbers, bools or strings, over a select
    (possibly ``and`` / ``or`` / causal), then one consumer: arithmetic (``* 0.5``, ``+ 1``),
    a comparison (``== 2``, ``< 2``), ``round``, a Python callable (``v is None``), a select
    keyed on it, or a mean of it. Produces issue 38's D1, D2 and D4 (``tests/
    test_compiler_none_causal.py``)."""
    nums = [ir.tokens_int, ir.indices]
    a, b = draw(st.sampled_from(nums)), draw(st.sampled_from(nums))
    s = ir.select(a, b, draw(st.sampled_from(["==", "!=", "<", "<=", ">", ">="])),
                  causal=True if draw(st.booleans()) else None)
    shape = draw(st.sampled_from(["plain", "plain", "and", "or"]))
    if shape != "plain":
        other = ir.select(ir.indices, ir.indices, draw(st.sampled_from(["<=", "<", "!="])))
        s = s & other if shape == "and" else s | other
    v = draw(st.sampled_from([ir.tokens_int, ir.tokens_int, ir.indices, ir.tokens == "1",
                              ir.tokens]))
    kind = draw(st.sampled_from(["mean", "mean", "kqv", "max", "min"]))
    if kind == "kqv":
        x = ir.Aggregate(s, v, default=None, truncate=True)
    else:
        x = ir.aggregate(s, v, default=None, reduction=kind)
        ann = draw(st.sampled_from([None, None, "numerical", "categorical"]))
        x = ir.numerical(x) if ann == "numerical" else ir.categorical(x) if ann else x
    use = draw(st.sampled_from(_NONE_CONSUMERS))
    if use == "mul":
        return x * 0.5
    if use == "add":
        return x + 1
    if use == "eq":
        return x == 2
    if use == "lt":
        return x < 2
    if use == "round":
        return ir.Map(ir.Elementwise("round"), x)
    if use == "is_none":
        return ir.map_sop(_is_none, x, label="is_none")
    if use == "select":
        return ir.aggregate(ir.select(x, ir.tokens_int, "=="), ir.indices, default=-1)
    if use == "mean_of_it":
        return ir.aggregate(ir.select(ir.indices, ir.indices, "=="), x, default=0)
    return x


@st.composite
def causal_programs(draw):
    """A causal program of :func:`programs`, or one that fails at the last positions (a
    lookup of ``indices`` with entries for the first four, plus a random program): the
    interpreter then raises on every input of length 5 or 6 and on no shorter one, the shape
    of issue 38's D3."""
    p = draw(programs(causal=True))
    if draw(st.booleans()):
        with ir.causal_mode():
            p = ir.SequenceMap(ir.Elementwise("add"), [_map("lookup", ir.indices, 0),
                                                       draw(st.sampled_from([p, ir.tokens_int]))])
    return p


def outcomes(fn, batch: list) -> list:
    """``fn(batch)`` per sequence; when the batch raises, each sequence alone (a value or the
    error), as the verification gate runs them."""
    try:
        out = fn(batch)
        return [out[i] for i in range(len(batch))]
    except rasp.RASPError:
        pass
    res = []
    for x in batch:
        try:
            res.append(fn([x])[0])
        except rasp.RASPError as e:
            res.append(e)
    return res


def run_exhaustive_profile(strategy, max_examples: int, seed_value: int, causal: bool,
                           max_len: int = MAX_LEN, raising: str = "declare") -> dict:
    """Compile ``max_examples`` programs of ``strategy`` (hypothesis, seeded) over
    :data:`VOCAB` and compare each compiled model with ``rasp.evaluate`` on **every** input of
    every length ``1..max_len`` (one batch per length, as the gate runs them; strict equality:
    a bool equals only a bool). At the default ``max_len`` 6 there are 1,092 inputs, more than
    the gate enumerates: the gate samples, this comparison does not. ``raising``:
    ``compile_program``'s option (``"declare"``: programs that raise on some inputs are
    compiled, the models compared where both raise too; the default refuses them). Returns::

        {"programs", "compiled", "refused": Counter(reason), "inputs", "mismatches",
         "wrong_models", "gate_refusals", "internal_errors", "examples"}
    """
    import itertools
    stats = {"programs": 0, "compiled": 0, "refused": Counter(), "inputs": 0, "mismatches": 0,
             "wrong_models": 0, "gate_refusals": 0, "internal_errors": 0, "examples": []}
    batches = [[list(x) for x in itertools.product(VOCAB, repeat=n)]
               for n in range(1, max_len + 1)]

    @seed(seed_value)
    @settings(max_examples=max_examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def body(prog):
        stats["programs"] += 1
        try:
            cm = compile_program(prog, VOCAB, max_len, causal=causal, raising=raising)
        except CompilerError as e:
            reason = refusal_reason(e)
            stats["refused"][reason] += 1
            stats["gate_refusals"] += isinstance(e, VerificationError)
            stats["internal_errors"] += reason == "internal error"
            if (isinstance(e, VerificationError) or reason == "internal error") and len(
                    stats["examples"]) < 5:
                stats["examples"].append((reason, prog, str(e)[:300]))
            return
        stats["compiled"] += 1
        bad = 0
        for batch in batches:
            want = outcomes(lambda b: rasp.evaluate(prog, b, causal=True if causal else None),
                             batch)
            got = outcomes(cm.run, batch)
            for x, w, g in zip(batch, want, got):
                stats["inputs"] += 1
                if not _agree_strict(w, g):
                    bad += 1
                    if len(stats["examples"]) < 5:
                        stats["examples"].append(("compiled", prog, x, w, g))
        stats["mismatches"] += bad
        stats["wrong_models"] += bad > 0

    body()
    return stats


def _agree_strict(a, b) -> bool:
    ea, eb = isinstance(a, Exception), isinstance(b, Exception)
    if ea or eb:
        return ea and eb
    return values_equal(a, b, strict=True)
