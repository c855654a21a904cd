"""Property tests of the batched interpreter (hypothesis).

Random programs (random DAGs built with the Python API: maps, sequence maps, selects with random
comparisons, selector combinations, aggregates with mean / max / min reductions, selector
widths, causal selects on and off) must give

1. the same values evaluated as one batch and one sequence at a time, and
2. the same values as a tiny independent plain-Python evaluator of the core semantics written
   below (per-sequence loops over positions, the original RASP's definitions: Weiss et al. 2021
   §2; RASP-L max/min reductions and causal selects: Zhou et al. 2023).
"""

from __future__ import annotations

import math
import operator

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rasp import aggregate, evaluate, indices, select, selector_width, tokens_int
from rasp.ir import (Aggregate, Elementwise, Full, Indices, Map, Select, SelectorAnd,
                     SelectorNot, SelectorOr, SelectorWidth, SequenceMap, SOp, Tokens,
                     topological_order)

# --------------------------------------------------------------------------------------------
# The independent reference evaluator (plain Python, one sequence, no NumPy)
# --------------------------------------------------------------------------------------------

PY_BINARY = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "mod": operator.mod,
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
    "gt": operator.gt, "ge": operator.ge,
    "and": lambda a, b: bool(a) and bool(b), "or": lambda a, b: bool(a) or bool(b),
}
PY_UNARY = {"neg": operator.neg, "not": lambda a: not a, "indicator": lambda a: int(bool(a)),
            "identity": lambda a: a}
PY_SELECT = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
             ">": operator.gt, ">=": operator.ge, "TRUE": lambda k, q: True,
             "FALSE": lambda k, q: False}


def py_elementwise(fn: Elementwise, args: list):
    if fn.op in PY_UNARY:
        return PY_UNARY[fn.op](args[0])
    if fn.op == "ternary":
        return args[1] if args[0] else args[2]
    f = PY_BINARY[fn.op]
    if fn.const_side == "right":
        return f(args[0], fn.const)
    if fn.const_side == "left":
        return f(fn.const, args[0])
    return f(args[0], args[1])


def reference_eval(root, seq: list, causal_all: bool = False):
    """Evaluate ``root`` on one sequence with plain Python lists."""
    n = len(seq)
    val: dict[int, object] = {}
    for node in topological_order(root):
        if isinstance(node, Tokens):
            val[node.id] = [int(x) for x in seq]
        elif isinstance(node, Indices):
            val[node.id] = list(range(n))
        elif isinstance(node, Full):
            val[node.id] = [node.value] * n
        elif isinstance(node, Map):
            val[node.id] = [py_elementwise(node.fn, [x]) for x in val[node.inner.id]]
        elif isinstance(node, SequenceMap):
            cols = [val[c.id] for c in node.inputs]
            val[node.id] = [py_elementwise(node.fn, [c[i] for c in cols]) for i in range(n)]
        elif isinstance(node, (Select, SelectorAnd, SelectorOr, SelectorNot)):
            m = [[False] * n for _ in range(n)]
            for q in range(n):
                for k in range(n):
                    if isinstance(node, Select):
                        m[q][k] = bool(PY_SELECT[node.op](val[node.keys.id][k],
                                                          val[node.queries.id][q]))
                    elif isinstance(node, SelectorAnd):
                        m[q][k] = val[node.a.id][q][k] and val[node.b.id][q][k]
                    elif isinstance(node, SelectorOr):
                        m[q][k] = val[node.a.id][q][k] or val[node.b.id][q][k]
                    else:
                        m[q][k] = not val[node.a.id][q][k]
                    if (causal_all or node.causal) and k > q:
                        m[q][k] = False
            val[node.id] = m
        elif isinstance(node, SelectorWidth):
            val[node.id] = [sum(row) for row in val[node.selector.id]]
        elif isinstance(node, Aggregate):
            m = val[node.selector.id]
            vs = val[node.values.id]
            out = []
            for q in range(n):
                chosen = [vs[k] for k in range(n) if m[q][k]]
                if not chosen:
                    out.append(node.default)
                elif node.reduction == "max":
                    out.append(max(chosen))
                elif node.reduction == "min":
                    out.append(min(chosen))
                else:
                    # one key: its value as is; several: the mean. RASP-L's kqv truncates the
                    # result toward zero either way (reference: aggr_mean(...).astype(int)).
                    value = chosen[0] if len(chosen) == 1 else sum(chosen) / len(chosen)
                    out.append(math.trunc(value) if node.truncate else value)
            val[node.id] = out
        else:  # pragma: no cover - the generator makes no other nodes
            raise AssertionError(node)
    return val[root.id]


# --------------------------------------------------------------------------------------------
# Random programs
# --------------------------------------------------------------------------------------------

MAP_OPS = [("add", 1), ("add", 2), ("sub", 1), ("mul", 2), ("mod", 3), ("eq", 1), ("lt", 2),
           ("ge", 1), ("ne", 0)]
SEQ_OPS = ["add", "sub", "eq", "lt", "gt", "and", "or", "max"]
SELECT_OPS = ["==", "!=", "<", "<=", ">", ">=", "TRUE", "FALSE"]


