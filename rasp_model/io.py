"""safetensors I/O of the one :class:`rasp_model.transformer.Transformer`.

Weights only through safetensors; the config travels as JSON under metadata key ``"config"``.
"""

from __future__ import annotations

import json
import os

from rasp_model.config import TransformerConfig, TransformerConfigError
from rasp_model.files import FileReadError, atomic_write_bytes, read_safetensors
from rasp_model.transformer import Transformer

__all__ = ["save_safetensors", "load_safetensors", "read_safetensors_metadata"]


def _canonical(raw: bytes) -> bytes:
    """The same safetensors file with its JSON header's keys sorted (the library writes the
    metadata from a hash map, so two saves of one model differed in key order): identical
    models give identical bytes. The format: 8-byte little-endian header length, the JSON
    header (padded with spaces to a multiple of 8), then the tensor data, whose offsets are
    relative to the data's start and so do not change."""
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + raw[8 + n:]


def save_safetensors(model: Transformer, path, metadata: dict | None = None) -> None:
    """Write ``model``'s weights to ``path`` (safetensors), atomically through the one writer
    (:func:`rasp_model.files.atomic_write`).

    The config is stored as JSON under metadata key ``"config"``; other ``metadata`` values are
    stored as JSON strings under their keys.
    """
    # start-up: safetensors loads only when this runs
    from safetensors.torch import save

    meta = {"config": json.dumps(model.cfg.to_dict(), sort_keys=True),
            "format": "rasp-lab-transformer"}
    for k, v in (metadata or {}).items():
        if k in ("config", "format"):
            raise ValueError(f"metadata key {k!r} is reserved")
        meta[str(k)] = v if isinstance(v, str) else json.dumps(v)
    tensors = {k: v.detach().cpu().contiguous() for k, v in model.packed_state_dict().items()}
    atomic_write_bytes(path, _canonical(save(tensors, metadata=meta)))


def read_safetensors_metadata(path) -> dict:
    """The metadata dict (str -> str) of a safetensors file (read through
    :func:`rasp_model.files.read_safetensors`); ValueError if unreadable."""
    try:
        return read_safetensors(path, "weights file")[1]
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except FileReadError as e:
        raise ValueError(str(e)) from None


def load_safetensors(path, device: str = "cpu") -> Transformer:
    """Read a model written by :func:`save_safetensors` through the one reader
    (:func:`rasp_model.files.read_safetensors`: a regular file within the model budget,
    floating-point tensors inside the file).

    Returns a :class:`Transformer` (in eval mode) with ``.metadata`` (the decoded metadata).
    Raises FileNotFoundError, or ValueError with a clear message for a file that is not a
    rasp-lab model (no config, wrong tensor names, shapes or dtypes); the config is checked
    against the model budget before the model is built.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    try:
        state, meta = read_safetensors(path, "weights file")
    except FileReadError as e:
        raise ValueError(str(e)) from None
    if "config" not in meta:
        raise ValueError(f"{path}: safetensors file has no rasp-lab config in its metadata")
    try:
        cfg = TransformerConfig.from_dict(json.loads(meta["config"]))
    except RecursionError:
        raise ValueError(f"{path}: bad config in metadata (nested too deeply)") from None
    except (json.JSONDecodeError, TypeError, ValueError, TransformerConfigError) as e:
        raise ValueError(f"{path}: bad config in metadata ({e})") from None
    model = Transformer(cfg)
    dtypes = {t.dtype for t in state.values() if t.is_floating_point()}
    if len(dtypes) == 1:  # keep the stored precision (compiled models are float64)
        model = model.to(dtypes.pop())
    try:
        model.load_state_dict(model.unpack_state_dict(state), strict=True)
    except (RuntimeError, ValueError) as e:
        raise ValueError(f"{path}: weights do not match the stored config: {e}") from None
    decoded = {}
    for k, v in meta.items():
        try:
            decoded[k] = json.loads(v)
        except (json.JSONDecodeError, RecursionError):
            decoded[k] = v
    model.metadata = decoded
    return model.to(device).eval()
