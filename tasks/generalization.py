"""Part A: the generalization tasks (decoder-only, next-token format).

Every example is ``BOS prompt SEP answer EOS`` (Zhou et al.'s count has no SEP: the prompt is
``BOS a b``). Sources: Zhou et al. 2023, "What Algorithms can Transformers Learn? A Study in
Length Generalization" (arXiv 2310.16028) and Kazemnejad et al. 2023, "The Impact of Positional
Encoding on Length Generalization in Transformers" (arXiv 2305.19466).

The ground truths here are plain Python over the token *values* (see :mod:`tasks.base`), written
independently of the RASP programs in ``tasks/programs/``.
"""

from __future__ import annotations

import numpy as np

from .base import BOS, EOS, PLUS, SEP, Regime, Task, TaskInputError, numeric_vocab

ZHOU = "Zhou et al. 2023 (arXiv 2310.16028)"

#: Where Zhou et al. state a training length for a task's outcome (:class:`tasks.base.Regime`).
COUNT_REGIME = Regime(60, ZHOU + ", Fig. 1b caption: models trained on lengths of 60 or more "
                          "generalize near-perfectly up to length 150")
COPY_UNIQUE_REGIME = Regime(30, ZHOU + ": copy of unique tokens generalizes once the maximum "
                                "training length exceeds about 30 (docs/spec tasks table)")
KAZ = "Kazemnejad et al. 2023 (arXiv 2305.19466)"

#: alphabet size of copy_unique / sort_unique and numbers of count (values stay in int8).
N_NUMBERS = 120
#: number of index-hint tokens of the addition tasks (values 10 .. 119).
N_ADD_HINTS = 110
#: number of index-hint tokens of parity_scratchpad (values 2 .. 121).
N_PARITY_HINTS = 120


def _paper(zhou: str, kazemnejad: str) -> dict:
    return {"zhou": zhou, "kazemnejad": kazemnejad,
            "sources": {"zhou": ZHOU + ", Table/Figures of §4-5 and Appendix",
                        "kazemnejad": KAZ + ", Figure 3 / Table 1"}}


class NextTokenTask(Task):
    """Base of part-A tasks: helpers to split a prompt ``BOS x_1..x_n SEP`` into values."""

    def _values(self, ids):
        return [self.vocab.values[i] for i in ids]

    def _content(self, prompt: list[int]) -> list[int]:
        """Values between BOS and the final SEP; checks the frame."""
        vals = self._values(prompt)
        if len(vals) < 2 or vals[-1] != SEP:
            raise TaskInputError(f"{self.name}: a prompt is BOS ... SEP")
        body = vals[1:-1]
        if any(v < 0 for v in body):
            raise TaskInputError(f"{self.name}: special token inside the prompt body")
        return body

    def _ids(self, values) -> list[int]:
        return [self.vocab.id_of_value(v) for v in values]

    def sequence_length(self, length: int) -> int:
        p, a = self.sample(length, np.random.default_rng(0))
        return len(p) + len(a)


# ------------------------------------------------------------------------------------------
# count
# ------------------------------------------------------------------------------------------
class CountTask(NextTokenTask):
    """``BOS a b`` -> ``a a+1 .. b EOS``; length = b - a + 1 (Zhou et al. 2023)."""

    def _generate(self, n, rng):
        a = int(rng.integers(0, N_NUMBERS - n + 1))
        return self._ids([BOS, a, a + n - 1])

    def _solve(self, prompt):
        vals = self._values(prompt)
        if len(vals) != 3 or vals[1] < 0 or vals[2] < 0 or vals[2] < vals[1]:
            raise TaskInputError("count: a prompt is BOS a b with a <= b")
        return self._ids(list(range(vals[1], vals[2] + 1)) + [EOS])

    def program_vocab(self, max_len):
        return set(range(N_NUMBERS)) | {BOS, EOS}

    def sequence_length(self, length):
        return length + 4


