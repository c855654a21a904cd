"""The API (after stage 7): ``compile_program``, which chains the stages, and the compiled model.

>>> from rasp import tokens, indices, length, select, aggregate
>>> from compiler import compile_program
>>> rev = aggregate(select(indices, length - indices - 1, "=="), tokens)
>>> cm = compile_program(rev, vocab={"a", "b", "c"}, max_seq_len=5)
>>> cm.run(["abc", "cab"]).tolist()
[['c', 'b', 'a'], ['b', 'a', 'c']]
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import torch

from rasp.interpreter import stack_sequences, to_batch
from rasp.ops import homogeneous_array
from rasp.ir import Length, RASPError, SOp
from rasp.analyses.raspl import noncausal_readers
from rasp.repl.display import html_table
from rasp_model import Transformer, TransformerConfig, save_safetensors
from rasp_model.files import FileReadError, atomic_write_bytes, read_json, read_safetensors

from .basis_inference import infer_bases
from .blocks_to_model import Assembly, assemble
from .bool_typing import chain_spec, type_rows
from .graph_to_blocks import build_head, build_mlp
from .encoding import CATEGORICAL
from .verification import GATE_SAMPLES, gate_is_exhaustive, verify_compiled
from .export import save_transformer_lens
from .errors import (CompiledRuntimeError, CompilerError, FloatPrecisionError,
                     ModelTooLargeError, UnsupportedError, VerificationError)
from .graph.mlp_pricing import mlp_units
from .graph.nodes import CompilerGraph
from .graph.rasp_to_graph import build_graph
from .layer_allocation import allocate_layers
from .raising import check_model_raises, raising_search, refuse_gate_raising
from .residual_space import ResidualSpace

__all__ = ["compile_program", "CompiledModel", "load_compiled", "DEFAULT_MAX_PARAMS",
           "MAX_SEQ_LEN", "RAISING"]

#: ``compile_program``'s ``raising`` options: refuse a program on which the interpreter raises
#: for an input of the declared vocabulary and lengths (the default), or compile it with those
#: inputs declared out of contract (listed in ``stats["raising_inputs"]``)
RAISING = ("refuse", "declare")

#: models estimated above this many parameters are refused before any weight is allocated
DEFAULT_MAX_PARAMS = 50_000_000

#: Longest max_seq_len the compiler accepts: checked before anything sized by max_seq_len is
#: built (value sets enumerate the positions; at 4e7 they took 9 GB before the size estimate
#: could refuse the model).
MAX_SEQ_LEN = 1 << 16


def _py(v):
    return v.item() if isinstance(v, np.generic) else v


@dataclass(kw_only=True, eq=False, repr=False)
class CompiledModel:
    """A program compiled to a :class:`~rasp_model.Transformer`.

    Attributes:
        model: the float64 ``Transformer`` (no LayerNorm, ReLU, ``ape_learned`` positions, BOS
            token id 0 at position 0, PAD id ``len(vocab) + 1``).
        vocab: the input token values; token id ``i + 1`` is ``vocab[i]``.
        stats: ``layers, heads, max_heads, heads_per_layer, d_model, d_head, mlp_hidden,
            mlp_per_layer, params, nonzero_params, compile_seconds`` (wall, the stages),
            ``compile_cpu_seconds``, and from the verification gate ``verify_seconds``,
            ``verify_cpu_seconds``, ``verified_inputs``, ``verified_exhaustively``.
        residual_labels: one label per residual direction (``one``, ``bos``, ``pad``,
            ``name:value`` / ``name``).
        output_values, output_encoding: how the unembedding columns decode.
        causal, max_seq_len.

    Built with keyword fields only (``CompiledModel(model=..., vocab=..., ...)``); the
    list fields after ``stats`` are the runtime checks and the decoding tables.
    """

    model: Any
    vocab: list
    residual_labels: list
    output_values: list
    output_encoding: str
    causal: bool
    max_seq_len: int
    stats: dict
    #: [(aggregate name, [dirs])]: a categorical aggregate that may average different values
    checks: list = field(default_factory=list)
    #: which node each head computes, per layer
    head_nodes: list = field(default_factory=list)
    #: name -> {"encoding", "values", "dirs", "ir_id"}
    node_dirs: dict = field(default_factory=dict)
    output_name: str | None = None
    #: [(name, dir, message)]: a map failing on some input values flags ``dir``
    error_dirs: list = field(default_factory=list)
    #: [(aggregate, dir)]: the selector-width head of a mean of strings
    count_checks: list = field(default_factory=list)
    #: [(s-op, string dirs, number dirs)]: a sequence cannot mix strings and numbers
    kind_checks: list = field(default_factory=list)
    #: a causal model compiled with ``allow_noncausal=True`` from a program whose selects
    #: read later positions: the first such select (None otherwise)
    reads_later_positions: str | None = None
    #: the output is a mean of bools with a bool or None default, or a chain of means down to
    #: one (issue 51): :func:`compiler.bool_typing.chain_spec`'s levels (each mean's count head
    #: ``1/(w+1)``, value directions and default); :meth:`run` types the output as the
    #: interpreter types the sequences of one length (:func:`compiler.bool_typing.type_rows`).
    #: Models saved before: a count head's direction or a list of them (bools where every
    #: query of the batch selects at most one key, in every mean)
    bool_typing: int | list | None = None

    def __post_init__(self):
        self.vocab = list(self.vocab)
        self.residual_labels = list(self.residual_labels)
        self.output_values = list(self.output_values)
        self.causal = bool(self.causal)
        self.max_seq_len = int(self.max_seq_len)
        self.stats = dict(self.stats)
        self.checks = [(n, d) for n, d in (self.checks or [])]
        self.head_nodes = self.head_nodes or []
        self.node_dirs = self.node_dirs or {}
        self.error_dirs = [tuple(e) for e in (self.error_dirs or [])]
        self.count_checks = [tuple(e) for e in (self.count_checks or [])]
        self.kind_checks = [tuple(e) for e in (self.kind_checks or [])]
        self._ids = {self._key(v): i + 1 for i, v in enumerate(self.vocab)}
        self._sorted_outputs = None

    def check_decodable(self) -> None:
        """Refuse next-token decoding with a model whose program reads later positions.

        Raises:
            UnsupportedError: the model was compiled with ``allow_noncausal=True`` from a
                program with a non-causal select: it computes the program's prefix semantics,
                which are not the program's values, so greedy decoding would produce other
                tokens than the program (Issue 15: 0 of 8 right, silently).
        """
        if self.reads_later_positions:
            raise UnsupportedError(
                f"cannot decode token by token with this model: its program reads later "
                f"positions ({self.reads_later_positions} is not causal) and was compiled with "
                "allow_noncausal=True, so the model computes prefix results, not the "
                "program's values; write the program in RASP-L causal mode, or decode with the "
                "interpreter")

    # -- inputs --------------------------------------------------------------------------------
    @staticmethod
    def _key(v):
        v = _py(v)
        return (type(v).__name__ if not isinstance(v, bool) else "bool", v)

    @property
    def pad_id(self) -> int:
        return len(self.vocab) + 1

    def encode(self, inputs: Any) -> tuple[torch.Tensor, list[int]]:
        """Token ids ``[batch, 1 + max_len]`` (BOS first, PAD after shorter sequences) and the
        sequence lengths. Accepts what ``rasp.evaluate`` accepts, and also a list of sequences
        of different lengths. Raises :class:`CompiledRuntimeError` for an unknown token or a
        sequence longer than ``max_seq_len``."""
        seqs = self._sequences(inputs)
        lens = [len(s) for s in seqs]
        if min(lens) < 1:
            raise CompiledRuntimeError("empty input: RASP evaluates non-empty sequences")
        if max(lens) > self.max_seq_len:
            raise CompiledRuntimeError(
                f"input of length {max(lens)} is longer than the compiled max_seq_len "
                f"{self.max_seq_len}")
        ids = np.full((len(seqs), 1 + max(lens)), self.pad_id, dtype=np.int64)
        ids[:, 0] = 0
        known: dict = {}              # (type, value) -> id, each distinct token looked up once
        for b, s in enumerate(seqs):
            row = []
            for v in s:
                t = known.get((v.__class__, v))
                if t is None:
                    k = self._key(v)
                    if k not in self._ids:
                        raise CompiledRuntimeError(
                            f"token {v!r} is not in the compiled vocabulary "
                            f"{{{', '.join(map(repr, self.vocab))}}}")
                    t = known[(v.__class__, v)] = self._ids[k]
                row.append(t)
            ids[b, 1: 1 + len(row)] = row
        return torch.tensor(ids), lens

    @staticmethod
    def _sequences(inputs) -> list[list]:
        if isinstance(inputs, (list, tuple)) and inputs and all(
                isinstance(x, (list, tuple, str, np.ndarray)) for x in inputs) and len(
                {len(x) for x in inputs}) > 1:
            return [to_batch([list(x)])[0].tolist() for x in inputs]
        arr = to_batch(inputs)
        return [row.tolist() for row in arr]

    # -- running -------------------------------------------------------------------------------
    @torch.no_grad()
    def _forward(self, inputs):
        ids, lens = self.encode(inputs)
        L = self.model.cfg.n_layers
        hook = f"blocks.{L - 1}.hook_resid_post" if L else "hook_embed"
        with _threads(self):
            logits, cache = self.model.run_with_cache(ids, names=[hook])
        resid = cache[hook]
        if L == 0 and self.model.pos_embed is not None:
            resid = resid + self.model.pos_embed.W_pos[: ids.shape[1]][None]
        return logits.numpy(), resid.numpy(), lens

    def run(self, inputs: Any) -> np.ndarray | list:
        """The program's output: ``[batch, seq]`` array like ``rasp.evaluate`` (a list of 1-D
        arrays when the sequences have different lengths; the shorter ones are PAD-masked).

        Raises :class:`CompiledRuntimeError` for inputs the compiled model cannot represent
        exactly: unknown tokens, too long inputs, or a categorical aggregate that averaged
        different values (the interpreter raises for these as well)."""
        logits, resid, lens = self._forward(inputs)
        self._check(resid, lens)
        out = self.decode(logits, lens)
        if self.bool_typing is None:
            return out
        return self._typed_bools(out, resid, lens)

    def _typed_bools(self, out, resid, lens):
        """The output of a mean of bools as the interpreter types it: the sequences of one
        length are evaluated as one batch (:func:`compiler.bool_typing.type_rows`; a model
        saved before: the moved bools when every query selected at most one key, its count
        heads reading ``1/(w+1) >= 1/2``, else numbers)."""
        rows = [out[b] for b in range(len(lens))]
        for n in set(lens):
            idx = [b for b, m in enumerate(lens) if m == n]
            if isinstance(self.bool_typing, list) and isinstance(self.bool_typing[0], dict):
                typed = type_rows(self.bool_typing, resid[idx, 1: 1 + n], [rows[b] for b in idx])
                for b, r in zip(idx, typed):
                    rows[b] = r
            elif all(np.all(resid[b, 1: 1 + n, self.bool_typing] > 0.4) for b in idx):
                for b in idx:
                    rows[b] = homogeneous_array([v if v is None else bool(v)
                                                 for v in np.asarray(rows[b]).tolist()])
        if len(set(lens)) == 1:
            return stack_sequences([r[None, :] for r in rows])
        return rows

    def _check(self, resid, lens):
        for name, d, message in self.error_dirs:
            for b, n in enumerate(lens):
                bad = np.flatnonzero(resid[b, 1: 1 + n, d] > 0.5)
                if bad.size:
                    raise CompiledRuntimeError(
                        f"{message} (at position {int(bad[0])} of input {b}; the interpreter "
                        "raises here too)")
        for name, sdirs, ndirs in self.kind_checks:
            for b, n in enumerate(lens):
                block = resid[b, 1: 1 + n]
                if np.any(block[:, sdirs] > 0.5) and np.any(block[:, ndirs] > 0.5):
                    raise CompiledRuntimeError(
                        f"'{name}' would mix strings and numbers in input {b} (some queries "
                        "select nothing and get a default of the other type); a sequence cannot "
                        "mix strings and numbers (the interpreter raises here too)")
        for name, d in self.count_checks:
            for b, n in enumerate(lens):
                bad = np.flatnonzero(resid[b, 1: 1 + n, d] < 0.45)   # 1/(w+1): w >= 2
                if bad.size:
                    raise CompiledRuntimeError(
                        f"aggregate '{name}' asked to average several string values at query "
                        f"position {int(bad[0])} of input {b}; a mean needs numbers (the "
                        "interpreter raises here too)")
        for name, dirs in self.checks:
            for b, n in enumerate(lens):
                block = resid[b, 1: 1 + n][:, dirs]
                bad = np.flatnonzero(np.abs(block.max(-1) - 1.0) > 1e-3)
                if bad.size:
                    raise CompiledRuntimeError(
                        f"aggregate '{name}' averaged several different categorical values at "
                        f"position {int(bad[0])} of input {b}; a mean needs numbers (the "
                        f"interpreter raises here too)")

    def _decode(self, logits: np.ndarray, n: int) -> np.ndarray:
        if self.output_encoding == CATEGORICAL:
            idx = logits.argmax(-1)
            top = logits.max(-1)
            bad = np.flatnonzero(np.abs(top - 1.0) > 1e-3)
            if bad.size:
                raise CompiledRuntimeError(
                    f"output '{self.output_name}' at position {int(bad[0])} is not a clean "
                    f"categorical value (largest logit {top[bad[0]]:.4f})")
            return homogeneous_array(_bools_with_numbers_as_ints(
                [self.output_values[i] for i in idx.tolist()]))
        x = logits[:, 0]
        if not self.output_values:        # a value set too large to enumerate: the number
            return x.astype(np.float64)
        if self._sorted_outputs is None:     # once per model
            vals = np.array([float(v) for v in self.output_values])
            order = np.argsort(vals)
            self._sorted_outputs = (order, vals[order])
        order, vs = self._sorted_outputs
        pos = np.clip(np.searchsorted(vs, x), 1, len(vs) - 1) if len(vs) > 1 else np.zeros(
            len(x), dtype=int)
        if len(vs) > 1:
            left, right = vs[pos - 1], vs[pos]
            pick = np.where(np.abs(x - left) <= np.abs(right - x), pos - 1, pos)
        else:
            pick = pos
        snapped = [self.output_values[order[i]] for i in pick]
        err = np.abs(np.array([float(s) for s in snapped]) - x)
        if np.any(err > 1e-4 * max(1.0, float(np.max(np.abs(vs))) if len(vs) else 1.0)):
            j = int(np.argmax(err))
            raise CompiledRuntimeError(
                f"numerical output '{self.output_name}' at position {j} is {x[j]!r}, not one of "
                "its possible values")
        return homogeneous_array(_bools_with_numbers_as_ints(snapped))

    @torch.no_grad()
    def attention(self, inputs: Any) -> np.ndarray:
        """Attention probabilities ``[batch, layer, head, query, key]`` (numpy; BOS at position
        0 included; layers with fewer heads than the widest are padded with zeros)."""
        ids, _ = self.encode(inputs)
        with _threads(self):
            pats = self.model.attention_patterns(ids)
        B, T = ids.shape
        H = max([p.shape[1] for p in pats] + [0])
        out = np.zeros((B, len(pats), H, T, T))
        for l, p in enumerate(pats):
            out[:, l, : p.shape[1]] = p
        return out

    # -- export --------------------------------------------------------------------------------
    def metadata(self) -> dict:
        return {
            "format": "rasp-lab-compiled",
            "config": self.model.cfg.to_dict(),
            "vocab": self.vocab,
            "token_ids": {"bos": 0, "pad": self.pad_id,
                          "vocab": {str(i + 1): v for i, v in enumerate(self.vocab)}},
            "residual_labels": self.residual_labels,
            "output": {"name": self.output_name, "encoding": self.output_encoding,
                       "values": self.output_values},
            "causal": self.causal,
            "reads_later_positions": self.reads_later_positions,
            "max_seq_len": self.max_seq_len,
            "stats": self.stats,
            "checks": [[n, list(map(int, d))] for n, d in self.checks],
            "errors": [[n, int(d), m] for n, d, m in self.error_dirs],
            "count_checks": [[n, int(d)] for n, d in self.count_checks],
            "bool_typing": self.bool_typing,
            "kind_checks": [[n, list(map(int, a)), list(map(int, b))]
                            for n, a, b in self.kind_checks],
            "head_nodes": self.head_nodes,
            "node_dirs": self.node_dirs,
        }

    def save(self, directory: str | os.PathLike) -> None:
        """Write ``DIR/model.safetensors`` (TransformerLens names and shapes, float64, incl.
        ``W_U``), ``DIR/model.json`` (config, vocabulary, residual labels, output
        encoding), and the TransformerLens export ``DIR/tl_config.json`` +
        ``DIR/tl_model.safetensors`` (:func:`compiler.export.save_transformer_lens`)."""
        os.makedirs(directory, exist_ok=True)
        meta = self.metadata()
        save_safetensors(self.model, os.path.join(directory, "model.safetensors"),
                         metadata={"compiled": json.dumps(
                             {k: v for k, v in meta.items() if k != "config"})})
        atomic_write_bytes(os.path.join(directory, "model.json"),
                           json.dumps(meta, indent=1).encode())
        save_transformer_lens(self, directory)

    def size_table(self) -> str:
        """A one-row text table of the model's size."""
        s = self.stats
        cols = ["layers", "heads", "d_model", "d_head", "mlp_hidden", "params",
                "nonzero_params", "compile_seconds"]
        head = " | ".join(cols)
        row = " | ".join(f"{s[c]:.3f}" if isinstance(s[c], float) else str(s[c]) for c in cols)
        return f"| {head} |\n|{'---|' * len(cols)}\n| {row} |"

    def __repr__(self) -> str:
        """One line outside Jupyter: the output, layers and heads per layer, residual width,
        parameters, vocabulary, ``max_seq_len`` and causality."""
        cfg = self.model.cfg
        heads = [cfg.heads(i) for i in range(cfg.n_layers)]
        vocab = ", ".join(map(repr, self.vocab[:8])) + (", ..." if len(self.vocab) > 8 else "")
        return (f"CompiledModel(output={self.output_name!r} ({self.output_encoding}), "
                f"layers={cfg.n_layers}, heads_per_layer={heads}, d_model={cfg.d_model}, "
                f"params={self.stats.get('params', self.model.num_parameters())}, "
                f"vocab=[{vocab}], max_seq_len={self.max_seq_len}, "
                f"{'causal' if self.causal else 'bidirectional'})")

    def decode(self, logits: Any, lengths: Iterable[int] | None = None) -> np.ndarray | list:
        """The program's values from the model's logits, e.g. those of the TransformerLens
        export (``to_transformer_lens(cm)(ids)``), as :meth:`run` decodes its own.

        Args:
            logits: ``[batch, 1 + seq, d_vocab_out]`` or ``[1 + seq, d_vocab_out]`` (a torch
                tensor or an array); position 0 is BOS, as :meth:`encode` writes the ids.
            lengths: each sequence's length without BOS (the second value :meth:`encode`
                returns), for a batch padded with PAD; default: every position.

        Returns:
            ``[batch, seq]`` array (``[seq]`` for 2-D logits), or a list of ``[seq]`` arrays
            when ``lengths`` differ, as :meth:`run`.

        Raises:
            CompiledRuntimeError: the logits have the wrong shape, or a position does not
                decode to a clean value (categorical: a largest logit not 1; numerical: not
                one of the output's possible values).
        """
        if isinstance(logits, torch.Tensor):
            logits = logits.detach().cpu().numpy()
        arr = np.asarray(logits, dtype=np.float64)
        one = arr.ndim == 2
        if one:
            arr = arr[None]
        width = len(self.output_values) if self.output_encoding == CATEGORICAL else 1
        if arr.ndim != 3 or arr.shape[1] < 2 or arr.shape[2] != width:
            raise CompiledRuntimeError(
                f"decode expects logits [batch, 1 + seq, {width}] (BOS at position 0), got "
                f"shape {tuple(np.shape(logits))}")
        seq = arr.shape[1] - 1
        lens = [seq] * arr.shape[0] if lengths is None else [int(n) for n in lengths]
        if len(lens) != arr.shape[0] or not all(1 <= n <= seq for n in lens):
            raise CompiledRuntimeError(
                f"decode: lengths {lens} do not fit logits of shape {tuple(arr.shape)}")
        outs = [self._decode(arr[b, 1: 1 + n], n) for b, n in enumerate(lens)]
        if one:
            return outs[0]
        if len(set(lens)) == 1:
            return stack_sequences([o[None, :] for o in outs])
        return outs

    def _repr_html_(self) -> str:
        """Jupyter's display: one row per layer (its heads, the s-ops they compute, its MLP's
        hidden units), then the totals (``self.model``'s parameters as stored, per-head widths
        unpadded; residual width ``d_model``), the output and the vocabulary."""
        cfg = self.model.cfg
        names = self.head_nodes if len(self.head_nodes) == cfg.n_layers else [[]] * cfg.n_layers
        heads = [cfg.heads(i) for i in range(cfg.n_layers)]
        mlps = [cfg.mlp_width(i) for i in range(cfg.n_layers)]
        rows = [(f"layer {i}", f"{h} head{'s' * (h != 1)}", ", ".join(map(str, names[i])) or "-",
                 f"MLP: {m} hidden units" if m else "no MLP")
                for i, (h, m) in enumerate(zip(heads, mlps))]
        params, nonzero = self.model.num_parameters(), self.model.num_nonzero_parameters()
        vocab = ", ".join(map(str, self.vocab[:12])) + (", ..." if len(self.vocab) > 12 else "")
        rows += [("layers", cfg.n_layers, "heads", sum(heads)),
                 ("MLPs", sum(1 for m in mlps if m), "parameters",
                  f"{params:,} ({nonzero:,} non-zero)"),
                 ("residual width", cfg.d_model, "max_seq_len", self.max_seq_len),
                 ("output", f"{self.output_name} ({self.output_encoding})",
                  "vocab", f"{len(self.vocab)}: {vocab}")]
        kind = "causal" if self.causal else "bidirectional"
        return html_table(rows, caption=f"compiled model ({kind})")


