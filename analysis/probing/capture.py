"""Capture attention patterns from models on token sequences (the probe's input).

* :func:`probe_sequences` — token-id sequences ``BOS prompt [SEP] answer`` (teacher forcing);
* :func:`capture_trained` — a trained ``rasp_model.Transformer``'s patterns on them;
* :func:`capture_trained_stacked` — the same for several models of one configuration in one
  pass (``vmap`` over their stacked weights: seeds of one PE);
* :func:`capture_compiled` — a compiled model's patterns on program tokens;
* :func:`pad_patterns` — examples of different lengths stacked into zero-padded arrays.

Every function returns a list over layers of ``[example, head, seq_max, seq_max]`` attention
probabilities, zero rows for padding (the format of :mod:`analysis.probing.metrics`).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence
import copy

import numpy as np

from analysis.probing.metrics import ProbingError, to_numpy
from rasp_model import Transformer
from torch.func import functional_call, stack_module_state, vmap
import torch

__all__ = ["pad_patterns", "capture_trained", "capture_trained_stacked", "stack_groups",
           "capture_compiled", "probe_sequences"]



def pad_patterns(per_example: Sequence[list[np.ndarray]]) -> list[np.ndarray]:
    """Stack per-example patterns of different lengths into padded arrays.

    Args:
        per_example: for each example, a list over layers of ``[head, seq_e, seq_e]``.

    Returns:
        list over layers of ``[example, head, seq_max, seq_max]`` zero-padded.
    """
    if not per_example:
        raise ProbingError("no examples to stack")
    n_layers = len(per_example[0])
    seq = max(ex[0].shape[-1] for ex in per_example)
    out = []
    for l in range(n_layers):
        heads = per_example[0][l].shape[0]
        arr = np.zeros((len(per_example), heads, seq, seq))
        for i, ex in enumerate(per_example):
            n = ex[l].shape[-1]
            arr[i, :, :n, :n] = ex[l]
        out.append(arr)
    return out


def _group_by_length(sequences: Sequence[Sequence[int]]) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for i, s in enumerate(sequences):
        groups.setdefault(len(s), []).append(i)
    return groups


def capture_trained(model: Any, sequences: Sequence[Sequence[int]]) -> list[np.ndarray]:
    """Attention of a trained (or any contract-D) ``Transformer`` on token-id sequences.

    Args:
        model: a ``rasp_model.Transformer`` (``attention_patterns(tokens)`` returning
            a list over layers of ``[batch, head, query, key]``).
        sequences: token-id sequences (each starting with BOS), any lengths.

    Returns:
        list over layers of ``[example, head, seq_max, seq_max]`` (zero-padded).
    """
    per_example: list = [None] * len(sequences)
    with torch.no_grad():
        for n, idx in _group_by_length(sequences).items():
            toks = torch.tensor([list(sequences[i]) for i in idx], dtype=torch.long)
            pats = [to_numpy(x) for x in model.attention_patterns(toks)]
            for j, i in enumerate(idx):
                per_example[i] = [p[j] for p in pats]
    return pad_patterns(per_example)


def stack_groups(models: dict[str, Any]) -> list[list[str]]:
    """Labels of ``models`` grouped so that each group can be captured in one stacked pass:
    ``rasp_model.Transformer`` instances of one configuration (equal ``cfg``) together, every
    other model (a compiled model, a TransformerLens model) alone; first-seen order."""
    groups: dict[Any, list[str]] = {}
    for label, m in models.items():
        key = ("cfg", repr(m.cfg)) if type(m) is Transformer else ("one", label)
        groups.setdefault(key, []).append(label)
    return list(groups.values())


def capture_trained_stacked(models: Sequence[Any], sequences: Sequence[Sequence[int]]
                            ) -> list[list[np.ndarray]]:
    """:func:`capture_trained` for several ``rasp_model.Transformer`` models of one
    configuration in one pass per sequence length: their weights stacked ``[member, ...]``
    (``torch.func.stack_module_state``) and ``vmap(functional_call)`` of one module returning
    the ``hook_pattern`` activations (issue 26: probing the seeds of a PE together).

    Returns one :func:`capture_trained` result per model (a list over layers of ``[example,
    head, seq_max, seq_max]``), equal to it up to float32 rounding of the batched arithmetic
    (measured <= 1e-6).

    Raises:
        ValueError: the models do not share one configuration.
    """


    models = list(models)
    if len({repr(m.cfg) for m in models}) != 1:
        raise ValueError("capture_trained_stacked needs models of one configuration")
    if len(models) == 1:
        return [capture_trained(models[0], sequences)]
    n_layers = models[0].cfg.n_layers

    class _Patterns(torch.nn.Module):
        # a module whose forward returns the attention patterns (hooks fire inside vmap, so the
        # batched tensors are returned, never kept)
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, tokens):
            _, cache = self.inner.run_with_cache(tokens,
                                                 names=lambda n: n.endswith("hook_pattern"))
            return [cache.get(f"blocks.{l}.attn.hook_pattern") for l in range(n_layers)]

    training = [m.training for m in models]
    for m in models:
        m.eval()
    try:
        params, buffers = stack_module_state(models)
        base = _Patterns(copy.deepcopy(models[0]).to("meta")).eval()
        params = {"inner." + k: v.detach() for k, v in params.items()}
        buffers = {"inner." + k: v for k, v in buffers.items()}
        per_model: list[list] = [[None] * len(sequences) for _ in models]
        with torch.no_grad():
            for n, idx in _group_by_length(sequences).items():
                toks = torch.tensor([list(sequences[i]) for i in idx], dtype=torch.long)
                pats = vmap(lambda p, b: functional_call(base, (p, b), (toks,)))(params,
                                                                              buffers)
                for k in range(len(models)):
                    layers = [to_numpy(x[k]) if x is not None else
                              np.zeros((len(idx), 0, n, n), dtype=np.float32) for x in pats]
                    for j, i in enumerate(idx):
                        per_model[k][i] = [p[j] for p in layers]
    finally:
        for m, t in zip(models, training):
            m.train(t)
    return [pad_patterns(pe) for pe in per_model]


def capture_compiled(compiled: Any, program_inputs: Sequence[Sequence[Any]]) -> list[np.ndarray]:
    """Attention of a compiled model (contract E) on program-token sequences.

    Args:
        compiled: a ``compiler.CompiledModel``; ``compiled.attention(inputs)`` returns
            ``[batch, layer, head, query, key]`` with BOS at position 0 included.
        program_inputs: the token values the program sees (without BOS), any lengths.

    Returns:
        list over layers of ``[example, head, seq_max, seq_max]`` (zero-padded; position 0 BOS).
    """
    per_example: list = [None] * len(program_inputs)
    heads = _compiled_heads_per_layer(compiled)
    for n, idx in _group_by_length(program_inputs).items():
        att = to_numpy(compiled.attention([list(program_inputs[i]) for i in idx]))
        for j, i in enumerate(idx):
            # layers with fewer heads than the widest are zero-padded: keep the real heads
            per_example[i] = [att[j, l, :heads[l]] for l in range(att.shape[1])]
    return pad_patterns(per_example)


def _compiled_heads_per_layer(compiled: Any) -> list[int]:
    """Heads per layer of a ``compiler.CompiledModel`` (its Transformer's config)."""
    cfg = compiled.model.cfg
    return [int(cfg.heads(l)) for l in range(cfg.n_layers)]


def probe_sequences(task: Any, lengths: Iterable[int], per_length: int = 4,
                    seed: int = 0) -> list[list[int]]:
    """Token-id sequences for probing: ``BOS prompt [SEP] answer`` without the final EOS.

    That is exactly what a decoder sees when it predicts every answer token (teacher forcing).
    A next-set task (Huang et al.'s next-character sets) gives its prompt ``BOS w`` alone: its
    answer is one label per position, an output the model never reads. Uses the task's seeded
    generator (contract C: ``task.sample(length, rng)``); lengths the task does not allow are
    skipped.
    """
    rng = np.random.default_rng(seed)
    seqs = []
    for n in lengths:
        if not task.length_ok(n):
            continue
        for _ in range(per_length):
            prompt, answer = task.sample(n, rng)
            full = list(prompt) + ([] if task.kind == "next_set" else list(answer))
            seqs.append(full[:-1] if full and full[-1] == task.vocab.eos else full)
    if not seqs:
        raise ProbingError(f"task {task.name!r} allows none of the lengths "
                           f"{list(lengths)}")
    return seqs
