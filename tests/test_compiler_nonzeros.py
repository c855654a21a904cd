"""Non-zero weights priced by the compiler (issue 27, item 6).

The independent truths: the weights of the built model (``np.count_nonzero`` of every MLP's
``W_in`` / ``W_out`` in ``cm.model``) against the estimate the passes price with
(:func:`compiler.mlp_pricing.mlp_nonzeros`), and Tracr's own compiler
(``tracr.compiler.compiling.compile_rasp_to_model``: every array of its ``params``) against
our compiled models on every program of Tracr's library.
"""

import logging

import jax
import numpy as np
import pytest
import torch

import rasp
from compiler import compile_program
from compiler.basis_inference import infer_bases
from compiler.graph_passes import smaller
from compiler.library import PEER_TABLE, peer_programs, tracr_lib_programs
from compiler.mlp_pricing import mlp_nonzeros
from compiler.rasp_to_graph import build_graph

# hard import: tracr-pypi is in the test extra, so a missing install fails the suite
from tracr.compiler import compiling  # noqa: E402

logging.getLogger("absl").setLevel(logging.ERROR)

#: hand-written programs covering the MLP constructions: lookup tables (categorical and
#: numerical outputs, zeros written by no unit), affine MLPs, steps over an integer affine
#: form, discretising MLPs gated by categorical inputs, ternaries built branch by branch
SOURCES = {
    "numerical_lookup": ('y = numerical(indicator(tokens == "a"));'
                         'z = aggregate(select(indices, indices, <=), y);', "z", "abc", 6),
    "affine_of_widths": ('a = selector_width(select(tokens, tokens, ==));'
                         'b = selector_width(select(tokens, "a", ==));'
                         'z = a + 2 * b - 1;', "z", "abc", 5),
    "affine_steps": ('z = length - indices - 1;', "z", "ab", 6),
    "gated_steps": ('w = selector_width(select(tokens, tokens, ==));'
                    'z = w if tokens == "a" else w + indices;', "z", "abc", 5),
    "nested_ternary": ('a = aggregate(select(indices, indices - 1, ==), tokens, "z");'
                       'c = tokens == "a";'
                       'y = a if c else (tokens if indices == 0 else "q");', "y", "abc", 5),
    "affine": ('m = numerical(aggregate(select(indices, indices, <=),'
               ' numerical(indicator(tokens == "a"))));'
               'z = numerical(2 * m - 1);', "z", "abc", 5),
    "fused_chain": ('y = (indices + 1) % 3;'
                    'z = aggregate(select(y, indices, ==), tokens) == "a";', "z", "abc", 6),
}


def _corpus():
    out = {}
    pp = peer_programs()
    for name in PEER_TABLE:
        sop, vocab, n, _ = pp[name]
        out[f"peer:{name}"] = (sop, [str(v) for v in vocab], n)
    for name, (prog, vocab) in tracr_lib_programs().items():
        out[f"tracr:{name}"] = (rasp.from_tracr(prog),
                                list("abcd") if vocab == "unique" else vocab, 8)
    for name, (src, var, vocab, n) in SOURCES.items():
        out[f"src:{name}"] = (rasp.run_source(src)[var], list(vocab), n)
    return out


CORPUS = _corpus()


def _mlp_nonzeros_of_model(cm) -> int:
    return sum(int(torch.count_nonzero(t)) for k, t in cm.model.packed_state_dict().items()
               if ".mlp.W_in" in k or ".mlp.W_out" in k)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_mlp_nonzero_estimate_matches_the_built_model(name):
    """The priced non-zeros of every MLP of the compiled graph add up to the non-zero
    ``W_in`` / ``W_out`` weights of the model ``compile_program`` builds, within 5 % (the
    estimate follows the builder's choice of construction; exact on this corpus when
    written)."""
    sop, vocab, n = CORPUS[name]
    cm = compile_program(sop, vocab, n)
    vocab = sorted(dict.fromkeys(vocab))
    cg = build_graph(sop, vocab, n, value_sets=infer_bases(sop, vocab, n, False))
    est = sum(mlp_nonzeros(c.encoding, c.expr) for c in cg.nodes if c.kind == "mlp")
    real = _mlp_nonzeros_of_model(cm)
    assert abs(est - real) <= 0.05 * max(real, 1), (est, real)


