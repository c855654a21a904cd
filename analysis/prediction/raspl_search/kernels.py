"""Array kernels of the engine: selector entries and matrices, aggregate products, rank tables.

A selector's causal entries ``[E]`` (E = causal (query, key) pairs of the batch), its dense
``[B, q, k]`` float32 matrices (cached up to a memory bound), the mean aggregate as a batched
matrix product ``[S, B, q, k] x [V, B, k]``, and max/min aggregates through rank tables (exact:
float32 only when every sum fits).

Functions, no state of their own: the aggregate kernels of arrays (:func:`agg_gemm`,
:func:`rank_table`, :func:`agg_maxmin`); the fingerprints and selector entries of the batch
layout record (:class:`.storage.Layout`: :func:`row_hash`, :func:`sel_hash`,
:func:`select_hashes`, :func:`select_entries`); and those that read the levels kept and the
caches on them, of the engine record ``e`` (``e.lay``, ``e.store.rows``, ``e.store.sels``:
:func:`sel_entries`, :func:`sel_matrices`, :func:`dense_cache`, :func:`dense_sels`,
:func:`cached_rank_table`, :func:`full_layout`).
"""

from __future__ import annotations

import numpy as np

from .storage import _CHUNK, _DENSE_BYTES, _OP_COEF, _SEL_OPS, _STRUCT_OPS, _SelLevel


def sel_entries(e, sl: _SelLevel, rows: np.ndarray) -> np.ndarray:
    """``[len(rows), E]`` bool causal entries of the selectors ``rows`` of a level (packed
    rows unpacked, structured rows compared)."""
    rows = np.asarray(rows, np.int64)
    ent = np.empty((rows.size, e.lay.E), bool)
    d = sl.dense[rows]
    isd = d >= 0
    if isd.any():
        ent[isd] = np.unpackbits(sl.P[d[isd]], axis=1)[:, :e.lay.E].astype(bool)
    st = np.flatnonzero(~isd)
    if st.size:
        x = rows[st]
        kv = rows_of(e, sl.klev[x], sl.krow[x])
        qv = rows_of(e, sl.qlev[x], sl.qrow[x])
        for code in np.unique(sl.opc[x]).tolist():
            w = np.flatnonzero(sl.opc[x] == code)
            ent[st[w]] = select_entries(e.lay, kv[w], qv[w], code)
    return ent


def select_entries(lay, K: np.ndarray, Q: np.ndarray, opc: int) -> np.ndarray:
    """``[n, E]`` bool causal entries of ``select(K[i], Q[i], _STRUCT_OPS[opc])`` for key
    and query rows ``K``, ``Q`` ``[n, P]`` (compact valid positions)."""
    return _SEL_OPS[_STRUCT_OPS[opc]](K[:, lay.ek_c], Q[:, lay.eq_c])


