"""The length-generalization predictor: per positional encoding, a verdict from evidence.

Two theories turn "is there a program?" into a prediction (``../shared/spec/predictor.md``):
the RASP-Generalization Conjecture (Zhou et al. 2023, arXiv 2310.16028, §3: a task whose
next-token function has a RASP-L program that works at every length generalizes) and Huang et
al. 2025 (arXiv 2410.02140: with NoPE when it has a C-RASP[] program, with a learned APE
trained with random offsets when it has a C-RASP[periodic, local] program). Which theory speaks
to which PE, and how evidence becomes a verdict, is :mod:`analysis.prediction.theories`.

:func:`predict` looks only at programs, never at task names:

1. the evidence, a fold of *evidence providers* over one pool (:class:`_Pool`), in order: the
   task's shipped program (``tasks/programs/<task>.rasp``), a program of your own
   (``program=``) and, with ``search=True``, each search (RASP-L, then C-RASP per theory of
   the PE: only without a verified program of its fragment so far) -- what they find
   within their work budgets (:func:`analysis.prediction.search.search`, each kept for the
   other PEs by its cache; budgets in candidates, :mod:`analysis.prediction.budget`, so a
   verdict is a function of the task, the PE, the budgets and the code version)
   — each checked (:func:`rasp.analyses.raspl.check` with the task's vocabulary at its training
   lengths; :func:`rasp.analyses.crasp.check_crasp` per variant) and **verified** against the ground
   truth at every length up to the longest the protocol tests
   (:func:`analysis.prediction.verify.protocol_max_length`);
2. per theory of the PE (:func:`analysis.prediction.theories.decide`): ``generalizes`` with a
   verified program of the theory's fragment (the smallest one: its expression size is
   reported, never compared with a threshold; a C-RASP[] program serves C-RASP[periodic,
   local] too), ``no program <= s`` with a bounded search certificate (not a decision),
   ``fails`` with a cited impossibility result, ``unknown`` otherwise (with its reason, e.g.
   ``unknown (time cap)``);
3. the PE's prediction combines its theories (:func:`analysis.prediction.theories.combine`);
   a PE no theory covers gets ``"no theory"``.

Next-set tasks (Huang et al.'s next-character-set format of the formal languages,
``<language>_nextchar``) are predicted like the others: the searches see each string position
as one next-token example (:func:`tasks.base.next_token_examples`: the prefix, then its set of
next characters), and a program is verified per position on positive strings
(:func:`tasks.decode.verify_program`), as a decoder writes every position's set in one pass.

Size is the expression size everywhere (:func:`analysis.prediction.raspl_search.tree_size`: every
operation at every use; ``tokens`` and ``indices`` 0): the certified lower bound, the program's
size and the tables use it. A padded or obfuscated program has a larger size and the same
verdict.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
from dataclasses import dataclass, field

import tasks
from analysis.prediction.budget import (DEFAULT_CRASP_BUDGET, DEFAULT_SEARCH_BUDGET,
                                        TIME_CAP_STOP, BudgetError, Limits, parse_budget)
from analysis.prediction.crasp_decision import DECISIONS, decide_task
from analysis.prediction.raspl_search import tree_size
from analysis.prediction.search import SearchError, cached_search, clear_search_cache
from analysis.prediction.search_core import program_source
from analysis.prediction.theories import (DECIDED, THEORY_NAMES, Evidence, TheoryVerdict, combine,
                                          decide, prediction_label, theories_for, theory_sentence)
from analysis.prediction.verify import protocol_max_length, verify_program_on_task
from rasp.analyses.crasp import check_crasp
from rasp.analyses.measures import measure
from rasp.analyses.raspl import check as raspl_check
from rasp.errors import RASPError
from rasp.ir import SOp
from rasp.repl.display import html_table

__all__ = ["Prediction", "PredictError", "predict", "predict_program", "predict_all",
           "markdown_pe_report", "paper_outcome", "FORMAT_COMPARISONS", "format_effects",
           "markdown_report"]

#: Format comparisons reported by Zhou et al. 2023 (§4-5): (better format, worse format). Used
#: only to *evaluate* the predictor (the better format's program must be the smaller one, or
#: the only one), never to predict.
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
    """The predictor's record for one task (and positional encoding).

    Attributes:
        task: task name; ``pe``: the positional encoding (None: Zhou et al.'s conjecture
            alone, i.e. RASP-L).
        prediction: the verdict for the PE: ``generalizes``, ``no program`` (bounded search
            certificates only: not a decision), ``fails`` (a proof), ``unknown``,
            ``disagree`` (one theory has a program, another a cited impossibility result: see
            ``disagreement``) or ``no theory`` (no paper predicts for this PE).
        prediction_label: the prediction as shown: ``no program <= s`` with its bound (per
            theory when there are several), ``unknown (time cap)``, else ``prediction``.
        budgets: the searches' work budgets (candidates) and time cap, or None (no search).
        theory: the theories the prediction came from (names with their papers), or a sentence
            saying that none covers the PE.
        verdict_evidence: per theory key, what the verdict rests on
            (:class:`analysis.prediction.theories.Evidence` as a dict).
        theories: per theory key, ``{theory, key, prediction, program, reason, evidence}``.
        program: where the RASP-L program used comes from (``file:name``, ``"search"``,
            a label) or, when none is valid and verified, the natural (shipped) program's.
        program_source: ``shipped``, ``search``, ``user`` or None.
        source: the program's text when it comes from the search, else None.
        measures: :class:`rasp.analyses.measures.Measures` of that program, as a dict.
        size: expression size of the verified RASP-L program used (None when there is none).
        size_lower_bound: certified by the RASP-L search (no program of smaller expression
            size reproduces the task; 0 without search); ``size_upper_bound``: ``size``.
        rasp_l: whether a valid, verified RASP-L program is known.
        verdict: the RASP-L status of the program used: ``"valid"`` (valid and verified),
            ``"invalid"`` (the natural program breaks RASP-L rules: ``violations``),
            ``"unverified"`` (valid RASP-L but wrong at some length) or ``"none"``.
        violations: RASP-L violations of the natural program (``rule``, ``rule_name``,
            ``operation``, ``span``, ``message``).
        reasons: readable sentences explaining the RASP-L status.
        verification: :class:`tasks.decode.VerifyResult` of the program used, as a dict.
        search: the RASP-L search's :class:`analysis.prediction.search.SearchResult` as a dict
            (or ``{"error": ...}`` when it refused the task).
        crasp: C-RASP check of the program used and the C-RASP program found (if any).
        paper: what the papers report (``task.paper``) plus ``zhou_outcome``.
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
    prediction: str = "unknown"
    paper: dict = field(default_factory=dict)
    source: str | None = None
    natural_length: int | None = None
    pe: str | None = None
    size: int | None = None
    size_lower_bound: int | None = None
    program_source: str | None = None
    crasp: dict | None = None
    theories: dict = field(default_factory=dict)
    theory: str = ""
    verdict_evidence: dict = field(default_factory=dict)
    #: why the theories disagree, or a note that one theory has only a bounded certificate
    #: while another has a program (:func:`analysis.prediction.theories.combine`)
    disagreement: str | None = None
    prediction_label: str = "unknown"
    budgets: dict | None = None

    @property
    def size_upper_bound(self) -> int | None:
        return self.size

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

    def raspl_status(self, short: bool = False) -> str:
        """The RASP-L status of the program used, in words: valid and verified, valid but
        wrong at some length, no program, or the RASP-L rules the natural program breaks
        (``short``: the rule numbers only)."""
        if self.rasp_l:
            return "RASP-L" if short else "valid, verified"
        if self.verdict == "unverified":
            return "RASP-L, fails verification" if short else "valid, fails verification"
        if self.verdict == "none":
            return "no program"
        if short:
            return "not RASP-L (rules " + ",".join(
                str(r) for r in sorted({v["rule"] for v in self.violations})) + ")"
        return "invalid: rules " + ", ".join(f"{v['rule']} ({v['rule_name']})"
                                             for v in _unique_rules(self.violations))

    @property
    def raspl_prediction(self) -> str:
        """The RASP-L theory's verdict (Zhou et al.'s conjecture), whatever the PE."""
        return self.theories.get("raspl", {}).get("prediction", "unknown")

    @property
    def agrees(self) -> bool | None:
        """Whether the RASP-L verdict agrees with Zhou et al.'s outcome (their setting is a
        learned APE): None when they did not study the task, when the PE is not theirs, or when
        the verdict is ``unknown`` (nothing to compare)."""
        o = self.zhou_outcome
        if o is None or "raspl" not in self.theories:
            return None
        pred = self.raspl_prediction
        if pred not in DECIDED:
            return None
        return (pred == "fails") == (o == "fails")

    @property
    def program_text(self) -> str | None:
        """The source of the program used: the search's text, the task's shipped ``.rasp``
        file, or None (a program given as a Python s-op, or no program)."""
        if self.source is not None:
            return self.source
        if self.program_source == "shipped":
            return tasks.get_task(self.task).reference_source()
        return None

    def _repr_html_(self) -> str:
        """Jupyter's display: the verdict, the theories it came from, each theory's verdict
        with its evidence, the RASP-L status, the program and its measures, then the
        program's source (:attr:`program_text`)."""
        rows = [("verdict", self.prediction_label), ("theory", self.theory)]
        for key, th in self.theories.items():
            ev = self.verdict_evidence.get(key, {})
            rows.append((f"{THEORY_NAMES.get(key, key)}",
                         f"{th.get('label', th.get('prediction', 'unknown'))}: "
                         f"{ev.get('detail', '')}"))
        if self.disagreement:
            rows.append(("disagreement", self.disagreement))
        src = f" ({self.program_source})" if self.program_source else ""
        rows += [("RASP-L status", self.raspl_status()), ("program", self.program + src),
                 ("expression size", "-" if self.size is None else str(self.size) + (
                     f" (certified lower bound {self.size_lower_bound})"
                     if self.size_lower_bound else "")),
                 ("length, layers, heads", f"{self.length}, {self.layers}, {self.heads}")]
        if self.zhou_outcome:
            rows.append(("Zhou et al. 2023 report", self.zhou_outcome))
        pe = self.pe if self.pe is not None else "RASP-L alone"
        return html_table(rows, caption=f"prediction: {self.task} ({pe})",
                          pre=self.program_text)

    def to_dict(self) -> dict:
        """The ``rasp score --json`` object (one row per task and PE)."""
        return {"task": self.task, "pe": self.pe, "prediction": self.prediction,
                "prediction_label": self.prediction_label, "budgets": self.budgets,
                "theory": self.theory, "verdict_evidence": self.verdict_evidence,
                "theories": self.theories, "disagreement": self.disagreement,
                "size": self.size, "size_lower_bound": self.size_lower_bound,
                "size_upper_bound": self.size_upper_bound,
                "rasp_l": self.rasp_l, "verdict": self.verdict, "length": self.length,
                "attention_ops": self.attention_ops, "layers": self.layers,
                "heads": self.heads, "violations": self.violations, "paper": self.paper,
                "program": self.program, "source": self.source,
                "program_source": self.program_source, "natural_length": self.natural_length,
                "reasons": self.reasons, "measures": self.measures,
                "verification": self.verification, "search": self.search,
                "agrees": self.agrees, "crasp": self.crasp}