@st.composite
def programs(draw):
    """A random program over ``tokens_int`` (values 0..4) and ``indices``; returns the output
    s-op. All values stay numeric (int, float or bool) and bounded."""
    sops: list[SOp] = [tokens_int, indices]
    selectors = []
    n_ops = draw(st.integers(1, 8))
    for _ in range(n_ops):
        kind = draw(st.sampled_from(["map", "seqmap", "select", "aggregate", "width",
                                     "aggregate"]))
        if kind == "map":
            x = draw(st.sampled_from(sops))
            op = draw(st.sampled_from(MAP_OPS + [("neg", None), ("indicator", None),
                                                 ("not", None)]))
            if op[1] is None:
                sops.append(Map(Elementwise(op[0]), x))
            else:
                side = "left" if op[0] in ("add", "sub") and draw(st.booleans()) else "right"
                sops.append(Map(Elementwise(op[0], const=op[1], const_side=side), x))
        elif kind == "seqmap":
            a = draw(st.sampled_from(sops))
            b = draw(st.sampled_from(sops))
            op = draw(st.sampled_from(SEQ_OPS))
            if op == "max":
                cond = SequenceMap(Elementwise("gt"), (a, b))
                sops.append(SequenceMap(Elementwise("ternary"), (cond, a, b)))
            else:
                sops.append(SequenceMap(Elementwise(op), (a, b)))
        elif kind == "select" or (kind in ("aggregate", "width") and not selectors):
            if selectors and draw(st.booleans()):
                a = draw(st.sampled_from(selectors))
                b = draw(st.sampled_from(selectors))
                comb = draw(st.sampled_from(["and", "or", "not"]))
                selectors.append(a & b if comb == "and" else a | b if comb == "or" else ~a)
            else:
                keys = draw(st.sampled_from(sops))
                queries = draw(st.sampled_from(sops))
                selectors.append(select(keys, queries, draw(st.sampled_from(SELECT_OPS)),
                                        causal=draw(st.booleans())))
            if kind == "select":
                continue
        if kind == "aggregate":
            sel = draw(st.sampled_from(selectors))
            vals = draw(st.sampled_from(sops))
            reduction = draw(st.sampled_from(["mean", "max", "min"]))
            default = draw(st.integers(-1, 2))
            truncate = reduction == "mean" and draw(st.booleans())
            sops.append(aggregate(sel, vals, default=default, reduction=reduction,
                                  truncate=truncate))
        elif kind == "width":
            sops.append(selector_width(draw(st.sampled_from(selectors))))
    return sops[-1] if len(sops) > 2 else sops[draw(st.integers(0, 1))]


inputs = st.integers(1, 7).flatmap(
    lambda n: st.lists(st.lists(st.integers(0, 4), min_size=n, max_size=n),
                       min_size=1, max_size=5))


def as_float(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def program_text(prog) -> str:
    """The program, one operation per line (shown when a property fails)."""
    from rasp.source import describe_node
    lines = []
    for node in topological_order(prog):
        extra = ""
        if isinstance(node, Aggregate):
            extra = f" [{node.reduction}{', truncate' if node.truncate else ''}]"
        if isinstance(node, Select):
            extra = " [causal]" if node.causal else ""
        lines.append(f"{node.label} = {describe_node(node)}{extra}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------

@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), batch=inputs, causal=st.sampled_from([None, True]))
def test_batched_equals_one_sequence_at_a_time(prog, batch, causal):
    together = evaluate(prog, np.array(batch, dtype=np.int64), causal=causal)
    assert together.shape == (len(batch), len(batch[0]))
    for i, seq in enumerate(batch):
        alone = evaluate(prog, np.array([seq], dtype=np.int64), causal=causal)
        np.testing.assert_allclose(as_float(together[i]), as_float(alone[0]), rtol=1e-12,
                                   atol=1e-12, err_msg=program_text(prog))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), batch=inputs, causal=st.sampled_from([None, True]))
def test_matches_plain_python_reference(prog, batch, causal):
    got = evaluate(prog, np.array(batch, dtype=np.int64), causal=causal)
    for i, seq in enumerate(batch):
        want = reference_eval(prog, seq, causal_all=bool(causal))
        np.testing.assert_allclose(as_float(got[i]), as_float(want), rtol=1e-9, atol=1e-9,
                                   err_msg=program_text(prog))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 9), data=st.data())
def test_causal_selector_never_looks_ahead(n, data):
    seq = data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    op = data.draw(st.sampled_from(SELECT_OPS))
    sel = select(tokens_int, tokens_int, op, causal=True)
    m = evaluate(sel, np.array([seq]))[0]
    assert not np.any(np.triu(m, k=1))
    # selector width of a causal all-true select is the prefix length
    width = evaluate(selector_width(select(tokens_int, tokens_int, "TRUE", causal=True)),
                     np.array([seq]))[0]
    assert width.tolist() == list(range(1, n + 1))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), batch=inputs, causal=st.sampled_from([None, True]))
def test_chunked_evaluation_equals_one_batch(prog, batch, causal):
    import rasp.interpreter as interp
    x = np.array(batch, dtype=np.int64)
    whole = evaluate(prog, x, causal=causal)
    saved = interp._CHUNK_ELEMENTS
    interp._CHUNK_ELEMENTS = 1          # every sequence its own chunk
    try:
        chunked = evaluate(prog, x, causal=causal)
    finally:
        interp._CHUNK_ELEMENTS = saved
    assert chunked.shape == whole.shape
    np.testing.assert_allclose(as_float(chunked), as_float(whole), rtol=1e-12, atol=1e-12,
                               err_msg=program_text(prog))
