"""Stage 7: the verification gate. The compiled model against the interpreter.

:func:`verify_compiled` runs a compiled model and ``rasp.evaluate`` on the same inputs and
compares them with :func:`rasp.equality.values_equal` (``strict=True``: a bool equals only a
bool, ints exactly, the tolerance only where a float is involved): **exhaustively** when every
input over the vocabulary up to ``max_seq_len`` fits in :data:`EXHAUSTIVE_LIMIT` sequences
(:func:`gate_is_exhaustive`), otherwise on a
seeded random sample at **every** length ``1..max_seq_len`` (the first input of a length, when
there are several, is a constant sequence: ties and empty selections concentrate there). An input the
interpreter rejects (a :class:`~rasp.ir.RASPError`) must be rejected by the compiled model too,
and vice versa.

``compile_program`` runs it on every model before returning it (at most :data:`GATE_SAMPLES`
inputs per length, fewer at long lengths within :data:`GATE_TOKENS` positions, at least one)
and refuses a model that differs, with the counterexample. A causal model is checked the same
way, at **every** length ``1..max_seq_len`` (issue 38): checking only full-length inputs (whose
prefixes are the shorter inputs) misses a model that is wrong where the interpreter raises on
every full-length input but not on a shorter one. ``rasp compile --verify K`` runs the same
check with ``K`` inputs at every length.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from rasp.equality import values_equal
from rasp.interpreter import evaluate
from rasp.ir import RASPError, SOp

__all__ = ["verify_compiled", "VerificationResult", "EXHAUSTIVE_LIMIT", "GATE_SAMPLES",
           "gate_is_exhaustive"]

#: inputs are enumerated exhaustively when there are at most this many (all lengths together)
EXHAUSTIVE_LIMIT = 1024
#: random inputs per length checked by ``compile_program``'s gate when not exhaustive (the
#: most; long lengths get fewer, see :data:`GATE_TOKENS`)
GATE_SAMPLES = 8
#: lengths are checked in padded groups whose padding is at most this fraction of the group's
#: real token positions (BOS included)
PAD_WASTE = 0.15
#: the gate's budget in token positions: at length ``n`` of ``N`` it checks
#: ``clamp(GATE_TOKENS // (N * (n + 1)), 1, samples)`` inputs, so its cost stays near that of
#: compiling (a compiled model of max_seq_len 64 runs ~1,000 positions in 0.02-0.2 s)
GATE_TOKENS = 1024


def gate_is_exhaustive(n_vocab: int, max_seq_len: int,
                       exhaustive_limit: int = EXHAUSTIVE_LIMIT) -> bool:
    """Whether :func:`verify_compiled` compares every input: all sequences of length
    ``1..max_seq_len`` over ``n_vocab`` tokens number at most ``exhaustive_limit``."""
    if n_vocab <= 1:
        return max_seq_len <= exhaustive_limit
    total, p = 0, 1
    for _ in range(max_seq_len):
        p *= n_vocab
        total += p
        if total > exhaustive_limit:
            return False
    return True


@dataclass
class VerificationResult:
    """What :func:`verify_compiled` checked.

    Attributes:
        checked: inputs compared; mismatches: inputs where the two differ.
        exhaustive: whether every input up to ``max_seq_len`` was compared.
        per_length: ``{length: (mismatches, checked)}``.
        counterexample: the first mismatch, as text (input, interpreter's value or error,
            compiled model's value or error); None when there is none.
        seconds: wall time of the check.
        raising: ``[(input, message)]``: inputs on which the interpreter raised (and the model
            too, else they are mismatches), at most 4.
    """

    checked: int = 0
    mismatches: int = 0
    exhaustive: bool = False
    per_length: dict = field(default_factory=dict)
    counterexample: str | None = None
    seconds: float = 0.0
    raising: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.mismatches == 0


def _outcome(fn, batch):
    """``(values per sequence, None)`` or, when the batch raises, one outcome per sequence:
    a value or the error."""
    try:
        out = fn(batch)
        return [out[i] for i in range(len(batch))]
    except Exception:       # noqa: BLE001 - a program's Python callables may raise anything
        pass
    res = []
    for seq in batch:
        try:
            res.append(fn([seq])[0])
        except Exception as e:   # noqa: BLE001 - recorded as "raises", compared as outcomes
            res.append(e)
    return res


def _show(x) -> str:
    if isinstance(x, BaseException):
        return f"raises {type(x).__name__}: {x.message if isinstance(x, RASPError) else x}"
    return "[" + ", ".join(repr(v.item() if isinstance(v, np.generic) else v)
                           for v in np.asarray(x).tolist()) + "]"


def _inputs(vocab: list, n: int, k: int, rng: np.random.Generator,
            exhaustive: bool) -> list[list]:
    """Every input of length ``n``, or ``k`` inputs: the first (when ``k >= 2``) the constant
    sequence of one token (ties, empty selections), the others uniformly random."""
    if exhaustive:
        return [list(x) for x in itertools.product(vocab, repeat=n)]
    idx = rng.integers(0, len(vocab), size=(k, n))
    batch = [[vocab[i] for i in row] for row in idx]
    if k >= 2:
        batch[0] = [vocab[n % len(vocab)]] * n
    return batch


def _groups(sizes: list[tuple[int, int]], waste: float = PAD_WASTE) -> list[list[int]]:
    """Indices of ``sizes = [(length, inputs), ...]`` (lengths ascending) grouped greedily so
    that padding every input of a group to its longest length (plus BOS) costs at most
    ``waste`` times the group's real positions."""
    groups: list[list[int]] = []
    real = 0
    for i, (n, k) in enumerate(sizes):
        if groups:
            cand_real = real + k * (n + 1)
            padded = (n + 1) * sum(sizes[j][1] for j in groups[-1] + [i])
            if padded <= (1 + waste) * cand_real:
                groups[-1].append(i)
                real = cand_real
                continue
        groups.append([i])
        real = k * (n + 1)
    return groups


def verify_compiled(cm, sop: SOp, samples: int = GATE_SAMPLES, seed: int = 0,
                    exhaustive_limit: int = EXHAUSTIVE_LIMIT, progress: bool = False,
                    token_budget: int | None = GATE_TOKENS) -> VerificationResult:
    """Compare a compiled model with the interpreter.

    Args:
        cm: a :class:`~compiler.compile.CompiledModel` (its ``vocab``, ``max_seq_len`` and
            ``causal`` give the input space and the interpreter's mode: a causal model is
            compared with ``rasp.evaluate(sop, inputs, causal=True)``).
        sop: the compiled s-op.
        samples: random inputs per length when the input space is not enumerated.
        seed: seed of the random inputs.
        exhaustive_limit: enumerate every input when there are at most this many.
        progress: show a tqdm bar over the lengths.
        token_budget: bound the sampled inputs (not the exhaustive check) to about this many
            token positions over all lengths, at least one input per length; None: exactly
            ``samples`` per length (``rasp compile --verify K``).

    Returns:
        :class:`VerificationResult` (``mismatches == 0`` when the two agree everywhere checked).
    """
    t0 = time.perf_counter()
    vocab = list(cm.vocab)
    N = cm.max_seq_len
    V = len(vocab)
    exhaustive = gate_is_exhaustive(V, N, exhaustive_limit)
    causal = True if cm.causal else None
    rng = np.random.default_rng(seed)
    res = VerificationResult(exhaustive=exhaustive)
    batches = []
    for n in range(1, N + 1):          # every length, causal models too
        k = samples
        if token_budget is not None:
            k = max(1, min(samples, token_budget // (N * (n + 1))))
        batches.append((n, _inputs(vocab, n, k, rng, exhaustive)))
    # lengths run in padded groups (one forward each) whose padding adds at most
    # PAD_WASTE of the group's real positions: the forward's cost is per position, so fewer
    # calls without padding work; a group whose run raises is run length by length
    pos_of = {}
    for group in _groups([(n, len(b)) for n, b in batches]):
        flat = [x for i in group for x in batches[i][1]]
        if len(group) == 1:
            continue
        try:
            got_all = list(cm.run(flat))
        except RASPError:
            continue
        at = 0
        for i in group:
            pos_of[i] = got_all[at: at + len(batches[i][1])]
            at += len(batches[i][1])
    steps = list(enumerate(batches))
    if progress:
        steps = tqdm(steps, desc="verify", unit="length", disable=None)
    for i, (n, batch) in steps:
        want = _outcome(lambda b: evaluate(sop, b, causal=causal), batch)
        got = pos_of[i] if i in pos_of else _outcome(cm.run, batch)
        bad = 0
        for x, w, g in zip(batch, want, got):
            w_err, g_err = isinstance(w, BaseException), isinstance(g, BaseException)
            same = (w_err and g_err) or (not w_err and not g_err and
                                          values_equal(w, g, strict=True))
            if w_err and g_err and len(res.raising) < 4:
                res.raising.append((list(x), w.message if isinstance(w, RASPError)
                                    else f"{type(w).__name__}: {w}"))
            if not same:
                bad += 1
                if res.counterexample is None:
                    res.counterexample = (f"input {x!r}: interpreter {_show(w)}, compiled model "
                                          f"{_show(g)}")
        res.per_length[n] = (bad, len(batch))
        res.checked += len(batch)
        res.mismatches += bad
    res.seconds = time.perf_counter() - t0
    return res
