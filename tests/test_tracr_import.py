"""Tracr programs in (rasp.from_tracr), against the real Tracr (tracr-pypi, the test extra).

The independent truth is Tracr's own evaluator (``tracr.rasp.rasp.evaluate``): every program of
Tracr's library converts and evaluates, in rasp-lab's interpreter and compiled model, to what
Tracr evaluates on random inputs.
"""

import inspect

import numpy as np
import pytest

import rasp
from compiler import compile_program
from compiler.library import tracr_lib_programs

# hard imports: tracr-pypi is in the test extra, so a missing install fails the suite
import tracr.compiler.lib as tracr_lib  # noqa: E402
import tracr.rasp.rasp as tr  # noqa: E402


PROGRAMS = tracr_lib_programs()   # every program of tracr.compiler.lib, with a vocabulary


def _inputs(vocab, n, rng):
    if vocab == "unique":
        return [int(v) for v in rng.permutation(20)[:n]]
    return [vocab[i] for i in rng.integers(0, len(vocab), n)]


def _same(want, got):
    if len(want) != len(got):
        return False
    for a, b in zip(want, got):
        if a is None or b is None:
            if not (a is None and b is None):
                return False
        elif isinstance(a, str) or isinstance(b, str):
            if a != b:
                return False
        elif isinstance(a, tuple):
            if tuple(a) != tuple(b):
                return False
        elif abs(float(a) - float(b)) > 1e-9:
            return False
    return True


def test_the_table_covers_every_program_of_tracr_lib():
    made = {n for n, f in inspect.getmembers(tracr_lib, inspect.isfunction)
            if f.__module__ == tracr_lib.__name__}
    assert made == set(PROGRAMS), made ^ set(PROGRAMS)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_lib_program_evaluates_as_tracr(name):
    prog, vocab = PROGRAMS[name]
    ours = rasp.from_tracr(prog)
    rng = np.random.default_rng(1)
    checked = nones = 0
    for n in range(1, 9):
        for _ in range(8):
            xs = _inputs(vocab, n, rng)
            want = tr.evaluate(prog, xs)
            got = rasp.evaluate(ours, [xs])[0].tolist()
            assert _same(want, got), (xs, want, got)
            checked += 1
            nones += sum(v is None for v in want)
    assert checked == 64
    if name in ("shift_by", "detect_pattern"):
        assert nones > 0                   # None really is a value here, not 0


@pytest.mark.parametrize("name", ["make_reverse", "make_hist", "make_sort_unique",
                                  "make_frac_prevs", "shift_by", "detect_pattern",
                                  "make_count_less_freq", "make_count"])
def test_lib_program_compiles_and_the_model_computes_as_tracr(name):
    prog, vocab = PROGRAMS[name]
    cm_vocab = list("abcd") if vocab == "unique" else vocab
    # "unique": distinct keys are the contract (a repeated one raises: refused by default)
    cm = compile_program(rasp.from_tracr(prog), cm_vocab, 6,
                         raising="declare" if vocab == "unique" else "refuse")
    rng = np.random.default_rng(2)
    for n in range(1, 7):
        for _ in range(6):
            xs = (list(rng.permutation(cm_vocab)[:n]) if vocab == "unique"
                  else _inputs(vocab, n, rng))
            want = tr.evaluate(prog, xs)
            got = cm.run([xs])[0].tolist()
            assert _same(want, got), (xs, want, got)


def test_names_and_sharing_are_kept():
    rev = tracr_lib.make_reverse(tr.tokens)
    ours = rasp.from_tracr(rev)
    assert ours.name.startswith("reverse")           # Tracr's label (made unique by Tracr)
    both = tr.SequenceMap(lambda a, b: a + b, rev, rev)
    conv = rasp.from_tracr(both)
    assert conv.inputs[0] is conv.inputs[1]          # one IR node per Tracr node


