"""The enumeration engine: bottom-up by expression size, one level at a time (one round of the
search core's loop, :mod:`.core`).

:class:`_Engine` is the record of a round: the batch layout (``lay``, a
:class:`.storage.Layout`), what it keeps (``store``, a :class:`.storage.Store`: levels,
fingerprints, bytes), the work counts and the worker threads; it emits candidates (``_prep`` on a worker: range check, target hits,
fingerprints; ``_commit`` on the calling thread: dedup, keep, stop on a hit), rebuilds IR nodes
from recipes and runs the levels in order (``run``). The candidate families (:mod:`.families`),
the array kernels (:mod:`.kernels`) and the deep aggregates and combination
(:mod:`.combination`) are functions of that record (no mixins).
"""

from __future__ import annotations

import collections
from concurrent.futures import ThreadPoolExecutor, wait
import ctypes
import os
import time

import numpy as np

from rasp.ir import (Aggregate, Elementwise, Full, Indices, Map, Select, SelectorAnd, SelectorOr,
                     SelectorWidth, SequenceMap, Tokens)
from rasp.repl.progress import progress_bar

from .combination import combine
from analysis.prediction.search_core import MEMORY_STOP, SearchResult, program_source
from .families import leaves, sel_level, sop_level
from .kernels import row_hash, sel_hash, select_entries, select_hashes
from .problem import (_GRAMMAR, INT8, SearchError, SearchProblem, _measured,
                      matches_problem)
from analysis.prediction.budget import BUDGET_STOP, TIME_CAP_STOP

from .storage import (_KIND_STR, _OP_COEF, _STRUCT_OPS, _Budget, _default_threads, _Found,
                      _Level, _Memory, _Prep, _quiet, Store, chunk_of, keep_sels, keep_sops,
                      layout_of)

#: family jobs in flight (computed or computing, not yet committed) with the default threads:
#: the blocks are sized for this many (:func:`.storage.chunk_of`), whatever the threads, so
#: that where a search stops never depends on them
_JOBS_IN_FLIGHT = 5
#: the safety net (never a verdict's reason on its own): the resident set may grow past the
#: counted memory by this factor (allocator slack) before the search stops with "memory"
_RSS_SLACK = 1.5


def _rss_bytes() -> int | None:
    """This process's resident set in bytes (Linux ``/proc/self/statm``), None elsewhere."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _trim() -> None:
    """Give freed heap memory back to the system (glibc ``malloc_trim``; nothing elsewhere):
    the levels' blocks are freed in many sizes, and the allocator would keep them."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


