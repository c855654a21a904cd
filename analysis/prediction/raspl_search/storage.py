"""What the engine stores: levels of s-ops and selectors by size, recipes, the seen-set.

Every s-op kept at a size is a row of an ``[M, P]`` int8 array (P = valid positions of the
batch) in a :class:`_Level`; every selector a structured or entry row of a :class:`_SelLevel`;
each row remembers the recipe that made it (:class:`_Recipes`) so its IR node is built only
when needed. :class:`_Seen` holds the 64-bit fingerprints already kept (observational
equivalence). Two explicit records hold a round's state: :class:`Store` (the levels, the
seen-sets and the bytes stored; :func:`keep_sops` and :func:`keep_sels` add to it) and
:class:`Layout` (the batch's arrays and fingerprint coefficients, :func:`layout_of`). Also
the engine's shared constants (value kinds, select operators, block sizes) and the
worker-thread helpers.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
import os

import numpy as np

from .problem import INT8, SearchError

_MASK64 = (1 << 64) - 1
_KIND_INT, _KIND_IDX, _KIND_STR = 0, 1, 2
_SEL_OPS = {"==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
            ">": np.greater, ">=": np.greater_equal}
_CHUNK = 1 << 22          # elements per vectorized block


def _quiet(job):
    """Run a family job on a worker thread with NumPy's floating-point warnings off, as the
    engine's own thread runs (``np.errstate`` is per thread): int8 / int16 wrap-around and
    divisions by zero are part of the families' arithmetic, checked where it matters."""
    with np.errstate(all="ignore"):
        return job()


def _default_threads() -> int:
    """Worker threads of the search: ``RASP_SEARCH_THREADS`` when set, else the cores this
    process may use, at most 2 (the families are memory-bound beyond that)."""
    env = os.environ.get("RASP_SEARCH_THREADS")
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            raise SearchError(f"RASP_SEARCH_THREADS must be a whole number, not {env!r}") from None
    return max(1, min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                      else (os.cpu_count() or 1)))
# operators of structured selectors (opc) and, per operator, the coefficients of
# (sum over keys < query, sum over keys <= query, sum over all causal keys)
_STRUCT_OPS = ("<", "<=", "==", "!=", ">", ">=")
_OP_COEF = np.array([(1, 0, 0), (0, 1, 0), (-1, 1, 0), (1, -1, 1), (0, -1, 1), (-1, 0, 1)],
                    np.int64)
_DENSE_BYTES = 1 << 28    # dense float32 selector matrices kept per search (at most)
#: bytes a kept row costs beyond its values: its 64-bit fingerprint in the seen-set (a Python
#: int and its slot, ~80 measured) and its recipe's row index
_ROW_OVERHEAD = 96
#: bytes per element of a block that one family job holds at its peak (its values as int16, the
#: int8 check, the rows it may keep, the float32 sums of an aggregate, their casts)
_JOB_BYTES_PER_ELEMENT = 16
_MIN_CHUNK = 1 << 12


class _Recipes:
    """Recipes made on demand: each kept row remembers its family's recipe function and its
    row number in that family (building tuples for every kept row costs more than the
    arithmetic)."""

    def __init__(self):
        self.fns: list = []
        self.rows: list[np.ndarray] = []
        self.starts: list[int] = [0]

    def extend(self, fn, rows: np.ndarray):
        self.fns.append(fn)
        self.rows.append(np.asarray(rows))
        self.starts.append(self.starts[-1] + len(rows))

    def __getitem__(self, i: int) -> tuple:
        f = bisect.bisect_right(self.starts, i) - 1
        return self.fns[f](int(self.rows[f][i - self.starts[f]]))

    def __len__(self):
        return self.starts[-1]