def _tracr_sizes(prog, vocab, n=8):
    model = compiling.compile_rasp_to_model(prog, vocab=set(vocab), max_seq_len=n,
                                            compiler_bos="BOS")
    leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(model.params)]
    return (int(sum(x.size for x in leaves)), int(sum((x != 0).sum() for x in leaves)),
            int(model.model_config.num_layers))


@pytest.fixture(scope="module")
def tracr_against_ours():
    rows = {}
    for name, (prog, vocab) in tracr_lib_programs().items():
        vocab = list("abcd") if vocab == "unique" else vocab
        cm = compile_program(rasp.from_tracr(prog), vocab, 8)
        rows[name] = ((cm.stats["params"], cm.stats["nonzero_params"], cm.stats["layers"]),
                      _tracr_sizes(prog, vocab))
    return rows


def test_nonzeros_no_more_than_tracr_in_total(tracr_against_ours):
    """On every program of Tracr's library (max_seq_len 8, Tracr's compiler with
    ``compiler_bos="BOS"``), our non-zero weights in total are at most Tracr's."""
    ours = sum(o[1] for o, _ in tracr_against_ours.values())
    theirs = sum(t[1] for _, t in tracr_against_ours.values())
    assert ours <= theirs, (ours, theirs)


#: Programs of Tracr's library where our model has more parameters than Tracr's, and why. Kept
#: exact: a program added here or fixed must update it (issue 38 item 4 asks for none).
KNOWN_ABOVE_TRACR = {
    # its last Aggregate has the default None over Select(target_pos, indices, ==), which the
    # value sets cannot prove selects at most one key (it does when the keys are unique, as
    # make_sort makes them); since issue 38 item 1 such a mean compiles exactly (mean head,
    # 'selected' head, one MLP: 83,140 params) where Tracr assumes one key (38,283) and our
    # earlier categorical head (17,489) relied on the gate's samples
    "make_sort",
}


def test_no_more_params_or_layers_than_tracr_on_any_library_program(tracr_against_ours):
    """Pricing non-zeros never costs parameters or layers against Tracr: per program, our
    layers are at most Tracr's, and our parameters too except :data:`KNOWN_ABOVE_TRACR`."""
    above = set()
    for name, (o, t) in tracr_against_ours.items():
        assert o[2] <= t[2], (name, o, t)
        if o[0] > t[0]:
            above.add(name)
    assert above == KNOWN_ABOVE_TRACR, (above, {n: tracr_against_ours[n] for n in above})


def test_a_fusion_that_saves_no_layer_is_priced():
    """Tracr's ``detect_pattern(tokens, "abc")``: the AND of three detectors. Fusing the
    shifted detectors' AND into the output MLP moves it a layer earlier (2 layers, Tracr 3);
    fusing the unshifted ``tokens == "a"`` map too would save no layer, only its 2 residual
    directions, for a table over the 3 tokens instead of the map's 2 values (27 units of 7
    non-zeros instead of 18, the map's 3 units of 4 staying): more parameters and non-zeros,
    so it is not fused. The model: 3 x 3 map units, then 3 x 3 x 2."""
    import tracr.compiler.lib as L
    import tracr.rasp.rasp as tr
    cm = compile_program(rasp.from_tracr(L.detect_pattern(tr.tokens, "abc")), list("abc"), 8)
    assert cm.stats["layers"] == 2
    assert cm.stats["mlp_per_layer"] == [9, 18]
    assert _mlp_nonzeros_of_model(cm) == 9 * 4 + 18 * 7


def test_the_pricing_rule():
    """``smaller``: a change is kept when params x non-zeros falls -- both fall, or the
    relative saving of one exceeds the relative growth of the other."""
    assert smaller(-1, 0, 100, 10) and smaller(0, -1, 100, 10)
    assert not smaller(0, 0, 100, 10)
    assert smaller(-10, 0.5, 100, 10)          # -10 % parameters, +5 % non-zeros
    assert not smaller(-1, 0.5, 100, 10)       # -1 % parameters, +5 % non-zeros
    assert smaller(5, -1, 100, 10)             # +5 % parameters, -10 % non-zeros
    assert not smaller(1, 1, 100, 10)
