"""Bounded shortest-program search over RASP-L (and C-RASP) next-token programs.

The RASP-Generalization Conjecture (Zhou et al. 2023, arXiv 2310.16028, §3) predicts length
generalization from the length of the *shortest* RASP-L program for a task's next-token
function; Huang et al. 2025 (arXiv 2410.02140) from the existence of a C-RASP program. Shipped
programs only bound that length from above. This module enumerates programs smallest first and
either returns the first program that reproduces the task, or certifies that no program of
expression size ``<= k`` in the grammar does; after the exhaustive part it may also *combine*
the terms it enumerated into a larger program (an upper bound, not certified shortest).

**Size.** The expression size counts every operation (select, aggregate, selector width, map,
sequence map, ternary, constant s-op, selector and/or) at every use; ``tokens`` and
``indices`` count 0. It equals the program length of ``docs/language.md`` §4 for programs whose
sub-expressions are not shared, and bounds it from above otherwise; bounds are stated in size.

**Method.** Bottom-up enumeration with observational equivalence (Udupa et al. 2013, TRANSIT;
Albarghouthi et al. 2013) on one fixed batch of task examples, evaluated in *families* as array
operations instead of one interpreter call per candidate: every s-op of a size is a row of an
``[M, P]`` int8 array (P = valid positions of the batch); all maps of a size are one broadcast
per operation; all sequence maps of two sizes one ``[Mx, My, P]`` broadcast; all ternaries one
``where`` per condition row; all selects of a key row against every query row one comparison
of ``[Mq, E]`` causal entries; all mean-aggregates of a block of selectors over every value
row of a size one batched matrix product, max/min one masked reduction. Each family is
fingerprinted at once (a random linear hash modulo 2^64 of each row: one integer matrix-vector
product), checked against the target on the target positions, and only new fingerprints are
kept. Because every program is causal, position ``t``'s value depends only on the prefix
``0..t``: one evaluation of an example gives the next-token prediction for every prefix.
The families are computed in blocks ("jobs") on worker threads (the usable cores, at most 2;
NumPy releases the GIL in the array work) and their candidates committed on the calling thread
in the order a sequential run emits them, so the result does not depend on the threads.

**Grammar** (RASP-L mode; all RASP-L: causal selects, int8 values, indices only compared or
shifted by a constant, no ``length``): leaves ``tokens``, ``indices``; constants (size 1) 0, 1,
2 and the special tokens' values; maps ``x + 1``, ``x - 1``, ``x == c``, ``x < c``, ``x > c``,
``not x``; sequence maps ``x + y``, ``x - y``, ``x == y``, ``x < y``, ``x and y``, ``x or y``;
ternaries ``x if c else y`` (``c`` 0/1); ``select(keys, queries, op)`` for the six comparisons
and the always-true selector; selector ``and`` / ``or``; ``aggregate`` with ``mean`` (truncated,
the RASP-L ``kqv``), ``max``, ``min`` and the constants as defaults; ``selector_width``. Values
derived from indices (selector widths included, as :mod:`rasp.raspl` rule 3 says) are only
compared or shifted. **C-RASP modes** (``grammar={"mode": "crasp" | "crasp_pl"}``, Huang et al.
§3): no aggregates; selects only on the symbols of key and query; selector widths are counts,
which may be added, subtracted, compared and chosen by ternaries; ``crasp_pl`` adds the local
selectors ``select(indices, indices - c, ==)`` (c = 1, 2) and the periodic predicates
``indices % p == r`` (p = 2, 3, 4).

**Certificate.** "No program of size <= k in this grammar reproduces the next-token function on
the search batch" — and so on every batch, since a correct program must reproduce this one.
Pruning by observational equivalence is exact for size (each program can use the kept
representative of any sub-expression's value class, which is no larger); fingerprints are 64-bit
(a collision, about n^2 / 2^65 for n rows, would prune wrongly); values outside int8 are
dropped (RASP-L rule 2). ``tests/test_search_certificates.py`` re-checks certificates against a
brute force that evaluates every program with the interpreter. A candidate that fits the batch
but not a larger validation batch shows that the batch merged programs it should have
separated: the shortest validation example it gets wrong joins the batch and the search starts
again (counterexample-guided refinement). Batches only grow from round to round, so the
certificate of any round holds for the task and the result keeps the best one; a round
restarted for the combination's counterexamples enumerates only the sizes already certified
(they rebuild the pool of terms; no program of those sizes can fit the larger batch).

**Combination** (Alur et al. 2017, divide and conquer): after the exhaustive part, a decision
list ``c1 ? t1 : (c2 ? t2 : ...)`` of enumerated terms ``t`` (each right on part of the targets)
and conditions ``c`` (0/1 s-ops of the pool, or a term compared with a constant) that are true
only where their term is right. A combined program is validated like any other and reported as
``found_by == "combination"``: an upper bound.
"""

from __future__ import annotations

import collections
import itertools
import os
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np
from threadpoolctl import threadpool_limits

from rasp.interpreter import Evaluator
from rasp.ops import OPS
from rasp.ir import (Aggregate, Elementwise, Full, Indices, Map, Node, RASPError, Select,
                     SelectorAnd, SelectorOr, SelectorWidth, SequenceMap, SOp, Tokens,
                     topological_order)

__all__ = ["SearchProblem", "SearchResult", "SearchError", "search", "search_task",
           "matches_problem",
           "problem_from_examples", "problem_from_task", "program_to_source", "INT8"]

INT8 = (-128, 127)


class SearchError(ValueError):
    """The search cannot be set up (bad task representation, no usable example, ...)."""


# --------------------------------------------------------------------------------------------
# The problem: a batch of examples and the next token expected at some positions
# --------------------------------------------------------------------------------------------

@dataclass
class SearchProblem:
    """A fixed batch and the next-token values a program must produce.

    Attributes:
        inputs: ``[batch, seq]`` program token values (each example right-padded with its last
            value; padding never influences a causal program's earlier positions).
        valid: ``[batch, seq]`` bool, the real positions of each example.
        target_mask: ``[batch, seq]`` bool, the positions whose next token is predicted (the
            answer part of each example).
        target: ``[batch, seq]`` the expected program value (the next token) where
            ``target_mask``; arbitrary elsewhere.
        constants: numeric constants the grammar may use (``full``, ``x == c``, ...).
        defaults: aggregate defaults.
        lengths: the task lengths present in the batch.
        name: a label for reports.
    """

    inputs: np.ndarray
    valid: np.ndarray
    target_mask: np.ndarray
    target: np.ndarray
    constants: list = field(default_factory=lambda: [0, 1, 2])
    defaults: list = field(default_factory=lambda: [0])
    lengths: list = field(default_factory=list)
    name: str = "problem"

    @property
    def n_targets(self) -> int:
        return int(self.target_mask.sum())