# ------------------------------------------------------------------------------------------
# mode, mode_scratchpad
# ------------------------------------------------------------------------------------------
def _unique_mode_sample(n, k, rng):
    """n symbols from range(k) whose mode is unique (rejection, then a direct construction)."""
    for _ in range(50):
        xs = rng.integers(0, k, size=n).tolist()
        counts = [xs.count(s) for s in range(k)]
        if counts.count(max(counts)) == 1:
            return xs
    # construct: the mode gets ceil((n+1)/2) copies, the rest uniform over the others
    m = int(rng.integers(0, k))
    c = n // 2 + 1
    others = [s for s in range(k) if s != m]
    xs = [m] * c + rng.choice(others, size=n - c).tolist()
    rng.shuffle(xs)
    return [int(x) for x in xs]


def _mode(xs):
    counts = {}
    for x in xs:
        counts[x] = counts.get(x, 0) + 1
    best = max(counts.values())
    winners = [s for s, c in counts.items() if c == best]
    if len(winners) != 1:
        raise TaskInputError("mode: the prompt's mode is not unique")
    return winners[0]


class ModeTask(NextTokenTask):
    """n symbols from an alphabet of 5 with a unique mode -> the mode."""

    def _generate(self, n, rng):
        return self._ids([BOS] + _unique_mode_sample(n, 5, rng) + [SEP])

    def _solve(self, prompt):
        xs = self._content(prompt)
        if not xs or any(x > 4 for x in xs):
            raise TaskInputError("mode: symbols are 0..4")
        return self._ids([_mode(xs), EOS])

    def program_vocab(self, max_len):
        return set(range(5)) | {BOS, SEP, EOS}

    def sequence_length(self, length):
        return length + 4


class ModeScratchpadTask(NextTokenTask):
    """As mode; the answer first lists the count of each symbol 0..4, then the mode."""

    def _generate(self, n, rng):
        return self._ids([BOS] + _unique_mode_sample(n, 5, rng) + [SEP])

    def _solve(self, prompt):
        xs = self._content(prompt)
        if not xs or any(x > 4 for x in xs):
            raise TaskInputError("mode_scratchpad: symbols are 0..4")
        return self._ids([xs.count(s) for s in range(5)] + [_mode(xs), EOS])

    def program_vocab(self, max_len):
        return set(range(max(5, max_len + 1))) | {BOS, SEP, EOS}

    def sequence_length(self, length):
        return length + 9


# ------------------------------------------------------------------------------------------
# copy / sort / reverse
# ------------------------------------------------------------------------------------------
class CopyUniqueTask(NextTokenTask):
    """n distinct tokens -> the same n tokens."""

    def _generate(self, n, rng):
        return self._ids([BOS] + rng.choice(N_NUMBERS, size=n, replace=False).tolist() + [SEP])

    def _solve(self, prompt):
        xs = self._content(prompt)
        if len(set(xs)) != len(xs):
            raise TaskInputError(f"{self.name}: tokens must be distinct")
        return self._ids(xs + [EOS])

    def program_vocab(self, max_len):
        return set(range(N_NUMBERS)) | {BOS, SEP, EOS}

    def sequence_length(self, length):
        return 2 * length + 3


class SortUniqueTask(CopyUniqueTask):
    """n distinct tokens from an ordered alphabet -> sorted ascending."""

    def _solve(self, prompt):
        xs = self._content(prompt)
        if len(set(xs)) != len(xs):
            raise TaskInputError("sort_unique: tokens must be distinct")
        return self._ids(sorted(xs) + [EOS])


