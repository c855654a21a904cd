"""Issue 39 item 5: the Python API as a notebook user (used to Tracr and TransformerLens)
calls it, cell by cell.

Truths checked: an s-op called on one input gives the reversed string / Python's own counts; a
ragged batch gives each sequence's value as evaluating it alone does, and as the compiled model
runs it; TransformerLens logits decode to the interpreter's values; every public name is listed
by ``dir()`` without importing torch; a converted Tracr program keeps the names Tracr's library
gave (``make_reverse`` names its output ``reverse``).
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

import rasp
from rasp import RASPTypeError

SRC = ("reverse = aggregate(select(indices, length - indices - 1, ==), tokens);"
       "hist = selector_width(select(tokens, tokens, ==));"
       "flip = select(indices, length - indices - 1, ==);")


@pytest.fixture(scope="module")
def env():
    return rasp.run_source(SRC)


def test_an_sop_is_called_on_one_input(env):
    assert env["reverse"]("hello") == list("olleh")
    word = "abracadabra"
    assert env["hist"](word) == [Counter(word)[c] for c in word]
    assert env["hist"](["x", "y", "x"]) == [2, 1, 2]
    n = 4
    assert env["flip"]("abcd") == [[k == n - 1 - q for k in range(n)] for q in range(n)]
    with pytest.raises(RASPTypeError, match="rasp.evaluate"):
        env["reverse"]([[1, 2], [3, 4]])            # a batch is evaluate's job
    with pytest.raises(rasp.RASPValueError):
        env["reverse"]("")


def test_evaluate_takes_a_ragged_batch(env):
    words = ["hi", "world", "abc", "yo"]
    out = rasp.evaluate(env["reverse"], words)
    assert isinstance(out, list) and len(out) == len(words)
    assert ["".join(o) for o in out] == [w[::-1] for w in words]
    sels = rasp.evaluate(env["flip"], ["ab", "abc"])
    assert [s.shape for s in sels] == [(2, 2), (3, 3)]
    # equal lengths: one [batch, seq] array, as before
    assert rasp.evaluate(env["reverse"], ["ab", "cd"]).shape == (2, 2)


def test_public_names_are_listed_and_resolve():
    for name in rasp.__all__:
        assert getattr(rasp, name) is not None, name
    assert {"draw", "evaluate", "select", "aggregate", "from_tracr"} <= set(dir(rasp))
    probe = ("import sys, compiler; d = dir(compiler); "
             "print(all(n in d for n in compiler.__all__), 'compile_program' in d, "
             "'torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                       timeout=120)
    assert r.stdout.split() == ["True", "True", "False"], r.stderr[-2000:]


@pytest.fixture(scope="module")
def compiled(env):
    from compiler import compile_program
    return compile_program(env["reverse"], vocab=list("abc"), max_seq_len=5)


def test_compiled_model_repr_is_readable(compiled):
    text = repr(compiled)
    assert " at 0x" not in text and text.startswith("CompiledModel(")
    assert f"layers={compiled.model.cfg.n_layers}" in text and "'reverse'" in text
    assert "max_seq_len=5" in text


def test_ragged_evaluate_matches_the_compiled_model(env, compiled):
    words = ["ab", "cabc", "b"]
    ours = rasp.evaluate(env["reverse"], words)
    model = compiled.run(words)
    assert [o.tolist() for o in ours] == [m.tolist() for m in model]


def test_transformer_lens_logits_decode_to_the_programs_values(compiled):
    pytest.importorskip("transformer_lens")
    from compiler import to_transformer_lens
    tl = to_transformer_lens(compiled)
    ids, lens = compiled.encode(["abc", "cab"])
    assert compiled.decode(tl(ids)).tolist() == [list("cba"), list("bac")]
    assert compiled.decode(tl(ids)[1]).tolist() == list("bac")       # one sequence
    ids, lens = compiled.encode(["ab", "cabc"])                      # PAD after "ab"
    got = compiled.decode(tl(ids), lens)
    assert [g.tolist() for g in got] == [list("ba"), list("cbac")]
    with pytest.raises(Exception, match="decode expects logits"):
        compiled.decode(np.zeros((1, 3, 99)))


def test_from_tracr_keeps_the_names_tracr_gave():
    pytest.importorskip("tracr")
    from tracr.compiler import lib
    from tracr.rasp import rasp as tr
    ours = rasp.from_tracr(lib.make_reverse(tr.tokens))
    assert ours.name == "reverse"                        # lib.py: .named("reverse")
    assert ours.selector.name == "reverse_selector"      # lib.py: .named("reverse_selector")
    unnamed = rasp.from_tracr(tr.Aggregate(tr.Select(tr.indices, tr.indices, tr.Comparison.EQ),
                                           tr.tokens))
    assert unnamed.name is None and unnamed.label == f"aggregate_{unnamed.id}"
