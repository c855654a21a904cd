"""The enumeration engine: bottom-up by expression size, one level at a time, with CEGIS rounds.

:class:`_Engine` owns the problem's arrays, the levels (:mod:`.storage`), the fingerprints and the
worker threads; it emits candidates (``_prep`` on a worker: range check, target hits, fingerprints;
``_commit`` on the calling thread: dedup, keep, stop on a hit), rebuilds IR nodes from recipes
and runs the levels in order (``run``). The candidate families (:mod:`.families`), the array
kernels (:mod:`.kernels`) and the deep aggregates and combination (:mod:`.combination`) are
mixins of it, one module each.
"""

from __future__ import annotations

import collections
from concurrent.futures import ThreadPoolExecutor, wait
import time

import numpy as np

from rasp.ir import (Aggregate, Elementwise, Full, Indices, Map, Select, SelectorAnd, SelectorOr,
                     SelectorWidth, SequenceMap, Tokens)
from rasp.repl.progress import progress_bar
from rasp.source import program_to_source

from .combination import _Combination
from .families import _Families
from .kernels import _Kernels
from .problem import (_GRAMMAR, INT8, SearchError, SearchProblem, SearchResult, _measured,
                      matches_problem)
from analysis.prediction.budget import BUDGET_STOP, TIME_CAP_STOP

from .storage import (_CHUNK, _KIND_STR, _OP_COEF, _STRUCT_OPS, _Budget, _default_threads,
                      _Found, _Level, _Prep, _quiet, _Seen, _SelLevel)


