"""After the exhaustive part: deep aggregates and the combination of enumerated terms.

Deep aggregates complete the top operation against the target: ``aggregate(select(K, Q, ==),
tokens, default, max|min)`` found top-down for the targets no constant gives. The combination
(Alur et al. 2017, divide and conquer) builds a decision list ``c1 ? t1 : (c2 ? t2 : ...)`` of
enumerated terms and 0/1 conditions; a combined program is validated like any other and is an
upper bound, not certified shortest. Functions of the engine record ``e``
(:class:`analysis.prediction.raspl_search.engine._Engine`: its levels, layout and work counts).
"""

from __future__ import annotations

import numpy as np

from rasp.interpreter import Evaluator
from rasp.ir import Aggregate, Elementwise, Indices, Map, RASPError, Select, SequenceMap, Tokens

from .problem import _term_failing_row, matches_problem, tree_size
from .storage import _KIND_STR


def deep_aggregates(e, need: np.ndarray) -> list:
    """Aggregates ``aggregate(select(K, Q, ==), V, default, max | min)`` larger than the
    exhaustive part reached, found top-down: on the target positions ``need`` (those where the
    target is not its most frequent value) the value at query ``i`` must be the
    target ``y_i``, so for every key row ``K`` the query values that give ``y_i`` are one
    table ``allowed[i, q]`` (the reduction over the keys ``j <= i`` with ``K[j] == q``, or
    the default where there are none), and every query row ``Q`` of the pool is checked
    against it at once. ``K`` and ``Q`` come from the enumerated levels (sizes <=
    ``deep_key_size`` / ``deep_query_size``, at most ``deep_key_rows`` /
    ``deep_query_rows`` rows, smallest first), ``V`` is ``tokens``. Returns
    ``[(IR node, expression size, values at the target positions)]``, smallest first;
    these are terms for the combination (an upper bound, validated like any program)."""
    if e.lay.is_str or not need.any():
        return []
    key_size, query_size = int(e.g.get("deep_key_size", 3)), int(
        e.g.get("deep_query_size", 4))
    key_cap, query_cap = int(e.g.get("deep_key_rows", 2000)), int(
        e.g.get("deep_query_rows", 400_000))
    T = e.lay.T
    nS = int(need.sum())
    # the pools within the memory the enumeration and the combination's pool left: half for
    # the key rows' tables ([keys, nS, 256] bools: hit, empty, allowed and a temporary), a
    # quarter for the query values (uint8, and their parts), a quarter for the check of a
    # block of query rows
    left = _memory_left(e)
    key_cap = min(key_cap, max(1, left // 2 // (nS * 256 * 4)))
    query_cap = min(query_cap, max(1, left // 4 // (nS * 2)))
    left //= 4
    # the query positions (batch row, index) of the needed targets
    flat = e.lay.vflat[e.lay.tcols[need]]
    qb, qi = flat // T, flat % T
    y = e.lay.tvals[need]
    def rows_upto(max_size, cap):
        """Key / query candidates: int or index rows of levels 0..max_size, smallest
        first, at most ``cap``; their values in the ``[row, B*T]`` layout and sizes."""
        refs = []
        for k in sorted(e.store.rows):
            if k > max_size or len(refs) >= cap:
                break
            lv = e.store.rows[k]
            refs += [(k, int(i)) for i in np.flatnonzero(lv.kind != _KIND_STR)[
                : cap - len(refs)]]
        full_ = np.zeros((len(refs), e.lay.B * T), np.int16)
        for r, (k, i) in enumerate(refs):
            full_[r, e.lay.vflat] = e.store.rows[k].vals[i]
        return refs, full_, np.array([k for k, _ in refs], dtype=np.int64)

    kpool, full, ksizes = rows_upto(key_size, key_cap)
    # query rows: only their values at the needed query positions
    qpool, qparts = [], []
    cols = e.lay.tcols[need]
    for k in sorted(e.store.rows):
        if k > query_size or len(qpool) >= query_cap:
            break
        lv = e.store.rows[k]
        idx = np.flatnonzero(lv.kind != _KIND_STR)[: query_cap - len(qpool)]
        qpool += [(k, int(i)) for i in idx]
        step = max(1, e.chunk // max(1, cols.size))
        qparts += [(lv.vals[np.ix_(idx[a:a + step], cols)].astype(np.int16) + 128).astype(
            np.uint8) for a in range(0, idx.size, step)]
    if not kpool or not qpool:
        return []
    qsizes = np.array([k for k, _ in qpool], dtype=np.int64)
    Qv = np.concatenate(qparts)                                   # [Mq, nS] in 0..255
    del qparts
    # query rows per block of the check below ([16, nS, block] bools), from the memory left
    qblock = max(1, min(len(qpool), left // max(1, 16 * nS)))
    qvals = np.arange(-128, 128)
    out, seen = [], set()

    def late() -> bool:          # half the combination's work for the deep aggregates
        return e._cwork(0, stop=False) or e.combine_work > e.combine_budget / 2

    values = [("tokens", e.lay.tokens_row)]
    for vname, vrow in values:
        vfull = np.zeros(e.lay.B * T, np.int64)
        vfull[e.lay.vflat] = vrow
        for red in ("max", "min"):
            if late():
                break
            # per key row and needed query: which query values give the target through
            # the selected keys (hit), and which select no key (the default decides)
            e._cwork(len(kpool) * nS, stop=False)
            hit = np.zeros((len(kpool), nS, 256), bool)
            empty = np.zeros((len(kpool), nS, 256), bool)
            for s_ in range(nS):
                e._check_time()
                keys = full[:, qb[s_] * T: qb[s_] * T + qi[s_] + 1]         # [M, L]
                vv = vfull[qb[s_] * T: qb[s_] * T + qi[s_] + 1]              # [L]
                eq = keys[:, :, None] == qvals[None, None, :]               # [M, L, 256]
                fill = -32000 if red == "max" else 32000
                cand = np.where(eq, vv.astype(np.int16)[None, :, None], np.int16(fill))
                r_ = cand.max(axis=1) if red == "max" else cand.min(axis=1)
                has = eq.any(axis=1)
                hit[:, s_] = has & (r_ == y[s_])
                empty[:, s_] = ~has
            for d in e.lay.defaults:
                if late():
                    break
                allowed = hit | (empty & (d == y)[None, :, None])
                # a key row is viable when every needed query has some value to take
                viable = np.flatnonzero(allowed.any(axis=2).all(axis=1))
                for a in range(0, viable.size, 16):
                    if late():
                        break
                    kk = viable[a:a + 16]
                    e._cwork(kk.size * len(qpool), stop=False)
                    ak = allowed[kk]
                    got = []
                    for q0 in range(0, len(qpool), qblock):
                        qv = Qv[q0:q0 + qblock].T
                        kr_, qr_ = np.nonzero(ak[:, np.arange(nS)[:, None], qv].all(axis=1))
                        got.append((kr_, qr_ + q0))
                    krs = np.concatenate([g[0] for g in got])
                    qrs = np.concatenate([g[1] for g in got])
                    order = np.lexsort((qrs, krs))            # (key, query) row-major
                    for kr, qr in zip(krs[order], qrs[order]):
                        kr = int(kk[kr])
                        size = 2 + int(ksizes[kr]) + int(qsizes[qr])
                        key = (kpool[kr], qpool[int(qr)], vname, red, d)
                        if key in seen:
                            continue
                        seen.add(key)
                        out.append((size, key))
    out.sort(key=lambda x: x[0])
    terms = []
    for size, (kref, qref, vname, red, d) in out[: int(e.g.get("deep_terms", 200))]:
        if e.combine_work > 0.8 * e.combine_budget:
            break
        e._cwork(e.lay.Pn, stop=False)      # one evaluation on the batch
        K = e._node(e._ref(kref))
        Q = e._node(e._ref(qref))
        V = Tokens("asis").named("tokens") if vname == "tokens" else Indices()
        node = Aggregate(Select(K, Q, "==", causal=True), V, d, red)
        try:
            with np.errstate(all="ignore"):
                val = Evaluator(e.p.inputs, causal=True)(node)
        except (RASPError, ValueError, TypeError, OverflowError):
            continue
        got = val.reshape(-1)[e.lay.vflat][e.lay.tcols]
        if got.dtype.kind not in "iub":
            continue
        bad_row = _term_failing_row(node, e.validation)
        if bad_row is not None:
            # a chance fit of the batch: the validation example it gets wrong joins the
            # batch on the next round (counterexample-guided, as for whole programs)
            if bad_row not in e.counterexample_rows and len(
                    e.counterexample_rows) < 3:
                e.counterexample_rows.append(bad_row)
            continue
        terms.append((node, size, got.astype(np.int64)))
    return terms


class _Refs:
    """The combination's references: enumerated rows ``(level, row)`` kept as arrays (a tuple
    per row costs ~100 bytes), then other items (IR terms, comparisons) appended."""

    def __init__(self):
        self.parts: list = []
        self.extra: list = []
        self.n = 0

    def add_rows(self, level: int, rows: np.ndarray) -> None:
        self.parts.append((level, np.asarray(rows, np.int64)))

    def freeze(self) -> None:
        self.lev = np.concatenate([np.full(r.size, k, np.int64) for k, r in self.parts]
                                  or [np.zeros(0, np.int64)])
        self.idx = np.concatenate([r for _, r in self.parts] or [np.zeros(0, np.int64)])
        self.n, self.parts = self.lev.size, []

    def append(self, item) -> None:
        self.extra.append(item)

    def __len__(self) -> int:
        return self.n + len(self.extra)

    def __getitem__(self, t):
        t = int(t)
        if t < self.n:
            return (int(self.lev[t]), int(self.idx[t]))
        return self.extra[t - self.n]


def _flat(parts: list) -> np.ndarray:
    """One int64 array of arrays and numbers, in order."""
    return np.concatenate([np.atleast_1d(np.asarray(x, np.int64)) for x in parts]
                          or [np.zeros(0, np.int64)])


def _memory_left(e) -> int:
    """Bytes of the search's memory that what the enumeration keeps leaves to the combination."""
    return max(0, e.store.usable_bytes - e.store.used())


def combine(e):
    """Divide and conquer (Alur et al. 2017, "Scaling enumerative program synthesis via
    divide and conquer"): terms of the pool that are right on part of the targets are
    joined by ``where(c, term, rest)`` with conditions ``c`` (0/1 s-ops of the pool) that
    are true only where the term is right. The program found is validated like any other;
    it is an upper bound, not certified shortest."""
    levels = sorted(k for k in e.store.rows if len(e.store.rows[k]))
    refs, covs, costs = _Refs(), [], []
    crefs, conds, ccosts = _Refs(), [], []
    nT = len(e.lay.tcols)
    # the pool's bytes at their peak: terms twice (parts, then one array), conditions four
    # times (parts, one array, its negation, a step's columns); smallest levels first, the
    # pool stops growing where the search's memory ends (a search stopped by memory keeps
    # the terms that fit)
    left = start = _memory_left(e) * 3 // 4
    for k in levels:
        e._check_time()
        lv = e.store.rows[k]
        kind_ok = (lv.kind == _KIND_STR) == e.target_str
        step = max(1, e.chunk // max(1, nT))
        nz = np.concatenate([np.flatnonzero(((lv.vals[a:a + step, e.lay.tcols] == e.lay.tvals)
                                             & kind_ok[a:a + step, None]).any(axis=1)) + a
                             for a in range(0, len(lv), step)])
        b = np.flatnonzero(lv.binary)
        need = (2 * nz.size + 4 * b.size) * nT + 24 * (nz.size + b.size)
        if need > left:
            break
        left -= need
        refs.add_rows(k, nz)
        covs.append((lv.vals[nz][:, e.lay.tcols] == e.lay.tvals) & kind_ok[nz, None])
        costs.append(np.full(nz.size, k, np.int64))
        crefs.add_rows(k, b)
        conds.append(lv.vals[b][:, e.lay.tcols].astype(bool))
        ccosts.append(np.full(b.size, k, np.int64))
    refs.freeze()
    crefs.freeze()
    if not len(refs) or not len(crefs):
        return
    e.store.held_bytes = start - left          # the pool, while the combination runs
    try:
        _combine(e, refs, covs, costs, crefs, conds, ccosts)
    finally:
        e.store.held_bytes = 0


def _combine(e, refs, covs, costs, crefs, conds, ccosts):
    """:func:`combine` once its pool of terms and conditions is made."""
    if e.g.get("deep_aggregates", True):
        # the targets the most frequent target value (one constant term) does not give
        vals_, counts_ = np.unique(e.lay.tvals, return_counts=True)
        for node, size, vals in deep_aggregates(e, 
                e.lay.tvals != vals_[np.argmax(counts_)]):
            c = (vals == e.lay.tvals) & True
            if c.any():
                refs.append(("ir", node, vals))
                covs.append(c[None, :])
                costs.append(size)
    cov = np.concatenate(covs)
    covs.clear()                     # the parts (the caller's list too): one copy kept
    costs = _flat(costs)
    # conditions one size up, made lazily: comparisons of the best terms with constants
    # (term == c, term > c, term < c), on the target positions only
    top = np.lexsort((costs, -cov.sum(axis=1)))[:e.g.get("combine_terms", 4000)]
    consts = [int(c) for c in e.lay.int_consts]
    for t in top.tolist():
        if refs[t][0] == "ir":
            if e.lay.is_str:
                continue
            v = refs[t][2]
        else:
            k, i = refs[t]
            lv = e.store.rows[k]
            if lv.kind[i] == _KIND_STR or lv.binary[i]:
                continue
            v = lv.vals[i, e.lay.tcols]
        for c in consts:
            for op, f in (("eq", np.equal), ("gt", np.greater), ("lt", np.less)):
                crefs.append(("cmp", op, c, refs[t]))
                conds.append(f(v, c)[None, :])
                ccosts.append(int(costs[t]) + 1)
    C = np.concatenate(conds)
    conds.clear()
    notC = ~C
    ccosts = _flat(ccosts)
    nT = len(e.lay.tcols)
    beam = e.g.get("combine_beam", 6)

    def solve(S, depth):
        e._cwork(cov.shape[0])             # one step scans every term once
        gain = cov[:, S].sum(axis=1)
        full = np.flatnonzero(gain == S.sum())
        if full.size:
            t = full[np.argmin(costs[full])]
            yield ("term", refs[t])
            return
        if depth == 0:
            return
        order = np.lexsort((costs, -gain))[:beam * 4]
        options = []
        for t in order:
            if gain[t] == 0:
                break
            bad = S & ~cov[t]
            good = S & cov[t]
            for neg in (False, True):
                Cv = notC if neg else C
                okc = ~(Cv[:, bad].any(axis=1))
                if not okc.any():
                    continue
                g = (Cv[:, good]).sum(axis=1)
                g[~okc] = -1
                best = np.flatnonzero(g == g.max())
                ci = best[np.argmin(ccosts[best])]
                if g[ci] <= 0:
                    continue
                options.append((-int(g[ci]), int(costs[t] + ccosts[ci]), t, ci, neg))
        options.sort()
        for _g, _c, t, ci, neg in options[:beam]:
            Cv = ~C[ci] if neg else C[ci]
            rest_S = S & ~Cv
            for rest in solve(rest_S, depth - 1):
                yield ("where", crefs[ci], neg, ("term", refs[t]), rest)

    def term(ref):
        return ref[1] if ref[0] == "ir" else e._node(e._ref(ref))

    def build(tree):
        if tree[0] == "term":
            return term(tree[1])
        _, cref, neg, a, rest = tree
        if cref[0] == "cmp":
            _, op, const, tref = cref
            c = Map(Elementwise(op, const=const, const_side="right"), term(tref))
        else:
            c = e._node(e._ref(cref))
        a, r = build(a), build(rest)
        if neg:
            a, r = r, a
        return SequenceMap(Elementwise("ternary"), (c, a, r))

    tried = 0
    for tree in solve(np.ones(nT, bool), e.g.get("combine_depth", 4)):
        node = build(tree)
        tried += 1
        e._cwork(e.lay.Pn)                  # one evaluation on the batch
        if not matches_problem(node, e.p):
            continue
        if e.validate is None or e.validate(node):
            e.found = (node, tree_size(node))
            return
        if tried > 200:
            return
