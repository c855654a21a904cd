"""The length-generalization predictor: the RASP-Generalization Conjecture as a library.

Zhou et al. 2023 ("What Algorithms can Transformers Learn? A Study in Length Generalization",
arXiv 2310.16028, §3) conjecture that a decoder-only transformer trained on short inputs
length-generalizes on a task when the task's next-token function has a **short RASP-L program
that works at every input length**, and fails when there is none. They add that format changes
which lengthen the shortest program (a scratchpad for mode, most-significant-digit-first
addition) make generalization worse.

:func:`predict` turns this into a procedure that looks only at programs, never at task names:

1. the task's shipped program (``tasks/programs/<task>.rasp``) is measured
   (:func:`rasp.measures.measure`) and checked (:func:`rasp.raspl.check`, rules 1-5, with the
   task's vocabulary at its training lengths ``1..default_train_max_len``: that is where rule 2's
   int8 range is meaningful, since positions past 127 exist at any long test length);
2. a program that is valid RASP-L is **verified** by greedy decoding against the ground truth at
   every length ``1..verify_max_length`` (:mod:`analysis.prediction.verify`);
3. optionally the bounded shortest-program search (:mod:`analysis.prediction.search`) runs; a program it
   finds is checked and verified the same way and replaces the shipped one when shorter;
4. the **verdict** is ``"valid"`` (a valid, verified RASP-L program is known), ``"invalid"``
   (the natural program breaks RASP-L rules: the violations are the reasons) or
   ``"unverified"`` (valid RASP-L but wrong at some length);
5. the **score** (expected length generalization, 0..1) is ``2 ** (-length / SHORT_LENGTH)``
   for a valid program and 0 otherwise: longer programs predict worse generalization, as the
   conjecture's format experiments say; the **prediction** is ``"generalizes"`` when the score
   is at least 0.5, i.e. a valid verified program of length ``<= SHORT_LENGTH``, else
   ``"fails"``.

Threshold. ``SHORT_LENGTH = 64`` operations. Zhou et al. give no number for "short"; the longest
RASP-L listing they report to generalize is reverse-order addition with index hints (their
Appendix), about 50 operations in our length measure (``docs/predictions.md``). 64 is the next
power of two above it, fixed before comparing with outcomes; ``docs/predictions.md`` reports
the range of thresholds over which the predictions stay the same.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from rasp.errors import RASPError

__all__ = ["Prediction", "PredictError", "predict", "predict_program", "predict_all",
           "THEORIES", "markdown_pe_report",
           "paper_outcome", "generalization_score", "SHORT_LENGTH", "FORMAT_COMPARISONS",
           "format_effects", "threshold_range", "markdown_report"]

#: Program length (operations, ``docs/language.md`` §4) at which the score is 0.5 and the
#: prediction turns from "generalizes" to "fails" (see the module docstring for its origin).
SHORT_LENGTH = 64

#: Format comparisons reported by Zhou et al. 2023 (§4-5): (better format, worse format). Used
#: only to *evaluate* the predictor (their lengths must order the same way), never to predict.
FORMAT_COMPARISONS = [
    ("mode", "mode_scratchpad", "Zhou et al. 2023 §5: a scratchpad lengthens the mode "
                                "program and generalization drops"),
    ("addition_reverse_hints", "addition_forward_hints",
     "Zhou et al. 2023 §4: reversed output makes the carry local; forward order needs "
     "carry chains and generalizes less"),
    ("addition_reverse_hints", "addition",
     "Zhou et al. 2023 §4: index hints make addition RASP-L; without them it fails"),
    ("parity_scratchpad", "parity",
     "Zhou et al. 2023 §5: parity has no RASP-L program; the scratchpad gives one"),
]


class PredictError(RASPError, ValueError):
    """The predictor cannot handle the request (a part-B sequence task, no program, ...)."""


def generalization_score(length: int | None, valid: bool) -> float:
    """Expected length generalization of a task whose shortest valid program has ``length``
    operations: ``2 ** (-length / SHORT_LENGTH)`` (1 for length 0), 0 when no valid program.

    A graded reading of the conjecture (Zhou et al. 2023 §3): shorter programs, more likely to
    be learned; 0.5 exactly at :data:`SHORT_LENGTH`.
    """
    if not valid or length is None:
        return 0.0
    return float(2.0 ** (-max(length, 0) / SHORT_LENGTH))


_FAIL_WORDS = re.compile(r"\b(fails?|does not|doesn't|no rasp-l program|no program)\b", re.I)
_LESS_WORDS = re.compile(r"\b(less|drops?|worse|weak)\b", re.I)
_GEN_WORDS = re.compile(r"\b(generali[sz]es|generali[sz]ation|near-perfect|improves|learns)\b",
                        re.I)


def paper_outcome(text: str | None) -> str | None:
    """Read a paper-outcome sentence of the catalogue (``task.paper["zhou"]``) as a label.

    Returns ``"fails"`` (the sentence says fails / no program / does not), ``"generalizes
    less"`` (generalizes, but drops / less / worse), ``"generalizes"``, or ``None`` (not
    studied, "to be measured", empty). Only the paper's wording is read, never the task name.
    """
    if not text or text.strip() in ("—", "-") or "to be measured" in text:
        return None
    if _FAIL_WORDS.search(text):
        return "fails"
    if _GEN_WORDS.search(text) or re.search(r"\bshort\b", text, re.I):
        return "generalizes less" if _LESS_WORDS.search(text) else "generalizes"
    return None


@dataclass
class Prediction:
    """The predictor's record for one task (or one program on a task's format).

    Attributes:
        task: task name.
        program: where the shortest known valid program comes from (``file:name``,
            ``"search"``) or, when none is valid, the natural program's.
        source: the program's text when it comes from the search, else ``None``.
        measures: :class:`rasp.measures.Measures` as a dict, of that program.
        length, attention_ops, layers, heads: shortcuts into ``measures`` (``heads`` = the
            largest number of heads in one layer).
        rasp_l: whether a valid, verified RASP-L program is known.
        verdict: ``"valid"``, ``"invalid"`` or ``"unverified"`` (module docstring).
        violations: the RASP-L violations of the natural (shipped) program (dicts with
            ``rule``, ``rule_name``, ``operation``, ``span``, ``message``); empty when valid.
        reasons: readable sentences explaining the verdict.
        verification: :class:`analysis.prediction.verify.VerifyResult` as a dict (or ``None`` when the
            program was not verified because it is not RASP-L).
        search: :class:`analysis.prediction.search.SearchResult` as a dict when the search ran.
        score: expected length generalization in [0, 1] (:func:`generalization_score`).
        prediction: ``"generalizes"`` or ``"fails"``.
        paper: what the papers report (``task.paper``) plus ``zhou_outcome``
            (:func:`paper_outcome`).
        agrees: whether ``prediction`` agrees with ``zhou_outcome`` (``None`` if not studied).
    """

    task: str
    program: str
    measures: dict
    rasp_l: bool
    verdict: str
    violations: list = field(default_factory=list)
    reasons: list = field(default_factory=list)
    verification: dict | None = None
    search: dict | None = None
    score: float = 0.0
    prediction: str = "fails"
    paper: dict = field(default_factory=dict)
    source: str | None = None
    natural_length: int | None = None
    pe: str | None = None
    length_lower_bound: int | None = None
    length_upper_bound: int | None = None
    program_source: str | None = None
    crasp: dict | None = None
    theories: dict = field(default_factory=dict)
    disagreement: str | None = None

    @property
    def length(self) -> int:
        return int(self.measures.get("length", 0))

    @property
    def attention_ops(self) -> int:
        return int(self.measures.get("attention_ops", 0))

    @property
    def layers(self) -> int:
        return int(self.measures.get("layers", 0))

    @property
    def heads(self) -> int:
        return int(self.measures.get("max_heads", 0))

    @property
    def zhou_outcome(self) -> str | None:
        return self.paper.get("zhou_outcome")

    @property
    def agrees(self) -> bool | None:
        """Whether the RASP-L prediction agrees with Zhou et al.'s outcome (their setting is
        a learned APE; None when they did not study the task)."""
        o = self.zhou_outcome
        if o is None:
            return None
        if self.theories:
            if "raspl" not in self.theories:
                return None          # Zhou et al. studied learned absolute positions only
            pred = self.theories["raspl"]["prediction"]
        else:
            pred = self.prediction
        return (pred == "fails") == (o == "fails")

    def to_dict(self) -> dict:
        """The ``rasp score --json`` object: ``task``, ``rasp_l``, ``length``,
        ``attention_ops``, ``layers``, ``heads``, ``violations``, ``prediction``, ``paper``, plus
        ``score``, ``verdict``, ``program``, ``reasons``, ``measures``, ``verification``,
        ``search``, ``agrees``."""
        return {"task": self.task, "rasp_l": self.rasp_l, "length": self.length,
                "attention_ops": self.attention_ops, "layers": self.layers,
                "heads": self.heads, "violations": self.violations,
                "prediction": self.prediction, "paper": self.paper,
                "score": round(self.score, 4), "verdict": self.verdict,
                "program": self.program, "source": self.source,
                "natural_length": self.natural_length, "reasons": self.reasons,
                "measures": self.measures, "verification": self.verification,
                "search": self.search, "agrees": self.agrees, "pe": self.pe,
                "length_lower_bound": self.length_lower_bound,
                "length_upper_bound": self.length_upper_bound,
                "program_source": self.program_source, "crasp": self.crasp,
                "theories": self.theories, "disagreement": self.disagreement}


def _task(task):
    import tasks
    t = tasks.get_task(task) if isinstance(task, str) else task
    if t.kind != "next_token":
        raise PredictError(
            f"task {t.name!r} is a part-B sequence program (a per-position function, not a "
            f"next-token task); predictions are for the generalization tasks: "
            f"{', '.join(tasks.GENERALIZATION_TASKS)}")
    return t


def _check(task, sop):
    from rasp.raspl import check
    n_train = task.default_train_max_len
    lens = task.lengths(n_train) or task.lengths(max(n_train, task.min_length))
    max_seq = max(task.sequence_length(n) for n in lens) if lens else None
    vocab = task.program_vocab(max(lens)) if lens else None
    return check(sop, vocab=vocab, max_seq_len=max_seq, causal=None)


def _evaluate_program(task, sop, label, verify_max_length, samples, seed):
    """measures + check + (if valid) verification of one program."""
    from rasp.measures import measure
    from analysis.prediction.verify import verify_program_on_task
    m = measure(sop)
    report = _check(task, sop)
    ver = None
    if report.valid:
        ver = verify_program_on_task(task, sop, max_length=verify_max_length, samples=samples,
                                     seed=seed, program_label=label)
    return m, report, ver


def predict_program(sop, task_format, verify_max_length: int = 100, samples: int = 5,
                    seed: int = 0, label: str = "program") -> Prediction:
    """Predict length generalization for an arbitrary next-token program on a task's format.

    Args:
        sop: the program's output s-op (its value at the last position is the next token).
        task_format: a :class:`tasks.Task` or task name: gives the vocabulary, lengths, the
            ground truth used to verify ``sop`` and the paper outcome.
        verify_max_length: verify at every allowed length ``1..verify_max_length``.
        samples: examples per length.

    Returns:
        a :class:`Prediction` for this program alone (``program = label``).

    Raises:
        PredictError: a part-B task; tasks.UnknownTaskError: unknown task name.
    """
    from rasp.ir import SOp
    task = _task(task_format)
    if not isinstance(sop, SOp):
        raise PredictError(f"predict_program expects an s-op, got {type(sop).__name__}")
    m, report, ver = _evaluate_program(task, sop, label, verify_max_length, samples, seed)
    return _record(task, label, None, m, report, ver, m, None)


def _record(task, label, source, m, report, ver, natural_m, search_dict,
            natural_report=None) -> Prediction:
    natural_report = natural_report if natural_report is not None else report
    violations = [v.to_dict() for v in natural_report.violations]
    reasons = []
    if report.valid and ver is not None and ver.ok:
        verdict = "valid"
        reasons.append(f"valid RASP-L program of length {m.length} ({label}), verified at "
                       f"lengths {ver.lengths[0]}..{ver.lengths[-1]} "
                       f"({ver.n_checked} examples)")
    elif report.valid:
        verdict = "unverified"
        reasons.append(f"valid RASP-L but wrong at some length: "
                       f"{ver.summary() if ver is not None else 'not verified'}")
    else:
        verdict = "invalid"
        for v in natural_report.violations:
            reasons.append(f"rule {v.rule} ({v.rule_name}) at {v.location}: {v.operation}")
    valid = verdict == "valid"
    score = generalization_score(m.length, valid)
    if valid and m.length > SHORT_LENGTH:
        reasons.append(f"the program is longer than {SHORT_LENGTH} operations (not short)")
    paper = dict(task.paper or {})
    paper["zhou_outcome"] = paper_outcome(paper.get("zhou"))
    return Prediction(
        task=task.name, program=label, measures=m.to_dict(), rasp_l=valid, verdict=verdict,
        violations=violations, reasons=reasons,
        verification=ver.to_dict() if ver is not None else None, search=search_dict,
        score=score, prediction="generalizes" if score >= 0.5 else "fails", paper=paper,
        source=source, natural_length=natural_m.length)


#: The theories that speak to each positional-encoding family (``rasp_model.positional.PE_NAMES``):
#: RASP-L (Zhou et al. 2023: learned absolute positions trained with random offsets; no PE in
#: the statement, so it is also the only reading for the PEs no theory covers), C-RASP[] for
#: NoPE and C-RASP[periodic, local] for a learned APE (Huang et al. 2025, Theorems 7 / 9).
THEORIES = {"nope": ("crasp",), "ape_learned": ("raspl", "crasp_pl"),
            "ape_sinusoidal": ("raspl",), "t5": ("raspl",), "alibi": ("raspl",),
            "rope": ("raspl",)}
THEORY_NAMES = {"raspl": "RASP-L (Zhou et al. 2023)",
                "crasp": "C-RASP[] (Huang et al. 2025, NoPE)",
                "crasp_pl": "C-RASP[periodic, local] (Huang et al. 2025, learned APE)"}


def predict(task, verify_max_length: int = 100, samples: int = 5, seed: int = 0,
            search_seconds: float = 0.0, search_max_length: int = 8,
            progress: bool = False, pe: str | None = None, program=None,
            program_label: str = "program") -> Prediction:
    """Predict whether a transformer trained on short inputs length-generalizes on ``task``.

    Args:
        task: a :class:`tasks.Task` or the name of a next-token task (part A or Huang et
            al.'s tasks).
        verify_max_length: programs are verified at every allowed length up to this.
        samples: examples per length for verification.
        search_seconds: when > 0, run the shortest-program search (RASP-L, and C-RASP for the
            PEs whose theory is C-RASP) for up to this many seconds each; a program it finds
            (checked and verified) is used when it is shorter than the others.
        search_max_length: largest expression size the search enumerates exhaustively.
        pe: a positional encoding (``rasp_model.positional.PE_NAMES``) or None. None: the RASP-L
            prediction alone (Zhou et al.'s conjecture). A PE: every theory of
            :data:`THEORIES` for it, each with its own program; when they disagree the record
            says so (``disagreement``) and ``prediction`` is ``"disagree"``.
        program: an s-op of your own to consider besides the shipped program (e.g. an
            obfuscated equivalent): the prediction uses the shortest verified program among
            the shipped one, yours and the search's.

    Returns:
        a :class:`Prediction` with ``length_lower_bound`` (certified by the search: no program
        of smaller expression size reproduces the task; 0 without search),
        ``length_upper_bound`` (expression size of the program used), ``program_source``
        (``shipped``, ``search``, ``user`` or None), ``crasp`` and ``theories``.

    Raises:
        tasks.UnknownTaskError: unknown name (lists the known tasks).
        PredictError: a part-B sequence task, or an unknown PE.
        rasp.ir.RASPError: the shipped program does not parse or run.
    """
    from rasp_model.positional import PE_NAMES
    if pe is not None and pe not in PE_NAMES:
        raise PredictError(f"unknown positional encoding {pe!r}; known: {', '.join(PE_NAMES)}")
    task = _task(task)
    cands = []                           # (source, label, sop, text)
    natural = natural_label = None
    if task.reference_file:
        natural_label = f"{task.reference_file}:{task.reference_name}"
        natural = task.load_reference()
        cands.append(("shipped", natural_label, natural, None))
    if program is not None:
        cands.append(("user", program_label, program, None))
    search_dict = None
    lower = 0
    if search_seconds and search_seconds > 0:
        from analysis.prediction.search import SearchError
        try:
            res = _search(task, "raspl", search_max_length, search_seconds, progress)
            search_dict = res.to_dict()
            lower = res.certified_below + 1
            if res.found:
                cands.append(("search", "search", res.program, res.source))
        except SearchError as e:
            search_dict = {"error": str(e)}
    evaluated = [(src, label, sop, text) + _evaluate_program(
        task, sop, label, verify_max_length, samples, seed) for src, label, sop, text in cands]
    ok = [e for e in evaluated if e[5].valid and e[6] is not None and e[6].ok]
    if ok:
        best = min(ok, key=lambda e: (e[4].length, ("search", "shipped", "user").index(e[0])))
    elif evaluated:
        best = next((e for e in evaluated if e[0] == "shipped"), evaluated[0])
    else:
        best = None
    nat = next((e for e in evaluated if e[0] == "shipped"), best)
    if best is None:
        rec = _empty_record(task, search_dict)
    else:
        src, label, sop, text, bm, breport, bver = best
        rec = _record(task, label, text, bm, breport, bver, nat[4], search_dict,
                      natural_report=nat[5])
        rec.program_source = src
        from analysis.prediction.search import tree_size
        rec.length_upper_bound = tree_size(sop) if ok else None
    rec.length_lower_bound = lower
    rec.pe = pe
    _crasp_part(rec, task, pe, evaluated, verify_max_length, samples, seed, search_seconds,
                search_max_length, progress)
    return rec


def _where(v: dict) -> str:
    """``file:line:column`` (file only when it is not the user's source)."""
    if not v.get("span"):
        return "?"
    f = v.get("file")
    return f"{f.rsplit('/', 1)[-1]}:{v['span']}" if f and f != "<string>" else v["span"]


_SEARCHES: dict = {}


def _search(task, mode, max_length, seconds, progress):
    """:func:`analysis.prediction.search.search_task` once per (task, mode, settings) in this process
    (several PEs share the RASP-L search). Raises SearchError."""
    from analysis.prediction.search import SearchError, search_task
    key = (task.name, mode, max_length, seconds)
    if key not in _SEARCHES:
        try:
            _SEARCHES[key] = search_task(task, max_length=max_length, time_limit=seconds,
                                         progress=progress, grammar={"mode": mode})
        except SearchError as e:
            _SEARCHES[key] = e
    got = _SEARCHES[key]
    if isinstance(got, SearchError):
        raise got
    return got


def _empty_record(task, search_dict) -> Prediction:
    paper = dict(task.paper or {})
    paper["zhou_outcome"] = paper_outcome(paper.get("zhou"))
    return Prediction(task=task.name, program="none", measures={}, rasp_l=False,
                      verdict="none", reasons=["no shipped program and the search found none"],
                      search=search_dict, score=0.0, prediction="fails", paper=paper)


def _crasp_part(rec, task, pe, evaluated, verify_max_length, samples, seed, search_seconds,
                search_max_length, progress):
    """C-RASP verdicts of the programs and, for a PE, the per-theory predictions."""
    from rasp.crasp import check_crasp
    variants = [t for t in THEORIES.get(pe, ()) if t != "raspl"] if pe else []
    variant = variants[0] if variants else "crasp_pl"
    found = None
    reports = []
    for src, label, sop, text, m, rep, ver in evaluated:
        cr = check_crasp(sop, variant)
        reports.append((src, label, cr))
        if cr.valid:
            v = ver
            if v is None:
                from analysis.prediction.verify import verify_program_on_task
                v = verify_program_on_task(task, sop, max_length=verify_max_length,
                                           samples=samples, seed=seed, program_label=label)
            if v.ok and (found is None or m.length < found[3]):
                found = (src, label, text, m.length)
    search = None
    if found is None and variants and search_seconds and search_seconds > 0:
        from analysis.prediction.search import SearchError
        try:
            res = _search(task, variant, search_max_length, search_seconds, progress)
            search = res.to_dict()
            if res.found and check_crasp(res.program, variant).valid:
                found = ("search", "search", res.source, res.measured_length)
        except SearchError as e:
            search = {"error": str(e)}
    src0, label0, cr0 = next(((s_, l_, c_) for s_, l_, c_ in reports
                              if s_ == rec.program_source), (None, None, None))
    rec.crasp = {"variant": variant, "program": label0,
                 "valid": bool(cr0.valid) if cr0 else None,
                 "violations": cr0.to_dict()["violations"] if cr0 else [],
                 "program_found": ({"source": found[0], "label": found[1], "text": found[2],
                                    "length": found[3]} if found else None),
                 "search": search}
    if not pe:
        return
    theories = {}
    for th in THEORIES[pe]:
        if th == "raspl":
            theories[th] = {"theory": THEORY_NAMES[th], "prediction": rec.prediction,
                            "program": rec.source or rec.program if rec.rasp_l else None,
                            "reason": rec.reasons[0] if rec.reasons else ""}
        else:
            if found:
                why = (f"a verified {THEORY_NAMES[th]} program of length {found[3]} "
                       f"({found[1]})")
            else:
                bound = (search or {}).get("certified_no_program_up_to")
                why = (f"no {THEORY_NAMES[th]} program known" +
                       (f" (search: none of size <= {bound})" if bound is not None else "") +
                       "; violations of the program used: " +
                       "; ".join(f"{_where(v)} {v['rule_name']}"
                                 for v in rec.crasp["violations"][:3]))
            theories[th] = {"theory": THEORY_NAMES[th],
                            "prediction": "generalizes" if found else "fails",
                            "program": (found[2] or found[1]) if found else None,
                            "reason": why}
    rec.theories = theories
    preds = {t["prediction"] for t in theories.values()}
    if len(preds) == 1:
        rec.prediction = preds.pop()
    else:
        rec.prediction = "disagree"
        rec.disagreement = "; ".join(f"{t['theory']}: {t['prediction']} ({t['reason']})"
                                     for t in theories.values())


def predict_all(names=None, **kwargs) -> list[Prediction]:
    """:func:`predict` for each name (default: every generalization task, catalogue order)."""
    import tasks
    names = list(names) if names else list(tasks.GENERALIZATION_TASKS)
    return [predict(n, **kwargs) for n in names]


def format_effects(preds: list[Prediction]) -> list[dict]:
    """Check the :data:`FORMAT_COMPARISONS` against predictions: for each (better, worse)
    pair present, whether the better format's score is higher (``holds``)."""
    by = {p.task: p for p in preds}
    out = []
    for better, worse, why in FORMAT_COMPARISONS:
        if better in by and worse in by:
            a, b = by[better], by[worse]
            out.append({"better": better, "worse": worse, "source": why,
                        "better_score": round(a.score, 4), "worse_score": round(b.score, 4),
                        "better_length": a.length, "worse_length": b.length,
                        "holds": a.score > b.score})
    return out


def threshold_range(preds: list[Prediction]) -> tuple[int, float] | None:
    """The thresholds T (program length) for which every prediction of ``preds`` with a paper
    outcome stays the same as with :data:`SHORT_LENGTH`: returns ``(lo, hi)`` such that any
    ``lo <= T < hi`` gives the same predictions (``hi`` may be ``math.inf``)."""
    valid = sorted(p.length for p in preds if p.rasp_l)
    lo = max([n for n in valid if n <= SHORT_LENGTH], default=0)
    hi = min([n for n in valid if n > SHORT_LENGTH], default=math.inf)
    return lo, hi


def markdown_report(preds: list[Prediction]) -> str:
    """The predictions vs the papers as Markdown tables (used for ``docs/predictions.md``)."""
    lines = ["| task | shortest known valid program | length | attention ops | layers | "
             "heads | RASP-L (natural program) | score | prediction | Zhou et al. 2023 | "
             "agrees |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for p in preds:
        if p.rasp_l:
            status = "valid, verified"
        elif p.verdict == "unverified":
            status = "valid, fails verification"
        else:
            rules = ", ".join(f"{v['rule']} ({v['rule_name']})"
                              for v in _unique_rules(p.violations))
            status = f"invalid: rules {rules}"
        prog = p.program if p.rasp_l else "none (natural: " + p.program + ")"
        zhou = (p.paper.get("zhou") or "—").replace("|", "/")
        agree = {True: "yes", False: "**no**", None: "—"}[p.agrees]
        lines.append(f"| {p.task} | {prog} | {p.length} | {p.attention_ops} | {p.layers} | "
                     f"{p.heads} | {status} | {p.score:.2f} | {p.prediction} | {zhou} | "
                     f"{agree} |")
    effects = format_effects(preds)
    if effects:
        lines += ["", "| better format | worse format | lengths | scores | ordered as reported |",
                  "| --- | --- | --- | --- | --- |"]
        for e in effects:
            lines.append(f"| {e['better']} | {e['worse']} | {e['better_length']} vs "
                         f"{e['worse_length']} | {e['better_score']:.2f} vs "
                         f"{e['worse_score']:.2f} | {'yes' if e['holds'] else '**no**'} |")
    lo, hi = threshold_range(preds)
    studied = [p for p in preds if p.agrees is not None]
    lines += ["", f"Agreement with Zhou et al. 2023: {sum(bool(p.agrees) for p in studied)} of "
                  f"{len(studied)} studied tasks. The binary predictions are the same for every "
                  f"threshold T with {lo} <= T < {hi} (used: T = {SHORT_LENGTH})."]
    return "\n".join(lines)


def _unique_rules(violations: list[dict]) -> list[dict]:
    seen, out = set(), []
    for v in violations:
        if v["rule"] not in seen:
            seen.add(v["rule"])
            out.append(v)
    return out


def markdown_pe_report(preds: list[Prediction]) -> str:
    """Per-PE predictions as a Markdown table (``docs/predictions.md``): bounds, program used,
    RASP-L and C-RASP verdicts, each theory's prediction, and the papers' outcomes."""
    lines = ["| task | PE | [lower, upper] size | program used | RASP-L | C-RASP (variant: "
             "program used / found) | theories | prediction | paper |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for p in preds:
        hi = p.length_upper_bound if p.length_upper_bound is not None else "-"
        rl = ("valid, verified" if p.rasp_l else p.verdict if p.verdict != "invalid" else
              "invalid: " + ", ".join(sorted({v["rule_name"] for v in p.violations})))
        c = p.crasp or {}
        if c.get("valid"):
            cr = f"{c['variant']}: valid"
        else:
            names = sorted({v["rule_name"] for v in c.get("violations", [])})
            cr = f"{c.get('variant')}: " + (", ".join(names) or "-")
        if c.get("program_found"):
            f = c["program_found"]
            cr += f"; found ({f['source']}, length {f['length']})"
        elif c.get("search") and "certified_no_program_up_to" in c["search"]:
            cr += f"; search: none of size <= {c['search']['certified_no_program_up_to']}"
        elif c.get("search") and "error" in c["search"]:
            cr += f"; search refused: {c['search']['error']}"
        if p.verdict == "none" and p.search and "error" in p.search:
            rl = f"none (search refused: {p.search['error']})"
        th = "; ".join(f"{k}: {v['prediction']}" for k, v in p.theories.items()) or "-"
        paper = []
        if p.zhou_outcome:
            paper.append(f"Zhou: {p.zhou_outcome}" + ("" if p.agrees is None else
                                                       (" (agrees)" if p.agrees else
                                                        " (**disagrees**)")))
        em = (p.paper or {}).get("huang_em")
        key = {"nope": "nope", "ape_learned": "ape"}.get(p.pe or "")
        if em and key:
            paper.append(f"Huang released EM 101-150 ({key}): {em[key]['101-150']:.2f}")
        src = p.program_source or "-"
        lines.append(f"| {p.task} | {p.pe or '-'} | [{p.length_lower_bound}, {hi}] | {src} | "
                     f"{rl} | {cr} | {th} | {p.prediction} | {'; '.join(paper) or '-'} |")
    # the RASP-L program each bound's upper end (and the RASP-L theory) used, once per task
    shown, progs = set(), []
    for p in preds:
        if p.task in shown or not p.program_source:
            continue
        shown.add(p.task)
        head = (f"**{p.task}** ({p.program_source}, certified lower bound "
                f"{p.length_lower_bound}, size {p.length_upper_bound})")
        if p.source:
            progs += [head + ":", "", "```", p.source.strip(), "```", ""]
        else:             # a shipped program: its file (tasks/programs/) is its source
            progs += [f"{head}: `tasks/programs/{p.program}`", ""]
    if progs:
        lines += ["", "Programs used (RASP-L; `shipped` = the task's file, `search` = found by "
                  "`analysis.prediction.search` without reading it):", ""] + progs[:-1]
    return "\n".join(lines)


def main(argv=None) -> int:
    """``python -m analysis.prediction.predict [--markdown] [--pe PE,...] [--search S] [-N 100] [-K 5]
    [TASK...|huang]``."""
    import argparse
    import json
    ap = argparse.ArgumentParser(description="Length-generalization predictions (Zhou et al. "
                                             "2023's RASP-L conjecture; Huang et al. 2025's "
                                             "C-RASP per positional encoding).")
    ap.add_argument("tasks", nargs="*")
    ap.add_argument("--markdown", action="store_true", help="Markdown tables (else JSON)")
    ap.add_argument("--pe", default=None, help="comma-separated PEs (per-PE table)")
    ap.add_argument("--search", type=float, default=0.0, help="seconds per program search")
    ap.add_argument("-N", "--max-length", type=int, default=100)
    ap.add_argument("-K", "--samples", type=int, default=5)
    args = ap.parse_args(argv)
    import tasks as _tasks
    names = args.tasks or None
    if names == ["huang"]:
        names = list(_tasks.HUANG_TASKS)
    if args.pe:
        pes = args.pe.split(",")
        preds = [predict(n, pe=pe, verify_max_length=args.max_length, samples=args.samples,
                         search_seconds=args.search)
                 for n in (names or _tasks.GENERALIZATION_TASKS) for pe in pes]
        print(markdown_pe_report(preds) if args.markdown else
              json.dumps([p.to_dict() for p in preds], indent=1))
        return 0
    preds = predict_all(names, verify_max_length=args.max_length,
                        samples=args.samples, search_seconds=args.search)
    print(markdown_report(preds) if args.markdown else
          json.dumps([p.to_dict() for p in preds], indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    import sys
    sys.exit(main())
