"""Your own task, everywhere (issue 37 items 1 and 4): a task file or a regular expression is a
real Task; it predicts as the catalogue task it re-implements; broken files give one line with
FILE:LINE and exit 2; registered predictions round-trip and refuse a changed task file.

The task files here are written independently of the catalogue's code (the truth they state is
the task's definition, e.g. "the running AND of the bits"). Searches use tiny budgets.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tasks
from tasks.catalogue import register_task
from tasks.custom import TaskFileError, load_task_file, regex_task

ROOT = Path(__file__).resolve().parents[1]
RASP = [sys.executable, "-m", "rasp_cli.main"]

#: Zhou et al.'s boolean_and, written from its definition: n bits -> the running AND
RUNNING_AND = '''
NAME = "{name}"
VOCAB = [0, 1]
KIND = "seq2seq"


def inputs(rng, n):
    return list(rng.integers(0, 2, size=n))


def target(tokens):
    out, acc = [], 1
    for t in tokens:
        acc = 1 if (acc and t) else 0
        out.append(acc)
    return out
'''

SMALL = dict(search=True, search_budget=300_000, crasp_budget=300_000)


def _file(tmp_path, text, name="task.py"):
    p = tmp_path / name
    p.write_text(text)
    return p


def _summary(p):
    """What a prediction says: the verdict per theory, the program's size and the bound."""
    return (p.prediction, p.prediction_label, p.size, p.size_lower_bound,
            {k: (v["prediction"], v.get("label")) for k, v in p.theories.items()},
            (p.verification or {}).get("ok"))


def test_a_task_file_is_the_catalogue_task_it_re_implements(tmp_path):
    mine = load_task_file(_file(tmp_path, RUNNING_AND.format(name="my_and")))
    ref = tasks.get_task("boolean_and")
    assert mine.vocab.tokens == ref.vocab.tokens and mine.vocab.values == ref.vocab.values
    for n in (1, 7, 20, 40):
        rng_a, rng_b = np.random.default_rng(n), np.random.default_rng(n)
        assert mine.sample(n, rng_a) == ref.sample(n, rng_b)
    assert mine.kind == "next_token" and mine.reference_file is None


def test_a_task_file_predicts_as_the_catalogue_task(tmp_path):
    from analysis.prediction.predict import predict
    mine = register_task(load_task_file(_file(tmp_path, RUNNING_AND.format(name="my_and2"))))
    for pe in ("nope", "ape_learned"):
        # the catalogue task without its shipped program: a task file has none
        want = predict("boolean_and", pe=pe, use_shipped=False, **SMALL)
        got = predict("my_and2", pe=pe, **SMALL)
        assert _summary(got) == _summary(want)
        assert got.prediction == "generalizes"       # a C-RASP program: the running AND
    assert mine.name == "my_and2"


#: reverse, written from its definition: n symbols 0..9 -> the same n in reverse order
REVERSE10 = '''
NAME = "my_reverse10"
VOCAB = list(range(10))
KIND = "seq2seq"


def inputs(rng, n):
    return [int(x) for x in rng.integers(0, 10, size=n)]


def target(tokens):
    return list(tokens)[::-1]
'''


def test_a_task_file_gets_the_catalogue_task_s_c_rasp_grammar(tmp_path):
    """The C-RASP grammar's alphabet-uniform constructs range over the task's content
    alphabet, whatever defines the task: the catalogue's reverse (symbols 0..9) and a task
    file of it search the same grammar and certify the same bound (they once differed: the
    catalogue task's alphabet was taken as {0, 1})."""
    from analysis.prediction.search import search
    mine = load_task_file(_file(tmp_path, REVERSE10))
    ref = tasks.get_task("reverse")
    a = search(ref, "crasp", budget=40_000)
    b = search(mine, "crasp", budget=40_000)
    assert (a.found, a.certified_below, a.stopped, a.explored, a.level_reached) == \
        (b.found, b.certified_below, b.stopped, b.explored, b.level_reached)
    assert a.certified_below is not None and a.certified_below >= 1


