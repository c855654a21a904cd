"""TransformerLens round trip, against the real library (transformer-lens, the test extra).

Compiled programs are exported, loaded by TransformerLens strictly (the five lines of
docs/compiler.md), and run side by side with rasp-lab's own Transformer: identical logits and
hook activations, and the decoded outputs equal the interpreter's (the independent truth).
"""

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

import rasp
from compiler import compile_program
from compiler.export import (
    TransformerLensExportError, TransformerLensModel, attention_patterns_from_transformer_lens,
    load_transformer_lens, save_transformer_lens, to_transformer_lens,
    transformer_lens_config)
from compiler.library import make_frac_prevs, make_hist, make_reverse, make_sort_unique
from rasp_model import Transformer, TransformerConfig
from rasp_model.config import TL_FIELDS
from rasp.equality import values_equal

# a hard import: transformer-lens is in the test extra, so a missing install fails the suite
from transformer_lens import HookedTransformer, HookedTransformerConfig  # noqa: E402


def _load_like_a_tl_user(directory):
    """The snippet of docs/compiler.md, verbatim in substance: strict load."""
    from safetensors.torch import load_file
    cfg = json.load(open(f"{directory}/tl_config.json"))
    cfg["dtype"] = getattr(torch, cfg["dtype"])
    model = HookedTransformer(HookedTransformerConfig(**cfg))
    model.load_state_dict(load_file(f"{directory}/tl_model.safetensors"), strict=True)
    return model.eval()


def _compare_hooks(ours: Transformer, tl_model, ids, atol=1e-9):
    """Logits and every shared hook equal (real heads / MLP units only; -inf where masked).

    TransformerBridge 3.9's ``hook_attn_scores`` holds probabilities, not scores, so there the
    scores are compared through ``hook_pattern`` only."""
    cfg = ours.cfg
    a, ca = ours.run_with_cache(ids)
    b, cb = tl_model.run_with_cache(ids)
    assert a.shape == b.shape
    assert torch.allclose(a, b.to(a.dtype), atol=atol, rtol=0), float((a - b).abs().max())
    shared = sorted(set(ca) & set(cb))
    assert len(shared) >= 4 * max(cfg.n_layers, 1)
    bridge = type(tl_model).__name__ == "TransformerBridge"
    for name in shared:
        if bridge and name.endswith("hook_attn_scores"):
            continue
        x, y = ca[name], cb[name].to(ca[name].dtype)
        if ".attn." in name and "hook_attn_scores" not in name and "hook_pattern" not in name:
            y = y[:, :, : x.shape[2]]                    # [batch, pos, head, d_head]
        elif "hook_attn_scores" in name or "hook_pattern" in name:
            y = y[:, : x.shape[1]]                       # [batch, head, query, key]
        elif ".mlp.hook_" in name:
            y = y[..., : x.shape[-1]]                    # [batch, pos, d_mlp]
        assert x.shape == y.shape, name
        fin = torch.isfinite(x)
        assert torch.equal(fin, torch.isfinite(y) & (y > -1e30)), name  # masked alike
        assert torch.allclose(x[fin], y[fin], atol=atol, rtol=0), (name, float(
            (x[fin] - y[fin]).abs().max()))
    return a, b


def _programs():
    with rasp.causal_mode():
        prev = rasp.aggregate(rasp.select(rasp.indices, rasp.indices - 1, "=="), rasp.tokens,
                              default="a")
        running_max = rasp.aggregate(rasp.select(rasp.indices, rasp.indices, "<="),
                                     rasp.tokens_int, reduction="max", default=0)
    return {
        "causal_prev": (prev, ["a", "b", "c"], 6, True),
        "causal_running_max": (running_max, ["0", "1", "3", "5"], 6, True),
        "reverse": (make_reverse(), ["a", "b", "c"], 6, False),
        "sort_unique": (make_sort_unique(rasp.tokens, rasp.tokens), ["a", "b", "c", "d"], 5,
                        False),
        "hist": (make_hist(), ["a", "b"], 6, False),
        "frac_prevs (numerical)": (make_frac_prevs(rasp.tokens == "a"), ["a", "b"], 6, False),
    }


