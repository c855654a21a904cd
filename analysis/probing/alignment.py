"""Compiled-vs-trained alignment: probing trained runs against the task's compiled program.

The attention metrics themselves (JSD, Kazemnejad distance, head matching, relative-position
fits) are :mod:`analysis.probing.metrics`; this module puts models side by side on the same inputs:

* :func:`compile_reference` compiles a task's reference program for probing;
* :func:`capture_compiled_aligned` aligns the compiled model's patterns with the token positions
  of the trained models (the compiled model prepends its own BOS);
* :func:`probe_task_runs` captures and compares loaded trained models and the compiled model;
* :func:`probe_run_dirs` is ``rasp probe``: finished run directories (:mod:`analysis.training.runs`) and
  compiled exports (``rasp compile -o DIR``) of one task.

Patterns are ``[example, layer, head, query, key]`` (lists per layer of
``[example, head, query, key]``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

import compiler
import tasks
from analysis.probing import capture, metrics
from analysis.training.runs import check_finished, load_run, read_spec
from compiler.compile import CompiledModel
from compiler.errors import CompilerError
from compiler.export import (
    TL_CONFIG_FILE, TransformerLensExportError, TransformerLensModel, load_transformer_lens)
from rasp.ir import RASPError

__all__ = ["compile_reference", "compiled_size", "align_compiled", "capture_compiled_aligned",
           "probe_task_runs", "probe_run_dirs", "probe_lengths"]


def probe_lengths(train_range: tuple[int, int] | None, task) -> list[int]:
    """Default probe lengths: the middle and end of the training range and 1.5x its end
    (the task's default training range when ``train_range`` is None)."""
    lo, hi = train_range or (task.min_length or 1, task.default_train_max_len)
    return sorted({max(lo, hi // 2), hi, hi + max(1, hi // 2)})


def compile_reference(task, sop, max_seq_len: int) -> CompiledModel:
    """Compile ``sop`` (the task's reference program) over the task's program vocabulary.

    Raises:
        compiler.errors.CompilerError: the program cannot be compiled (e.g. unsupported op).
    """
    # raising="declare": a task's reference program is run only on the task's examples, a
    # contract the vocabulary and lengths cannot state (sort_unique_seq's distinct tokens: the
    # interpreter raises on a repeated one); such inputs are listed in stats["raising_inputs"]
    # and the model raises on them too (compiler issue 51)
    return compiler.compile_program(sop, set(task.program_vocab(max_seq_len)), max_seq_len,
                                    causal=task.causal, raising="declare")


def compiled_size(compiled: CompiledModel) -> dict:
    """``{"stats", "heads" per layer, "mlp" width per layer, "head_names" "l,h" -> s-op}``."""
    cfg = compiled.model.cfg
    head_names = {}
    for l, layer in enumerate(compiled.head_nodes):
        for h, nm in enumerate(layer or []):
            head_names[f"{l},{h}"] = str(nm)
    return {"stats": dict(compiled.stats),
            "heads": [cfg.heads(l) for l in range(cfg.n_layers)],
            "mlp": [cfg.mlp_width(l) for l in range(cfg.n_layers)],
            "head_names": head_names}


def align_compiled(compiled: list[np.ndarray], seq: int) -> list[np.ndarray]:
    """Align a compiled model's patterns to trained patterns of length ``seq``.

    When the compiled model prepends its own BOS in front of the task's BOS (one position more),
    the two BOS keys are merged into key 0 and the compiled BOS query row is dropped, so query i
    of both models reads the same token.

    Raises:
        metrics.ProbingError: the lengths do not align.
    """
    out = []
    for arr in compiled:
        if arr.shape[-1] == seq + 1:
            a = arr[:, :, 1:, 1:].copy()
            a[..., 0] += arr[:, :, 1:, 0]
            out.append(a)
        elif arr.shape[-1] == seq:
            out.append(arr)
        else:
            raise metrics.ProbingError(f"compiled patterns have {arr.shape[-1]} positions, the "
                                       f"trained ones {seq}: the sequences do not align")
    return out


def capture_compiled_aligned(task, compiled: CompiledModel, seqs) -> list[np.ndarray]:
    """Compiled patterns on the program tokens of ``seqs`` (token-id sequences), aligned to
    the token positions: one ``[example, head, query, key]`` array per layer (padded)."""
    per_example = []
    for s in seqs:
        prog = list(task.program_tokens(list(s)))
        pats = capture.capture_compiled(compiled, [prog])
        per_example.append([a[0] for a in align_compiled(pats, len(s))])
    return capture.pad_patterns(per_example)


def probe_task_runs(task, runs: dict[str, Any], compiled: CompiledModel | None = None,
                    lengths: Sequence[int] = (), per_length: int = 3, seed: int = 1234,
                    variant: str = "standard") -> metrics.ProbeResult:
    """Capture and compare attention for loaded trained models and the compiled model.

    Args:
        task: a :class:`tasks.Task`.
        runs: label (``"<pe>/seed<k>"``) -> trained ``Transformer`` (or a ``CompiledModel``,
            probed like a trained one).
        compiled: the compiled reference or None.
        lengths: input lengths to probe (task lengths, not sequence lengths).

    Returns:
        :class:`analysis.probing.metrics.ProbeResult` (``notes`` record what could not be compared).
    """
    seqs = capture.probe_sequences(task, lengths, per_length=per_length, seed=seed)
    notes = []
    trained = {}
    for group in capture.stack_groups(runs):
        model = runs[group[0]]
        if isinstance(model, CompiledModel):
            trained[group[0]] = capture_compiled_aligned(task, model, seqs)
        elif len(group) == 1:
            trained[group[0]] = capture.capture_trained(model, seqs)
        else:       # seeds of one configuration: one stacked pass
            for label, pats in zip(group, capture.capture_trained_stacked(
                    [runs[l] for l in group], seqs)):
                trained[label] = pats
    trained = {label: trained[label] for label in runs}       # the caller's order
    comp = None
    if compiled is not None:
        try:
            comp = capture_compiled_aligned(task, compiled, seqs)
        except (RASPError, CompilerError, metrics.ProbingError) as e:
            notes.append(f"compiled model could not be probed: {e}")
    res = metrics.probe(task.name, seqs, trained, comp, variant=variant)
    res.notes = notes + res.notes
    return res


# --------------------------------------------------------------------------------------------
# `rasp probe`: run directories and compiled exports
# --------------------------------------------------------------------------------------------

def _load_target(path: Path) -> tuple[str, Any, str | None, dict]:
    """``(label, model, task name or None, run config)`` for a training run directory or a
    compiled export directory (the config is ``{}`` for a compiled export)."""
    if (path / "config.json").exists():
        model, cfg, _ = load_run(path)
        return f"{cfg['pe']}/seed{cfg['seed']}", model, cfg["task"], cfg
    if (path / "model.json").exists():
        try:
            compiled = compiler.load_compiled(str(path))
        except (CompilerError, ValueError, OSError) as e:
            raise metrics.ProbingError(f"{path}: cannot load the compiled model ({e})") from None
        return f"compiled:{path.name}", compiled, None, {}
    if (path / TL_CONFIG_FILE).exists():      # any TransformerLens model (tl_config.json)
        try:
            tl_model = TransformerLensModel(load_transformer_lens(path))
        except TransformerLensExportError as e:
            raise metrics.ProbingError(str(e)) from None
        return f"tl:{path.name}", tl_model, None, {}
    if not path.exists():
        raise metrics.ProbingError(f"{path}: no such directory")
    raise metrics.ProbingError(f"{path}: neither a training run (config.json), a compiled "
                               f"model (model.json) nor a TransformerLens model "
                               f"({TL_CONFIG_FILE})")


def probe_run_dirs(paths: Sequence[str | os.PathLike], task_name: str | None = None,
                   lengths: Sequence[int] | None = None, per_length: int = 3,
                   variant: str = "standard", compile_reference_program: bool = True,
                   ) -> tuple[metrics.ProbeResult, dict]:
    """Probe finished training runs (and/or compiled model exports) of one task.

    Args:
        paths: run directories (``config.json`` + ``DONE``), compiled export directories
            (``model.json``, loaded with ``compiler.load_compiled``) or TransformerLens model
            directories (``tl_config.json`` + ``tl_model.safetensors``, see
            :func:`compiler.export.load_transformer_lens`; its ``d_vocab`` must be the task's).
        task_name: the task (default: the runs' own; required for compiled dirs alone).
        lengths: input lengths to probe (default :func:`probe_lengths` of the training range).
        compile_reference_program: also compile the task's reference program and match heads
            to it.

    Returns:
        (ProbeResult, info dict with ``task``, ``lengths``, ``compiled`` size or
        ``compiled_error``).

    Raises:
        RunDirError: missing, partial, corrupt or implausible run directories.
        metrics.ProbingError: runs of different tasks, an unknown task, a compiled directory
            without a task.
    """
    if not paths:
        raise metrics.ProbingError("give at least one run directory")
    # the tasks first (cheap), so runs of different tasks are refused before loading weights
    owners = {str(p): check_finished(p).get("task") for p in paths
              if (Path(p) / "config.json").exists()}
    run_tasks = {t for t in owners.values() if t}
    if len(run_tasks) > 1:
        raise metrics.ProbingError("the run directories belong to different tasks: "
                                   + ", ".join(f"{p} ({t})" for p, t in owners.items()))
    if task_name and run_tasks and run_tasks != {task_name}:
        raise metrics.ProbingError(f"the runs are of task {run_tasks.pop()!r}, not "
                                   f"{task_name!r}")
    loaded = [_load_target(Path(p)) for p in paths]
    name = task_name or (run_tasks.pop() if run_tasks else None)
    if not name:
        raise metrics.ProbingError("compiled model directories need --task")
    try:
        task = tasks.get_task(name)
    except tasks.UnknownTaskError as e:
        raise metrics.ProbingError(str(e.args[0] if e.args else e)) from None
    models: dict[str, Any] = {}
    train_range = None
    for path, (label, model, _, cfg) in zip(paths, loaded):
        if isinstance(model, TransformerLensModel) and int(model.cfg.d_vocab) != len(task.vocab):
            raise metrics.ProbingError(
                f"{path}: TransformerLens model has d_vocab={model.cfg.d_vocab} but task "
                f"{name!r} has {len(task.vocab)} token ids: the vocabularies do not match")
        while label in models:
            label += "'"
        models[label] = model
        if cfg and train_range is None:
            train_range = tuple(read_spec(path)[0].train_lengths)
    lengths = list(lengths) if lengths is not None else probe_lengths(train_range, task)
    info: dict[str, Any] = {"task": name, "lengths": lengths}
    compiled = None
    if compile_reference_program:
        try:
            seqs = capture.probe_sequences(task, lengths, per_length=1, seed=0)
            compiled = compile_reference(task, task.load_reference(),
                                         max(len(s) for s in seqs) + 4)
            info["compiled"] = compiled_size(compiled)["stats"]
        except (RASPError, CompilerError) as e:
            info["compiled_error"] = str(e)
    res = probe_task_runs(task, models, compiled, lengths, per_length=per_length,
                          variant=variant)
    return res, info

