"""Verdicts from evidence (analysis.prediction.theories): one PE -> theory table, labels that say
what the evidence is (a bounded certificate is ``no program <= s``, not ``fails``), and verdicts
that padding or obfuscating a program cannot change."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rasp
import tasks
from analysis.prediction.predict import predict, predict_program
from analysis.prediction.theories import (PE_THEORIES, Evidence, combine, decide,
                                          prediction_label, theories_for)
from rasp_model.positional import PE_NAMES

ROOT = Path(__file__).resolve().parent.parent
N, K = None, 1          # verify to the protocol's longest length (40 for part A's tasks)


def test_the_table_says_what_the_papers_say():
    # Huang et al. 2025: NoPE <-> C-RASP[]; learned APE with random offsets <-> C-RASP[periodic,
    # local]; Zhou et al. 2023: RASP-L for their learned APE with offsets. Nothing else.
    assert theories_for("nope") == ("crasp",)
    assert theories_for("ape_learned") == ("raspl", "crasp_pl")
    assert theories_for("ape_learned", "random") == ("raspl", "crasp_pl")
    assert theories_for("ape_learned", "none") == ()           # not the theories' protocol
    for pe in ("ape_sinusoidal", "t5", "alibi", "rope"):
        assert theories_for(pe) == () and theories_for(pe, "random") == ()
    assert theories_for(None) == ("raspl",)
    assert set(PE_THEORIES) <= set(PE_NAMES)


def test_the_mapping_is_one_table():
    """No other module of the toolkit spells a PE -> theory mapping: the theory keys appear as
    string literals only in theories.py and the predictor that dispatches on them."""
    allowed = {"analysis/prediction/theories.py", "analysis/prediction/predict.py"}
    for pkg in ("rasp", "rasp_model", "tasks", "compiler", "analysis", "rasp_cli"):
        for f in (ROOT / pkg).rglob("*.py"):
            rel = f.relative_to(ROOT).as_posix()
            if rel in allowed or rel.startswith(("analysis/prediction/raspl_search/", "analysis/prediction/search_core/")):
                continue          # the search's grammar modes share the names
            if rel.startswith("analysis/prediction/crasp_search"):
                continue
            for node in ast.walk(ast.parse(f.read_text())):
                if isinstance(node, ast.Dict):
                    keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
                    vals = [ast.unparse(v) for v in node.values]
                    assert not (set(keys) & {"nope", "ape_learned"} and
                                any("crasp" in v or "raspl" in v for v in vals)), rel


def test_every_caller_gets_the_tables_theories():
    for pe in PE_NAMES:
        p = predict("sort_unique", pe=pe, verify_max_length=N, samples=K)
        assert tuple(p.theories) == theories_for(pe), pe
        if not theories_for(pe):
            assert p.prediction == "no theory" and p.theory.startswith("none")
    p = predict("sort_unique", pe="ape_learned", position_offsets="none",
                verify_max_length=N, samples=K)
    assert p.prediction == "no theory" and "random position offsets" in p.theory


def test_labels_say_what_the_evidence_is():
    prog = Evidence("program", "a verified program", size=7, verified_up_to=150)
    assert decide("raspl", "t", program=prog).verdict == "generalizes"
    assert decide("raspl", "t", program=prog, certified_below=5).verdict == "generalizes"
    assert decide("raspl", "t", program=prog, needed_length=150).verdict == "generalizes"
    # verified only to 100 while the protocol tests 150: not enough to say generalizes
    short = Evidence("program", "a verified program", size=7, verified_up_to=100)
    s = decide("raspl", "t", program=short, needed_length=150)
    assert s.verdict == "unknown" and "up to 150" in s.evidence.detail
    # a bounded search certificate is its own label with its bound, never "fails"
    cert = decide("crasp", "t", certified_below=4, grammar="G")
    assert cert.verdict == "no program" and cert.evidence.kind == "certificate"
    assert cert.label == "no program <= 4" and cert.to_dict()["label"] == "no program <= 4"
    assert "size <= 4 in G" in cert.evidence.detail and cert.evidence.theory == "C-RASP[]"
    # a search stopped by its wall-clock cap certifies nothing, whatever it reached
    capped = decide("crasp", "t", certified_below=4, time_cap="stopped at the cap")
    assert capped.verdict == "unknown" and capped.label == "unknown (time cap)"
    assert decide("crasp", "t", certified_below=0).verdict == "unknown"   # nothing proved
    un = decide("crasp", "t", not_decided="the search refused the task: too many symbols")
    assert un.verdict == "unknown" and "refused" in un.evidence.detail
    with pytest.raises(KeyError):
        decide("no_such_theory", "t")


def test_combine():
    g = decide("raspl", "t", program=Evidence("program", "p", size=1))
    f = decide("crasp_pl", "t", certified_below=3)
    u = decide("crasp_pl", "t")
    assert combine("ape_learned", [g, u]) == ("generalizes", None)
    r = decide("raspl", "t", certified_below=6)
    assert combine("ape_learned", [r, f]) == ("no program", None)     # not "fails"
    assert prediction_label("no program", [r, f]) == \
        "no program (RASP-L <= 6; C-RASP[periodic, local] <= 3)"
    assert prediction_label("no program", [f]) == "no program <= 3"
    assert combine("ape_learned", [f, u]) == ("unknown", None)
    # a bounded certificate of one theory does not contradict another theory's program
    pred, why = combine("ape_learned", [g, f])
    assert pred == "generalizes" and "bounded search certificate" in why
    from analysis.prediction.theories import IMPOSSIBILITY
    IMPOSSIBILITY[("t", "crasp_pl")] = "a proof (for the test)"
    try:
        proved = decide("crasp_pl", "t")
        pred, why = combine("ape_learned", [g, proved])
        assert proved.verdict == "fails" and proved.evidence.kind == "impossibility"
        assert pred == "disagree" and "RASP-L" in why and "C-RASP" in why
        # only proofs make "fails"; a proof and a certificate make a bounded "no program"
        assert combine("ape_learned", [proved, proved]) == ("fails", None)
        assert combine("ape_learned", [r, proved]) == ("no program", None)
    finally:
        del IMPOSSIBILITY[("t", "crasp_pl")]
    assert combine("t5", []) == ("no theory", None)


def _with_a_verified_shipped_program():
    out = []
    for name in list(tasks.GENERALIZATION_TASKS) + list(tasks.HUANG_TASKS):
        t = tasks.get_task(name)
        if t.kind != "next_token" or not t.reference_file:
            continue
        p = predict(t, verify_max_length=N, samples=K)
        if p.prediction == "generalizes":
            out.append((name, p))
    return out


@pytest.fixture(scope="module")
def verified():
    got = _with_a_verified_shipped_program()
    assert len(got) >= 8, [n for n, _ in got]
    return got


def _padded(sop, n=40):
    """``sop`` through ``n`` identity maps (``+ 0``): same values, larger size."""
    for _ in range(n):
        sop = sop + 0
    return sop


def _obfuscated(sop):
    """``sop`` behind a ternary whose condition always holds (indices > -1) and whose other
    branch is the same program: same values, another shape."""
    return rasp.ir.SequenceMap(rasp.ir.Elementwise("ternary"),
                               [rasp.indices > -1, sop, sop + 0])


def test_padding_or_obfuscating_never_changes_a_verdict(verified):
    """Every task whose shipped program gives "generalizes": the padded and the obfuscated
    program, alone, give the same verdict (a larger size is only reported)."""
    for name, p in verified:
        sop = tasks.get_task(name).load_reference()
        for variant in (_padded(sop), _obfuscated(sop)):
            q = predict_program(variant, name, verify_max_length=N, samples=K)
            assert q.prediction == p.prediction == "generalizes", (name, q.reasons)
            assert q.size > p.size


def test_a_refused_search_is_unknown_with_its_reason():
    """The RASP-L search refuses 150-symbol tasks (token values outside int8, rule 2): the
    RASP-L verdict is unknown and says why, never fails."""
    p = predict("sort_150", verify_max_length=6, samples=K, search=True, search_budget=1000,
                search_max_length=2)
    assert p.prediction == "unknown"
    assert "refused" in p.theories["raspl"]["reason"] and "int8" in p.theories["raspl"]["reason"]


def test_the_crasp_search_backs_a_nope_verdict_on_150_symbols():
    """The C-RASP search (alphabet-uniform constructs) finds a verified C-RASP[] program for
    sorting 150 distinct symbols; the NoPE verdict rests on it (Huang et al. report one), and
    it is verified at every length up to 150, the longest their protocol tests (101-150)."""
    p = predict("sort_150", pe="nope", samples=K, search=True, search_budget=1000,
                crasp_budget=1_000_000, search_max_length=2)
    ev = p.verdict_evidence["crasp"]
    assert p.prediction == "generalizes" and ev["kind"] == "program"
    assert ev["source"] == "search" and ev["verified_up_to"] == 150


def test_a_task_with_many_output_values_is_refused_not_exhausting_memory():
    """addition_reverse_hints' next token takes some 65 values that are not alphabet-uniform
    (digits of the sum and index hints, not a copy of one content symbol; count's 120 values
    are uniform since its content alphabet is its own 0..119): the C-RASP search refuses it
    with the reason (its decision-list requirements grow as 2^(n-1)) instead of allocating
    them; run under a 4 GB address-space cap so a regression fails instead of exhausting the
    machine."""
    import subprocess
    import sys
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
            "from analysis.prediction.predict import predict\n"
            "p = predict('addition_reverse_hints', pe='nope', search=True,\n"
            "            search_budget=100000, crasp_budget=100000, verify_max_length=6,\n"
            "            samples=1, use_shipped=False)\n"
            "print(p.prediction, '|', p.theories['crasp']['reason'])\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-1500:]
    assert r.stdout.startswith("unknown |") and "refused" in r.stdout and "2^(n-1)" in r.stdout


def _dyck_labels(w: str, depth: int) -> list[str]:
    """Huang et al.'s D_n next-character sets written from their rule, not from our DFA
    (starfree_generator.py:260-272: '10' = {a} at depth 0, '01' = {b} at depth n, '11' = {a,b}
    between): the depth is #a - #b of the prefix."""
    out, d = [], 0
    for c in w:
        d += 1 if c == "a" else -1
        out.append("{a}" if d == 0 else "{b}" if d == depth else "{a,b}")
    return out


