"""Huang et al. 2025 tasks (tasks/huang.py): names of issue 10, generators against independent
ground truths (Python regular expressions for the languages, Counter / sorted / int() for the
algorithmic tasks), formats of the released generators."""

import itertools
import re
from collections import Counter

import numpy as np
import pytest

import tasks
from tasks.huang import LANGUAGES

NAMES = ["majority_binary", "majority", "majority_interleave", "sort_150", "copy_unique_150",
         "copy_ab", "parity_bits", "addition_binary", "dyck1_depth2", "dyck1_depth3",
         "dyck1_depth4", "dyck1_depth12"] + [f"tomita{i}" for i in range(1, 8)] + [
         "aa_star", "aaaa_star", "abab_star", "a_to_e_blocks", "ab_d_bc", "ends_02"]

# independent definitions of the languages (regular expressions / counting), over names
REGEX = {
    "tomita1": r"1*", "tomita2": r"(10)*", "tomita4": r"(?!.*000).*", "tomita7": r"0*1*0*1*",
    "aa_star": r"(aa)*", "aaaa_star": r"(aaaa)*", "abab_star": r"(abab)*",
    "a_to_e_blocks": r"aa*bb*cc*dd*ee*", "ab_d_bc": r"[ab]*d[bc]*", "ends_02": r"[012]*02*",
}


def _member(name, w):
    if name in REGEX:
        return re.fullmatch(REGEX[name], w) is not None
    if name == "tomita5":
        return w.count("0") % 2 == 0 and w.count("1") % 2 == 0
    if name == "tomita6":
        return (w.count("0") - w.count("1")) % 3 == 0
    if name.startswith("dyck1_depth"):
        bound, d = int(name[len("dyck1_depth"):]), 0
        for c in w:
            d += 1 if c == "a" else -1
            if d < 0 or d > bound:
                return False
        return d == 0
    if name == "tomita3":
        # Tomita 3: no odd-length block of 1s immediately followed by an odd-length block
        # of 0s (maximal blocks)
        blocks = [(m.group()[0], len(m.group())) for m in re.finditer(r"0+|1+", w)]
        for (s1, n1), (s2, n2) in zip(blocks, blocks[1:]):
            if s1 == "1" and s2 == "0" and n1 % 2 == 1 and n2 % 2 == 1:
                return False
        return True
    raise KeyError(name)


def test_names_registered():
    nextchar = [f"{n}_nextchar" for n in LANGUAGES]
    assert sorted(tasks.HUANG_TASKS) == sorted(NAMES + nextchar)
    for n in NAMES + nextchar:
        t = tasks.get_task(n)
        assert "Huang" in t.source
        assert t.kind == ("next_set" if n.endswith("_nextchar") else "next_token")


@pytest.mark.parametrize("name", sorted(LANGUAGES))
def test_language_membership_matches_an_independent_definition(name):
    t = tasks.get_task(name)
    rng = np.random.default_rng(0)
    labels = Counter()
    for n in range(1, 13):
        if not t.length_ok(n):
            continue
        for _ in range(8):
            prompt, answer = t.sample(n, rng)
            names = t.vocab.decode(prompt)
            assert names[0] == "BOS" and names[-1] == "SEP" and len(names) == n + 2
            w = "".join(names[1:-1])
            got = t.vocab.decode(answer)
            assert got[-1] == "EOS"
            assert got[0] == ("yes" if _member(name, w) else "no"), w
            labels[got[0]] += 1
    if name not in ("aa_star", "aaaa_star"):       # one-letter alphabets: label = f(length)
        assert labels["yes"] > 0 and labels["no"] > 0


def test_tomita3_exhaustively_against_the_block_rule():
    t = tasks.get_task("tomita3")
    for n in range(1, 11):
        for i in range(2 ** n):
            w = format(i, f"0{n}b")
            assert t.dfa.run([int(c) for c in w]) == _member("tomita3", w), w