def test_none_default_is_a_value_in_the_ir_not_zero():
    sel = rasp.select(rasp.indices, rasp.indices + 1, "==")     # query q reads key q + 1
    out = rasp.evaluate(rasp.aggregate(sel, rasp.tokens_int, default=None), [[5, 6, 7]])[0]
    assert out.tolist() == [6, 7, None]
    zero = rasp.evaluate(rasp.aggregate(sel, rasp.tokens_int, default=0), [[5, 6, 7]])[0]
    assert zero.tolist() == [6, 7, 0]
    cm = compile_program(rasp.aggregate(sel, rasp.tokens_int, default=None), ["5", "6", "7"], 4)
    assert cm.run([["5", "6", "7"]])[0].tolist() == [6, 7, None]


def test_a_converted_program_runs_in_a_repl_session():
    s = rasp.Session()
    s.env.vars["pattern"] = rasp.from_tracr(tracr_lib.detect_pattern(tr.tokens, "ab"))
    (res,) = s.execute("p2 = pattern;")
    assert res.kind == "sop"
    shown = rasp.format_sop_value(rasp.evaluate(res.value, [list("abab")])[0])
    assert shown.startswith("[None, T, F, T]")


def test_unsupported_constructs_are_refused_naming_them():
    with pytest.raises(rasp.TracrImportError, match="ConstantSOp"):
        rasp.from_tracr(tr.Map(lambda x: x + 1, tr.ConstantSOp([1, 2, 3])))
    with pytest.raises(rasp.TracrImportError, match="ConstantSelector"):
        rasp.from_tracr(tr.SelectorWidth(tr.ConstantSelector([[True]])))
    with pytest.raises(rasp.TracrImportError, match="expects a tracr.rasp expression"):
        rasp.from_tracr(rasp.tokens)


def test_linear_sequence_map_is_arithmetic_at_tracrs_size():
    """A LinearSequenceMap comes in as IR arithmetic (a*x + b*y), not an opaque callable:
    pair_balance compiles to Tracr's own layer count with fewer parameters than Tracr's compiler
    gives it (before: 3 layers, 94,459 parameters at max_seq_len 8, 25x Tracr's), and computes
    what Tracr's evaluator computes."""
    import jax
    from tracr.compiler import compiling
    prog = tracr_lib.make_pair_balance(tr.tokens, "(", ")")
    ours = compile_program(rasp.from_tracr(prog), vocab=list("()x"), max_seq_len=8)
    theirs = compiling.compile_rasp_to_model(prog, vocab={"(", ")", "x"}, max_seq_len=8,
                                             compiler_bos="BOS")
    tracr_params = sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(theirs.params))
    our_params = sum(p.numel() for p in ours.model.parameters())
    assert ours.model.cfg.n_layers == theirs.model_config.num_layers
    assert our_params < tracr_params
    rng = np.random.default_rng(3)
    for fst, snd in ((1, -1), (0.5, 2), (-3, 0.25)):
        e = tr.numerical(tr.LinearSequenceMap(tr.numerical(tr.Map(lambda x: x, tr.indices)),
                                              tr.numerical(tr.Map(lambda x: x * 2, tr.indices)),
                                              fst, snd))
        for n in (1, 4, 7):
            xs = _inputs(list("ab"), n, rng)
            assert _same(tr.evaluate(e, xs), rasp.evaluate(rasp.from_tracr(e), [xs])[0].tolist())


def test_a_comparison_on_none_raises_as_tracr():
    """Tracr's Comparison raises on a None key or query ("key is None!"); an imported select
    whose keys may be None (an aggregate with a None default) does the same; on keys that
    cannot be None the select stays the IR's own comparison."""
    shifted = tracr_lib.shift_by(1, tr.tokens)                  # None at position 0
    width = tr.SelectorWidth(tr.Select(shifted, tr.tokens, tr.Comparison.EQ))
    with pytest.raises(ValueError, match="key is None") as theirs:
        tr.evaluate(width, list("aba"))
    # the interpreter reports a callable's own error as a RASPError naming the select (issue 38)
    with pytest.raises(rasp.RASPError, match=str(theirs.value)):
        rasp.evaluate(rasp.from_tracr(width), [list("aba")])
    plain = rasp.from_tracr(tr.SelectorWidth(tr.Select(tr.tokens, tr.tokens, tr.Comparison.EQ)))
    assert plain.selector.op == "=="


