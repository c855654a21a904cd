"""Bounded shortest-program search over RASP-L next-token programs.

The RASP-Generalization Conjecture (Zhou et al. 2023, arXiv 2310.16028, §3) predicts length
generalization from the length of the *shortest* RASP-L program for a task's next-token
function. The catalogue ships hand-written programs, which only bound that length from above.
This module enumerates RASP-L programs smallest first (by the program length of
``docs/language.md`` §4: every select, aggregate, selector width, map, sequence map and constant
s-op counts 1; ``tokens`` and ``indices`` count 0; shared sub-expressions count once) and either
returns the first program that reproduces the task, or certifies that no program of length
``<= k`` in the search grammar does.

Method: bottom-up enumeration with **observational equivalence** (Udupa et al. 2013, "TRANSIT";
Albarghouthi et al. 2013). Every candidate is evaluated with the batched interpreter
(:class:`rasp.Evaluator`, causal mode) on one fixed batch of task examples of several lengths;
candidates whose values on that batch equal an earlier candidate's are dropped, since they behave
identically inside any larger program on that batch. Because every program of the grammar is
causal, the value at position ``t`` depends only on the prefix ``0..t``: one evaluation of the
whole example (padded on the right) gives the next-token prediction for every prefix at once.

Grammar (all RASP-L: causal selects, integer values in the int8 range, indices only compared or
shifted by a constant, no ``length``):

* leaves: ``tokens``, ``indices`` (length 0); constants ``full(c)`` (length 1): 0, 1, 2 and
  the program values of BOS, SEP, EOS;
* maps: ``x + c`` (``c`` = +-1), ``x == c``, ``x < c``, ``x > c`` for the constants, ``not x``;
* sequence maps: ``x + y``, ``x - y``, ``x == y``, ``x < y``, ``x and y``, ``x or y``
  (``and``/``or`` on 0/1 values only). Rule 3 as :mod:`rasp.raspl` states it: values derived
  from indices (``indices``, its constant shifts, selector widths, aggregates of them) are only
  compared or shifted by a constant;
* ``select(keys, queries, op)`` with ``== != < <= > >=`` and the always-true selector, causal;
* ``aggregate(sel, values, default, reduction)`` with ``mean`` (truncated, the RASP-L ``kqv``),
  ``max``, ``min``; defaults 0 and the integer values of the special tokens;
* ``selector_width(sel)``.

Certificate: "no program of length <= k in this grammar reproduces the next-token function on
the search batch" — and so at every length, since a correct program must reproduce the batch.
A candidate that reproduces the batch but not a larger validation batch (lengths 1..20) shows
that the batch merged programs it should have separated: the shortest validation example it gets
wrong is added to the batch and the search starts again (counterexample-guided refinement), so
the final certificate always refers to a batch on which nothing of length <= k fits. Limits of
the claim: (1) only the grammar above (no ternaries, other constants, selector and/or/not);
(2) the pruning keeps the first (smallest) representative of each value signature, which is
exact for programs whose sub-expressions are trees and a heuristic where a program gets shorter
only by sharing a node between two sub-expressions of different signatures; (3) signatures are
64-bit hashes of the values (a collision, about n^2 / 2^65 for n values, would prune wrongly).
Programs are also kept apart by whether they are index-derived (rule 3), so the pruning never
replaces a value by an index-derived one that allows less arithmetic.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from rasp.interpreter import Evaluator
from rasp.ops import OPS
from rasp.ir import (Aggregate, Elementwise, Full, Indices, Map, Node, RASPError, Select,
                     SelectorWidth, SequenceMap, SOp, Tokens, topological_order)

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
                "counterexamples_added": self.counterexamples_added}

    def summary(self) -> str:
        if self.found:
            head = (f"{self.name}: shortest program has length {self.length} "
                    f"(certified: none of length <= {self.certified_below})")
        else:
            head = (f"{self.name}: no program of length <= {self.certified_below} "
                    f"({self.stopped})")
        return (f"{head}; {self.explored} programs in {self.seconds:.1f} s "
                f"({self.programs_per_s:.0f}/s)")


# --------------------------------------------------------------------------------------------
# The enumerator
# --------------------------------------------------------------------------------------------

@dataclass(eq=False)
class _Item:
    node: Node
    cost: int
    ops: frozenset          # ids of the operation nodes (what the length counts)
    idx: bool               # numerically derived from indices (rule 3)
    is_sel: bool
    binary: bool = False    # s-op values within {0, 1}
    sel_info: tuple = (True, 2)   # selector: (some query row is empty, largest row width)
    text: str = ""


class _Search:
    def __init__(self, problem: SearchProblem, time_limit: float, max_length: int,
                 progress: bool, max_bytes: int, validate: Callable[[Node], bool] | None):
        self.p = problem
        self.time_limit = time_limit
        self.max_length = max_length
        self.progress = progress
        self.max_bytes = max_bytes
        self.stored_bytes = 0
        self.storing = True
        self.validate = validate
        self.spurious_node: Node | None = None
        self.ev = Evaluator(problem.inputs, causal=True)
        self.valid = problem.valid
        self.qk_valid = problem.valid[:, :, None] & problem.valid[:, None, :]
        self.tmask = problem.target_mask
        self.tvals = problem.target[problem.target_mask]
        self.is_str = problem.inputs.dtype.kind == "U"
        self.seen: set = set()
        self.by_cost: dict[int, list[_Item]] = {}
        self.sels_by_cost: dict[int, list[_Item]] = {}
        self.explored = 0
        self.start = 0.0
        self.found: _Item | None = None
        self.bar = None

    # -- bookkeeping ----------------------------------------------------------------------
    def _timeout(self) -> bool:
        return time.perf_counter() - self.start > self.time_limit

    def _add(self, node: Node, cost: int, ops: frozenset, idx: bool, is_sel: bool,
             text: str) -> _Item | None:
        """Evaluate a candidate; keep it when its signature is new. Returns the kept item."""
        self.explored += 1
        if self.bar is not None:
            self.bar.update(1)
        values = self.ev.values
        try:
            # children are stored already: evaluate this node only (batched interpreter)
            val = self.ev.eval_node(node)
        except (RASPError, ValueError, TypeError, OverflowError, FloatingPointError):
            return None
        if is_sel:
            val &= self.qk_valid
            key = (True, hash(np.packbits(val).tobytes()))
            width = val.sum(axis=-1)[self.valid]
            sel_info = (bool(width.size and width.min() == 0), int(width.max(initial=0)))
            binary = False
        else:
            kind = val.dtype.kind
            if kind == "f":
                return None
            if kind != "U":
                if kind == "b":
                    val = val.astype(np.int64)
                flat = val[self.valid]
                lo, hi = (int(flat.min()), int(flat.max())) if flat.size else (0, 0)
                if lo < INT8[0] or hi > INT8[1]:   # rule 2: int8 values
                    return None
                binary = lo >= 0 and hi <= 1
                data = flat.astype(np.int64, copy=False).tobytes()
            else:
                flat = val[self.valid]
                binary = False
                data = "\x00".join(flat.tolist()).encode()
            key = (False, idx, kind == "U", hash(data))
        values[node.id] = val
        if key in self.seen:
            self.ev.values.pop(node.id, None)
            return None
        item = _Item(node, cost, ops, idx, is_sel, binary=binary, text=text)
        if is_sel:
            item.sel_info = sel_info
        if not is_sel and self.found is None and self._matches(val):
            if self.validate is None or self.validate(node):
                self.found = item
            else:
                # fits the batch only by chance: the batch cannot tell some programs apart,
                # so nothing can be certified at this length; the caller adds a
                # counterexample to the batch and starts again
                self.spurious_node = node
        if not self.storing or cost >= self.max_length:
            # check-only: the last level needs no storage (nothing is built on it)
            if self.found is not item:
                self.ev.values.pop(node.id, None)
            return None
        self.seen.add(key)
        self.stored_bytes += val.nbytes
        if self.stored_bytes > self.max_bytes:
            self.storing = False
        (self.sels_by_cost if is_sel else self.by_cost).setdefault(cost, []).append(item)
        return item

    def _matches(self, val: np.ndarray) -> bool:
        got = val[self.tmask]
        if got.dtype.kind != self.tvals.dtype.kind and \
                ("U" in (got.dtype.kind, self.tvals.dtype.kind)):
            return False
        return bool(np.array_equal(got, self.tvals))

    # -- candidate generators ---------------------------------------------------------------
    def _leaves(self):
        t = Tokens("asis").named("tokens")
        i = Indices()
        self._add(t, 0, frozenset(), False, False, "tokens")
        self._add(i, 0, frozenset(), True, False, "indices")

    def _sops(self, cost: int) -> list[_Item]:
        return self.by_cost.get(cost, [])

    def _sels(self, cost: int) -> list[_Item]:
        return self.sels_by_cost.get(cost, [])

    def _pairs(self, k: int, first: Callable[[int], list], second: Callable[[int], list]):
        """Pairs (x, y) whose operation sets have union of size exactly ``k``."""
        for cx in range(0, k + 1):
            xs = list(first(cx))
            if not xs:
                continue
            for cy in range(max(0, k - cx), k + 1):
                ys = list(second(cy))
                if not ys:
                    continue
                overlap = cx + cy - k
                for x in xs:
                    for y in ys:
                        if overlap == 0:
                            if cx and cy and not x.ops.isdisjoint(y.ops):
                                continue
                        elif len(x.ops & y.ops) != overlap:
                            continue
                        yield x, y

    def _sop_level(self, k: int) -> bool:
        """Evaluate every s-op of length ``k`` (each is checked against the target).
        Returns False when stopped early."""
        if k == 1:
            for c in self.p.constants:
                f = Full(c)
                self._add(f, 1, frozenset([f.id]), False, False, repr(c))
                if self._stop():
                    return False
        # maps of an s-op of length k-1
        for x in list(self._sops(k - 1)):
            for node, idx, text in self._maps(x):
                self._add(node, k, x.ops | {node.id}, idx, False, text)
                if self._stop():
                    return False
        # selector widths of a selector of length k-1
        for s in list(self._sels(k - 1)):
            node = SelectorWidth(s.node)
            # a count of positions is a position (rasp.raspl rule 3): compare or shift only
            self._add(node, k, s.ops | {node.id}, True, False, f"selector_width({s.text})")
            if self._stop():
                return False
        # sequence maps over pairs whose union has length k-1
        for x, y in self._pairs(k - 1, self._sops, self._sops):
            for node, idx, text in self._seqmaps(x, y):
                self._add(node, k, x.ops | y.ops | {node.id}, idx, False, text)
                if self._stop():
                    return False
        # aggregates
        for s, v in self._pairs(k - 1, self._sels, self._sops):
            has_empty, max_width = s.sel_info
            # identical values on the batch are not evaluated twice: a selector that never
            # selects two keys makes mean = max = min; one without empty rows ignores defaults
            reds = ("mean", "max", "min") if max_width > 1 else ("mean",)
            defaults = self.p.defaults if has_empty else self.p.defaults[:1]
            for red in reds:
                for d in defaults:
                    node = Aggregate(s.node, v.node, d, red, truncate=(red == "mean"))
                    self._add(node, k, s.ops | v.ops | {node.id}, v.idx, False,
                              f"aggregate({s.text}, {v.text}, {d!r}, {red})")
                    if self._stop():
                        return False
        return True

    def _sel_level(self, k: int) -> bool:
        """Evaluate every selector of length ``k`` (needed only by longer programs)."""
        if k == 1:
            s = Select(Indices(), Indices(), "TRUE", causal=True)
            self._add(s, 1, frozenset([s.id]), False, True, "select(TRUE)")
        for x, y in self._pairs(k - 1, self._sops, self._sops):
            if x.node.kind == "full" and y.node.kind == "full":
                continue   # constant matrix: all-true or all-false
            xk = self.ev.values[x.node.id].dtype.kind
            yk = self.ev.values[y.node.id].dtype.kind
            if (xk == "U") != (yk == "U"):
                continue
            ops = ("==", "!=") if xk == "U" else ("==", "!=", "<", "<=", ">", ">=")
            for op in ops:
                node = Select(x.node, y.node, op, causal=True)
                self._add(node, k, x.ops | y.ops | {node.id}, False, True,
                          f"select({x.text}, {y.text}, {op})")
                if self._stop():
                    return False
        return True

    def _maps(self, x: _Item):
        if x.node.kind == "full":
            return
        if self.is_str and x.node.kind == "tokens":
            for c in self.p.constants:
                if isinstance(c, str):
                    yield Map(Elementwise("eq", const=c, const_side="right"), x.node), False, \
                        f"({x.text} == {c!r})"
            return
        kind = self.ev.values[x.node.id].dtype.kind
        if kind == "U":
            return
        for c in (1, -1):
            yield Map(Elementwise("add", const=c, const_side="right"), x.node), x.idx, \
                f"({x.text} + {c})"
        if x.binary and not x.idx:
            # on 0/1 values a comparison with a constant is x, not x or a constant
            yield Map(Elementwise("not"), x.node), False, f"(not {x.text})"
            return
        for c in self.p.constants:
            if not isinstance(c, int):
                continue
            for op, sym in (("eq", "=="), ("lt", "<"), ("gt", ">")):
                yield Map(Elementwise(op, const=c, const_side="right"), x.node), False, \
                    f"({x.text} {sym} {c})"

    def _seqmaps(self, x: _Item, y: _Item):
        if x is y:
            if not x.idx and x.node.kind != "full" and \
                    self.ev.values[x.node.id].dtype.kind != "U":
                yield SequenceMap(Elementwise("add"), (x.node, x.node)), False, \
                    f"({x.text} + {x.text})"
            return
        xk = self.ev.values[x.node.id].dtype.kind
        yk = self.ev.values[y.node.id].dtype.kind
        if (xk == "U") != (yk == "U"):
            return
        ordered = x.node.id < y.node.id
        if xk == "U":
            if ordered:
                yield SequenceMap(Elementwise("eq"), (x.node, y.node)), False, \
                    f"({x.text} == {y.text})"
            return
        with_const = x.node.kind == "full" or y.node.kind == "full"
        if not with_const:   # comparisons with a constant are maps
            if ordered:
                yield SequenceMap(Elementwise("eq"), (x.node, y.node)), False, \
                    f"({x.text} == {y.text})"
            yield SequenceMap(Elementwise("lt"), (x.node, y.node)), False, \
                f"({x.text} < {y.text})"
        if (x.idx or y.idx) and with_const:
            # a position shifted by an integer constant stays a position (rule 3 allows it)
            if y.node.kind == "full" and x.idx:
                yield SequenceMap(Elementwise("add"), (x.node, y.node)), True, \
                    f"({x.text} + {y.text})"
                yield SequenceMap(Elementwise("sub"), (x.node, y.node)), True, \
                    f"({x.text} - {y.text})"
            return
        if not (x.idx or y.idx):                       # rule 3: no arithmetic on indices
            if ordered:
                yield SequenceMap(Elementwise("add"), (x.node, y.node)), False, \
                    f"({x.text} + {y.text})"
            yield SequenceMap(Elementwise("sub"), (x.node, y.node)), False, \
                f"({x.text} - {y.text})"
            if ordered and x.binary and y.binary and not with_const:
                yield SequenceMap(Elementwise("and"), (x.node, y.node)), False, \
                    f"({x.text} and {y.text})"
                yield SequenceMap(Elementwise("or"), (x.node, y.node)), False, \
                    f"({x.text} or {y.text})"

    def _stop(self) -> bool:
        return self.found is not None or self.spurious_node is not None or self._timeout()

    # -- driver ------------------------------------------------------------------------------
    def run(self) -> SearchResult:
        self.start = time.perf_counter()
        errstate = np.errstate(all="ignore")
        errstate.__enter__()
        bar = None
        if self.progress:
            from tqdm import tqdm
            bar = tqdm(desc=f"search {self.p.name}", unit="prog", leave=False)
        self.bar = bar
        certified = -1
        stopped = "max_length"
        try:
            self._leaves()
            if self.found is not None:
                certified = -1
            else:
                certified = 0
                for k in range(1, self.max_length + 1):
                    if bar is not None:
                        bar.set_postfix(length=k)
                    done = self._sop_level(k)
                    if self.found is not None:
                        break
                    if self.spurious_node is not None:
                        stopped = "spurious"
                        break
                    if not done:
                        stopped = "time_limit"
                        break
                    certified = k          # every s-op of length k has been checked
                    if not self.storing:
                        stopped = "memory_limit"
                        break
                    if k < self.max_length and not self._sel_level(k):
                        stopped = "time_limit"
                        break
        finally:
            errstate.__exit__(None, None, None)
            if bar is not None:
                bar.close()
        seconds = time.perf_counter() - self.start
        f = self.found
        if f is not None:
            stopped = "found"
            certified = f.cost - 1
        return SearchResult(
            name=self.p.name, found=f is not None, program=f.node if f else None,
            length=f.cost if f else None, certified_below=certified, stopped=stopped,
            explored=self.explored, distinct=len(self.seen), seconds=seconds,
            lengths=list(self.p.lengths), n_targets=self.p.n_targets,
            max_length=self.max_length,
            source=program_to_source(f.node) if f else None)


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
           validation: SearchProblem | None = None) -> SearchResult:
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
    while True:
        left = time_limit - (time.perf_counter() - start)
        res = _Search(problem, max(left, 1e-3), max_length, progress,
                      int(max_memory_mb * 2**20), validate)
        out = res.run()
        explored += out.explored
        if res.spurious_node is None:
            break
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
    return out


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
                validation_samples: int = 10, max_memory_mb: float = 1024) -> SearchResult:
    """Search the shortest RASP-L next-token program of a catalogue task.

    The search batch is :func:`problem_from_task` ``(task, lengths, samples, seed)``; a found
    program must also reproduce a validation batch of ``validation_samples`` examples at each of
    ``validation_lengths`` (seed ``seed + 1``). The certificate refers to the search batch's
    lengths (see :class:`SearchResult`). Raises :class:`SearchError` for an unusable task.
    """
    problem = problem_from_task(task, lengths, samples, seed)
    validation = problem_from_task(task, validation_lengths, validation_samples, seed + 1)
    return search(problem, max_length, time_limit, progress, max_memory_mb, validation)


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
        elif isinstance(n, SequenceMap):
            a, b = n.inputs[:2]
            expr = f"{ref(a)} {OPS[n.fn.op].symbol} {ref(b)}"
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