def _task(task):
    t = tasks.get_task(task) if isinstance(task, str) else task
    if t.kind not in ("next_token", "next_set"):
        raise PredictError(
            f"task {t.name!r} is a part-B sequence program (a per-position function, not a "
            f"next-token task); predictions are for the generalization tasks: "
            f"{', '.join(tasks.GENERALIZATION_TASKS)}")
    return t


def _check(task, sop):
    n_train = task.default_train_max_len
    lens = task.lengths(n_train) or task.lengths(max(n_train, task.min_length))
    max_seq = max(task.sequence_length(n) for n in lens) if lens else None
    vocab = task.program_vocab(max(lens)) if lens else None
    return raspl_check(sop, vocab=vocab, max_seq_len=max_seq, causal=None)


def _evaluate_program(task, sop, label, verify_max_length, samples, seed):
    """measures + check + (if valid) verification of one program."""
    m = measure(sop)
    report = _check(task, sop)
    ver = None
    if report.valid:
        ver = verify_program_on_task(task, sop, max_length=verify_max_length, samples=samples,
                                     seed=seed, program_label=label)
    return m, report, ver



def predict_program(sop, task_format, verify_max_length: int | None = None, samples: int = 5,
                    seed: int = 0, label: str = "program", pe: str | None = None) -> Prediction:
    """Predict length generalization from one program of your own on a task's format (the
    shipped program and the search are not used).

    Args:
        sop: the program's output s-op (its value at the last position is the next token).
        task_format: a :class:`tasks.Task` or task name: gives the vocabulary, lengths, the
            ground truth used to verify ``sop`` and the paper outcome.
        verify_max_length: verify at every allowed length up to this (None: the longest
            length the protocol tests, :func:`analysis.prediction.verify.protocol_max_length`;
            less cannot give ``generalizes``).
        samples: examples per length.
        pe: the positional encoding whose theories decide (None: RASP-L alone).

    Returns:
        a :class:`Prediction` for this program alone (``program = label``): ``generalizes``
        when it is in the theory's fragment and verified, else ``unknown`` (one program that
        is not in a fragment proves nothing about the others).

    Raises:
        PredictError: a part-B task or an unknown PE; tasks.UnknownTaskError: unknown task.
    """
    if not isinstance(sop, SOp):
        raise PredictError(f"predict_program expects an s-op, got {type(sop).__name__}")
    return predict(task_format, verify_max_length=verify_max_length, samples=samples,
                   seed=seed, pe=pe, program=sop, program_label=label, use_shipped=False)