def _prefix_causal_by_tracr(prog, vocab, max_len):
    """Independent truth from Tracr's evaluator: None when every position's value is the value
    the prefix ending there gives (on every input up to ``max_len``), else a counterexample."""
    import itertools
    seqs = (itertools.permutations(range(max_len + 2), max_len) if vocab == "unique"
            else itertools.product(vocab, repeat=max_len))
    for xs in seqs:
        xs = list(xs)
        full = tr.evaluate(prog, xs)
        for i in range(max_len):
            if not _same([full[i]], [tr.evaluate(prog, xs[:i + 1])[i]]):
                return xs, i
    return None


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_causal_compile_accepts_exactly_the_prefix_causal_programs(name):
    """``causal=True`` (a decoder-only model, Tracr's ``causal=True``): a program whose values
    are prefix values compiles and computes what Tracr's evaluator computes; one whose values
    are not is refused, and Tracr's evaluator shows an input where a prefix changes a value.
    Tracr's own ``causal=True`` accepts every program and silently computes prefix values.
    ``shift_by`` / ``detect_pattern`` select with a Python predicate of the positions
    (``lambda k, q: q == k + offset``): decided on the selection matrix at max_seq_len."""
    prog, vocab = PROGRAMS[name]
    cm_vocab = [0, 1, 2, 3, 4, 5] if vocab == "unique" else vocab
    n = 4
    witness = _prefix_causal_by_tracr(prog, vocab, n)
    try:
        cm = compile_program(rasp.from_tracr(prog), cm_vocab, n, causal=True)
    except rasp.RASPError as e:
        assert "not causal" in str(e) or "length" in str(e), e
        assert witness is not None, f"{name} is prefix-causal but was refused: {e}"
        return
    assert witness is None, f"{name} compiled causal but {witness} changes with a prefix"
    import itertools
    seqs = (itertools.permutations(cm_vocab, n) if vocab == "unique"
            else itertools.product(vocab, repeat=n))
    for xs in seqs:
        xs = list(xs)
        assert _same(tr.evaluate(prog, xs), cm.run([xs])[0].tolist()), xs


def test_the_position_predicates_of_tracr_lib_compile_causal():
    """The two library programs that select with a Python predicate of the positions are
    accepted by ``causal=True`` (before: refused as 'not causal', Tracr compiles them)."""
    for prog, vocab in (PROGRAMS["shift_by"], PROGRAMS["detect_pattern"]):
        assert compile_program(rasp.from_tracr(prog), vocab, 6, causal=True).causal


def test_shift_by_selects_one_key_and_is_smaller_than_tracrs():
    """``Select(indices, indices, lambda k, q: q == k + 2)`` selects at most one key per query
    (checked on the value sets), so the categorical aggregate with a ``None`` default needs no
    head that counts the selected keys: one head, fewer parameters than Tracr's compiler gives
    it (before: 2 heads, 1,410 parameters against Tracr's 1,017)."""
    import jax
    from tracr.compiler import compiling
    prog, vocab = PROGRAMS["shift_by"]
    ours = compile_program(rasp.from_tracr(prog), vocab, 8)
    theirs = compiling.compile_rasp_to_model(prog, vocab=set(vocab), max_seq_len=8,
                                             compiler_bos="BOS")
    tracr_params = sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(theirs.params))
    assert ours.stats["heads"] == 1
    assert ours.stats["params"] <= tracr_params