def test_algorithmic_formats():
    rng = np.random.default_rng(1)
    for _ in range(20):
        p, a = tasks.get_task("majority").sample(9, rng)
        xs = p[1:-1]
        top = Counter(xs).most_common(2)
        assert top[0][1] > top[1][1] and a[0] == top[0][0]
        p, a = tasks.get_task("majority_interleave").sample(9, rng)
        xs = p[1:-1]
        assert [int(2 * sum(xs[r::3]) > 3) for r in range(3)] == a[:3]
        t = tasks.get_task("addition_binary")
        p, a = t.sample(8, rng)
        names = t.vocab.decode(p)
        assert len(p) == 8 + 1 and names[-1] == "="
        x, y = "".join(names[1:-1]).split("+")
        assert "".join(t.vocab.decode(a[:-1])) == bin(int(x, 2) + int(y, 2))[2:]
        t = tasks.get_task("sort_150")
        p, a = t.sample(30, rng)
        assert a[:-1] == sorted(p[1:-1]) and len(set(p[1:-1])) == 30
        t = tasks.get_task("parity_bits")
        p, a = t.sample(7, rng)
        assert t.vocab.decode(a)[0] == ("e" if sum(p[1:-1]) % 2 == 0 else "o")
    assert not tasks.get_task("majority_interleave").length_ok(10)
    with pytest.raises(tasks.TaskInputError):
        tasks.get_task("majority_binary").ground_truth(
            tasks.get_task("majority_binary").vocab.encode(["BOS", "0", "1", "SEP"]))


# ------------------------------------------------------------------------------------------
# next-character sets (Huang et al.'s format of the formal languages)
# ------------------------------------------------------------------------------------------
ALPHABETS = {name: alpha for name, (alpha, _, _) in LANGUAGES.items()}

#: Lines of Huang et al.'s released data (github.com/lacoco-lab/length_generalization,
#: formal_lang_suite/generated_ds/<dataset>/{train,val}_{src,tgt}*.txt), copied verbatim: the
#: positive string and their target string (chunk_size characters per position).
RELEASED_EXAMPLES = {
    "tomita1": [("111111", "nynynynynyny")],
    "tomita2": [("101010101010", "ynnyynnyynnyynnyynnyynny")],
    "tomita3": [("000001", "yyyyyyyyyyny"), ("000111", "yyyyyynyyyny")],
    "tomita4": [("001010", "yynyyyyyyyyy"), ("001101", "yynyyyyyyyyy")],
    "tomita5": [("000000", "nynyny"), ("000011", "nynyny"),
                ("0010101010111110101010", "nynnnynnnynynynnnynnny")],
    "tomita6": [("000000", "nnynny"), ("000111", "nnynny")],
    "tomita7": [("01111111111111111100000000111",
                 "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyynynyny")],
    "dyck1_depth2": [("aababbaabb", "11011101111011011110")],
    "dyck1_depth3": [("aabbabababab", "111111101110111011101110"),
                     ("ababaabbaabb", "111011101111111011111110")],
    "dyck1_depth4": [("aaaabababbaabababbbaaabababbaababababbbb", "1111110111011101111111011101"
                      "1101111111111101110111011111110111011101110111111110")],
    "dyck1_depth12": [("aaaaaaaaaaabbbbbbbbaaaaaaaabbbbbbbaaaaaaaabbbbbbbbbbbb", "11111111111111111"
                       "11111111111111111111111111111111111111111111111111111111111111111011111"
                       "11111111111111111110")],
    "aa_star": [("aaaaaaaa", "01010101")],
    "aaaa_star": [("aaaaaaaa", "00010001")],
    "abab_star": [("abababababab", "000100010001")],
    "a_to_e_blocks": [("aaaaaaaaaaaaaaaaaaabbbccccccccccccccccccccccccccccccccccccccccddddeeeeeeeeeeeee",
                       "BBBBBBBBBBBBBBBBBBBCCCDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDEEEETTTTTTTTTTTTT")],
    "ab_d_bc": [("baaaad", "110111011101110111010110"), ("badbc", "11011101011001100110")],
    "ends_02": [("002222", "cceeee"), ("220222", "ccceee"),
                ("112200022000101022021200120022222", "ccccccceeccccccceececccccccceeeee")],
}