def _raspl_status(task, label, source, m, report, ver, natural_m, search_dict,
                  natural_report=None) -> Prediction:
    """The record's RASP-L status of the program used (no verdict yet)."""
    natural_report = natural_report if natural_report is not None else report
    violations = [v.to_dict() for v in natural_report.violations]
    reasons = []
    if report.valid and ver is not None and ver.ok:
        status = "valid"
        reasons.append(f"valid RASP-L program ({label}), verified at lengths "
                       f"{ver.lengths[0]}..{ver.lengths[-1]} ({ver.n_checked} examples)")
    elif report.valid:
        status = "unverified"
        reasons.append(f"valid RASP-L but wrong at some length: "
                       f"{ver.summary() if ver is not None else 'not verified'}")
    else:
        status = "invalid"
        for v in natural_report.violations:
            reasons.append(f"rule {v.rule} ({v.rule_name}) at {v.location}: {v.operation}")
    paper = dict(task.paper or {})
    paper["zhou_outcome"] = paper_outcome(paper.get("zhou"))
    return Prediction(
        task=task.name, program=label, measures=m.to_dict(), rasp_l=status == "valid",
        verdict=status, violations=violations, reasons=reasons,
        verification=ver.to_dict() if ver is not None else None, search=search_dict,
        paper=paper, source=source, natural_length=natural_m.length)


