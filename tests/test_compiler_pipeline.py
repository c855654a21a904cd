"""The compiler's stages (graph, residual space, blocks, layers, assembly) and its export."""

import json
import os

import networkx as nx
import numpy as np
import pytest

import rasp
from rasp import (aggregate, full, indices, length, numerical, select, selector_width, tokens,
                  tokens_int)
from compiler import CompilerError, compile_program, load_compiled
from compiler.graph_to_blocks import build_mlp
from compiler.basis_inference import infer_bases
from compiler.graph.rasp_to_graph import build_graph
from compiler.layer_allocation import allocate_layers
from compiler.library import make_frac_prevs, make_reverse
from compiler.residual_space import ResidualSpace


def test_graph_is_a_networkx_dag_with_rewrites():
    prog = aggregate(select(indices, length - indices - 1, "=="), tokens)
    cg = _graph(prog, ["a", "b"], 5)
    assert isinstance(cg.graph, nx.DiGraph) and nx.is_directed_acyclic_graph(cg.graph)
    kinds = sorted(n.kind for n in cg.nodes)
    # length -> selector-width head; `length - indices - 1` fused into its MLP; one aggregate
    assert kinds.count("sw_attn") == 1 and kinds.count("aggregate") == 1
    assert kinds.count("mlp") == 1
    for u, v in cg.graph.edges:   # child -> parent
        assert cg.graph.nodes[u]["cnode"] in cg.graph.nodes[v]["cnode"].deps()
    assert cg.output.kind == "aggregate"


def test_select_absorbs_a_map_of_one_sop():
    prog = aggregate(select(indices, indices - 1, "=="), tokens, default="_")
    cg = _graph(prog, ["a", "b"], 5)
    assert [n.kind for n in cg.nodes if not n.is_embedded] == ["aggregate"]


def test_residual_labels():
    prog = aggregate(select(tokens, full("a"), "=="), numerical(tokens == "a"))
    cg = _graph(prog, ["a", "b"], 3)
    space = ResidualSpace(cg.nodes)
    assert space.labels[:3] == ["one", "bos", "pad"]
    assert "tokens:a" in space.labels and "tokens:b" in space.labels
    assert len(space.labels) == len(set(space.labels))
    full_nodes = [n for n in cg.nodes if n.kind == "full"]
    assert all(space.dirs(n) == {n.value: ResidualSpace.ONE} for n in full_nodes)


def test_layers_attention_before_mlp_and_sharing():
    a1 = aggregate(select(tokens, tokens, "=="), tokens_int)       # a numerical mean
    a2 = selector_width(select(indices, indices, "<"))
    prog = numerical(a1 + a2)
    cg = _graph(prog, ["1", "2"], 4)
    plan = allocate_layers(cg)
    # the two independent heads share layer 0; a2's MLP (1/(w+1) -> w) is layer 0's MLP, after
    # the heads; the sum of two numerical values is layer 1's MLP
    assert plan.n_layers == 2 and len(plan.heads[0]) == 2 and not plan.heads[1]
    assert [n.kind for n in plan.mlps[0]] == ["mlp"] and len(plan.mlps[1]) == 1
    cm = compile_program(prog, ["1", "2"], 4)
    for inp in ["12", "112", "2221"]:
        assert np.allclose(cm.run([inp])[0], rasp.evaluate(prog, [inp])[0])


def _graph(prog, vocab, n):
    """The compiler graph of ``prog``: value sets first, computed once, then the graph."""
    return build_graph(prog, vocab, n, value_sets=infer_bases(prog, vocab, n))


def test_graph_needs_the_value_sets():
    prog = aggregate(select(indices, indices, "=="), tokens)
    with pytest.raises(TypeError):
        build_graph(prog, ["a", "b"], 3)         # the value sets are required


def _mlp_apply(block, x_resid):
    h = np.maximum(x_resid @ block.W_in, 0)
    return h @ block.W_out


def test_discretising_mlp_is_exact_with_negative_outputs():
    frac = make_frac_prevs(tokens == "x")
    prog = numerical(frac * -3 + frac * frac * 10 - 1)   # not affine: discretising MLP
    cg = _graph(prog, ["a", "x"], 6)
    space = ResidualSpace(cg.nodes)
    node = cg.output
    block = build_mlp(node, space)
    assert block.kind == "discretising"
    leaf = node.expr.leaves()[0]
    for u in leaf.values:
        for noise in (0.0, 1e-7, -1e-7):
            r = np.zeros(space.d_model)
            r[ResidualSpace.ONE] = 1.0
            r[space.dir(leaf)] = u + noise
            out = _mlp_apply(block, r)[space.dir(node)]
            assert out == pytest.approx(u * -3 + u * u * 10 - 1, abs=1e-6)
    # at BOS every unit is off
    r = np.zeros(space.d_model)
    r[ResidualSpace.ONE] = r[ResidualSpace.BOS] = 1.0
    r[space.dir(leaf)] = 0.5
    assert np.all(_mlp_apply(block, r) == 0)


