"""The same verdict at any load (issue 37 item 2): search budgets count work, not seconds.

A search stopped by its work budget must stop at the same candidate whatever else the machine
does (a busy loop beside it) and however many threads NumPy's BLAS or the search's workers use;
a search stopped by its wall-clock safety cap certifies nothing (``unknown (time cap)``). Each
search here is small (seconds) and stops mid-enumeration on its budget, where a stop on
seconds would land elsewhere on a loaded machine.
"""

from __future__ import annotations

import subprocess
import sys
from contextlib import contextmanager

import pytest
from threadpoolctl import threadpool_limits

import tasks
from analysis.prediction.budget import BudgetError, parse_budget
from analysis.prediction.predict import PredictError, clear_search_caches, predict
from analysis.prediction.search import search


@contextmanager
def busy_loop():
    """A process spinning on a core beside the test, at the test's priority."""
    p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        p.kill()
        p.wait()


def _raspl(threads):
    r = search(tasks.get_task("count"), "raspl", 150_000, max_size=8, threads=threads)
    return (r.found, r.size, r.certified_below, r.stopped, r.explored, r.combine_work,
            r.source)


def _crasp():
    r = search(tasks.get_task("majority_interleave"), "crasp_pl", budget=150_000)
    return (r.found, r.size, r.certified_below, r.stopped, r.explored, r.level_reached,
            r.schema)


def _verdicts():
    clear_search_caches()
    out = []
    for name in ("tomita4_nextchar", "count"):
        p = predict(name, pe="ape_learned", search=True, search_budget=100_000,
                    crasp_budget=100_000, verify_max_length=12, samples=1)
        out.append((name, p.prediction_label,
                    {k: v["label"] for k, v in p.theories.items()},
                    {k: v.get("certified_below") for k, v in p.verdict_evidence.items()}))
    return out


def test_a_budget_stop_is_the_same_under_load_and_with_any_threads():
    raspl = _raspl(1)
    assert raspl[3] == "budget"            # stopped mid-enumeration, by the budget
    crasp = _crasp()
    assert crasp[3] == "budget"
    with threadpool_limits(limits=2):
        assert _raspl(2) == raspl
        assert _crasp() == crasp
    with busy_loop():
        assert _raspl(2) == raspl
        with threadpool_limits(limits=1):
            assert _crasp() == crasp


def test_verdicts_are_the_same_under_load_and_with_any_threads():
    import torch
    base = _verdicts()
    old = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with threadpool_limits(limits=2), busy_loop():
            assert _verdicts() == base
        torch.set_num_threads(1)
        with threadpool_limits(limits=1):
            assert _verdicts() == base
    finally:
        torch.set_num_threads(old)


def test_a_time_capped_search_is_unknown_time_cap_never_a_certificate():
    """majority has no shipped program: with a wall-clock cap far below what its budget needs,
    the RASP-L verdict is ``unknown (time cap)`` with its reason, not ``no program <= s``."""
    clear_search_caches()
    p = predict("majority", search=True, search_budget=10**12, search_time_cap=0.05,
                verify_max_length=8, samples=1)
    th = p.theories["raspl"]
    assert th["prediction"] == "unknown" and th["label"] == "unknown (time cap)"
    assert "wall-clock safety cap" in th["reason"]
    assert p.prediction_label == "unknown (time cap)"
    clear_search_caches()


def test_old_seconds_settings_get_a_clear_error():
    with pytest.raises(PredictError, match="search_budget"):
        predict("count", search_seconds=5)
    for args, hint in ((["score", "count", "--search", "20"], "--search-budget"),
                       (["search", "sort_unique", "--seconds", "5"], "--budget"),
                       (["validate-predictor", "count", "--search", "5"], "--search-budget")):
        r = subprocess.run([sys.executable, "-m", "rasp_cli.main", *args], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 2 and hint in r.stderr and "Traceback" not in r.stderr, args


def test_budgets_read_as_candidates():
    assert parse_budget("40M") == 40_000_000 == parse_budget("4e7") == parse_budget(40_000_000)
    assert parse_budget("500k") == 500_000 and parse_budget("1.5G") == 1_500_000_000
    for bad in ("abc", "-1", "1.5", "inf", "nan", "", True):
        with pytest.raises(BudgetError):
            parse_budget(bad)
