"""Candidate families: every s-op of a size built from the levels below, as array operations.

Leaves and constants; maps (``x + 1``, ``x == c``, ...); sequence maps of two levels (one
``[Mx, My, P]`` broadcast per operation); ternaries (one ``where`` per condition row); selector
widths; ``select(K, Q, op)`` of a key row against every query row; aggregates of a block of
selectors over every value row (one batched matrix product for means, a masked reduction for
max/min). Each family is cut into jobs for the worker threads and committed in emission order
(``_Engine._families``). Functions of the engine record ``e``
(:class:`analysis.prediction.raspl_search.engine._Engine`: ``e.lay`` the batch layout,
``e.store.rows`` / ``e.store.sels`` the levels kept so far; emissions go through ``e._emit`` /
``e._prep``).
"""

from __future__ import annotations

import itertools

import numpy as np

from .kernels import (agg_gemm, agg_maxmin, cached_rank_table, dense_cache, dense_sels,
                      full_layout, sel_entries)
from .storage import _CHUNK, _KIND_IDX, _KIND_INT, _KIND_STR, _SEL_OPS


def leaves(e):
    e._emit(0, e.lay.tokens_row[None, :], _KIND_STR if e.lay.is_str else _KIND_INT,
            lambda i: ("tokens",))
    e._emit(0, e.lay.index_row[None, :], _KIND_IDX, lambda i: ("indices",))


def constants(e):
    if e.lay.is_str:
        cs = [c for c in e.lay.str_consts]
        vals = np.array([[e.lay.code[c]] * e.lay.Pn for c in cs], np.int64).reshape(-1, e.lay.Pn)
        e._emit(1, vals, _KIND_STR, lambda i: ("full", cs[i]))
    cs = [int(c) for c in e.lay.int_consts]
    vals = np.array([[c] * e.lay.Pn for c in cs], np.int64).reshape(-1, e.lay.Pn)
    e._emit(1, vals, _KIND_INT, lambda i: ("full", cs[i]))


def maps(e, k):
    e._families(map_jobs(e, k))


def map_jobs(e, k):
    """Jobs (:meth:`~.engine._Engine._families`) of the maps of level k - 1: one per operation and
    constant."""
    lv = e._lv(k - 1)
    if lv is None:
        return
    X = lv.vals.astype(np.int16)
    kind = lv.kind
    arith = kind != _KIND_STR
    num = np.flatnonzero(arith & ~lv.binary)
    ids = [(k - 1, int(i)) for i in range(len(lv))]
    def job(vals, kinds, rec, checked=True):
        return lambda: [(k, e._prep(k, vals(), kinds, checked), rec)]
    sub = np.flatnonzero(arith)
    for c in (1, -1):
        yield job(lambda c=c: X[sub] + c, kind[sub],
                  lambda i, c=c: ("map", "add", c, ids[sub[i]]))
    for c in e.lay.int_consts:
        for op, f in (("eq", np.equal), ("lt", np.less), ("gt", np.greater)):
            yield job(lambda c=c, f=f: f(X[num], c).astype(np.int8), _KIND_INT,
                      lambda i, c=c, op=op: ("map", op, int(c), ids[num[i]]), False)
    b = np.flatnonzero(lv.binary)
    yield job(lambda: 1 - X[b], _KIND_INT, lambda i: ("map", "not", None, ids[b[i]]),
              False)
    if e.lay.is_str:
        s = np.flatnonzero(kind == _KIND_STR)
        for c in e.lay.str_consts:
            yield job(lambda code=e.lay.code[c]: (X[s] == code).astype(np.int16), _KIND_INT,
                      lambda i, c=c: ("map", "eq", c, ids[s[i]]))