def _their_sets(name, target):
    """Their target string -> one set of allowed next characters per position, by the meaning
    of their generators' flags (formal_lang_suite/generators)."""
    alpha = ALPHABETS[name]
    if name in ("tomita5", "tomita6", "ends_02") or name in ("aa_star", "aaaa_star", "abab_star"):
        return [{"EOS"} if c in "ye1" else set() for c in target]      # one flag: may end here
    if name == "a_to_e_blocks":                    # the letter after the current symbol
        nxt = {"B": "a", "C": "b", "D": "c", "E": "d", "T": "e"}
        return [{nxt[c], chr(ord(nxt[c]) + 1) if c != "T" else "EOS"} for c in target]
    k = len(alpha)                                 # k flags per position, one per symbol
    return [{alpha[j] for j in range(k) if target[i + j] in "y1"}
            for i in range(0, len(target), k)]


def _sets_of(t, answer):
    return [set(filter(None, name.strip("{}").split(","))) for name in t.vocab.decode(answer)]


@pytest.mark.parametrize("name", sorted(LANGUAGES))
def test_next_sets_equal_the_released_targets(name):
    t = tasks.get_task(f"{name}_nextchar")
    for w, target in RELEASED_EXAMPLES[name]:
        prompt = t.vocab.encode(["BOS", *w])
        assert _sets_of(t, t.ground_truth(prompt)) == _their_sets(name, target), w


def _completions(name, w, alpha, bound):
    """Whether some u with |u| <= bound makes w + u a member (brute force)."""
    return any(_member(name, w + "".join(u)) for n in range(bound + 1)
               for u in itertools.product(alpha, repeat=n))


#: the longest shortest completion from a live prefix (Dyck-n: n closing brackets; a..e: b c d e)
BOUND = {"a_to_e_blocks": 4, "aaaa_star": 3, "abab_star": 3,
         **{f"dyck1_depth{n}": n for n in (2, 3, 4, 12)}}


@pytest.mark.parametrize("name", sorted(LANGUAGES))
def test_next_sets_against_brute_force(name):
    """Every prefix of every member of length <= 7: a symbol is allowed iff some member
    continues the prefix with it (brute force over completions), EOS iff the prefix is a
    member; then the components their generator writes, with its two departures."""
    t = tasks.get_task(f"{name}_nextchar")
    alpha, comps = ALPHABETS[name], t.format.components
    bound = BOUND.get(name, 2)
    checked = 0
    for n in range(1, 8):
        for u in itertools.product(alpha, repeat=n):
            w = "".join(u)
            if not _member(name, w):
                continue
            got = _sets_of(t, t.ground_truth(t.vocab.encode(["BOS", *w])))
            for i in range(1, n + 1):
                pre = w[:i]
                if name == "tomita3":          # their dead_states {q3, q4}: extension a member
                    allowed = {c for c in alpha if _member(name, pre + c)}
                else:
                    allowed = {c for c in alpha if _completions(name, pre + c, alpha, bound)}
                if name == "ends_02":          # their 'e': the prefix ends in 0 2+
                    allowed.add("EOS") if re.fullmatch(r"[012]*02+", pre) else None
                elif _member(name, pre):
                    allowed.add("EOS")
                assert got[i - 1] == allowed & set(comps), (w, i)
                checked += 1
    assert checked > 0


def test_next_set_format_and_errors():
    t = tasks.get_task("dyck1_depth2_nextchar")
    rng = np.random.default_rng(0)
    for n in (2, 6, 10):
        prompt, answer = t.sample(n, rng)
        names = t.vocab.decode(prompt)
        assert names[0] == "BOS" and len(prompt) == n + 1 and len(answer) == n
        assert _member("dyck1_depth2", "".join(names[1:]))          # positive strings only
        inputs, targets, first = tasks.inputs_targets(t, prompt, answer)
        assert inputs == prompt and targets[first:] == answer and first == 1
    assert not t.length_ok(3) and t.length_ok(4)                   # no odd-length member
    with pytest.raises(tasks.TaskInputError, match="not in the language"):
        t.ground_truth(t.vocab.encode(["BOS", "a", "a", "a"]))     # depth 3 > 2
    with pytest.raises(tasks.TaskInputError, match="symbols"):
        t.ground_truth(t.vocab.encode(["BOS", "a", "{a}"]))
    with pytest.raises(ValueError, match="one label per string position"):
        tasks.inputs_targets(t, prompt, answer[:-1])


