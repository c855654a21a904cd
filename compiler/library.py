"""The compiler's program corpus, written with the Python API (``rasp.ir``).

The programs of the peer size table in ``docs/compiler.md`` (Tracr's library, reimplemented
from their published definitions: same operations, our dialect), with the vocabulary and
``max_seq_len`` at which the peer was measured. Used by the tests and
``bench/bench_compiler.py``.

``PEER_TABLE`` rows: ``name -> (builder, vocab, max_seq_len, peer)`` where ``peer`` holds the
published Tracr sizes (layers = attention+MLP pairs, heads, d_model, MLP hidden, params).
"""

from __future__ import annotations

import random

from rasp.ir import (SOp, aggregate, indices, length, numerical, select, selector_width,
                     tokens, tokens_int)

__all__ = ["make_length", "make_reverse", "make_hist", "make_frac_prevs", "make_sort_unique",
           "make_sort", "make_sort_freq", "make_pair_balance", "make_shuffle_dyck",
           "make_shift_by", "make_detect_pattern", "make_count_less_freq", "make_count",
           "PEER_TABLE", "peer_programs", "tracr_lib_programs", "tracr_corpus"]


def make_length() -> SOp:
    """``length`` as a selector width of an all-true select (1 attention layer)."""
    return selector_width(select(tokens, tokens, "TRUE")).named("length")


def make_reverse(sop: SOp = tokens) -> SOp:
    """``reverse``: ``aggregate(select(indices, length - indices - 1, ==), sop)``."""
    opp = (make_length() - indices).named("opp_idx")
    opp = (opp - 1).named("opp_idx_1")
    flip = select(indices, opp, "==").named("flip")
    return aggregate(flip, sop).named("reverse")


def make_hist(sop: SOp = tokens) -> SOp:
    """``hist``: how many tokens equal each token."""
    return selector_width(select(sop, sop, "==")).named("hist")


def make_frac_prevs(bools: SOp) -> SOp:
    """``frac_prevs``: fraction of positions ``<= i`` where ``bools`` holds (numerical)."""
    bools = numerical(bools)
    prevs = select(indices, indices, "<=").named("prevs")
    return numerical(aggregate(prevs, bools, default=0)).named("frac_prevs")


def make_sort_unique(vals: SOp, keys: SOp) -> SOp:
    """``sort_unique``: ``vals`` ordered by (unique) ``keys``."""
    smaller = select(keys, keys, "<").named("smaller")
    target_pos = selector_width(smaller).named("target_pos")
    sel_new = select(target_pos, indices, "==").named("sel_new")
    return aggregate(sel_new, vals).named("sort")


def make_sort(vals: SOp, keys: SOp, max_seq_len: int, min_key: float) -> SOp:
    """``sort`` with repeated keys: keys made unique by ``key + min_key * index /
    max_seq_len`` (stable)."""
    keys = (keys + indices * (min_key / max_seq_len)).named("keys_unique")
    return make_sort_unique(vals, keys)


def make_sort_freq(max_seq_len: int, sop: SOp = tokens) -> SOp:
    """``sort_freq``: tokens by descending frequency."""
    hist = (-1 * make_hist(sop)).named("neg_hist")
    return make_sort(sop, hist, max_seq_len, min_key=1).named("sort_freq")


def make_pair_balance(sop: SOp, open_token: str, close_token: str) -> SOp:
    """``pair_balance``: fraction of opens minus fraction of closes up to each position."""
    opens = numerical(make_frac_prevs(sop == open_token)).named(f"opens_{open_token}")
    closes = numerical(make_frac_prevs(sop == close_token)).named(f"closes_{close_token}")
    return numerical(opens - closes).named("pair_balance")


def make_shuffle_dyck(pairs: list[str], sop: SOp = tokens) -> SOp:
    """``shuffle_dyck``: 1 where the whole input is balanced for every bracket pair."""
    balances = [make_pair_balance(sop, p[0], p[1]) for p in pairs]
    any_negative = balances[0] < 0
    for b in balances[1:]:
        any_negative = any_negative | (b < 0)
    any_negative = numerical(any_negative * 1).named("any_negative")
    select_all = select(indices, indices, "TRUE")
    has_neg = numerical(aggregate(select_all, any_negative, default=0)).named("has_neg")
    all_zero = balances[0] == 0
    for b in balances[1:]:
        all_zero = all_zero & (b == 0)
    select_last = select(indices, length - 1, "==").named("select_last")
    last_zero = aggregate(select_last, all_zero).named("last_zero")
    not_has_neg = (has_neg == 0).named("not_has_neg")
    return (last_zero & not_has_neg).named("shuffle_dyck")