def test_a_next_set_task_gets_a_program_verified_at_every_position():
    """Huang et al.'s next-character-set format: the C-RASP search finds a program for D_2's
    sets (NoPE -> C-RASP[]) and the verdict is ``generalizes`` with it; the program, run on
    every positive string up to length 14, writes at each position the set Huang et al.'s
    generator writes."""
    import itertools
    from analysis.prediction.search import search
    t = tasks.get_task("dyck1_depth2_nextchar")
    p = predict(t, pe="nope", search=True, search_budget=100_000, crasp_budget=1_000_000,
                samples=2)
    assert p.prediction == "generalizes", p.theories
    assert p.verdict_evidence["crasp"]["kind"] == "program"
    assert p.verdict_evidence["crasp"]["verified_up_to"] == 150   # their bins: 108-150
    prog = search(t, "crasp", budget=1_000_000).program
    checked = 0
    for n in range(1, 15):
        for w in itertools.product("ab", repeat=n):
            d = [w[:i + 1].count("a") - w[:i + 1].count("b") for i in range(n)]
            if min(d) < 0 or max(d) > 2 or d[-1] != 0:
                continue                                  # not a positive string of D_2
            ids = t.vocab.encode(["BOS"] + list(w))
            out = rasp.evaluate(prog, [t.program_tokens(ids)])[0].tolist()[1:]
            got = [t.vocab.tokens[t.program_output_to_id(v)] for v in out]
            assert got == _dyck_labels(w, 2), w
            checked += 1
    assert checked > 100