def _empty_record(task, search_dict) -> Prediction:
    paper = dict(task.paper or {})
    paper["zhou_outcome"] = paper_outcome(paper.get("zhou"))
    return Prediction(task=task.name, program="none", measures={}, rasp_l=False,
                      verdict="none", reasons=["no shipped program and the search found none"],
                      search=search_dict, paper=paper)


def _program_evidence(src, label, text, size, ver, fragment, runnable=None) -> Evidence:
    where = {"shipped": "the task's shipped program", "search": "found by the search",
             "user": "the program given",
             "decision": "decided: constructed from the automaton and proved right at every "
                         "length"}.get(src, src)
    return Evidence("program", f"a verified {fragment} program of expression size {size} "
                               f"({where}: {label}), checked at every length "
                               f"{ver.lengths[0]}..{ver.lengths[-1]}",
                    size=size, source=src, program=text or label,
                    verified_up_to=ver.lengths[-1], runnable=runnable)


def _not_decided(search_dict, searched: bool) -> str:
    if not searched:
        return ("no verified program of the fragment among the shipped or given programs and "
                "no search ran (rasp score --search runs the searches with their default work "
                "budgets)")
    if search_dict and "error" in search_dict:
        return f"no verified program known; the search refused the task: {search_dict['error']}"
    budget = (search_dict or {}).get("budget")
    within = f" within its budget of {budget:,} candidates" if budget else ""
    return f"no verified program known; the search found none and certified nothing{within}"


def _time_cap(search_dict) -> str | None:
    """The ``unknown (time cap)`` sentence of a search stopped by its wall-clock cap, or None."""
    if not search_dict or search_dict.get("stopped") != TIME_CAP_STOP:
        return None
    return (f"the search stopped at its wall-clock safety cap after {search_dict['seconds']} s "
            f"and {search_dict.get('explored', 0):,} of its {search_dict.get('budget') or 0:,} "
            "candidates: where it stopped depends on the machine, so nothing is certified "
            "(rerun without --search-time-cap, or with a larger one)")


def _verify_length(task, verify_max_length) -> tuple[int, int]:
    """``(length verified to, length the protocol needs)``: the protocol's longest tested
    length unless a length is given."""
    need = protocol_max_length(task)
    need = max(task.lengths(need), default=need)     # the longest length the task allows
    return (need if verify_max_length is None else int(verify_max_length)), need


