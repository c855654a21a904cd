"""rasp-lab's one decoder Transformer, shared by the compiler and training (ground floor).

Imports nothing of the project. Modules:

- :mod:`rasp_model.config` — :class:`TransformerConfig` (hyper-parameters; TransformerLens field
  names, see its table) and :class:`TransformerConfigError`.
- :mod:`rasp_model.pe_names` — the positional-encoding registry: one
  :class:`~rasp_model.pe_names.PositionalEncoding` object per encoding (names, docs, formula
  hooks, config rules, evaluation limit, export), the six built-ins (:data:`PE_NAMES`,
  :data:`PE_LABELS`); no torch.
- :mod:`rasp_model.positional` — the encodings' formulas (PyTorch).
- :mod:`rasp_model.transformer` — :class:`Transformer` (TransformerLens parameter and hook names).
- :mod:`rasp_model.io` — safetensors save / load.
"""

from rasp_model.config import TransformerConfig, TransformerConfigError
from rasp_model.pe_names import PE_NAMES, PositionalEncodingError

__all__ = ["TransformerConfig", "TransformerConfigError", "Transformer", "HookPoint",
           "ContextLengthError", "PositionalEncodingError", "PE_NAMES", "save_safetensors",
           "load_safetensors", "read_safetensors_metadata"]

#: the names that load torch, imported on first use (PEP 562): a config, the PE names and a
#: usage error need no tensors (``tests/test_cli_startup.py``)
_LAZY = {"Transformer": "rasp_model.transformer", "HookPoint": "rasp_model.transformer",
         "ContextLengthError": "rasp_model.transformer", "save_safetensors": "rasp_model.io",
         "load_safetensors": "rasp_model.io", "read_safetensors_metadata": "rasp_model.io"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rasp_model' has no attribute {name!r}")