def test_next_set_tasks_carry_their_plotted_numbers():
    from tasks.huang import RELEASED_FORMAL
    assert sorted(RELEASED_FORMAL) == sorted(LANGUAGES)
    for name in LANGUAGES:
        bins = tasks.get_task(f"{name}_nextchar").paper["huang_bins"]
        assert len(bins["ape"]) == len(bins["nope"]) == 3
        assert all(0 <= x <= 100 for x in bins["ape"] + bins["nope"])
        assert "huang_em" not in tasks.get_task(f"{name}_nextchar").paper   # other length bins


def test_programs_are_verified_per_position_on_next_set_tasks():
    """A next-set program is checked at every string position (not only the last): the token
    itself is not the set of next characters, so ``tokens`` fails at every length; a program
    that reads later positions is refused."""
    import rasp
    t = tasks.get_task("tomita3_nextchar")
    rep = tasks.verify_program(t, rasp.tokens, [2, 3])
    assert rep.method == "per_position" and not rep.ok
    with pytest.raises(ValueError, match="prefix-causal"):
        tasks.verify_program(t, rasp.tokens + 0 * rasp.length, [2])


@pytest.mark.parametrize("name", ["tomita3", "dyck1_depth3", "ab_d_bc", "ends_02"])
def test_next_set_verification_sees_every_positive_string_when_few(name):
    """Verification prompts of a next-set task are positive strings only (Huang et al. define
    the sets on members), all of them at a length with at most 4,096 strings (compared with a
    brute-force enumeration), and members again above it."""
    import itertools
    t = tasks.get_task(f"{name}_nextchar")
    for n in (3, 6):
        got = {tuple(p[1:]) for p in t.verification_prompts(n)}
        want = {tuple(t._ids(list(w))) for w in itertools.product(range(t.k), repeat=n)
                if t.dfa.run(list(w))}
        assert got == want
    big = t.verification_prompts(14 if t.k == 2 else 9)
    assert big and all(t.dfa.run(t._v(p)[1:]) for p in big)


def test_a_next_set_example_is_one_next_token_example_per_position():
    t = tasks.get_task("dyck1_depth2_nextchar")
    prompt, answer = t.sample(4, np.random.default_rng(0))
    pairs = tasks.next_token_examples(t, prompt, answer)
    assert [p for p, _ in pairs] == [list(prompt[:i + 1]) for i in range(1, len(prompt))]
    assert [a for _, a in pairs] == [[x] for x in answer]


# ------------------------------------------------------------------------------------------
# the generators' distributions against Huang et al.'s (issue 47, D1-D3)
# ------------------------------------------------------------------------------------------
#: Their file: github.com/lacoco-lab/length_generalization, commit b39b743,
#: algorithmic/language_modeling_train.py. Written here from their code, not from ours.
DRAWS = 10_000


def _their_count_given_length(n, no_tie):
    """P(count = c | length n), c = 0..n, of their generators: ``num = random.randint(0,
    length)`` (uniform over 0..n), redrawn while ``num == length - num`` when ``no_tie``
    (BinaryMajorityDataset lines 125-128, BinaryMajorityInterleaveDataset lines 210-213;
    ParityDataset line 353 has no redraw)."""
    allowed = [c for c in range(n + 1) if not (no_tie and 2 * c == n)]
    return np.array([1.0 / len(allowed) if c in allowed else 0.0 for c in range(n + 1)])


def _their_pooled_counts(lengths, no_tie, top):
    """P(count = c), c = 0..top, with the length uniform over ``lengths`` (their
    ``random.randint(self.range_min, self.range_max)``: line 124 with range_min = max(1, 0)
    for bin_majority, line 352 without max for parity) and the count as above."""
    p = np.zeros(top + 1)
    for n in lengths:
        p[:n + 1] += _their_count_given_length(n, no_tie) / len(lengths)
    return p