def rows_of(e, levels: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``[n, P]`` int16 values of the s-ops ``(levels[i], rows[i])``."""
    out = np.empty((len(rows), e.lay.Pn), np.int16)
    for lev in np.unique(levels).tolist():
        w = np.flatnonzero(levels == lev)
        out[w] = e.store.rows[lev].vals[rows[w]]
    return out


def sel_matrices(e, sl: _SelLevel, rows: np.ndarray,
                  out: np.ndarray | None = None) -> np.ndarray:
    """``[len(rows), B, q, k]`` float32 0/1 matrices of the selectors ``rows`` of a level
    (written into ``out`` when given). A ``select(K, Q, op)`` row is compared directly in
    the ``[B, q, k]`` layout and masked by the causal valid entries; packed rows are
    unpacked and scattered."""
    rows = np.asarray(rows, np.int64)
    B, T = e.lay.B, e.lay.T
    if out is None:
        out = np.empty((rows.size, B, T, T), np.float32)
    d = sl.dense[rows]
    isd = d >= 0
    if isd.any():
        ent = np.unpackbits(sl.P[d[isd]], axis=1)[:, :e.lay.E]
        S = np.zeros((int(isd.sum()), B * T * T), np.float32)
        S[:, e.lay.sel_flat] = ent
        out[isd] = S.reshape(-1, B, T, T)
    st = np.flatnonzero(~isd)
    if st.size:
        x = rows[st]
        kv, qv = (np.zeros((st.size, B * T), np.int16) for _ in range(2))
        kv[:, e.lay.vflat] = rows_of(e, sl.klev[x], sl.krow[x])
        qv[:, e.lay.vflat] = rows_of(e, sl.qlev[x], sl.qrow[x])
        kv, qv = kv.reshape(-1, B, 1, T), qv.reshape(-1, B, T, 1)
        for code in np.unique(sl.opc[x]).tolist():
            w = np.flatnonzero(sl.opc[x] == code)
            cmp = _SEL_OPS[_STRUCT_OPS[code]](kv[w], qv[w])       # [n, B, q, k]
            if w.size == st.size and st.size == rows.size:
                np.multiply(cmp, e.lay.causal_f32, out=out)
            else:
                out[st[w]] = cmp * e.lay.causal_f32
    return out


def dense_cache(e, sl: _SelLevel):
    """Unpack a level's selector matrices once (``[n, B, q, k]`` float32, kept on the
    level) while they fit in ``_DENSE_BYTES`` and the search's memory; main thread only (the blocks are filled
    on the worker threads)."""
    nbytes = len(sl) * e.lay.B * e.lay.T * e.lay.T * 4
    if getattr(sl, "_dense", None) is None and nbytes <= _DENSE_BYTES - e.store.dense_bytes \
            and e.store.fits(nbytes):
        e.store.cache(nbytes, "dense selector matrices")
        dense = np.empty((len(sl), e.lay.B, e.lay.T, e.lay.T), np.float32)
        step = max(1, e.chunk // (e.lay.B * e.lay.T * e.lay.T))
        blocks = [np.arange(a, min(a + step, len(sl))) for a in range(0, len(sl), step)]

        def fill(r):
            sel_matrices(e, sl, r, out=dense[r[0]:r[-1] + 1])
        if e._pool is not None:
            list(e._pool.map(fill, blocks))
        else:
            for r in blocks:
                fill(r)
        sl._dense = dense
        e.store.dense_bytes += dense.nbytes


def dense_sels(e, sl: _SelLevel, rows: np.ndarray) -> np.ndarray:
    """``[len(rows), B, q, k]`` float32 0/1 matrices of selectors ``rows`` of a level
    (from the level's cache, :func:`dense_cache`, when it was made)."""
    dense = getattr(sl, "_dense", None)
    if dense is None:
        return sel_matrices(e, sl, rows)
    if rows.size and rows[-1] - rows[0] + 1 == rows.size:
        return dense[rows[0]:rows[-1] + 1]                      # a view
    return dense[rows]


def cached_rank_table(e, lv, num, red, fit: bool = False):
    """:func:`rank_table` of the value rows ``num`` of a level, cached on the level (made on
    the main thread) and counted in the search's memory. With ``fit``: None when the
    memory cannot hold it (the caller makes tables per block); else :class:`.storage._Memory`."""
    if not hasattr(lv, "_rank_cache"):
        lv._rank_cache = {}
    key = (red, num.size, int(num[:1].sum()) if num.size else 0)
    cached = lv._rank_cache.get(key)
    if cached is None:
        # the table and its making: [M', 256] ranks, [M', B*T] float64, the float32 copy
        nbytes = num.size * (e.lay.B * e.lay.T * 4)
        if fit and not e.store.fits(nbytes + num.size * (256 * 16 + e.lay.B * e.lay.T * 8)):
            return None
        e.store.cache(nbytes, "a rank table")
        cached = rank_table(lv.vals[num], red, e.lay.B, e.lay.T, e.lay.vflat)
        lv._rank_cache[key] = cached
    return cached


def agg_gemm(V: np.ndarray, S: np.ndarray, vflat: np.ndarray, dtype=np.float32) -> np.ndarray:
    """Selected sums of every value row under every selector: ``V`` ``[B, M, T]``,
    ``S`` ``[s, B, q, k]`` 0/1 -> ``[s, M, P]`` (P = valid query positions, ``vflat`` their
    indices in the flat ``[B * T]`` layout). One matrix product per batch row
    ``[M, k] @ [k, s*q]`` (a BLAS gemm; far faster than NumPy's batched ``matmul`` over
    ``(s, B)``). Exact: integer sums far below 2^24."""
    ns, B, T = S.shape[0], S.shape[1], S.shape[3]
    M = V.shape[1]
    out = np.empty((B, M, ns, T), dtype)
    Sf = S.astype(dtype, copy=False)
    for b in range(B):
        St = Sf[:, b].reshape(ns * T, T)                 # [s*q, k]
        np.matmul(V[b].astype(dtype, copy=False), St.T, out=out[b].reshape(M, ns * T))
    out = out.transpose(2, 1, 0, 3).reshape(ns, M, B * T)
    return out if vflat.size == B * T else out[:, :, vflat]


def rank_table(vals: np.ndarray, red: str, B: int, T: int, vflat: np.ndarray) -> tuple:
    """Rank weights of value rows ``vals`` ``[M', P]`` for ``red`` (``"max"`` / ``"min"``):
    each value's rank ``r`` among its row's distinct values (descending for min) as the weight
    ``2^(b * r)`` in the ``[B, M', T]`` layout, split into the rows that fit float32 and those
    that need float64. Returns ``(i32, W32, i64, W64, val_of, fast, b)``: the row indices and
    weights of each kind, ``val_of`` ``[M', 256]`` the value of each rank, ``fast`` ``[M']``
    whether the row fits a float exponent at all, and ``b``."""
    vals = vals.astype(np.int16)                               # [M', P]
    Mn = vals.shape[0]
    sh = vals + 128                                       # 0..255
    if red == "min":
        sh = 255 - sh
    present = np.zeros((Mn, 256), bool)
    present[np.arange(Mn)[:, None], sh] = True
    rank_of = np.cumsum(present, axis=1) - 1               # [M', 256]
    nd = present.sum(axis=1)
    ranks = np.take_along_axis(rank_of, sh.astype(np.int64), axis=1)   # [M', P]
    # value of each rank: sorted distinct values (descending for min)
    order = np.argsort(~present, axis=1, kind="stable")    # present codes first, asc
    val_of = (order - 128).astype(np.int16)
    if red == "min":
        val_of = (127 - order).astype(np.int16)
    bits = max(1, int(np.ceil(np.log2(T + 1))))
    # at most T < 2^bits keys of rank <= nd - 1: every sum is < 2^(bits * nd), finite
    # in float32 when bits * nd <= 127 (in float64 when <= 1023)
    f32 = nd * bits <= 127
    f64 = ~f32 & (nd * bits <= 1023)
    fast = f32 | f64
    full = np.zeros((Mn, B * T), np.float64)
    full[:, vflat] = np.where(fast[:, None], np.exp2(bits * ranks.astype(np.float64)), 0)
    full = full.reshape(Mn, B, T).transpose(1, 0, 2)
    i32, i64 = np.flatnonzero(f32), np.flatnonzero(f64)
    return (i32, full[:, i32].astype(np.float32), i64, full[:, i64].copy(), val_of, fast, bits)


def agg_maxmin(table: tuple, Vi: np.ndarray, S: np.ndarray, red: str,
               vflat: np.ndarray) -> np.ndarray:
    """Max (or min) of the selected values, ``[s, M', P]`` int16, for value rows ``Vi``
    ``[B, M', T]`` under selectors ``S`` ``[s, B, q, k]``, as one gemm: each row's values are
    replaced by their rank r among the row's distinct values (``table``, :func:`rank_table`)
    and the selected keys sum ``2^(b*r)`` with ``2^b`` > the number of keys (exact in the
    exponent); the exponent of the sum is ``b*r_max`` (rows with too many distinct values for
    float64's exponent use a masked reduction). Empty selections give 0 here (the caller
    writes the default)."""
    ns = S.shape[0]
    i32, W32, i64, W64, val_of, fast, bits = table
    r = np.zeros((ns, val_of.shape[0], vflat.size), np.int64)
    for idx, W, dt in ((i32, W32, np.float32), (i64, W64, np.float64)):
        if idx.size:
            _, ex = np.frexp(agg_gemm(W, S, vflat, dt))          # [s, m, P]
            r[:, idx] = np.maximum(ex - 1, 0) // bits           # rank of the extreme
    out = np.take_along_axis(np.broadcast_to(val_of[None], (ns,) + val_of.shape),
                             r, axis=2).astype(np.int16)
    slow = np.flatnonzero(~fast)
    if slow.size:
        fill = np.int16(-32768 if red == "max" else 32767)
        Vs = Vi[:, slow]
        big = np.where(S[:, :, None, :, :] > 0, Vs[None, :, :, None, :], fill)
        rr = big.max(axis=-1) if red == "max" else big.min(axis=-1)
        out[:, slow] = rr.transpose(0, 2, 1, 3).reshape(ns, slow.size, -1)[:, :, vflat]
    return out


def row_hash(lay, vals: np.ndarray, kinds) -> np.ndarray:
    """64-bit fingerprints of rows: a random linear hash modulo 2^64 (one integer
    matrix-vector product, as ``einsum``: no int64 copy of the rows); the kind is part of
    the fingerprint."""
    if vals.dtype.kind not in "iu":
        vals = vals.astype(np.int64)
    h = np.einsum("ij,j->i", vals, lay.R)      # int64, wraps mod 2^64; ~3x a cast + matmul
    return h ^ (np.asarray(kinds, np.int64) * np.int64(0x5BD1E9955BD1E995))


def sel_hash(lay, packed: np.ndarray) -> np.ndarray:
    """Fingerprints ``[M]`` int64 of selectors given as packed causal entries ``[M, nbytes]``
    uint8: ``sum_e entry_e * RE_e`` modulo 2^64, one table lookup per byte."""
    idx = packed.astype(np.int64) + (np.arange(packed.shape[1]) * 256)[None, :]
    return lay.sel_byte_hash.reshape(-1)[idx].sum(axis=1)


def select_hashes(lay, K: np.ndarray, Q: np.ndarray):
    """Fingerprints of ``select(K_x, Q_y, op)`` for every key row ``K`` ``[nk, P]`` and
    query row ``Q`` ``[nq, P]`` without forming the ``[nk * nq, E]`` entries. The hash is
    linear in the entries with coefficients ``a[q] * b[k]``, so grouped by the smaller side:
    by key rows, ``C[q, u] = sum_{k <= q, K[k] < U[u]} b[k]`` (running sums over key
    positions of each sorted key value ``U[u]``) gives ``hash(K < Q) = sum_q a[q] *
    C[q, #U < Q[q]]``; by query rows, the same with suffix sums over query positions.
    Returns ``(lt, le, widths_of)``: ``lt``/``le`` ``[nk, nq]`` int64, the hashes of ``<``
    and ``<=`` (key op query), and (grouped by key rows) ``widths_of(x, y, opc)`` the
    selector widths ``[n, P]`` of pairs ``(K_x, Q_y)`` from the same running sums with
    weight 1 (None when grouped by query rows);
    with ``tot`` = ``lay.RE_total`` (the causal TRUE selector) the others follow: ``==`` =
    le - lt, ``!=`` = tot - eq, ``>`` = tot - le, ``>=`` = tot - lt. O(P * |U|) per row of
    the grouped side and O(P) per pair, instead of O(E) = O(P * T) per pair."""
    P = lay.Pn
    by_key = K.shape[0] <= Q.shape[0]
    G, O = (K, Q) if by_key else (Q, K)
    ng, no = G.shape[0], O.shape[0]
    U = np.unique(G)
    nu = U.size
    gid = np.searchsorted(U, G)                                   # [ng, P]
    w = lay.kb if by_key else lay.qa                            # summed inside
    M = np.zeros((ng, P, nu), np.int64)
    M[np.arange(ng)[:, None], np.arange(P)[None, :], gid] = w[None, :]
    cs = np.zeros((ng, P + 1, nu), np.int64)
    np.cumsum(M, axis=1, out=cs[:, 1:])
    widths_of = None
    if by_key:      # S[p, u] = sum over keys k <= p of p's batch row with value U[u]
        S = cs[:, 1:] - cs[:, lay.row_first]
        Tb = np.zeros((ng, P, nu + 1), np.int64)
        np.cumsum(S, axis=2, out=Tb[:, :, 1:])                    # values < U[u]
        Tb *= lay.qa[None, :, None]
        # the same running sums with weight 1: widths of the selectors kept
        cnt = np.zeros((ng, P + 1, nu), np.int16)
        np.cumsum(M != 0, axis=1, out=cnt[:, 1:])
        Cn = np.zeros((ng, P, nu + 1), np.int16)
        np.cumsum(cnt[:, 1:] - cnt[:, lay.row_first], axis=2, out=Cn[:, :, 1:])
        Cn = Cn.reshape(ng, P * (nu + 1))
        allk = (np.arange(P) - lay.row_first + 1).astype(np.int16)   # causal keys

        def widths_of(x, y, opc):
            c = _OP_COEF[opc].astype(np.int16)
            w = c[2] * allk[None, :]
            if c[0]:
                w = w + c[0] * Cn[x[:, None], f_lt(y)]
            if c[1]:
                w = w + c[1] * Cn[x[:, None], f_le(y)]
            return w.astype(np.int16)
        lo_side, hi_side = "left", "right"
    else:           # S[p, u] = sum over queries q >= p of p's batch row with value U[u]
        S = cs[:, lay.row_last + 1] - cs[:, :-1]
        Tb = np.zeros((ng, P, nu + 1), np.int64)
        np.cumsum(S[:, :, ::-1], axis=2, out=Tb[:, :, 1:])
        Tb = Tb[:, :, ::-1]                                       # values >= U[u]
        Tb *= lay.kb[None, :, None]
        lo_side, hi_side = "right", "left"
    Tf = Tb.reshape(ng, P * (nu + 1))
    base = (np.arange(P) * (nu + 1))[None, :]

    def f_lt(y):        # [len(y), P] flat indices of "values < O[y]" (made per block: the
        return np.searchsorted(U, O[y], side=lo_side) + base     # whole [no, P] is large)

    def f_le(y):
        return np.searchsorted(U, O[y], side=hi_side) + base
    lt = np.empty((ng, no), np.int64)
    le = np.empty((ng, no), np.int64)
    step = max(1, _CHUNK // max(1, ng * P))
    for a in range(0, no, step):
        y = np.arange(a, min(no, a + step))
        lt[:, a:a + step] = Tf[:, f_lt(y)].sum(axis=2)
        le[:, a:a + step] = Tf[:, f_le(y)].sum(axis=2)
    if by_key:
        return lt, le, widths_of
    return lt.T, le.T, None


def full_layout(e, k) -> np.ndarray:
    """``[B, M, T]`` float32 values of level k (padded positions 0), cached."""
    lv = e.store.rows[k]
    if lv._full is None:
        e.store.cache(len(lv) * e.lay.B * e.lay.T * 4, "a level's float layout")
        f = np.zeros((len(lv), e.lay.B * e.lay.T), np.float32)
        f[:, e.lay.vflat] = lv.vals
        lv._full = f.reshape(len(lv), e.lay.B, e.lay.T).transpose(1, 0, 2).copy()
    return lv._full
