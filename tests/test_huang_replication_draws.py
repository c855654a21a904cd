"""Huang et al.'s length draws in the replication (issue 47 item 3): parity from length 0 and
interleave's rounded lengths, every other task's lengths unchanged, and the cells run with an
older generator marked stale.

The independent truths: their ``algorithmic/language_modeling_train.py`` (commit b39b743) for
the draws (written out in tests/test_tasks_huang.py), and for "unchanged" the lengths our
trainer and bins drew before this change, written here as they were: training lengths
``n in max(train_min_len, task.min_length)..hi`` with ``task.length_ok(n)``, bin lengths
``n in max(1, lo, task.min_length)..hi`` with ``task.length_ok(n)``, each once.
"""

from __future__ import annotations

import pytest

import tasks
from analysis.experiment import replication as R
from analysis.reporting import replication_doc as doc
from analysis.training.trainer import resolve_spec, train_lengths

CHANGED = {"parity_bits", "majority_interleave"}


def _old_bin_lengths(task, lo, hi):
    return [n for n in range(max(1, lo, task.min_length), hi + 1) if task.length_ok(n)]


@pytest.mark.parametrize("name", sorted(tasks.TASKS))
def test_bins_of_every_other_task_draw_the_lengths_they_drew(name):
    task = tasks.get_task(name)
    if name in CHANGED:
        pytest.skip("changed on purpose (tests/test_tasks_huang.py)")
    for lo, hi in ((0, 50), (1, 20), (51, 100)):
        if task.max_length is not None and hi > task.max_length:
            continue
        assert task.drawn_lengths(lo, hi) == _old_bin_lengths(task, lo, hi)


@pytest.mark.parametrize("scale", [R.FULL, R.SMALL])
@pytest.mark.parametrize("name", sorted(tasks.huang.RELEASED))
def test_replication_settings_change_only_parity_and_interleave(name, scale):
    """``train_min_len`` of a replication run: 1 as before for every algorithmic task but
    parity (0: their ParityDataset draws length 0) and interleave (3: their max(3, lo), so a
    run trained on the old uniform lengths no longer matches the plan); the training lengths
    of every other task the same list as before."""
    task = tasks.get_task(name)
    ov = R.run_overrides(name, "nope", scale.configs[0], scale)
    want = {"parity_bits": 0, "majority_interleave": 3}.get(name, 1)
    assert ov["train_min_len"] == want
    spec = resolve_spec(task, "nope", config_overrides=ov)
    lo, hi = scale.train_lengths
    drawn = train_lengths(spec, task)
    if name == "parity_bits":
        assert drawn == list(range(0, hi + 1))
    elif name == "majority_interleave":
        assert sorted(set(drawn)) == list(range(3, hi - hi % 3 + 1, 3))
        assert len(drawn) == hi - 3 + 1                       # one per total t in 3..hi
    else:
        old = [n for n in range(max(1, task.min_length), hi + 1) if task.length_ok(n)]
        assert drawn == old


def test_length_zero_only_where_a_run_asks():
    """Parity accepts length 0, but a run with the default ``train_min_len`` (1) never draws
    it, and no other task accepts it."""
    parity = tasks.get_task("parity_bits")
    spec = resolve_spec(parity, "nope", config_overrides={"train_max_len": 10})
    assert min(train_lengths(spec, parity)) == 1
    assert [n for n in tasks.TASKS if tasks.get_task(n).length_ok(0)] == ["parity_bits"]


def _cell(task, **kw):
    return {"task": task, "pe": "nope", "scale": "full", "status": "done", **kw}


def test_cells_of_an_older_generator_are_stale():
    """A cell records its generator's revision; one run before parity's length 0 or
    interleave's rounding (revision 2: it lists ``not_theirs``) or before the count-uniform
    draws (no ``not_theirs``) is stale, with why; current cells and the other tasks' are not.
    The doc marks them and says why."""
    old_parity = _cell("parity_bits", not_theirs=["..."])
    assert "length 0" in R.stale_reason(old_parity)
    assert "rounded" in R.stale_reason(_cell("majority_interleave", not_theirs=["..."]))
    pre = R.stale_reason(_cell("parity_bits"))
    assert "iid" in pre and "length 0" in pre
    assert R.stale_reason(_cell("parity_bits", generator_revision=3)) is None
    assert R.stale_reason(_cell("majority_binary", not_theirs=["..."])) is None
    assert "iid" in R.stale_reason(_cell("majority_binary"))
    assert R.stale_reason(_cell("tomita4_nextchar")) is None
    assert R.stale_reason(_cell("majority")) is None
    assert R.stale_reason({**_cell("parity_bits"), "error": "damaged"}) is None
    note = " ".join(doc._stale_note([old_parity, _cell("majority", not_theirs=["..."])]))
    assert "parity_bits" in note and "length 0" in note and "majority /" not in note


def test_a_cell_file_carries_its_revision(tmp_path):
    """The cell schema reads ``generator_revision`` back as an integer (a damaged one is
    refused with the file named); a new parity cell would record revision 3."""
    import json
    path = tmp_path / "full" / "parity_bits--nope.json"
    path.parent.mkdir()
    path.write_text(json.dumps(_cell("parity_bits", generator_revision=3)))
    cell = R.read_cell(path)
    assert cell["generator_revision"] == 3 and R.stale_reason(cell) is None
    path.write_text(json.dumps(_cell("parity_bits", generator_revision="3")))
    with pytest.raises(R.ReplicationError, match="generator_revision"):
        R.read_cell(path)