PROGRAMS = _programs()


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_compiled_export_loads_strictly_and_matches(tmp_path, name):
    sop, vocab, n, causal = PROGRAMS[name]
    # sort_unique's keys must be distinct (a repeated one raises: refused by default)
    cm = compile_program(sop, vocab, n, causal=causal,
                         raising="declare" if name == "sort_unique" else "refuse")
    cm.save(tmp_path)                                  # what `rasp compile -o DIR` writes
    tl_model = _load_like_a_tl_user(tmp_path)
    assert tl_model.cfg.attention_dir == ("causal" if causal else "bidirectional")
    rng = np.random.default_rng(0)
    if name == "sort_unique":       # its keys must be distinct (else the interpreter refuses)
        batch = [list(rng.permutation(vocab)) for _ in range(8)]
        n = len(vocab)
    else:
        batch = [[vocab[i] for i in rng.integers(0, len(vocab), n)] for _ in range(8)]
    ids, _ = cm.encode(batch)
    _, tl_logits = _compare_hooks(cm.model, tl_model, ids)
    # the TL model's logits decode to the interpreter's output (independent truth)
    want = rasp.evaluate(sop, batch, causal=True if causal else None)
    got = np.array([cm._decode(tl_logits[b, 1:].detach().numpy(), n) for b in range(len(batch))])
    assert all(values_equal(w, g) for w, g in zip(want, got))


def test_padded_batch_of_different_lengths_matches():
    sop, vocab, n, _ = PROGRAMS["sort_unique"]
    cm = compile_program(sop, vocab, n, raising="declare")    # distinct keys: its contract
    tl_model = to_transformer_lens(cm)
    batch = [["b", "a"], ["d", "c", "a", "b"], ["c"], ["a", "d", "b"]]
    ids, lens = cm.encode(batch)
    assert (ids == cm.pad_id).any()                    # really padded
    _, tl_logits = _compare_hooks(cm.model, tl_model, ids)
    for b, (seq, k) in enumerate(zip(batch, lens)):
        got = cm._decode(tl_logits[b, 1: 1 + k].detach().numpy(), k)
        assert values_equal(rasp.evaluate(sop, [seq])[0], got)


def test_bridge_path_matches_for_a_compiled_model():
    """The TransformerBridge path (what transformer-lens 4.x offers) on the same weights."""
    sop, vocab, n, _ = PROGRAMS["reverse"]
    cm = compile_program(sop, vocab, n)
    bridge = to_transformer_lens(cm, kind="bridge")
    assert type(bridge).__name__ == "TransformerBridge"
    ids, _ = cm.encode([["a", "b", "c", "c"], ["c", "a", "b", "a"]])
    _compare_hooks(cm.model, bridge, ids)


@pytest.mark.parametrize("pe", ["nope", "ape_learned", "ape_sinusoidal", "rope", "alibi"])
def test_trained_style_models_with_layernorm_and_biases_match(pe):
    torch.manual_seed(1)
    m = Transformer(TransformerConfig(
        n_layers=2, d_model=24, d_head=6, n_heads=[4, 4] if pe == "alibi" else [3, 2],
        d_mlp=[40, 0], d_vocab=9, n_ctx=12, pe=pe, act_fn="gelu", tied_embeddings=True,
        n_heads_mask=[[1, 0, 1, 1], [1, 1, 1, 1]] if pe == "alibi" else None)).double().eval()
    tl_model = to_transformer_lens(m)
    ids = torch.randint(0, 9, (3, 11))
    _compare_hooks(m, tl_model, ids, atol=1e-9)


def test_config_fields_are_transformer_lens_fields():
    tl_fields = {f.name for f in dataclasses.fields(HookedTransformerConfig)}
    named = [f.tl_name for f in TL_FIELDS if f.tl_name]
    assert named and set(named) <= tl_fields, set(named) - tl_fields
    m = Transformer(TransformerConfig(n_layers=1, d_vocab=5, pe="rope"))
    assert set(transformer_lens_config(m)) <= tl_fields