def _chisquare(observed, expected_p):
    from scipy.stats import chisquare
    keep = expected_p > 0
    assert observed[~keep].sum() == 0, "a count their generator never draws"
    return chisquare(observed[keep], expected_p[keep] * observed.sum()).pvalue


def _our_training_draws(name, pe="nope"):
    """DRAWS training prompts as ``rasp replicate huang`` draws them at their scale: the lengths
    of the resolved run (analysis.training.trainer.train_lengths) drawn as the trainer draws
    them (analysis.training.batches.sample_examples)."""
    from analysis.experiment import replication as R
    from analysis.training.batches import sample_examples
    from analysis.training.trainer import resolve_spec, train_lengths
    t = tasks.get_task(name)
    spec = resolve_spec(t, pe, config_overrides=R.run_overrides(name, pe, R.FULL.configs[0],
                                                                R.FULL))
    lengths = train_lengths(spec, t)
    return t, [p for p, _ in sample_examples(t, lengths, DRAWS, np.random.default_rng(47))]


def _old_iid(n, rng, no_tie):
    """The generator we had before issue 47: iid bits (redrawn on a tie)."""
    while True:
        xs = rng.integers(0, 2, size=n)
        if not no_tie or 2 * xs.sum() != n:
            return xs


def test_binary_majority_lengths_and_zero_counts_are_theirs():
    """Lengths uniform over 1..50 and, pooled over them, the number of zeros as theirs
    (chi-square on 10,000 training draws); the old iid generator fails the same test."""
    t, prompts = _our_training_draws("majority_binary")
    lens = np.array([len(p) - 2 for p in prompts])
    zeros = np.array([list(p[1:-1]).count(t.vocab.id("0")) for p in prompts])
    assert _chisquare(np.bincount(lens, minlength=51)[1:], np.full(50, 1 / 50)) > 1e-3
    expected = _their_pooled_counts(range(1, 51), no_tie=True, top=50)
    assert _chisquare(np.bincount(zeros, minlength=51), expected) > 1e-3
    rng = np.random.default_rng(0)
    old = np.array([int(n) - int(_old_iid(int(n), rng, True).sum()) for n in lens])
    assert _chisquare(np.bincount(old, minlength=51), expected) < 1e-6


def _our_bin_draws(name, lo, hi):
    """DRAWS test prompts of the bin lo..hi as the replication's bins draw them
    (analysis.training.evaluation.bin_set)."""
    from analysis.training.evaluation import bin_set
    return [p for p, _ in bin_set(tasks.get_task(name), lo, hi, DRAWS)]


def test_parity_lengths_and_one_counts_are_theirs():
    """Their ParityDataset (lines 346, 352-353): ``range_min`` as given (no max(1, ...)), so
    ``length = random.randint(0, 50)``, then ``num_ones = random.randint(0, length)``: both
    uniform, length 0 included, in training and in their 0-50 bin. Ours, drawn as the
    replication trains (and tests the bin 0-50), against that formula by chi-square on
    10,000 draws; the old draws (lengths from 1, iid bits) fail it."""
    t, train = _our_training_draws("parity_bits")
    for prompts in (train, _our_bin_draws("parity_bits", 0, 50)):
        lens = np.array([len(p) - 2 for p in prompts])
        ones = np.array([list(p[1:-1]).count(t.vocab.id("1")) for p in prompts])
        assert _chisquare(np.bincount(lens, minlength=51), np.full(51, 1 / 51)) > 1e-3
        expected = _their_pooled_counts(range(0, 51), no_tie=False, top=50)
        assert _chisquare(np.bincount(ones, minlength=51), expected) > 1e-3
    rng = np.random.default_rng(0)
    old = np.array([int(_old_iid(int(n), rng, False).sum()) for n in lens])
    assert _chisquare(np.bincount(old, minlength=51), expected) < 1e-6
    from_one = np.bincount(rng.integers(1, 51, size=DRAWS), minlength=51)   # the old lengths
    assert _chisquare(from_one, np.full(51, 1 / 51)) < 1e-6
    # length 0 is a parity example (BOS SEP -> e) but not a length the task enumerates
    prompt, answer = t.sample(0, rng)
    assert [t.vocab.tokens[i] for i in prompt + answer] == ["BOS", "SEP", "e", "EOS"]
    assert t.lengths(3) == [1, 2, 3]
    assert not tasks.get_task("majority_binary").length_ok(0)


