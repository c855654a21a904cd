"""Value-set growth of imported Tracr programs (issue 38 item 5).

Tracr's ``make_pair_balance`` computes ``LinearSequenceMap(opens, closes, 1, -1)``, which
``rasp.from_tracr`` brings in as ``1 * opens + -1 * closes``; the project's own version writes
``opens - closes``. Both are one mean over ``select(indices, indices, <=)`` of a value in
``{-1, 0, 1}``. The independent truths: the set of every ``k/m`` with ``|k| <= m <= n``
(enumerated here by brute force with ``fractions``), the interpreter on sampled and on
balanced inputs, and the project's own ``shuffle_dyck``'s value sets (the imported one grows no
faster). Compile times are measured by ``python -m bench.bench_compiler_growth``, not here.
"""

import logging
from fractions import Fraction

import numpy as np
import pytest

import rasp
from compiler import compile_program
from compiler.basis_inference import infer_bases
from compiler.library import make_pair_balance, make_shuffle_dyck
from rasp.equality import values_equal

# hard imports: tracr-pypi is in the test extra, so a missing install fails the suite
import tracr.compiler.lib as tracr_lib  # noqa: E402
import tracr.rasp.rasp as tr  # noqa: E402

logging.getLogger("absl").setLevel(logging.ERROR)


def _balance_fractions(n: int) -> set:
    """Every mean of 1..n values in {-1, 0, 1}: k/m with |k| <= m <= n."""
    return {Fraction(k, m) for m in range(1, n + 1) for k in range(-m, m + 1)}


def _set_of(sop, vocab, n):
    vs = infer_bases(sop, vocab, n, False)
    return vs.sets[sop.id]


@pytest.mark.parametrize("n", [4, 16])
def test_imported_pair_balance_is_one_mean_of_the_differences(n):
    """Tracr's pair balance has exactly the values k/m (|k| <= m <= n), as the project's own
    ``opens - closes`` -- not the product of the two means' sets."""
    want = _balance_fractions(n)
    imported = rasp.from_tracr(tracr_lib.make_pair_balance(tr.tokens, "(", ")"))
    got = {Fraction(v).limit_denominator(n) for v in _set_of(imported, list("()x"), n)}
    assert got == want
    own = make_pair_balance(rasp.tokens, "(", ")")
    assert len(_set_of(own, list("()x"), n)) == len(want)


def test_negated_first_operand_is_the_negated_set():
    """``-1 * opens + closes`` (the first operand scaled by -1) has the negated values of
    ``opens - closes``: the same set, since it is symmetric; and ``-(opens) - closes`` of two
    indicator means is every -k/m with 0 <= k <= m (both in {0, 1}, never both 1)."""
    n = 6
    opens = rasp.numerical(rasp.aggregate(rasp.select(rasp.indices, rasp.indices, "<="),
                                          rasp.numerical(rasp.tokens == "("), default=0))
    closes = rasp.numerical(rasp.aggregate(rasp.select(rasp.indices, rasp.indices, "<="),
                                           rasp.numerical(rasp.tokens == ")"), default=0))
    s = rasp.numerical(-1 * opens - closes)
    got = {Fraction(v).limit_denominator(n) for v in _set_of(s, list("()x"), n)}
    assert got == {Fraction(-k, m) for m in range(1, n + 1) for k in range(0, m + 1)}


def _dyck_value_set_sizes(sop, n):
    vs = infer_bases(sop, list("()[]"), n, False)
    return sorted((len(v) for v in vs.sets.values()), reverse=True)


def test_imported_shuffle_dyck_value_sets_no_larger_than_the_projects():
    """At max_seq_len 32 the largest value sets of Tracr's ``make_shuffle_dyck`` (imported) are
    those of the project's own version: 649 balance values, every k/m (before: the product of
    the two means' sets, 3,943 floats at max_seq_len 16 against 161)."""
    n = 32
    imported = rasp.from_tracr(tracr_lib.make_shuffle_dyck(["()", "[]"]))
    own = make_shuffle_dyck(["()", "[]"])
    a, b = _dyck_value_set_sizes(imported, n), _dyck_value_set_sizes(own, n)
    assert a[0] <= b[0] == len(_balance_fractions(n)), (a[:3], b[:3])


def _balanced(rng, n, pairs="()[]"):
    """A random shuffle of balanced pairs of length n (n even): the rare inputs where
    shuffle_dyck is 1 at the last position."""
    out, stack = [], []
    while len(out) < n:
        if stack and (len(out) + len(stack) >= n or rng.random() < 0.5):
            out.append(stack.pop(int(rng.integers(0, len(stack)))))
        else:
            p = int(rng.integers(0, 2))
            out.append(pairs[2 * p])
            stack.append(pairs[2 * p + 1])
    return out


def test_imported_shuffle_dyck_compiles_at_64_and_is_exact():
    """Tracr's ``make_shuffle_dyck(["()", "[]"])`` compiles at max_seq_len 64 (it was refused:
    value set too large) and equals the interpreter on random inputs of every length 1..64 and
    on balanced ones (where the answer is 1)."""
    n = 64
    sop = rasp.from_tracr(tracr_lib.make_shuffle_dyck(["()", "[]"]))
    cm = compile_program(sop, list("()[]"), n)
    rng = np.random.default_rng(38)
    inputs = [[str(c) for c in rng.choice(list("()[]"), size=m)] for m in range(1, n + 1)]
    inputs += [_balanced(rng, m) for m in range(2, n + 1, 2)]
    ones = 0
    for x in inputs:
        want = rasp.evaluate(sop, [x])[0]
        got = cm.run([x])[0]
        assert all(values_equal(w, g) for w, g in zip(want, got)), ("".join(x), want, got)
        ones += int(want[-1] == 1)
    assert ones >= 32       # the balanced inputs were checked where the answer is 1


def test_the_rule_reads_through_unit_scalings_only():
    """``2 * opens - closes`` is not a difference of dependent means (its floats are not the
    mean's): its values are the independent product, a superset of the rule's."""
    n = 5
    sel = rasp.select(rasp.indices, rasp.indices, "<=")
    opens = rasp.numerical(rasp.aggregate(sel, rasp.numerical(rasp.tokens == "("), default=0))
    closes = rasp.numerical(rasp.aggregate(sel, rasp.numerical(rasp.tokens == ")"), default=0))
    s = rasp.numerical(2 * opens - closes)
    means = {Fraction(k, m) for m in range(1, n + 1) for k in range(0, m + 1)}
    product = {2 * a - b for a in means for b in means}
    got = {Fraction(v).limit_denominator(60) for v in _set_of(s, list("()x"), n)}
    assert got == product