def test_tl_model_probes_like_ours_and_a_vocabulary_mismatch_is_refused(tmp_path):
    sop, vocab, n, _ = PROGRAMS["reverse"]
    cm = compile_program(sop, vocab, n)
    save_transformer_lens(cm, tmp_path)
    tl_model = load_transformer_lens(tmp_path)
    ids, _ = cm.encode([["a", "b", "c"], ["c", "c", "a"]])
    pats = attention_patterns_from_transformer_lens(tl_model, ids)
    ours = cm.attention([["a", "b", "c"], ["c", "c", "a"]])
    assert pats.shape[:2] == ours.shape[:2]
    heads = [cm.model.cfg.heads(l) for l in range(cm.model.cfg.n_layers)]
    for l, h in enumerate(heads):
        assert np.allclose(pats[:, l, :h], ours[:, l, :h], atol=1e-12)
    wrapped = TransformerLensModel(tl_model, d_vocab=len(vocab) + 2)
    assert np.allclose(wrapped.attention_patterns(ids)[0], pats[:, 0])
    with pytest.raises(TransformerLensExportError, match=r"d_vocab=5 but the task has 12"):
        TransformerLensModel(tl_model, d_vocab=12)
    with pytest.raises(TransformerLensExportError, match="d_vocab=5"):
        attention_patterns_from_transformer_lens(tl_model, torch.tensor([[0, 7]]))


def test_what_transformer_lens_cannot_compute_is_refused(tmp_path):
    t5 = Transformer(TransformerConfig(n_layers=1, d_vocab=5, pe="t5"))
    with pytest.raises(TransformerLensExportError, match="'t5'"):
        to_transformer_lens(t5)
    alibi = Transformer(TransformerConfig(n_layers=2, n_heads=[4, 2], d_vocab=5, pe="alibi"))
    with pytest.raises(TransformerLensExportError, match="power-of-two"):
        transformer_lens_config(alibi)
    rope = Transformer(TransformerConfig(n_layers=1, d_vocab=5, pe="rope"))
    with pytest.raises(TransformerLensExportError, match="rope"):
        save_transformer_lens(rope, tmp_path)
    with pytest.raises(TransformerLensExportError, match="missing tl_config.json"):
        load_transformer_lens(tmp_path / "nothing")


def test_rasp_compile_cli_writes_the_transformer_lens_files(tmp_path):
    prog = tmp_path / "p.rasp"
    prog.write_text("rev = aggregate(select(indices, length - indices - 1, ==), tokens);\n")
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "rasp_cli.main", "compile", str(prog), "-n", "rev",
                        "--vocab", "a,b", "--max-len", "4", "-o", str(out)],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "tl_model.safetensors" in r.stdout
    tl_model = _load_like_a_tl_user(out)
    assert tl_model.cfg.n_layers >= 1
    h = subprocess.run([sys.executable, "-m", "rasp_cli.main", "compile", "--help"],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
    assert "TransformerLens" in h.stdout and "tl_config.json" in h.stdout


def test_rasp_probe_accepts_any_transformer_lens_model(tmp_path, capsys):
    """A HookedTransformer that rasp-lab did not make, probed against the compiled program."""
    import tasks
    from rasp_cli.main import main
    task = tasks.get_task("copy_unique")
    torch.manual_seed(0)
    tl_cfg = HookedTransformerConfig(n_layers=2, d_model=16, d_head=4, n_heads=2, d_mlp=32,
                                     d_vocab=len(task.vocab), n_ctx=64, act_fn="relu",
                                     normalization_type="LN")
    save_transformer_lens(HookedTransformer(tl_cfg), tmp_path / "tl")
    assert main(["probe", str(tmp_path / "tl"), "--task", "copy_unique", "--lengths", "4",
                 "--per-length", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["models"]["tl:tl"] == [2, 2]                      # heads per layer, via TL hooks
    assert "tl:tl" in out["matchings"] and out["compiled"] == "compiled"
    bad = HookedTransformerConfig(n_layers=1, d_model=16, d_head=4, n_heads=2, d_mlp=32,
                                  d_vocab=len(task.vocab) + 3, n_ctx=64, act_fn="relu")
    save_transformer_lens(HookedTransformer(bad), tmp_path / "bad")
    assert main(["probe", str(tmp_path / "bad"), "--task", "copy_unique"]) == 2
    err = capsys.readouterr().err
    assert f"d_vocab={len(task.vocab) + 3}" in err and f"{len(task.vocab)} token ids" in err
