"""rasp-lab: the compiler of RASP / RASP-L programs into transformer weights.

Pipeline (Tracr's shape; see ``docs/compiler.md``), one module per stage, named for what it
converts: :mod:`compiler.basis_inference` (value sets, once), :mod:`compiler.rasp_to_graph`
(IR -> networkx graph, rewrites, fusion; :mod:`compiler.encoding`),
:mod:`compiler.residual_space` (residual space), :mod:`compiler.graph_to_blocks` (MLPs and
heads), :mod:`compiler.layer_allocation` (layer allocation), :mod:`compiler.blocks_to_model`
(the one :class:`rasp_model.Transformer`), :mod:`compiler.verification` (the gate: compiled model vs
interpreter), :mod:`compiler.compile` (``compile_program``).

The Transformer itself (package :mod:`model`) is shared with training. Importing this package
does not import torch until the compiler is used.
"""

from .errors import CompiledRuntimeError, CompilerError, ModelTooLargeError, UnsupportedError

__all__ = ["compile_program", "CompiledModel", "load_compiled", "CompilerError",
           "UnsupportedError", "ModelTooLargeError", "CompiledRuntimeError", "to_transformer_lens"]


def __getattr__(name):
    if name in ("compile_program", "CompiledModel", "load_compiled"):
        from . import compile as _c
        return getattr(_c, name)
    if name == "to_transformer_lens":
        from .export import to_transformer_lens
        return to_transformer_lens
    raise AttributeError(f"module 'compiler' has no attribute {name!r}")