class _Engine(_Families, _Kernels, _Combination):
    """Bottom-up enumeration by expression size, evaluated in families as array operations.

    Every s-op is a row of ``[M, P]`` int8 values on the P valid positions of the batch; a
    family (all maps of a level, all sequence maps of two levels, all aggregates of one
    selector over a level of values, all selects of a key row against a level of query rows)
    is computed as one NumPy broadcast or one batched matrix product, fingerprinted by a 64-bit
    linear hash (one integer matrix-vector product), checked against the target, and only its
    new distinct rows are kept (observational equivalence). ``select(K, Q, op)`` candidates
    are fingerprinted without forming their ``[E]`` causal entries (:meth:`_select_hashes`,
    O(P) per candidate instead of O(E)) and kept as structure; their entries are formed only
    when an aggregate or an and/or reads them (:meth:`_sel_entries`).
    """

    def __init__(self, problem: SearchProblem, limits, max_length: int,
                 progress: bool, max_bytes: int, validate, prune: bool = True,
                 grammar: dict | None = None, threads: int | None = None):
        self.p = problem
        # analysis.prediction.budget.Limits: the enumeration's candidates and the time cap
        self.limits = limits
        self.max_length = max_length
        self.progress = progress
        self.max_bytes = max_bytes
        self.validate = validate
        self.prune = prune
        g = dict(_GRAMMAR)
        g.update(grammar or {})
        self.g = g
        self.spurious_node = None
        self.validation: SearchProblem | None = None    # terms of the combination are checked on it
        self.counterexample_rows: list[int] = []        # validation rows chance-fit terms miss
        self.found = None
        self.explored = 0
        self.stored_bytes = 0
        self.dense_bytes = 0
        self.storing = True
        self.all_programs: list | None = [] if not prune else None
        # the combination's work budget, in the same unit (:meth:`_cwork`)
        self.combine_budget = int(g.get("combine_budget", 0))
        self.combine_work = 0
        # worker threads for the families (:meth:`_families`); one: everything on this thread
        self.threads = max(1, int(threads if threads is not None else _default_threads()))
        self._pool = None
        self._ahead = 2 * self.threads
        self.mode = g.get("mode", "raspl")
        if self.mode not in ("raspl", "crasp", "crasp_pl"):
            raise SearchError(f"unknown search mode {self.mode!r}")
        self.crasp = self.mode != "raspl"
        self.pl = self.mode == "crasp_pl"
        B, T = problem.inputs.shape
        self.B, self.T = B, T
        valid = problem.valid
        self.vflat = np.flatnonzero(valid.reshape(-1))
        P = len(self.vflat)
        self.Pn = P
        self.is_str = problem.inputs.dtype.kind == "U"
        # string values become order-preserving codes (only compared, never computed with)
        if self.is_str:
            alphabet = sorted(set(problem.inputs[valid].tolist()) |
                              set(problem.target[problem.target_mask].tolist()) |
                              {c for c in problem.constants if isinstance(c, str)} |
                              {d for d in problem.defaults if isinstance(d, str)})
            if len(alphabet) > 120:
                raise SearchError("too many distinct string values (at most 120)")
            self.code = {s: i for i, s in enumerate(alphabet)}
            self.decode = alphabet
            toks = np.vectorize(self.code.get, otypes=[np.int64])(problem.inputs)
            tgt_all = problem.target
            tvals = np.array([self.code[s] for s in tgt_all.reshape(-1)[self.vflat][
                problem.target_mask.reshape(-1)[self.vflat]].tolist()], np.int64)
        else:
            toks = problem.inputs.astype(np.int64)
            tvals = problem.target.reshape(-1)[self.vflat][
                problem.target_mask.reshape(-1)[self.vflat]].astype(np.int64)
            if toks[valid].size and (toks[valid].min() < INT8[0] or toks[valid].max() > INT8[1]):
                raise SearchError("token values outside the int8 range [-128, 127]")
        self.tcols = np.flatnonzero(problem.target_mask.reshape(-1)[self.vflat])
        self.tvals = tvals
        self.target_str = self.is_str
        # causal entries (b, q, k<=q) over valid queries, grouped by query in compact order
        qs, ks = [], []
        for b in range(B):
            n = int(valid[b].sum())
            qq, kk = np.tril_indices(n)
            qs.append(b * T + qq)
            ks.append(b * T + kk)
        self.eq_flat = np.concatenate(qs)          # flat query position of each entry
        self.ek_flat = np.concatenate(ks)
        self.E = len(self.eq_flat)
        self.nbytes = (self.E + 7) // 8
        lens = valid.sum(axis=1)
        counts = np.concatenate([np.arange(1, n + 1) for n in lens])
        self.qstarts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        self.sel_flat = (self.eq_flat // T) * T * T + (self.eq_flat % T) * T + (self.ek_flat % T)
        causal = np.zeros(B * T * T, np.float32)            # the causal valid entries, [B, q, k]
        causal[self.sel_flat] = 1
        self.causal_f32 = causal.reshape(B, T, T)
        rng = np.random.default_rng(12345)
        self.R = rng.integers(1, 2**62, size=P, dtype=np.int64) | 1
        # selector fingerprints: a random linear hash of the causal entries modulo 2^64 with
        # rank-one coefficients RE[(q, k)] = a[q] * b[k] (a degree-2 polynomial identity test:
        # distinct selectors collide with probability about 2^-62), the same function whether
        # computed from packed bits (a byte table) or, for ``select(K, Q, op)``, from running
        # sums without forming the entries (:meth:`_select_hashes`)
        comp = np.full(B * T, -1, np.int64)
        comp[self.vflat] = np.arange(P)
        self.eq_c, self.ek_c = comp[self.eq_flat], comp[self.ek_flat]   # compact query / key
        self.qa = rng.integers(1, 2**63 - 1, size=P, dtype=np.int64)
        self.kb = rng.integers(1, 2**63 - 1, size=P, dtype=np.int64)
        self.RE = self.qa[self.eq_c] * self.kb[self.ek_c]               # mod 2^64
        self.RE_total = self.RE.sum()
        re_pad = np.zeros(self.nbytes * 8, np.int64)
        re_pad[:self.E] = self.RE
        bits = ((np.arange(256)[:, None] >> (7 - np.arange(8))[None, :]) & 1).astype(np.int64)
        self.sel_byte_hash = (re_pad.reshape(self.nbytes, 1, 8) * bits[None]).sum(axis=2)
        # compact positions: index of the first / last position of each one's batch row
        row_of = self.vflat // T
        first = np.searchsorted(row_of, row_of, side="left")
        last = np.searchsorted(row_of, row_of, side="right") - 1
        self.row_first, self.row_last = first, last
        self.rows: dict[int, _Level] = {}
        self.sels: dict[int, _SelLevel] = {}
        self.seen = _Seen()
        self.sel_seen = _Seen()
        self.tokens_row = toks.reshape(-1)[self.vflat]
        self.index_row_full = np.tile(np.arange(T), B)
        self.index_row = self.index_row_full[self.vflat]
        self.start = 0.0
        self.bar = None
        self._nodes: dict = {}
        self._sel_nodes: dict = {}
        # constants: numbers (and string codes) the grammar may use
        self.int_consts = [c for c in problem.constants
                           if isinstance(c, (int, np.integer)) and not isinstance(c, bool)]
        self.str_consts = [c for c in problem.constants if isinstance(c, str)]
        if self.is_str:
            self.defaults = [d for d in problem.defaults if isinstance(d, str)] or \
                [self.decode[0]]
        else:
            self.defaults = [int(d) for d in problem.defaults
                             if isinstance(d, (int, np.integer))] or [0]

    def _tick(self, n: int):
        """Count ``n`` candidates; stop when the budget is spent (the count grows in the one
        order of the commits, so where it stops does not depend on threads or load) or, as a
        safety stop, when the wall-clock cap has passed (``TimeoutError``)."""
        self.explored += n
        if self.bar is not None:
            self.bar.update(n)
        if self.explored > self.limits.budget:
            raise _Budget
        if self.limits.over_time():
            raise TimeoutError

    def _cwork(self, n: int, stop: bool = True) -> bool:
        """Count ``n`` units of the combination's work; with ``stop`` raise :class:`_Budget`
        once its budget is spent, else return whether it is. ``TimeoutError`` past the cap."""
        self.combine_work += int(n)
        if self.limits.over_time():
            raise TimeoutError
        over = self.combine_work > self.combine_budget
        if over and stop:
            raise _Budget
        return over

    def _hash(self, vals: np.ndarray, kinds) -> np.ndarray:
        """64-bit fingerprints of rows: a random linear hash modulo 2^64 (one integer
        matrix-vector product, as ``einsum``: no int64 copy of the rows); the kind is part of
        the fingerprint."""
        if vals.dtype.kind not in "iu":
            vals = vals.astype(np.int64)
        h = np.einsum("ij,j->i", vals, self.R)      # int64, wraps mod 2^64; ~3x a cast + matmul
        return h ^ (np.asarray(kinds, np.int64) * np.int64(0x5BD1E9955BD1E995))

    def _emit(self, level: int, vals: np.ndarray, kinds, recipe, checked: bool = True):
        """Check and keep a family of candidate s-ops. ``vals``: ``[M, P]`` ints; ``kinds``:
        ``[M]`` or a scalar; ``recipe(i)`` builds the recipe of row i; ``checked=False`` for
        families whose values cannot leave the int8 range (comparisons, moves, widths)."""
        self._commit(level, self._prep(level, vals, kinds, checked), recipe)

    def _prep(self, level: int, vals: np.ndarray, kinds, checked: bool = True) -> "_Prep | None":
        """The part of :meth:`_emit` that reads no engine state and so may run on a worker
        thread (:meth:`_families`): the int8 range check, the rows equal to the target at the
        target positions, and the fingerprints of the rows that may be kept."""
        M = vals.shape[0]
        if M == 0:
            return None
        kinds = np.broadcast_to(np.asarray(kinds, np.int8), (M,))
        if checked or self.T > INT8[1]:     # widths and positions can pass 127 past 127 tokens
            ok = (vals.min(axis=1) >= INT8[0]) & (vals.max(axis=1) <= INT8[1])  # rule 2
            ok |= kinds == _KIND_STR
            allok = bool(ok.all())
        else:
            ok, allok = None, True
        # the target: next-token values at the target positions (one column filters first)
        c0 = vals[:, self.tcols[0]] == self.tvals[0]
        hits = ()
        if c0.any():
            cand = np.flatnonzero(c0)
            hits = cand[(vals[cand][:, self.tcols] == self.tvals).all(axis=1)].tolist()
        idx = v = k = h = None
        if level < self.max_length:
            if allok:
                v, k = vals, kinds
            else:
                idx = np.flatnonzero(ok)
                v, k = vals[idx], kinds[idx]
            if self.prune and v.shape[0]:
                h = np.unique(self._hash(v, k), return_index=True)
        return _Prep(M, kinds, ok, allok, hits, idx, v, k, h)

    def _commit(self, level: int, prep: "_Prep | None", recipe):
        """The part of :meth:`_emit` that changes engine state, in emission order (main thread):
        the target hits are considered, the candidates counted, the new rows kept."""
        if prep is None:
            return
        ok, kinds = prep.ok, prep.kinds
        if self.all_programs is not None:
            for i in (range(prep.M) if prep.allok else np.flatnonzero(ok)):
                self.all_programs.append((level, recipe(int(i))))
        if self.found is None:
            for i in prep.hits:
                if (ok is not None and not ok[i]) or \
                        ((kinds[i] == _KIND_STR) != self.target_str):
                    continue
                self._consider(level, recipe(int(i)))
                if self.found is not None or self.spurious_node is not None:
                    raise _Found
        self._tick(prep.M)
        if not self.storing or prep.v is None or prep.v.shape[0] == 0:
            return
        v, k, idx = prep.v, prep.k, prep.idx
        if self.prune:
            keep = self.seen.add_new_unique(*prep.h)
            if keep.size == 0:
                return
        else:
            keep = np.arange(v.shape[0])
        lv = self.rows.setdefault(level, _Level(self.Pn))
        src = keep if idx is None else idx[keep]
        lv.add(v[keep], k[keep], recipe, src)
        self.stored_bytes += keep.size * self.Pn
        if self.stored_bytes > self.max_bytes:
            self.storing = False

    def _families(self, jobs):
        """Run family jobs on the engine's worker threads, at most a few ahead, and commit
        their emissions in the order the jobs come (the order a sequential run emits them:
        the same levels, the same first program found). A job returns a list of emissions:
        ``(level, prep, recipe)`` (the prep from :meth:`_prep`) or a callable that commits.
        NumPy releases the GIL in the array work, so the cores compute families while this
        thread commits."""
        def commit(emissions):
            for em in emissions:
                if callable(em):
                    em()
                else:
                    self._commit(*em)
        pool = self._pool
        if pool is None:
            for job in jobs:
                commit(job())
            return
        pending = collections.deque()
        try:
            for job in jobs:
                pending.append(pool.submit(_quiet, job))
                while len(pending) > self._ahead:
                    commit(pending.popleft().result())
            while pending:
                commit(pending.popleft().result())
        finally:       # _Found / TimeoutError: drop the rest, let running jobs end
            for f in pending:
                f.cancel()
            wait(pending)

    def _sel_hash(self, packed: np.ndarray) -> np.ndarray:
        """Fingerprints ``[M]`` int64 of selectors given as packed causal entries ``[M, nbytes]``
        uint8: ``sum_e entry_e * RE_e`` modulo 2^64, one table lookup per byte."""
        idx = packed.astype(np.int64) + (np.arange(packed.shape[1]) * 256)[None, :]
        return self.sel_byte_hash.reshape(-1)[idx].sum(axis=1)

    def _emit_sels(self, level: int, ent: np.ndarray | None, recipe, h: np.ndarray | None = None,
                   struct=None, unique: tuple | None = None):
        """Keep a family of candidate selectors: ``ent`` ``[M, E]`` bool causal entries, or
        their fingerprints ``h`` ``[M]`` (:meth:`_select_hashes`) with ``struct`` = ``(klev,
        krows [nk], qlev, qrows [nq], opc, widths_of)``: candidate ``r`` is ``select(krows[r //
        nq], qrows[r % nq], _STRUCT_OPS[opc])`` (rows of levels klev / qlev), kept as that
        structure; its widths come from ``widths_of(x, y, opc)`` (:meth:`_select_hashes`) or,
        when that is None, from its entries."""
        M = ent.shape[0] if ent is not None else h.shape[0]
        if M == 0:
            return
        self._tick(M)
        if not self.storing:
            return
        packed = None
        if h is None:
            packed = np.packbits(ent, axis=1)
            h = self._sel_hash(packed) if self.prune else None
        if self.prune:
            keep = self.sel_seen.add_new_unique(*unique) if unique is not None else \
                self.sel_seen.add_new(h)
            if keep.size == 0:
                return
        else:
            keep = np.arange(M)
        lv = self.sels.setdefault(level, _SelLevel())
        st = np.full((keep.size, 5), -1, np.int64)
        if ent is None:
            klev, krows, qlev, qrows, opc, widths_of = struct
            x_, y_ = np.divmod(keep, qrows.size)
            st[:, 0], st[:, 1], st[:, 2], st[:, 3], st[:, 4] = \
                klev, krows[x_], qlev, qrows[y_], opc
            if widths_of is not None:
                widths = widths_of(x_, y_, opc)
            else:
                K, Q = self.rows[klev].vals, self.rows[qlev].vals
                step = max(1, _CHUNK // self.E)
                widths = np.concatenate([
                    np.add.reduceat(self._select_entries(K[krows[x_[a:a + step]]],
                                                         Q[qrows[y_[a:a + step]]], opc),
                                    self.qstarts, axis=1, dtype=np.int16)
                    for a in range(0, keep.size, step)])
            self.stored_bytes += keep.size * (40 + 2 * self.Pn)
        else:
            e = ent[keep]
            widths = np.add.reduceat(e, self.qstarts, axis=1, dtype=np.int16)
            lv.packed.append(packed[keep])
            self.stored_bytes += keep.size * (self.nbytes + 2 * self.Pn)
        lv.widths.append(widths)
        lv.structs.append(st)
        lv.recipes.extend(recipe, keep)
        if self.stored_bytes > self.max_bytes:
            self.storing = False

    def _select_emissions(self, k, i, j, Kv, Qv, kb, qq, ops) -> list:
        """A job of :meth:`_selects` (worker thread): the fingerprints of ``select(K, Q, op)``
        for key rows ``kb`` (values ``Kv``) of level i, query rows ``qq`` (``Qv``) of level j
        and each operator, deduplicated within the family; returns the commits (callables for
        the main thread, in operator order)."""
        lt, le, widths_of = self._select_hashes(Kv, Qv)
        nq = qq.size
        out = []
        for op in ops:
            def rec(r, kb=kb, op=op, qq=qq, nq=nq, i=i, j=j):
                x_, y_ = divmod(r, nq)
                return ("select", (i, int(kb[x_])), (j, int(qq[y_])), op)
            opc = _STRUCT_OPS.index(op)
            c = _OP_COEF[opc]
            h = (c[0] * lt + c[1] * le + c[2] * self.RE_total).reshape(-1)     # mod 2^64
            hu = np.unique(h, return_index=True) if self.prune else None

            def commit(h=h, hu=hu, rec=rec, opc=opc):
                if self.storing:          # a sequential run stops the family there
                    self._emit_sels(k, None, rec, h=h, struct=(i, kb, j, qq, opc, widths_of),
                                    unique=hu)
            out.append(commit)
        return out

    def _select_hashes(self, K: np.ndarray, Q: np.ndarray):
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
        with ``tot`` = ``self.RE_total`` (the causal TRUE selector) the others follow: ``==`` =
        le - lt, ``!=`` = tot - eq, ``>`` = tot - le, ``>=`` = tot - lt. O(P * |U|) per row of
        the grouped side and O(P) per pair, instead of O(E) = O(P * T) per pair."""
        P = self.Pn
        by_key = K.shape[0] <= Q.shape[0]
        G, O = (K, Q) if by_key else (Q, K)
        ng, no = G.shape[0], O.shape[0]
        U = np.unique(G)
        nu = U.size
        gid = np.searchsorted(U, G)                                   # [ng, P]
        w = self.kb if by_key else self.qa                            # summed inside
        M = np.zeros((ng, P, nu), np.int64)
        M[np.arange(ng)[:, None], np.arange(P)[None, :], gid] = w[None, :]
        cs = np.zeros((ng, P + 1, nu), np.int64)
        np.cumsum(M, axis=1, out=cs[:, 1:])
        widths_of = None
        if by_key:      # S[p, u] = sum over keys k <= p of p's batch row with value U[u]
            S = cs[:, 1:] - cs[:, self.row_first]
            Tb = np.zeros((ng, P, nu + 1), np.int64)
            np.cumsum(S, axis=2, out=Tb[:, :, 1:])                    # values < U[u]
            Tb *= self.qa[None, :, None]
            # the same running sums with weight 1: widths of the selectors kept
            cnt = np.zeros((ng, P + 1, nu), np.int16)
            np.cumsum(M != 0, axis=1, out=cnt[:, 1:])
            Cn = np.zeros((ng, P, nu + 1), np.int16)
            np.cumsum(cnt[:, 1:] - cnt[:, self.row_first], axis=2, out=Cn[:, :, 1:])
            Cn = Cn.reshape(ng, P * (nu + 1))
            allk = (np.arange(P) - self.row_first + 1).astype(np.int16)   # causal keys

            def widths_of(x, y, opc):
                c = _OP_COEF[opc].astype(np.int16)
                w = c[2] * allk[None, :]
                if c[0]:
                    w = w + c[0] * Cn[x[:, None], f_lt[y]]
                if c[1]:
                    w = w + c[1] * Cn[x[:, None], f_le[y]]
                return w.astype(np.int16)
            lo_side, hi_side = "left", "right"
        else:           # S[p, u] = sum over queries q >= p of p's batch row with value U[u]
            S = cs[:, self.row_last + 1] - cs[:, :-1]
            Tb = np.zeros((ng, P, nu + 1), np.int64)
            np.cumsum(S[:, :, ::-1], axis=2, out=Tb[:, :, 1:])
            Tb = Tb[:, :, ::-1]                                       # values >= U[u]
            Tb *= self.kb[None, :, None]
            lo_side, hi_side = "right", "left"
        Tf = Tb.reshape(ng, P * (nu + 1))
        base = (np.arange(P) * (nu + 1))[None, :]
        f_lt = np.searchsorted(U, O, side=lo_side) + base             # [no, P]
        f_le = np.searchsorted(U, O, side=hi_side) + base
        lt = np.empty((ng, no), np.int64)
        le = np.empty((ng, no), np.int64)
        step = max(1, _CHUNK // max(1, ng * P))
        for a in range(0, no, step):
            lt[:, a:a + step] = Tf[:, f_lt[a:a + step]].sum(axis=2)
            le[:, a:a + step] = Tf[:, f_le[a:a + step]].sum(axis=2)
        if by_key:
            return lt, le, widths_of
        return lt.T, le.T, None

    def _consider(self, level, rec):
        node = self._node((level, rec), fresh=True)
        if not matches_problem(node, self.p):
            return        # (never expected: the families compute the interpreter's values)
        if self.validate is None or self.validate(node):
            self.found = (node, level)
        else:
            self.spurious_node = node

    def _ref(self, ref):
        level, i = ref
        return (level, self.rows[level].recipes[i])

    def _sel_ref(self, ref):
        level, i = ref
        return self.sels[level].recipes[i]

    def _node(self, item, fresh=False):
        level, rec = item
        key = rec
        if key in self._nodes:
            return self._nodes[key]
        kind = rec[0]
        if kind == "tokens":
            n = Tokens("asis").named("tokens")
        elif kind == "indices":
            n = Indices()
        elif kind == "full":
            n = Full(rec[1])
        elif kind == "map":
            _, op, const, x = rec
            inner = self._node(self._ref(x))
            if op == "not":
                n = Map(Elementwise("not"), inner)
            else:
                n = Map(Elementwise(op, const=const, const_side="right"), inner)
        elif kind == "seq":
            _, op, x, y = rec
            n = SequenceMap(Elementwise(op), (self._node(self._ref(x)),
                                              self._node(self._ref(y))))
        elif kind == "where":
            _, c, x, y = rec
            n = SequenceMap(Elementwise("ternary"), (self._node(self._ref(c)),
                                                     self._node(self._ref(x)),
                                                     self._node(self._ref(y))))
        elif kind == "agg":
            _, s, v, d, red = rec
            n = Aggregate(self._sel(s), self._node(self._ref(v)), d, red,
                          truncate=(red == "mean"))
        elif kind == "sw":
            n = SelectorWidth(self._sel(rec[1]))
        elif kind == "periodic":
            mod = Map(Elementwise("mod", const=rec[1], const_side="right"), Indices())
            n = Map(Elementwise("eq", const=rec[2], const_side="right"), mod)
        else:
            raise AssertionError(rec)
        self._nodes[key] = n
        return n

    def _sel(self, ref):
        rec = self._sel_ref(ref)
        if rec in self._sel_nodes:
            return self._sel_nodes[rec]
        if rec[0] == "true":
            n = Select(Indices(), Indices(), "TRUE", causal=True)
        elif rec[0] == "select":
            _, k, q, op = rec
            n = Select(self._node(self._ref(k)), self._node(self._ref(q)), op, causal=True)
        elif rec[0] == "local":
            q = Map(Elementwise("add", const=-rec[1], const_side="right"), Indices())
            n = Select(Indices(), q, "==", causal=True)
        elif rec[0] == "and":
            n = SelectorAnd(self._sel(rec[1]), self._sel(rec[2]))
        elif rec[0] == "or":
            n = SelectorOr(self._sel(rec[1]), self._sel(rec[2]))
        else:
            raise AssertionError(rec)
        self._sel_nodes[rec] = n
        return n

    def node_of(self, level, i):
        return self._node((level, self.rows[level].recipes[i]))

    def _lv(self, k) -> _Level | None:
        lv = self.rows.get(k)
        return lv if lv is not None and len(lv) else None

    def _full_layout(self, k) -> np.ndarray:
        """``[B, M, T]`` float32 values of level k (padded positions 0), cached."""
        lv = self.rows[k]
        if lv._full is None:
            f = np.zeros((len(lv), self.B * self.T), np.float32)
            f[:, self.vflat] = lv.vals
            lv._full = f.reshape(len(lv), self.B, self.T).transpose(1, 0, 2).copy()
        return lv._full

    def run(self) -> SearchResult:
        self.start = time.perf_counter()
        bar = None
        if self.progress:
            bar = progress_bar(desc=f"search {self.p.name}", unit="prog", unit_scale=True,
                               leave=False)
        self.bar = bar
        certified = -1
        stopped = "max_length"
        if self.threads > 1:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="search")
        try:
            with np.errstate(all="ignore"):
                try:
                    self._leaves()
                    self.rows[0].freeze()
                    certified = 0
                    for k in range(1, self.max_length + 1):
                        if bar is not None:
                            bar.set_postfix(size=k)
                        self._sop_level(k)
                        certified = k
                        if not self.storing:
                            stopped = "memory_limit"
                            break
                        if k < self.max_length:
                            self._sel_level(k)
                            if not self.storing:
                                stopped = "memory_limit"
                                break
                except _Found:
                    stopped = "spurious" if self.found is None else "found"
                except _Budget:
                    stopped = BUDGET_STOP
                except TimeoutError:
                    stopped = TIME_CAP_STOP
        finally:
            if bar is not None:
                bar.close()
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None
        found_by = "enumeration" if self.found is not None else None
        if self.found is None and self.spurious_node is None and self.combine_budget > 0 and \
                stopped != TIME_CAP_STOP:
            try:
                with np.errstate(all="ignore"):
                    self._combine()
            except _Budget:
                pass
            except TimeoutError:
                stopped = TIME_CAP_STOP
            if self.found is not None:
                found_by = "combination"
        seconds = time.perf_counter() - self.start
        f = self.found
        if f is not None and found_by == "enumeration":
            certified = f[1] - 1
        return SearchResult(
            name=self.p.name, found=f is not None, program=f[0] if f else None,
            length=f[1] if f else None, certified_below=certified, stopped=stopped,
            explored=self.explored, distinct=len(self.seen), seconds=seconds,
            combine_work=self.combine_work,
            lengths=list(self.p.lengths), n_targets=self.p.n_targets,
            max_length=self.max_length,
            source=program_to_source(f[0]) if f else None, found_by=found_by,
            measured_length=_measured(f[0]) if f else None)
