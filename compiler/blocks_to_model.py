"""Stage 6: assembly into the project's one :class:`rasp_model.Transformer`.

* token embedding ``W_E [d_vocab, d_model]``: id 0 is BOS (``one`` + ``bos``), ids
  ``1..V`` the vocabulary (``one`` + the token's direction of every ``tokens`` s-op), id
  ``V+1`` PAD (``one`` + ``pad``);
* position embedding ``W_pos [max_seq_len + 1, d_model]`` (``ape_learned``): position ``p``
  writes ``indices:(p-1)``; BOS sits at position 0;
* per layer ``n_heads_l`` heads and ``d_mlp_l`` MLP units, exactly what that layer needs;
  every head is at most the model's ``d_head`` wide (its own width, ``d_head_widths``, is what
  its query/key and value spaces need; chosen to minimise the parameter count; a head whose
  value space is wider than ``d_head`` is split into several heads sharing the same query/key
  weights, so a value space larger than the query/key space is fine: Tracr's failure mode 6);
* no LayerNorm, ReLU, no biases (``one`` direction instead), ``1/sqrt(d_head)`` scaling
  compensated in ``W_Q``;
* explicit unembedding ``W_U [d_model, d_vocab_out]`` onto the output s-op's directions.

The BOS position's residual is tracked layer by layer (it attends only to itself and MLPs
write 0 there), so every head's ``bos`` key row and value row can be set to give exactly the
BOS dimension as key and the default as value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from rasp_model import Transformer, TransformerConfig
from rasp.interpreter import convert_tokens, to_batch

from .graph_to_blocks import HeadBlock, MLPBlock
from .encoding import CATEGORICAL
from .nodes import CNode
from .layer_allocation import LayerPlan
from .residual_space import ResidualSpace

__all__ = ["choose_d_head", "assemble", "Assembly"]


@dataclass
class Assembly:
    """The assembled model: ``model`` (float64 :class:`Transformer`), ``config``,
    ``heads_per_layer``, ``mlp_per_layer``, ``head_nodes`` (per layer, the node name each head
    computes), ``output_values`` (decoding of the unembedding columns)."""

    model: Transformer
    config: TransformerConfig
    heads_per_layer: list
    mlp_per_layer: list
    head_nodes: list
    output_values: list
    output_encoding: str


class _NoInit(Transformer):
    def reset_parameters(self, seed=None):   # weights are assigned right after construction
        pass


def choose_d_head(blocks: list[HeadBlock], d_model: int) -> int:
    """The ``d_head`` minimising ``sum_heads ceil(r_ov / d_head) * 4 * d_model * d_head`` among
    the widths the heads need (at least the widest query/key space)."""
    if not blocks:
        return 1
    lo = max(b.r_qk for b in blocks)
    cands = {lo} | {b.r_ov for b in blocks if b.r_ov >= lo}
    best = None
    for D in sorted(cands):
        cost = sum(math.ceil(b.r_ov / D) for b in blocks) * D
        if best is None or cost < best[0]:
            best = (cost, D)
    return best[1]


def _pad_cols(a: np.ndarray, D: int) -> np.ndarray:
    out = np.zeros((a.shape[0], D))
    out[:, : a.shape[1]] = a
    return out


def assemble(plan: LayerPlan, space: ResidualSpace, heads: dict, mlps: dict, vocab: list,
             tokens_nodes: list[CNode], indices_node: CNode | None, output: CNode,
             max_seq_len: int, causal: bool) -> Assembly:
    """Build the :class:`Transformer` (see module docstring). ``heads``/``mlps`` map node names
    to :class:`HeadBlock` / :class:`MLPBlock`."""
    d = space.d_model
    ONE, BOS, PAD = ResidualSpace.ONE, ResidualSpace.BOS, ResidualSpace.PAD
    V = len(vocab)
    # -- embeddings ----------------------------------------------------------------------------
    W_E = np.zeros((V + 2, d))
    W_E[:, ONE] = 1.0
    W_E[0, BOS] = 1.0
    W_E[V + 1, PAD] = 1.0
    raw = to_batch([list(vocab)]) if V else None
    for t in tokens_nodes:
        conv = convert_tokens(raw, t.conversion).reshape(-1).tolist()
        for i, v in enumerate(conv):
            if space.is_categorical(t):
                W_E[i + 1, space.dirs(t)[v]] = 1.0
            else:
                W_E[i + 1, space.dir(t)] = float(v)
    n_ctx = max_seq_len + 1
    W_pos = np.zeros((n_ctx, d))
    if indices_node is not None:
        for p in range(1, n_ctx):
            if space.is_categorical(indices_node):
                W_pos[p, space.dirs(indices_node)[p - 1]] = 1.0
            else:
                W_pos[p, space.dir(indices_node)] = float(p - 1)
    # -- blocks --------------------------------------------------------------------------------
    all_heads = [heads[n.name] for layer in plan.heads for n in layer]
    D = choose_d_head(all_heads, d)
    scale = math.sqrt(D)
    r_bos = W_E[0].copy()
    state: dict[str, torch.Tensor] = {}
    heads_per_layer, mlp_per_layer, head_nodes, head_widths = [], [], [], []
    for l in range(plan.n_layers):
        WQ, WK, WV, WO, names, widths_l = [], [], [], [], [], []
        garbage = r_bos.copy()
        garbage[BOS] = 0.0
        write = np.zeros(d)
        for n in plan.heads[l]:
            hb: HeadBlock = heads[n.name]
            Wq = _pad_cols(hb.W_Q, D)
            Wk = _pad_cols(hb.W_K, D)
            kb = np.zeros(D)
            kb[: hb.r_qk] = hb.k_bos
            Wk[BOS] = kb - garbage @ Wk
            for c0 in range(0, hb.r_ov, D):
                c1 = min(c0 + D, hb.r_ov)
                Wv = _pad_cols(hb.W_V[:, c0:c1], D)
                Wo = np.zeros((D, d))
                Wo[: c1 - c0] = hb.W_O[c0:c1]
                vb = np.zeros(D)
                vb[: c1 - c0] = hb.v_bos[c0:c1]
                Wv[BOS] = vb - garbage @ Wv
                write += vb @ Wo
                WQ.append(Wq * scale)
                WK.append(Wk)
                WV.append(Wv)
                WO.append(Wo)
                names.append(n.name)
                widths_l.append(max(hb.r_qk, c1 - c0, 1))   # the rest of the D columns are 0
        r_bos = r_bos + write
        heads_per_layer.append(len(WQ))
        head_widths.append(widths_l)
        head_nodes.append(names)
        if WQ:
            state[f"blocks.{l}.attn.W_Q"] = torch.tensor(np.stack(WQ))
            state[f"blocks.{l}.attn.W_K"] = torch.tensor(np.stack(WK))
            state[f"blocks.{l}.attn.W_V"] = torch.tensor(np.stack(WV))
            state[f"blocks.{l}.attn.W_O"] = torch.tensor(np.stack(WO))
        blocks_l = [mlps[n.name] for n in plan.mlps[l]]
        width = sum(b.hidden for b in blocks_l)
        mlp_per_layer.append(width)
        if width:
            state[f"blocks.{l}.mlp.W_in"] = torch.tensor(np.concatenate([b.W_in for b in blocks_l],
                                                                        axis=1))
            state[f"blocks.{l}.mlp.W_out"] = torch.tensor(np.concatenate([b.W_out for b in blocks_l],
                                                                         axis=0))
    # -- unembedding ---------------------------------------------------------------------------
    if space.is_categorical(output):
        items = list(space.dirs(output).items())
        W_U = np.zeros((d, len(items)))
        for j, (v, dd) in enumerate(items):
            W_U[dd, j] = 1.0
        out_values = [v for v, _ in items]
        out_enc = CATEGORICAL
    else:
        W_U = np.zeros((d, 1))
        W_U[space.dir(output), 0] = 1.0
        out_values = list(output.values)
        out_enc = "numerical"
    cfg = TransformerConfig(
        n_layers=plan.n_layers, d_model=d, d_head=D, n_heads=heads_per_layer,
        d_mlp=mlp_per_layer, d_vocab=V + 2, d_vocab_out=W_U.shape[1], n_ctx=n_ctx,
        pe="ape_learned", act_fn="relu", normalization_type=None, use_attn_scale=True,
        attention_dir="causal" if causal else "bidirectional",
        tied_embeddings=False, dropout=0.0, attn_bias=False, mlp_bias=False,
        d_head_widths=head_widths)
    state["embed.W_E"] = torch.tensor(W_E)
    state["pos_embed.W_pos"] = torch.tensor(W_pos)
    state["unembed.W_U"] = torch.tensor(W_U)
    state["unembed.b_U"] = torch.zeros(W_U.shape[1], dtype=torch.float64)
    model = _NoInit(cfg)                # no random initialisation of weights we overwrite
    model.__class__ = Transformer
    model.load_state_dict(state, strict=True, assign=True)
    model.eval()
    return Assembly(model, cfg, heads_per_layer, mlp_per_layer, head_nodes, out_values, out_enc)
