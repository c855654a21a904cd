"""Where the interpreter raises (issue 51): the value sets' list of the operations that may
raise, and a search for the inputs on which the interpreter does raise.

Stage 1 (:mod:`compiler.basis_inference`) gives every s-op its value set; from them
:func:`raising_operations` lists each operation of the program for which some combination of
possible values makes the interpreter raise:

* a map or sequence map that fails on some input values (``ValueSets.errors``);
* an s-op whose values mix strings and numbers: a sequence holding both raises;
* a ``max`` / ``min`` over values that may be ``None``: the interpreter raises whenever a
  query selects a ``None`` (issue 51, D1);
* a mean of strings over a selector that may select several keys;
* an aggregate over values that may be ``None`` whose default is a bool beside other numbers
  (or a number beside bools) and whose selector may select nothing.

Each one is either **covered** (the compiled model has a run-time check that raises exactly
there: an error flag of a map, a string/number kind check, a count head; see
``CompiledModel._check``) or not. :func:`find_raising_inputs` runs the interpreter itself over
every input of the declared vocabulary and lengths (at most :data:`SEARCH_LIMIT`, else a
seeded sample at every length) and returns the inputs it raises on, with its message (which
names the operation). ``compile_program`` refuses a program with an uncovered operation unless
the search proves, exhaustively, that it never raises; a program that raises on an input found
is refused with that input by default (``raising="refuse"``), and with ``raising="declare"``
compiled only if the model raises on every input found (listed in
``stats["raising_inputs"]``). The verification gate's inputs are a second net: by default an
input on which the interpreter raises there refuses the program too
(:func:`refuse_gate_raising`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
import numpy as np

from rasp.interpreter import evaluate
from rasp.ir import Aggregate, Map, RASPError, SequenceMap, SOp, topological_order
from rasp.analyses.value_sets import ValueSets, selects_at_least_one, selects_at_most_one

from .errors import UnsupportedError
from .graph.nodes import CompilerGraph
from .residual_space import ResidualSpace

__all__ = ["RaisingOp", "RaisingSearch", "raising_operations", "find_raising_inputs",
           "show_input", "raising_search", "check_model_raises", "refuse_gate_raising",
           "SEARCH_LIMIT", "SEARCH_SAMPLES"]

#: every input is run through the interpreter when all lengths together number at most this
SEARCH_LIMIT = 4096
#: otherwise this many seeded random inputs per length (and the constant sequences), within
#: :data:`SEARCH_TOKENS` positions over all lengths (at least 4 per length)
SEARCH_SAMPLES = 64
SEARCH_TOKENS = 32_768
#: the end of a refusal of a program that raises on a declared input (the default)
REFUSED = ("refused (the default, raising='refuse'; raising='declare' compiles it with such "
           "inputs declared out of contract, the model raising there too)")
#: inputs per interpreter batch (a batch that raises is bisected down to single inputs)
_CHUNK = 256


@dataclass
class RaisingOp:
    """One operation on which the interpreter may raise.

    Attributes:
        node: the IR s-op.
        reason: why (one clause, e.g. ``"its values mix strings and numbers"``).
        kind: ``"map"``, ``"mixed"``, ``"none_order"`` (max / min over ``None``),
            ``"string_mean"`` or ``"none_mixed"`` (a bool default beside numbers that may be
            ``None``).
        covered: whether the compiled model raises there too (set by ``compile_program``
            once the graph is built; ``None`` until then).
    """

    node: SOp
    reason: str
    kind: str
    covered: bool | None = None

    def describe(self) -> str:
        """``"<kind> '<label>' at l:c (<reason>)"``."""
        n = self.node
        at = f" at {n.span.line}:{n.span.column}" if n.span else ""
        return f"{n.kind} '{n.label}'{at} ({self.reason})"


@dataclass
class RaisingSearch:
    """What :func:`find_raising_inputs` ran.

    Attributes:
        found: ``[(input, message)]``: inputs (lists of tokens) on which the interpreter
            raises, with its message; at most ``max_found``.
        checked: inputs run; exhaustive: whether they were every input.
    """

    found: list = field(default_factory=list)
    checked: int = 0
    exhaustive: bool = False


def _mixes_strings_and_numbers(values: list) -> bool:
    strs = any(isinstance(v, str) for v in values)
    return strs and any(v is not None and not isinstance(v, str) for v in values)


def raising_operations(sop: SOp, vs: ValueSets) -> list[RaisingOp]:
    """The operations of the program rooted at ``sop`` on which the interpreter may raise,
    in program order, read from the value sets ``vs`` (an over-approximation: each may never
    raise on a real input; :func:`find_raising_inputs` tells).

    Args:
        sop: the program's output s-op; vs: its value sets (stage 1).

    Returns:
        a list of :class:`RaisingOp` (``covered`` still None).
    """
    out = []
    for node in topological_order(sop):
        if not isinstance(node, SOp) or node.id not in vs.sets:
            continue
        if isinstance(node, (Map, SequenceMap)) and node.id in vs.errors:
            out.append(RaisingOp(node, f"fails on some values: {vs.errors[node.id]}", "map"))
        if _mixes_strings_and_numbers(vs.sets[node.id]):
            out.append(RaisingOp(node, "its values mix strings and numbers; a sequence holding "
                                 "both raises", "mixed"))
        if not isinstance(node, Aggregate) or node.values.id not in vs.sets:
            continue
        V = vs.sets[node.values.id]
        if node.reduction in ("max", "min") and any(v is None for v in V):
            out.append(RaisingOp(node, f"a {node.reduction} over '{node.values.label}', which "
                                 "may be None: the interpreter raises where a query selects "
                                 "a None", "none_order"))
        elif node.reduction == "mean" and any(isinstance(v, str) for v in V) and \
                not selects_at_most_one(node.selector, vs.sets):
            out.append(RaisingOp(node, "a mean of strings that may select several keys",
                                 "string_mean"))
        if _default_mixes_bools_and_numbers(node, V) and \
                not selects_at_least_one(node.selector, vs.sets):
            out.append(RaisingOp(node, f"its default {node.default!r} and the values of "
                                 f"'{node.values.label}', which may be None, mix bools and "
                                 "numbers: a batch holding None keeps each value as it is and "
                                 "raises where a sequence mixes them", "none_mixed"))
    return out


def _default_mixes_bools_and_numbers(node: Aggregate, V: list) -> bool:
    """An aggregate over values that may be ``None`` whose default is a bool beside values
    that may be other numbers, or a number beside bools: the interpreter, given a batch
    holding ``None``, keeps every value as it is (``_aggregate_objects``) and its array cannot
    hold both (it raises where they meet and some value is not integral)."""
    d = node.default
    if d is None or isinstance(d, str) or not any(v is None for v in V):
        return False
    is_bool = lambda v: isinstance(v, (bool, np.bool_))          # noqa: E731
    nums = [v for v in V if v is not None and not isinstance(v, str)]
    if is_bool(d):
        return any(not is_bool(v) for v in nums)
    return any(is_bool(v) for v in nums)


def _all_inputs(vocab: list, max_seq_len: int, limit: int) -> bool:
    total, p = 0, 1
    for _ in range(max_seq_len):
        p *= len(vocab)
        total += p
        if total > limit:
            return False
    return True


def _raises(sop: SOp, batch: list, causal) -> str | None:
    try:
        evaluate(sop, batch, causal=causal)
    except RASPError as e:
        return e.message
    except Exception as e:     # noqa: BLE001 - a Python callable of the program raised
        return f"{type(e).__name__}: {e}"
    return None


def find_raising_inputs(sop: SOp, vocab: list, max_seq_len: int, causal: bool = False,
                        limit: int = SEARCH_LIMIT, samples: int = SEARCH_SAMPLES,
                        seed: int = 0, max_found: int = 4) -> RaisingSearch:
    """The inputs of ``vocab`` and lengths ``1..max_seq_len`` on which ``rasp.evaluate``
    raises (causal mode when ``causal``): every input when they number at most ``limit``,
    else ``samples`` seeded random inputs per length (the first a constant sequence; fewer at
    long lengths, within :data:`SEARCH_TOKENS` positions, at least 4). Batches of inputs are
    run together; one that raises is halved until the single inputs that raise are found.

    Returns:
        :class:`RaisingSearch`: at most ``max_found`` inputs (shortest first) with the
        interpreter's messages, how many inputs ran, whether they were all.
    """
    vocab = list(vocab)
    exhaustive = _all_inputs(vocab, max_seq_len, limit)
    rng = np.random.default_rng(seed)
    res = RaisingSearch(exhaustive=exhaustive)
    mode = True if causal else None

    def bisect(batch: list) -> None:
        if len(res.found) >= max_found:
            return
        msg = _raises(sop, batch, mode)
        if msg is None:
            return
        if len(batch) == 1:
            res.found.append((list(batch[0]), msg))
            return
        half = len(batch) // 2
        bisect(batch[:half])
        bisect(batch[half:])

    for n in range(1, max_seq_len + 1):
        if exhaustive:
            inputs = (list(x) for x in itertools.product(vocab, repeat=n))
        else:
            k = max(4, min(samples, SEARCH_TOKENS // (max_seq_len * n)))
            idx = rng.integers(0, len(vocab), size=(k, n))
            rows = [[vocab[i] for i in row] for row in idx]
            rows[0] = [vocab[n % len(vocab)]] * n
            inputs = iter(rows)
        while len(res.found) < max_found:
            chunk = list(itertools.islice(inputs, _CHUNK))
            if not chunk:
                break
            res.checked += len(chunk)
            bisect(chunk)
        if len(res.found) >= max_found:
            break
    return res


def show_input(x: list) -> str:
    """An input as the gate shows it: its Python list."""
    return repr([v.item() if isinstance(v, np.generic) else v for v in x])


def _covered(op: RaisingOp, cg: CompilerGraph, space: ResidualSpace) -> bool:
    """Whether the compiled model has a run-time check raising where ``op`` raises: a failing
    map's error flags (checked on the inputs found, :func:`_check_raising_inputs`), the
    string/number kind check of a node computing the s-op, a mean of strings' count head;
    never a ``max`` / ``min`` over ``None`` (the model takes the maximum of what it selects)."""
    if op.kind == "map":
        return True
    if op.kind == "none_order":
        return False
    if op.kind == "none_mixed":         # typed (and raising) as the interpreter does
        return any(node.ir is op.node for _, node, _, _ in cg.typing)
    mine = [n for n in cg.nodes if n.ir is op.node and not n.internal and n.kind != "full"]
    if op.kind == "string_mean":
        return any(n.kind == "aggregate" and n.count_check is not None for n in mine)
    for n in mine:                      # "mixed": the kind check of _compiled_model
        if space.is_categorical(n):
            vals = list(space.dirs(n))
            if any(isinstance(v, str) for v in vals) and any(
                    not isinstance(v, str) and v is not None for v in vals):
                return True
    return False


def raising_search(sop, value_sets, cg: CompilerGraph, space: ResidualSpace, vocab: list,
                   max_seq_len: int, causal: bool, raising: str):
    """Where the interpreter raises (issue 51): the operations the value sets say may raise
    (:func:`compiler.raising.raising_operations`) and the inputs it raises on
    (:func:`compiler.raising.find_raising_inputs`). Returns the search (None when no
    operation may raise).

    Raises:
        UnsupportedError: ``raising="refuse"`` (the default) and an input raises; or an
            operation without a run-time check in the model may raise (an input found, or the
            inputs sampled: none can be excluded). The message names the operation and the
            input.
    """
    ops = raising_operations(sop, value_sets)
    if not ops:
        return None
    for op in ops:
        op.covered = _covered(op, cg, space)
    found = find_raising_inputs(sop, vocab, max_seq_len, causal)
    scope = (f"vocabulary {{{', '.join(map(repr, vocab))}}}, lengths 1..{max_seq_len}")
    if found.found:
        x, msg = found.found[0]
        if raising == "refuse":
            raise UnsupportedError(
                f"the interpreter raises on input {show_input(x)} ({msg}), an input of the "
                f"declared {scope}; the operations that may raise: "
                f"{'; '.join(op.describe() for op in ops[:3])}; {REFUSED}", None, sop.span)
    uncovered = [op for op in ops if not op.covered]
    if uncovered and (found.found or not found.exhaustive):
        op = uncovered[0]
        if found.found:
            x, msg = found.found[0]
            why = (f"the interpreter raises on input {show_input(x)} ({msg}) and the "
                   "compiled model has no run-time check for it")
        else:
            why = (f"the interpreter may raise on an input of the declared {scope} and the "
                   f"compiled model has no run-time check for it (none of the "
                   f"{found.checked:,} sampled inputs raised, but that cannot exclude one)")
        raise UnsupportedError(f"{why}: {op.describe()}; refused rather than return a model "
                               "that would compute a value where the interpreter raises",
                               None, op.node.span or sop.span)
    return found


def check_model_raises(cm) -> None:
    """The compiled model (a :class:`compiler.CompiledModel`) must raise on every input where
    the search found the interpreter raising (``stats["raising_inputs"]``); an
    :class:`UnsupportedError` naming the input
    otherwise (a failing map the model never computes, e.g. read only by a ``TRUE``
    select)."""
    for x, msg in cm.stats.get("raising_inputs", []):
        try:
            cm.run([x])
        except RASPError:
            continue
        raise UnsupportedError(
            f"the interpreter raises on input {show_input(x)} ({msg}) and the compiled model "
            "does not (no run-time check covers that operation); refused rather than return "
            "a model that would compute a value where the interpreter raises")


def refuse_gate_raising(cm, sop, check, raising: str) -> None:
    """After the verification gate: an input of the gate on which the interpreter raised
    (``check.raising``, where the model raised too, else the gate refused it) is, by default,
    a refusal naming the input and the interpreter's message (an operation the value sets did
    not list, e.g. a mean of a ``None``-padded mean that the interpreter types bool in one
    position and float in another); with ``raising="declare"`` it is listed in
    ``stats["raising_inputs"]`` (at most 4 in all).

    Raises:
        UnsupportedError: ``raising="refuse"`` and the gate saw the interpreter raise.
    """
    if not check.raising:
        return
    if raising == "refuse":
        x, msg = check.raising[0]
        raise UnsupportedError(
            f"the interpreter raises on input {show_input(x)} ({msg}), an input of the declared "
            f"vocabulary {{{', '.join(map(repr, cm.vocab))}}}, lengths 1..{cm.max_seq_len}; "
            f"{REFUSED}", None, sop.span)
    listed = cm.stats.setdefault("raising_inputs", [])
    seen = [x for x, _ in listed]
    for x, msg in check.raising:
        if len(listed) < 4 and list(x) not in seen:
            listed.append([list(x), msg])