def problem_from_examples(examples: Sequence[tuple[Sequence, int]], *, constants=(0, 1, 2),
                          defaults=(0,), lengths=(), name="problem") -> SearchProblem:
    """Build a :class:`SearchProblem` from ``(values, first_target)`` pairs.

    Each ``values`` is one whole example as the program sees it (e.g. ``BOS prompt SEP answer
    EOS``); positions ``t >= first_target - 1`` up to the second-to-last must predict
    ``values[t + 1]``. The batch holds ``values[:-1]`` of each example.

    Raises:
        SearchError: no examples, or mixed value types.
    """
    if not examples:
        raise SearchError("no examples to search on")
    seqs = [list(v) for v, _ in examples]
    n = max(len(s) for s in seqs) - 1
    if n < 1:
        raise SearchError("examples are too short")
    kinds = {isinstance(x, str) for s in seqs for x in s}
    if len(kinds) > 1:
        raise SearchError("examples mix string and numeric token values")
    is_str = kinds == {True}
    dtype = str if is_str else np.int64
    b = len(seqs)
    inputs = np.empty((b, n), dtype=object)
    valid = np.zeros((b, n), dtype=bool)
    tmask = np.zeros((b, n), dtype=bool)
    target = np.empty((b, n), dtype=object)
    for i, (s, first) in enumerate(examples):
        s = list(s)
        body = s[:-1]
        inputs[i, :len(body)] = body
        inputs[i, len(body):] = body[-1]
        valid[i, :len(body)] = True
        target[i, :] = s[-1]
        for t in range(max(first - 1, 0), len(s) - 1):
            tmask[i, t] = True
            target[i, t] = s[t + 1]
    inputs = inputs.astype(dtype)
    try:
        target = target.astype(dtype)
    except (TypeError, ValueError):
        raise SearchError("target values do not share the input's type") from None
    if is_str:
        constants = [c for c in constants if isinstance(c, str)]
        defaults = [d for d in defaults if isinstance(d, str)] or [""]
    else:
        constants = sorted({int(c) for c in constants if isinstance(c, (int, np.integer))})
        defaults = sorted({int(d) for d in defaults if isinstance(d, (int, np.integer))})
    return SearchProblem(inputs, valid, tmask, target, list(constants), list(defaults),
                         sorted(set(lengths)), name)


def problem_from_task(task, lengths: Iterable[int] = range(1, 9), samples: int = 3,
                      seed: int = 0) -> SearchProblem:
    """The next-token search problem of a catalogue task (contract C of the design).

    For every allowed length, ``samples`` examples are drawn with ``task.sample(length, rng)``
    (seeded), turned into program values with ``task.program_tokens`` and checked to decode back
    with ``task.program_output_to_id``. Constants are the small integers 0, 1, 2 plus the integer
    program values of the special tokens (BOS, SEP, EOS); defaults are 0 plus those values.

    Raises:
        SearchError: the task allows none of the lengths, or its program values do not map back
            to the token ids (the representation is not invertible).
    """
    if getattr(task, "kind", "next_token") != "next_token":
        raise SearchError(f"task {task.name!r} is a per-position sequence program, not a "
                          "next-token task: the search looks for next-token programs")
    rng = np.random.default_rng(seed)
    examples = []
    used = []
    for n in lengths:
        if not task.length_ok(n):
            continue
        used.append(n)
        seen = set()
        for _ in range(samples):
            prompt, answer = task.sample(n, rng)
            ids = list(prompt) + list(answer)
            if tuple(ids) in seen:
                continue
            seen.add(tuple(ids))
            values = list(task.program_tokens(ids))
            if len(values) != len(ids):
                raise SearchError(f"task {task.name}: program_tokens changed the length")
            for t in range(len(prompt), len(ids)):
                if task.program_output_to_id(values[t]) != ids[t]:
                    raise SearchError(
                        f"task {task.name}: program value {values[t]!r} does not map back to "
                        f"token id {ids[t]}")
            examples.append((_plain(values), len(prompt)))
    if not examples:
        raise SearchError(f"task {task.name} allows none of the lengths {list(lengths)}")
    voc = task.vocab
    special = []
    for tid in (voc.bos, voc.sep, voc.eos):
        if tid is None:
            continue
        try:
            v = _plain(task.program_tokens([tid]))[-1]
        except Exception:  # noqa: BLE001 - a task may refuse a lone special token
            continue
        special.append(v)
    ints = [v for v in special if isinstance(v, int)]
    strs = [v for v in special if isinstance(v, str)]
    return problem_from_examples(examples, constants=[0, 1, 2] + ints + strs,
                                 defaults=[0] + ints + strs, lengths=used, name=task.name)


def _plain(values) -> list:
    out = []
    for v in values:
        if isinstance(v, (bool, np.bool_)):
            out.append(int(v))
        elif isinstance(v, (np.integer,)):
            out.append(int(v))
        elif isinstance(v, (float, np.floating)) and float(v).is_integer():
            out.append(int(v))
        else:
            out.append(v)
    return out


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------

@dataclass
class SearchResult:
    """Outcome of :func:`search`.

    Attributes:
        found: whether a program was found.
        program: the program (an :class:`~rasp.ir.SOp`, causal) or ``None``.
        length: its program length, or ``None``.
        certified_below: every program of length ``<= certified_below`` in the grammar was
            enumerated (up to observational equivalence) and none reproduces the task. With a
            found program, ``certified_below == length - 1``: the program is a shortest one.
        stopped: ``"found"``, ``"max_length"`` or ``"time_limit"``.
        explored: candidates evaluated; ``distinct``: kept after observational equivalence.
        seconds: wall time; ``programs_per_s`` = explored / seconds.
        lengths: task lengths of the batch; ``n_targets``: number of predicted positions.
    """

    name: str
    found: bool
    program: SOp | None
    length: int | None
    certified_below: int
    stopped: str
    explored: int
    distinct: int
    seconds: float
    lengths: list
    n_targets: int
    max_length: int
    source: str | None = None
    counterexamples_added: int = 0
    found_by: str | None = None
    measured_length: int | None = None

    @property
    def programs_per_s(self) -> float:
        return self.explored / self.seconds if self.seconds > 0 else float("nan")

    def to_dict(self) -> dict:
        return {"task": self.name, "found": self.found, "length": self.length,
                "certified_no_program_up_to": self.certified_below, "stopped": self.stopped,
                "explored": self.explored, "distinct": self.distinct,
                "seconds": round(self.seconds, 3),
                "programs_per_s": round(self.programs_per_s, 1),
                "lengths": self.lengths, "n_targets": self.n_targets,
                "max_length": self.max_length, "program": self.source,
                "counterexamples_added": self.counterexamples_added,
                "found_by": self.found_by, "measured_length": self.measured_length,
                "certified_lower_bound": self.certified_below + 1,
                "upper_bound": self.length}

    def summary(self) -> str:
        if self.found and self.found_by == "combination":
            head = (f"{self.name}: found a program of expression size {self.length} "
                    f"(length {self.measured_length}) by combining terms; certified: none of "
                    f"size <= {self.certified_below}")
        elif self.found:
            head = (f"{self.name}: shortest program has size {self.length} "
                    f"(certified: none of size <= {self.certified_below})")
        else:
            head = (f"{self.name}: no program of size <= {self.certified_below} "
                    f"({self.stopped})")
        return (f"{head}; {self.explored} programs in {self.seconds:.1f} s "
                f"({self.programs_per_s:.0f}/s)")


# --------------------------------------------------------------------------------------------
# The enumerator
# --------------------------------------------------------------------------------------------

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