class _Engine:
    """Bottom-up enumeration by expression size, evaluated in families as array operations.

    Every s-op is a row of ``[M, P]`` int8 values on the P valid positions of the batch; a
    family (all maps of a level, all sequence maps of two levels, all aggregates of one
    selector over a level of values, all selects of a key row against a level of query rows)
    is computed as one NumPy broadcast or one batched matrix product, fingerprinted by a 64-bit
    linear hash (one integer matrix-vector product), checked against the target, and only its
    new distinct rows are kept (observational equivalence). ``select(K, Q, op)`` candidates
    are fingerprinted without forming their ``[E]`` causal entries (:func:`.kernels.select_hashes`,
    O(P) per candidate instead of O(E)) and kept as structure; their entries are formed only
    when an aggregate or an and/or reads them (:func:`.kernels.sel_entries`).
    """

    def __init__(self, problem: SearchProblem, limits, max_length: int,
                 progress: bool, max_bytes: int, validate, prune: bool = True,
                 grammar: dict | None = None, threads: int | None = None):
        self.p = problem
        # analysis.prediction.budget.Limits: the enumeration's candidates and the time cap
        self.limits = limits
        self.max_length = max_length
        self.progress = progress
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
        self.all_programs: list | None = [] if not prune else None
        # the combination's work budget, in the same unit (:meth:`_cwork`)
        self.combine_budget = int(g.get("combine_budget", 0))
        self.combine_work = 0
        # worker threads for the families (:meth:`_families`); one: everything on this thread
        self.threads = max(1, int(threads if threads is not None else _default_threads()))
        self._pool = None
        self._ahead = 2 * self.threads
        if "mode" in g:
            # the C-RASP grammars are analysis.prediction.crasp_search (one grammar per engine)
            raise SearchError("the RASP-L engine has no C-RASP mode: use "
                              "analysis.prediction.search.search(task, grammar=\"crasp\")")
        # the batch's arrays and fingerprint coefficients (an explicit record, storage.Layout)
        self.lay = layout_of(problem)
        self.target_str = self.lay.is_str
        # what the enumeration keeps (an explicit record, storage.Store): levels of s-ops and
        # selectors, fingerprints, bytes stored
        self.store = Store(max_bytes, self.lay.Pn)
        # elements per block of a family, from the memory for temporaries (every family's
        # blocks hold at most this; the unbounded search's block when the memory allows it)
        self.chunk = chunk_of(self.store, _JOBS_IN_FLIGHT)
        self._rss0 = _rss_bytes()
        self._commits = 0
        self.memory_note = None
        self.start = 0.0
        self.bar = None
        self._nodes: dict = {}
        self._sel_nodes: dict = {}

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

    def _check_time(self):
        """``TimeoutError`` once the wall-clock cap has passed (steps between commits)."""
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
        if checked or self.lay.T > INT8[1]:     # widths and positions can pass 127 past 127 tokens
            ok = (vals.min(axis=1) >= INT8[0]) & (vals.max(axis=1) <= INT8[1])  # rule 2
            ok |= kinds == _KIND_STR
            allok = bool(ok.all())
        else:
            ok, allok = None, True
        # the target: next-token values at the target positions (one column filters first)
        c0 = vals[:, self.lay.tcols[0]] == self.lay.tvals[0]
        hits = ()
        if c0.any():
            cand = np.flatnonzero(c0)
            hits = cand[(vals[cand][:, self.lay.tcols] == self.lay.tvals).all(axis=1)].tolist()
        idx = v = k = h = None
        if level < self.max_length:
            if allok:
                v, k = vals, kinds
            else:
                idx = np.flatnonzero(ok)
                v, k = vals[idx], kinds[idx]
            if self.prune and v.shape[0]:
                h = np.unique(row_hash(self.lay, v, k), return_index=True)
        return _Prep(M, kinds, ok, allok, hits, idx, v, k, h)

    def _commit(self, level: int, prep: "_Prep | None", recipe, part: tuple | None = None):
        """The part of :meth:`_emit` that changes engine state, in emission order (main thread):
        the target hits are considered, the candidates counted, the new rows kept.

        ``part`` = ``(offset, total, last)``: the emission is one block (rows ``offset..``) of
        a family's emission of ``total`` candidates cut to fit the memory; it behaves as the
        uncut emission would: the candidates are counted once, after the last block's hits,
        and an emission that crosses the budget keeps none of its rows."""
        self._check_memory()
        off = 0
        if part is not None:
            off, total, last = part
            if off == 0:
                self._crossing = self.explored + total > self.limits.budget
            if self.limits.over_time():
                raise TimeoutError
        if prep is None:
            if part is not None and last:
                self._tick(total)
            return
        if off:
            recipe = (lambda i, r=recipe, o=off: r(o + i))
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
        if part is None:
            self._tick(prep.M)
        elif self._crossing:
            if last:
                self._tick(total)
            return
        try:
            self._keep(level, prep, recipe)
        finally:
            if part is not None and last:
                self._tick(total)

    def _check_memory(self):
        """The safety net under the counted memory: every few commits, the resident set's
        growth since the search began past :data:`_RSS_SLACK` times ``--memory-mb`` stops the
        search with "memory" (the counted bytes are a model of the arrays; this catches what
        the model misses, e.g. the allocator's slack), saying so in a note."""
        self._commits += 1
        if self._rss0 is None or self._commits % 16:
            return
        rss = _rss_bytes()
        if rss is not None and rss - self._rss0 > _RSS_SLACK * self.store.max_bytes:
            _trim()
            rss = _rss_bytes() or rss
            if rss - self._rss0 > _RSS_SLACK * self.store.max_bytes:
                self.memory_note = (f"the resident set grew by {(rss - self._rss0) / 2**20:,.0f}"
                                    f" MB, past {_RSS_SLACK:g} x the search's memory "
                                    f"({self.store.max_bytes / 2**20:,.0f} MB): stopped by the "
                                    "safety net, where it stopped depends on the machine")
                raise _Memory("resident set")

    def _keep(self, level: int, prep: "_Prep", recipe):
        """Keep a prepared emission's new distinct rows (:meth:`_commit`)."""
        if not self.store.storing or prep.v is None or prep.v.shape[0] == 0:
            return
        v, k, idx = prep.v, prep.k, prep.idx
        if self.prune:
            keep = self.store.seen.add_new_unique(*prep.h)
            if keep.size == 0:
                return
        else:
            keep = np.arange(v.shape[0])
        keep_sops(self.store, level, v[keep], k[keep], recipe,
                  keep if idx is None else idx[keep])

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

    def _emit_sels(self, level: int, ent: np.ndarray | None, recipe, h: np.ndarray | None = None,
                   struct=None, unique: tuple | None = None):
        """Keep a family of candidate selectors: ``ent`` ``[M, E]`` bool causal entries, or
        their fingerprints ``h`` ``[M]`` (:func:`.kernels.select_hashes`) with ``struct`` = ``(klev,
        krows [nk], qlev, qrows [nq], opc, widths_of)``: candidate ``r`` is ``select(krows[r //
        nq], qrows[r % nq], _STRUCT_OPS[opc])`` (rows of levels klev / qlev), kept as that
        structure; its widths come from ``widths_of(x, y, opc)`` (:func:`.kernels.select_hashes`) or,
        when that is None, from its entries."""
        M = ent.shape[0] if ent is not None else h.shape[0]
        if M == 0:
            return
        self._check_memory()
        self._tick(M)
        if not self.store.storing:
            return
        packed = None
        if h is None:
            packed = np.packbits(ent, axis=1)
            h = sel_hash(self.lay, packed) if self.prune else None
        if self.prune:
            keep = self.store.sel_seen.add_new_unique(*unique) if unique is not None else \
                self.store.sel_seen.add_new(h)
            if keep.size == 0:
                return
        else:
            keep = np.arange(M)
        st = np.full((keep.size, 5), -1, np.int64)
        if ent is None:
            klev, krows, qlev, qrows, opc, widths_of = struct
            x_, y_ = np.divmod(keep, qrows.size)
            st[:, 0], st[:, 1], st[:, 2], st[:, 3], st[:, 4] = \
                klev, krows[x_], qlev, qrows[y_], opc
            if widths_of is not None:
                widths = widths_of(x_, y_, opc)
            else:
                K, Q = self.store.rows[klev].vals, self.store.rows[qlev].vals
                step = max(1, self.chunk // self.lay.E)
                widths = np.concatenate([
                    np.add.reduceat(select_entries(self.lay, K[krows[x_[a:a + step]]],
                                                   Q[qrows[y_[a:a + step]]], opc),
                                    self.lay.qstarts, axis=1, dtype=np.int16)
                    for a in range(0, keep.size, step)])
            keep_sels(self.store, level, st, widths, recipe, keep, None, 40)
        else:
            widths = np.add.reduceat(ent[keep], self.lay.qstarts, axis=1, dtype=np.int16)
            keep_sels(self.store, level, st, widths, recipe, keep, packed[keep],
                      self.lay.nbytes)

    def _select_emissions(self, k, i, j, Kv, Qv, kb, qq, ops) -> list:
        """A job of :func:`.families.selects` (worker thread): the fingerprints of ``select(K, Q, op)``
        for key rows ``kb`` (values ``Kv``) of level i, query rows ``qq`` (``Qv``) of level j
        and each operator, deduplicated within the family; returns the commits (callables for
        the main thread, in operator order)."""
        lt, le, widths_of = select_hashes(self.lay, Kv, Qv)
        nq = qq.size
        out = []
        for op in ops:
            def rec(r, kb=kb, op=op, qq=qq, nq=nq, i=i, j=j):
                x_, y_ = divmod(r, nq)
                return ("select", (i, int(kb[x_])), (j, int(qq[y_])), op)
            opc = _STRUCT_OPS.index(op)
            c = _OP_COEF[opc]
            h = (c[0] * lt + c[1] * le + c[2] * self.lay.RE_total).reshape(-1)     # mod 2^64
            hu = np.unique(h, return_index=True) if self.prune else None

            def commit(h=h, hu=hu, rec=rec, opc=opc):
                if self.store.storing:          # a sequential run stops the family there
                    self._emit_sels(k, None, rec, h=h, struct=(i, kb, j, qq, opc, widths_of),
                                    unique=hu)
            out.append(commit)
        return out

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
        return (level, self.store.rows[level].recipes[i])

    def _sel_ref(self, ref):
        level, i = ref
        return self.store.sels[level].recipes[i]

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
        elif rec[0] == "and":
            n = SelectorAnd(self._sel(rec[1]), self._sel(rec[2]))
        elif rec[0] == "or":
            n = SelectorOr(self._sel(rec[1]), self._sel(rec[2]))
        else:
            raise AssertionError(rec)
        self._sel_nodes[rec] = n
        return n

    def node_of(self, level, i):
        return self._node((level, self.store.rows[level].recipes[i]))

    def _lv(self, k) -> _Level | None:
        lv = self.store.rows.get(k)
        return lv if lv is not None and len(lv) else None

    def _memory_stop(self, e: BaseException, where: str) -> str:
        """:data:`MEMORY_STOP` for a stop on memory (``where``: the phase, for the note); a
        ``MemoryError`` (the system refused, not the count) also leaves a note that where it
        stopped depends on the machine."""
        if isinstance(e, MemoryError) and self.memory_note is None:
            self.memory_note = (f"the system refused memory (MemoryError){where}: where it "
                                "stopped depends on the machine")
        return MEMORY_STOP

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
                    leaves(self)
                    self.store.rows[0].freeze()
                    certified = 0
                    for k in range(1, self.max_length + 1):
                        if bar is not None:
                            bar.set_postfix(size=k)
                        sop_level(self, k)
                        certified = k
                        _trim()
                        if not self.store.storing:
                            stopped = MEMORY_STOP
                            break
                        if k < self.max_length:
                            sel_level(self, k)
                            _trim()
                            if not self.store.storing:
                                stopped = MEMORY_STOP
                                break
                except _Found:
                    stopped = "spurious" if self.found is None else "found"
                except _Budget:
                    stopped = BUDGET_STOP
                except TimeoutError:
                    stopped = TIME_CAP_STOP
                except (_Memory, MemoryError) as e:
                    # an array the counted memory cannot hold (or, the safety net, one the
                    # system refused): the sizes completed stay certified
                    stopped = self._memory_stop(e, "")
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
                    combine(self)
            except _Budget:
                pass
            except TimeoutError:
                stopped = TIME_CAP_STOP
            except (_Memory, MemoryError) as e:
                stopped = self._memory_stop(e, " in the combination")
            if self.found is not None:
                found_by = "combination"
        seconds = time.perf_counter() - self.start
        f = self.found
        if f is not None and found_by == "enumeration":
            certified = f[1] - 1
        # certified_below stays an int (-1: none) through the rounds; the driver's result
        # makes it None for none
        return SearchResult(
            task=self.p.name, grammar="raspl", found=f is not None,
            program=f[0] if f else None,
            size=f[1] if f else None, certified_below=certified, stopped=stopped,
            explored=self.explored, distinct=len(self.store.seen), seconds=seconds,
            combine_work=self.combine_work,
            lengths=list(self.p.lengths), n_targets=self.p.n_targets,
            max_size=self.max_length,
            source=program_source(f[0] if f else None, symbols=self.p.symbols,
                                  example=self.p.example), found_by=found_by,
            measured_length=_measured(f[0]) if f else None,
            notes=[self.memory_note] if self.memory_note else [])