class _threads:
    """Run small compiled models on one thread: their matrices are tiny, and torch's thread
    pool only adds contention (hundreds of times slower on a loaded 2-core machine)."""

    def __init__(self, cm):
        self.one = cm.stats.get("params", 0) < 5_000_000

    def __enter__(self):
        self.prev = torch.get_num_threads()
        if self.one and self.prev != 1:
            torch.set_num_threads(1)

    def __exit__(self, *exc):
        if self.one and self.prev != 1:
            torch.set_num_threads(self.prev)
        return False


def _checked_compiled_meta(meta, where: str) -> dict:
    """``model.json`` read from a file, its structure checked before anything is built:
    an object with ``config`` (an object), ``vocab`` and ``residual_labels`` (lists),
    ``output`` (an object with ``values`` a list and ``encoding`` a string), ``causal`` a
    bool, ``max_seq_len`` a positive integer, ``stats`` an object. CompilerError otherwise."""
    def bad(msg):
        raise CompilerError(f"{where}: not a compiled rasp-lab model ({msg})")
    if not isinstance(meta, dict):
        bad("not a JSON object")
    for key, kind in (("config", dict), ("vocab", list), ("residual_labels", list),
                      ("output", dict), ("causal", bool), ("max_seq_len", int), ("stats", dict)):
        if not isinstance(meta.get(key), kind):
            bad(f"{key} missing or not a {kind.__name__}")
    out = meta["output"]
    if not isinstance(out.get("values"), list) or not isinstance(out.get("encoding"), str):
        bad("output needs values (a list) and encoding (a string)")
    if isinstance(meta["max_seq_len"], bool) or meta["max_seq_len"] < 1:
        bad("max_seq_len must be a positive integer")
    return meta


