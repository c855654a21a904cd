"""rasp-lab's one decoder Transformer, shared by the compiler and training (ground floor).

Imports nothing of the project. Modules:

- :mod:`rasp_model.config` — :class:`TransformerConfig` (hyper-parameters; TransformerLens field
  names, see its table) and :class:`TransformerConfigError`.
- :mod:`rasp_model.positional` — the six positional encodings (:data:`PE_NAMES`).
- :mod:`rasp_model.transformer` — :class:`Transformer` (TransformerLens parameter and hook names).
- :mod:`rasp_model.io` — safetensors save / load.
"""

from rasp_model.config import TransformerConfig, TransformerConfigError
from rasp_model.io import load_safetensors, read_safetensors_metadata, save_safetensors
from rasp_model.positional import PE_NAMES, PositionalEncodingError
from rasp_model.transformer import ContextLengthError, HookPoint, Transformer

__all__ = ["TransformerConfig", "TransformerConfigError", "Transformer", "HookPoint",
           "ContextLengthError", "PositionalEncodingError", "PE_NAMES", "save_safetensors",
           "load_safetensors", "read_safetensors_metadata"]