class _Level:
    """The distinct s-ops of one expression size: values ``[M, P]`` (compact valid positions),
    their kind (int / index-derived / string codes), whether they are 0/1, and recipes."""

    def __init__(self, p: int):
        self.parts: list[np.ndarray] = []
        self.kinds: list[np.ndarray] = []
        self.recipes = _Recipes()
        self._vals = np.zeros((0, p), np.int8)
        self._kind = np.zeros(0, np.int8)
        self._full = None

    def add(self, vals: np.ndarray, kinds: np.ndarray, fn, rows):
        self.parts.append(vals.astype(np.int8))
        self.kinds.append(kinds.astype(np.int8))
        self.recipes.extend(fn, rows)
        self._full = None

    def freeze(self):
        if self.parts:
            # one array, each part dropped once copied (a level is the largest thing kept:
            # its copy and its parts should not all be alive at once)
            parts, self.parts = [self._vals] + self.parts, []
            vals = np.empty((sum(len(x) for x in parts), self._vals.shape[1]), np.int8)
            pos = 0
            while parts:
                x = parts.pop(0)
                vals[pos:pos + len(x)] = x
                pos += len(x)
                del x
            self._vals = vals
            self._kind = np.concatenate([self._kind] + self.kinds)
            self.kinds = []
        # 0/1 rows, in blocks of rows (two [M, P] temporaries would be three times the level)
        step = max(1, _CHUNK // max(1, self._vals.shape[1]))
        self.binary = np.concatenate(
            [((v >= 0) & (v <= 1)).all(axis=1) for v in
             (self._vals[a:a + step] for a in range(0, len(self._vals), step))]
            or [np.zeros(0, bool)]) & (self._kind == _KIND_INT)

    @property
    def vals(self) -> np.ndarray:
        return self._vals

    @property
    def kind(self) -> np.ndarray:
        return self._kind

    def __len__(self):
        return len(self._kind)


class _SelLevel:
    """The distinct selectors of one expression size, in emission order, with their widths
    ``W`` ``[n, P]`` and recipes. A ``select(K, Q, op)`` row is kept as its structure (key and
    query rows, operator code ``opc``: :data:`_STRUCT_OPS`), never as entries; other selectors
    (TRUE, and/or) as packed causal entries ``P`` (``dense[i]`` = the row of ``P``, -1
    for structured rows)."""

    def __init__(self):
        self.packed: list[np.ndarray] = []
        self.widths: list[np.ndarray] = []
        self.structs: list[np.ndarray] = []      # [n, 5]: klev, krow, qlev, qrow, opc (-1: dense)
        self.recipes = _Recipes()

    def freeze(self, nbytes: int, p: int):
        self.P = np.concatenate(self.packed) if self.packed else np.zeros((0, nbytes), np.uint8)
        self.W = np.concatenate(self.widths) if self.widths else np.zeros((0, p), np.int16)
        st = np.concatenate(self.structs) if self.structs else np.zeros((0, 5), np.int64)
        self.packed, self.widths, self.structs = [], [], []
        self.klev, self.krow, self.qlev, self.qrow, self.opc = st.T
        isd = self.opc < 0
        self.dense = np.where(isd, np.cumsum(isd) - 1, -1)
        self.has_empty = (self.W == 0).any(axis=1)
        self.maxw = self.W.max(axis=1, initial=0)

    def __len__(self):
        return len(self.recipes)


class _Seen:
    """The set of 64-bit fingerprints kept so far (a Python set; NumPy ``unique`` first)."""

    def __init__(self):
        self.s: set = set()

    def add_new(self, h: np.ndarray) -> np.ndarray:
        """Indices (ascending) of the first occurrence of each fingerprint of ``h`` not seen
        before; those fingerprints become seen."""
        return self.add_new_unique(*np.unique(h, return_index=True))

    def add_new_unique(self, u: np.ndarray, first: np.ndarray) -> np.ndarray:
        """:meth:`add_new` given ``np.unique(h, return_index=True)`` (computed elsewhere)."""
        ul = u.tolist()
        new = set(ul).difference(self.s)                 # set operations in C, no Python loop
        if not new:
            return np.zeros(0, np.int64)
        self.s.update(new)
        if len(new) == len(ul):
            return np.sort(first)
        return np.sort(first[np.searchsorted(u, np.fromiter(new, np.int64, len(new)))])

    def __len__(self):
        return len(self.s)


class _Found(Exception):
    pass


class _Budget(Exception):
    """The work budget (candidates, :mod:`analysis.prediction.budget`) is spent."""


@dataclass
class _Prep:
    """A family's candidates checked without touching engine state (:meth:`_Engine._prep`):
    ``M`` candidates, their kinds ``[M]``, the int8 check ``ok`` ``[M]`` (None: all ok), the
    rows equal to the target, the rows that may be kept (``idx`` into the family, None: all),
    their values ``v`` ``[m, P]``, kinds ``k`` and fingerprints (``np.unique(h,
    return_index=True)`` of the ``[m]`` fingerprints)."""
    M: int
    kinds: np.ndarray
    ok: np.ndarray | None
    allok: bool
    hits: list
    idx: np.ndarray | None
    v: np.ndarray | None
    k: np.ndarray | None
    h: tuple | None


@dataclass
class Layout:
    """The batch as the kernels read it: one explicit record, made once per round by
    :func:`layout_of` and never changed by the enumeration (a test may overwrite ``tvals``).

    Positions: ``B`` examples of ``T`` positions; the ``Pn`` valid ones in compact order are
    ``vflat`` (indices into the flat ``[B * T]`` layout); ``row_first`` / ``row_last`` ``[Pn]``
    the compact index of the first / last position of each one's example. Values:
    ``tokens_row`` ``[Pn]`` (string tokens as order-preserving codes: ``code``, ``decode``),
    ``index_row`` ``[Pn]`` (``index_row_full`` ``[B * T]``); the target: ``tvals`` at the
    compact columns ``tcols``. Causal entries: the ``E`` pairs (query, key <= query) of valid
    positions, grouped by query (``qstarts``), as flat positions ``eq_flat`` / ``ek_flat``,
    compact ``eq_c`` / ``ek_c``, indices ``sel_flat`` into ``[B, q, k]``, and ``causal_f32``
    ``[B, T, T]``; ``nbytes`` = bytes of a packed entry row. Fingerprints: ``R`` ``[Pn]`` for
    s-op rows; ``RE[(q, k)] = qa[q] * kb[k]`` (mod 2^64) for selector entries, ``RE_total``
    their sum, ``sel_byte_hash`` ``[nbytes, 256]`` the same from packed bytes. Constants:
    ``int_consts``, ``str_consts``, aggregate ``defaults``.
    """

    B: int
    T: int
    Pn: int
    vflat: np.ndarray
    is_str: bool
    code: dict
    decode: list
    tokens_row: np.ndarray
    index_row_full: np.ndarray
    index_row: np.ndarray
    tcols: np.ndarray
    tvals: np.ndarray
    eq_flat: np.ndarray
    ek_flat: np.ndarray
    E: int
    nbytes: int
    qstarts: np.ndarray
    sel_flat: np.ndarray
    causal_f32: np.ndarray
    R: np.ndarray
    eq_c: np.ndarray
    ek_c: np.ndarray
    qa: np.ndarray
    kb: np.ndarray
    RE: np.ndarray
    RE_total: np.int64
    sel_byte_hash: np.ndarray
    row_first: np.ndarray
    row_last: np.ndarray
    int_consts: list
    str_consts: list
    defaults: list


def layout_of(problem) -> Layout:
    """The :class:`Layout` of a :class:`~.problem.SearchProblem` (seeded fingerprint
    coefficients: the same batch gives the same record).

    Raises:
        SearchError: more than 120 distinct string values, or numeric tokens outside int8.
    """
    B, T = problem.inputs.shape
    valid = problem.valid
    vflat = np.flatnonzero(valid.reshape(-1))
    P = len(vflat)
    is_str = problem.inputs.dtype.kind == "U"
    code, decode = {}, []
    # string values become order-preserving codes (only compared, never computed with)
    if is_str:
        alphabet = sorted(set(problem.inputs[valid].tolist()) |
                          set(problem.target[problem.target_mask].tolist()) |
                          {c for c in problem.constants if isinstance(c, str)} |
                          {d for d in problem.defaults if isinstance(d, str)})
        if len(alphabet) > 120:
            raise SearchError("too many distinct string values (at most 120)")
        code = {s: i for i, s in enumerate(alphabet)}
        decode = alphabet
        toks = np.vectorize(code.get, otypes=[np.int64])(problem.inputs)
        tvals = np.array([code[s] for s in problem.target.reshape(-1)[vflat][
            problem.target_mask.reshape(-1)[vflat]].tolist()], np.int64)
    else:
        toks = problem.inputs.astype(np.int64)
        tvals = problem.target.reshape(-1)[vflat][
            problem.target_mask.reshape(-1)[vflat]].astype(np.int64)
        if toks[valid].size and (toks[valid].min() < INT8[0] or toks[valid].max() > INT8[1]):
            raise SearchError("token values outside the int8 range [-128, 127]")
    tcols = np.flatnonzero(problem.target_mask.reshape(-1)[vflat])
    # causal entries (b, q, k<=q) over valid queries, grouped by query in compact order
    qs, ks = [], []
    for b in range(B):
        n = int(valid[b].sum())
        qq, kk = np.tril_indices(n)
        qs.append(b * T + qq)
        ks.append(b * T + kk)
    eq_flat = np.concatenate(qs)          # flat query position of each entry
    ek_flat = np.concatenate(ks)
    E = len(eq_flat)
    nbytes = (E + 7) // 8
    lens = valid.sum(axis=1)
    counts = np.concatenate([np.arange(1, n + 1) for n in lens])
    qstarts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    sel_flat = (eq_flat // T) * T * T + (eq_flat % T) * T + (ek_flat % T)
    causal = np.zeros(B * T * T, np.float32)            # the causal valid entries, [B, q, k]
    causal[sel_flat] = 1
    rng = np.random.default_rng(12345)
    R = rng.integers(1, 2**62, size=P, dtype=np.int64) | 1
    # selector fingerprints: a random linear hash of the causal entries modulo 2^64 with
    # rank-one coefficients RE[(q, k)] = a[q] * b[k] (a degree-2 polynomial identity test:
    # distinct selectors collide with probability about 2^-62), the same function whether
    # computed from packed bits (a byte table) or, for ``select(K, Q, op)``, from running
    # sums without forming the entries (:func:`.kernels.select_hashes`)
    comp = np.full(B * T, -1, np.int64)
    comp[vflat] = np.arange(P)
    eq_c, ek_c = comp[eq_flat], comp[ek_flat]             # compact query / key
    qa = rng.integers(1, 2**63 - 1, size=P, dtype=np.int64)
    kb = rng.integers(1, 2**63 - 1, size=P, dtype=np.int64)
    RE = qa[eq_c] * kb[ek_c]                              # mod 2^64
    re_pad = np.zeros(nbytes * 8, np.int64)
    re_pad[:E] = RE
    bits = ((np.arange(256)[:, None] >> (7 - np.arange(8))[None, :]) & 1).astype(np.int64)
    # compact positions: index of the first / last position of each one's batch row
    row_of = vflat // T
    index_row_full = np.tile(np.arange(T), B)
    # constants: numbers (and string codes) the grammar may use
    if is_str:
        defaults = [d for d in problem.defaults if isinstance(d, str)] or [decode[0]]
    else:
        defaults = [int(d) for d in problem.defaults if isinstance(d, (int, np.integer))] or [0]
    return Layout(
        B=B, T=T, Pn=P, vflat=vflat, is_str=is_str, code=code, decode=decode,
        tokens_row=toks.reshape(-1)[vflat], index_row_full=index_row_full,
        index_row=index_row_full[vflat], tcols=tcols, tvals=tvals, eq_flat=eq_flat,
        ek_flat=ek_flat, E=E, nbytes=nbytes, qstarts=qstarts, sel_flat=sel_flat,
        causal_f32=causal.reshape(B, T, T), R=R, eq_c=eq_c, ek_c=ek_c, qa=qa, kb=kb, RE=RE,
        RE_total=RE.sum(),
        sel_byte_hash=(re_pad.reshape(nbytes, 1, 8) * bits[None]).sum(axis=2),
        row_first=np.searchsorted(row_of, row_of, side="left"),
        row_last=np.searchsorted(row_of, row_of, side="right") - 1,
        int_consts=[c for c in problem.constants
                    if isinstance(c, (int, np.integer)) and not isinstance(c, bool)],
        str_consts=[c for c in problem.constants if isinstance(c, str)],
        defaults=defaults)


class _Memory(Exception):
    """The search's memory (``--memory-mb``: bytes of arrays, counted, never measured) cannot
    hold what the next step needs: the search stops with ``stopped == "memory"``."""


@dataclass
class Store:
    """What the enumeration keeps, one explicit record, and the search's memory (bytes of
    arrays, counted so that where a search stops does not depend on the machine): the
    distinct s-ops (``rows``: size -> :class:`_Level`) and selectors (``sels``: size ->
    :class:`_SelLevel`) by expression size, their fingerprints (``seen``, ``sel_seen``).

    Memory: ``max_bytes`` is the whole search's (``--memory-mb``), 7/8 of it counted for
    arrays (``usable_bytes``); ``work_bytes`` (a quarter of that) is kept for the temporaries of the families (blocks of ``chunk`` elements, a few jobs in
    flight: :func:`chunk_of`) and the combination; the rest holds what is kept:
    ``stored_bytes`` (rows and selectors with their fingerprints and recipes,
    :data:`_ROW_OVERHEAD` each), ``cache_bytes`` (arrays derived from levels and kept on them:
    dense selector matrices ``dense_bytes``, float layouts, rank tables) and
    ``level_bytes`` (the level being built: freezing it copies it once), ``held_bytes`` (the
    combination's pool while it runs). Past that
    ``storing`` is False and the current size finishes without storing; an array that cannot
    be made within it raises :class:`_Memory`. ``Pn`` = valid positions of the batch."""

    max_bytes: int
    Pn: int
    rows: dict = field(default_factory=dict)
    sels: dict = field(default_factory=dict)
    seen: _Seen = field(default_factory=_Seen)
    sel_seen: _Seen = field(default_factory=_Seen)
    stored_bytes: int = 0
    dense_bytes: int = 0
    cache_bytes: int = 0
    level_bytes: int = 0
    held_bytes: int = 0
    storing: bool = True

    @property
    def usable_bytes(self) -> int:
        """The memory the arrays may take: 7/8 of ``max_bytes`` (the rest: the allocator's
        slack and the interpreter, which the counted bytes do not see)."""
        return self.max_bytes * 7 // 8

    @property
    def work_bytes(self) -> int:
        return self.usable_bytes // 4

    @property
    def keep_bytes(self) -> int:
        """Bytes for what is kept (rows, selectors, caches, the level being frozen)."""
        return self.usable_bytes - self.work_bytes

    def used(self) -> int:
        return self.stored_bytes + self.cache_bytes + self.level_bytes + self.held_bytes

    def fits(self, nbytes: int) -> bool:
        """Whether ``nbytes`` more can be kept."""
        return self.used() + int(nbytes) <= self.keep_bytes

    def cache(self, nbytes: int, what: str) -> None:
        """Count ``nbytes`` of an array kept on a level; :class:`_Memory` when it does not fit
        (the enumeration cannot go on without it)."""
        if not self.fits(nbytes):
            raise _Memory(what)
        self.cache_bytes += int(nbytes)

    def need(self, nbytes: int, what: str, jobs: int = 1) -> None:
        """A temporary of ``nbytes`` that cannot be cut into smaller blocks, held by up to
        ``jobs`` jobs at once: :class:`_Memory` when the temporaries' share cannot hold it."""
        if int(nbytes) * jobs > self.work_bytes:
            raise _Memory(what)

    def end_level(self) -> None:
        """The level being built is frozen: its bytes are stored bytes now."""
        self.level_bytes = 0


def chunk_of(store: Store, jobs: int) -> int:
    """Elements per block of a family (at most :data:`_CHUNK`, the block of an unbounded
    search): ``jobs`` blocks in flight hold at most the temporaries' share of the memory."""
    return int(max(_MIN_CHUNK, min(_CHUNK, store.work_bytes //
                                   (_JOB_BYTES_PER_ELEMENT * max(1, jobs)))))


def _count_bytes(store: Store, n: int, copied: int) -> None:
    """Count ``n`` bytes kept in the level being built, ``copied`` of them arrays that
    freezing it copies once more."""
    store.stored_bytes += n
    store.level_bytes += copied
    if store.used() > store.keep_bytes:
        store.storing = False


def keep_sops(store: Store, level: int, vals: np.ndarray, kinds: np.ndarray, recipe,
              rows: np.ndarray) -> None:
    """Keep new distinct s-ops at ``level``: values ``[m, Pn]``, kinds ``[m]``, row ``i``'s
    recipe ``recipe(rows[i])``; counts ``m * (Pn + _ROW_OVERHEAD)`` bytes."""
    lv = store.rows.setdefault(level, _Level(store.Pn))
    lv.add(vals, kinds, recipe, rows)
    _count_bytes(store, len(rows) * (store.Pn + _ROW_OVERHEAD), len(rows) * store.Pn)


def keep_sels(store: Store, level: int, structs: np.ndarray, widths: np.ndarray, recipe,
              rows: np.ndarray, packed: np.ndarray | None, row_bytes: int) -> None:
    """Keep new distinct selectors at ``level``: structures ``[m, 5]`` (``-1``: packed),
    widths ``[m, Pn]`` int16, recipes ``recipe(rows[i])``, packed causal entries ``[m,
    nbytes]`` or None (structured selectors); counts ``m * (row_bytes + 2 * Pn +
    _ROW_OVERHEAD)`` bytes."""
    lv = store.sels.setdefault(level, _SelLevel())
    if packed is not None:
        lv.packed.append(packed)
    lv.widths.append(widths)
    lv.structs.append(structs)
    lv.recipes.extend(recipe, rows)
    _count_bytes(store, len(rows) * (row_bytes + 2 * store.Pn + _ROW_OVERHEAD),
                 len(rows) * (row_bytes + 2 * store.Pn))