def pair_blocks(e, nx, ny):
    step = max(1, _CHUNK // max(1, ny * e.lay.Pn))
    for a in range(0, nx, step):
        yield a, min(nx, a + step)


def seqmaps(e, k):
    e._families(seqmap_jobs(e, k))


def seqmap_jobs(e, k):
    """Jobs (:meth:`~.engine._Engine._families`) of the sequence maps of size k: one per operation, level
    pair and block of x rows."""
    for i in range(0, k):
        j = k - 1 - i
        lx, ly = e._lv(i), e._lv(j)
        if lx is None or ly is None:
            continue
        X, Y = lx.vals.astype(np.int16), ly.vals.astype(np.int16)
        kx, ky = lx.kind, ly.kind
        fams = []
        # arithmetic: neither index-derived (rule 3) nor strings
        arith = (_KIND_INT,)
        xa, ya = np.flatnonzero(np.isin(kx, arith)), np.flatnonzero(np.isin(ky, arith))
        fams.append(("add", xa, ya, np.add, True))
        fams.append(("sub", xa, ya, np.subtract, False))
        cmp_ok = (_KIND_INT, _KIND_IDX)
        xn, yn = np.flatnonzero(np.isin(kx, cmp_ok)), np.flatnonzero(np.isin(ky, cmp_ok))
        fams.append(("eq", xn, yn, np.equal, True))
        fams.append(("lt", xn, yn, np.less, False))
        if e.lay.is_str:
            xs, ys = np.flatnonzero(kx == _KIND_STR), np.flatnonzero(ky == _KIND_STR)
            fams.append(("eq", xs, ys, np.equal, True))
        xb, yb = np.flatnonzero(lx.binary), np.flatnonzero(ly.binary)
        fams.append(("and", xb, yb, np.minimum, True))
        fams.append(("or", xb, yb, np.maximum, True))
        for op, xs_, ys_, f, comm in fams:
            if xs_.size == 0 or ys_.size == 0:
                continue
            Yv = Y[ys_]
            for a, b in pair_blocks(e, xs_.size, ys_.size):
                xi = xs_[a:b]
                ny = ys_.size
                # x op y == y op x: only pairs with x <= y
                tri = xi[:, None] <= ys_[None, :] if comm and i == j else None
                pairs = np.argwhere(tri) if tri is not None else None

                def rec(r, xi=xi, op=op, pairs=pairs, ny=ny, ys_=ys_, i=i, j=j):
                    if pairs is not None:
                        a_, b_ = pairs[r]
                    else:
                        a_, b_ = divmod(r, ny)
                    return ("seq", op, (i, int(xi[a_])), (j, int(ys_[b_])))

                def job(xi=xi, tri=tri, f=f, X=X, Yv=Yv, kx=kx, ky=ky, ys_=ys_, op=op,
                        rec=rec):
                    out = f(X[xi][:, None, :], Yv[None, :, :])
                    out = out[tri] if tri is not None else out.reshape(-1, e.lay.Pn)
                    return [(k, e._prep(k, out.astype(np.int16, copy=False), _KIND_INT,
                                        op in ("add", "sub")), rec)]
                yield job


def wheres(e, k):
    if e.g["where"]:
        e._families(where_jobs(e, k))


def where_jobs(e, k):
    """Jobs (:meth:`~.engine._Engine._families`) of the ternaries of size k: one per condition row and
    block of x rows."""
    for a in range(1, k):
        lc = e._lv(a)
        if lc is None:
            continue
        cs = np.flatnonzero(lc.binary)
        if cs.size == 0:
            continue
        for b in range(0, k - a):
            c_ = k - 1 - a - b
            lx, ly = e._lv(b), e._lv(c_)
            if lx is None or ly is None:
                continue
            X, Y = lx.vals.astype(np.int16), ly.vals.astype(np.int16)
            for strness in ((False, True) if e.lay.is_str else (False,)):
                xs_ = np.flatnonzero((lx.kind == _KIND_STR) == strness)
                ys_ = np.flatnonzero((ly.kind == _KIND_STR) == strness)
                if xs_.size == 0 or ys_.size == 0:
                    continue
                Xs, Ys = X[xs_], Y[ys_]
                kx, ky = lx.kind[xs_], ly.kind[ys_]
                kind = np.maximum(kx[:, None], ky[None, :]).reshape(-1)
                for ci in cs:
                    cond = lc.vals[ci].astype(bool)
                    for x0, x1 in pair_blocks(e, xs_.size, ys_.size):
                        ny = ys_.size

                        def rec(r, x0=x0, ci=ci, ny=ny, xs_=xs_, ys_=ys_, b=b, c_=c_,
                                a=a):
                            p_, q_ = divmod(r, ny)
                            return ("where", (a, int(ci)), (b, int(xs_[x0 + p_])),
                                    (c_, int(ys_[q_])))

                        def job(cond=cond, x0=x0, x1=x1, Xs=Xs, Ys=Ys, kind=kind, ny=ny,
                                rec=rec):
                            out = np.where(cond[None, None, :], Xs[x0:x1, None, :],
                                           Ys[None, :, :]).reshape(-1, e.lay.Pn)
                            return [(k, e._prep(k, out, kind[x0 * ny:x1 * ny], False),
                                     rec)]
                        yield job


def widths(e, k):
    sl = e.store.sels.get(k - 1)
    if sl is None or not len(sl):
        return
    # a count of positions is a position (rasp.analyses.raspl rule 3)
    e._emit(k, sl.W, _KIND_IDX,
            lambda i: ("sw", (k - 1, i)), checked=False)


def aggregates(e, k):
    """All aggregates of a selector level with a value level, many selectors at once:
    mean = one gemm per batch row ``[M, k] @ [k, s*q]`` (:func:`.kernels.agg_gemm`); max /
    min = the same product over ``2^(b * rank)`` (:func:`.kernels.agg_maxmin`)."""
    BTT = e.lay.B * e.lay.T * e.lay.T
    pairs = [(i, k - 1 - i) for i in range(1, k)]
    e._families(itertools.chain.from_iterable(
        aggregate_jobs(e, k, i, j, e.store.sels[i], e.store.rows[j], BTT) for i, j in pairs
        if e.store.sels.get(i) is not None and len(e.store.sels[i]) and e._lv(j) is not None))


def aggregate_jobs(e, k, i, j, sl, lv, BTT):
    """The jobs of :func:`aggregates` for selector level i and value level j: blocks of
    selectors, each one gemm (mean) or one rank gemm (max / min). Shared caches (dense
    selector matrices, layouts, rank tables) are made here, on the main thread."""
    M = len(lv)
    kinds = lv.kind
    num = np.flatnonzero(kinds != _KIND_STR)
    multi = sl.maxw > 1
    V = full_layout(e, j)                  # [B, M, T] float32
    Vi = V[:, num].astype(np.int16)
    dense_cache(e, sl)
    for red in ("mean", "max", "min"):
        if red != "mean" and not e.g["maxmin"]:
            continue
        # a selector that never selects two keys: mean = max = min (only mean);
        # strings only move (mean of one key)
        srows = np.arange(len(sl)) if red == "mean" else np.flatnonzero(multi)
        if srows.size == 0:
            continue
        if red != "mean":
            cached_rank_table(e, lv, num, red)
        cols = np.arange(M) if red == "mean" else num
        # per selector: its matrix (bool + float) and the output rows (float)
        per = cols.size * e.lay.B * e.lay.T * 8 + BTT * 9
        step = max(1, (_CHUNK * 8) // per)
        for a in range(0, srows.size, step):
            def job(rows=srows[a:a + step], red=red, cols=cols):
                S = dense_sels(e, sl, rows)              # [s, B, q, k] float32
                if red == "mean":
                    sums = agg_gemm(V, S, e.lay.vflat)               # [s, M, P]
                    wq = np.maximum(sl.W[rows], 1).astype(np.float32)[:, None, :]
                    # exact quotients of integers are exact in IEEE division, and the
                    # cast truncates towards zero: the RASP-L mean (trunc) in one pass
                    out = np.divide(sums, wq, out=sums).astype(np.int16)
                else:
                    out = agg_maxmin(cached_rank_table(e, lv, num, red), Vi, S, red,
                                     e.lay.vflat)                    # [s, M', P]
                return agg_emissions(e, k, sl, rows, out, kinds, cols, multi, i, j, red)
            yield job


def agg_emissions(e, k, sl, rows, out, kinds, cols, multi, i, j, red) -> list:
    """The emissions ``[(level, prep, recipe)]`` of the aggregates ``out`` ``[s, len(cols),
    P]`` of selectors ``rows`` (level i) over value rows ``cols`` (level j), once per
    default (a default other than the first only for selectors with an empty selection
    somewhere)."""
    ems = []
    ns = len(rows)
    if red == "mean":
        okc = (kinds[cols] != _KIND_STR)[None, :] | ~multi[rows][:, None]
    else:
        okc = np.ones((ns, cols.size), bool)
    empty = sl.W[rows] == 0                               # [s, P]
    he = sl.has_empty[rows]
    for di, d in enumerate(e.lay.defaults):
        sub = np.flatnonzero(he) if di else np.arange(ns)
        if sub.size == 0:
            continue
        dv = e.lay.code[d] if e.lay.is_str else d
        o = out if di == 0 else out[sub]
        if he.any():                  # one pass: the default where nothing is selected
            o = np.where(empty[sub][:, None, :], np.int16(dv), o)
        sel_ok = okc[sub].reshape(-1)
        o = o.reshape(-1, e.lay.Pn)
        if not sel_ok.all():
            o = o[sel_ok]
        pairs = np.argwhere(okc[sub])
        nc = len(cols)

        def rec(r_, sub=sub, rows=rows, pairs=pairs, d=d, red=red, cols=cols, i=i, j=j):
            s_, c_ = pairs[r_]
            return ("agg", (i, int(rows[sub[s_]])), (j, int(cols[c_])), d, red)
        kk = np.broadcast_to(kinds[cols][None, :], (sub.size, nc)).reshape(-1)
        ems.append((k, e._prep(k, o, kk[sel_ok], checked=False), rec))
    return ems


def selects(e, k):
    if k == 1:
        ent = np.ones((1, e.lay.E), bool)
        e._emit_sels(1, ent, lambda i: ("true",))
    for i in range(0, k):
        j = k - 1 - i
        lk, lq = e._lv(i), e._lv(j)
        if lk is None or lq is None:
            continue
        for strness in ((False, True) if e.lay.is_str else (False,)):
            kk = np.flatnonzero((lk.kind == _KIND_STR) == strness)
            qq = np.flatnonzero((lq.kind == _KIND_STR) == strness)
            if kk.size == 0 or qq.size == 0:
                continue
            ops = ("==", "!=") if strness else tuple(_SEL_OPS)
            Qv = lq.vals[qq].astype(np.int16)
            nq = qq.size
            # key rows in blocks whose one-hot values and gathers fit in _CHUNK elements
            step = max(1, _CHUNK // max(1, nq * e.lay.Pn))

            def jobs(kk=kk, qq=qq, Qv=Qv, nq=nq, ops=ops, lk=lk, i=i, j=j, step=step):
                for a in range(0, kk.size, step):
                    if not e.store.storing:
                        return
                    yield lambda kb=kk[a:a + step]: e._select_emissions(
                        k, i, j, lk.vals[kb].astype(np.int16), Qv, kb, qq, ops)
            e._families(jobs())
            if not e.store.storing:
                return
    if e.g["sel_andor"]:
        for i in range(1, k):
            j = k - 1 - i
            if j < i:
                continue
            a_, b_ = e.store.sels.get(i), e.store.sels.get(j)
            if a_ is None or b_ is None or not len(a_) or not len(b_):
                continue
            bstep = max(1, _CHUNK // e.lay.E)
            for b0 in range(0, len(b_), bstep):
                eb = sel_entries(e, b_, np.arange(b0, min(b0 + bstep, len(b_))))
                for x in range(len(a_)):
                    ex = sel_entries(e, a_, np.array([x]))
                    for name, f in (("and", np.logical_and), ("or", np.logical_or)):
                        ent = f(ex, eb)
                        e._emit_sels(k, ent, lambda r, x=x, name=name, i=i, j=j, b0=b0:
                                        (name, (i, x), (j, b0 + r)))


def sop_level(e, k):
    if k == 1:
        constants(e)
    # attention first (aggregates and widths), then the elementwise families: the order
    # inside a size changes nothing certified, only which program of that size is met first
    maps(e, k)
    widths(e, k)
    aggregates(e, k)
    seqmaps(e, k)
    wheres(e, k)
    if k in e.store.rows:
        e.store.rows[k].freeze()


def sel_level(e, k):
    selects(e, k)
    if k in e.store.sels:
        e.store.sels[k].freeze(e.lay.nbytes, e.lay.Pn)
