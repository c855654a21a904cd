"""Non-zero weights priced by the compiler (issue 27, item 6).

The independent truths: the weights of the built model (``np.count_nonzero`` of every MLP's
``W_in`` / ``W_out`` in ``cm.model``) against the estimate the passes price with
(:func:`compiler.graph.mlp_pricing.mlp_nonzeros`), and Tracr's own compiler
(``tracr.compiler.compiling.compile_rasp_to_model``: every array of its ``params``) against
our compiled models on every program of Tracr's library.
"""

import logging

import jax
import numpy as np
import pytest
import torch

import rasp
from bench.bench_compiler import exactness_nonzeros
from compiler import compile_program
from compiler.basis_inference import infer_bases
from compiler.graph.passes import smaller
from compiler.library import PEER_TABLE, peer_programs, tracr_lib_programs
from compiler.graph.mlp_pricing import mlp_nonzeros
from compiler.graph.rasp_to_graph import build_graph

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
    cm = compile_program(sop, vocab, n, raising="declare")   # some raise on some inputs
    vocab = sorted(dict.fromkeys(vocab))
    cg = build_graph(sop, vocab, n, value_sets=infer_bases(sop, vocab, n, False))
    est = sum(mlp_nonzeros(c.encoding, c.expr) for c in cg.nodes if c.kind == "mlp")
    real = _mlp_nonzeros_of_model(cm)
    assert abs(est - real) <= 0.05 * max(real, 1), (est, real)


def _tracr_sizes(prog, vocab, n=8):
    """Tracr's compiled model: ``(params, non-zeros, layers, unembedding non-zeros)``; its
    unembedding is a projection onto the output space applied outside ``params``
    (``assemble._make_embedding_modules``: one weight per output direction)."""
    model = compiling.compile_rasp_to_model(prog, vocab=set(vocab), max_seq_len=n,
                                            compiler_bos="BOS")
    leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(model.params)]
    enc = model.output_encoder
    unembed = len(enc.encoding_map) if hasattr(enc, "encoding_map") else 1
    return (int(sum(x.size for x in leaves)), int(sum((x != 0).sum() for x in leaves)),
            int(model.model_config.num_layers), unembed)


@pytest.fixture(scope="module")
def tracr_against_ours():
    rows = {}
    for name, (prog, vocab) in tracr_lib_programs().items():
        vocab = list("abcd") if vocab == "unique" else vocab
        # make_sort_unique over abcd: repeated keys raise (Tracr assumes distinct ones), which
        # the compiler refuses by default; declared out of contract, as bench_compiler does
        cm = compile_program(rasp.from_tracr(prog), vocab, 8,
                             raising="declare" if name == "make_sort_unique" else "refuse")
        rows[name] = ((cm.stats["params"], cm.stats["nonzero_params"], cm.stats["layers"], cm),
                      _tracr_sizes(prog, vocab))
    return rows


def test_nonzeros_no_more_than_tracr_in_total(tracr_against_ours):
    """On every program of Tracr's library (max_seq_len 8, Tracr's compiler with
    ``compiler_bos="BOS"``), our non-zero weights in total are at most Tracr's."""
    ours = sum(o[1] for o, _ in tracr_against_ours.values())
    theirs = sum(t[1] for _, t in tracr_against_ours.values())
    assert ours <= theirs, (ours, theirs)


#: Programs of Tracr's library where our model has more parameters than Tracr's. Kept exact
#: (issue 38 item 4 asks for none): ``make_sort`` was the last (83,140 against 38,283: its
#: final mean could not be proved to select one key; the value sets now prove the target
#: position a permutation of the positions, 16,125 parameters).
KNOWN_ABOVE_TRACR: set = set()

#: Programs whose non-zero weights (all we store, ``W_U`` included) exceed Tracr's (its
#: ``params`` plus its unembedding), and the weights that buy exactness Tracr's model lacks
#: (checked below: without them the program is at or below Tracr's):
#: ``pad`` -- one ``W_K`` weight per head that gives PAD keys a large negative logit (Tracr
#: never masks PAD: its failure mode 7); ``none`` -- the value and output weights of a
#: default ``None`` direction (Tracr's default is the zero vector, decoded as an arbitrary
#: value: failure mode 5); ``count`` -- the head counting the selected keys of a mean of
#: strings, so that the model raises where the interpreter does when two keys are selected
#: (Tracr's ``make_sort_unique`` assumes unique keys; over ``abcd`` they repeat).
KNOWN_NONZEROS_ABOVE_TRACR = {
    "make_frac_prevs": ("pad",),
    "shift_by": ("pad", "none"),
    "make_sort_unique": ("pad", "none", "count"),
}


