"""Part B: the sequence programs (the RASP classics; per-position outputs).

Sources: Weiss et al. 2021 ("Thinking Like Transformers", the original RASP's
``paper_examples.rasp`` and ``rasplib.rasp``) and the Tracr library of Lindner et al. 2023
(``tracr/compiler/lib.py``). Each task has a program in the dialect (``tasks/programs/``), a
plain-Python ground truth written here independently, and a seeded generator.

A part-B example: ``prompt = BOS x_1 .. x_n`` (token ids) and ``answer`` = the ``n`` expected
output *values* (one per input position: ints, floats, bools or strings). The program sees the
input without BOS (:meth:`Task.program_tokens`), as strings (or ints where noted).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable

from .base import Task, TaskInputError, Vocab
import rasp

WEISS = "Weiss et al. 2021 (original RASP, paper_examples.rasp / rasplib.rasp)"
TRACR = "Lindner et al. 2023 (Tracr, tracr/compiler/lib.py)"

#: filler of most_freq (the original paper's `sort_by_most_freq` uses this character)
FILLER = "§"
#: filler of shift_by for the first k positions
SHIFT_FILLER = "_"


class SequenceTask(Task):
    """A part-B task: ``fn(list of input values) -> list of output values`` per position."""

    def __init__(self, *args, alphabet: str | list = "abcde", fn: Callable = None,
                 generator: Callable | None = None, int_tokens: bool = False,
                 params: dict | None = None, reference_call: str | None = None, **kw):
        kw.setdefault("kind", "sequence")
        kw.setdefault("causal", False)
        super().__init__(*args, **kw)
        self.alphabet = list(alphabet)
        self.fn = fn
        self.generator = generator
        self.int_tokens = int_tokens
        self.params = dict(params or {})
        self.reference_call = reference_call

    def load_reference(self):
        """The reference s-op; for a parametrised program (``shift_by(3)``) the file's function
        is called with the task's parameter (validated int / alphabet token)."""
        if self.reference_call is None:
            return super().load_reference()
        text = self.reference_source() + f"\nreference_instance = {self.reference_call};\n"
        env = rasp.run_source(text, filename=str(self.reference_path), causal=self.causal)
        return env["reference_instance"]

    def _generate(self, n, rng):
        if self.generator is not None:
            xs = self.generator(n, rng, self.alphabet)
        else:
            xs = [self.alphabet[int(i)] for i in rng.integers(0, len(self.alphabet), size=n)]
        return [self.vocab.bos] + [self.vocab.id(str(x)) for x in xs]

    def _solve(self, prompt):
        xs = self.program_tokens(prompt)
        if not xs:
            raise TaskInputError(f"{self.name}: empty input")
        if any(str(x) not in self.alphabet and x not in self.alphabet for x in xs):
            raise TaskInputError(f"{self.name}: tokens must come from {self.alphabet}")
        return list(self.fn(xs))

    def program_vocab(self, max_len):
        return set(self.vocab.values[: len(self.alphabet)])

    def sequence_length(self, length):
        return length


def _seq_vocab(alphabet, int_tokens=False) -> Vocab:
    names = [str(a) for a in alphabet] + ["BOS", "EOS", "PAD"]
    values: list[Any] = [int(a) if int_tokens else str(a) for a in alphabet] + \
        ["BOS", "EOS", "PAD"]
    return Vocab(names, values)


# ------------------------------------------------------------------------------------------
# ground truths (plain Python)
# ------------------------------------------------------------------------------------------
def gt_length(xs):
    return [len(xs)] * len(xs)


def gt_reverse(xs):
    return list(reversed(xs))


def gt_hist(xs):
    return [xs.count(x) for x in xs]


def gt_double_hist(xs):
    counts = {x: xs.count(x) for x in xs}
    return [sum(1 for y in counts if counts[y] == counts[x]) for x in xs]


def gt_sort(xs):
    return sorted(xs)  # Python's sort is stable; repeated keys allowed


def gt_sort_freq(xs):
    counts = {x: xs.count(x) for x in xs}
    order = sorted(range(len(xs)), key=lambda i: (-counts[xs[i]], i))
    return [xs[i] for i in order]


def gt_most_freq(xs):
    counts = {}
    firsts = []
    for x in xs:
        if x not in counts:
            firsts.append(x)
        counts[x] = counts.get(x, 0) + 1
    ranked = sorted(firsts, key=lambda x: -counts[x])  # stable: ties by first appearance
    return ranked + [FILLER] * (len(xs) - len(ranked))


def gt_frac_prevs(xs, target="a"):
    out, hits = [], 0
    for i, x in enumerate(xs):
        hits += x == target
        out.append(Fraction(hits, i + 1))
    return out


