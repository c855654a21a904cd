"""Tasks of Huang et al. 2025 in the catalogue's next-token format.

Source: Huang, Yang, Hahn, Hahn et al., "A Formal Framework for Understanding Length
Generalization in Transformers", ICLR 2025 (arXiv 2410.02140), and their released generators
(github.com/lacoco-lab/length_generalization: ``algorithmic/language_modeling_train.py`` for the
algorithmic tasks, ``formal_lang_suite/generators`` and ``configs/dataset`` for the languages).

Algorithmic tasks follow their generators (``BOS x SEP answer EOS``; the loss and exact match
are on the answer). Each string of a given length n is drawn as their
``algorithmic/language_modeling_train.py`` draws it (file:lines of commit b39b743):

* ``majority_binary``: n bits, answer the majority bit (their ``bin_majority``,
  ``BinaryMajorityDataset`` lines 122-131): the *count* of zeros is uniform over ``0..n``
  without the tie ``n/2`` (a tie is redrawn), then the bits are shuffled; not iid bits, which
  put most strings near a tie;
* ``majority``: n symbols of ``a..z`` with a unique most frequent one (``majority``, lines
  160-168: iid symbols, redrawn on a tie; ours the same);
* ``majority_interleave``: three interleaved bit strings of n/3 bits each (period 3), answer
  the three majority bits (``bin_majority_interleave``, lines 198-221): per string the count of
  zeros uniform without the tie, then shuffled; the length as theirs
  (:meth:`MajorityInterleaveTask.drawn_lengths`): a total ``t`` uniform in ``max(3, lo)..hi``
  rounded to ``3 round(t/3)`` and moved back into the range (lines 193, 200-205), so on 3..50
  the length 3 weighs 2/48 and 48 weighs 4/48. One difference, declared: the numbers they report
  (``lm-out-new-multi-run/bin_majority_interleave-average*.txt``, line 3) are headed ``task:
  bin_majority_interleave_sep``, a ``_sep`` variant that is not in their released code (their
  ``--task`` choices, line 501, and ``run_multiple_seeds.py``'s branches, line 144, know only
  ``bin_majority_interleave``): what it separates is not knowable, so we run the released
  generator and compare with numbers of a variant we cannot reproduce;
* ``sort_150`` / ``copy_unique_150``: n distinct tokens of 150 (``sort`` / ``unique_copy``);
* ``copy_ab``: n tokens over ``{a, b}`` copied (``repeat_copy``);
* ``parity_bits``: n bits, answer ``e`` or ``o`` (``parity``, ``ParityDataset`` lines 350-356):
  the count of ones uniform over ``0..n``, then shuffled. Their ``ParityDataset`` has no
  ``max(1, ...)`` (lines 346, 352): it trains and tests length 0 (``BOS SEP e EOS``, 1/51 of
  their training strings and of their 0-50 bin); ours accepts length 0 too
  (:meth:`ParityBitsTask.length_ok`), drawn where a run asks for it (``rasp replicate huang``:
  ``train_min_len`` 0 and the bin 0-50);
* ``addition_binary``: ``BOS a + b = c EOS``, most significant bit first, no hints, operands
  without leading zeros (``addition``); length = ``len(a) + len(b) + 2`` as in their generator.

Formal languages (Bhattamishra et al. 2020 suite as Huang et al. use it): every language is a
DFA (:data:`LANGUAGES`, the one owner; Tomita 3 copied from their ``tomita_generator.py``), in
two formats:

* ``<language>``: a *membership* task, ``BOS w SEP -> yes|no EOS`` (the spec's "a language
  task is one Boolean at the last position"), with strings drawn uniformly among the members
  (probability 1/2, when a member of that length exists) or among the non-members of the
  length. This is *not* Huang et al.'s format: outcomes need not match theirs.
* ``<language>_nextchar``: Huang et al.'s format (:class:`NextSetTask`, kind ``"next_set"``):
  positive strings, and at every position the set of allowed next characters *as their
  generator writes it* (:data:`NEXT_SETS`, with the file and lines followed), one label token
  per position, cross-entropy and exact match over all positions. Compare these with their
  numbers.

Token values: content symbols 0..k-1 (id = value); the labels ``no``/``yes`` and ``e``/``o``
follow the content symbols; BOS = -1, SEP = -2 (also ``=`` of addition), EOS = -3, PAD = -4,
``+`` = -5. ``sort_150`` and ``copy_unique_150`` have values up to 149: outside RASP-L's int8
range (rule 2), which the checkers report.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass

import numpy as np

from .base import BOS, EOS, PAD, PLUS, SEP, Regime, Task, TaskInputError, Vocab

HUANG = "Huang et al. 2025 (ICLR, arXiv 2410.02140)"
#: Huang et al.'s algorithmic protocol tests lengths 101-150 (train 0-50); the longest length
#: their tasks (and languages given as regular expressions, :mod:`tasks.custom`) are tested at
TEST_MAX_LENGTH = 150
_CODE = "github.com/lacoco-lab/length_generalization"


def _vocab(content: list[str], extra: list[str] = (), specials=("BOS", "SEP", "EOS", "PAD"),
           special_names: dict | None = None) -> Vocab:
    names = list(content) + list(extra)
    values = list(range(len(names)))
    table = {"BOS": BOS, "SEP": SEP, "EOS": EOS, "PAD": PAD, "+": PLUS}
    for s in specials:
        names.append((special_names or {}).get(s, s))
        values.append(table[s])
    return Vocab(names, values)


#: Mean exact match of the selected configurations in Huang et al.'s released runs
#: (``algorithmic/lm-out-new-multi-run/<task>-average.txt`` = learned APE with random offsets,
#: ``...-average-nope.txt`` = NoPE; "mean results" line): (ID 0-50, 51-100, 101-150).
RELEASED = {
    "majority_binary": ("bin_majority", (1.0, 0.9999, 0.9996), (1.0, 1.0, 1.0)),
    "majority": ("majority", (1.0, 0.9962, 0.9781), (1.0, 0.9986, 0.9846)),
    "majority_interleave": ("bin_majority_interleave", (1.0, 0.9675, 0.8470),
                            (0.9616, 0.6881, 0.3947)),
    "copy_unique_150": ("unique_copy", (1.0, 0.9986, 0.9874), (1.0, 0.1800, 0.0)),
    "copy_ab": ("repeat_copy", (1.0, 0.2555, 0.0), (1.0, 0.2801, 0.0)),
    "sort_150": ("sort", (1.0, 0.9996, 0.9937), (1.0, 0.9981, 0.8060)),
    "parity_bits": ("parity", (1.0, 0.8295, 0.6206), (0.9752, 0.7450, 0.6330)),
    "addition_binary": ("addition", (0.9974, 0.2678, 0.0), (0.9950, 0.2769, 0.0)),
}


def _paper(text: str, generator: str, name: str | None = None) -> dict:
    out = {"huang": text, "zhou": "—", "kazemnejad": "—",
           "sources": {"huang": f"{HUANG}; generator {_CODE}: {generator}"}}
    if name in RELEASED:
        run, ape, nope = RELEASED[name]
        out["huang"] = (f"released runs, mean exact match at lengths 101-150: learned APE "
                        f"{ape[2]:.2f}, NoPE {nope[2]:.2f}")
        out["huang_em"] = {"ape": dict(zip(("0-50", "51-100", "101-150"), ape)),
                           "nope": dict(zip(("0-50", "51-100", "101-150"), nope))}
        out["sources"]["huang_em"] = (f"{_CODE} algorithmic/lm-out-new-multi-run/{run}-average"
                                      f"[-nope].txt, 'mean results'")
    return out


#: Huang et al. train every task on lengths 0-50 (their released files and
#: ``experiments/<lang>.yaml``): their C-RASP predictions are stated for that regime.
HUANG_REGIME = Regime(50, HUANG + ": trained on lengths 0-50, tested 51-100 and 101-150")


class HuangTask(Task):
    """Base: ``BOS body SEP answer EOS`` over value-coded ids (every one in
    :data:`HUANG_REGIME`)."""

    def _paper_regime(self):
        return HUANG_REGIME

    def _v(self, ids):
        return [self.vocab.values[i] for i in ids]

    def _ids(self, values):
        return [self.vocab.id_of_value(v) for v in values]

    def _body(self, prompt):
        vals = self._v(prompt)
        if len(vals) < 2 or vals[0] != BOS or vals[-1] != SEP:
            raise TaskInputError(f"{self.name}: a prompt is BOS ... SEP")
        body = vals[1:-1]
        if any(v < 0 for v in body):
            raise TaskInputError(f"{self.name}: special token inside the prompt body")
        return body

    def program_vocab(self, max_len):
        return set(self.vocab.values)

    def sequence_length(self, length):
        p, a = self.sample(length, np.random.default_rng(0))
        return len(p) + len(a)


# ------------------------------------------------------------------------------------------
# algorithmic tasks
# ------------------------------------------------------------------------------------------
class MajorityTask(HuangTask):
    """n symbols of an alphabet of ``k`` with a unique most frequent one -> that symbol."""

    def __init__(self, *a, k: int = 2, **kw):
        super().__init__(*a, **kw)
        self.k = k

    def _generate(self, n, rng):
        while True:
            xs = rng.integers(0, self.k, size=n).tolist()
            top = Counter(xs).most_common(2)
            if len(top) < 2 or top[0][1] > top[1][1]:
                return self._ids([BOS] + xs + [SEP])

    def _solve(self, prompt):
        xs = self._body(prompt)
        top = Counter(xs).most_common(2)
        if not xs or (len(top) > 1 and top[0][1] == top[1][1]):
            raise TaskInputError(f"{self.name}: the most frequent symbol must be unique")
        return self._ids([top[0][0], EOS])


def count_uniform_bits(n: int, rng: np.random.Generator, ones: bool = False,
                       no_tie: bool = False) -> list[int]:
    """n bits whose number of zeros (``ones``: of ones) is uniform over ``0..n`` (``no_tie``:
    without ``n/2``, redrawn as their loop redraws it), then shuffled: Huang et al.'s
    ``BinaryMajorityDataset`` / ``BinaryMajorityInterleaveDataset`` (zeros, no tie) and
    ``ParityDataset`` (ones) in ``algorithmic/language_modeling_train.py`` lines 125-130,
    210-215 and 353-355."""
    if no_tie and n == 0:
        raise ValueError("no string of length 0 is free of a tie")
    while True:
        count = int(rng.integers(0, n + 1))
        if not no_tie or 2 * count != n:
            break
    first, other = (1, 0) if ones else (0, 1)
    bits = np.array([first] * count + [other] * (n - count), dtype=np.int64)
    rng.shuffle(bits)
    return bits.tolist()


class BinaryMajorityTask(MajorityTask):
    """n bits -> the majority bit, the count of zeros uniform without the tie (their
    ``BinaryMajorityDataset``; :func:`count_uniform_bits`)."""

    def _generate(self, n, rng):
        return self._ids([BOS] + count_uniform_bits(n, rng, no_tie=True) + [SEP])


class MajorityInterleaveTask(HuangTask):
    """``period`` interleaved bit strings (ties excluded in each) -> their majority bits."""

    period = 3

    def length_ok(self, n):
        return super().length_ok(n) and n % self.period == 0

    def drawn_lengths(self, lo, hi):
        """Their ``BinaryMajorityInterleaveDataset`` (``algorithmic/language_modeling_train.py``
        lines 193, 200-205): a total ``t`` uniform in ``max(3, lo)..hi``, ``m = round(t / 3)``,
        ``m - 1`` when ``3m > hi``, then ``m + 1`` when ``3m`` is below the range; the length
        ``3m`` once per ``t`` (on 3..50: 3 twice, 48 four times, the others three times).
        A length outside the range (one too narrow for a multiple of 3) is left out."""
        lo, p, out = max(self.min_length, int(lo)), self.period, []
        for t in range(lo, int(hi) + 1):
            m = round(t / p)
            m -= m * p > hi
            m += m * p < lo
            if lo <= m * p <= hi and self.length_ok(m * p):
                out.append(m * p)
        return out

    def _generate(self, n, rng):
        m = n // self.period
        streams = [count_uniform_bits(m, rng, no_tie=True) for _ in range(self.period)]
        body = [s[i] for i in range(m) for s in streams]
        return self._ids([BOS] + body + [SEP])

    def _solve(self, prompt):
        xs = self._body(prompt)
        if len(xs) % self.period or any(x not in (0, 1) for x in xs):
            raise TaskInputError(f"{self.name}: bits, a multiple of {self.period} of them")
        out = []
        for r in range(self.period):
            s = xs[r::self.period]
            if 2 * sum(s) == len(s):
                raise TaskInputError(f"{self.name}: stream {r} has a tie")
            out.append(int(2 * sum(s) > len(s)))
        return self._ids(out + [EOS])


class DistinctTask(HuangTask):
    """n distinct tokens of ``k`` -> the same tokens (``sort``: ascending)."""

    def __init__(self, *a, k: int = 150, sort: bool = False, **kw):
        super().__init__(*a, **kw)
        self.k = k
        self.sort = sort

    def _generate(self, n, rng):
        return self._ids([BOS] + rng.choice(self.k, size=n, replace=False).tolist() + [SEP])

    def _solve(self, prompt):
        xs = self._body(prompt)
        if len(set(xs)) != len(xs):
            raise TaskInputError(f"{self.name}: tokens must be distinct")
        return self._ids((sorted(xs) if self.sort else xs) + [EOS])


class CopyABTask(HuangTask):
    """n tokens over ``{a, b}`` -> the same n tokens."""

    def _generate(self, n, rng):
        return self._ids([BOS] + rng.integers(0, 2, size=n).tolist() + [SEP])

    def _solve(self, prompt):
        xs = self._body(prompt)
        if any(x > 1 for x in xs):
            raise TaskInputError(f"{self.name}: symbols are a, b")
        return self._ids(xs + [EOS])


class ParityBitsTask(HuangTask):
    """n bits -> ``e`` (even number of ones) or ``o``; the count of ones uniform over
    ``0..n`` (their ``ParityDataset``; :func:`count_uniform_bits`)."""

    def length_ok(self, n):
        """Lengths ``1..`` and 0 (``BOS SEP -> e``), which their ``ParityDataset`` draws (no
        ``max(1, ...)``, lines 346, 352). ``min_length`` stays 1: enumerations of the task's
        lengths (:meth:`lengths`, the predictor's checks) start at 1 as for every task; a draw
        reaches 0 only where a run asks for it (``train_min_len`` 0, a bin from 0)."""
        zero = isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n == 0
        return zero or super().length_ok(n)

    def _generate(self, n, rng):
        return self._ids([BOS] + count_uniform_bits(n, rng, ones=True) + [SEP])

    def _solve(self, prompt):
        xs = self._body(prompt)
        if any(x > 1 for x in xs):
            raise TaskInputError(f"{self.name}: bits only")
        return self._ids([2 + sum(xs) % 2, EOS])      # e = 2, o = 3


class AdditionBinaryTask(HuangTask):
    """``BOS a + b =`` -> binary digits of a + b (MSB first, no hints) EOS."""

    min_length_default = 4

    def _generate(self, n, rng):
        la = int(rng.integers(1, n - 2))
        lb = n - 2 - la

        def number(d):
            if d == 1:
                return [int(rng.integers(0, 2))]
            return [1] + rng.integers(0, 2, size=d - 1).tolist()
        return self._ids([BOS] + number(la) + [PLUS] + number(lb) + [SEP])

    def _solve(self, prompt):
        vals = self._v(prompt)
        if len(vals) < 5 or vals[0] != BOS or vals[-1] != SEP or vals.count(PLUS) != 1:
            raise TaskInputError(f"{self.name}: a prompt is BOS a + b =")
        i = vals.index(PLUS)
        a, b = vals[1:i], vals[i + 1:-1]
        if not a or not b or any(x not in (0, 1) for x in a + b):
            raise TaskInputError(f"{self.name}: operands are non-empty binary numbers")
        s = int("".join(map(str, a)), 2) + int("".join(map(str, b)), 2)
        return self._ids([int(c) for c in bin(s)[2:]] + [EOS])


# ------------------------------------------------------------------------------------------
# formal languages (membership)
# ------------------------------------------------------------------------------------------
class DFA:
    """A deterministic automaton over symbols ``0..k-1``: ``delta[state][symbol]`` (None =
    reject), start state 0, ``accept`` a set of states. ``count(state, n)`` = number of
    accepted strings of length n from ``state`` (for uniform sampling)."""

    def __init__(self, k: int, delta: list[list], accept: set):
        self.k = k
        self.delta = delta
        self.accept = set(accept)
        self._memo: dict = {}

    def state(self, xs):
        """The state after reading ``xs`` from the start state (None = rejected)."""
        q = 0
        for x in xs:
            q = self.delta[q][x]
            if q is None:
                return None
        return q

    def run(self, xs) -> bool:
        q = self.state(xs)
        return q is not None and q in self.accept

    def live_states(self) -> set:
        """The states from which some accepting state can be reached (the others are dead)."""
        live = set(self.accept)
        grew = True
        while grew:
            grew = False
            for q, row in enumerate(self.delta):
                if q not in live and any(r in live for r in row if r is not None):
                    live.add(q)
                    grew = True
        return live

    def reachable_states(self) -> set:
        """The states reached from the start state by at least one symbol."""
        seen, todo = set(), [0]
        while todo:
            q = todo.pop()
            for r in self.delta[q]:
                if r is not None and r not in seen:
                    seen.add(r)
                    todo.append(r)
        return seen

    def count(self, q, n, member=True) -> int:
        key = (q, n, member)
        if key not in self._memo:
            if q is None:
                c = 0 if member else self.k ** n
            elif n == 0:
                c = int((q in self.accept) == member)
            else:
                c = sum(self.count(self.delta[q][s], n - 1, member) for s in range(self.k))
            self._memo[key] = c
        return self._memo[key]

    def shortest_prefixes(self) -> dict:
        """State -> the shortest (then smallest) string reaching it from the start (BFS)."""
        out, todo = {0: []}, [0]
        while todo:
            nxt = []
            for q in todo:
                for s in range(self.k):
                    r = self.delta[q][s]
                    if r is not None and r not in out:
                        out[r] = out[q] + [s]
                        nxt.append(r)
            todo = nxt
        return out

    def complete(self, q, head: list, left: int, member: bool, largest: bool = False):
        """``head`` (which led to state ``q``; None: rejected already) extended by ``left``
        symbols to a member (or non-member), choosing at each step the smallest (or largest)
        symbol that keeps such a completion possible — :meth:`sample` with the choice made
        deterministic; None when there is none."""
        if self.count(q, left, member) == 0:
            return None
        out = list(head)
        order = range(self.k - 1, -1, -1) if largest else range(self.k)
        for remaining in range(left, 0, -1):
            for s in order:
                r = None if q is None else self.delta[q][s]
                if self.count(r, remaining - 1, member) > 0:
                    out.append(s)
                    q = r
                    break
        return out

    def sample(self, n, member, rng) -> list[int] | None:
        """A uniform string of length n among members (or non-members); None if none."""
        if self.count(0, n, member) == 0:
            return None
        q, out = 0, []
        for left in range(n, 0, -1):
            w = [self.count(None if q is None else self.delta[q][s], left - 1, member)
                 for s in range(self.k)]
            tot = sum(w)
            r = int(rng.integers(0, tot)) if tot < 2**62 else int(rng.random() * tot)
            for s in range(self.k):
                if r < w[s]:
                    break
                r -= w[s]
            out.append(s)
            q = None if q is None else self.delta[q][s]
        return out


def _dyck(depth: int) -> DFA:
    # D_1 = (ab)*, D_n = (a D_{n-1} b)*: a/b brackets with nesting depth <= n; state = depth
    delta = [[d + 1 if d < depth else None, d - 1 if d > 0 else None] for d in range(depth + 1)]
    return DFA(2, delta, {0})


def _cycle(word: list[int], k: int) -> DFA:
    # (word)*: state = position in word
    m = len(word)
    delta = [[(i + 1) % m if s == word[i] else None for s in range(k)] for i in range(m)]
    return DFA(k, delta, {0})


def _blocks(k: int) -> DFA:
    # a a* b b* ... : state i = inside block i (0 = before the first symbol)
    delta = [[None] * k for _ in range(k + 1)]
    delta[0][0] = 1
    for i in range(1, k + 1):
        delta[i][i - 1] = i
        if i < k:
            delta[i][i] = i + 1
    return DFA(k, delta, {k})


LANGUAGES = {
    # name: (alphabet names, DFA, description)
    "tomita1": (["0", "1"], DFA(2, [[None, 0]], {0}), "1*"),
    "tomita2": (["0", "1"], DFA(2, [[None, 1], [0, None]], {0}), "(10)*"),
    "tomita3": (["0", "1"], DFA(2, [[0, 1], [3, 0], [3, 1], [2, None]], {0, 1, 2}),
                "Tomita 3 (the DFA of Huang et al.'s tomita_generator.py)"),
    "tomita4": (["0", "1"], DFA(2, [[1, 0], [2, 0], [None, 0]], {0, 1, 2}), "no 000"),
    "tomita5": (["0", "1"], DFA(2, [[1, 2], [0, 3], [3, 0], [2, 1]], {0}),
                "even number of 0s and of 1s"),
    "tomita6": (["0", "1"], DFA(2, [[1, 2], [2, 0], [0, 1]], {0}), "#0 - #1 = 0 mod 3"),
    "tomita7": (["0", "1"], DFA(2, [[0, 1], [2, 1], [2, 3], [None, 3]], {0, 1, 2, 3}),
                "0*1*0*1*"),
    "dyck1_depth2": (["a", "b"], _dyck(2), "bounded-depth Dyck-1 D_2"),
    "dyck1_depth3": (["a", "b"], _dyck(3), "bounded-depth Dyck-1 D_3"),
    "dyck1_depth4": (["a", "b"], _dyck(4), "bounded-depth Dyck-1 D_4"),
    "dyck1_depth12": (["a", "b"], _dyck(12), "bounded-depth Dyck-1 D_12"),
    "aa_star": (["a"], _cycle([0, 0], 1), "(aa)*"),
    "aaaa_star": (["a"], _cycle([0, 0, 0, 0], 1), "(aaaa)*"),
    "abab_star": (["a", "b"], _cycle([0, 1, 0, 1], 2), "(abab)*"),
    "a_to_e_blocks": (list("abcde"), _blocks(5), "aa*bb*cc*dd*ee*"),
    "ab_d_bc": (list("abcd"), DFA(4, [[0, 0, None, 1], [None, 1, 1, None]], {1}),
                "{a,b}*d{b,c}*"),
    "ends_02": (["0", "1", "2"], DFA(3, [[1, 0, 0], [1, 0, 2], [1, 0, 2]], {1, 2}),
                "{0,1,2}*02*"),
}


#: Verification checks every string of a length when there are at most this many
#: (:meth:`LanguageTask.verification_prompts`), e.g. every binary string up to length 12.
EXHAUSTIVE_STRINGS = 4096

#: At most this many DFA-derived strings per length (coverage and counting adversaries).
MAX_VERIFICATION_STRINGS = 4096


def verification_words(dfa: DFA, length: int, members_only: bool) -> list[list[int]]:
    """The strings of one length that verification must see, from the DFA (the truth):

    * every string, when there are at most :data:`EXHAUSTIVE_STRINGS` of this length;
    * otherwise, for every reachable state ``q`` and symbol ``s``: the shortest prefix reaching
      ``q``, then ``s``, then the smallest and the largest completion to this length that is a
      member and that is not (where one exists) — every transition, dead ones included, taken
      towards acceptance and towards rejection;
    * counting adversaries of every member above: its symbols sorted ascending and descending
      and its rotation by one — strings with a member's symbol counts (what a program of counts
      sees) in another order. Sorting ``(ab)^13`` gives ``a^13 b^13``, which a Dyck-1 program
      that ignores the depth bound 12 calls a member.

    ``members_only`` keeps the members (a next-character-set task is defined on positive
    strings only). At most :data:`MAX_VERIFICATION_STRINGS` strings, without repeats.
    """
    k, n = dfa.k, int(length)
    if k ** n <= EXHAUSTIVE_STRINGS:
        words = [list(w) for w in itertools.product(range(k), repeat=n)]
    else:
        words = []
        for q, prefix in dfa.shortest_prefixes().items():
            for sym in range(k):
                head = prefix + [sym]
                if len(head) > n:
                    continue
                nxt = dfa.delta[q][sym]
                for member in ((True,) if members_only else (True, False)):
                    for largest in (False, True):
                        w = dfa.complete(nxt, head, n - len(head), member, largest)
                        if w is not None:
                            words.append(w)
        members = [w for w in words if dfa.run(w)]
        for w in members:
            words += [sorted(w), sorted(w, reverse=True), w[1:] + w[:1]]
    seen, out = set(), []
    for w in words:
        t = tuple(w)
        if t not in seen and (not members_only or dfa.run(w)):
            seen.add(t)
            out.append(list(w))
    return out[:MAX_VERIFICATION_STRINGS]


class LanguageTask(HuangTask):
    """Membership in a regular language: ``BOS w SEP -> yes|no EOS``."""

    def __init__(self, *a, dfa: DFA, **kw):
        super().__init__(*a, **kw)
        self.dfa = dfa
        self.k = dfa.k

    def verification_prompts(self, length: int) -> list[list[int]]:
        """The strings of one length that verification must see (:func:`verification_words`:
        every string when few, else every DFA transition towards acceptance and rejection and
        counting adversaries), as ``BOS w SEP`` prompts, at most
        :data:`MAX_VERIFICATION_STRINGS`."""
        return [self._ids([BOS] + w + [SEP])
                for w in verification_words(self.dfa, length, members_only=False)]

    def _generate(self, n, rng):
        member = bool(rng.integers(0, 2))
        w = self.dfa.sample(n, member, rng)
        if w is None:
            w = self.dfa.sample(n, not member, rng)
        return self._ids([BOS] + w + [SEP])

    def _solve(self, prompt):
        xs = self._body(prompt)
        if any(x >= self.k for x in xs):
            raise TaskInputError(f"{self.name}: symbols are {self.vocab.tokens[:self.k]}")
        return self._ids([self.k + int(self.dfa.run(xs)), EOS])   # no = k, yes = k + 1


# ------------------------------------------------------------------------------------------
# formal languages (next-character sets, Huang et al.'s format)
# ------------------------------------------------------------------------------------------
_GEN = "formal_lang_suite/generators/"


@dataclass(frozen=True)
class NextSetFormat:
    """What Huang et al.'s generator of one language writes at each position of a positive string.

    The label after a prefix ``w`` (the DFA in state ``q = delta*(w)``) is the set of the
    ``components`` that may come next: a symbol ``c`` is in it iff ``delta(q, c)`` is not one of
    the generator's dead states (the DFA's dead states plus ``extra_dead``), ``EOS`` iff ``q`` is
    one of ``eos_states`` (None: the accepting states, i.e. ``w`` is a member). Components the
    generator does not write are left out of the label.
    """

    components: tuple          # symbol names and/or "EOS"
    source: str                # file:lines of the generator followed
    extra_dead: frozenset = frozenset()
    eos_states: frozenset | None = None
    note: str = ""


_TOMITA_LEGAL = ("tomita_generator.py:105-135 (Tomita1Language.get_legal_characters: a symbol "
                 "is legal iff the extended prefix is not in dead_states; output_generator: "
                 "two flags per position, chunk_size 2 in configs/dataset/tomita-{}.yaml)")
_MEMBER_ONLY = "one flag per position: is the prefix a member (chunk_size 1)"

#: Huang et al.'s target for each language of :data:`LANGUAGES` (their released code,
#: ``formal_lang_suite/generators/*.py`` and ``configs/dataset/*.yaml``).
NEXT_SETS: dict[str, NextSetFormat] = {
    "tomita1": NextSetFormat(("0", "1"), _TOMITA_LEGAL.format(1) + "; dead_states {q1}, line 83"),
    "tomita2": NextSetFormat(("0", "1"), _TOMITA_LEGAL.format(2) + "; dead_states {q2}, line 164"),
    "tomita3": NextSetFormat(
        ("0", "1"), _TOMITA_LEGAL.format(3) + "; dead_states {q3, q4}, line 201",
        extra_dead=frozenset({3}),
        note="their dead_states include q3 (an odd run of 0s after an odd run of 1s), which "
             "is not dead (q3 -0-> q2 accepts): a symbol is in the set iff the extended prefix "
             "is a member, so after `1` the set is {1} although `100` is a member"),
    "tomita4": NextSetFormat(("0", "1"), _TOMITA_LEGAL.format(4) + "; dead_states {q3}, line 274"),
    "tomita5": NextSetFormat(("EOS",), "tomita_generator.py:46-52 (TomitaLanguage."
                             "output_generator: y/n membership of each prefix; chunk_size 1)",
                             note=_MEMBER_ONLY),
    "tomita6": NextSetFormat(("EOS",), "tomita_generator.py:46-52 (TomitaLanguage."
                             "output_generator: y/n membership of each prefix; chunk_size 1)",
                             note=_MEMBER_ONLY),
    "tomita7": NextSetFormat(("0", "1"), _TOMITA_LEGAL.format(7) + "; dead_states {q4}, line 372"),
    **{f"dyck1_depth{n}": NextSetFormat(
        ("a", "b"), "starfree_generator.py:260-272 (D_nLanguage.get_final_state: '10' at depth "
        f"0, '01' at depth n, '11' between; chunk_size 2 in configs/dataset/d-{n}.yaml)")
       for n in (2, 3, 4, 12)},
    "aa_star": NextSetFormat(("EOS",), "nonstarfree_generator.py:38-39 (NonStarFreeLanguage."
                             "output_generator: 1/0 membership of each prefix)", note=_MEMBER_ONLY),
    "aaaa_star": NextSetFormat(("EOS",), "nonstarfree_generator.py:38-39 (NonStarFreeLanguage."
                               "output_generator: 1/0 membership of each prefix)",
                               note=_MEMBER_ONLY),
    "abab_star": NextSetFormat(("EOS",), "nonstarfree_generator.py:38-39 (NonStarFreeLanguage."
                               "output_generator: 1/0 membership of each prefix)",
                               note=_MEMBER_ONLY + "; the next symbol itself is not written"),
    "a_to_e_blocks": NextSetFormat(
        ("a", "b", "c", "d", "e", "EOS"), "starfree_generator.py:52-58 (AAStarBBStarLanguage."
        "output_generator: the letter after the current symbol, 'T' after e = {current, next} "
        "and {e, EOS})"),
    "ab_d_bc": NextSetFormat(
        ("a", "b", "c", "d"), "starfree_generator.py:90-95 (AB_D_BC.output_generator: '1101' = "
        "{a, b, d} before the d, '0110' = {b, c} from the d on; chunk_size 4 in "
        "configs/dataset/ab_star_d_bc_star.yaml)"),
    "ends_02": NextSetFormat(
        ("EOS",), "starfree_generator.py:134-154 (ZOT_Z_T.output_generator: 'e' iff the "
        "current symbol is 2 and the last symbol other than 2 was 0, else 'c'; chunk_size 1)",
        eos_states=frozenset({2}),
        note="EOS is in the set only after 0 2+ (state 2), not right after the 0 although "
             "`...0` is a member: their generator's rule, followed"),
}


def next_set_label(dfa: DFA, fmt: NextSetFormat, alphabet: list[str], q: int) -> str:
    """The label token's name (``{0,1}``, ``{a,EOS}``, ``{}``) of a prefix that leaves ``dfa``
    in state ``q``, by the rule of :class:`NextSetFormat` (symbols named by ``alphabet``)."""
    dead = (set(range(len(dfa.delta))) - dfa.live_states()) | set(fmt.extra_dead)
    eos = dfa.accept if fmt.eos_states is None else set(fmt.eos_states)
    allowed = []
    for c in fmt.components:
        if c == "EOS":
            ok = q in eos
        else:
            nxt = dfa.delta[q][alphabet.index(c)]
            ok = nxt is not None and nxt not in dead
        if ok:
            allowed.append(c)
    return "{" + ",".join(allowed) + "}"


def next_set_labels(dfa: DFA, fmt: NextSetFormat, alphabet: list[str]) -> list[str]:
    """Every label of a non-empty prefix of a positive string (sorted): the label tokens."""
    states = dfa.reachable_states() & dfa.live_states()
    return sorted({next_set_label(dfa, fmt, alphabet, q) for q in states})


#: Huang et al.'s plotted exact match (%) of each formal language in their format, from their
#: ``formal_lang_suite/visualise/data_local.py`` (dicts ``ape`` = learned APE with random
#: offsets, lines 6-316, and ``nope``, lines 317-626; keys ``Bin 0``, ``Bin 1``, ``Bin 2``),
#: with the string lengths of their released data files ``generated_ds/<dataset>/
#: {train,val}_src*.txt`` (measured: train, bin 0, bin 1, bin 2). For comparison only: the
#: predictor never reads them.
RELEASED_FORMAL = {
    # name: (their key, APE bins, NoPE bins, "train / bin 0 / bin 1 / bin 2 lengths")
    "tomita1": ("tomita1", (100.0, 100.0, 100.0), (100.0, 100.0, 100.0),
               "1-100 / 1-99 / 101-149 / 102-149"),
    "tomita2": ("tomita2", (100.0, 100.0, 100.0), (100.0, 100.0, 100.0),
               "2-100 / 12-100 / 102-142 / 102-146"),
    "tomita3": ("tomita3", (60.45, 7.7, 0.0), (21.1, 0.0, 0.0),
               "1-100 / 1-100 / 101-150 / 101-150"),
    "tomita4": ("tomita4", (100.0, 85.4, 84.4), (100.0, 16.45, 0.0),
               "1-100 / 1-100 / 101-150 / 101-150"),
    "tomita5": ("tomita5", (54.4, 0.0, 0.0), (7.1, 0.0, 0.0),
               "2-100 / 2-100 / 102-150 / 102-150"),
    "tomita6": ("tomita6", (59.6, 0.0, 0.0), (2.4, 0.0, 0.0),
               "2-100 / 2-100 / 101-150 / 101-150"),
    "tomita7": ("tomita7", (100.0, 94.2, 93.2), (100.0, 87.5, 76.2),
               "17-100 / 29-100 / 101-150 / 101-150"),
    "dyck1_depth2": ("d-2", (100.0, 100.0, 100.0), (100.0, 100.0, 100.0),
                    "12-50 / 10-30 / 86-100 / 108-150"),
    "dyck1_depth3": ("d-3", (100.0, 100.0, 100.0), (100.0, 100.0, 100.0),
                    "2-100 / 12-100 / 84-200 / 120-300"),
    "dyck1_depth4": ("d-4", (100.0, 100.0, 100.0), (100.0, 100.0, 100.0),
                    "36-100 / 40-100 / 98-200 / 144-300"),
    "dyck1_depth12": ("d-12", (100.0, 100.0, 100.0), (100.0, 100.0, 100.0),
                     "48-100 / 54-100 / 110-200 / 172-300"),
    "aa_star": ("(aa)*", (100.0, 100.0, 100.0), (100.0, 0.0, 0.0),
               "2-98 / 8-86 / 102-148 / 150-194"),
    "aaaa_star": ("(aaaa)*", (100.0, 92.3, 86.7), (100.0, 0.0, 0.0),
                 "4-496 / 8-488 / 512-596 / 600-696"),
    "abab_star": ("(abab)*", (100.0, 89.4, 82.3), (100.0, 0.0, 0.0),
                 "4-500 / 12-444 / 508-596 / 600-700"),
    "a_to_e_blocks": ("aabbccddee", (100.0, 100.0, 100.0), (100.0, 100.0, 100.0),
                     "60-200 / 79-200 / 139-300 / 158-400"),
    "ab_d_bc": ("adbc", (100.0, 99.8, 98.5), (100.0, 99.8, 98.5),
               "2-49 / 4-49 / 3-99 / 5-149"),
    "ends_02": ("012", (99.7, 24.4, 1.2), (18.2, 11.2, 0.0),
               "2-49 / 4-49 / 2-99 / 6-149"),
}


#: Where Huang et al. report a C-RASP program (``'Expressive' : True`` in their
#: ``formal_lang_suite/visualise/data_local.py``, dicts ``ape`` = C-RASP[periodic, local] and
#: ``nope`` = C-RASP[]), for our catalogue names: 30 of the 50 (task, PE) cells. Read only by
#: the C-RASP search benchmark (``bench/bench_crasp_search.py``: does the search find the programs
#: that exist?), never by the predictor.
HUANG_EXPRESSIVE = {
    "ape": frozenset({"majority_binary", "majority_interleave", "majority", "sort_150",
                      "copy_unique_150", "dyck1_depth2_nextchar", "dyck1_depth3_nextchar",
                      "dyck1_depth4_nextchar", "dyck1_depth12_nextchar", "tomita1_nextchar",
                      "tomita2_nextchar", "tomita4_nextchar", "tomita7_nextchar",
                      "a_to_e_blocks_nextchar", "ab_d_bc_nextchar", "aa_star_nextchar",
                      "aaaa_star_nextchar", "abab_star_nextchar"}),
    "nope": frozenset({"majority_binary", "majority", "sort_150", "dyck1_depth2_nextchar",
                       "dyck1_depth3_nextchar", "dyck1_depth4_nextchar",
                       "dyck1_depth12_nextchar", "tomita1_nextchar", "tomita2_nextchar",
                       "tomita7_nextchar", "a_to_e_blocks_nextchar", "ab_d_bc_nextchar"}),
}


class NextSetTask(HuangTask):
    """Next-character sets of a regular language (Huang et al. 2025's format for the
    formal languages; kind ``"next_set"``).

    Prompt ``BOS w_1 .. w_n`` (a positive string: a member of the language, drawn uniformly among
    the members of length n); answer: n label tokens, the i-th is the set of allowed next
    characters after ``w_1 .. w_i`` as Huang et al.'s generator writes it
    (:class:`NextSetFormat`, :data:`NEXT_SETS`). Each distinct set is one token of the
    vocabulary (``{0,1}``, ``{a,EOS}``, ...), as their ``dataset_utils.py:22-37``
    (``tokenize_output_string``) turns each chunk of flags into one output token; the model
    is trained with cross-entropy over its vocabulary at the n string positions
    (``train_with_ce.py:97-130, 216``) and an example counts as correct when every position's
    argmax is its label (``train_with_ce.py:122-129``: ``.all`` over the positions).

    Left out of their format: the ``$`` (BOS) and ``#`` (EOS) input positions whose targets are
    ``$`` and ``#`` (copies of the input token), and the padding positions.
    """

    def __init__(self, *a, dfa: DFA, format: NextSetFormat, **kw):
        super().__init__(*a, **{**kw, "kind": "next_set"})
        self.dfa = dfa
        self.k = dfa.k
        self.format = format
        alpha = self.vocab.tokens[:self.k]
        self._label_id = {q: self.vocab.id(next_set_label(dfa, format, alpha, q))
                          for q in range(len(dfa.delta))
                          if next_set_label(dfa, format, alpha, q) in self.vocab}

    def length_ok(self, n):
        return super().length_ok(n) and self.dfa.count(0, int(n), True) > 0

    def verification_prompts(self, length: int) -> list[list[int]]:
        """The positive strings of one length that verification must see
        (:func:`verification_words` with ``members_only``: every member when there are few
        strings, else every DFA transition completed to a member and the counting adversaries
        that are members), as ``BOS w`` prompts."""
        return [self._ids([BOS] + w)
                for w in verification_words(self.dfa, length, members_only=True)]

    def _generate(self, n, rng):
        return self._ids([BOS] + self.dfa.sample(n, True, rng))

    def _solve(self, prompt):
        vals = self._v(prompt)
        w = vals[1:]
        if any(not 0 <= x < self.k for x in w):
            raise TaskInputError(f"{self.name}: a prompt is BOS followed by the symbols "
                                 f"{self.vocab.tokens[:self.k]}")
        if not self.dfa.run(w):
            raise TaskInputError(f"{self.name}: the string is not in the language (Huang et "
                                 f"al. train and test on positive strings only)")
        out, q = [], 0
        for x in w:
            q = self.dfa.delta[q][x]
            out.append(self._label_id[q])
        return out

    def sequence_length(self, length):
        return length + 1


def _formal_paper(name: str, desc: str, fmt: NextSetFormat) -> dict:
    """The ``paper`` field of ``<name>_nextchar``: the format followed and their plotted
    numbers (:data:`RELEASED_FORMAL`, under ``huang_bins``: not the algorithmic tasks'
    ``huang_em``, whose length bins are 0-50 / 51-100 / 101-150)."""
    key, ape, nope, lengths = RELEASED_FORMAL[name]
    what = fmt.note or "the allowed next " + "/".join(fmt.components)
    out = _paper(f"{desc}: next-character-set format as their generator ({what}); their "
                 f"plotted exact match (bins 0/1/2, %): learned APE {ape[0]:g}/{ape[1]:g}/"
                 f"{ape[2]:g}, NoPE {nope[0]:g}/{nope[1]:g}/{nope[2]:g} (lengths train / bins: "
                 f"{lengths})", _GEN + fmt.source)
    out["huang_bins"] = {"ape": ape, "nope": nope, "lengths": lengths}
    out["sources"]["huang_bins"] = (f"{_CODE} formal_lang_suite/visualise/data_local.py "
                                    f"ape/nope[{key!r}]; lengths of generated_ds/")
    return out


def make_huang_tasks() -> dict[str, Task]:
    """The tasks of Huang et al. 2025 under the catalogue names of issue 10."""
    T: dict[str, Task] = {}

    def add(t):
        T[t.name] = t

    gen = "algorithmic/language_modeling_train.py"
    add(BinaryMajorityTask(name="majority_binary", description="n bits (no tie; the count "
                           "of zeros uniform, then shuffled, as their generator) SEP -> "
                           "majority bit EOS", source=HUANG, vocab=_vocab(["0", "1"]), k=2,
                           paper=_paper("generalizes with APE and NoPE (C-RASP program)",
                                        gen + " BinaryMajorityDataset", "majority_binary")))
    add(MajorityTask(name="majority", description="n symbols of a..z (unique mode) SEP -> the "
                     "most frequent symbol EOS", source=HUANG,
                     vocab=_vocab([chr(97 + i) for i in range(26)]), k=26,
                     paper=_paper("generalizes (C-RASP program)", gen + " MajorityDataset", "majority")))
    add(MajorityInterleaveTask(
        name="majority_interleave", description="3 interleaved bit strings (period 3; per "
        "string the count of zeros uniform without a tie, then shuffled) SEP -> their 3 "
        "majority bits EOS (lengths drawn as theirs: a total uniform, rounded to a multiple of "
        "3). Their reported numbers are of a `_sep` variant (bin_majority_interleave_sep) that "
        "is not in their released generators; this is the released one", source=HUANG, vocab=_vocab(["0", "1"]), min_length=3,
        length_definition="total bits (a multiple of 3)",
        paper=_paper("generalizes with APE (periodic C-RASP), not with NoPE",
                     gen + " BinaryMajorityInterleaveDataset", "majority_interleave"), example_length=6))
    add(DistinctTask(name="sort_150", description="n distinct tokens of 150 SEP -> sorted EOS",
                     source=HUANG, vocab=_vocab([str(i) for i in range(150)]), k=150, sort=True,
                     max_length=150, length_definition="n tokens (distinct, alphabet of 150)",
                     paper=_paper("generalizes with APE and NoPE (C-RASP program)",
                                  gen + " SortDataset", "sort_150")))
    add(DistinctTask(name="copy_unique_150", description="n distinct tokens of 150 SEP -> the "
                     "same EOS", source=HUANG, vocab=_vocab([str(i) for i in range(150)]),
                     k=150, max_length=150,
                     length_definition="n tokens (distinct, alphabet of 150)",
                     paper=_paper("generalizes with APE (local C-RASP), not with NoPE",
                                  gen + " UniqueCopyDataset", "copy_unique_150")))
    add(CopyABTask(name="copy_ab", description="n tokens over {a, b} SEP -> the same EOS",
                   source=HUANG, vocab=_vocab(["a", "b"]),
                   paper=_paper("fails (no C-RASP program)", gen + " RepeatCopyDataset", "copy_ab")))
    add(ParityBitsTask(name="parity_bits", description="n bits (the count of ones uniform, then "
                       "shuffled, as their generator; length 0 too, where a run draws it) SEP -> "
                       "e|o EOS", source=HUANG,
                       vocab=_vocab(["0", "1"], ["e", "o"]),
                       paper=_paper("fails (no C-RASP program)", gen + " ParityDataset", "parity_bits")))
    add(AdditionBinaryTask(
        name="addition_binary", description="BOS a + b = -> a + b in binary (MSB first) EOS",
        source=HUANG, vocab=_vocab(["0", "1"], specials=("BOS", "SEP", "EOS", "PAD", "+"),
                                   special_names={"SEP": "="}),
        min_length=4, length_definition="len(a) + len(b) + 2 (as their generator)",
        paper=_paper("fails (no C-RASP program)", gen + " AdditionDataset", "addition_binary"),
        example_length=6))
    for name, (alpha, dfa, desc) in LANGUAGES.items():
        add(LanguageTask(
            name=name, description=f"membership in {desc}: BOS w SEP -> yes|no EOS",
            source=HUANG + "; Bhattamishra et al. 2020", vocab=_vocab(alpha, ["no", "yes"]),
            dfa=dfa, length_definition="length of w",
            paper=_paper(f"{desc}: next-character-set format in the paper (ours: membership; "
                         f"{name}_nextchar is theirs)", "formal_lang_suite/generators"),
            example_length=6))
    for name, (alpha, dfa, desc) in LANGUAGES.items():
        fmt = NEXT_SETS[name]
        labels = next_set_labels(dfa, fmt, alpha)
        add(NextSetTask(
            name=f"{name}_nextchar", description=f"next-character sets of {desc}: BOS w -> "
            f"one set per position ({', '.join(fmt.components)})", source=HUANG +
            "; Bhattamishra et al. 2020", vocab=_vocab(alpha, labels, specials=("BOS", "EOS", "PAD")),
            dfa=dfa, format=fmt, length_definition="length of w (only lengths at which the "
            "language has a member)",
            paper=_formal_paper(name, desc, fmt),
            example_length=next(n for n in range(6, 64) if dfa.count(0, n, True))))
    return T
