"""Issue 51: where the interpreter raises, bool typing of a mean of a mean of bools, and no
internal error on a None-default mean feeding another mean.

The truth is the interpreter: each compiled model is compared with ``rasp.evaluate`` on every
input of every length (one batch per length and each input alone), and a refusal must be a
reasoned one (``UnsupportedError`` naming the input and the operation), never the gate's
``VerificationError`` nor an internal error."""

import itertools

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import rasp
from compiler import CompilerError, UnsupportedError, VerificationError, compile_program
from rasp import aggregate, indices, run_source, select, tokens, tokens_int
from rasp.equality import values_equal
from rasp.ir import Aggregate, numerical

from compiler_fuzz import VOCAB, outcomes, programs


def _agree(w, g) -> bool:
    ew, eg = isinstance(w, Exception), isinstance(g, Exception)
    return (ew and eg) or (not ew and not eg and values_equal(w, g, strict=True))


def mismatches(cm, prog, vocab, n_max: int, causal: bool = False) -> int:
    """Inputs of length 1..n_max where the model and the interpreter differ (a value, or one
    raising where the other does not), each input run alone and each length as one batch."""
    bad = 0
    ev = lambda b: rasp.evaluate(prog, b, causal=True if causal else None)   # noqa: E731
    for n in range(1, n_max + 1):
        batch = [list(x) for x in itertools.product(vocab, repeat=n)]
        for w, g in zip(outcomes(ev, batch), outcomes(cm.run, batch)):
            bad += not _agree(w, g)
        for x in batch:
            bad += not _agree(*(outcomes(f, [x])[0] for f in (ev, cm.run)))
    return bad


def raising_inputs(prog, vocab, n_max: int) -> list:
    """Every input of length 1..n_max on which the interpreter raises."""
    out = []
    for n in range(1, n_max + 1):
        batch = [list(x) for x in itertools.product(vocab, repeat=n)]
        got = outcomes(lambda b: rasp.evaluate(prog, b), batch)
        out += [x for x, g in zip(batch, got) if isinstance(g, Exception)]
    return out


def exact_or_reasoned_refusal(prog, vocab, n_max: int, check_len: int) -> str:
    """Compile ``prog``; a model must agree with the interpreter on every input up to
    ``check_len``; a refusal must be an ``UnsupportedError`` (never the gate's, never an
    internal error). Returns ``"compiled"`` or the refusal's message."""
    try:
        cm = compile_program(prog, vocab, n_max)
    except CompilerError as e:
        assert not isinstance(e, VerificationError), str(e)
        assert isinstance(e, UnsupportedError), str(e)
        assert "internal error" not in str(e)
        return str(e)
    assert mismatches(cm, prog, vocab, check_len) == 0
    return "compiled"


# -- D1: a max / min over a selected None ----------------------------------------------------
SELECTS = {"idx==tok": lambda: select(indices, tokens_int, "=="),
           "tok<idx": lambda: select(tokens_int, indices, "<"),
           "idx>=idx": lambda: select(indices, indices, ">="),
           "tok==tok": lambda: select(tokens_int, tokens_int, "==")}


def d1(inner: str, outer: str, reduction: str):
    """``max`` / ``min`` over a mean whose default is None."""
    x = aggregate(SELECTS[inner](), tokens_int, default=None)
    return aggregate(SELECTS[outer](), x, reduction=reduction)


def test_d1_by_hand():
    prog = d1("idx==tok", "idx>=idx", "max")
    with pytest.raises(rasp.RASPError):                 # [1]: no key has index 1 -> None
        rasp.evaluate(prog, [[1]])
    assert rasp.evaluate(prog, [[0, 1, 2]])[0].tolist() == [2, 2, 2]
    with pytest.raises(UnsupportedError, match=r"input \[1\].*max over"):
        compile_program(prog, [0, 1, 2], 7)


@pytest.mark.parametrize("n_max", [3, 7])           # the gate: exhaustive at 3, sampled at 7
@pytest.mark.parametrize("reduction", ["max", "min"])
@pytest.mark.parametrize("inner,outer", [("idx==tok", "idx>=idx"), ("tok<idx", "tok==tok"),
                                         ("idx==tok", "tok==tok")])
def test_d1_family_never_returned_wrong(inner, outer, reduction, n_max):
    prog = d1(inner, outer, reduction)
    bad = raising_inputs(prog, [0, 1, 2], 4)
    got = exact_or_reasoned_refusal(prog, [0, 1, 2], n_max, 4)
    if bad:                       # the interpreter raises: refused, with an input and the op
        assert got != "compiled" and "input [" in got and reduction in got


# -- D2: an intermediate s-op mixing strings and numbers -------------------------------------
D2_VOCAB = list("abcdefghij")