def test_attention_shape_and_default_goes_to_bos():
    prog = aggregate(select(tokens, "z", "=="), tokens, default="q")
    cm = compile_program(prog, ["a", "z"], 5, raising="declare")   # raises on "zz"
    att = cm.attention(["aaza", "aaaa"])
    assert att.shape == (2, cm.stats["layers"], cm.stats["max_heads"], 5, 5)
    assert np.allclose(att.sum(-1), 1.0)
    assert np.allclose(att[1, 0, 0, 1:, 0], 1.0)          # nothing selected: BOS
    assert np.allclose(att[0, 0, 0, 1:, 3], 1.0)          # the 'z' key
    assert cm.run(["aaaa"])[0].tolist() == ["q"] * 4


def test_stats_fields():
    cm = compile_program(make_reverse(), ["a", "b", "c"], 5)
    for k in ("layers", "heads", "d_model", "d_head", "mlp_hidden", "params", "nonzero_params",
              "compile_seconds"):
        assert k in cm.stats
    cfg = cm.model.cfg
    padding = sum(4 * cfg.d_model * (cfg.d_head - w)            # W_Q, W_K, W_V, W_O columns
                  for l in range(cfg.n_layers) for w in cfg.head_widths(l))
    assert cm.stats["params"] == sum(p.numel() for p in cm.model.parameters()) - padding
    assert cm.stats["nonzero_params"] == sum(int((p != 0).sum()) for p in cm.model.parameters())
    assert len(cm.residual_labels) == cm.stats["d_model"] == cm.model.cfg.d_model


def test_save_and_load_give_identical_outputs(tmp_path):
    prog = make_reverse()
    cm = compile_program(prog, ["a", "b", "c"], 6)
    cm.save(tmp_path / "rev")
    meta = json.loads((tmp_path / "rev" / "model.json").read_text())
    assert meta["residual_labels"] == cm.residual_labels
    assert meta["output"]["encoding"] == "categorical"
    from safetensors import safe_open
    with safe_open(str(tmp_path / "rev" / "model.safetensors"), framework="pt") as f:
        names = set(f.keys())
        d = cm.stats["d_model"]
        assert tuple(f.get_tensor("embed.W_E").shape) == (5, d)
        assert tuple(f.get_tensor("pos_embed.W_pos").shape) == (7, d)
        assert tuple(f.get_tensor("unembed.W_U").shape) == (d, len(cm.output_values))
        w = sum(cm.model.cfg.head_widths(0))      # heads stored unpadded, concatenated
        assert w <= cm.stats["heads_per_layer"][0] * cm.stats["d_head"]
        assert tuple(f.get_tensor("blocks.0.attn.W_Q").shape) == (d, w)
        assert tuple(f.get_tensor("blocks.0.attn.W_O").shape) == (w, d)
    assert "blocks.0.mlp.W_in" in names
    back = load_compiled(tmp_path / "rev")
    inputs = ["abcabc", "cab", "a"]
    for s in inputs:
        assert back.run([s])[0].tolist() == cm.run([s])[0].tolist()
    assert np.array_equal(back.attention(["abc"]), cm.attention(["abc"]))
    # the shared loader reads the same file (float32) into the same Transformer class
    from rasp_model import load_safetensors
    m32 = load_safetensors(tmp_path / "rev" / "model.safetensors")
    ids, _ = cm.encode(["abcab"])
    assert np.array_equal(m32(ids).argmax(-1).numpy(), cm.model(ids).argmax(-1).numpy())


def test_load_compiled_errors(tmp_path):
    with pytest.raises(CompilerError, match="missing"):
        load_compiled(tmp_path)
    (tmp_path / "model.json").write_text("{not json")
    (tmp_path / "model.safetensors").write_bytes(b"junk")
    with pytest.raises(CompilerError, match="not a compiled"):
        load_compiled(tmp_path)


def _cli(capsys, *args):
    from rasp_cli.main import main
    rc = main(list(args))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_compile_export_and_verify(tmp_path, capsys):
    src = tmp_path / "p.rasp"
    src.write_text('flip = select(indices, length - indices - 1, "==");\n'
                   'rev = aggregate(flip, tokens);\n')
    out = tmp_path / "out"
    rc, stdout, stderr = _cli(capsys, "compile", str(src), "--name", "rev", "--vocab", "a,b,c",
                              "--max-len", "6", "-o", str(out), "--verify", "5")
    assert rc == 0, stderr
    assert "d_model" in stdout and "verify: 30/30" in stdout   # 6 lengths x 5
    assert (out / "model.safetensors").exists() and (out / "model.json").exists()
    back = load_compiled(out)
    assert back.run(["abcc"])[0].tolist() == list("ccba")
    rc, _, stderr = _cli(capsys, "compile", str(src), "--name", "nope", "--vocab", "a",
                         "--max-len", "3")
    assert rc == 2 and "unknown name" in stderr
    rc, _, _ = _cli(capsys, "compile", str(tmp_path / "missing.rasp"), "--name", "x",
                    "--vocab", "a", "--max-len", "3")
    assert rc == 2
