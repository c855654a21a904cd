"""Errors of the compiler."""

from __future__ import annotations

from rasp.ir import Node, RASPError, Span

__all__ = ["CompilerError", "UnsupportedError", "FloatPrecisionError", "ModelTooLargeError",
           "CompiledRuntimeError", "VerificationError"]


class CompilerError(RASPError):
    """The program cannot be compiled (bad arguments, value sets too large, a construct whose
    compiled form would differ from the interpreter)."""


class UnsupportedError(CompilerError):
    """A construct the compiler does not support. The message names the operation, its
    ``line:column`` and why."""

    def __init__(self, message: str, node: Node | None = None, span: Span | None = None):
        if node is not None:
            where = f" at {node.span.line}:{node.span.column}" if node.span else ""
            message = f"cannot compile {node.kind} '{node.label}'{where}: {message}"
            span = span or node.span
        super().__init__(message, span)
        self.node = node


class FloatPrecisionError(UnsupportedError):
    """A program whose result depends on how the interpreter's float64 arithmetic rounds a
    mean (or a value computed from one) near a discontinuity: ``round(mean * 10)`` of
    non-dyadic floats, a comparison or ``trunc`` of such a mean. The compiled model computes
    the exact mean, so it is refused; the message names the operation."""


class ModelTooLargeError(CompilerError):
    """The compiled model would exceed the parameter limit; raised before allocating."""


class VerificationError(CompilerError):
    """The verification gate found an input on which the assembled model differs from the
    interpreter, and ``compile_program`` refused to return it. The message gives the first
    counterexample. Unlike the other refusals this one is the compiler's fault, not the
    program's: a property test treats it as a failure."""


class CompiledRuntimeError(CompilerError):
    """The compiled model met an input its weights cannot represent exactly (e.g. a
    categorical aggregate that averaged different values, an unknown token)."""
