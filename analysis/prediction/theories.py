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
inputs). So the verdict rule (:func:`decide`, ``../shared/spec/predictor.md`` §5) never reads a
size, and each label says what its evidence is:

* ``generalizes`` — a program in the theory's fragment (RASP-L check, or the C-RASP check of
  the variant) verified against the ground truth at every length up to the longest length the
  protocol tests (:func:`analysis.prediction.verify.protocol_max_length`: 150 and beyond for
  Huang et al.'s tasks). Its expression size is reported as the strength of the evidence,
  never compared with a threshold: a padded program cannot change a verdict. A program of a
  smaller fragment serves every theory whose fragment contains it (a C-RASP[] program is a
  C-RASP[periodic, local] program).
* ``no program`` — a bounded search certificate, shown as ``no program <= s`` with its bound
  and theory ("no program of size <= s in this search grammar"): it rules out small programs
  of one grammar, not generalization, so it is *not* a decision and every table counts it
  apart (10 of 22 such certificates were wrong in the membership format).
* ``fails`` — a proof: a cited impossibility result (:data:`IMPOSSIBILITY`, with theorem and
  source) or one the tool checks (a counter in a regular task's automaton,
  :func:`analysis.prediction.crasp_decision.decide_crasp`: evidence of kind ``"decision"``
  with a witness anyone can re-run).
* ``unknown`` — none of these, with its reason: no program found and nothing certified, a
  refused search, a program verified only below the protocol's longest length, or a search
  stopped by its wall-clock safety cap (``unknown (time cap)``: where it stopped depends on the
  machine, so no certificate is built from it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["PE_THEORIES", "THEORY_NAMES", "IMPOSSIBILITY", "Evidence", "TheoryVerdict",
           "PROTOCOL_SENTENCE", "required_offsets", "theory_sentence",
           "theories_for", "decide", "combine", "prediction_label", "VERDICTS", "DECIDED",
           "CERTIFICATE"]

#: the verdicts of a theory (module docstring); a PE's prediction adds ``disagree`` and
#: ``no theory`` (:func:`combine`)
VERDICTS = ("generalizes", "no program", "fails", "unknown")
#: the verdicts that are decisions (compared with measured outcomes and papers)
DECIDED = ("generalizes", "fails")
#: the verdict of a bounded search certificate (shown as ``no program <= s``; not a decision)
CERTIFICATE = "no program"

#: positional encoding -> the theories that make a prediction for it (with the training
#: protocol they assume: see :func:`theories_for`)
PE_THEORIES: dict[str, tuple[str, ...]] = {
    "nope": ("crasp",),
    "ape_learned": ("raspl", "crasp_pl"),
}

def required_offsets(pe: str | None) -> str | None:
    """What the theories of ``pe`` need of the training protocol: the ``position_offsets``
    its runs must use (``"random"`` for the learned APE), or None when they need nothing. The
    encoding states it once (:attr:`rasp_model.pe_names.PositionalEncoding.theory_offsets`);
    an unknown name needs nothing (it has no theory)."""
    from rasp_model.pe_names import PositionalEncodingError, get_pe   # torch-free
    try:
        return get_pe(pe).theory_offsets if pe is not None else None
    except PositionalEncodingError:
        return None

THEORY_NAMES = {"raspl": "RASP-L (Zhou et al. 2023)",
                "crasp": "C-RASP[] (Huang et al. 2025, NoPE)",
                "crasp_pl": "C-RASP[periodic, local] (Huang et al. 2025, learned APE)"}

#: cited impossibility results: (task, theory) -> the statement, theorem and source. Only
#: results that a paper proves for exactly this function; a conjecture or an empirical
#: failure is not one. Empty entries are better than wrong citations: without an entry the
#: verdict needs a search certificate to be "fails".
IMPOSSIBILITY: dict[tuple[str, str], str] = {}


#: the training protocol a theory's prediction assumes, as the record states it (PE -> words)
PROTOCOL_SENTENCE: dict[str, str] = {
    "ape_learned": "assumes training with random position offsets (every position embedding "
                   "trained: Huang et al. 2025 §3, Zhou et al. 2023's packing and offsets; "
                   "`rasp train --pe ape_learned --set position_offsets=random`)"}


def theory_sentence(pe: str | None, names: list[str]) -> str:
    """The theories a prediction came from (``names``), with the training protocol they assume
    for ``pe`` (:data:`PROTOCOL_SENTENCE`): what the table, the JSON and a registration show."""
    cond = PROTOCOL_SENTENCE.get(pe)
    return ", ".join(names) + (f"; {cond}" if cond else "")


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
    need = required_offsets(pe)
    if need is not None and position_offsets is not None and position_offsets != need:
        return ()
    return PE_THEORIES.get(pe, ())


@dataclass
class Evidence:
    """What a verdict rests on.

    Attributes:
        kind: ``"program"`` (a verified program of the fragment), ``"certificate"`` (a search
            proved no program of size <= ``certified_below`` exists in its grammar),
            ``"impossibility"`` (a cited result), ``"decision"`` (a proof the tool checks:
            :mod:`analysis.prediction.crasp_decision`), ``"existence"`` (a proof that a
            program exists, none constructed: the same module), ``"time_cap"`` (a search
            stopped by its wall-clock safety cap) or ``"none"``.
        detail: one sentence a reader can check.
        size: expression size of the program (every operation at every use; ``tokens`` and
            ``indices`` 0) — the one size measure of bounds, tables and docs.
        certified_below: the search certificate's bound (no program of size <= it), or None.
        source: where the program comes from (``shipped``, ``search``, ``user``) or the
            citation of an impossibility result.
        program: the program's label or source text.
        verified_up_to: the largest length the program was verified at.
        runnable: the program as ``.rasp`` source that runs as printed (the REPL, ``rasp
            verify --program FILE --name program``), where ``program`` is in another notation
            (C-RASP's); None where ``program`` is that source or names a file.
    """

    kind: str
    detail: str
    size: int | None = None
    certified_below: int | None = None
    source: str | None = None
    program: str | None = None
    verified_up_to: int | None = None
    #: the theory's fragment (certificates: the grammar the bound is about)
    theory: str | None = None
    runnable: str | None = None

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

    @property
    def label(self) -> str:
        """The verdict as shown: ``no program <= s`` for a certificate (its bound),
        ``unknown (time cap)`` for a search stopped by its wall-clock cap, else the verdict."""
        if self.verdict == CERTIFICATE:
            return f"no program <= {self.evidence.certified_below}"
        if self.verdict == "unknown" and self.evidence.kind == "time_cap":
            return "unknown (time cap)"
        return self.verdict

    def to_dict(self) -> dict:
        """``{theory, name, prediction, label, program, reason, evidence}`` (``prediction``
        is the verdict, ``label`` as shown; ``reason`` the evidence's sentence)."""
        return {"theory": self.name, "key": self.theory, "prediction": self.verdict,
                "label": self.label,
                "program": self.evidence.program if self.evidence.kind == "program" else None,
                "reason": self.evidence.detail, "evidence": self.evidence.to_dict()}


def decide(theory: str, task: str, program: Evidence | None = None,
           certified_below: int | None = None, grammar: str = "",
           not_decided: str | None = None, measure: str = "expression size",
           needed_length: int | None = None, time_cap: str | None = None,
           proof: Evidence | None = None) -> TheoryVerdict:
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
        not_decided: why nothing is known when that is all there is (a refused search, no
            search run).
        needed_length: the longest length the protocol tests; a program verified only
            below it gives ``unknown`` (with its evidence and the length to verify to).
        time_cap: the sentence of a search stopped by its wall-clock safety cap: the
            verdict is ``unknown (time cap)`` whatever it certified (no program found).
        proof: evidence of kind ``"decision"``: a checked proof that no program of the
            fragment exists (``fails``, whatever a search certified); or of kind
            ``"existence"``: a proof that a program exists though none was constructed
            (``generalizes``; a verified program, when there is one, is the evidence
            instead). A verified program with a proof that none exists contradict each other:
            ``unknown`` naming both (a bug to report; the tests check that it never happens).

    Raises:
        KeyError: an unknown theory.
    """
    THEORY_NAMES[theory]
    fragment = THEORY_NAMES[theory].split(" (")[0]
    if proof is not None and proof.kind == "existence":
        # a checked proof that a program exists (none constructed): the program's verdict
        if program is not None:
            proof = None
        else:
            proof.theory = proof.theory or fragment
            return TheoryVerdict(theory, "generalizes", proof)
    if program is not None and proof is not None:
        return TheoryVerdict(theory, "unknown", Evidence(
            "none", f"contradiction: a verified program ({program.detail}) and a proof that "
                    f"none exists ({proof.detail})", theory=fragment))
    if proof is not None:
        proof.theory = proof.theory or fragment
        return TheoryVerdict(theory, "fails", proof)
    if program is not None:
        program.theory = program.theory or fragment
        if needed_length is not None and (program.verified_up_to or 0) < needed_length:
            short = Evidence(**{**program.to_dict(), "detail": (
                f"{program.detail}; but the protocol tests lengths up to {needed_length}: "
                f"verify to {needed_length} (rasp score -N {needed_length}) to decide")})
            return TheoryVerdict(theory, "unknown", short)
        return TheoryVerdict(theory, "generalizes", program)
    cited = IMPOSSIBILITY.get((task, theory))
    if cited:
        return TheoryVerdict(theory, "fails", Evidence("impossibility", cited, source=cited,
                                                       theory=fragment))
    if time_cap:
        return TheoryVerdict(theory, "unknown", Evidence("time_cap", time_cap,
                                                         theory=fragment))
    if certified_below is not None and certified_below >= 1:
        return TheoryVerdict(theory, CERTIFICATE, Evidence(
            "certificate", f"no {fragment} program of {measure} <= "
                           f"{certified_below} in {grammar or 'the searched grammar'} "
                           "(bounded search certificate: larger programs are not ruled out, "
                           "so this is not a decision)",
            certified_below=certified_below, theory=fragment))
    return TheoryVerdict(theory, "unknown", Evidence(
        "none", not_decided or "no program found and nothing proved", theory=fragment))


def combine(pe: str | None, verdicts: list[TheoryVerdict]) -> tuple[str, str | None]:
    """One prediction for a PE from its theories' verdicts: ``(prediction, note)``.

    No theory: ``"no theory"``. One theory: its verdict. Several (learned APE: RASP-L and
    C-RASP[periodic, local], each a *sufficient* condition for generalizing):

    * ``generalizes`` when one theory has a verified program and no other has a proof of
      impossibility. A search certificate of another theory ("no program <= s in my
      fragment") does not contradict it: it rules out small programs of that fragment only,
      not generalization; the note says so.
    * ``disagree`` when one theory has a program and another a proof of impossibility (the
      note gives both).
    * ``fails`` when every theory has a proof; ``no program`` when every theory has a proof
      or a certificate and at least one only a certificate (the label gives each bound:
      :func:`prediction_label`); otherwise ``unknown``.
    """
    if not verdicts:
        return "no theory", None
    gen = [v for v in verdicts if v.verdict == "generalizes"]
    fails = [v for v in verdicts if v.verdict == "fails"]
    certs = [v for v in verdicts if v.verdict == CERTIFICATE]
    if gen and fails:
        return "disagree", "; ".join(f"{v.name}: {v.label} ({v.evidence.detail})"
                                     for v in verdicts)
    if gen:
        note = None
        if certs:
            note = "; ".join(f"{v.name} has only a bounded search certificate "
                             f"({v.evidence.detail})" for v in certs)
        return "generalizes", note
    if len(fails) == len(verdicts):
        return "fails", None
    if len(fails) + len(certs) == len(verdicts):
        return CERTIFICATE, None
    return "unknown", None


def prediction_label(prediction: str, verdicts: list[TheoryVerdict]) -> str:
    """A PE's prediction as shown: ``no program <= s`` (one theory) or ``no program (RASP-L
    <= s; C-RASP[periodic, local] <= t)`` for certificates (a theory with a proof shows
    ``fails`` in the list: ``no program (RASP-L <= s; C-RASP[periodic, local]: fails)``);
    ``unknown (time cap)`` when a search hit its wall-clock cap; else the prediction."""
    if prediction == CERTIFICATE:
        certs = [v for v in verdicts if v.verdict == CERTIFICATE]
        if len(verdicts) == 1:
            return certs[0].label
        return "no program (" + "; ".join(
            f"{v.name.split(' (')[0]} <= {v.evidence.certified_below}" if v in certs else
            f"{v.name.split(' (')[0]}: fails" for v in verdicts) + ")"
    if prediction == "unknown" and any(v.label == "unknown (time cap)" for v in verdicts):
        return "unknown (time cap)"
    return prediction