def test_a_next_set_verdict_without_a_program_names_its_evidence():
    """ends_02 (the last symbol other than 2 is 0: star-free, so no counter proves anything)
    with NoPE: no C-RASP[] program is found; the verdict is ``no program <= s`` with the
    certificate's stated size, else ``unknown`` — never ``fails``, which needs a proof. Tomita 5
    (even numbers of 0s and of 1s) has one: a counter of period 2, so ``fails`` (decided)."""
    kw = dict(pe="nope", search=True, search_budget=100_000, crasp_budget=300_000,
              verify_max_length=8, samples=1)
    p = predict(tasks.get_task("ends_02_nextchar"), **kw)
    ev = p.verdict_evidence["crasp"]
    assert p.prediction != "fails"
    if p.prediction == "no program":
        assert ev["kind"] == "certificate" and ev["certified_below"] >= 1, ev
        assert p.prediction_label == f"no program <= {ev['certified_below']}"
    else:
        assert p.prediction == "unknown" and ev["kind"] == "none"
    p = predict(tasks.get_task("tomita5_nextchar"), **kw)
    ev = p.verdict_evidence["crasp"]
    assert p.prediction == "fails" and ev["kind"] == "decision" and "period 2" in ev["detail"]
    assert p.crasp["searches"]["crasp"] is None        # a decided fragment is not searched