def predict(task, verify_max_length: int | None = None, samples: int = 5, seed: int = 0,
            search: bool = False, search_budget: int = DEFAULT_SEARCH_BUDGET,
            crasp_budget: int = DEFAULT_CRASP_BUDGET, search_time_cap: float | None = None,
            search_max_length: int = 8, progress: bool = False, pe: str | None = None,
            program=None, program_label: str = "program",
            position_offsets: str | None = None, use_shipped: bool = True,
            search_seconds=None) -> Prediction:
    """Predict whether a transformer with positional encoding ``pe`` trained on short inputs
    length-generalizes on ``task`` (module docstring).

    Args:
        task: a :class:`tasks.Task` or the name of a next-token task.
        verify_max_length: programs are verified at every allowed length up to this (None:
            the longest length the protocol tests, :func:`analysis.prediction.verify.
            protocol_max_length`; a program verified only below that gives ``unknown``).
        samples: examples per length for verification.
        search: run the shortest-program searches (RASP-L, and C-RASP for the PEs whose
            theory is C-RASP).
        search_budget: candidate programs of the RASP-L search; ``crasp_budget``: candidate
            Booleans and counts of each C-RASP search (:mod:`analysis.prediction.budget`).
        search_time_cap: a wall-clock safety stop per search in seconds (None: none); a
            search that hits it gives ``unknown (time cap)``.
        search_max_length: largest expression size the RASP-L search enumerates exhaustively.
        pe: a positional encoding (``rasp_model.positional.PE_NAMES``) or None (RASP-L alone).
        program: an s-op of your own to consider besides the shipped program.
        position_offsets: the training protocol of the runs the prediction is for
            (``"none"``/``"random"``); None = the protocol the theory assumes. A learned APE
            trained without offsets has no theory.
        use_shipped: consider the task's shipped program (``predict_program`` does not).
        search_seconds: removed (searches stop on work, not seconds); giving it raises.

    Returns:
        a :class:`Prediction` (``prediction``, ``prediction_label``, ``theory``,
        ``verdict_evidence``, ``size``, ``size_lower_bound``, ``budgets``, ...).

    Raises:
        tasks.UnknownTaskError: unknown name (lists the known tasks).
        PredictError: a part-B sequence task, an unknown PE, ``search_seconds``, or a bad
            budget.
        rasp.ir.RASPError: the shipped program does not parse or run.
    """
    # start-up: the rasp_model package loads torch, which the predictor does not otherwise need
    from rasp_model.positional import PE_NAMES
    if search_seconds is not None:
        raise PredictError("search_seconds is gone: searches stop on work, not seconds (a "
                           "verdict must not depend on the machine's load); use search=True "
                           "with search_budget= / crasp_budget= (candidates, "
                           "analysis.prediction.budget) and optionally search_time_cap=")
    if pe is not None and pe not in PE_NAMES:
        raise PredictError(f"unknown positional encoding {pe!r}; known: {', '.join(PE_NAMES)}")
    if search:
        try:
            Limits(search_budget, search_time_cap)
            Limits(crasp_budget)
        except BudgetError as e:
            raise PredictError(str(e)) from None
    task = _task(task)
    verify_max_length, need = _verify_length(task, verify_max_length)
    budgets = ({"raspl": int(search_budget), "crasp": int(crasp_budget),
                "unit": "candidates", "time_cap_s": search_time_cap} if search else None)
    ctx = _Context(task, verify_max_length, samples, seed, search, search_budget, crasp_budget,
                   search_time_cap, search_max_length, progress)
    theories = theories_for(pe, position_offsets)
    # the evidence: a fold of the providers over one pool, in this order (each may read what
    # the earlier ones gave: a C-RASP search runs only without a verified program of its
    # fragment among the programs before it)
    providers = []
    if use_shipped and task.reference_file:
        providers.append(_program_provider("shipped", f"{task.reference_file}:"
                                           f"{task.reference_name}", task.load_reference()))
    if program is not None:
        providers.append(_program_provider("user", program_label, program))
    if search:
        providers.append(_raspl_search_provider)
    providers += [_crasp_provider(th) for th in theories if th != "raspl"]
    pool = functools.reduce(lambda pool, provider: provider(pool, ctx) or pool, providers,
                            _Pool())
    evaluated = pool.programs
    search_dict, cert = pool.searches.get("raspl"), pool.certified.get("raspl")
    order = ("search", "shipped", "user")
    ok = [e for e in evaluated if e[5].valid and e[6] is not None and e[6].ok]
    best = min(ok, key=lambda e: (tree_size(e[2]), order.index(e[0]))) if ok else next(
        (e for e in evaluated if e[0] == "shipped"), evaluated[0] if evaluated else None)
    nat = next((e for e in evaluated if e[0] == "shipped"), best)
    if best is None:
        rec = _empty_record(task, search_dict)
    else:
        src, label, sop, text, bm, breport, bver = best
        rec = _raspl_status(task, label, text, bm, breport, bver, nat[4], search_dict,
                            natural_report=nat[5])
        rec.program_source = src
        rec.size = tree_size(sop) if ok else None
    rec.size_lower_bound = (cert + 1) if cert is not None else 0
    rec.pe = pe
    rec.budgets = budgets
    verdicts = []
    for th in theories:
        if th == "raspl":
            ev = (_program_evidence(best[0], best[1], best[3], rec.size, best[6], "RASP-L")
                  if ok else None)
            verdicts.append(decide("raspl", task.name, program=ev, certified_below=cert,
                                   grammar="the RASP-L search grammar",
                                   not_decided=_not_decided(search_dict, search),
                                   needed_length=need, time_cap=_time_cap(search_dict)))
        else:
            verdicts.append(_crasp_verdict(rec, task, th, pool, search, need))
    _crasp_summary(rec, evaluated, pe, position_offsets)
    return _with_verdicts(rec, pe, position_offsets, verdicts)


@dataclass
class _Context:
    """The settings every evidence provider reads (:func:`predict`'s arguments)."""

    task: object
    verify_max_length: int
    samples: int
    seed: int
    search: bool
    search_budget: int
    crasp_budget: int
    time_cap: float | None
    search_max_length: int
    progress: bool


@dataclass
class _Pool:
    """The fold's accumulator: what the evidence providers have given so far.

    Attributes:
        programs: the candidate programs, each evaluated once: ``(source, label, sop, text,
            measures, RASP-L check, verification or None)`` (source ``"shipped"``, ``"user"``
            or ``"search"``: the RASP-L search's program).
        searches: per theory, its search's record (a result's ``to_dict``, or ``{"error":
            ...}``); ``searches_used``: per C-RASP theory, every search it ran when more than
            one (the C-RASP[] search serves C-RASP[periodic, local]).
        certified: per theory, its search certificate's bound (no program of size <= it).
        decided: per C-RASP theory, its :func:`~analysis.prediction.crasp_decision.decide_task`.
        fragment: per C-RASP theory, its smallest verified program ``(size, source, label,
            text, verification)`` or None; ``capped``: per theory, the ``unknown (time cap)``
            sentence of a search stopped by its wall-clock cap, or None.
    """

    programs: list = field(default_factory=list)
    searches: dict = field(default_factory=dict)
    searches_used: dict = field(default_factory=dict)
    certified: dict = field(default_factory=dict)
    fragment: dict = field(default_factory=dict)
    capped: dict = field(default_factory=dict)
    decided: dict = field(default_factory=dict)


def _program_provider(src: str, label: str, sop):
    """An evidence provider that offers one program (shipped or given), evaluated once."""
    def provide(pool: _Pool, ctx: _Context) -> None:
        pool.programs.append((src, label, sop, None) + _evaluate_program(
            ctx.task, sop, label, ctx.verify_max_length, ctx.samples, ctx.seed))
    return provide