class _Engine:
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

    def __init__(self, problem: SearchProblem, time_limit: float, max_length: int,
                 progress: bool, max_bytes: int, validate, prune: bool = True,
                 grammar: dict | None = None, threads: int | None = None):
        self.p = problem
        self.time_limit = time_limit
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
        self.combine_seconds = float(g.get("combine_seconds", 0.0))
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

    # -- bookkeeping ----------------------------------------------------------------------
    def _timeout(self) -> bool:
        return time.perf_counter() - self.start > self.time_limit

    def _tick(self, n: int):
        self.explored += n
        if self.bar is not None:
            self.bar.update(n)
        if self._timeout():
            raise TimeoutError

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

    # -- IR nodes from recipes ------------------------------------------------------------
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

    # -- families ---------------------------------------------------------------------------
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

    def _leaves(self):
        self._emit(0, self.tokens_row[None, :], _KIND_STR if self.is_str else _KIND_INT,
                   lambda i: ("tokens",))
        self._emit(0, self.index_row[None, :], _KIND_IDX, lambda i: ("indices",))

    def _constants(self):
        if self.is_str:
            cs = [c for c in self.str_consts]
            vals = np.array([[self.code[c]] * self.Pn for c in cs], np.int64).reshape(-1, self.Pn)
            self._emit(1, vals, _KIND_STR, lambda i: ("full", cs[i]))
        cs = [int(c) for c in self.int_consts]
        vals = np.array([[c] * self.Pn for c in cs], np.int64).reshape(-1, self.Pn)
        self._emit(1, vals, _KIND_INT, lambda i: ("full", cs[i]))

    def _maps(self, k):
        self._families(self._map_jobs(k))

    def _map_jobs(self, k):
        """Jobs (:meth:`_families`) of the maps of level k - 1: one per operation and
        constant."""
        lv = self._lv(k - 1)
        if lv is None:
            return
        X = lv.vals.astype(np.int16)
        kind = lv.kind
        arith = (kind != _KIND_STR) & ~((kind == _KIND_IDX) & self.crasp)
        num = np.flatnonzero(arith & ~lv.binary)
        ids = [(k - 1, int(i)) for i in range(len(lv))]
        if self.pl and k == 2:
            self._periodic(k)      # on this thread, before the jobs (the same order)
        def job(vals, kinds, rec, checked=True):
            return lambda: [(k, self._prep(k, vals(), kinds, checked), rec)]
        sub = np.flatnonzero(arith)
        for c in (1, -1):
            yield job(lambda c=c: X[sub] + c, kind[sub],
                      lambda i, c=c: ("map", "add", c, ids[sub[i]]))
        for c in self.int_consts:
            for op, f in (("eq", np.equal), ("lt", np.less), ("gt", np.greater)):
                yield job(lambda c=c, f=f: f(X[num], c).astype(np.int8), _KIND_INT,
                          lambda i, c=c, op=op: ("map", op, int(c), ids[num[i]]), False)
        b = np.flatnonzero(lv.binary)
        yield job(lambda: 1 - X[b], _KIND_INT, lambda i: ("map", "not", None, ids[b[i]]),
                  False)
        if self.is_str:
            s = np.flatnonzero(kind == _KIND_STR)
            for c in self.str_consts:
                yield job(lambda code=self.code[c]: (X[s] == code).astype(np.int16), _KIND_INT,
                          lambda i, c=c: ("map", "eq", c, ids[s[i]]))

    def _periodic(self, k):
        """``indices % p == r`` (C-RASP[periodic, local] only; size 2)."""
        pr = [(p, r) for p in (2, 3, 4) for r in range(p)]
        vals = np.stack([(self.index_row % p == r) for p, r in pr]).astype(np.int8)
        self._emit(k, vals, _KIND_INT, lambda i: ("periodic", pr[i][0], pr[i][1]),
                   checked=False)

    def _pair_blocks(self, nx, ny):
        step = max(1, _CHUNK // max(1, ny * self.Pn))
        for a in range(0, nx, step):
            yield a, min(nx, a + step)

    def _seqmaps(self, k):
        self._families(self._seqmap_jobs(k))

    def _seqmap_jobs(self, k):
        """Jobs (:meth:`_families`) of the sequence maps of size k: one per operation, level
        pair and block of x rows."""
        for i in range(0, k):
            j = k - 1 - i
            lx, ly = self._lv(i), self._lv(j)
            if lx is None or ly is None:
                continue
            X, Y = lx.vals.astype(np.int16), ly.vals.astype(np.int16)
            kx, ky = lx.kind, ly.kind
            fams = []
            # arithmetic: neither index-derived (rule 3) nor strings
            arith = (_KIND_INT, _KIND_COUNT) if self.crasp else (_KIND_INT,)
            xa, ya = np.flatnonzero(np.isin(kx, arith)), np.flatnonzero(np.isin(ky, arith))
            fams.append(("add", xa, ya, np.add, True))
            fams.append(("sub", xa, ya, np.subtract, False))
            cmp_ok = (_KIND_INT, _KIND_COUNT) if self.crasp else (_KIND_INT, _KIND_IDX)
            xn, yn = np.flatnonzero(np.isin(kx, cmp_ok)), np.flatnonzero(np.isin(ky, cmp_ok))
            fams.append(("eq", xn, yn, np.equal, True))
            fams.append(("lt", xn, yn, np.less, False))
            if self.is_str:
                xs, ys = np.flatnonzero(kx == _KIND_STR), np.flatnonzero(ky == _KIND_STR)
                fams.append(("eq", xs, ys, np.equal, True))
            xb, yb = np.flatnonzero(lx.binary), np.flatnonzero(ly.binary)
            fams.append(("and", xb, yb, np.minimum, True))
            fams.append(("or", xb, yb, np.maximum, True))
            for op, xs_, ys_, f, comm in fams:
                if xs_.size == 0 or ys_.size == 0:
                    continue
                Yv = Y[ys_]
                for a, b in self._pair_blocks(xs_.size, ys_.size):
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
                        out = out[tri] if tri is not None else out.reshape(-1, self.Pn)
                        kinds = _KIND_INT
                        if op in ("add", "sub") and self.crasp:
                            kk = np.maximum(kx[xi][:, None], ky[ys_][None, :])
                            kinds = kk[tri] if tri is not None else kk.reshape(-1)
                        return [(k, self._prep(k, out.astype(np.int16, copy=False), kinds,
                                               op in ("add", "sub")), rec)]
                    yield job

    def _wheres(self, k):
        if self.g["where"]:
            self._families(self._where_jobs(k))

    def _where_jobs(self, k):
        """Jobs (:meth:`_families`) of the ternaries of size k: one per condition row and
        block of x rows."""
        for a in range(1, k):
            lc = self._lv(a)
            if lc is None:
                continue
            cs = np.flatnonzero(lc.binary)
            if cs.size == 0:
                continue
            for b in range(0, k - a):
                c_ = k - 1 - a - b
                lx, ly = self._lv(b), self._lv(c_)
                if lx is None or ly is None:
                    continue
                X, Y = lx.vals.astype(np.int16), ly.vals.astype(np.int16)
                for strness in ((False, True) if self.is_str else (False,)):
                    xs_ = np.flatnonzero(((lx.kind == _KIND_STR) == strness) &
                                         ~((lx.kind == _KIND_IDX) & self.crasp))
                    ys_ = np.flatnonzero(((ly.kind == _KIND_STR) == strness) &
                                         ~((ly.kind == _KIND_IDX) & self.crasp))
                    if xs_.size == 0 or ys_.size == 0:
                        continue
                    Xs, Ys = X[xs_], Y[ys_]
                    kx, ky = lx.kind[xs_], ly.kind[ys_]
                    kind = np.maximum(kx[:, None], ky[None, :]).reshape(-1)
                    for ci in cs:
                        cond = lc.vals[ci].astype(bool)
                        for x0, x1 in self._pair_blocks(xs_.size, ys_.size):
                            ny = ys_.size

                            def rec(r, x0=x0, ci=ci, ny=ny, xs_=xs_, ys_=ys_, b=b, c_=c_,
                                    a=a):
                                p_, q_ = divmod(r, ny)
                                return ("where", (a, int(ci)), (b, int(xs_[x0 + p_])),
                                        (c_, int(ys_[q_])))

                            def job(cond=cond, x0=x0, x1=x1, Xs=Xs, Ys=Ys, kind=kind, ny=ny,
                                    rec=rec):
                                out = np.where(cond[None, None, :], Xs[x0:x1, None, :],
                                               Ys[None, :, :]).reshape(-1, self.Pn)
                                return [(k, self._prep(k, out, kind[x0 * ny:x1 * ny], False),
                                         rec)]
                            yield job

    def _widths(self, k):
        sl = self.sels.get(k - 1)
        if sl is None or not len(sl):
            return
        # a count of positions is a position (rasp.raspl rule 3)
        self._emit(k, sl.W, _KIND_COUNT if self.crasp else _KIND_IDX,
                   lambda i: ("sw", (k - 1, i)), checked=False)

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

    def _agg_gemm(self, V: np.ndarray, S: np.ndarray, dtype=np.float32) -> np.ndarray:
        """Selected sums of every value row under every selector: ``V`` ``[B, M, T]``,
        ``S`` ``[s, B, q, k]`` bool -> ``[s, M, P]`` (P = valid query positions). One
        matrix product per batch row ``[M, k] @ [k, s*q]`` (a BLAS gemm; far faster than
        NumPy's batched ``matmul`` over ``(s, B)``). Exact: integer sums far below 2^24."""
        ns, B, T = S.shape[0], self.B, self.T
        M = V.shape[1]
        out = np.empty((B, M, ns, T), dtype)
        Sf = S.astype(dtype, copy=False)
        for b in range(B):
            St = Sf[:, b].reshape(ns * T, T)                 # [s*q, k]
            np.matmul(V[b].astype(dtype, copy=False), St.T, out=out[b].reshape(M, ns * T))
        out = out.transpose(2, 1, 0, 3).reshape(ns, M, B * T)
        return out if self.Pn == B * T else out[:, :, self.vflat]

    def _rank_table(self, lv, num, red):
        """Per value row ``num`` of a level: the rank weights ``2^(b * rank)`` of its values in
        the ``[B, M', T]`` layout (float32 / float64 rows), the value of each rank, which rows
        fit the float exponent, and ``b``; cached on the level (made on the main thread)."""
        if not hasattr(lv, "_rank_cache"):
            lv._rank_cache = {}
        key = (red, num.size, int(num[:1].sum()) if num.size else 0)
        cached = lv._rank_cache.get(key)
        if cached is None:
            vals = lv.vals[num].astype(np.int16)                       # [M', P]
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
            bits = max(1, int(np.ceil(np.log2(self.T + 1))))
            # at most T < 2^bits keys of rank <= nd - 1: every sum is < 2^(bits * nd), finite
            # in float32 when bits * nd <= 127 (in float64 when <= 1023)
            f32 = nd * bits <= 127
            f64 = ~f32 & (nd * bits <= 1023)
            fast = f32 | f64
            full = np.zeros((Mn, self.B * self.T), np.float64)
            full[:, self.vflat] = np.where(fast[:, None], np.exp2(bits * ranks.astype(np.float64)), 0)
            full = full.reshape(Mn, self.B, self.T).transpose(1, 0, 2)
            i32, i64 = np.flatnonzero(f32), np.flatnonzero(f64)
            cached = (i32, full[:, i32].astype(np.float32), i64, full[:, i64].copy(), val_of,
                      fast, bits)
            lv._rank_cache[key] = cached
        return cached

    def _agg_maxmin(self, lv, num, Vi, S, red) -> np.ndarray:
        """Max (or min) of the selected values, ``[s, len(num), P]`` int16, as one gemm:
        each row's values are replaced by their rank r among the row's distinct values and
        the selected keys sum ``2^(b*r)`` with ``2^b`` > the number of keys (float64, exact
        in the exponent); the exponent of the sum is ``b*r_max`` (rows with too many
        distinct values for float64's exponent, and rows with -inf, use a masked reduction).
        Empty selections give 0 here (the caller writes the default)."""
        ns = S.shape[0]
        Mn = num.size
        i32, W32, i64, W64, val_of, fast, bits = self._rank_table(lv, num, red)
        r = np.zeros((ns, Mn, self.Pn), np.int64)
        for idx, W, dt in ((i32, W32, np.float32), (i64, W64, np.float64)):
            if idx.size:
                _, ex = np.frexp(self._agg_gemm(W, S, dt))          # [s, m, P]
                r[:, idx] = np.maximum(ex - 1, 0) // bits           # rank of the extreme
        out = np.take_along_axis(np.broadcast_to(val_of[None], (ns,) + val_of.shape),
                                 r, axis=2).astype(np.int16)
        slow = np.flatnonzero(~fast)
        if slow.size:
            fill = np.int16(-32768 if red == "max" else 32767)
            Vs = Vi[:, slow]
            big = np.where(S[:, :, None, :, :] > 0, Vs[None, :, :, None, :], fill)
            rr = big.max(axis=-1) if red == "max" else big.min(axis=-1)
            out[:, slow] = rr.transpose(0, 2, 1, 3).reshape(ns, slow.size, -1)[:, :, self.vflat]
        return out

    def _aggregates(self, k):
        """All aggregates of a selector level with a value level, many selectors at once:
        mean = one gemm per batch row ``[M, k] @ [k, s*q]`` (:meth:`_agg_gemm`); max / min =
        the same product over ``2^(b * rank)`` (:meth:`_agg_maxmin`)."""
        BTT = self.B * self.T * self.T
        if self.crasp:
            return            # C-RASP has no value aggregation
        pairs = [(i, k - 1 - i) for i in range(1, k)]
        self._families(itertools.chain.from_iterable(
            self._aggregate_jobs(k, i, j, self.sels[i], self.rows[j], BTT) for i, j in pairs
            if self.sels.get(i) is not None and len(self.sels[i]) and self._lv(j) is not None))

    def _aggregate_jobs(self, k, i, j, sl, lv, BTT):
        """The jobs of :meth:`_aggregates` for selector level i and value level j: blocks of
        selectors, each one gemm (mean) or one rank gemm (max / min). Shared caches (dense
        selector matrices, layouts, rank tables) are made here, on the main thread."""
        M = len(lv)
        kinds = lv.kind
        num = np.flatnonzero(kinds != _KIND_STR)
        multi = sl.maxw > 1
        V = self._full_layout(j)                  # [B, M, T] float32
        Vi = V[:, num].astype(np.int16)
        self._dense_cache(sl)
        for red in ("mean", "max", "min"):
            if red != "mean" and not self.g["maxmin"]:
                continue
            # a selector that never selects two keys: mean = max = min (only mean);
            # strings only move (mean of one key)
            srows = np.arange(len(sl)) if red == "mean" else np.flatnonzero(multi)
            if srows.size == 0:
                continue
            if red != "mean":
                self._rank_table(lv, num, red)
            cols = np.arange(M) if red == "mean" else num
            # per selector: its matrix (bool + float) and the output rows (float)
            per = cols.size * self.B * self.T * 8 + BTT * 9
            step = max(1, (_CHUNK * 8) // per)
            for a in range(0, srows.size, step):
                def job(rows=srows[a:a + step], red=red, cols=cols):
                    S = self._dense_sels(sl, rows)              # [s, B, q, k] float32
                    if red == "mean":
                        sums = self._agg_gemm(V, S)                     # [s, M, P]
                        wq = np.maximum(sl.W[rows], 1).astype(np.float32)[:, None, :]
                        # exact quotients of integers are exact in IEEE division, and the
                        # cast truncates towards zero: the RASP-L mean (trunc) in one pass
                        out = np.divide(sums, wq, out=sums).astype(np.int16)
                    else:
                        out = self._agg_maxmin(lv, num, Vi, S, red)     # [s, M', P]
                    return self._agg_emissions(k, sl, rows, out, kinds, cols, multi, i, j, red)
                yield job

    def _agg_emissions(self, k, sl, rows, out, kinds, cols, multi, i, j, red) -> list:
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
        for di, d in enumerate(self.defaults):
            sub = np.flatnonzero(he) if di else np.arange(ns)
            if sub.size == 0:
                continue
            dv = self.code[d] if self.is_str else d
            o = out if di == 0 else out[sub]
            if he.any():                  # one pass: the default where nothing is selected
                o = np.where(empty[sub][:, None, :], np.int16(dv), o)
            sel_ok = okc[sub].reshape(-1)
            o = o.reshape(-1, self.Pn)
            if not sel_ok.all():
                o = o[sel_ok]
            pairs = np.argwhere(okc[sub])
            nc = len(cols)

            def rec(r_, sub=sub, rows=rows, pairs=pairs, d=d, red=red, cols=cols, i=i, j=j):
                s_, c_ = pairs[r_]
                return ("agg", (i, int(rows[sub[s_]])), (j, int(cols[c_])), d, red)
            kk = np.broadcast_to(kinds[cols][None, :], (sub.size, nc)).reshape(-1)
            ems.append((k, self._prep(k, o, kk[sel_ok], checked=False), rec))
        return ems

    def _selects(self, k):
        if k == 1:
            ent = np.ones((1, self.E), bool)
            self._emit_sels(1, ent, lambda i: ("true",))
        if k == 2 and self.pl:
            # the local selectors of C-RASP[periodic, local]: key j = i - c (size 2:
            # select(indices, indices - c, ==))
            qpos = self.index_row_full[self.eq_flat]
            kpos = self.index_row_full[self.ek_flat]
            cs = (1, 2)
            ent = np.stack([kpos == qpos - c for c in cs])
            self._emit_sels(2, ent, lambda i: ("local", cs[i]))
        for i in range(0, k):
            j = k - 1 - i
            lk, lq = self._lv(i), self._lv(j)
            if lk is None or lq is None:
                continue
            for strness in ((False, True) if self.is_str else (False,)):
                kk = np.flatnonzero((lk.kind == _KIND_STR) == strness)
                qq = np.flatnonzero((lq.kind == _KIND_STR) == strness)
                if self.crasp:     # predicates of the key's (and query's) symbols only
                    kk = kk[np.isin(lk.kind[kk], (_KIND_INT, _KIND_STR))]
                    qq = qq[np.isin(lq.kind[qq], (_KIND_INT, _KIND_STR))]
                if kk.size == 0 or qq.size == 0:
                    continue
                ops = ("==", "!=") if strness else tuple(_SEL_OPS)
                Qv = lq.vals[qq].astype(np.int16)
                nq = qq.size
                # key rows in blocks whose one-hot values and gathers fit in _CHUNK elements
                step = max(1, _CHUNK // max(1, nq * self.Pn))

                def jobs(kk=kk, qq=qq, Qv=Qv, nq=nq, ops=ops, lk=lk, i=i, j=j, step=step):
                    for a in range(0, kk.size, step):
                        if not self.storing:
                            return
                        yield lambda kb=kk[a:a + step]: self._select_emissions(
                            k, i, j, lk.vals[kb].astype(np.int16), Qv, kb, qq, ops)
                self._families(jobs())
                if not self.storing:
                    return
        if self.g["sel_andor"]:
            for i in range(1, k):
                j = k - 1 - i
                if j < i:
                    continue
                a_, b_ = self.sels.get(i), self.sels.get(j)
                if a_ is None or b_ is None or not len(a_) or not len(b_):
                    continue
                bstep = max(1, _CHUNK // self.E)
                for b0 in range(0, len(b_), bstep):
                    eb = self._sel_entries(b_, np.arange(b0, min(b0 + bstep, len(b_))))
                    for x in range(len(a_)):
                        ex = self._sel_entries(a_, np.array([x]))
                        for name, f in (("and", np.logical_and), ("or", np.logical_or)):
                            ent = f(ex, eb)
                            self._emit_sels(k, ent, lambda r, x=x, name=name, i=i, j=j, b0=b0:
                                            (name, (i, x), (j, b0 + r)))

    # -- driver ------------------------------------------------------------------------------
    def _sop_level(self, k):
        if k == 1:
            self._constants()
        # attention first (aggregates and widths), then the elementwise families: the order
        # inside a size changes nothing certified, only which program of that size is met first
        self._maps(k)
        self._widths(k)
        self._aggregates(k)
        self._seqmaps(k)
        self._wheres(k)
        if k in self.rows:
            self.rows[k].freeze()

    def _sel_level(self, k):
        self._selects(k)
        if k in self.sels:
            self.sels[k].freeze(self.nbytes, self.Pn)

    def run(self) -> SearchResult:
        self.start = time.perf_counter()
        bar = None
        if self.progress:
            from tqdm import tqdm
            bar = tqdm(desc=f"search {self.p.name}", unit="prog", unit_scale=True, leave=False)
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
                except TimeoutError:
                    stopped = "time_limit"
        finally:
            if bar is not None:
                bar.close()
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None
        found_by = "enumeration" if self.found is not None else None
        if self.found is None and self.spurious_node is None and self.combine_seconds > 0:
            try:
                with np.errstate(all="ignore"):
                    self._combine()
            except TimeoutError:
                pass
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
            lengths=list(self.p.lengths), n_targets=self.p.n_targets,
            max_length=self.max_length,
            source=program_to_source(f[0]) if f else None, found_by=found_by,
            measured_length=_measured(f[0]) if f else None)

    # -- deep aggregates: the top operation completed against the target ----------------------
    def _deep_aggregates(self, need: np.ndarray) -> list:
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
        if self.is_str or not need.any():
            return []
        key_size, query_size = int(self.g.get("deep_key_size", 3)), int(
            self.g.get("deep_query_size", 4))
        key_cap, query_cap = int(self.g.get("deep_key_rows", 2000)), int(
            self.g.get("deep_query_rows", 400_000))
        T = self.T
        # the query positions (batch row, index) of the needed targets
        flat = self.vflat[self.tcols[need]]
        qb, qi = flat // T, flat % T
        y = self.tvals[need]
        nS = len(y)
        def rows_upto(max_size, cap):
            """Key / query candidates: int or index rows of levels 0..max_size, smallest
            first, at most ``cap``; their values in the ``[row, B*T]`` layout and sizes."""
            refs = []
            for k in sorted(self.rows):
                if k > max_size or len(refs) >= cap:
                    break
                lv = self.rows[k]
                refs += [(k, int(i)) for i in np.flatnonzero(lv.kind != _KIND_STR)[
                    : cap - len(refs)]]
            full_ = np.zeros((len(refs), self.B * T), np.int16)
            for r, (k, i) in enumerate(refs):
                full_[r, self.vflat] = self.rows[k].vals[i]
            return refs, full_, np.array([k for k, _ in refs], dtype=np.int64)

        kpool, full, ksizes = rows_upto(key_size, key_cap)
        # query rows: only their values at the needed query positions
        qpool, qparts = [], []
        cols = self.tcols[need]
        for k in sorted(self.rows):
            if k > query_size or len(qpool) >= query_cap:
                break
            lv = self.rows[k]
            idx = np.flatnonzero(lv.kind != _KIND_STR)[: query_cap - len(qpool)]
            qpool += [(k, int(i)) for i in idx]
            qparts.append(lv.vals[idx][:, cols].astype(np.int64))
        if not kpool or not qpool:
            return []
        qsizes = np.array([k for k, _ in qpool], dtype=np.int64)
        Qv = np.concatenate(qparts) + 128                             # [Mq, nS] in 0..255
        qvals = np.arange(-128, 128)
        out, seen = [], set()
        budget = self.start_combine + self.combine_seconds / 2

        def late() -> bool:
            return time.perf_counter() > budget

        values = [("tokens", self.tokens_row)]
        for vname, vrow in values:
            vfull = np.zeros(self.B * T, np.int64)
            vfull[self.vflat] = vrow
            for red in ("max", "min"):
                if late():
                    break
                # per key row and needed query: which query values give the target through
                # the selected keys (hit), and which select no key (the default decides)
                hit = np.zeros((len(kpool), nS, 256), bool)
                empty = np.zeros((len(kpool), nS, 256), bool)
                for s_ in range(nS):
                    keys = full[:, qb[s_] * T: qb[s_] * T + qi[s_] + 1]         # [M, L]
                    vv = vfull[qb[s_] * T: qb[s_] * T + qi[s_] + 1]              # [L]
                    eq = keys[:, :, None] == qvals[None, None, :]               # [M, L, 256]
                    fill = -10**6 if red == "max" else 10**6
                    cand = np.where(eq, vv[None, :, None], fill)
                    r_ = cand.max(axis=1) if red == "max" else cand.min(axis=1)
                    has = eq.any(axis=1)
                    hit[:, s_] = has & (r_ == y[s_])
                    empty[:, s_] = ~has
                for d in self.defaults:
                    if late():
                        break
                    allowed = hit | (empty & (d == y)[None, :, None])
                    # a key row is viable when every needed query has some value to take
                    viable = np.flatnonzero(allowed.any(axis=2).all(axis=1))
                    for a in range(0, viable.size, 16):
                        if late():
                            break
                        kk = viable[a:a + 16]
                        ok = allowed[kk][:, np.arange(nS)[:, None], Qv.T].all(axis=1)
                        for kr, qr in zip(*np.nonzero(ok)):
                            kr = int(kk[kr])
                            size = 2 + int(ksizes[kr]) + int(qsizes[qr])
                            key = (kpool[kr], qpool[int(qr)], vname, red, d)
                            if key in seen:
                                continue
                            seen.add(key)
                            out.append((size, key))
        out.sort(key=lambda x: x[0])
        terms = []
        for size, (kref, qref, vname, red, d) in out[: int(self.g.get("deep_terms", 200))]:
            if time.perf_counter() > self.start_combine + 0.8 * self.combine_seconds:
                break
            K = self._node(self._ref(kref))
            Q = self._node(self._ref(qref))
            V = Tokens("asis").named("tokens") if vname == "tokens" else Indices()
            node = Aggregate(Select(K, Q, "==", causal=True), V, d, red)
            try:
                with np.errstate(all="ignore"):
                    val = Evaluator(self.p.inputs, causal=True)(node)
            except (RASPError, ValueError, TypeError, OverflowError):
                continue
            got = val.reshape(-1)[self.vflat][self.tcols]
            if got.dtype.kind not in "iub":
                continue
            bad_row = _term_failing_row(node, self.validation)
            if bad_row is not None:
                # a chance fit of the batch: the validation example it gets wrong joins the
                # batch on the next round (counterexample-guided, as for whole programs)
                if bad_row not in self.counterexample_rows and len(
                        self.counterexample_rows) < 3:
                    self.counterexample_rows.append(bad_row)
                continue
            terms.append((node, size, got.astype(np.int64)))
        return terms

    # -- combination: a decision list of where(condition, term, ...) over the pool ------------
    def _combine(self):
        """Divide and conquer (Alur et al. 2017, "Scaling enumerative program synthesis via
        divide and conquer"): terms of the pool that are right on part of the targets are
        joined by ``where(c, term, rest)`` with conditions ``c`` (0/1 s-ops of the pool) that
        are true only where the term is right. The program found is validated like any other;
        it is an upper bound, not certified shortest."""
        self.start_combine = time.perf_counter()
        levels = sorted(k for k in self.rows if len(self.rows[k]))
        refs, covs, costs = [], [], []
        crefs, conds, ccosts = [], [], []
        for k in levels:
            lv = self.rows[k]
            kind_ok = (lv.kind == _KIND_STR) == self.target_str
            cov = (lv.vals[:, self.tcols] == self.tvals) & kind_ok[:, None]
            nz = np.flatnonzero(cov.any(axis=1))
            refs += [(k, int(i)) for i in nz]
            covs.append(cov[nz])
            costs += [k] * nz.size
            b = np.flatnonzero(lv.binary)
            crefs += [(k, int(i)) for i in b]
            conds.append(lv.vals[b][:, self.tcols].astype(bool))
            ccosts += [k] * b.size
        if not refs or not crefs:
            return
        if self.g.get("deep_aggregates", True) and not self.crasp:
            # the targets the most frequent target value (one constant term) does not give
            vals_, counts_ = np.unique(self.tvals, return_counts=True)
            for node, size, vals in self._deep_aggregates(
                    self.tvals != vals_[np.argmax(counts_)]):
                c = (vals == self.tvals) & True
                if c.any():
                    refs.append(("ir", node, vals))
                    covs.append(c[None, :])
                    costs.append(size)
        cov = np.concatenate(covs)
        costs = np.array(costs)
        # conditions one size up, made lazily: comparisons of the best terms with constants
        # (term == c, term > c, term < c), on the target positions only
        top = np.lexsort((costs, -cov.sum(axis=1)))[:self.g.get("combine_terms", 4000)]
        consts = [int(c) for c in self.int_consts]
        for t in top.tolist():
            if refs[t][0] == "ir":
                if self.is_str:
                    continue
                v = refs[t][2]
            else:
                k, i = refs[t]
                lv = self.rows[k]
                if lv.kind[i] == _KIND_STR or lv.binary[i] or (
                        self.crasp and lv.kind[i] == _KIND_IDX):
                    continue
                v = lv.vals[i, self.tcols]
            for c in consts:
                for op, f in (("eq", np.equal), ("gt", np.greater), ("lt", np.less)):
                    crefs.append(("cmp", op, c, refs[t]))
                    conds.append(f(v, c)[None, :])
                    ccosts.append(int(costs[t]) + 1)
        C = np.concatenate(conds)
        ccosts = np.array(ccosts)
        nT = len(self.tcols)
        beam = self.g.get("combine_beam", 6)

        def solve(S, depth):
            if time.perf_counter() - self.start_combine > self.combine_seconds:
                raise TimeoutError
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
                    Cv = ~C if neg else C
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
            return ref[1] if ref[0] == "ir" else self._node(self._ref(ref))

        def build(tree):
            if tree[0] == "term":
                return term(tree[1])
            _, cref, neg, a, rest = tree
            if cref[0] == "cmp":
                _, op, const, tref = cref
                c = Map(Elementwise(op, const=const, const_side="right"), term(tref))
            else:
                c = self._node(self._ref(cref))
            a, r = build(a), build(rest)
            if neg:
                a, r = r, a
            return SequenceMap(Elementwise("ternary"), (c, a, r))

        tried = 0
        for tree in solve(np.ones(nT, bool), self.g.get("combine_depth", 4)):
            node = build(tree)
            tried += 1
            if not matches_problem(node, self.p):
                continue
            if self.validate is None or self.validate(node):
                self.found = (node, _tree_size(node))
                return
            if tried > 200:
                return


def _tree_size(node: Node) -> int:
    """Expression size: operations of the program counted at every use (no sharing);
    ``tokens``, ``indices`` count 0 (the search's size measure)."""
    if isinstance(node, (Tokens, Indices)):
        return 0
    return 1 + sum(_tree_size(c) for c in node.children)


def _measured(node: Node) -> int:
    from rasp.measures import measure
    return measure(node).length


#: Grammar switches (all on by default): ``where`` (ternaries), ``maxmin`` (max/min
#: aggregates), ``sel_andor`` (selector and/or).
_GRAMMAR = {"where": True, "maxmin": True, "sel_andor": True}


def matches_problem(sop: Node, problem: SearchProblem) -> bool:
    """Whether ``sop`` (evaluated causally) gives the expected next token at every target
    position of ``problem``. Errors during evaluation count as a mismatch."""
    try:
        with np.errstate(all="ignore"):
            val = Evaluator(problem.inputs, causal=True)(sop)
    except (RASPError, ValueError, TypeError, OverflowError):
        return False
    got = val[problem.target_mask]
    want = problem.target[problem.target_mask]
    if (got.dtype.kind == "U") != (want.dtype.kind == "U"):
        return False
    return bool(np.array_equal(got, want))


def search(problem: SearchProblem, max_length: int = 6, time_limit: float = 60.0,
           progress: bool = False, max_memory_mb: float = 1024,
           validation: SearchProblem | None = None, prune: bool = True,
           grammar: dict | None = None, combine: float | None = None,
           threads: int | None = None) -> SearchResult:
    """Enumerate RASP-L programs smallest first until one reproduces ``problem``.

    Args:
        problem: the batch and the expected next tokens (:func:`problem_from_task`).
        max_length: largest program length to try (program length of language.md §4).
        time_limit: seconds; the search stops after the level it is in.
        progress: show a tqdm progress bar (programs evaluated).
        max_memory_mb: memory for stored values; once it is used up the current length is
            finished without storing (still a complete check of that length) and the search
            stops there (``stopped == "memory_limit"``).
        validation: a larger batch (more lengths, more samples); a candidate that reproduces
            ``problem`` is accepted only if it also reproduces ``validation``. A candidate
            that fits ``problem`` by chance shows that the batch cannot separate some programs
            (observational equivalence merged them), so the search adds the shortest
            validation example it gets wrong to the batch and starts again
            (counterexample-guided refinement; ``counterexamples_added`` in the result).
        threads: worker threads that compute the candidate families (default: the
            ``RASP_SEARCH_THREADS`` environment variable, else the usable cores, at most 2);
            the result does not depend on it (the emissions are committed in one order).

    Returns:
        a :class:`SearchResult`: the first (shortest) program found, or the largest length
        ``k`` such that every program of length ``<= k`` was ruled out.
    """
    if max_length < 0:
        raise SearchError("max_length must be >= 0")
    if time_limit <= 0:
        raise SearchError("time_limit must be positive")
    validate = (lambda node: matches_problem(node, validation)) if validation else None
    start = time.perf_counter()
    explored = 0
    added = 0
    cap = max_length            # sizes this round enumerates exhaustively
    best_cert = -1              # the best certificate of any round (each batch contains the
    comb_share = 0.3            # ones before it, so each round's certificate holds)
    while True:
        left = time_limit - (time.perf_counter() - start)
        comb = (comb_share * left if combine is None else min(combine, 0.9 * left))
        g = dict(grammar or {})
        g["combine_seconds"] = comb
        res = _Engine(problem, max(left - comb, 1e-3), cap, progress,
                      int(max_memory_mb * 2**20), validate, prune=prune, grammar=g,
                      threads=threads)
        res.validation = validation
        # one BLAS thread: the products are many and small; OpenBLAS's extra threads spin
        # and cost CPU time without saving wall time (bench/bench_search.py measures it)
        with threadpool_limits(limits=1, user_api="blas"):
            out = res.run()
        explored += out.explored
        if not out.found:
            best_cert = max(best_cert, out.certified_below)
        if res.spurious_node is None:
            if out.found or not res.counterexample_rows or added >= 20 or \
                    time.perf_counter() - start >= 0.7 * time_limit:
                break
            # terms of the combination that fit the batch by chance: their counterexamples
            # join the batch (the certificate stays sound: more examples, same grammar). The
            # next round only rebuilds the pool of terms for the combination: no program of
            # the sizes this round certified fits the smaller batch, so none fits the new one
            # and enumerating past them again (to the memory limit) would find nothing new;
            # the combination gets the time instead
            for row in res.counterexample_rows:
                problem = _with_row(problem, validation, row)
                added += 1
            cap = min(cap, max(out.certified_below, 1))
            comb_share = 0.6
            continue
        # counterexample-guided refinement: add the shortest validation example that the
        # chance fit gets wrong, so that the batch separates it from the task; start again
        row = _first_failing_row(res.spurious_node, validation)
        if row is None or added >= 20 or time.perf_counter() - start >= time_limit:
            out.stopped = "time_limit" if row is not None else "spurious"
            out.certified_below = max(out.certified_below, -1)
            break
        problem = _with_row(problem, validation, row)
        added += 1
    out.explored = explored
    out.seconds = time.perf_counter() - start
    out.counterexamples_added = added
    out.max_length = max_length
    if out.found_by != "enumeration":
        out.certified_below = max(out.certified_below, best_cert)
    return out


def _term_failing_row(term: Node, problem: SearchProblem | None) -> int | None:
    """The shortest example of ``problem`` on which ``term`` is wrong where the target is not
    its most frequent value (a term of the combination, checked on the validation batch);
    None when it is right there, or without a batch."""
    if problem is None:
        return None
    lens = problem.valid.sum(axis=1)
    try:
        with np.errstate(all="ignore"):
            val = Evaluator(problem.inputs, causal=True)(term)
    except (RASPError, ValueError, TypeError, OverflowError):
        return int(np.argmin(lens))
    want = problem.target[problem.target_mask]
    vals, counts = np.unique(want, return_counts=True)
    need = problem.target_mask & (problem.target != vals[np.argmax(counts)])
    if val.dtype.kind == "U" or problem.target.dtype.kind == "U":
        return int(np.argmin(lens))
    rows = np.flatnonzero(((val != problem.target) & need).any(axis=1))
    return int(rows[np.argmin(lens[rows])]) if rows.size else None


def _first_failing_row(sop: Node, problem: SearchProblem) -> int | None:
    """Index of the shortest example of ``problem`` on which ``sop`` is wrong."""
    try:
        val = Evaluator(problem.inputs, causal=True)(sop)
    except (RASPError, ValueError, TypeError, OverflowError):
        return int(np.argmin(problem.valid.sum(axis=1)))
    wrong = ((val != problem.target) & problem.target_mask).any(axis=1)
    rows = np.flatnonzero(wrong)
    if rows.size == 0:
        return None
    lens = problem.valid.sum(axis=1)[rows]
    return int(rows[np.argmin(lens)])


def _with_row(problem: SearchProblem, other: SearchProblem, row: int) -> SearchProblem:
    """``problem`` plus example ``row`` of ``other`` (both right-padded to the wider one)."""
    n_new = int(other.valid[row].sum())
    width = max(problem.inputs.shape[1], n_new)

    def widen(a, valid, fill_last=True):
        if a.shape[1] == width:
            return a
        extra = width - a.shape[1]
        last = a[np.arange(a.shape[0]), valid.sum(axis=1) - 1][:, None]
        pad = np.repeat(last, extra, axis=1) if fill_last else np.zeros(
            (a.shape[0], extra), dtype=a.dtype)
        return np.concatenate([a, pad], axis=1)

    def one(a, fill_last=True):
        r = a[row:row + 1, :n_new]
        if n_new < width:
            pad = np.repeat(r[:, -1:], width - n_new, axis=1) if fill_last else np.zeros(
                (1, width - n_new), dtype=a.dtype)
            r = np.concatenate([r, pad], axis=1)
        return r

    inputs = np.concatenate([widen(problem.inputs, problem.valid),
                             one(other.inputs)]).astype(problem.inputs.dtype)
    valid = np.concatenate([widen(problem.valid, problem.valid, False),
                            one(other.valid, False)])
    tmask = np.concatenate([widen(problem.target_mask, problem.valid, False),
                            one(other.target_mask, False)])
    target = np.concatenate([widen(problem.target, problem.valid),
                             one(other.target)]).astype(problem.target.dtype)
    return SearchProblem(inputs, valid, tmask, target, problem.constants, problem.defaults,
                         sorted(set(problem.lengths)), problem.name)


def search_task(task, max_length: int = 6, time_limit: float = 60.0,
                lengths: Iterable[int] = range(1, 7), samples: int = 3, seed: int = 0,
                progress: bool = False, validation_lengths: Iterable[int] = range(1, 21),
                validation_samples: int = 10, max_memory_mb: float = 1024,
                combine: float | None = None, grammar: dict | None = None,
                threads: int | None = None) -> SearchResult:
    """Search the shortest RASP-L next-token program of a catalogue task.

    The search batch is :func:`problem_from_task` ``(task, lengths, samples, seed)``; a found
    program must also reproduce a validation batch of ``validation_samples`` examples at each of
    ``validation_lengths`` (seed ``seed + 1``). The certificate refers to the search batch's
    lengths (see :class:`SearchResult`). Raises :class:`SearchError` for an unusable task.
    """
    problem = problem_from_task(task, lengths, samples, seed)
    validation = problem_from_task(task, validation_lengths, validation_samples, seed + 1)
    return search(problem, max_length, time_limit, progress, max_memory_mb, validation,
                  grammar=grammar, combine=combine, threads=threads)


# --------------------------------------------------------------------------------------------
# Printing a found program in the dialect
# --------------------------------------------------------------------------------------------

def program_to_source(sop: Node, name: str = "program") -> str:
    """Render a program as one RASP-L statement per operation (``v1 = ...;``).

    ``aggregate`` with a ``max``/``min`` reduction or a truncated mean is written as the
    RASP-L head ``kqv(keys, queries, values, op, default, reduction)`` where its selector is a
    single select, else as ``aggregate(sel, values, default, "max")``.
    """
    names: dict[int, str] = {}
    lines: list[str] = []
    order = topological_order(sop)
    uses: dict[int, int] = {}
    for n in order:
        for c in n.children:
            uses[c.id] = uses.get(c.id, 0) + 1

    def ref(n: Node) -> str:
        if isinstance(n, Tokens):
            return "tokens"
        if isinstance(n, Indices):
            return "indices"
        if isinstance(n, Full):
            return repr(n.value)
        return names[n.id]

    counter = itertools.count(1)
    for n in order:
        if isinstance(n, (Tokens, Indices, Full)):
            continue
        if isinstance(n, Select) and all(isinstance(p, Aggregate) and p.selector is n
                                         for p in order if n in p.children) \
                and uses.get(n.id, 0) == 1 and _single_agg(order, n):
            continue  # printed inside its kqv
        if isinstance(n, Select):
            expr = (f"select({ref(n.keys)}, {ref(n.queries)}, {n.op})" if n.op != "TRUE"
                    else 'select(indices, indices, "TRUE")')
        elif isinstance(n, Map):
            f = n.fn
            if f.op == "not":
                expr = f"not {ref(n.inner)}"
            else:
                expr = f"{ref(n.inner)} {OPS[f.op].symbol} {f.const!r}"
        elif isinstance(n, SequenceMap) and n.fn.op == "ternary":
            c, a, b = n.inputs
            expr = f"{ref(a)} if {ref(c)} else {ref(b)}"
        elif isinstance(n, SequenceMap):
            a, b = n.inputs[:2]
            expr = f"{ref(a)} {OPS[n.fn.op].symbol} {ref(b)}"
        elif isinstance(n, (SelectorAnd, SelectorOr)):
            word = "and" if isinstance(n, SelectorAnd) else "or"
            expr = f"{ref(n.children[0])} {word} {ref(n.children[1])}"
        elif isinstance(n, SelectorWidth):
            expr = f"selector_width({ref(n.selector)})"
        elif isinstance(n, Aggregate):
            s = n.selector
            if isinstance(s, Select) and s.id not in names and n.truncate == (
                    n.reduction == "mean"):
                op = s.op if s.op != "TRUE" else '"TRUE"'
                expr = (f"kqv({ref(s.keys)}, {ref(s.queries)}, {ref(n.values)}, {op}, "
                        f"{n.default!r}, \"{n.reduction}\")")
            else:
                expr = f"aggregate({ref(s)}, {ref(n.values)}, {n.default!r}, \"{n.reduction}\")"
        else:
            expr = n.label
        nm = name if n is sop else f"v{next(counter)}"
        names[n.id] = nm
        lines.append(f"{nm} = {expr};")
    if sop.id not in names:
        lines.append(f"{name} = {ref(sop)};")
    return "\n".join(lines)


def _single_agg(order, sel) -> bool:
    parents = [p for p in order if sel in p.children]
    return len(parents) == 1 and isinstance(parents[0], Aggregate) and \
        parents[0].truncate == (parents[0].reduction == "mean")