def test_a_c_rasp_program_serves_c_rasp_periodic_local():
    """A C-RASP[] program is a C-RASP[periodic, local] program: the learned APE's C-RASP
    verdict reuses the C-RASP[] search's program (majority: Huang et al.'s two counts and a
    comparison) instead of searching C-RASP[periodic, local] again."""
    kw = dict(search=True, search_budget=20_000, crasp_budget=1_000_000, samples=1)
    nope = predict("majority", pe="nope", **kw)
    ape = predict("majority", pe="ape_learned", **kw)
    assert nope.theories["crasp"]["prediction"] == "generalizes"
    assert ape.theories["crasp_pl"]["prediction"] == "generalizes"
    assert "found by the C-RASP[] search" in ape.theories["crasp_pl"]["reason"]
    assert ape.crasp["searches"]["crasp_pl"]["variant"] == "crasp"    # no second search
    assert ape.verdict_evidence["crasp_pl"]["size"] == nope.verdict_evidence["crasp"]["size"]


def test_a_next_set_program_must_be_prefix_causal():
    """A decoder writes each position's set from its prefix: a program that reads the whole
    string (here ``length``) is not verified on a next-set task, even where its values happen
    to be right; the same constant without ``length`` is."""
    from analysis.prediction.verify import verify_program_on_task
    t = tasks.get_task("tomita1_nextchar")
    label = t.vocab.values[t.vocab.id("{1}")]
    res = verify_program_on_task(t, rasp.full(label) + 0 * rasp.length, max_length=6,
                                 samples=1)
    assert not res.ok and "prefix-causal" in (res.error or "")
    assert verify_program_on_task(t, rasp.full(label), max_length=6, samples=1).ok


def test_the_c_rasp_search_respects_the_dyck_depth_bound():
    """D_12's sets change at depth 12, which random positive strings of length <= 40 rarely
    reach; the task's hard cases (every DFA transition completed to a member) are in the
    search's validation, so the program found is right on ``a^12 b^12`` and on
    ``(ab)^6 a^12 b^12`` (Huang et al.'s rule, :func:`_dyck_labels`)."""
    from analysis.prediction.search import search
    t = tasks.get_task("dyck1_depth12_nextchar")
    r = search(t, "crasp", verify_max_length=40)
    assert r.found, r.stopped
    for w in ("a" * 12 + "b" * 12, "ab" * 6 + "a" * 12 + "b" * 12):
        ids = t.vocab.encode(["BOS"] + list(w))
        out = rasp.evaluate(r.program, [t.program_tokens(ids)])[0].tolist()[1:]
        assert [t.vocab.tokens[t.program_output_to_id(v)] for v in out] == _dyck_labels(w, 12)
