"""Array kernels of the engine: selector entries and matrices, aggregate products, rank tables.

A selector's causal entries ``[E]`` (E = causal (query, key) pairs of the batch), its dense
``[B, q, k]`` float32 matrices (cached up to a memory bound), the mean aggregate as a batched
matrix product ``[S, B, q, k] x [V, B, k]``, and max/min aggregates through rank tables (exact:
float32 only when every sum fits).

The aggregate kernels are plain functions of arrays (:func:`agg_gemm`, :func:`rank_table`,
:func:`agg_maxmin`); :class:`_Kernels`, a mixin of
:class:`analysis.prediction.search.engine._Engine`, holds the kernels that read the engine's
levels and layouts and the caches kept on them (dense selector matrices, rank tables).
"""

from __future__ import annotations

import numpy as np

from .storage import _CHUNK, _DENSE_BYTES, _SEL_OPS, _STRUCT_OPS, _SelLevel


class _Kernels:
    """Selector and aggregate kernels of :class:`~analysis.prediction.search.engine._Engine`
    (a mixin: the caches live on the engine and its levels)."""

    def _sel_entries(self, sl: _SelLevel, rows: np.ndarray) -> np.ndarray:
        """``[len(rows), E]`` bool causal entries of the selectors ``rows`` of a level (packed
        rows unpacked, structured rows compared)."""
        rows = np.asarray(rows, np.int64)
        ent = np.empty((rows.size, self.E), bool)
        d = sl.dense[rows]
        isd = d >= 0
        if isd.any():
            ent[isd] = np.unpackbits(sl.P[d[isd]], axis=1)[:, :self.E].astype(bool)
        st = np.flatnonzero(~isd)
        if st.size:
            x = rows[st]
            kv = self._rows_of(sl.klev[x], sl.krow[x])
            qv = self._rows_of(sl.qlev[x], sl.qrow[x])
            for code in np.unique(sl.opc[x]).tolist():
                w = np.flatnonzero(sl.opc[x] == code)
                ent[st[w]] = self._select_entries(kv[w], qv[w], code)
        return ent

    def _select_entries(self, K: np.ndarray, Q: np.ndarray, opc: int) -> np.ndarray:
        """``[n, E]`` bool causal entries of ``select(K[i], Q[i], _STRUCT_OPS[opc])`` for key
        and query rows ``K``, ``Q`` ``[n, P]`` (compact valid positions)."""
        return _SEL_OPS[_STRUCT_OPS[opc]](K[:, self.ek_c], Q[:, self.eq_c])

    def _rows_of(self, levels: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``[n, P]`` int16 values of the s-ops ``(levels[i], rows[i])``."""
        out = np.empty((len(rows), self.Pn), np.int16)
        for lev in np.unique(levels).tolist():
            w = np.flatnonzero(levels == lev)
            out[w] = self.rows[lev].vals[rows[w]]
        return out

    def _sel_matrices(self, sl: _SelLevel, rows: np.ndarray,
                      out: np.ndarray | None = None) -> np.ndarray:
        """``[len(rows), B, q, k]`` float32 0/1 matrices of the selectors ``rows`` of a level
        (written into ``out`` when given). A ``select(K, Q, op)`` row is compared directly in
        the ``[B, q, k]`` layout and masked by the causal valid entries; packed rows are
        unpacked and scattered."""
        rows = np.asarray(rows, np.int64)
        B, T = self.B, self.T
        if out is None:
            out = np.empty((rows.size, B, T, T), np.float32)
        d = sl.dense[rows]
        isd = d >= 0
        if isd.any():
            ent = np.unpackbits(sl.P[d[isd]], axis=1)[:, :self.E]
            S = np.zeros((int(isd.sum()), B * T * T), np.float32)
            S[:, self.sel_flat] = ent
            out[isd] = S.reshape(-1, B, T, T)
        st = np.flatnonzero(~isd)
        if st.size:
            x = rows[st]
            kv, qv = (np.zeros((st.size, B * T), np.int16) for _ in range(2))
            kv[:, self.vflat] = self._rows_of(sl.klev[x], sl.krow[x])
            qv[:, self.vflat] = self._rows_of(sl.qlev[x], sl.qrow[x])
            kv, qv = kv.reshape(-1, B, 1, T), qv.reshape(-1, B, T, 1)
            for code in np.unique(sl.opc[x]).tolist():
                w = np.flatnonzero(sl.opc[x] == code)
                cmp = _SEL_OPS[_STRUCT_OPS[code]](kv[w], qv[w])       # [n, B, q, k]
                if w.size == st.size and st.size == rows.size:
                    np.multiply(cmp, self.causal_f32, out=out)
                else:
                    out[st[w]] = cmp * self.causal_f32
        return out

    def _dense_cache(self, sl: _SelLevel):
        """Unpack a level's selector matrices once (``[n, B, q, k]`` float32, kept on the
        level) while they fit in ``_DENSE_BYTES``; main thread only (the blocks are filled
        on the worker threads)."""
        if getattr(sl, "_dense", None) is None and len(sl) * self.B * self.T * self.T * 4 <= \
                _DENSE_BYTES - self.dense_bytes:
            dense = np.empty((len(sl), self.B, self.T, self.T), np.float32)
            step = max(1, _CHUNK // (self.B * self.T * self.T))
            blocks = [np.arange(a, min(a + step, len(sl))) for a in range(0, len(sl), step)]

            def fill(r):
                self._sel_matrices(sl, r, out=dense[r[0]:r[-1] + 1])
            if self._pool is not None:
                list(self._pool.map(fill, blocks))
            else:
                for r in blocks:
                    fill(r)
            sl._dense = dense
            self.dense_bytes += dense.nbytes

    def _dense_sels(self, sl: _SelLevel, rows: np.ndarray) -> np.ndarray:
        """``[len(rows), B, q, k]`` float32 0/1 matrices of selectors ``rows`` of a level
        (from the level's cache, :meth:`_dense_cache`, when it was made)."""
        dense = getattr(sl, "_dense", None)
        if dense is None:
            return self._sel_matrices(sl, rows)
        if rows.size and rows[-1] - rows[0] + 1 == rows.size:
            return dense[rows[0]:rows[-1] + 1]                      # a view
        return dense[rows]

    def _rank_table(self, lv, num, red):
        """:func:`rank_table` of the value rows ``num`` of a level, cached on the level (made on
        the main thread)."""
        if not hasattr(lv, "_rank_cache"):
            lv._rank_cache = {}
        key = (red, num.size, int(num[:1].sum()) if num.size else 0)
        cached = lv._rank_cache.get(key)
        if cached is None:
            cached = rank_table(lv.vals[num], red, self.B, self.T, self.vflat)
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
