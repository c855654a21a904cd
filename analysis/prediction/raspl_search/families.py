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
                      full_layout, rank_table, sel_entries)
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
    """Jobs (:meth:`~.engine._Engine._families`) of the maps of level k - 1: one emission per
    operation and constant, cut into blocks of rows (:func:`row_parts`)."""
    lv = e._lv(k - 1)
    if lv is None:
        return
    X = lv.vals
    kind = lv.kind
    arith = kind != _KIND_STR
    num = np.flatnonzero(arith & ~lv.binary)
    lev = k - 1

    def jobs(rows, vals, kinds, rec, checked=True):
        # vals(x): the values of the int16 rows x; kinds: [len(rows)] or a scalar
        for a, b, part in row_parts(e, rows.size):
            def job(a=a, b=b, part=part):
                kk = kinds[a:b] if isinstance(kinds, np.ndarray) else kinds
                return [(k, e._prep(k, vals(X[rows[a:b]].astype(np.int16)), kk, checked),
                         rec, part)]
            yield job
    sub = np.flatnonzero(arith)
    for c in (1, -1):
        yield from jobs(sub, lambda x, c=c: x + c, kind[sub],
                        lambda i, c=c: ("map", "add", c, (lev, int(sub[i]))))
    for c in e.lay.int_consts:
        for op, f in (("eq", np.equal), ("lt", np.less), ("gt", np.greater)):
            yield from jobs(num, lambda x, c=c, f=f: f(x, c).astype(np.int8), _KIND_INT,
                            lambda i, c=c, op=op: ("map", op, int(c), (lev, int(num[i]))),
                            False)
    b = np.flatnonzero(lv.binary)
    yield from jobs(b, lambda x: 1 - x, _KIND_INT,
                    lambda i: ("map", "not", None, (lev, int(b[i]))), False)
    if e.lay.is_str:
        s = np.flatnonzero(kind == _KIND_STR)
        for c in e.lay.str_consts:
            yield from jobs(s, lambda x, code=e.lay.code[c]: (x == code).astype(np.int16),
                            _KIND_INT, lambda i, c=c: ("map", "eq", c, (lev, int(s[i]))))