@pytest.mark.parametrize("pattern,fmt,alphabet,components,catalogue", [
    ("1*", "membership", "01", None, "tomita1"),
    ("1*", "next_set", "01", ["0", "1"], "tomita1_nextchar"),
    ("(aa)*", "next_set", None, ["EOS"], "aa_star_nextchar"),
])
def test_a_regex_is_the_catalogue_language(pattern, fmt, alphabet, components, catalogue):
    mine = regex_task(pattern, fmt, list(alphabet) if alphabet else None,
                      name=f"re_{catalogue}", components=components)
    ref = tasks.get_task(catalogue)
    assert mine.vocab.tokens == ref.vocab.tokens and mine.vocab.values == ref.vocab.values
    for n in (2, 8, 14, 30):
        if ref.length_ok(n):
            assert mine.sample(n, np.random.default_rng(n)) == \
                ref.sample(n, np.random.default_rng(n))
            assert mine.verification_prompts(n) == ref.verification_prompts(n)
        assert mine.length_ok(n) == ref.length_ok(n)
    from analysis.prediction.verify import protocol_max_length
    # Huang et al.'s test lengths (150); a catalogue language may have longer released bins
    assert protocol_max_length(mine) == 150 <= protocol_max_length(ref)


def test_a_regex_predicts_as_tomita1():
    from analysis.prediction.predict import predict
    register_task(regex_task("1*", "membership", list("01"), name="re_tomita1"))
    for pe in ("nope", "ape_learned"):
        want = predict("tomita1", pe=pe, **SMALL)
        got = predict("re_tomita1", pe=pe, **SMALL)
        assert _summary(got) == _summary(want)
        assert got.prediction == "generalizes"       # 1*: "no 0 so far", a count


def test_regex_errors_are_clear():
    with pytest.raises(TaskFileError, match="not in the alphabet"):
        regex_task("a*b", alphabet=["a"])
    with pytest.raises(TaskFileError, match="regular expression"):
        regex_task("(a")
    with pytest.raises(TaskFileError, match="catalogue task"):
        register_task(regex_task("1*", name="tomita1"))


