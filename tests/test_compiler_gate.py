"""The verification gate (issue 16) refuses a compiled model that was corrupted after assembly:
the truth here is that a model whose last attention output is zeroed cannot compute ``reverse``
(its output no longer depends on the attended token), so the gate must find a counterexample."""

import pytest
import torch

import compiler.compile as compile_mod
from compiler import CompilerError, VerificationError, compile_program
from compiler.verification import verify_compiled
from rasp import aggregate, indices, length, select, tokens

VOCAB = ["a", "b", "c"]


def _reverse():
    return aggregate(select(indices, length - indices - 1, "=="), tokens)


def _corrupt(cm):
    """Zero ``W_O`` of the last layer with heads (a weight perturbed after assembly)."""
    attn = [b.attn for b in cm.model.blocks if b.attn is not None][-1]
    with torch.no_grad():
        attn.W_O.zero_()
    return cm


@pytest.mark.parametrize("n", [5, 12])   # 363 inputs (exhaustive) and sampled
def test_gate_finds_a_counterexample_in_a_corrupted_model(n):
    sop = _reverse()
    cm = compile_program(sop, VOCAB, n)
    assert verify_compiled(cm, sop).ok
    res = verify_compiled(_corrupt(cm), sop)
    assert res.exhaustive == (n == 5)
    assert res.mismatches > 0 and res.counterexample.startswith("input [")


def test_compile_program_refuses_a_model_corrupted_after_assembly(monkeypatch):
    real = compile_mod._compile
    monkeypatch.setattr(compile_mod, "_compile", lambda *a: _corrupt(real(*a)))
    with pytest.raises(VerificationError, match="First counterexample: input \\[") as e:
        compile_program(_reverse(), VOCAB, 12)
    assert isinstance(e.value, CompilerError)     # a refusal of compile_program, as the others
