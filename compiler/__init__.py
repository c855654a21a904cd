"""rasp-lab: the compiler of RASP / RASP-L programs into transformer weights.

Pipeline (Tracr's shape; see ``docs/compiler.md``), one module per stage, named for what it
converts: 1. :mod:`compiler.basis_inference` (value sets, once), 2. the package
:mod:`compiler.graph` (IR -> networkx graph: :mod:`compiler.graph.rasp_to_graph` and its parts
:mod:`compiler.graph.nodes`, :mod:`compiler.graph.expr`, :mod:`compiler.graph.mlp_pricing`,
:mod:`compiler.graph.lowering`, :mod:`compiler.graph.passes`; :mod:`compiler.encoding`),
3. :mod:`compiler.residual_space` (residual space), 4. :mod:`compiler.graph_to_blocks` (MLPs and
heads), 5. :mod:`compiler.layer_allocation` (layer allocation), 6. :mod:`compiler.blocks_to_model`
(the one :class:`rasp_model.Transformer`), 7. :mod:`compiler.verification` (the gate: compiled
model vs interpreter), then the API :mod:`compiler.compile` (``compile_program``).

The Transformer itself (package :mod:`rasp_model`) is shared with training. Importing this package
does not import torch until the compiler is used.
"""

from .errors import (CompiledRuntimeError, CompilerError, FloatPrecisionError,
                     ModelTooLargeError, UnsupportedError, VerificationError)

__all__ = ["compile_program", "CompiledModel", "load_compiled", "CompilerError",
           "UnsupportedError", "FloatPrecisionError", "ModelTooLargeError",
           "CompiledRuntimeError", "VerificationError", "to_transformer_lens"]


def __dir__():
    """Every public name, the lazy ones included (tab completion lists them before the first
    use; nothing is imported to list them)."""
    return sorted(set(globals()) | set(__all__))


def __getattr__(name):
    if name in ("compile_program", "CompiledModel", "load_compiled"):
        from . import compile as _c   # start-up: `import compiler` stays light (torch loads here)
        return getattr(_c, name)
    if name == "to_transformer_lens":
        from .export import to_transformer_lens   # start-up: as compile above
        return to_transformer_lens
    raise AttributeError(f"module 'compiler' has no attribute {name!r}")