@pytest.mark.parametrize("n", [15, 48])
def test_interleave_zero_counts_per_stream_are_theirs(n):
    """Each of the three streams of n/3 bits: zeros uniform over 0..n/3 without the tie
    (BinaryMajorityInterleaveDataset lines 209-215), the streams independent; the old iid
    generator fails."""
    t = tasks.get_task("majority_interleave")
    rng = np.random.default_rng(n)
    m, zero = n // 3, t.vocab.id("0")
    counts = np.zeros((3, m + 1), dtype=int)
    old = np.zeros(m + 1, dtype=int)
    for _ in range(DRAWS):
        body = list(t.sample(n, rng)[0][1:-1])
        for r in range(3):
            counts[r, body[r::3].count(zero)] += 1
        old[m - int(_old_iid(m, rng, True).sum())] += 1
    expected = _their_count_given_length(m, no_tie=True)
    for r in range(3):
        assert _chisquare(counts[r], expected) > 1e-3
    assert _chisquare(old, expected) < 1e-6


def _their_interleave_lengths(lo, hi):
    """P(3m) of their BinaryMajorityInterleaveDataset (lines 200-205): total uniform in
    max(3, lo)..hi, m = round(total / 3), minus 1 when 3m > hi, plus 1 when 3m < max(3, lo)."""
    lo = max(3, lo)
    p = Counter()
    for total in range(lo, hi + 1):
        m = round(total / 3)
        m -= 3 * m > hi
        m += 3 * m < lo
        p[3 * m] += 1 / (hi - lo + 1)
    return p


@pytest.mark.parametrize("lo,hi", [(0, 50), (51, 100), (101, 150)])
def test_interleave_lengths_are_theirs(lo, hi):
    """Their rounding of a uniform total (``_their_interleave_lengths``, lines 193, 200-205):
    on 3..50 the length 3 weighs 2/48 and 48 weighs 4/48, 51 weighs 2/50 in 51-100, 150 2/50 in
    101-150. Ours, drawn as the replication trains (bin 0-50) and tests (every bin), against it
    by chi-square on 10,000 draws; a uniform draw over the multiples of 3 fails it."""
    theirs = _their_interleave_lengths(lo, hi)
    if lo == 0:
        assert theirs[3] == pytest.approx(2 / 48) and theirs[48] == pytest.approx(4 / 48)
        _, prompts = _our_training_draws("majority_interleave")
        draws = [prompts, _our_bin_draws("majority_interleave", lo, hi)]
    else:
        assert min(theirs.values()) == pytest.approx(2 / 50)
        draws = [_our_bin_draws("majority_interleave", lo, hi)]
    support = sorted(theirs)
    p = np.array([theirs[n] for n in support])
    for prompts in draws:
        ours = Counter(len(p) - 2 for p in prompts)
        assert set(ours) <= set(support)
        assert _chisquare(np.array([ours[n] for n in support]), p) > 1e-3
    uniform = Counter(np.random.default_rng(1).choice(support, size=DRAWS).tolist())
    assert _chisquare(np.array([uniform[n] for n in support]), p) < 1e-6


def test_interleave_sep_variant_is_declared():
    """Their reported interleave numbers are of a ``_sep`` variant their released code lacks:
    declared (NOT_THEIRS with its source lines, the task's docstring)."""
    from analysis.evidence.huang_protocol import NOT_THEIRS
    sep = [x for x in NOT_THEIRS if "_sep" in x]
    assert sep and "line 501" in sep[0] and "line 144" in sep[0]
    assert "_sep" in tasks.huang.__doc__