def make_shift_by(offset: int, sop: SOp = tokens, default=0) -> SOp:
    """``shift_by(k)``: the value ``k`` positions earlier (default where there is none)."""
    sel = select(indices, indices - offset, "==").named(f"shift_{offset}")
    return aggregate(sel, sop, default=default).named(f"shift_by_{offset}")


def make_detect_pattern(pattern: str, sop: SOp = tokens) -> SOp:
    """``detect_pattern``: True where the last ``len(pattern)`` tokens spell ``pattern``."""
    n = len(pattern)
    result = None
    for i, ch in enumerate(pattern):
        shifted = make_shift_by(n - i - 1, sop, default="_") if n - i - 1 else sop
        m = shifted == ch
        result = m if result is None else (result & m)
    return result.named("detect_pattern")


def make_count_less_freq(n: int, sop: SOp = tokens) -> SOp:
    """``count_less_freq(n)``: how many tokens occur at most ``n`` times."""
    hist = make_hist(sop)
    return selector_width(select(hist, n, "<=")).named("count_less_freq")


def make_count(token: str, sop: SOp = tokens) -> SOp:
    """``count(tokens, t)``: how many tokens equal ``t`` (at every position)."""
    return selector_width(select(sop, token, "==")).named(f"count_{token}")


def peer_programs(max_seq_len: int | None = None) -> dict:
    """``{name: (sop, vocab, max_seq_len, peer_sizes)}`` for the peer table (fresh IR).

    ``max_seq_len`` overrides the peer's length (programs that depend on it, ``sort`` and
    ``sort_freq``, are built for it)."""
    P = lambda layers, heads, d_model, mlp, params: dict(  # noqa: E731
        layers=layers, heads=heads, d_model=d_model, mlp_hidden=mlp, params=params)
    return {
        "reverse": (make_reverse(tokens_int), [1, 2, 3], 5, P(4, 1, 41, 30, 18755)),
        "length": (make_length(), list("abc"), 5, P(1, 1, 18, 12, 1053)),
        "hist": (make_hist(), list("abcd"), 5, P(1, 1, 19, 12, 1208)),
        "frac_prevs": (make_frac_prevs(tokens == "x"), list("abcx"), 5, P(2, 1, 14, 1, 1108)),
        "sort_unique": (make_sort_unique(tokens_int, tokens_int), [1, 2, 3, 4, 5], 5,
                        P(2, 1, 25, 12, 3091)),
        "sort": (make_sort(tokens_int, tokens_int, max_seq_len or 5, 1), [1, 2, 3, 4], 5,
                 P(3, 1, 43, 20, 17544)),
        "sort_freq": (make_sort_freq(max_seq_len or 5), list("abcd"), 5,
                      P(5, 1, 66, 30, 64122)),
        "pair_balance": (make_pair_balance(tokens, "(", ")"), list("()x"), 6,
                         P(2, 2, 17, 4, 2824)),
        "shuffle_dyck2": (make_shuffle_dyck(["()", "{}"]), list("(){}"), 6,
                          P(8, 4, 58, 292, 342674)),
        "shift_by(1)": (make_shift_by(1, default="_"), list("abc"), 5, P(1, 1, 14, 1, 624)),
        "detect_pattern(abc)": (make_detect_pattern("abc"), list("abc"), 6,
                                P(3, 2, 26, 6, 6558)),
        "count_less_freq(2)": (make_count_less_freq(2), list("abcd"), 6,
                               P(2, 1, 29, 14, 4287)),
        "count(tokens,a)": (make_count("a"), list("abc"), 6, P(1, 1, 20, 14, 1269)),
    }


PEER_TABLE = ("reverse", "length", "hist", "frac_prevs", "sort_unique", "sort", "sort_freq",
              "pair_balance", "shuffle_dyck2", "shift_by(1)", "detect_pattern(abc)",
              "count_less_freq(2)", "count(tokens,a)")


