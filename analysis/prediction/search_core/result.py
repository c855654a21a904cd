"""What every search returns: :class:`SearchResult`, one type for the RASP-L and the C-RASP
grammars (:func:`analysis.prediction.search.search`).

A result says whether a program was found (an IR s-op, causal, with its ``.rasp`` source), its
size in the grammar's measure (expression size for RASP-L, C-RASP size for C-RASP[] and
C-RASP[periodic, local]), the certificate (no program of size <= ``certified_below`` in the
grammar reproduces the task: :class:`~.core.Certificate`), why the search stopped and the work
it spent of its budget. A few fields belong to one grammar only (the RASP-L combination's work
and the measured program length; the C-RASP notation of a decision list, its verification line
and notes); they keep their defaults in the other grammar's results. The record's dictionary
(:meth:`SearchResult.to_dict`) and text (:meth:`SearchResult.text`) keep each grammar's
established shape (the predictions doc, ``report.json`` and ``rasp search`` print them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rasp.analyses.crasp import VARIANTS

from .core import Certificate

#: ``stopped`` of a search whose memory (``--memory-mb``, bytes of arrays counted, the same on
#: every machine) could not hold its next step; the sizes it completed stay certified
MEMORY_STOP = "memory"

#: the grammars a search runs: name -> (the grammar as a verdict states it, its size measure)
GRAMMARS = {
    "raspl": ("the RASP-L search grammar", "expression size"),
    **{v: (VARIANTS[v][0].split(" (")[0], "C-RASP size") for v in ("crasp", "crasp_pl")},
}


@dataclass
class SearchResult:
    """Outcome of a search (:func:`analysis.prediction.search.search`).

    Attributes:
        task: the task's (or the examples') name.
        grammar: ``"raspl"`` (the RASP-L search grammar), ``"crasp"`` (C-RASP[], NoPE) or
            ``"crasp_pl"`` (C-RASP[periodic, local]); a key of :data:`GRAMMARS`.
        found: a program was found (RASP-L: it reproduces the search and validation batches;
            C-RASP: it also passed ``rasp.analyses.crasp.check_crasp`` and was verified at
            every length 1..``verify_max_length``).
        program: the IR s-op (causal next-token program) or None; ``source``: it as ``.rasp``
            source (:func:`.core.program_source`).
        size: its size in the grammar's measure, or None. A RASP-L program found by
            enumeration is a shortest one (``certified_below == size - 1``).
        certified_below: no program of the grammar of size <= this reproduces the task (None:
            no size completed, nothing certified). A program found outside the certificate's
            grammar (RASP-L ``found_by == "combination"``, C-RASP's greedy decision lists)
            is an upper bound and may be larger than a shortest one.
        stopped: ``"found"``, ``"budget"`` (the work budget is spent: the certificate
            stands), ``"time_cap"`` (the wall-clock safety cap passed: where it stopped depends
            on the machine, so no verdict rests on it), ``"max_length"`` / ``"max_size"``,
            ``"memory"`` (:data:`MEMORY_STOP`: the search's memory could not hold its next
            step; the sizes completed stay certified), ``"spurious"``, ``"rounds"`` or
            ``"refused: <why>"``.
        budget: the work budget it ran with (:mod:`analysis.prediction.budget`: candidate
            programs for RASP-L, candidate Booleans and counts for C-RASP); ``explored``: the
            enumeration's candidates, ``distinct``: those kept after observational equivalence.
        seconds: wall time (reported, never a stopping rule); ``counterexamples_added``:
            examples that joined the search batch (counterexample-guided refinement).
        combine_work, found_by (``"enumeration"`` | ``"combination"``), measured_length (the
            program length of ``docs/language.md`` §4), lengths (task lengths of the batch),
            n_targets (predicted positions), max_size (largest size enumerated): RASP-L only.
        schema (the decision list in C-RASP notation), level_reached, verification (the
            verification summary line), notes: C-RASP only.
    """

    task: str
    grammar: str
    found: bool
    program: Any = None
    source: str | None = None
    size: int | None = None
    certified_below: int | None = None
    stopped: str = ""
    budget: int | None = None
    seconds: float = 0.0
    explored: int = 0
    distinct: int = 0
    counterexamples_added: int = 0
    combine_work: int = 0
    found_by: str | None = None
    measured_length: int | None = None
    lengths: list = field(default_factory=list)
    n_targets: int = 0
    max_size: int | None = None
    schema: str | None = None
    level_reached: int = 0
    verification: str | None = None
    notes: list = field(default_factory=list)

    @property
    def work(self) -> int:
        """The work the budget counts: the enumeration's candidates plus the combination's."""
        return self.explored + self.combine_work

    @property
    def programs_per_s(self) -> float:
        return self.explored / self.seconds if self.seconds > 0 else float("nan")

    @property
    def certificate(self) -> Certificate:
        """The search certificate: no program of size <= ``certified_below`` in the grammar
        (:data:`GRAMMARS` names it and its measure; bound None when no size completed)."""
        name, measure = GRAMMARS[self.grammar]
        return Certificate(self.certified_below, name, measure)

    def to_dict(self) -> dict:
        """The record as a JSON-ready dict, in the grammar's established shape (RASP-L:
        ``certified_no_program_up_to`` -1 when nothing is certified, ``length`` the expression
        size; C-RASP: ``variant``, ``schema``, ``verification``, ``notes``)."""
        if self.grammar != "raspl":
            return {"task": self.task, "variant": self.grammar, "found": self.found,
                    "size": self.size, "certified_below": self.certified_below,
                    "stopped": self.stopped, "budget": self.budget,
                    "seconds": round(self.seconds, 2),
                    "explored": self.explored, "distinct": self.distinct,
                    "counterexamples_added": self.counterexamples_added,
                    "level_reached": self.level_reached, "schema": self.schema,
                    "verification": self.verification, "notes": self.notes}
        cert = -1 if self.certified_below is None else self.certified_below
        return {"task": self.task, "found": self.found, "length": self.size,
                "certified_no_program_up_to": cert, "stopped": self.stopped,
                "explored": self.explored, "distinct": self.distinct,
                "combine_work": self.combine_work, "work": self.work, "budget": self.budget,
                "seconds": round(self.seconds, 3),
                "programs_per_s": round(self.programs_per_s, 1),
                "lengths": self.lengths, "n_targets": self.n_targets,
                "max_length": self.max_size, "program": self.source,
                "counterexamples_added": self.counterexamples_added,
                "found_by": self.found_by, "measured_length": self.measured_length,
                "certified_lower_bound": cert + 1,
                "upper_bound": self.size}

    def summary(self) -> str:
        """One line: what was found or certified, why it stopped, the work of the budget."""
        if self.grammar != "raspl":
            work = (f"{self.explored:,} candidate Booleans and counts of a budget of "
                    f"{self.budget:,} in {self.seconds:.1f} s")
            bound = self.certificate.text()
            if self.found:
                return (f"{self.task}: found a {self.certificate.grammar} program of C-RASP size "
                        f"{self.size} ({bound}); {work}")
            return f"{self.task}: {bound} ({self._stop_text()}); {work}"
        # no size completed (a time cap before size 0 finished): nothing is certified
        cb = self.certified_below
        certified = (f"none of size <= {cb}" if cb is not None else "nothing (no size completed)")
        if self.found and self.found_by == "combination":
            head = (f"{self.task}: found a program of expression size {self.size} "
                    f"(length {self.measured_length}) by combining terms; certified: "
                    f"{certified}")
        elif self.found:
            head = f"{self.task}: shortest program has size {self.size} (certified: {certified})"
        elif cb is None:
            head = f"{self.task}: no program found, nothing certified ({self._stop_text()})"
        else:
            head = f"{self.task}: no program of size <= {cb} ({self._stop_text()})"
        return (f"{head}; {self.explored:,} candidate programs"
                + (f" + {self.combine_work:,} units of combination" if self.combine_work
                   else "")
                + (f" of a budget of {self.budget:,}" if self.budget is not None else "")
                + f" in {self.seconds:.1f} s ({self.programs_per_s:.0f}/s)")

    def _stop_text(self) -> str:
        """Why it stopped, as the summary says it (a memory stop says which memory)."""
        if self.stopped == MEMORY_STOP:
            return "stopped: memory, the search's memory (--memory-mb) is spent"
        return self.stopped

    def text(self) -> str:
        """What ``rasp search`` prints: :meth:`summary`, then the program found (indented
        ``.rasp`` source; for C-RASP also in C-RASP notation) and the notes."""
        lines = [self.summary()]
        if self.found and self.grammar == "raspl":
            lines += [f"program ({self.found_by}; expression size {self.size}, "
                      f"length {self.measured_length}):", _indent(self.source)]
        elif self.found:
            lines += ["program:", _indent(self.source or self.schema)]
            if self.schema:
                lines += ["in C-RASP notation:", _indent(self.schema)]
        lines += [f"note: {note}" for note in self.notes]
        return "\n".join(lines)


def _indent(text: str) -> str:
    return "    " + text.replace("\n", "\n    ")