def _raspl_search_provider(pool: _Pool, ctx: _Context) -> None:
    """The RASP-L search (cached: several PEs share it) as an evidence provider: its record
    and certificate for ``raspl`` and, when it finds one, its program among the candidates."""
    try:
        res = cached_search(ctx.task, "raspl", max_size=ctx.search_max_length,
                            budget=ctx.search_budget, time_cap=ctx.time_cap,
                            progress=ctx.progress)
    except SearchError as e:
        pool.searches["raspl"] = {"error": str(e)}
        return
    pool.searches["raspl"] = res.to_dict()
    pool.certified["raspl"] = res.certified_below
    if res.found:
        pool.programs.append(("search", "search", res.program, res.source) + _evaluate_program(
            ctx.task, res.program, "search", ctx.verify_max_length, ctx.samples, ctx.seed))


def _with_verdicts(rec: Prediction, pe, position_offsets, verdicts) -> Prediction:
    """``rec`` with its PE, the theories' verdicts and the one prediction they combine to."""
    rec.pe = pe
    rec.prediction, rec.disagreement = combine(pe, verdicts)
    rec.prediction_label = prediction_label(rec.prediction, verdicts)
    rec.theories = {v.theory: v.to_dict() for v in verdicts}
    rec.verdict_evidence = {v.theory: v.evidence.to_dict() for v in verdicts}
    rec.theory = (theory_sentence(pe, [v.name for v in verdicts]) if verdicts else
                  _no_theory_sentence(pe, position_offsets))
    return rec


def _no_theory_sentence(pe, position_offsets) -> str:
    if pe == "ape_learned":
        return ("none: the theories for a learned APE (RASP-L, C-RASP[periodic, local]) assume "
                f"training with random position offsets; these runs use {position_offsets!r}")
    return f"none: no paper makes a length-generalization prediction for {pe}"


def clear_search_caches() -> None:
    """Forget the searches kept for reuse across PEs (:func:`analysis.prediction.search.
    cached_search`) and the C-RASP decisions: a long run over many tasks calls it after each
    task so that memory stays bounded by one task's searches."""
    clear_search_cache()
    DECISIONS.clear()


#: a program of a smaller fragment serves every theory whose fragment contains it: the
#: C-RASP searches to run for a variant, smallest fragment first (a C-RASP[] program is a
#: C-RASP[periodic, local] program, so the C-RASP[] search's program is reused, not searched
#: for again)
_CRASP_SEARCH_ORDER = {"crasp": ("crasp",), "crasp_pl": ("crasp", "crasp_pl")}

def _crasp_provider(variant: str):
    """The evidence of C-RASP ``variant`` (``crasp`` or ``crasp_pl``) as a provider: the
    smallest verified program of the fragment among the candidates so far, else (with
    searches) the searches' program (C-RASP[] first, which serves C-RASP[periodic, local]
    too) and the variant's own search's certificate."""
    def provide(pool: _Pool, ctx: _Context) -> None:
        task = ctx.task
        best = None
        for src, label, sop, text, m, rep, ver in pool.programs:
            if not check_crasp(sop, variant).valid:
                continue
            v = ver if ver is not None else verify_program_on_task(
                task, sop, max_length=ctx.verify_max_length, samples=ctx.samples,
                seed=ctx.seed, program_label=label)
            if v.ok and (best is None or tree_size(sop) < best[0]):
                best = (tree_size(sop), src, label, text, v, None)
        searches, cert, capped = {}, None, None
        pool.decided[variant] = decision = decide_task(task, variant)
        if best is None and decision is not None and decision.proved_in:
            # the decision constructed a program and proved it right at every length; it is
            # verified here like any program (a second, independent check of the construction)
            v = verify_program_on_task(task, decision.sop, max_length=ctx.verify_max_length,
                                       samples=ctx.samples, seed=ctx.seed,
                                       program_label="constructed")
            if v.ok and check_crasp(decision.sop, variant).valid:
                best = (tree_size(decision.sop), "decision",
                        decision.program["label"], decision.program["text"],
                        v, program_source(decision.sop, task))
        # a fragment proved to have no program is not searched (nor are its sub-fragments)
        order = [v for v in _CRASP_SEARCH_ORDER[variant] if not getattr(decide_task(task, v),
                                                                        "proved_not", False)]
        for searched in (order if best is None and ctx.search else ()):
            # the C-RASP search in C-RASP's own terms (alphabet-uniform constructs once); it
            # verifies its program to its own default length (60), the predictor verifies it
            # again to the protocol's, so the search does not depend on those settings
            res = cached_search(task, searched, budget=ctx.crasp_budget, time_cap=ctx.time_cap)
            d = res.to_dict()
            if res.stopped.startswith("refused"):
                d["error"] = res.stopped
            searches[searched] = d
            if res.found and check_crasp(res.program, variant).valid:
                v = verify_program_on_task(task, res.program, max_length=ctx.verify_max_length,
                                           samples=ctx.samples, seed=ctx.seed,
                                           program_label="search")
                if v.ok:
                    what = (f"C-RASP size {res.size}" if searched == variant else
                            f"C-RASP size {res.size}, found by the C-RASP[] search: a C-RASP[] "
                            "program is a C-RASP[periodic, local] program")
                    best = (tree_size(res.program), "search", what, res.schema or res.source,
                            v, res.source)
                    break
            capped = capped or _time_cap(d)     # a capped search anywhere: no certificate
            if searched == variant:
                cert = res.certified_below
        pool.searches[variant] = searches.get(variant) or next(iter(searches.values()), None)
        if len(searches) > 1:
            pool.searches_used[variant] = searches
        pool.fragment[variant], pool.certified[variant] = best, cert
        pool.capped[variant] = capped
    return provide