class CopyTask(NextTokenTask):
    """n tokens over a small alphabet (repeats allowed) -> the same n (``reverse=True``: reversed)."""

    def __init__(self, *args, alphabet: int = 2, reverse: bool = False, **kw):
        super().__init__(*args, **kw)
        self.alphabet = alphabet
        self.reverse = reverse

    def _generate(self, n, rng):
        return self._ids([BOS] + rng.integers(0, self.alphabet, size=n).tolist() + [SEP])

    def _solve(self, prompt):
        xs = self._content(prompt)
        if any(x >= self.alphabet for x in xs):
            raise TaskInputError(f"{self.name}: symbols are 0..{self.alphabet - 1}")
        return self._ids((xs[::-1] if self.reverse else xs) + [EOS])

    def program_vocab(self, max_len):
        return set(range(self.alphabet)) | {BOS, SEP, EOS}

    def sequence_length(self, length):
        return 2 * length + 3


# ------------------------------------------------------------------------------------------
# bits: parity, boolean_and, sum_mod10
# ------------------------------------------------------------------------------------------
class DigitsTask(NextTokenTask):
    """n digits (base ``base``) -> ``fn(digits)`` (a list of output values)."""

    def __init__(self, *args, base: int = 2, fn=None, answer_len=None, **kw):
        super().__init__(*args, **kw)
        self.base = base
        self.fn = fn
        self.answer_len = answer_len

    def _generate(self, n, rng):
        return self._ids([BOS] + rng.integers(0, self.base, size=n).tolist() + [SEP])

    def _solve(self, prompt):
        xs = self._content(prompt)
        if not xs or any(x >= self.base for x in xs):
            raise TaskInputError(f"{self.name}: a prompt holds 1 or more digits 0..{self.base - 1}")
        return self._ids(list(self.fn(xs)) + [EOS])

    def program_vocab(self, max_len):
        return set(range(self.base)) | {BOS, SEP, EOS}

    def sequence_length(self, length):
        return length + 3 + self.answer_len(length)


def _parity(xs):
    p = 0
    for x in xs:
        p ^= x
    return [p]


def _running_and(xs):
    out, acc = [], 1
    for x in xs:
        acc = acc & x
        out.append(acc)
    return out


def _sum_mod10(xs):
    return [sum(xs) % 10]


# ------------------------------------------------------------------------------------------
# parity with scratchpad and index hints
# ------------------------------------------------------------------------------------------
def _sorted_hints(k, n_hints, rng):
    """k distinct hint numbers in increasing order, a random subset of range(n_hints)."""
    return sorted(int(h) for h in rng.choice(n_hints, size=k, replace=False))


class ParityScratchpadTask(NextTokenTask):
    """``BOS h_1 b_1 .. h_n b_n SEP`` -> for each 1 bit ``h_i p_i`` (p_i = parity of b_1..b_i),
    then the parity, then EOS. Hints are a random increasing subset of ``N_PARITY_HINTS``
    hint tokens (values 2 ..), so a model sees every hint during training."""

    HINT_BASE = 2

    def _generate(self, n, rng):
        hints = _sorted_hints(n, N_PARITY_HINTS, rng)
        bits = rng.integers(0, 2, size=n).tolist()
        body = []
        for h, b in zip(hints, bits):
            body += [self.HINT_BASE + h, b]
        return self._ids([BOS] + body + [SEP])

    def _solve(self, prompt):
        xs = self._content(prompt)
        if len(xs) % 2 or not xs:
            raise TaskInputError("parity_scratchpad: a prompt is BOS (hint bit)* SEP")
        hints, bits = xs[0::2], xs[1::2]
        if any(h < self.HINT_BASE for h in hints) or any(b > 1 for b in bits) or \
                hints != sorted(set(hints)):
            raise TaskInputError("parity_scratchpad: hints must increase, bits are 0/1")
        out, p = [], 0
        for h, b in zip(hints, bits):
            if b:
                p ^= 1
                out += [h, p]
        return self._ids(out + [p, EOS])

    def program_vocab(self, max_len):
        return {0, 1, BOS, SEP, EOS} | {self.HINT_BASE + h for h in range(N_PARITY_HINTS)}

    def sequence_length(self, length):
        return 2 * length + 2 + 2 * length + 2


