"""An example task file with a known training-length transition: does a string contain a b?

The symbol b only occurs in strings of length >= 4 (shorter strings are all a's), so a model
trained on lengths 1..3 never sees a b and cannot learn the task; trained on 1..L with L >= 4 it
can, and the task has a one-count C-RASP[] program (#b > 0), so NoPE is expected to generalize
from there on. `rasp curve` recovers that transition (tests/test_curve.py):

    rasp curve --task-file tasks/examples/late_b.py --pe nope --train-lengths 3,8 --preset quick

A string that holds b holds at least half b's, so the fraction of b's a NoPE head averages stays
away from 0 at every length.
"""

NAME = "late_b"
VOCAB = ["a", "b"]
KIND = "membership"          # one label (yes / no) after BOS w SEP
LENGTHS = range(1, 9)        # training lengths; the protocol tests up to twice the longest
FIRST_B = 4                  # the shortest length at which a b can occur


def inputs(rng, n):
    """n symbols: below FIRST_B all a's; from FIRST_B on, half of the strings are all a's and
    half hold between n/2 and n b's at random positions."""
    if n < FIRST_B or rng.integers(0, 2) == 0:
        return ["a"] * n
    k = int(rng.integers((n + 1) // 2, n + 1))
    w = ["b"] * k + ["a"] * (n - k)
    return [w[i] for i in rng.permutation(n)]


def target(tokens):
    """True when the string contains a b."""
    return "b" in tokens