def _exactness_weights(cm, kinds) -> int:
    """The non-zero weights of ``cm`` spent on the kinds of exactness in ``kinds``
    (``bench.bench_compiler.exactness_nonzeros``, which the benchmark prints per program)."""
    return sum(exactness_nonzeros(cm, kinds).values())


def test_nonzeros_at_or_below_tracr_on_every_library_program(tracr_against_ours):
    """Per program of Tracr's library, our non-zero weights are at most Tracr's (its
    ``params`` and its unembedding), except :data:`KNOWN_NONZEROS_ABOVE_TRACR`, which are at
    or below it without the weights of the exactness they list (issue 38 item 4)."""
    above = {}
    for name, (o, t) in tracr_against_ours.items():
        if o[1] > t[1] + t[3]:
            above[name] = o[1] - t[1] - t[3]
    assert set(above) == set(KNOWN_NONZEROS_ABOVE_TRACR), above
    for name, kinds in KNOWN_NONZEROS_ABOVE_TRACR.items():
        (o, t) = tracr_against_ours[name]
        spent = _exactness_weights(o[3], kinds)
        assert o[1] - spent <= t[1] + t[3], (name, o[1], spent, t)


def test_no_more_params_or_layers_than_tracr_on_any_library_program(tracr_against_ours):
    """Pricing non-zeros never costs parameters or layers against Tracr: per program, our
    layers are at most Tracr's, and our parameters too except :data:`KNOWN_ABOVE_TRACR`."""
    above = set()
    for name, (o, t) in tracr_against_ours.items():
        assert o[2] <= t[2], (name, o[:3], t)
        if o[0] > t[0]:
            above.add(name)
    assert above == KNOWN_ABOVE_TRACR, (above, {n: tracr_against_ours[n][1] for n in above})


def test_detect_pattern_fewer_layers_and_mlp_weights_than_tracr():
    """Tracr's ``detect_pattern(tokens, "abc")``: ``(c and s1) and s2`` of the detector
    ``tokens == "c"`` and the two shifted detectors (True / False / None, Python's ``and``).
    Our lookup MLPs are the cubes of a decision tree (``mlp_pricing.lookup_cubes``), not one
    unit per combination, so fusing the unshifted detector into the AND now pays: 2 layers
    (Tracr 3), and fewer MLP weights than Tracr's own compiler gives it (its ``mlp``
    arrays), on a model that is exact where Tracr's is not (the None rows)."""
    import tracr.compiler.lib as L
    import tracr.rasp.rasp as tr
    prog = L.detect_pattern(tr.tokens, "abc")
    cm = compile_program(rasp.from_tracr(prog), list("abc"), 8)
    assert cm.stats["layers"] == 2
    theirs = compiling.compile_rasp_to_model(prog, vocab=set("abc"), max_seq_len=8,
                                             compiler_bos="BOS")
    tracr_mlp = sum(int((np.asarray(v["w"]) != 0).sum()) for k, v in theirs.params.items()
                    if "/mlp/" in k)
    assert theirs.model_config.num_layers == 3
    assert _mlp_nonzeros_of_model(cm) < tracr_mlp, (_mlp_nonzeros_of_model(cm), tracr_mlp)
    ours = rasp.from_tracr(prog)
    for x in ("abcabc", "cabcab", "aab", "c"):
        assert list(cm.run([list(x)])[0]) == list(rasp.evaluate(ours, [list(x)])[0])


def test_lookup_cubes_are_exact_and_no_larger_than_the_table():
    """``lookup_cubes`` against the table it encodes, on random tables of 1-3 inputs: every
    combination is covered by exactly one cube (unit value 1, every other unit <= 0), with
    that cube's result, or by none where the result is None; never more units or ``W_in``
    weights than one unit per (written) combination."""
    import itertools
    import random
    from compiler.graph.mlp_pricing import cube_nonzeros, lookup_cubes
    rng = random.Random(38)
    for _ in range(300):
        domains = [list(range(rng.randint(1, 4))) for _ in range(rng.randint(1, 3))]
        results = [None, "x", "y", "z"][: rng.randint(1, 4)]
        table = {c: rng.choice(results) for c in itertools.product(*domains)}
        cubes = lookup_cubes(domains, table)
        for combo, want in table.items():
            fired = []
            for pos, neg, res in cubes:
                pre = (sum(combo[i] == v for i, v in pos) - sum(combo[i] == v for i, v in neg)
                       + 1 - len(pos))
                assert pre <= 1
                if pre == 1:
                    fired.append(res)
            assert fired == ([] if want is None else [want]), (domains, table, cubes)
        k = len(domains)
        written = sum(r is not None for r in table.values())
        assert len(cubes) <= written
        assert sum(cube_nonzeros(p, q) for p, q, _ in cubes) <= written * (k + (k != 1))


