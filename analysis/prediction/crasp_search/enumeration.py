"""The enumerator of the C-RASP search: Booleans and counts bottom-up by size with observational
equivalence, the exact one-entry-per-value decision lists (the certificate's grammar) and the
greedy decision lists. Part of :mod:`analysis.prediction.crasp_search`.
"""

from __future__ import annotations

import itertools

import numpy as np

from .recipes import _KMAX, _Batch, _kcost, evaluate_recipe, is_param, recipe_size

class _Timeout(Exception):
    """The wall-clock safety cap passed (``stopped == "time_cap"``)."""


class _Budget(Exception):
    """The work budget (candidates explored) is spent (``stopped == "budget"``)."""


class _Memory(Exception):
    pass


# --------------------------------------------------------------------------------------------
# The enumerator
# --------------------------------------------------------------------------------------------

def entries_size(entries) -> int:
    """Size of a decision list's entries: each condition's size plus one per entry."""
    return sum(recipe_size(r) + 1 for _, r in entries)


class _Enum:
    def __init__(self, batch: _Batch, variant: str, limits, max_size: int,
                 max_memory: int, values: list, names: dict, rng_seed: int = 0):
        self.b = batch
        self.pl = variant == "crasp_pl"
        self.limits = limits        # analysis.prediction.budget.Limits: work budget, time cap
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
        """Stop when the work budget is spent (deterministic: ``explored`` grows in one order)
        or the wall-clock safety cap has passed."""
        if self.explored > self.limits.budget:
            raise _Budget
        if self.limits.over_time():
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

    def programs(self, limit: int = 200):
        """Complete decision lists from the requirements met so far, smallest first (orders
        of the values searched depth first, a prefix dropped as soon as its next value has
        no condition; at most ``limit`` lists)."""
        out = []

        def dfs(S, rest, opts):
            if len(out) >= limit:
                return
            if len(rest) == 1 and not isinstance(rest[0], str):
                for combo in itertools.product(*opts):
                    out.append((sum(sz for _, sz, _ in combo) + len(combo),
                                [(v, r) for v, _, r in combo], rest[0]))
                return
            if not rest:
                for combo in itertools.product(*opts):
                    out.append((sum(sz for _, sz, _ in combo) + len(combo),
                                [(v, r) for v, _, r in combo], None))
                return
            for v in rest:
                lst = self.req.get((frozenset(S), v))
                if not lst:
                    continue
                dfs(S | {v}, [w for w in rest if w != v],
                    opts + [[(v, sz, r) for sz, r in lst]])

        for vl in self.value_lists:
            dfs(frozenset(), list(vl), [])
        out.sort(key=lambda t: t[0])
        return out

    def greedy(self, max_entries: int, vbatches: list | None = None, checks: int = 400):
        """A decision list with repeated values (Rivest's greedy: each entry consistent on the
        positions left and covering the most of them, the smallest on ties), or None. With
        ``vbatches``, an entry must also be consistent on the validation positions left (the
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
        vbs = list(vbatches or [])
        Rvs = [np.ones(len(vb.tgt), dtype=bool) for vb in vbs]
        memos: list = [{} for _ in vbs]
        entries: list = []

        def vfires1(rec, v, vbatch, Rv, memo):
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

        def vfires(rec, v):
            """(consistent on every validation batch's positions left, fired there)."""
            out = []
            for vb, Rv, memo in zip(vbs, Rvs, memos):
                r = vfires1(rec, v, vb, Rv, memo)
                if r is None or not r[0]:
                    return None
                out.append(r[1])
            return (True, out)

        while True:
            left = set(tgt[R].tolist())
            for vb, Rv in zip(vbs, Rvs):
                left |= set(vb.tgt[Rv].tolist())
            if not left:
                return self._g_done(entries_size(entries), entries, None)
            if len(left) == 1 and not (b.uniform and next(iter(left)) in
                                       set(b.content.tolist())):
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
                if not vbs:
                    chosen = (c, None)
                    break
                self._check_time()
                vf = vfires(c[2], c[1])
                if vf is not None and vf[0]:
                    chosen = (c, vf[1])
                    break
            if chosen is None and vbs and tv is not None:
                # the search batch's positions are decided but the validation's are not:
                # the smallest conditions consistent on the search batch, the one covering
                # the most validation positions
                best = None
                for v in concrete:
                    bad = R & (tgt != v)
                    ok = ~(tv & bad[None]).any(axis=1)
                    for i in np.flatnonzero(ok)[np.argsort(tsz[ok], kind="stable")][:checks // 4]:
                        self._check_time()
                        vf = vfires(trec[i], v)
                        if vf is None:
                            continue
                        vc = sum(int((f & Rv).sum()) for f, Rv in zip(vf[1], Rvs))
                        if vc > 0 and (best is None or vc > best[0]):
                            best = (vc, ((0, v, trec[i], int(tsz[i]), tv[i]), vf[1]))
                if best is not None:
                    chosen = best[1]
            if chosen is None:
                return None
            (_, v, rec, sz, fires), vfired = chosen
            entries.append((v, rec))
            R &= ~fires
            for Rv, f in zip(Rvs, vfired or []):
                Rv &= ~f

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
                pb1 = pools[("B", True)].get(s - 1)
                if pb1 is not None:
                    self._unary("B", "any", pb1, s, True, out_param=False)
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

    def _unary(self, kind, op, pool, s, p, arg=None, out_param=None):
        vals, recs = pool
        step = max(1, int(4e6 // max(1, vals[0].size)))
        for lo in range(0, len(recs), step):
            self._check_time()
            x = vals[lo:lo + step]
            if op == "argmax":
                y = self.b.argmax(x, axis=1)
            else:
                y = self.b.unary(op, x, arg)
            if op in ("not", "cnt", "argmax", "any"):
                mk = (lambda o: lambda i: (o, recs[lo + i]))(op)
            elif op == "cmpk":
                mk = lambda i: ("cmpk", arg[0], arg[1], recs[lo + i])  # noqa: E731
            else:
                mk = (lambda o: lambda i: (o, arg, recs[lo + i]))(op)
            self._add(kind, s, y, mk, p if out_param is None else out_param)

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
