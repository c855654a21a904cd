"""What the engine stores: levels of s-ops and selectors by size, recipes, the seen-set.

Every s-op kept at a size is a row of an ``[M, P]`` int8 array (P = valid positions of the
batch) in a :class:`_Level`; every selector a structured or entry row of a :class:`_SelLevel`;
each row remembers the recipe that made it (:class:`_Recipes`) so its IR node is built only
when needed. :class:`_Seen` holds the 64-bit fingerprints already kept (observational
equivalence). Also the engine's shared constants (value kinds, select operators, block sizes)
and the worker-thread helpers.
"""

from __future__ import annotations

from dataclasses import dataclass
import os

import numpy as np

from .problem import SearchError

_MASK64 = (1 << 64) - 1
_KIND_INT, _KIND_IDX, _KIND_STR, _KIND_COUNT = 0, 1, 2, 3
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
_DENSE_BYTES = 1 << 28    # dense float32 selector matrices kept per search


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
        import bisect
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
            self._vals = np.concatenate([self._vals] + self.parts)
            self._kind = np.concatenate([self._kind] + self.kinds)
            self.parts, self.kinds = [], []
        self.binary = ((self._vals >= 0) & (self._vals <= 1)).all(axis=1) & \
            (self._kind == _KIND_INT)

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
    (TRUE, and/or, local) as packed causal entries ``P`` (``dense[i]`` = the row of ``P``, -1
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
