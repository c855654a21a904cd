"""rasp-lab's one decoder Transformer, shared by the compiler and training (ground floor).

Imports nothing of the project. Modules:

- :mod:`model.config` — :class:`TransformerConfig` (hyper-parameters; TransformerLens field
  names, see its table) and :class:`TransformerConfigError`.
- :mod:`model.positional` — the six positional encodings (:data:`PE_NAMES`).
- :mod:`model.transformer` — :class:`Transformer` (TransformerLens parameter and hook names).
- :mod:`model.io` — safetensors save / load.
"""

from model.config import TransformerConfig, TransformerConfigError
from model.io import load_safetensors, read_safetensors_metadata, save_safetensors
from model.positional import PE_NAMES, PositionalEncodingError
from model.transformer import ContextLengthError, HookPoint, Transformer

__all__ = ["TransformerConfig", "TransformerConfigError", "Transformer", "HookPoint",
           "ContextLengthError", "PositionalEncodingError", "PE_NAMES", "save_safetensors",
           "load_safetensors", "read_safetensors_metadata"]