def load_compiled(directory: str | os.PathLike) -> CompiledModel:
    """Load a model written by :meth:`CompiledModel.save`. Raises :class:`CompilerError` with
    a clear message for a missing or inconsistent directory."""
    jpath = os.path.join(directory, "model.json")
    wpath = os.path.join(directory, "model.safetensors")
    for p in (jpath, wpath):
        if not os.path.exists(p):
            raise CompilerError(f"{directory}: missing {os.path.basename(p)}")
    try:
        meta = _checked_compiled_meta(read_json(jpath, "compiled model description"), jpath)
        cfg = TransformerConfig.from_dict(meta["config"])        # validated: within the budget
        state, _ = read_safetensors(wpath, "compiled weights")
        model = Transformer(cfg).double()
        model.load_state_dict(model.unpack_state_dict(state), strict=True)
    except FileReadError as e:
        raise CompilerError(f"not a compiled rasp-lab model: {e}") from None
    except (KeyError, ValueError, TypeError, RuntimeError) as e:
        raise CompilerError(f"{directory}: not a compiled rasp-lab model "
                            f"({str(e)[:200]})") from None
    model.eval()
    return CompiledModel(
        model=model, vocab=meta["vocab"], residual_labels=meta["residual_labels"],
        output_values=meta["output"]["values"], output_encoding=meta["output"]["encoding"],
        causal=meta["causal"], max_seq_len=meta["max_seq_len"], stats=meta["stats"],
        checks=meta.get("checks", []), head_nodes=meta.get("head_nodes"),
        node_dirs=meta.get("node_dirs"), output_name=meta["output"].get("name"),
        error_dirs=meta.get("errors"), count_checks=meta.get("count_checks"),
        bool_typing=meta.get("bool_typing"),
        kind_checks=meta.get("kind_checks"),
        reads_later_positions=meta.get("reads_later_positions"))


