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

The BOS position's residual is tracked layer by layer (it attends only to itself), so every
head's ``bos`` key row and value row can be set to give exactly the BOS dimension as key and the
default as value (issue 38 item 4: non-zero weights):

* **MLPs at BOS** are computed, not switched off: BOS's residual is the same on every input,
  so an MLP's output there is a constant that later heads' ``bos`` rows absorb. Only a unit
  whose pre-activation at BOS sits within the tracking error of its kink, or whose MLP would
  amplify that error beyond ``BOS_TOLERANCE`` (a steep ramp), reads ``-BIG`` from ``bos``; a
  whole MLP at BOS costs nothing where it used to cost two weights per unit (``bos``, ``pad``).
  PAD positions need no switch-off: their outputs are never read, and heads mask PAD keys.
* **The BOS query's ``+F``** (``W_Q[bos]``, which makes BOS attend to itself) is dropped where
  BOS's own logit already exceeds every real key's by ``BOS_MARGIN`` (a real query's margin
  for its default) and the resulting error stays within ``BOS_TOLERANCE``; always in a causal
  model (the mask does it).
* **Heads of one layer with the same query/key weights** (``opens`` and ``closes`` of
  ``pair_balance``: one selector) are one head whose value space is both heads' values.

The tracking error ``delta`` bounds how far the model's BOS residual may be from the one
computed here (float64 rounding, the BOS query's weight on real keys), per direction; a unit's
output moves by its local Jacobian times ``delta``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp
import torch

from rasp_model import Transformer, TransformerConfig
from rasp.interpreter import convert_tokens, to_batch

from .graph_to_blocks import BIG, SCORE, HeadBlock, MLPBlock
from .encoding import CATEGORICAL
from .graph.nodes import CNode
from .layer_allocation import LayerPlan
from .residual_space import ResidualSpace

__all__ = ["choose_d_head", "assemble", "Assembly", "BOS_MARGIN", "BOS_TOLERANCE"]

#: the BOS query's logit on BOS must exceed its logit on every real key by this much for the
#: ``+F`` weight to be dropped (a real query selecting nothing has the same margin to its
#: default)
BOS_MARGIN = SCORE / 2
#: the largest tracking error ``delta`` of the BOS residual (per direction) accepted; beyond
#: it, the MLP units that would amplify it are switched off and ``+F`` is kept
BOS_TOLERANCE = 1e-11
#: relative float64 rounding allowed per product in the tracking error
_ROUND = 1e-15


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
    layer_heads = [_merged_heads([heads[n.name] for n in layer]) for layer in plan.heads]
    D = choose_d_head([hb for layer in layer_heads for hb, _ in layer], d)
    scale = math.sqrt(D)
    bounds = _RealBounds(space, [b.node for b in list(heads.values()) + list(mlps.values())]
                         + list(tokens_nodes) + ([indices_node] if indices_node else []))
    r_bos = W_E[0].copy()
    delta = np.zeros(d)          # bound on |model's BOS residual - r_bos|, per direction
    n_keys = n_ctx
    state: dict[str, torch.Tensor] = {}
    heads_per_layer, mlp_per_layer, head_nodes, head_widths = [], [], [], []
    for l in range(plan.n_layers):
        WQ, WK, WV, WO, names, widths_l = [], [], [], [], [], []
        garbage = r_bos.copy()
        garbage[BOS] = 0.0
        write = np.zeros(d)
        grow = np.zeros(d)
        for hb, name in layer_heads[l]:
            Wq = _pad_cols(hb.W_Q, D)
            Wk = _pad_cols(hb.W_K, D)
            kb = np.zeros(D)
            kb[: hb.r_qk] = hb.k_bos
            Wk[BOS] = kb - garbage @ Wk
            Wv_all = hb.W_V.copy()
            Wv_all[BOS] = hb.v_bos - garbage @ hb.W_V
            # the BOS query's weight on real keys, and whether +F is needed to keep it small
            b = hb.r_qk - 1
            F = Wq[BOS, b]
            Wq[BOS, b] = 0.0
            q = r_bos @ Wq
            margin = float(q @ kb) - bounds.upper(Wk @ q)
            spill = bounds.value_spill(hb.W_V, hb.v_bos, hb.W_O)
            err = n_keys * math.exp(-min(margin, 700.0)) * spill if margin > 0 else math.inf
            if causal:
                err = 0.0 * spill
            elif margin < BOS_MARGIN or np.max(delta + grow + err) > BOS_TOLERANCE:
                Wq[BOS, b] = F
                err = n_keys * math.exp(-min(margin + F, 700.0)) * spill
            grow += err + _ROUND * (np.abs(garbage) @ np.abs(hb.W_V)) @ np.abs(hb.W_O)
            for c0 in range(0, hb.r_ov, D):
                c1 = min(c0 + D, hb.r_ov)
                Wv = _pad_cols(Wv_all[:, c0:c1], D)
                Wo = np.zeros((D, d))
                Wo[: c1 - c0] = hb.W_O[c0:c1]
                vb = np.zeros(D)
                vb[: c1 - c0] = hb.v_bos[c0:c1]
                write += vb @ Wo
                WQ.append(Wq * scale)
                WK.append(Wk)
                WV.append(Wv)
                WO.append(Wo)
                names.append(name)
                widths_l.append(max(hb.r_qk, c1 - c0, 1))   # the rest of the D columns are 0
        r_bos = r_bos + write
        delta += grow
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
            ins, out_bos, grow = [], np.zeros(d), np.zeros(d)
            for blk in blocks_l:
                W_in, y, g = _at_bos(blk, r_bos, delta)
                ins.append(W_in)
                out_bos += y
                grow += g
            r_bos = r_bos + out_bos
            delta += grow
            state[f"blocks.{l}.mlp.W_in"] = torch.tensor(np.concatenate(ins, axis=1))
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


def _merged_heads(blocks: list[HeadBlock]) -> list[tuple[HeadBlock, str]]:
    """The heads of one layer, those with the same query/key weights and BOS key merged into
    one head (their value spaces side by side): ``[(head, "name1+name2")]``."""
    groups: dict[bytes, list[HeadBlock]] = {}
    for hb in blocks:
        key = hb.W_Q.tobytes() + b"|" + hb.W_K.tobytes() + b"|" + hb.k_bos.tobytes() + \
            str(hb.W_Q.shape).encode()
        groups.setdefault(key, []).append(hb)
    out = []
    for g in groups.values():
        if len(g) == 1:
            out.append((g[0], g[0].node.name))
            continue
        out.append((replace(g[0], W_V=np.concatenate([h.W_V for h in g], axis=1),
                            W_O=np.concatenate([h.W_O for h in g], axis=0),
                            v_bos=np.concatenate([h.v_bos for h in g])),
                    "+".join(h.node.name for h in g)))
    return out


class _RealBounds:
    """What the residual of a real (non-BOS, non-PAD) position can hold: ``one`` is 1, the
    directions of a categorical s-op are one-hot, an error flag is 0 or 1, a numerical s-op's
    direction is bounded by its largest value (unbounded: infinite)."""

    def __init__(self, space: ResidualSpace, nodes: list):
        self.group: dict[int, str] = {}
        self.mag: dict[int, float] = {}
        for name, dirs in space.cat.items():
            for dd in dirs.values():
                if dd != ResidualSpace.ONE:
                    self.group[dd] = name
        for name, dd in space.err.items():
            self.group[dd] = name + "!error"
        values = {n.name: n for n in nodes if n is not None}
        for name, dd in space.num.items():
            n = values.get(name)
            self.mag[dd] = _largest(n.values) if n is not None and not n.unbounded else math.inf

    def upper(self, c: np.ndarray) -> float:
        """An upper bound of ``r @ c`` over the residuals ``r`` of real positions."""
        total, best = float(c[ResidualSpace.ONE]), {}
        for dd in np.flatnonzero(c):
            if dd in (ResidualSpace.ONE, ResidualSpace.BOS, ResidualSpace.PAD):
                continue
            if dd in self.group:
                g = self.group[dd]
                best[g] = max(best.get(g, 0.0), float(c[dd]))
            else:
                total += abs(float(c[dd])) * self.mag.get(dd, math.inf)
        return total + sum(best.values())

    def absolute(self, c: np.ndarray) -> float:
        """An upper bound of ``|r @ c|`` over the residuals of real positions."""
        return max(self.upper(c), self.upper(-c))

    def value_spill(self, W_V: np.ndarray, v_bos: np.ndarray, W_O: np.ndarray) -> np.ndarray:
        """How far one real key's value can move a head's output from the BOS value, per
        residual direction, per unit of attention weight."""
        per = np.array([self.absolute(W_V[:, j]) + abs(float(v_bos[j]))
                        for j in range(W_V.shape[1])])
        return (per[:, None] * np.abs(W_O)).sum(0) if len(per) else np.zeros(W_O.shape[1])


def _largest(values) -> float:
    out = 0.0
    for v in values:
        try:
            x = abs(float(v))
        except (TypeError, ValueError):
            continue
        out = max(out, x)
    return out if math.isfinite(out) else math.inf


def _at_bos(blk: MLPBlock, r_bos: np.ndarray, delta: np.ndarray) -> tuple[np.ndarray,
                                                                             np.ndarray,
                                                                             np.ndarray]:
    """``(W_in, output at BOS, growth of the tracking error)`` of one MLP at the BOS position.

    A unit is *off* (exactly 0: its pre-activation is below minus its tracking error), *on*
    (linear: the error moves through the units' local Jacobian, where a saturated step pair
    cancels exactly) or at its *kink* (ReLU moves it by at most its pre-activation's error).
    When the MLP would carry the error beyond ``BOS_TOLERANCE``, the kink units, then every
    unit that is not off, read ``-BIG`` from ``bos`` (switched off)."""
    W_in = blk.W_in.copy()
    W_out = blk.W_out
    p = r_bos @ W_in
    noise = _ROUND * (np.abs(r_bos) @ np.abs(W_in))
    tol = delta @ np.abs(W_in) + noise
    off = p <= -tol              # exactly 0 when every direction it reads is exactly 0 at BOS
    on = ~off & (p >= tol)
    kink = ~off & ~on

    def growth(on, kink):
        g = ((tol[kink] + _ROUND * np.abs(p[kink]))[:, None] * np.abs(W_out[kink])).sum(0)
        if on.any():
            A, B = sp.csr_matrix(W_in[:, on]), sp.csr_matrix(W_out[on])
            g = g + abs(A @ B).T @ delta + (
                (noise[on] + _ROUND * np.abs(p[on]))[:, None] * np.abs(W_out[on])).sum(0)
        return g

    none = np.zeros_like(on)
    for on_, kink_ in ((on, kink), (on, none), (none, none)):
        grow = growth(on_, kink_)
        if np.max(delta + grow, initial=0.0) <= BOS_TOLERANCE:
            break
    live = on_ | kink_
    W_in[ResidualSpace.BOS, ~off & ~live] -= BIG
    y = np.maximum(p[live], 0.0) @ W_out[live]
    return W_in, y, grow