def row_parts(e, n: int):
    """``(a, b, part)``: rows ``a:b`` of an emission of ``n`` rows, in blocks of at most
    ``e.chunk`` elements; ``part`` = ``(a, n, last)`` for
    :meth:`~.engine._Engine._commit` (the candidates count once, as the uncut emission's)."""
    step = max(1, e.chunk // max(1, e.lay.Pn))
    if n == 0:
        yield 0, 0, (0, 0, True)
        return
    for a in range(0, n, step):
        b = min(n, a + step)
        yield a, b, (a, n, b == n)


def _fits_once(e, rows: int) -> bool:
    """Whether an int16 copy of ``rows`` rows, made once for a family, fits an eighth of the
    memory for temporaries (else each block makes its own)."""
    return rows * e.lay.Pn * 2 <= e.store.work_bytes // 8


def grid_parts(e, nx: int, ny: int):
    """Blocks ``(x0, x1, y0, y1)`` of an ``[nx, ny]`` family of rows in row-major order (the
    order of its emission), each at most ``e.chunk`` elements: whole blocks of x rows, or,
    when one x row is too large, blocks of its y rows."""
    per = max(1, ny * e.lay.Pn)
    if nx * per <= e.chunk:
        yield 0, nx, 0, ny
        return
    if per <= e.chunk:
        gx = max(1, e.chunk // per)
        for x0 in range(0, nx, gx):
            yield x0, min(nx, x0 + gx), 0, ny
        return
    gy = max(1, e.chunk // max(1, e.lay.Pn))
    for x0 in range(nx):
        for y0 in range(0, ny, gy):
            yield x0, x0 + 1, y0, min(ny, y0 + gy)


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
        X, Y = lx.vals, ly.vals
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
            # the y rows as int16 once when they fit a block, else per block
            Yv = Y[ys_].astype(np.int16) if _fits_once(e, ys_.size) else None
            ny = ys_.size
            for a, b in pair_blocks(e, xs_.size, ys_.size):
                xi = xs_[a:b]
                # x op y == y op x: only pairs with x <= y (ys_ ascending: a suffix per row)
                b0 = np.searchsorted(ys_, xi) if comm and i == j else None
                starts = None if b0 is None else np.concatenate([[0], np.cumsum(ny - b0)])

                def rec(r, xi=xi, op=op, b0=b0, starts=starts, ny=ny, ys_=ys_, i=i, j=j):
                    if b0 is not None:
                        a_ = int(np.searchsorted(starts, r, side="right")) - 1
                        b_ = int(b0[a_]) + r - int(starts[a_])
                    else:
                        a_, b_ = divmod(r, ny)
                    return ("seq", op, (i, int(xi[a_])), (j, int(ys_[b_])))
                total = (b - a) * ny if b0 is None else int(starts[-1])
                parts = list(grid_parts(e, b - a, ny))
                done = 0
                for n_, (x0, x1, y0, y1) in enumerate(parts):
                    tri = None if b0 is None else \
                        np.arange(y0, y1)[None, :] >= b0[x0:x1, None]
                    cnt = (x1 - x0) * (y1 - y0) if tri is None else int(tri.sum())
                    part = (done, total, n_ == len(parts) - 1)
                    done += cnt

                    def job(xr=xi[x0:x1], y0=y0, y1=y1, tri=tri, f=f, X=X, Y=Y, Yv=Yv,
                            ys_=ys_, op=op, rec=rec, part=part):
                        yv = Yv[y0:y1] if Yv is not None else Y[ys_[y0:y1]].astype(np.int16)
                        out = f(X[xr].astype(np.int16)[:, None, :], yv[None, :, :])
                        out = out[tri] if tri is not None else out.reshape(-1, e.lay.Pn)
                        return [(k, e._prep(k, out.astype(np.int16, copy=False), _KIND_INT,
                                            op in ("add", "sub")), rec, part)]
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
            X, Y = lx.vals, ly.vals
            for strness in ((False, True) if e.lay.is_str else (False,)):
                xs_ = np.flatnonzero((lx.kind == _KIND_STR) == strness)
                ys_ = np.flatnonzero((ly.kind == _KIND_STR) == strness)
                if xs_.size == 0 or ys_.size == 0:
                    continue
                ny = ys_.size
                # the rows as int16 once when they fit a block, else per block
                Xs = X[xs_].astype(np.int16) if _fits_once(e, xs_.size) else None
                Ys = Y[ys_].astype(np.int16) if _fits_once(e, ny) else None
                kx, ky = lx.kind[xs_], ly.kind[ys_]
                for ci in cs:
                    cond = lc.vals[ci].astype(bool)
                    for x0, x1 in pair_blocks(e, xs_.size, ys_.size):

                        def rec(r, x0=x0, ci=ci, ny=ny, xs_=xs_, ys_=ys_, b=b, c_=c_,
                                a=a):
                            p_, q_ = divmod(r, ny)
                            return ("where", (a, int(ci)), (b, int(xs_[x0 + p_])),
                                    (c_, int(ys_[q_])))
                        parts = list(grid_parts(e, x1 - x0, ny))
                        for n_, (u0, u1, y0, y1) in enumerate(parts):
                            part = (u0 * ny + y0, (x1 - x0) * ny, n_ == len(parts) - 1)

                            def job(cond=cond, u0=x0 + u0, u1=x0 + u1, y0=y0, y1=y1, Xs=Xs,
                                    Ys=Ys, rec=rec, part=part, X=X, Y=Y, xs_=xs_, ys_=ys_,
                                    kx=kx, ky=ky):
                                xv = Xs[u0:u1] if Xs is not None else \
                                    X[xs_[u0:u1]].astype(np.int16)
                                yv = Ys[y0:y1] if Ys is not None else \
                                    Y[ys_[y0:y1]].astype(np.int16)
                                out = np.where(cond[None, None, :], xv[:, None, :],
                                               yv[None, :, :]).reshape(-1, e.lay.Pn)
                                kind = np.maximum(kx[u0:u1, None], ky[None, y0:y1]).reshape(-1)
                                return [(k, e._prep(k, out, kind, False), rec, part)]
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
    selector matrices, layouts, rank tables) are made here, on the main thread, when the
    search's memory holds them; a block larger than the memory for temporaries is cut into
    parts (:func:`aggregate_parts`) that emit the same candidates in the same order."""
    M = len(lv)
    kinds = lv.kind
    num = np.flatnonzero(kinds != _KIND_STR)
    multi = sl.maxw > 1
    B, T = e.lay.B, e.lay.T
    e._check_time()
    V = full_layout(e, j) if getattr(lv, "_full", None) is not None or \
        e.store.fits(M * B * T * 4) else None                 # [B, M, T] float32
    Vi = None
    dense_cache(e, sl)
    for red in ("mean", "max", "min"):
        if red != "mean" and not e.g["maxmin"]:
            continue
        # a selector that never selects two keys: mean = max = min (only mean);
        # strings only move (mean of one key)
        srows = np.arange(len(sl)) if red == "mean" else np.flatnonzero(multi)
        if srows.size == 0:
            continue
        table = None
        if red != "mean" and V is not None:
            e._check_time()
            table = cached_rank_table(e, lv, num, red, fit=True)
            if table is not None and Vi is None:
                e.store.need(num.size * B * T * 2, "the value rows of the aggregates")
                Vi = V[:, num].astype(np.int16)
        cols = np.arange(M) if red == "mean" else num
        # per selector: its matrix (bool + float) and the output rows (float)
        per = cols.size * B * T * 8 + BTT * 9
        step = max(1, (_CHUNK * 8) // per)
        whole = (V is not None and (red == "mean" or table is not None)
                 and min(step, srows.size) * per <= 8 * e.chunk)
        for a in range(0, srows.size, step):
            rows = srows[a:a + step]
            if not whole:
                yield from aggregate_parts(e, k, i, j, sl, lv, rows, red, cols, multi, per,
                                           V, Vi, table)
                continue

            def job(rows=rows, red=red, cols=cols, table=table, Vi=Vi):
                S = dense_sels(e, sl, rows)              # [s, B, q, k] float32
                if red == "mean":
                    sums = agg_gemm(V, S, e.lay.vflat)               # [s, M, P]
                    wq = np.maximum(sl.W[rows], 1).astype(np.float32)[:, None, :]
                    # exact quotients of integers are exact in IEEE division, and the
                    # cast truncates towards zero: the RASP-L mean (trunc) in one pass
                    out = np.divide(sums, wq, out=sums).astype(np.int16)
                else:
                    out = agg_maxmin(table, Vi, S, red, e.lay.vflat)  # [s, M', P]
                return agg_emissions(e, k, sl, rows, out, kinds, cols, multi, i, j, red)
            yield job


def _agg_values(e, sl, lv, rows, cols, c0, c1, red, V, table):
    """``[len(rows), c1 - c0, P]`` int16 aggregates of selectors ``rows`` over the value rows
    ``cols[c0:c1]`` (blocks of the level's cached layout and rank table when given, else made
    for these rows only)."""
    S = dense_sels(e, sl, rows)
    B, T, vflat = e.lay.B, e.lay.T, e.lay.vflat
    cb = cols[c0:c1]
    if V is None:
        f = np.zeros((cb.size, B * T), np.float32)
        f[:, vflat] = lv.vals[cb]
        Vb = f.reshape(cb.size, B, T).transpose(1, 0, 2)
    elif red == "mean":
        Vb = V[:, c0:c1]                          # cols = every row: a view
    else:
        Vb = V[:, cb]
    if red == "mean":
        sums = agg_gemm(Vb, S, vflat)
        wq = np.maximum(sl.W[rows], 1).astype(np.float32)[:, None, :]
        return np.divide(sums, wq, out=sums).astype(np.int16)
    t = rank_table(lv.vals[cb], red, B, T, vflat) if table is None else \
        _table_block(table, c0, c1)
    return agg_maxmin(t, Vb.astype(np.int16), S, red, vflat)


def _table_block(table: tuple, c0: int, c1: int) -> tuple:
    """The rank table (:func:`.kernels.rank_table`) of rows ``c0:c1`` of a table's rows."""
    i32, W32, i64, W64, val_of, fast, bits = table
    a, b = np.searchsorted(i32, (c0, c1))
    u, v = np.searchsorted(i64, (c0, c1))
    return (i32[a:b] - c0, W32[:, a:b], i64[u:v] - c0, W64[:, u:v], val_of[c0:c1],
            fast[c0:c1], bits)


def aggregate_parts(e, k, i, j, sl, lv, rows, red, cols, multi, per, V, Vi, table):
    """The jobs of one block of selectors ``rows`` cut to the memory for temporaries: per
    default, the block's emission (as :func:`agg_emissions` makes it) in parts of a few
    selectors over every value row or, when one selector is too large, of one selector
    over blocks of value rows (rank tables then made per block)."""
    kinds = lv.kind
    B, T = e.lay.B, e.lay.T
    sb = max(1, (8 * e.chunk) // per)
    cb = cols.size if per <= 8 * e.chunk else \
        max(1, (8 * e.chunk - B * T * T * 9) // (B * T * 8))
    e.store.need(min(cb, cols.size) * B * T * 8 + B * T * T * 9,
                 "an aggregate of one selector", 1)
    he = sl.has_empty[rows]
    empty = sl.W[rows] == 0
    for di, d in enumerate(e.lay.defaults):
        sub = np.flatnonzero(he) if di else np.arange(rows.size)
        if sub.size == 0:
            continue
        dv = e.lay.code[d] if e.lay.is_str else d
        okc = (kinds[cols] != _KIND_STR)[None, :] | ~multi[rows[sub]][:, None] \
            if red == "mean" else np.ones((sub.size, cols.size), bool)
        total = int(okc.sum())
        rec = _agg_rec(okc, rows, sub, cols, d, red, i, j)
        blocks = [(s0, min(sub.size, s0 + sb), 0, cols.size)
                  for s0 in range(0, sub.size, sb)] if cb >= cols.size else \
            [(s0, s0 + 1, c0, min(cols.size, c0 + cb)) for s0 in range(sub.size)
             for c0 in range(0, cols.size, cb)]
        done = 0
        for n_, (s0, s1, c0, c1) in enumerate(blocks):
            ok = okc[s0:s1, c0:c1]
            part = (done, total, n_ == len(blocks) - 1)
            done += int(ok.sum())

            def job(s0=s0, s1=s1, c0=c0, c1=c1, ok=ok, part=part, dv=dv, sub=sub, rec=rec,
                    table=table):
                o = _agg_values(e, sl, lv, rows[sub[s0:s1]], cols, c0, c1, red, V, table)
                if he[sub[s0:s1]].any():
                    o = np.where(empty[sub[s0:s1]][:, None, :], np.int16(dv), o)
                o = o.reshape(-1, e.lay.Pn)
                sel_ok = ok.reshape(-1)
                if not sel_ok.all():
                    o = o[sel_ok]
                kk = np.broadcast_to(kinds[cols[c0:c1]][None, :], ok.shape).reshape(-1)
                return [(k, e._prep(k, o, kk[sel_ok], checked=False), rec, part)]
            yield job


def _agg_rec(okc, rows, sub, cols, d, red, i, j):
    """The recipe of row ``r`` of an emission of aggregates ``[selectors rows[sub], cols]``
    filtered by ``okc`` (row-major), computed when asked (no table of pairs kept)."""
    full = okc.all(axis=1)
    starts = np.concatenate([[0], np.cumsum(okc.sum(axis=1))])
    colsok = None if full.all() else np.flatnonzero(okc[int(np.argmin(full))])

    def rec(r_):
        s_ = int(np.searchsorted(starts, r_, side="right")) - 1
        c_ = r_ - int(starts[s_])
        if not full[s_]:
            c_ = int(colsok[c_])
        return ("agg", (i, int(rows[sub[s_]])), (j, int(cols[c_])), d, red)
    return rec


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
        nc = len(cols)
        rec = _agg_rec(okc[sub], rows, sub, cols, d, red, i, j)
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
            e.store.need(nq * e.lay.Pn * 2, "the query rows of the selectors")

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
            bstep = max(1, e.chunk // e.lay.E)
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
    e.store.end_level()


def sel_level(e, k):
    selects(e, k)
    if k in e.store.sels:
        e.store.sels[k].freeze(e.lay.nbytes, e.lay.Pn)
    e.store.end_level()
