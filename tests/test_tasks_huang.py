"""Huang et al. 2025 tasks (tasks/huang.py): names of issue 10, generators against independent
ground truths (Python regular expressions for the languages, Counter / sorted / int() for the
algorithmic tasks), formats of the released generators."""

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
    assert sorted(tasks.HUANG_TASKS) == sorted(NAMES)
    for n in NAMES:
        t = tasks.get_task(n)
        assert "Huang" in t.source and t.kind == "next_token"


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