def _bools_with_numbers_as_ints(vals: list) -> list:
    """A sequence holding bools and other numbers holds them as 0/1, as the interpreter's
    NumPy arrays do (a ``max`` over ints with the default ``False`` is ``[0, 0, 1, ...]``)."""
    if any(isinstance(v, bool) for v in vals) and any(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return [int(v) if isinstance(v, bool) else v for v in vals]
    return vals


def _at(node) -> str:
    return f" at {node.span.line}:{node.span.column}" if node is not None and node.span else ""


def _estimate(cg: CompilerGraph, space: ResidualSpace, vocab_size: int, n: int) -> int:
    d = space.d_model
    total = d * (vocab_size + 2) + d * (n + 1)
    for c in cg.nodes:
        if c.kind == "mlp":
            total += 2 * d * mlp_units(c.encoding, c.expr)
        elif c.is_attention:
            r = len(c.values) if c.encoding == CATEGORICAL else 1
            qk = 1 + min(sum(len(f.key.values) if f.key else 1 for f in c.selector.factors) + 1,
                         sum(len(f.query.values) if f.query else 1
                             for f in c.selector.factors) + 1)
            total += 2 * d * (r + qk)
    return total


def compile_program(sop: SOp, vocab: Iterable[Any], max_seq_len: int, causal: bool = False,
                    allow_noncausal: bool = False, max_params: int = DEFAULT_MAX_PARAMS,
                    verify_samples: int = GATE_SAMPLES, raising: str = "refuse") -> CompiledModel:
    """Compile an s-op into transformer weights.

    Args:
        sop: the program's output s-op (IR node, e.g. from the Python API or
            ``rasp.run_source``).
        vocab: the input token values (e.g. ``{"a", "b", "c"}`` or ``[1, 2, 3]``); sets are
            sorted.
        max_seq_len: the longest input (positions ``1..max_seq_len`` after BOS).
        causal: compile a decoder-only (causal-mask) model: RASP-L semantics, equal to
            ``rasp.evaluate(sop, causal=True)``. A program with non-causal selects is refused
            (it would silently compute prefix results: Tracr's failure mode 8) unless
            ``allow_noncausal=True``; ``length`` is always refused in a causal model.
        max_params: refuse (before allocating) models estimated larger than this.
        verify_samples: random inputs per length of the verification gate (at least 1). The
            gate (:func:`compiler.verification.verify_compiled`) compares the assembled model
            with the interpreter exhaustively where all inputs up to ``max_seq_len`` number
            at most ``EXHAUSTIVE_LIMIT``, else on this many seeded random inputs (and the
            constant sequences) at every length.
        raising: what to do with a program on which the interpreter raises for some input of
            ``vocab`` and lengths ``1..max_seq_len`` (issue 51; the value sets list the
            operations that may raise, :func:`compiler.raising.raising_operations`, and the
            interpreter is run over the inputs to find where:
            :func:`compiler.raising.find_raising_inputs`, every input when they number at
            most 4,096, else 64 seeded inputs per length). ``"refuse"`` (default): refuse it
            up front, naming the input and the operation. ``"declare"``: compile it with the
            inputs found declared out of the program's contract (listed in
            ``stats["raising_inputs"]``; the model must raise on each, as the interpreter
            does, else it is refused). Either way an operation that may raise and for which
            the model has no run-time check (a ``max`` / ``min`` over ``None``, an
            intermediate mixing strings and numbers without directions) is refused unless
            every input was run and none raised; a sampled search that finds no raising input
            compiles the program, whose run-time checks raise on such an input
            (``stats["raising_search"]`` says ``"sampled"``).

    Returns:
        :class:`CompiledModel` whose ``.run(inputs)`` equals ``rasp.evaluate(sop, inputs)``
        (``causal=True``: ``rasp.evaluate(sop, inputs, causal=True)``), raising where the
        interpreter raises. ``stats`` includes ``verify_seconds``, ``verified_inputs`` and
        ``raising_search`` (inputs run, ``"all"`` or ``"sampled"``) with ``raising_inputs``
        (``[[input, message], ...]``: inputs found where the interpreter, and the model, raise;
        at most 4; empty unless ``raising="declare"``), both absent when no operation may
        raise.

    Raises:
        UnsupportedError: a construct that cannot be compiled, or a value set that cannot be
            made exact (names the op, line:column, why); a program on which the interpreter
            raises on an input found (``raising="refuse"``, the default) or where the model
            would not (names the input and the operation).
        FloatPrecisionError: (an ``UnsupportedError``) an operation whose result depends on
            how the interpreter's float64 arithmetic rounds a mean (``round(mean * 10)`` of
            non-dyadic floats, a comparison or ``trunc`` of one): refused before building
            the model when the gate samples inputs; when the gate compares every input, the
            model is built and refused only if some input differs.
        ModelTooLargeError: the estimated size exceeds ``max_params``.
        VerificationError: the verification gate found an input on which the compiled model
            differs from the interpreter (the message gives it).
        CompilerError: bad arguments, or an internal error of a stage. No other exception
            escapes.
    """
    if not isinstance(verify_samples, int) or isinstance(verify_samples, bool) or \
            verify_samples < 1:
        raise CompilerError(f"verify_samples must be a positive int, got {verify_samples!r}")
    if raising not in RAISING:
        raise CompilerError(f"raising must be 'refuse' or 'declare', got {raising!r}")
    try:
        hazards: list[str] = []
        cm = _compile(sop, vocab, max_seq_len, causal, allow_noncausal, max_params, hazards,
                      raising)
        check_model_raises(cm)
    except CompilerError:
        raise
    except RASPError as e:
        raise CompilerError(f"cannot compile: {e.message}", e.span) from None
    except _INTERNAL as e:
        raise CompilerError(f"cannot compile: internal error {type(e).__name__}: {e}",
                            sop.span if isinstance(sop, SOp) else None) from None
    except Exception as e:   # noqa: BLE001 - a Python callable of the program raised: the
        # error surface stays closed (only CompilerError leaves compile_program)
        raise CompilerError(f"cannot compile: a Python function of the program raised "
                            f"{type(e).__name__}: {e}",
                            sop.span if isinstance(sop, SOp) else None) from None
    t1, c1 = time.perf_counter(), time.process_time()
    try:
        check = verify_compiled(cm, sop, samples=verify_samples)
    except Exception as e:   # noqa: BLE001 - _INTERNAL or a callable's exception
        raise CompilerError(f"verification of the compiled model failed: "
                            f"{type(e).__name__}: {e}", sop.span) from None
    cm.stats["verify_seconds"] = time.perf_counter() - t1
    cm.stats["verify_cpu_seconds"] = time.process_time() - c1
    cm.stats["verified_inputs"] = check.checked
    cm.stats["verified_exhaustively"] = check.exhaustive
    if not check.ok and hazards:
        # a precision-sensitive operation was left to the exhaustive gate, which found an input
        # where the interpreter's float64 rounding differs from the model's exact mean
        raise FloatPrecisionError(f"{hazards[0]} (the exhaustive check found it on "
                                  f"{check.mismatches} of {check.checked} inputs; first: "
                                  f"{check.counterexample})", None, sop.span)
    if not check.ok:
        raise VerificationError(
            f"the compiled model differs from the interpreter on {check.mismatches} of "
            f"{check.checked} inputs checked ({'all inputs' if check.exhaustive else 'sampled'}"
            f"); refusing to return it. First counterexample: {check.counterexample}",
            sop.span)
    refuse_gate_raising(cm, sop, check, raising)
    return cm


#: exceptions of a compiler stage that are bugs or unforeseen inputs, reported as
#: :class:`CompilerError` (only the toolkit's errors escape ``compile_program``)
_INTERNAL = (ValueError, TypeError, ArithmeticError, IndexError, KeyError, AssertionError,
             RecursionError, np.linalg.LinAlgError, RuntimeError)


def _compile(sop, vocab, max_seq_len, causal, allow_noncausal, max_params,
             hazards: list[str] | None = None, raising: str = "refuse") -> CompiledModel:
    """The stages of :func:`compile_program` (Tracr's ``compiling.compile_rasp_to_model``).
    ``hazards``: a list that collects the precision-sensitive operations
    (``FloatPrecisionError`` messages) when the gate will compare every input; with a sampled
    gate they are refused at once."""
    t0, c0 = time.perf_counter(), time.process_time()
    vocab = _checked_arguments(sop, vocab, max_seq_len, max_params)
    reads_later = _later_positions_read(sop, max_seq_len, causal, allow_noncausal)
    if hazards is not None and not gate_is_exhaustive(len(vocab), max_seq_len):
        hazards = None
    value_sets = infer_bases(sop, vocab, max_seq_len, causal, hazards)       # 1. value sets
    cg = build_graph(sop, vocab, max_seq_len, causal, value_sets=value_sets)   # 2. graph
    space = ResidualSpace(cg.nodes)                                           # 3. residual
    _check_size(cg, space, len(vocab), max_seq_len, max_params)
    found = raising_search(sop, value_sets, cg, space, vocab, max_seq_len, causal, raising)
    heads, mlps = _blocks(cg, space, hazards)                                 # 4. blocks
    plan = allocate_layers(cg)                                                # 5. layers
    tokens_nodes = [n for n in cg.nodes if n.kind == "tokens"]
    idx = [n for n in cg.nodes if n.kind == "indices"]
    asm = assemble(plan, space, heads, mlps, vocab, tokens_nodes,             # 6. assembly
                   idx[0] if idx else None, cg.output, max_seq_len, causal)
    cm = _compiled_model(cg, space, asm, vocab, max_seq_len, causal, reads_later, t0, c0)
    if found is not None:
        cm.stats["raising_inputs"] = [[list(x), m] for x, m in found.found]
        cm.stats["raising_search"] = [found.checked, "all" if found.exhaustive else "sampled"]
    return cm


def _checked_arguments(sop, vocab, max_seq_len: int, max_params: int) -> list:
    """The vocabulary, deduplicated and sorted, after checking the arguments; refuses a
    ``max_seq_len`` whose position embedding alone exceeds ``max_params``."""
    if not isinstance(max_seq_len, int) or isinstance(max_seq_len, bool) or max_seq_len < 1:
        raise CompilerError(f"max_seq_len must be a positive int, got {max_seq_len!r}")
    if isinstance(vocab, str):
        vocab = list(vocab)
    vocab = list(vocab)
    if isinstance(vocab, list) and not vocab:
        raise CompilerError("the vocabulary is empty")
    if any(isinstance(v, (list, dict, tuple, set)) for v in vocab):
        raise CompilerError("vocabulary items must be atoms (strings, numbers, bools)")
    seen = []
    for v in vocab:
        if v not in seen:
            seen.append(_py(v))
    vocab = seen
    try:
        vocab = sorted(vocab)
    except TypeError:
        raise CompilerError("the vocabulary mixes strings and numbers") from None
    if not isinstance(sop, SOp):
        raise CompilerError(f"compile_program expects an s-op, got {type(sop).__name__}")
    if max_seq_len > MAX_SEQ_LEN:
        raise ModelTooLargeError(
            f"max_seq_len {max_seq_len:,} is above the compiler's limit of {MAX_SEQ_LEN:,} "
            f"positions (compiler.compile.MAX_SEQ_LEN): the value sets enumerate positions")
    floor = max_seq_len + 1
    if floor > max_params:
        raise ModelTooLargeError(
            f"max_seq_len {max_seq_len:,} needs at least {floor:,} parameters (one position "
            f"embedding row per position), more than the limit {max_params:,}; lower "
            f"max_seq_len or raise max_params")
    return vocab


def _later_positions_read(sop, max_seq_len: int, causal: bool, allow_noncausal: bool):
    """In a causal model, the first select that reads later positions (``"select 'x' at
    l:c"``; refused unless ``allow_noncausal``); None otherwise."""
    reads_later = None
    if causal:
        # ``length`` is refused by the lowering with its own reason, allow_noncausal or not
        readers = [n for n in noncausal_readers(sop, max_seq_len)
                   if not isinstance(n, Length)]
        if readers:
            sel = readers[0].selector
            span = sel.span or readers[0].span
            where = f" at {span.line}:{span.column}" if span else ""
            reads_later = f"select '{sel.label}'{where}"
            if not allow_noncausal:
                raise UnsupportedError(
                    f"select '{sel.label}'{where} is not causal: in a decoder-only model every "
                    "query sees only earlier keys, so this program would silently compute "
                    "prefix results instead of its bidirectional values; write it in RASP-L "
                    "causal mode, compile it with causal=False, or pass allow_noncausal=True "
                    "to compile its prefix semantics (rasp.evaluate(..., causal=True))",
                    None, span)
    return reads_later


def _check_size(cg: CompilerGraph, space: ResidualSpace, vocab_size: int, n: int,
                max_params: int) -> None:
    """Refuses (before allocating weights) a model estimated above ``max_params``."""
    est = _estimate(cg, space, vocab_size, n)
    if est > max_params:
        raise ModelTooLargeError(
            f"the compiled model would have about {est:,} parameters (d_model {space.d_model}), "
            f"more than the limit {max_params:,}; reduce the vocabulary or max_seq_len, or raise "
            "max_params")


def _blocks(cg: CompilerGraph, space: ResidualSpace, hazards: list[str] | None):
    """Stage 4: ``(heads, mlps)``, each node's attention head or MLP by node name."""
    heads, mlps = {}, {}
    for n in cg.nodes:
        try:
            if n.is_attention:
                heads[n.name] = build_head(n, space)
            elif n.kind == "mlp":
                mlps[n.name] = build_mlp(n, space, hazards)
        except CompilerError:
            raise
        except RASPError as e:       # e.g. a select ordering strings against numbers
            raise UnsupportedError(f"{e.message} (the interpreter raises whenever this is "
                                   "evaluated)", n.ir if n.ir is not None else None) from None
    return heads, mlps


def _compiled_model(cg: CompilerGraph, space: ResidualSpace, asm: Assembly, vocab: list,
                    max_seq_len: int, causal: bool, reads_later, t0: float,
                    c0: float) -> CompiledModel:
    """The :class:`CompiledModel` of an assembled model: the run-time checks (error flags,
    strings mixed with numbers, counts of averaged strings, averaged categorical values),
    each node's residual directions, and the size statistics."""
    error_dirs = [(n.name, space.err[n.name],
                   f"{n.ir.kind if n.ir is not None else 'map'} "
                   f"'{n.ir.label if n.ir is not None else n.name}'"
                   f"{_at(n.ir)}: {n.error}") for n in cg.nodes if n.name in space.err]
    kind_checks = []
    for n in cg.nodes:
        if n.kind != "full" and space.is_categorical(n):
            dirs = space.dirs(n)
            sd = [d for v, d in dirs.items() if isinstance(v, str)]
            nd = [d for v, d in dirs.items() if not isinstance(v, str) and v is not None]
            if sd and nd:
                kind_checks.append((n.name, sd, nd))
    count_checks = [(n.name, space.dir(n.count_check)) for n in cg.nodes
                    if n.kind == "aggregate" and n.count_check is not None
                    and any(isinstance(v, str) for v in n.values_node.values)]
    # a mean of bools, or a chain of means down to one: typed as the interpreter types it
    bool_typing = chain_spec(cg, space)
    checks = [(n.name, space.node_slice(n)) for n in cg.nodes
              if n.kind == "aggregate" and n.may_average and space.is_categorical(n)]
    node_dirs = {}
    for n in cg.nodes:
        if n.kind == "full":
            continue
        if space.is_categorical(n):
            items = list(space.dirs(n).items())
            node_dirs[n.name] = {"encoding": CATEGORICAL, "values": [v for v, _ in items],
                                 "dirs": [dd for _, dd in items],
                                 "ir_id": n.ir.id if n.ir is not None and not n.internal
                                 else None}
        else:
            node_dirs[n.name] = {"encoding": "numerical", "values": [], "dirs": [space.dir(n)],
                                 "ir_id": n.ir.id if n.ir is not None and not n.internal
                                 else None}
    model = asm.model
    params = model.num_parameters()            # per-head widths unpadded, as stored
    nonzero = model.num_nonzero_parameters()
    stats = {
        "layers": asm.config.n_layers,
        "heads": int(sum(asm.heads_per_layer)),
        "max_heads": int(max(asm.heads_per_layer + [0])),
        "heads_per_layer": asm.heads_per_layer,
        "d_model": space.d_model,
        "d_head": asm.config.d_head,
        "mlp_hidden": int(sum(asm.mlp_per_layer)),
        "max_mlp_hidden": int(max(asm.mlp_per_layer + [0])),
        "mlp_per_layer": asm.mlp_per_layer,
        "params": int(params),
        "nonzero_params": nonzero,
        "compile_seconds": time.perf_counter() - t0,
        "compile_cpu_seconds": time.process_time() - c0,
    }
    return CompiledModel(
        model=model, vocab=vocab, residual_labels=space.labels,
        output_values=asm.output_values, output_encoding=asm.output_encoding, causal=causal,
        max_seq_len=max_seq_len, stats=stats, checks=checks, head_nodes=asm.head_nodes,
        node_dirs=node_dirs, output_name=cg.output.name, error_dirs=error_dirs,
        count_checks=count_checks, kind_checks=kind_checks, reads_later_positions=reads_later,
        bool_typing=bool_typing)