def gt_pair_balance(xs, open_="(", close=")"):
    out, bal = [], 0
    for i, x in enumerate(xs):
        bal += (x == open_) - (x == close)
        out.append(Fraction(bal, i + 1))
    return out


def _dyck(xs, pairs):
    openers = {p[0]: p[1] for p in pairs}
    closers = {p[1] for p in pairs}
    stack, failed, out = [], False, []
    for x in xs:
        if not failed:
            if x in openers:
                stack.append(x)
            elif x in closers:
                if not stack or openers[stack[-1]] != x:
                    failed = True
                else:
                    stack.pop()
        out.append("F" if failed else ("T" if not stack else "P"))
    return out


def gt_dyck1(xs):
    return _dyck(xs, ["()"])


def gt_dyck2(xs):
    return _dyck(xs, ["()", "{}"])


def gt_shuffle_dyck2(xs):
    ok = True
    for o, c in ("()", "{}"):
        bal = 0
        for x in xs:
            bal += (x == o) - (x == c)
            if bal < 0:
                ok = False
        if bal != 0:
            ok = False
    return [ok] * len(xs)


def gt_shift_by(xs, k=1):
    return [SHIFT_FILLER] * min(k, len(xs)) + xs[: max(0, len(xs) - k)]


def gt_detect_pattern(xs, pattern="abc"):
    m = len(pattern)
    return [i >= m - 1 and "".join(xs[i - m + 1: i + 1]) == pattern for i in range(len(xs))]


def gt_count_less_freq(xs, n=2):
    # Tracr's make_count_less_freq: positions whose token occurs at most n times
    return [sum(1 for y in xs if xs.count(y) <= n)] * len(xs)


def gt_count_token(xs, t="a"):
    return [xs.count(t)] * len(xs)


def gt_nary_sequencemap(xs):
    # f(token, index, length) = token * index + length
    n = len(xs)
    return [x * i + n for i, x in enumerate(xs)]


# ------------------------------------------------------------------------------------------
# generators that make interesting inputs
# ------------------------------------------------------------------------------------------
def _gen_distinct(n, rng, alphabet):
    return [alphabet[int(i)] for i in rng.choice(len(alphabet), size=n, replace=False)]


def _gen_brackets(pairs):
    """Half the time a balanced (shuffled per type or nested) string, else random brackets."""
    symbols = "".join(pairs)

    def gen(n, rng, alphabet):
        if n % 2 == 0 and rng.random() < 0.5:
            out, stack = [], []
            for i in range(n):
                remaining = n - i
                if stack and (remaining <= len(stack) or rng.random() < 0.5):
                    out.append(stack.pop())
                else:
                    p = pairs[int(rng.integers(0, len(pairs)))]
                    out.append(p[0])
                    stack.append(p[1])
            return out
        return [symbols[int(i)] for i in rng.integers(0, len(symbols), size=n)]
    return gen


def _gen_pattern(pattern):
    def gen(n, rng, alphabet):
        xs = [alphabet[int(i)] for i in rng.integers(0, len(alphabet), size=n)]
        # plant the pattern once where it fits, half the time
        if n >= len(pattern) and rng.random() < 0.5:
            at = int(rng.integers(0, n - len(pattern) + 1))
            xs[at: at + len(pattern)] = list(pattern)
        return xs
    return gen


# ------------------------------------------------------------------------------------------
# catalogue of part B
# ------------------------------------------------------------------------------------------
def make_shift_by(k: int = 1) -> SequenceTask:
    """``shift_by(k)``: the input shifted right by k positions, ``"_"``-padded (causal)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"shift_by(k) needs an integer k >= 1, got {k!r}")
    alpha = "abcde"
    return SequenceTask(
        name="shift_by" if k == 1 else f"shift_by({k})",
        description=f"x -> x shifted right by {k} ('{SHIFT_FILLER}' in the first {k})",
        source=TRACR, vocab=_seq_vocab(alpha), alphabet=alpha,
        fn=lambda xs: gt_shift_by(xs, k), causal=True,
        reference_file="shift_by.rasp", reference_name="shift_by_k", params={"k": k},
        reference_call=None if k == 1 else f"shift_by({k}, tokens)")


def make_count_less_freq(n: int = 2) -> SequenceTask:
    """``count_less_freq(n)``: number of positions whose token occurs at most n times."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"count_less_freq(n) needs an integer n >= 0, got {n!r}")
    alpha = "abcd"
    return SequenceTask(
        name="count_less_freq" if n == 2 else f"count_less_freq({n})",
        description=f"x -> at every position, how many positions hold a token that occurs "
                    f"at most {n} times (Tracr's <= n)",
        source=TRACR, vocab=_seq_vocab(alpha), alphabet=alpha,
        fn=lambda xs: gt_count_less_freq(xs, n),
        reference_file="count_less_freq.rasp", reference_name="count_less_freq_n",
        params={"n": n}, reference_call=None if n == 2 else f"count_less_freq({n})")