def _crasp_verdict(rec, task, variant, pool: _Pool, search, need) -> TheoryVerdict:
    """The verdict of C-RASP ``variant`` from its provider's evidence in ``pool``; the
    searches' records go to ``rec.crasp``."""
    fragment = THEORY_NAMES[variant].split(" (")[0]
    search_dict = pool.searches.get(variant)
    rec.crasp = dict(rec.crasp or {})
    rec.crasp.setdefault("searches", {})[variant] = search_dict
    if variant in pool.searches_used:
        rec.crasp.setdefault("searches_used", {})[variant] = pool.searches_used[variant]
    best = pool.fragment.get(variant)
    ev = _program_evidence(best[1], best[2], best[3], best[0], best[4], fragment, best[5]) \
        if best else None
    decision, proof = pool.decided.get(variant), None
    if decision is not None:
        rec.crasp.setdefault("decisions", {})[variant] = decision.to_dict()
        proof = decision.evidence()
    return decide(variant, task.name, program=ev, certified_below=pool.certified.get(variant),
                  proof=proof,
                  grammar=f"the {fragment} search grammar",
                  not_decided=_not_decided(search_dict, search),
                  measure="C-RASP size (Booleans and counts; an alphabet-uniform construct "
                          "counted once)", needed_length=need, time_cap=pool.capped.get(variant))


def _crasp_summary(rec, evaluated, pe, position_offsets) -> None:
    """``rec.crasp``: the C-RASP check of the program used (for the PE's variant, else
    C-RASP[periodic, local]) with its violations."""
    variants = [t for t in theories_for(pe, position_offsets) if t != "raspl"]
    variant = variants[0] if variants else "crasp_pl"
    used = next((e for e in evaluated if e[0] == rec.program_source), None)
    cr = check_crasp(used[2], variant) if used else None
    rec.crasp = dict(rec.crasp or {}, variant=variant, program=used[1] if used else None,
                     valid=bool(cr.valid) if cr else None,
                     violations=cr.to_dict()["violations"] if cr else [])


def predict_all(names=None, **kwargs) -> list[Prediction]:
    """:func:`predict` for each name (default: every generalization task, catalogue order)."""
    names = list(names) if names else list(tasks.GENERALIZATION_TASKS)
    return [predict(n, **kwargs) for n in names]


def format_effects(preds: list[Prediction]) -> list[dict]:
    """Check the :data:`FORMAT_COMPARISONS` against predictions: for each (better, worse)
    pair present, whether the better format's verified RASP-L program is smaller than the
    worse one's, or the only one (``holds``; None when neither has one)."""
    by = {p.task: p for p in preds}
    out = []
    for better, worse, why in FORMAT_COMPARISONS:
        if better in by and worse in by:
            a, b = by[better].size, by[worse].size
            holds = None if a is None and b is None else (
                a is not None and (b is None or a < b))
            out.append({"better": better, "worse": worse, "source": why,
                        "better_size": a, "worse_size": b, "holds": holds})
    return out