BROKEN = {
    "syntax": ('NAME = "x"\nVOCAB = "ab"\nKIND = "seq2seq"\ndef inputs(rng, n)\n    return 1\n',
               4, "syntax error"),
    "no_name": ('VOCAB = "ab"\nKIND = "seq2seq"\ndef inputs(rng, n):\n    return ["a"] * n\n'
                'def target(t):\n    return t\n', 1, "defines no NAME"),
    "inputs_raise": ('NAME = "x"\nVOCAB = "ab"\nKIND = "seq2seq"\n\ndef inputs(rng, n):\n'
                     '    if n > 2:\n        raise ValueError("too long")\n'
                     '    return ["a"] * n\n\ndef target(t):\n    return t\n', 7,
                     "inputs(rng, 3) raised ValueError: too long"),
    "bad_token": ('NAME = "x"\nVOCAB = "ab"\nKIND = "seq2seq"\n\ndef inputs(rng, n):\n'
                  '    return ["c"] * n\n\ndef target(t):\n    return t\n', 5, "not in VOCAB"),
    "load_raises": ('import numpy\nNAME = "x"\nVOCAB = 1 / 0\n', 3, "ZeroDivisionError"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_task_files_give_one_line_with_file_and_line(tmp_path, case):
    text, line, what = BROKEN[case]
    path = _file(tmp_path, text, f"{case}.py")
    with pytest.raises(TaskFileError) as e:
        load_task_file(path)
    assert str(e.value).startswith(f"{path}:{line}: ") and what in str(e.value)
    p = subprocess.run(RASP + ["score", "--task-file", str(path)], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 2, p.stderr
    err = p.stderr.strip()
    assert "\n" not in err and "Traceback" not in err
    assert f"{path}:{line}: " in err and what in err


def test_help_says_a_task_file_runs_its_code():
    for cmd in ("score", "search", "verify", "train", "report", "validate-predictor"):
        p = subprocess.run(RASP + [cmd, "--help"], capture_output=True, text=True, cwd=ROOT,
                           timeout=120)
        text = " ".join(p.stdout.split())
        assert p.returncode == 0 and "--task-file" in text, cmd
        assert "RUNS ITS PYTHON CODE" in text, cmd


def test_score_search_verify_and_train_take_a_task_file(tmp_path):
    f = _file(tmp_path, RUNNING_AND.format(name="cli_and"))
    p = subprocess.run(RASP + ["score", "--task-file", str(f), "--pe", "nope", "--json",
                               "--search-budget", "200k", "--crasp-budget", "300k"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    (row,) = json.loads(p.stdout)
    assert row["task"] == "cli_and" and row["prediction"] == "generalizes"
    assert row["budgets"]["raspl"] == 200_000      # the searches ran by default
    p = subprocess.run(RASP + ["search", "--task-file", str(f), "--budget", "200k", "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    prog = tmp_path / "and.rasp"        # the running AND: "a 0 so far?" in RASP-L
    prog.write_text("zeros = numerical(aggregate(select(indices, indices, <=), "
                    "tokens == 0, 0));\nprogram = 0 if zeros > 0 else 1;\n")
    p = subprocess.run(RASP + ["verify", "--task-file", str(f), "--program", str(prog),
                               "--name", "program", "-N", "12", "--no-progress"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode in (0, 1) and "Traceback" not in p.stderr, p.stderr
    out = tmp_path / "run"
    p = subprocess.run(RASP + ["train", "--task-file", str(f), "--pe", "nope", "--steps", "3",
                               "--preset", "quick", "-o", str(out), "--no-progress"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    assert json.loads((out / "config.json").read_text())["task"] == "cli_and"


def test_registered_predictions_round_trip_and_refuse_a_changed_file(tmp_path):
    from analysis.prediction.registered import (RegisteredError, read_registration,
                                                registered_predictions)
    f = _file(tmp_path, RUNNING_AND.format(name="reg_and"))
    reg = tmp_path / "registered.json"
    p = subprocess.run(RASP + ["score", "--task-file", str(f), "--pe", "nope", "--json",
                               "--search-budget", "200k", "--crasp-budget", "300k",
                               "--register", str(reg)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    printed = json.loads(p.stdout)
    doc = read_registration(reg)
    import hashlib
    (t,) = doc["tasks"]
    assert t["source"]["sha256"] == hashlib.sha256(f.read_bytes()).hexdigest()
    assert t["in_catalogue"] is False
    assert doc["budgets"]["raspl"] == 200_000 and doc["budgets"]["crasp"] == 300_000
    assert doc["registered_at"].endswith("Z") and "commit" in doc
    got = registered_predictions(doc)[("reg_and", "nope")]
    assert (got["prediction"], got["prediction_label"]) == \
        (printed[0]["prediction"], printed[0]["prediction_label"])
    # moved with its task file (another clone): found beside it, by the same sha256
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.copy(reg, moved / reg.name)
    shutil.copy(f, moved / f.name)
    f.rename(tmp_path / "gone.py")
    there = read_registration(moved / reg.name)
    assert there["tasks"][0]["source"]["task_file"] == str((moved / f.name).resolve())
    (moved / f.name).write_text("# another task\n")
    with pytest.raises(RegisteredError, match="changed since registration"):
        read_registration(moved / reg.name)
    (tmp_path / "gone.py").rename(f)
    # the file changes: the registered predictions are about another task now
    f.write_text(f.read_text() + "\n# edited\n")
    with pytest.raises(RegisteredError, match="changed since registration"):
        read_registration(reg)
    p = subprocess.run(RASP + ["validate-predictor", "--registered", str(reg)],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 2 and "changed since registration" in p.stderr
    assert "Traceback" not in p.stderr


def test_registered_predictions_are_checked_as_written(tmp_path, monkeypatch):
    """validate() takes the registered prediction, not a new one, and counts tasks outside
    the catalogue apart."""
    from analysis.experiment import validate as V
    from analysis.prediction.registered import registered_predictions
    reg = {"format": "x", "tasks": [{"name": "outside", "in_catalogue": False,
                                     "source": {"regex": "1*"}}],
           "predictions": [{"task": "outside", "pe": "nope", "prediction": "fails",
                            "prediction_label": "fails", "theories": {}}]}
    preds = registered_predictions(reg)
    assert preds[("outside", "nope")]["in_catalogue"] is False
    out = {"rows": [{"task": "outside", "pe": "nope", "prediction": "fails",
                     "prediction_label": "fails", "theories": {}, "id_em": [1.0],
                     "ood_em": [0.9], "ood_mean": 0.9, "ood_ci95": None,
                     "measured": "generalizes", "label": "contradicted",
                     "in_catalogue": False}],
           "confusion": {}, "counts": {"supported": 0, "contradicted": 0, "inconclusive": 0},
           "agreement": None, "outside": {"confusion": {"fails": {"generalizes": 1}},
                                          "counts": {"supported": 0, "contradicted": 1,
                                                     "inconclusive": 0},
                                          "agreement": 0.0}}
    text = V.format_validation(out)
    assert "outside the catalogue" in text and "contradicted 1" in text
    # a learned APE trained without offsets has no theory: the registered verdict does not apply
    assert V._registered({"prediction": "generalizes", "prediction_label": "generalizes",
                          "theories": {"raspl": {}}, "in_catalogue": False},
                         "ape_learned", "none")["prediction"] == "no theory"


def test_a_run_of_an_edited_task_file_is_not_reused(tmp_path):
    """A run records what defines a task outside the catalogue (the task file's sha256), so
    editing the file cannot reuse a run trained on the old file under the same name."""
    from analysis.training.runs import RunDirError
    from analysis.training.trainer import resolve_spec, train
    f = _file(tmp_path, RUNNING_AND.format(name="edited_and"))
    task = load_task_file(f)
    ov = {"eval_samples": 2, "probe_every": 0}
    kw = dict(steps=2, train_max_len=4, config_overrides=ov, progress=False, preset="quick",
              verbose=False)
    spec = resolve_spec(task, "nope", 0, "quick", steps=2, train_max_len=4,
                        config_overrides=ov)
    assert spec.task_source == {"name": "edited_and", "sha256": task.sha256}
    out = tmp_path / "run"
    train(task, "nope", out_dir=out, **kw)
    assert json.loads((out / "config.json").read_text())["task_source"]["sha256"] == task.sha256
    assert train(task, "nope", out_dir=out, **kw).reused            # the same file: reused
    f.write_text(RUNNING_AND.format(name="edited_and").replace("acc and t", "acc or t"))
    edited = load_task_file(f)
    with pytest.raises(RunDirError, match="task's definition changed"):
        train(edited, "nope", out_dir=out, **kw)
    # a catalogue task's runs carry no task_source (their config.json is unchanged)
    assert resolve_spec(tasks.get_task("parity"), "nope", 0, "quick",
                        config_overrides=ov).task_source is None


def test_a_registered_task_file_is_rebuilt_from_its_source_record():
    """A child process (a Ray worker) rebuilds a registered task from its source record
    (``task_from_source``): a task file is loaded again by path (this raised NameError before
    issue 40, item 4)."""
    from tasks.catalogue import task_from_source
    path = Path(__file__).resolve().parent.parent / "tasks" / "examples" / "more_a_than_b.py"
    assert task_from_source({"task_file": str(path)}).name == "more_a_than_b"