def tracr_lib_programs() -> dict:
    """Every program-making function of Tracr's own library (``tracr.compiler.lib``) as Tracr
    programs (``tracr.rasp``, to be imported with :func:`rasp.from_tracr`): ``name ->
    (program, vocab)``; ``vocab`` is a token list, or ``"unique"`` for ``make_sort_unique``
    (distinct keys, as Tracr requires). Used by ``tests/test_tracr_import.py`` and
    ``bench/bench_compiler.py`` (Tracr against us on Tracr's own programs).

    Raises:
        ImportError: Tracr (``tracr-pypi``, a test extra) is not installed.
    """
    import tracr.compiler.lib as L   # optional: Tracr (a test extra) only for the comparison
    import tracr.rasp.rasp as tr
    t = tr.tokens
    return {
        "make_length": (L.make_length(), list("abc")),
        "make_reverse": (L.make_reverse(t), list("abc")),
        "make_pair_balance": (L.make_pair_balance(t, "(", ")"), list("()x")),
        "make_shuffle_dyck": (L.make_shuffle_dyck(["()", "[]"]), list("()[]")),
        "make_shuffle_dyck2": (L.make_shuffle_dyck2(), list("(){}")),
        "make_hist": (L.make_hist(), list("abc")),
        "make_sort_unique": (L.make_sort_unique(t, t), "unique"),
        "make_sort": (L.make_sort(t, t, max_seq_len=8, min_key=1), [1, 2, 3, 4]),
        "make_sort_freq": (L.make_sort_freq(8), list("abc")),
        "make_frac_prevs": (L.make_frac_prevs(t == "a"), list("ab")),
        "shift_by": (L.shift_by(2, t), list("abc")),                 # default=None padding
        "detect_pattern": (L.detect_pattern(t, "abc"), list("abc")),  # None-padded output
        "make_count_less_freq": (L.make_count_less_freq(2), list("abc")),  # lambda predicate
        "make_count": (L.make_count(t, "a"), list("abc")),
        "make_nary_sequencemap": (L.make_nary_sequencemap(lambda x, y, z: x * y + z, t, t,
                                                          tr.indices), [1, 2, 3]),
    }


def tracr_corpus(seed: int = 38, count: int = 30) -> list:
    """Random Tracr programs of the outside fuzzer's corpus shape (issue 38: Tracr's library
    functions with random arguments and small compositions of them: counts, shifts, patterns,
    fractions, balances, maps of histograms, comparisons with shifted tokens, selector widths
    of every comparison, reads at ``i + k``, numerical maps of fractions, ``and`` of shifted
    detectors, ``length - indices``): ``[(name, program, vocab)]``, the first 13 one of each
    kind, the rest drawn with ``seed``. Used by ``tests/test_compiler_nonzeros.py`` and
    ``bench/bench_compiler.py`` against Tracr's compiler.

    Raises:
        ImportError: Tracr (``tracr-pypi``, a test extra) is not installed.
    """
    import tracr.compiler.lib as L   # optional: Tracr (a test extra) only for the comparison
    import tracr.rasp.rasp as tr
    t, ix = tr.tokens, tr.indices
    rng = random.Random(seed)
    letters = list("abc")
    cmps = [tr.Comparison.EQ, tr.Comparison.LT, tr.Comparison.LEQ, tr.Comparison.GT,
            tr.Comparison.GEQ, tr.Comparison.NEQ, tr.Comparison.TRUE]

    def make(kind):
        a, b = rng.sample(letters, 2)
        k = rng.randint(1, 3)
        c = rng.choice([1, 2, 3])
        if kind == "count":
            return f"count({a})", L.make_count(t, a), letters
        if kind == "shift":
            return f"shift_by({k})", L.shift_by(k, t), letters
        if kind == "detect":
            pat = "".join(rng.choice(letters) for _ in range(rng.randint(2, 3)))
            return f"detect({pat})", L.detect_pattern(t, pat), letters
        if kind == "frac":
            return f"frac_prevs({a})", L.make_frac_prevs(t == a), letters
        if kind == "balance":
            return f"pair_balance({a}{b})", L.make_pair_balance(t, a, b), letters
        if kind == "hist_map":
            return f"hist+{c}", tr.Map(lambda x, c=c: x + c, L.make_hist()), letters
        if kind == "cmp_shift":
            return f"tokens==shift_by({k})", tr.SequenceMap(lambda x, y: x == y, t,
                                                            L.shift_by(k, t)), letters
        if kind == "width":
            op = rng.choice(cmps)
            return f"width({op.name})", tr.SelectorWidth(tr.Select(t, t, op)), [1, 2, 3]
        if kind == "agg_idx":
            return f"read(i+{k})", tr.Aggregate(tr.Select(ix, tr.Map(lambda i, k=k: i + k, ix),
                                                          tr.Comparison.EQ), t), letters
        if kind == "frac_map":
            f = L.make_frac_prevs(t == a)
            return f"{c}*frac({a})", tr.numerical(tr.Map(lambda x, c=c: c * x, f)), letters
        if kind == "count_less":
            return f"count_less_freq({k})", L.make_count_less_freq(k), letters
        if kind == "length_minus":
            return "length-indices", tr.SequenceMap(lambda x, y: x - y, L.make_length(), ix), \
                letters
        if kind == "and_eq":
            return f"({a}) and shift({k})", tr.SequenceMap(
                lambda x, y: x and y, t == a, L.shift_by(k, t == b)), letters
        raise ValueError(kind)

    kinds = ["count", "shift", "detect", "frac", "balance", "hist_map", "cmp_shift", "width",
             "agg_idx", "frac_map", "count_less", "length_minus", "and_eq"]
    return [make(kinds[i % len(kinds)] if i < len(kinds) else rng.choice(kinds))
            for i in range(count)]
