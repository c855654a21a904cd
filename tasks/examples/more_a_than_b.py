"""An example task file: is a string over {a, b} made of more a's than b's?

Your own task, outside the catalogue (`tasks/custom.py` gives the contract):

    rasp score --task-file tasks/examples/more_a_than_b.py --pe nope

The language is not regular (it needs a counter), so no regular expression describes it; a
task file does. A C-RASP[] program exists (compare two counts: #a > #b), so Huang et al.
2025's theory predicts that a transformer without positional encoding (NoPE) generalizes.
"""

NAME = "more_a_than_b"
VOCAB = ["a", "b"]
KIND = "membership"          # one label (yes / no) after BOS w SEP
LENGTHS = range(1, 21)       # training lengths; the protocol tests up to twice the longest


def inputs(rng, n):
    """n symbols: half of the strings have more a's than b's, half do not."""
    more_a = bool(rng.integers(0, 2))
    while True:
        w = [VOCAB[i] for i in rng.integers(0, 2, size=n)]
        if (w.count("a") > w.count("b")) == more_a:
            return w


def target(tokens):
    """True when the string has more a's than b's."""
    return tokens.count("a") > tokens.count("b")