def markdown_report(preds: list[Prediction]) -> str:
    """The RASP-L verdicts vs Zhou et al. 2023 as Markdown tables (``docs/predictions.md``)."""
    lines = ["| task | program used | size | certified lower bound | RASP-L (natural program) "
             "| verdict | evidence | Zhou et al. 2023 | agrees |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for p in preds:
        status = p.raspl_status()
        prog = p.program if p.rasp_l else "none (natural: " + p.program + ")"
        zhou = (p.paper.get("zhou") or "—").replace("|", "/")
        agree = {True: "yes", False: "**no**", None: "—"}[p.agrees]
        raspl = p.theories.get("raspl") or {}
        ev = raspl.get("reason", "").replace("|", "/")
        shown = raspl.get("label", p.raspl_prediction)
        lines.append(f"| {p.task} | {prog} | {p.size if p.size is not None else '-'} | "
                     f"{p.size_lower_bound} | {status} | {shown} | {ev} | "
                     f"{zhou} | {agree} |")
    effects = format_effects(preds)
    if effects:
        lines += ["", "| better format | worse format | sizes | ordered as reported |",
                  "| --- | --- | --- | --- |"]
        for e in effects:
            mark = {True: "yes", False: "**no**", None: "unknown (no program for either)"}
            lines.append(f"| {e['better']} | {e['worse']} | {e['better_size']} vs "
                         f"{e['worse_size']} | {mark[e['holds']]} |")
    studied = [p for p in preds if p.zhou_outcome is not None]
    decided = [p for p in studied if p.agrees is not None]
    certs = [p for p in studied if p.raspl_prediction == "no program"]
    lines += ["", f"Agreement with Zhou et al. 2023: {sum(bool(p.agrees) for p in decided)} of "
                  f"{len(decided)} decided verdicts; of the other "
                  f"{len(studied) - len(decided)} studied tasks, {len(certs)} have only a "
                  f"bounded search certificate (`no program <= s`: not a decision; Zhou et al. "
                  f"report fails for {sum(p.zhou_outcome == 'fails' for p in certs)} of them) "
                  f"and {len(studied) - len(decided) - len(certs)} are unknown. Sizes are "
                  "expression sizes; no threshold is applied."]
    return "\n".join(lines)


def _unique_rules(violations: list[dict]) -> list[dict]:
    seen, out = set(), []
    for v in violations:
        if v["rule"] not in seen:
            seen.add(v["rule"])
            out.append(v)
    return out


def markdown_pe_report(preds: list[Prediction]) -> str:
    """Per-PE predictions as a Markdown table (``docs/predictions.md``): the verdict, the
    theory, its evidence, the program's size and certified bound, and the papers' outcomes."""
    lines = ["| task | PE | prediction | theory: verdict (evidence) | size [certified lower "
             "bound] | program used | paper |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for p in preds:
        th = "; ".join(f"{v['key']}: {v.get('label', v['prediction'])} ({v['reason']})"
                       for v in p.theories.values()).replace("|", "/") or p.theory
        size = (f"{p.size if p.size is not None else '-'}"
                + (f" [{p.size_lower_bound}]" if p.size_lower_bound is not None else ""))
        paper = []
        if p.zhou_outcome and p.pe in (None, "ape_learned"):
            paper.append(f"Zhou: {p.zhou_outcome}")
        em = (p.paper or {}).get("huang_em")
        key = {"nope": "nope", "ape_learned": "ape"}.get(p.pe or "")
        if em and key:
            paper.append(f"Huang released EM 101-150 ({key}): {em[key]['101-150']:.2f}")
        lines.append(f"| {p.task} | {p.pe or '-'} | {p.prediction_label} | {th} | {size} | "
                     f"{p.program_source or '-'} | {'; '.join(paper) or '-'} |")
    shown, progs = set(), []
    for p in preds:
        if p.task in shown or not p.program_source:
            continue
        shown.add(p.task)
        head = (f"**{p.task}** ({p.program_source}, size {p.size}, certified lower bound "
                f"{p.size_lower_bound})")
        if p.source:
            progs += [head + ":", "", "```", p.source.strip(), "```", ""]
        else:             # a shipped program: its file (tasks/programs/) is its source
            progs += [f"{head}: `tasks/programs/{p.program}`", ""]
    if progs:
        lines += ["", "Programs used (RASP-L; `shipped` = the task's file, `search` = found by "
                  "`analysis.prediction.search` without reading it):", ""] + progs[:-1]
    return "\n".join(lines)


def main(argv=None) -> int:
    """``python -m analysis.prediction.predict [--markdown] [--pe PE,...] [--search]
    [--search-budget N] [--crasp-budget N] [-N LEN] [-K 5] [TASK...|huang]``."""
    ap = argparse.ArgumentParser(description="Length-generalization predictions (Zhou et al. "
                                             "2023's RASP-L conjecture; Huang et al. 2025's "
                                             "C-RASP per positional encoding).")
    ap.add_argument("tasks", nargs="*")
    ap.add_argument("--markdown", action="store_true", help="Markdown tables (else JSON)")
    ap.add_argument("--pe", default=None, help="comma-separated PEs (per-PE table)")
    ap.add_argument("--search", action="store_true", help="run the program searches")
    ap.add_argument("--search-budget", type=parse_budget, default=DEFAULT_SEARCH_BUDGET,
                    help="candidate programs per RASP-L search")
    ap.add_argument("--crasp-budget", type=parse_budget, default=DEFAULT_CRASP_BUDGET,
                    help="candidate Booleans and counts per C-RASP search")
    ap.add_argument("-N", "--max-length", type=int, default=None,
                    help="verify to this length (default: the protocol's longest)")
    ap.add_argument("-K", "--samples", type=int, default=5)
    args = ap.parse_args(argv)
    names = args.tasks or None
    if names == ["huang"]:
        names = list(tasks.HUANG_TASKS)
    kw = dict(verify_max_length=args.max_length, samples=args.samples, search=args.search,
              search_budget=args.search_budget, crasp_budget=args.crasp_budget)
    if args.pe:
        pes = args.pe.split(",")
        preds = [predict(n, pe=pe, **kw) for n in (names or tasks.GENERALIZATION_TASKS)
                 for pe in pes]
        print(markdown_pe_report(preds) if args.markdown else
              json.dumps([p.to_dict() for p in preds], indent=1))
        return 0
    preds = predict_all(names, **kw)
    print(markdown_report(preds) if args.markdown else
          json.dumps([p.to_dict() for p in preds], indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    import sys
    sys.exit(main())
