"""Which theory speaks to which positional encoding, and how evidence becomes a verdict.

The one table from positional encoding to theory (``../shared/spec/predictor.md`` §5), read by
the predictor, the report, ``rasp score``, ``rasp validate-predictor`` and
``docs/predictions.md``:

==============================================  ==========================================
positional encoding (training protocol)          theories
==============================================  ==========================================
NoPE                                            C-RASP[] (Huang et al. 2025)
learned APE trained with random position        RASP-L (Zhou et al. 2023) and
offsets                                         C-RASP[periodic, local] (Huang et al. 2025)
learned APE without offsets, sinusoidal APE,    none: no paper makes a prediction for them
T5 bias, ALiBi, RoPE
==============================================  ==========================================

Both theories are *existence* statements: a task length-generalizes when a program of the
PE's fragment computes its next-token function at every length (Zhou et al. 2023 §3 add
"short" without a number; Huang et al. 2025 §3-4 prove it in the limit of long training
inputs). So the verdict rule (:func:`decide`) is three-valued and never reads a size:

* ``generalizes`` — a program in the theory's fragment (RASP-L check, or the C-RASP check of
  the variant) verified against the ground truth at every length up to N. Its expression
  size is reported as the strength of the evidence, never compared with a threshold: a padded
  program cannot change a verdict.
* ``fails`` — evidence of absence: a cited impossibility result (:data:`IMPOSSIBILITY`, with
  theorem and source) or a search certificate "no program of expression size <= s in this
  grammar" (s >= 1), said which.
* ``unknown`` — neither: no program found and nothing proved; a refused or timed-out search is
  ``unknown`` with its reason.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["PE_THEORIES", "THEORY_NAMES", "IMPOSSIBILITY", "Evidence", "TheoryVerdict",
           "theories_for", "decide", "combine", "VERDICTS"]

#: the three verdicts of a theory
VERDICTS = ("generalizes", "fails", "unknown")

#: positional encoding -> the theories that make a prediction for it (with the training
#: protocol they assume: see :func:`theories_for`)
PE_THEORIES: dict[str, tuple[str, ...]] = {
    "nope": ("crasp",),
    "ape_learned": ("raspl", "crasp_pl"),
}

#: what each theory needs of the training protocol (PE -> required ``position_offsets``)
PROTOCOL: dict[str, str] = {"ape_learned": "random"}

THEORY_NAMES = {"raspl": "RASP-L (Zhou et al. 2023)",
                "crasp": "C-RASP[] (Huang et al. 2025, NoPE)",
                "crasp_pl": "C-RASP[periodic, local] (Huang et al. 2025, learned APE)"}

#: cited impossibility results: (task, theory) -> the statement, theorem and source. Only
#: results that a paper proves for exactly this function; a conjecture or an empirical
#: failure is not one. Empty entries are better than wrong citations: without an entry the
#: verdict needs a search certificate to be "fails".
IMPOSSIBILITY: dict[tuple[str, str], str] = {}


def theories_for(pe: str | None, position_offsets: str | None = None) -> tuple[str, ...]:
    """The theories that predict for ``pe`` trained with ``position_offsets``.

    Args:
        pe: a positional encoding (``rasp_model.positional.PE_NAMES``), or None for Zhou et
            al.'s conjecture alone (RASP-L, stated for their learned APE with offsets).
        position_offsets: the runs' protocol (``"none"`` / ``"random"``), or None for "as the
            theory assumes" (a prediction about the protocol the paper trained with).

    Returns:
        the theory keys of :data:`THEORY_NAMES`; empty when no theory covers the PE (say so,
        never borrow another PE's theory).
    """
    if pe is None:
        return ("raspl",)
    need = PROTOCOL.get(pe)
    if need is not None and position_offsets is not None and position_offsets != need:
        return ()
    return PE_THEORIES.get(pe, ())


@dataclass
class Evidence:
    """What a verdict rests on.

    Attributes:
        kind: ``"program"`` (a verified program of the fragment), ``"certificate"`` (a search
            proved no program of size <= ``certified_below`` exists in its grammar),
            ``"impossibility"`` (a cited result) or ``"none"``.
        detail: one sentence a reader can check.
        size: expression size of the program (every operation at every use; ``tokens`` and
            ``indices`` 0) — the one size measure of bounds, tables and docs.
        certified_below: the search certificate's bound (no program of size <= it), or None.
        source: where the program comes from (``shipped``, ``search``, ``user``) or the
            citation of an impossibility result.
        program: the program's label or source text.
        verified_up_to: the largest length the program was verified at.
    """

    kind: str
    detail: str
    size: int | None = None
    certified_below: int | None = None
    source: str | None = None
    program: str | None = None
    verified_up_to: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class TheoryVerdict:
    """One theory's verdict on one task (and PE): ``verdict`` in :data:`VERDICTS`."""

    theory: str
    verdict: str
    evidence: Evidence

    @property
    def name(self) -> str:
        return THEORY_NAMES[self.theory]

    def to_dict(self) -> dict:
        """``{theory, name, prediction, program, reason, evidence}`` (``prediction`` is the
        verdict; ``reason`` the evidence's sentence)."""
        return {"theory": self.name, "key": self.theory, "prediction": self.verdict,
                "program": self.evidence.program if self.evidence.kind == "program" else None,
                "reason": self.evidence.detail, "evidence": self.evidence.to_dict()}


def decide(theory: str, task: str, program: Evidence | None = None,
           certified_below: int | None = None, grammar: str = "",
           not_decided: str | None = None, measure: str = "expression size") -> TheoryVerdict:
    """The verdict of ``theory`` on ``task`` from its evidence (module docstring).

    Args:
        theory: a key of :data:`THEORY_NAMES`.
        task: the task's name (looked up in :data:`IMPOSSIBILITY`).
        program: evidence of kind ``"program"`` (a verified program of the fragment), or None.
        certified_below: a search certificate (no program of size <= it in ``grammar``), or
            None when no search ran or it certified nothing.
        grammar: the searched grammar, named in the certificate's sentence.
        measure: the size measure of the certificate (the search's own: ``"expression
            size"`` for the RASP-L search, ``"C-RASP size"`` for the C-RASP search).
        not_decided: why nothing is known when that is all there is (a refused or timed-out
            search, no search run).

    Raises:
        KeyError: an unknown theory.
    """
    THEORY_NAMES[theory]
    if program is not None:
        return TheoryVerdict(theory, "generalizes", program)
    cited = IMPOSSIBILITY.get((task, theory))
    if cited:
        return TheoryVerdict(theory, "fails", Evidence("impossibility", cited, source=cited))
    if certified_below is not None and certified_below >= 1:
        return TheoryVerdict(theory, "fails", Evidence(
            "certificate", f"no {THEORY_NAMES[theory]} program of {measure} <= "
                           f"{certified_below} in {grammar or 'the searched grammar'} "
                           "(search certificate; larger programs are not ruled out)",
            certified_below=certified_below))
    return TheoryVerdict(theory, "unknown", Evidence(
        "none", not_decided or "no program found and nothing proved"))


def combine(pe: str | None, verdicts: list[TheoryVerdict]) -> tuple[str, str | None]:
    """One prediction for a PE from its theories' verdicts: ``(prediction, note)``.

    No theory: ``"no theory"``. One theory: its verdict. Several (learned APE: RASP-L and
    C-RASP[periodic, local], each a *sufficient* condition for generalizing):

    * ``generalizes`` when one theory has a verified program and no other has a cited
      impossibility result. A search certificate of another theory ("no program of size <= s
      in my fragment") does not contradict it: it rules out small programs of that fragment
      only, not generalization; the note says so.
    * ``disagree`` when one theory has a program and another a cited impossibility result
      (the note gives both).
    * ``fails`` when every theory says ``fails``; otherwise ``unknown``.
    """
    if not verdicts:
        return "no theory", None
    gen = [v for v in verdicts if v.verdict == "generalizes"]
    fails = [v for v in verdicts if v.verdict == "fails"]
    if gen and any(v.evidence.kind == "impossibility" for v in fails):
        return "disagree", "; ".join(f"{v.name}: {v.verdict} ({v.evidence.detail})"
                                     for v in verdicts)
    if gen:
        note = None
        if fails:
            note = "; ".join(f"{v.name} has only a bounded search certificate "
                             f"({v.evidence.detail})" for v in fails)
        return "generalizes", note
    if len(fails) == len(verdicts):
        return "fails", None
    return "unknown", None