def test_the_pricing_rule():
    """``smaller``: a change is kept when params x non-zeros falls -- both fall, or the
    relative saving of one exceeds the relative growth of the other."""
    assert smaller(-1, 0, 100, 10) and smaller(0, -1, 100, 10)
    assert not smaller(0, 0, 100, 10)
    assert smaller(-10, 0.5, 100, 10)          # -10 % parameters, +5 % non-zeros
    assert not smaller(-1, 0.5, 100, 10)       # -1 % parameters, +5 % non-zeros
    assert smaller(5, -1, 100, 10)             # +5 % parameters, -10 % non-zeros
    assert not smaller(1, 1, 100, 10)


def test_ranks_of_distinct_keys_select_exactly_one_key():
    """The value sets prove ``select(target_pos, indices, ==)`` of Tracr's ``make_sort``
    (keys ``x + i / 5``, distinct at every position) selects exactly one key, and refuse the
    proof where keys repeat (``make_sort_unique`` over ``abcd``) or a map of the position
    loses it (``x + i % 2``). The truth, over every input up to length 5: the selector's width
    (the interpreter) is 1 at every query exactly in the proved case."""
    import itertools
    import tracr.compiler.lib as L
    import tracr.rasp.rasp as tr
    from rasp.analyses.value_sets import (selects_at_least_one, selects_at_most_one,
                                          value_set_pass)
    from rasp.ir import Aggregate, selector_width, walk

    n = 5
    cases = [
        (L.make_sort(tr.tokens, tr.tokens, max_seq_len=n, min_key=1), [1, 2, 3, 4], True),
        (L.make_sort_unique(tr.tokens, tr.tokens), list("abcd"), False),
        (L.make_sort_unique(tr.tokens, tr.SequenceMap(lambda x, i: x + i % 2, tr.tokens,
                                                      tr.indices)), [1, 2, 3], False),
    ]
    for prog, vocab, proved in cases:
        sop = rasp.from_tracr(prog)
        sel = next(x for x in walk(sop) if isinstance(x, Aggregate)).selector
        sets = value_set_pass(sop, vocab, n).sets
        assert (selects_at_most_one(sel, sets) and selects_at_least_one(sel, sets)) == proved
        width = selector_width(sel)
        ones = all(set(rasp.evaluate(width, [list(x)])[0].tolist()) == {1}
                   for m in range(1, n + 1) for x in itertools.product(vocab, repeat=m))
        assert ones == proved


#: corpus programs (``compiler.library.tracr_corpus``, first 13: one per kind) above Tracr's
#: non-zeros for a reason other than exactness: ``length - indices`` is one MLP of steps over
#: the selector width gated by the index (1 layer; Tracr: its width MLP, then a table over
#: length x index, 2 layers and fewer weights). Fusing saves the layer; the pricing keeps it.
CORPUS_FEWER_LAYERS_MORE_NONZEROS = {"length-indices"}


@pytest.mark.parametrize("item", list(range(13)))
def test_corpus_nonzeros_at_or_below_tracr(item):
    """The fuzzer's corpus shape: each kind of program of ``tracr_corpus`` at max_seq_len 6,
    against Tracr's compiler: never more layers or parameters; non-zeros at most Tracr's
    (params + unembedding), or at most it without our exactness weights (PAD mask, None
    default, count head), or, for :data:`CORPUS_FEWER_LAYERS_MORE_NONZEROS`, one layer fewer."""
    from compiler.library import tracr_corpus
    name, prog, vocab = tracr_corpus()[item]
    n = 6
    params, nz, layers, unembed = _tracr_sizes(prog, vocab, n)
    cm = compile_program(rasp.from_tracr(prog), vocab, n)
    s = cm.stats
    assert s["layers"] <= layers and s["params"] <= params, (name, s["layers"], layers)
    if s["nonzero_params"] <= nz + unembed:
        return
    if name in CORPUS_FEWER_LAYERS_MORE_NONZEROS:
        assert s["layers"] < layers
        return
    spent = _exactness_weights(cm, ("pad", "none", "count"))
    assert s["nonzero_params"] - spent <= nz + unembed, (name, s["nonzero_params"], spent, nz,
                                                         unembed)
