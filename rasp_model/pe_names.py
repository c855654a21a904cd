"""The positional encodings' names and their settings that need no tensors: the one owner of
:data:`PE_NAMES` (display order), :data:`PE_LABELS` (the papers' names),
:class:`PositionalEncodingError`, :func:`check_pe` and the rotary dimension rules.

Imports no torch, so that the command line can check a ``--pe`` or a preset and answer a usage
error at once (``tests/test_cli_startup.py``); :mod:`rasp_model.positional` holds the encodings
themselves (Kazemnejad et al. 2023) and re-exports these names.
"""

from __future__ import annotations

from rasp.errors import RASPError

#: the six positional encodings, in the order every table, figure and `all` list uses: no
#: position information, then the relative encodings, then the absolute ones
PE_NAMES = ("nope", "t5", "alibi", "rope", "ape_sinusoidal", "ape_learned")

#: the name each encoding has in the papers (tables, figures, claims)
PE_LABELS = {"nope": "NoPE", "t5": "T5 bias", "alibi": "ALiBi", "rope": "RoPE (Rotary)",
             "ape_sinusoidal": "APE (sinusoidal)", "ape_learned": "APE (learned)"}


class PositionalEncodingError(RASPError, ValueError):
    """A bad positional-encoding setting or a position the encoding cannot represent."""


def check_pe(pe: str) -> str:
    """Return ``pe`` if it names one of :data:`PE_NAMES`, else raise PositionalEncodingError."""
    if pe not in PE_NAMES:
        raise PositionalEncodingError(
            f"unknown positional encoding {pe!r}; known: {', '.join(PE_NAMES)}")
    return pe


DEFAULT_ROTARY_FRACTION = 0.25
"""Share of each head's dimensions rotated when ``rotary_dim`` is not given (Kazemnejad et al.
2023 rotated 25%, GPT-J style)."""


def rotary_dim_from_fraction(d_head: int, fraction: float) -> int:
    """Rotated dimensions for a share of ``d_head``: ``int(d_head * fraction)`` rounded down to
    even, at least 2. Raises PositionalEncodingError unless 0 < fraction <= 1. (Configs saved
    before ``rotary_dim`` existed stored ``rope_fraction``; this converts them.)"""
    if not 0.0 < fraction <= 1.0:
        raise PositionalEncodingError(f"rope_fraction must be in (0, 1], got {fraction}")
    r = int(d_head * fraction) // 2 * 2
    return max(2, min(r, d_head // 2 * 2))


def default_rotary_dim(d_head: int) -> int:
    """``rotary_dim`` when a config does not set it: :data:`DEFAULT_ROTARY_FRACTION` of
    ``d_head`` (16 -> 4)."""
    return rotary_dim_from_fraction(d_head, DEFAULT_ROTARY_FRACTION)