# ------------------------------------------------------------------------------------------
# addition
# ------------------------------------------------------------------------------------------
def _operands(n, rng):
    """Two operands; one has exactly n digits, the other 1..n digits (uniform)."""
    def number(d):
        if d == 1:
            return int(rng.integers(0, 10))
        first = str(int(rng.integers(1, 10)))
        rest = "".join(str(int(x)) for x in rng.integers(0, 10, size=d - 1))
        return int(first + rest)
    d_other = int(rng.integers(1, n + 1))
    a, b = number(n), number(d_other)
    if rng.integers(0, 2):
        a, b = b, a
    return a, b


def _digits(x, width=None):
    s = str(x) if width is None else str(x).zfill(width)
    return [int(c) for c in s]


class AdditionTask(NextTokenTask):
    """``BOS a + b SEP`` (most significant digit first, no hints) -> digits of a + b, EOS.
    Length = the number of digits of the longer operand."""

    def _generate(self, n, rng):
        a, b = _operands(n, rng)
        return self._ids([BOS] + _digits(a) + [PLUS] + _digits(b) + [SEP])

    def _parse(self, prompt):
        vals = self._values(prompt)
        if len(vals) < 5 or vals[-1] != SEP or vals.count(PLUS) != 1:
            raise TaskInputError("addition: a prompt is BOS digits + digits SEP")
        k = vals.index(PLUS)
        a, b = vals[1:k], vals[k + 1:-1]
        if not a or not b or any(not 0 <= d <= 9 for d in a + b):
            raise TaskInputError("addition: operands are non-empty digit strings")
        return a, b

    def _solve(self, prompt):
        a, b = self._parse(prompt)
        s = int("".join(map(str, a))) + int("".join(map(str, b)))
        return self._ids(_digits(s) + [EOS])

    def program_vocab(self, max_len):
        return set(range(10)) | {BOS, SEP, EOS, PLUS}

    def sequence_length(self, length):
        return 2 * length + 4 + length + 2


class AdditionHintsTask(AdditionTask):
    """Addition with index hints (Zhou et al. 2023 §5): both operands zero-padded to n + 1
    digits, every digit preceded by its index-hint token (the same increasing hint sequence for
    both operands, most significant digit first); the answer carries the hints too and is
    least significant digit first (``reverse=True``) or most significant first."""

    HINT_BASE = 10

    def __init__(self, *args, reverse: bool = True, **kw):
        super().__init__(*args, **kw)
        self.reverse = reverse

    def _generate(self, n, rng):
        a, b = _operands(n, rng)
        hints = [self.HINT_BASE + h for h in _sorted_hints(n + 1, N_ADD_HINTS, rng)]
        da, db = _digits(a, n + 1), _digits(b, n + 1)
        body = []
        for h, d in zip(hints, da):
            body += [h, d]
        body.append(PLUS)
        for h, d in zip(hints, db):
            body += [h, d]
        return self._ids([BOS] + body + [SEP])

    def _solve(self, prompt):
        vals = self._values(prompt)
        if len(vals) < 7 or vals[-1] != SEP or vals.count(PLUS) != 1:
            raise TaskInputError(f"{self.name}: a prompt is BOS (hint digit)* + (hint digit)* SEP")
        k = vals.index(PLUS)
        left, right = vals[1:k], vals[k + 1:-1]
        if len(left) != len(right) or len(left) % 2 or not left:
            raise TaskInputError(f"{self.name}: operands must have equal padded lengths")
        hints = left[0::2]
        if right[0::2] != hints or any(h < self.HINT_BASE for h in hints) or \
                any(not 0 <= d <= 9 for d in left[1::2] + right[1::2]):
            raise TaskInputError(f"{self.name}: both operands carry the same hints")
        width = len(hints)
        s = int("".join(map(str, left[1::2]))) + int("".join(map(str, right[1::2])))
        ds = _digits(s, width)
        if len(ds) != width:
            raise TaskInputError(f"{self.name}: operands must be zero-padded by one digit")
        pairs = list(zip(hints, ds))
        if self.reverse:
            pairs = pairs[::-1]
        out = []
        for h, d in pairs:
            out += [h, d]
        return self._ids(out + [EOS])

    def program_vocab(self, max_len):
        return set(range(10)) | {BOS, SEP, EOS, PLUS} | \
            {self.HINT_BASE + h for h in range(N_ADD_HINTS)}

    def sequence_length(self, length):
        return 4 * (length + 1) + 3 + 2 * (length + 1) + 1