def d2(cond: str, out: str):
    env = run_source(f'c = {cond};\nm = 0 if c else tokens;\ny = {out};')
    return env["y"]


@pytest.mark.parametrize("cond", ['tokens == "j" and indices == 0', 'tokens == "j"',
                                  'indices == 2'])
@pytest.mark.parametrize("out", ['m == "a"', 'm != 0'])
def test_d2_family_intermediate_mixing_is_refused_with_the_input(cond, out):
    prog = d2(cond, out)
    with pytest.raises(rasp.RASPError):
        rasp.evaluate(prog, [list("jbc")])
    with pytest.raises(UnsupportedError, match=r"input \[.*mix strings and numbers"):
        compile_program(prog, D2_VOCAB, 4)


def test_d2_intermediate_that_never_mixes_in_one_sequence_compiles():
    """``"z" if length > 2 else 0``: strings and numbers in the value set, never in one
    sequence; every input runs (1,110 at length <= 3), none raises: compiled, exact."""
    prog = run_source('m = "z" if length > 2 else 0;\ny = m == "z";')["y"]
    assert exact_or_reasoned_refusal(prog, D2_VOCAB, 3, 3) == "compiled"


# -- D3: a mean of a mean of bools, typed as the interpreter types it -------------------------
BOOL_SELECTS = {"eq": lambda: select(indices, indices, "=="),
                "le": lambda: select(indices, indices, "<="),
                "tq": lambda: select(tokens_int, indices, "=="),
                "sh": lambda: select(indices, indices + 1, "==")}


@pytest.mark.parametrize("s1,s2", list(itertools.product(BOOL_SELECTS, BOOL_SELECTS)))
@pytest.mark.parametrize("d1_,d2_", [(False, False), (True, False), (False, True)])
def test_d3_mean_of_a_mean_of_bools_compiles_exactly(s1, s2, d1_, d2_):
    inner = aggregate(BOOL_SELECTS[s1](), tokens_int == 1, default=d1_)
    prog = aggregate(BOOL_SELECTS[s2](), inner, default=d2_)
    cm = compile_program(prog, [0, 1, 2], 3)           # was a gate refusal (True vs 1)
    assert mismatches(cm, prog, [0, 1, 2], 3) == 0


#: the inner mean's selector may select several keys: a None among them raises in the
#: interpreter, which the model cannot tell from an average (a reasoned refusal)
NONE_AVERAGED = {("tq", "le"), ("tq", "tq"), ("sh", "le"), ("sh", "tq")}


@pytest.mark.parametrize("s1,s2", list(itertools.product(BOOL_SELECTS, BOOL_SELECTS)))
@pytest.mark.parametrize("d2_", [None, False, True])
def test_d3_mean_of_a_none_padded_mean_of_bools_compiles_exactly(s1, s2, d2_):
    """The 48 shapes with a None-default inner mean of bools (11 were gate refusals: the
    interpreter evaluates the sequences of one length as one array; one ``None`` in it makes
    the outer mean keep each value as it is and turn the bools into 0/1 for the whole batch,
    ``[[0], [1], [2]]`` -> ``[[0], [None], [None]]`` while ``[[0]]`` alone -> ``[[False]]``).
    Every input of every length up to 4, each length as one batch and each input alone."""
    inner = aggregate(BOOL_SELECTS[s1](), tokens_int == 1, default=None)
    prog = aggregate(BOOL_SELECTS[s2](), inner, default=d2_)
    if (s1, s2) in NONE_AVERAGED:
        with pytest.raises(UnsupportedError, match="which may be None, over a selector"):
            compile_program(prog, [0, 1, 2], 4)
        return
    cm = compile_program(prog, [0, 1, 2], 4, raising="declare")
    assert mismatches(cm, prog, [0, 1, 2], 4) == 0


def test_d3_none_padding_anywhere_in_the_batch_types_it():
    """Truths read off the interpreter's rules: alone, ``[0]``'s inner mean is a bool array
    and the outer moves ``False``; in a batch with ``[1]`` (whose only query selects no key:
    ``None``) the array holds objects and the outer mean gives the int 0."""
    inner = aggregate(select(tokens_int, indices, "=="), tokens_int == 1, default=None)
    prog = aggregate(select(indices, indices, "=="), inner, default=None)
    cm = compile_program(prog, [0, 1, 2], 3)
    alone, batch = cm.run([[0]]), cm.run([[0], [1]])
    assert alone.tolist() == [[False]] and type(alone.tolist()[0][0]) is bool
    assert batch.tolist() == [[0], [None]] and type(batch.tolist()[0][0]) is int