def make_count_token(t: str = "a") -> SequenceTask:
    """``count_token(t)``: the number of occurrences of token t, at every position."""
    alpha = "abcd"
    if not isinstance(t, str) or t not in alpha:
        raise ValueError(f"count_token(t) needs a token of {list(alpha)}, got {t!r}")
    return SequenceTask(
        name="count_token" if t == "a" else f"count_token({t})",
        description=f"x -> the number of '{t}' tokens, at every position",
        source=TRACR, vocab=_seq_vocab(alpha), alphabet=alpha,
        fn=lambda xs: gt_count_token(xs, t),
        reference_file="count_token.rasp", reference_name="count_token_t", params={"t": t},
        reference_call=None if t == "a" else f'count_token("{t}")')


def make_sequence_tasks() -> dict[str, Task]:
    """Build the part-B tasks (tasks.md, B). ``reverse`` and ``sort_unique`` are registered
    as ``reverse_seq`` and ``sort_unique_seq`` (their part-A namesakes are next-token tasks)."""
    T: dict[str, Task] = {}

    def add(name, description, source, fn, alphabet="abcde", **kw):
        int_tokens = kw.pop("int_tokens", False)
        T[name] = SequenceTask(name=name, description=description, source=source,
                               vocab=_seq_vocab(alphabet, int_tokens), alphabet=alphabet,
                               fn=fn, int_tokens=int_tokens,
                               reference_file=kw.pop("reference_file", f"{name}.rasp"),
                               reference_name=kw.pop("reference_name", name), **kw)

    add("length", "x -> len(x) at every position", WEISS + "; " + TRACR, gt_length,
        reference_name="length_program")
    add("reverse_seq", "x -> x reversed (length - indices - 1)", WEISS + "; " + TRACR,
        gt_reverse, reference_name="reverse")
    add("hist", "x -> the number of occurrences of each token", WEISS + "; " + TRACR, gt_hist)
    add("double_hist", "x -> for each token, how many distinct tokens share its count",
        WEISS, gt_double_hist)
    add("sort", "x -> sorted (stable, repeated keys allowed)", WEISS + "; " + TRACR, gt_sort)
    add("sort_unique_seq", "x (distinct tokens) -> sorted", TRACR, gt_sort,
        alphabet="abcdefghijklmnopqrstuvwxyz", generator=_gen_distinct,
        reference_name="sort_unique", max_length=26)
    add("sort_freq", "x -> tokens by descending frequency (stable)", TRACR, gt_sort_freq)
    add("most_freq", f"x -> the distinct tokens by descending frequency, then '{FILLER}'",
        WEISS, gt_most_freq)
    add("frac_prevs", "x -> fraction of positions <= i holding 'a' (causal)",
        WEISS + "; " + TRACR, gt_frac_prevs, alphabet="abcd", causal=True)
    add("pair_balance", "x -> fraction of '(' minus fraction of ')' among positions <= i",
        WEISS + "; " + TRACR, gt_pair_balance, alphabet="()a")
    add("dyck1", "x -> per prefix: T balanced, P open, F failed ('(' ')')", WEISS, gt_dyck1,
        alphabet="()", generator=_gen_brackets(["()"]))
    add("dyck2", "x -> per prefix: T balanced, P open, F failed ('()' and '{}'; 4 layers)",
        WEISS, gt_dyck2, alphabet="(){}", generator=_gen_brackets(["()", "{}"]))
    add("shuffle_dyck2", "x -> True everywhere iff each bracket type is balanced on its own",
        WEISS + "; " + TRACR, gt_shuffle_dyck2, alphabet="(){}",
        generator=_gen_brackets(["()", "{}"]))
    T["shift_by"] = make_shift_by(1)
    add("detect_pattern", "x -> True at the last position of each occurrence of 'abc' (causal)",
        TRACR, lambda xs: gt_detect_pattern(xs, "abc"), alphabet="abc",
        generator=_gen_pattern("abc"), causal=True)
    T["count_less_freq"] = make_count_less_freq(2)
    T["count_token"] = make_count_token("a")
    add("nary_sequencemap", "x (digits) -> x * indices + length (a 3-ary sequence map)",
        TRACR, gt_nary_sequencemap, alphabet=[str(d) for d in range(10)], int_tokens=True)
    return T


PARAMETRIC = {"shift_by": (make_shift_by, int), "count_less_freq": (make_count_less_freq, int),
              "count_token": (make_count_token, str)}
