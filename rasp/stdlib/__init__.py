"""The standard library of the RASP dialect: the ``.rasp`` files that ``load "NAME";`` finds
in this folder.

Public API: :data:`STDLIB_DIR`, :data:`STDLIB_FILES` (each file's name and what it holds), :func:`defined_in`.
"""

from __future__ import annotations

import functools
import os
import re

__all__ = ["STDLIB_DIR", "STDLIB_FILES", "defined_in"]

#: ``load "NAME";`` -> what the file holds (shown by the REPL's ``help``).
STDLIB_FILES: dict[str, str] = {
    "rasplib": "the original RASP library (loaded in every session: count, sort, ...)",
    "examples": "the paper's programs in this dialect (reverse, hist, sort_unique, "
                "most_freq, dyck1_ptf, ...), also under Tracr's names (make_hist, make_sort, "
                "make_length, ...)",
    "paper_examples": "the original repository's paper_examples.rasp, unchanged (hist_bos, "
                      "sort_bos, dyck2_ptf, ...; the *_bos programs read position 0 as BOS)",
    "rasp_l": "the RASP-L library of Zhou et al. 2023 (causal: cumsum, argmax, induct, ...)",
}

#: the folder of the standard library's files (``load`` looks here last)
STDLIB_DIR = os.path.dirname(os.path.abspath(__file__))
_TOP_NAME = re.compile(r"^(?:def\s+([A-Za-z][A-Za-z0-9_]*)\s*\(|([A-Za-z][A-Za-z0-9_]*)\s*=[^=])",
                       re.M)


@functools.lru_cache(maxsize=None)
def _names(lib: str) -> frozenset[str]:
    with open(os.path.join(STDLIB_DIR, lib + ".rasp"), encoding="utf-8") as f:
        return frozenset(a or b for a, b in _TOP_NAME.findall(f.read()))


def defined_in(name: str) -> list[str]:
    """The standard-library files (of :data:`STDLIB_FILES`, ``rasplib`` excluded: every session
    has it) whose top-level statements define ``name`` (a function or a value whose name does
    not start with ``_``), e.g. ``defined_in("make_hist") == ["examples"]``."""
    return [lib for lib in STDLIB_FILES if lib != "rasplib" and name in _names(lib)]