# ------------------------------------------------------------------------------------------
# the catalogue of part A
# ------------------------------------------------------------------------------------------
def make_generalization_tasks() -> dict[str, Task]:
    """Build the 14 part-A tasks (tasks.md, table A)."""
    std = ("BOS", "SEP", "EOS", "PAD")
    T = {}

    def add(t):
        T[t.name] = t

    add(CountTask(
        name="count", description="BOS a b -> a, a+1, ..., b EOS (no SEP)", source=ZHOU,
        vocab=numeric_vocab(N_NUMBERS, specials=("BOS", "EOS", "PAD")),
        max_length=N_NUMBERS, length_definition="b - a + 1 (numbers 0..119)",
        reference_file="count.rasp", reference_name="count",
        paper=_paper("short RASP-L program (3 attention ops); trained on lengths >= 60, "
                     "near-perfect EM up to 150", "—"),
        default_train_max_len=20, regime=COUNT_REGIME))
    add(ModeTask(
        name="mode", description="n symbols from an alphabet of 5 (unique mode) SEP -> the mode",
        source=ZHOU, vocab=numeric_vocab(5, specials=std),
        reference_file="mode.rasp", reference_name="mode",
        paper=_paper("short program; generalizes", "—")))
    add(CopyUniqueTask(
        name="copy_unique", description="n distinct tokens SEP -> the same n tokens EOS",
        source=ZHOU + "; " + KAZ, vocab=numeric_vocab(N_NUMBERS, specials=std),
        max_length=N_NUMBERS, length_definition="n tokens (distinct, alphabet of 120)",
        reference_file="copy_unique.rasp", reference_name="copy_unique",
        paper=_paper("short program (an induction head); generalizes once max train length "
                     "> ~30", "copy task: NoPE best"), regime=COPY_UNIQUE_REGIME))
    add(CopyTask(
        name="copy_repeat", description="n tokens over a 2-symbol alphabet SEP -> the same n EOS",
        source=ZHOU, vocab=numeric_vocab(2, names=["a", "b"], specials=std), alphabet=2,
        reference_file="copy_repeat.rasp", reference_name="copy_repeat", valid_raspl=False,
        paper=_paper("no RASP-L program; fails", "—")))
    add(SortUniqueTask(
        name="sort_unique", description="n distinct tokens SEP -> sorted ascending EOS",
        source=ZHOU + "; " + KAZ, vocab=numeric_vocab(N_NUMBERS, specials=std),
        max_length=N_NUMBERS, length_definition="n tokens (distinct, alphabet of 120)",
        reference_file="sort_unique.rasp", reference_name="sort_unique",
        paper=_paper("short program (one min-aggregation: the smallest token greater than the "
                     "current one); generalizes", "sort: NoPE/T5 best")))
    add(AdditionTask(
        name="addition", description="BOS a + b SEP (MSB first, no hints) -> digits of a + b EOS",
        source=ZHOU + "; " + KAZ,
        vocab=numeric_vocab(10, specials=("BOS", "SEP", "EOS", "PAD", "+")),
        length_definition="digits of the longer operand",
        reference_file="addition.rasp", reference_name="addition", valid_raspl=False,
        causal=False,
        paper=_paper("no RASP-L program (needs index arithmetic); fails", "NoPE best, all weak"),
        default_train_max_len=8))
    add(AdditionHintsTask(
        name="addition_reverse_hints",
        description="operands padded to n+1 digits, each digit after its index hint -> "
                    "sum with hints, least significant digit first",
        source=ZHOU, vocab=numeric_vocab(10, hints=N_ADD_HINTS,
                                         specials=("BOS", "SEP", "EOS", "PAD", "+")),
        max_length=N_ADD_HINTS - 1, length_definition="digits of the longer operand",
        reference_file="addition_reverse_hints.rasp", reference_name="addition", reverse=True,
        paper=_paper("short program; strong generalization", "—"), default_train_max_len=8))
    add(AdditionHintsTask(
        name="addition_forward_hints",
        description="as addition_reverse_hints, answer most significant digit first",
        source=ZHOU, vocab=numeric_vocab(10, hints=N_ADD_HINTS,
                                         specials=("BOS", "SEP", "EOS", "PAD", "+")),
        max_length=N_ADD_HINTS - 1, length_definition="digits of the longer operand",
        reference_file="addition_forward_hints.rasp", reference_name="addition", reverse=False,
        paper=_paper("longer program (carry chains); generalizes less", "—"),
        default_train_max_len=8))
    add(DigitsTask(
        name="parity", description="n bits SEP -> parity bit EOS", source=ZHOU + "; " + KAZ,
        vocab=numeric_vocab(2, specials=std), base=2, fn=_parity, answer_len=lambda n: 1,
        reference_file="parity.rasp", reference_name="parity", valid_raspl=False,
        paper=_paper("no program; does not even fit the training set", "—"),
        default_train_max_len=8))
    add(ParityScratchpadTask(
        name="parity_scratchpad",
        description="n bits with index hints SEP -> (hint, running parity) after each 1 bit, "
                    "then the parity EOS",
        source=ZHOU + "; " + KAZ,
        vocab=numeric_vocab(2, hints=N_PARITY_HINTS, specials=std),
        max_length=N_PARITY_HINTS, length_definition="n bits",
        reference_file="parity_scratchpad.rasp", reference_name="parity_scratchpad",
        paper=_paper("program exists with the scratchpad; improves", "scratchpad helps little"),
        default_train_max_len=8))
    add(ModeScratchpadTask(
        name="mode_scratchpad",
        description="as mode; the answer first lists the count of each symbol 0..4, then the mode",
        source=ZHOU, vocab=numeric_vocab(N_NUMBERS + 1, specials=std),
        max_length=N_NUMBERS, length_definition="n symbols (alphabet of 5)",
        reference_file="mode_scratchpad.rasp", reference_name="mode_scratchpad",
        paper=_paper("longer program; generalization drops", "—")))
    add(DigitsTask(
        name="boolean_and", description="n bits SEP -> running AND of the bits EOS", source=ZHOU,
        vocab=numeric_vocab(2, specials=std), base=2, fn=_running_and, answer_len=lambda n: n,
        reference_file="boolean_and.rasp", reference_name="boolean_and",
        paper=_paper("one-op program; learns the full AND", "—")))
    add(CopyTask(
        name="reverse", description="n tokens (alphabet of 10) SEP -> reversed EOS",
        source=ZHOU + "; " + KAZ, vocab=numeric_vocab(10, specials=std), alphabet=10,
        reverse=True, reference_file="reverse.rasp", reference_name="reverse",
        valid_raspl=False,
        paper=_paper("natural program needs `length - indices` (index arithmetic)",
                     "NoPE best")))
    add(DigitsTask(
        name="sum_mod10", description="n digits SEP -> (sum of digits) mod 10 EOS",
        source=KAZ, vocab=numeric_vocab(10, specials=std), base=10, fn=_sum_mod10,
        answer_len=lambda n: 1, reference_file="sum_mod10.rasp", reference_name="sum_mod10",
        valid_raspl=False, paper=_paper("(to be measured)", "NoPE/T5 best"),
        default_train_max_len=8))
    return T