def test_d3_a_truncated_inner_mean_moves_bools():
    """kqv's truncated mean of bools moves the bools when no query averages (the
    interpreter's shortcut precedes the truncation) and is 0/1 otherwise; the same through an
    outer mean (a fuzzer's gate refusal at max_seq_len 16: [False] vs [0])."""
    inner = Aggregate(select(indices, indices, "<="), tokens_int == 1, default=None,
                      truncate=True)
    prog = aggregate(select(indices, indices, "=="), inner, default=False)
    cm = compile_program(prog, [0, 1, 2], 4)
    assert mismatches(cm, prog, [0, 1, 2], 4) == 0


def test_d3_by_hand():
    inner = aggregate(select(tokens_int, indices, "=="), tokens_int == 1, default=False)
    prog = aggregate(select(indices, indices, "=="), inner, default=False)
    cm = compile_program(prog, [0, 1, 2], 3)
    # [0]: query 0 selects key 0 (token 0): False, a bool; [0, 0]: query 0 averages two
    assert cm.run([[0]])[0].tolist() == [False] == rasp.evaluate(prog, [[0]])[0].tolist()
    assert cm.run([[0, 0]])[0].tolist() == [0, 0] == rasp.evaluate(prog, [[0, 0]])[0].tolist()


# -- D4: a None-default mean feeding another mean --------------------------------------------
@pytest.mark.parametrize("s1,s2", [("tq", "eq"), ("tq", "le"), ("sh", "eq"), ("le", "sh")])
@pytest.mark.parametrize("t1,t2", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("default", [None, 0])
@pytest.mark.parametrize("annotate", [False, True])
def test_d4_none_default_mean_into_a_mean_never_an_internal_error(s1, s2, t1, t2, default,
                                                                  annotate):
    inner = Aggregate(BOOL_SELECTS[s1](), tokens_int, default=None, truncate=t1)
    inner = numerical(inner) if annotate else inner
    prog = Aggregate(BOOL_SELECTS[s2](), inner, default=default, truncate=t2)
    exact_or_reasoned_refusal(prog, [1, 2, 3], 3, 3)


def test_d4_reproduced_a_none_padded_mean_into_a_mean_too_large_to_enumerate():
    """Reproduced (issue 51's fuzzer profile: None defaults at max_seq_len 16): the outer
    mean's value set is too large to enumerate at 16, and its lowering skipped the None check
    (a TypeError in the head builder: "internal error"); at 3 the same program was refused
    with the reason. Both lengths now give the reason."""
    VOC = ["1", "2", "3"]
    inner = Aggregate(select(tokens_int, indices - 1, "=="), tokens == "1", default=None)
    prog = Aggregate(select(tokens_int, indices - 1, "<"), inner, default=0)
    with pytest.raises(rasp.RASPError):      # query 3 averages [None, None, 1.0, None]
        rasp.evaluate(prog, [["1", "1", "1", "1"]])
    for n in (3, 16):
        with pytest.raises(UnsupportedError, match="which may be None, over a selector that "
                           "may select several keys"):
            compile_program(prog, VOC, n)


D4_SELECTS = [lambda: select(tokens_int, indices, "<"), lambda: select(indices, indices, "<"),
              lambda: select(tokens_int, indices - 1, "=="),
              lambda: select(indices, tokens_int, "=="),
              lambda: select(indices, indices, "<=") & select(indices, indices, "!="),
              lambda: select(indices - 1, indices - 1, "==") | select(indices, indices, "!=")]


@st.composite
def none_mean_into_mean(draw):
    """Issue 51's D4 profile: a None-default mean (maybe truncated, maybe annotated) of
    numbers, bools or floats feeding another mean (defaults None, 0, False, True, -1, 0.5),
    causal or not."""
    causal = draw(st.booleans())
    with rasp.causal_mode(causal):
        v = draw(st.sampled_from([tokens_int, indices, tokens == "1", tokens_int * 0.5,
                                  indices < 2]))
        inner = Aggregate(draw(st.sampled_from(D4_SELECTS))(), v, default=None,
                          truncate=draw(st.booleans()))
        if draw(st.booleans()):
            inner = numerical(inner)
        outer = Aggregate(draw(st.sampled_from(D4_SELECTS))(), inner,
                          default=draw(st.sampled_from([None, 0, False, True, -1, 0.5])),
                          truncate=draw(st.booleans()))
    return outer, causal


@seed(4)
@settings(max_examples=25, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(none_mean_into_mean())
def test_d4_none_padded_means_into_means_at_16_never_an_internal_error(case):
    """At max_seq_len 16, causal or not: a compiled model or a reason (``UnsupportedError``),
    never an internal error; a compiled model agrees with the interpreter on every input up
    to length 4 (each length one batch, each input alone)."""
    prog, causal = case
    try:
        cm = compile_program(prog, ["1", "2", "3"], 16, causal=causal)
    except CompilerError as e:
        assert "internal error" not in str(e) and "verification of the" not in str(e), str(e)
        assert isinstance(e, UnsupportedError), str(e)
        return
    assert mismatches(cm, prog, ["1", "2", "3"], 4, causal) == 0


# -- refused by default; raising="declare" lists the inputs ------------------------------------
def _lookup_program():
    return run_source("y = [5, 6, 7][length] + tokens_int;")["y"]      # fails from length 3


def test_the_default_refuses_naming_the_input_and_the_operation():
    prog = _lookup_program()
    for kw in ({}, {"raising": "refuse"}):
        with pytest.raises(UnsupportedError, match=r"raises on input \[1, 1, 1\].*map '.*' "
                           r"at 1:5.*refused \(the default.*raising='declare'") as e:
            compile_program(prog, [1, 2], 4, **kw)
        assert "\n" not in e.value.message          # one line (str() adds the source)
    # lengths 1..2 never reach the failing lookup: compiled by default, exact
    assert compile_program(prog, [1, 2], 2).run([[1, 2]]).tolist() == [[8, 9]]
    with pytest.raises(CompilerError, match="raising must be 'refuse' or 'declare'"):
        compile_program(prog, [1, 2], 2, raising="ignore")
    with pytest.raises(CompilerError, match="raising must be"):
        compile_program(prog, [1, 2], 2, raising="raise")


def test_raising_inputs_are_listed_and_the_model_raises_on_them():
    prog = _lookup_program()
    cm = compile_program(prog, [1, 2], 4, raising="declare")
    listed = cm.stats["raising_inputs"]
    # the first four raising inputs in enumeration order (the search stops there)
    assert [x for x, _ in listed] == raising_inputs(prog, [1, 2], 4)[:4]
    assert cm.stats["raising_search"][1] == "all"
    for x, message in listed:
        with pytest.raises(rasp.RASPError):
            cm.run([x])
        assert "lookup of 3 failed" in message
    assert mismatches(cm, prog, [1, 2], 4) == 0


# -- property: random programs with a raising operation: refused, never returned --------------
@st.composite
def raising_programs(draw):
    """A random program (``compiler_fuzz.programs``) with one operation that raises on some
    inputs: a max / min over a None-default mean of it, a ternary mixing strings with it, or a
    lookup that fails from some position."""
    p = draw(programs())
    kind = draw(st.sampled_from(["none_order", "mixed", "lookup"]))
    if kind == "none_order":
        x = aggregate(select(indices, tokens_int, draw(st.sampled_from(["==", "<"]))), p,
                      default=None)
        return aggregate(select(indices, indices, draw(st.sampled_from([">=", "<=", "=="]))), x,
                         reduction=draw(st.sampled_from(["max", "min"])))
    if kind == "mixed":
        env = run_source(f'm = 0 if tokens == "{draw(st.sampled_from(VOCAB))}" else "s";')
        return env["m"] == draw(st.sampled_from([0, "s"])) if draw(st.booleans()) else env["m"]
    k = draw(st.integers(1, 3))
    return run_source(f"y = {list(range(k))}[indices];")["y"] + p * 0


@seed(51)
@settings(max_examples=30, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(raising_programs())
def test_random_programs_with_a_raising_operation_are_refused_never_returned(prog):
    """By default (no option): a program on which the interpreter raises for some input of
    the declared vocabulary and lengths is refused with a reason (never the gate's, never an
    internal error) and never returned; one that never raises there is exact."""
    n_max = 4
    bad = raising_inputs(prog, VOCAB, n_max)
    try:
        cm = compile_program(prog, VOCAB, n_max)
    except CompilerError as e:
        assert not isinstance(e, VerificationError), str(e)
        assert "internal error" not in str(e), str(e)
        assert isinstance(e, UnsupportedError), str(e)      # a reason, naming what
        return
    assert not bad, f"returned although the interpreter raises on {bad[0]}"
    assert mismatches(cm, prog, VOCAB, n_max) == 0


@seed(52)
@settings(max_examples=15, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(raising_programs())
def test_random_raising_programs_declared_raise_where_the_interpreter_raises(prog):
    """With ``raising="declare"``: compiled or refused (the gate included: a ``max`` over a
    None-padded mean of bools may still be typed 1 where the interpreter says True); a
    compiled model lists inputs where the interpreter raises and agrees with it on every
    input (raising there)."""
    n_max = 4
    try:
        cm = compile_program(prog, VOCAB, n_max, raising="declare")
    except CompilerError as e:
        assert "internal error" not in str(e), str(e)
        return
    bad = raising_inputs(prog, VOCAB, n_max)
    assert all(x in bad for x, _ in cm.stats.get("raising_inputs", []))
    assert bool(bad) == bool(cm.stats.get("raising_inputs"))
    assert mismatches(cm, prog, VOCAB, n_max) == 0
