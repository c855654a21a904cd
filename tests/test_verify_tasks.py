"""analysis.prediction.verify and `rasp verify`: reference programs decode the ground truth at every
length; wrong programs give a first counterexample; bad input gives clear errors."""

import json

import numpy as np
import pytest

import rasp
import tasks
from analysis.prediction.verify import VerifyError, verify_program_on_task, verify_task
from rasp_cli.main import main


def _valid_tasks():
    return [n for n in tasks.GENERALIZATION_TASKS if tasks.get_task(n).valid_raspl]


@pytest.mark.parametrize("name", _valid_tasks())
def test_reference_programs_verify_at_small_lengths(name):
    res = verify_task(name, max_length=12, samples=2)
    assert res.ok, res.summary()
    task = tasks.get_task(name)
    assert res.lengths == task.lengths(12)
    assert res.counterexample is None


def test_wrong_program_gives_first_counterexample():
    task = tasks.get_task("copy_unique")
    # the next token = the current token: wrong from the first answer token on
    res = verify_program_on_task(task, rasp.tokens_int, max_length=6, samples=2)
    assert not res.ok
    assert res.failed_lengths == task.lengths(6)
    c = res.counterexample
    assert c["length"] == 1
    prompt = task.vocab.encode(c["prompt"])
    assert task.vocab.encode(c["expected"]) == task.ground_truth(prompt)
    assert c["got"] != c["expected"]
    # greedy decoding of the identity program repeats SEP: the real greedy output is reported
    assert c["got"][0] == "SEP"


def test_program_failing_only_at_long_lengths_is_caught():
    # the shipped sort_unique program, but forced to EOS at positions >= 12. An example of
    # length n is BOS x1..xn SEP y1..yn EOS; the answer tokens y1..yn are predicted at
    # positions n+1 .. 2n, so the program is wrong exactly when 2n >= 12, i.e. n >= 6.
    task = tasks.get_task("sort_unique")
    good = task.load_reference()
    broken = rasp.SequenceMap(rasp.Elementwise("ternary"),
                              (rasp.indices < 12, good, rasp.Full(-3)))
    res = verify_program_on_task(task, broken, max_length=8, samples=2)
    assert not res.ok
    assert res.failed_lengths == [6, 7, 8]
    assert res.counterexample["length"] == 6


def test_bad_lengths_and_samples():
    with pytest.raises(VerifyError, match="cannot produce length"):
        verify_program_on_task("count", rasp.tokens_int, lengths=[10_000])
    with pytest.raises(VerifyError):
        verify_task("count", max_length=0)
    with pytest.raises(VerifyError):
        verify_task("count", samples=0)
    with pytest.raises(tasks.UnknownTaskError):
        verify_task("no_such_task")


def test_cli_verify_ok_and_json(capsys):
    assert main(["verify", "sort_unique", "--max-length", "6", "--samples", "2",
                 "--no-progress"]) == 0
    assert "OK" in capsys.readouterr().out
    assert main(["verify", "mode", "-N", "5", "-K", "1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["ok"] and d["task"] == "mode"


def test_cli_verify_mismatch_exits_1(tmp_path, capsys):
    prog = tmp_path / "wrong.rasp"
    prog.write_text("tokens = tokens_int;\nnext = tokens + 1;\n")
    code = main(["verify", "copy_unique", "--program", str(prog), "--name", "next",
                 "-N", "4", "-K", "1", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 1
    assert "MISMATCH" in out and "first counterexample" in out


def test_cli_verify_bad_input_exit_2(tmp_path, capsys):
    assert main(["verify", "no_such_task"]) == 2
    err = capsys.readouterr().err
    assert "known tasks" in err and "sort_unique" in err and "Traceback" not in err
    bad = tmp_path / "bad.rasp"
    bad.write_text("x = select(tokens, tokens, ==;\n")
    assert main(["verify", "count", "--program", str(bad), "--name", "x"]) == 2
    err = capsys.readouterr().err
    assert "bad.rasp" in err and "Traceback" not in err
    assert main(["verify", "count", "--program", str(tmp_path / "missing.rasp")]) == 2
    assert main(["verify", "count", "--max-length", "0"]) == 2
    capsys.readouterr()


def test_seeded_examples_are_reproducible():
    a = verify_task("boolean_and", max_length=5, samples=2, seed=3).to_dict()
    b = verify_task("boolean_and", max_length=5, samples=2, seed=3).to_dict()
    assert a == b
    assert np.all([r["n"] == 2 for r in a["per_length"]])
