"""The surfaces added in round three as safe as the old ones (issue 49): registrations, replication
cell files, task files, searches and their flags.

Every hostile case runs the real ``rasp`` command line under the driver of
``tests/test_faults_files.py`` (a 2 GB address-space cap, a 60 s alarm per case, peak memory
checked) and must end in exit 2 and one line, never a traceback, a hang or an exit 0 doing
nothing. Truths stated independently of the code under test: a link planted at an output name
keeps its target's bytes; a FIFO is not an output file to block on; code named only inside a
JSON file is not code the user asked to run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_faults_files import assert_one_line, run_cases, victim

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_TASK = ROOT / "tasks" / "examples" / "more_a_than_b.py"


# -- 1. `rasp score --register FILE` writes through the one writer ----------------------------

def test_register_never_writes_through_a_link_or_blocks_on_a_fifo(tmp_path):
    v, data = victim(tmp_path)
    (tmp_path / "link.json").symlink_to(v)
    (tmp_path / "dangling.json").symlink_to(tmp_path / "created-by-a-link.txt")
    os.mkfifo(tmp_path / "fifo.json")
    cases = [["score", "count", "--pe", "nope", "--register", str(tmp_path / n)]
             for n in ("link.json", "dangling.json", "fifo.json")]
    for r in run_cases(cases, tmp_path):
        assert r["tb"] is None and r["rc"] == 0, (r["argv"], r["tb"], r["err"])
    assert v.read_bytes() == data
    assert not (tmp_path / "created-by-a-link.txt").exists()
    for n in ("link.json", "dangling.json", "fifo.json"):
        p = tmp_path / n
        assert p.is_file() and not p.is_symlink(), n
        assert json.loads(p.read_text())["format"] == "rasp-lab registered predictions"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


# -- 2. registrations and replication cells through the one bounded, type-checked reader -----

def _registration(tmp_path: Path, change) -> Path:
    doc = json.loads((ROOT / "docs" / "registered" / "abc_cycle.json").read_text())
    change(doc)
    p = tmp_path / "r.json"
    p.write_text(json.dumps(doc))
    return p


REGISTRATION_DAMAGE = {
    "task_file: 5": (lambda d: d["tasks"][0].__setitem__(
        "source", {"task_file": 5, "name": "x", "sha256": "ab"}), "tasks[0].source.task_file"),
    "tasks a string": (lambda d: d.__setitem__("tasks", "x"), "field tasks"),
    "a task a number": (lambda d: d["tasks"].__setitem__(0, 5), "tasks[0]"),
    "source a list": (lambda d: d["tasks"][0].__setitem__("source", []), "tasks[0].source"),
    "two sources": (lambda d: d["tasks"][0]["source"].__setitem__("catalogue", "count"),
                    "tasks[0].source"),
    "pe a number": (lambda d: d["predictions"][0].__setitem__("pe", 3), "predictions[0].pe"),
    "theories a list": (lambda d: d["predictions"][0].__setitem__("theories", [1]),
                        "predictions[0].theories"),
    "prediction null": (lambda d: d["predictions"][0].__setitem__("prediction", None),
                        "predictions[0].prediction"),
    "no task name": (lambda d: d["tasks"][0].pop("name"), "tasks[0].name"),
    "components a string": (lambda d: d["tasks"][0]["source"].__setitem__("components", "ab"),
                            "components"),
    "a prediction of no task": (lambda d: d["predictions"][0].__setitem__("task", "zzz"),
                                "predictions[0].task"),
}


@pytest.mark.parametrize("case", sorted(REGISTRATION_DAMAGE))
def test_a_registration_of_wrong_types_is_one_line_naming_the_field(tmp_path, case):
    change, field = REGISTRATION_DAMAGE[case]
    path = _registration(tmp_path, change)
    [r] = run_cases([["validate-predictor", "--registered", str(path), "--runs",
                      str(tmp_path / "runs")]], tmp_path)
    assert_one_line(r, 2, field)
    assert str(path) in r["err"]
    assert not (tmp_path / "runs").exists()


def _cell() -> dict:
    return json.loads((ROOT / "docs" / "replication" / "full" /
                       "majority_binary--nope.json").read_text())


CELL_DAMAGE = {
    "prediction a number": ({"prediction": 5}, "prediction"),
    "registered a number": ({"prediction": {"prediction": "fails", "registered": 5}},
                            "prediction.registered"),
    "agreement bin short": ({"agreement": [{"bin": [1], "ours": "fails", "label": "agrees"}]},
                            "agreement[0].bin"),
    "agreement a string": ({"agreement": "x"}, "agreement"),
    "agreement row a list": ({"agreement": [[1, 2]]}, "agreement[0]"),
    "bins bin a string": ({"bins": [{"bin": "ab", "mean": 1, "min": 1, "max": 1, "seeds": 5}]},
                          "bins[0].bin"),
    "bins mean a string": ({"bins": [{"bin": [1, 2], "mean": "x", "min": 1, "max": 1,
                                      "seeds": 5}]}, "bins[0].mean"),
    "bins mean too large": ({"bins": [{"bin": [1, 2], "mean": 10 ** 400, "min": 1, "max": 1,
                                       "seeds": 5}]}, "bins[0].mean"),
    "selection a list": ({"selection": []}, "selection"),
    "compute flops a string": ({"compute": {"runs": 1, "train_seconds": 1, "steps": 1,
                                            "flops": "x"}}, "compute.flops"),
    "compute a number": ({"compute": 5}, "compute"),
    "theirs strings": ({"theirs": ["a"]}, "theirs[0]"),
    "task a number": ({"task": 5}, "task"),
    "task unknown": ({"task": "no_such_task"}, "task"),
    "pe a list": ({"pe": ["nope"]}, "pe"),
    "status a number": ({"status": 5}, "status"),
    "fitting seeds a number": ({"fitting_seeds": 3}, "fitting_seeds"),
    "their bins numbers": ({"their_bins": [1]}, "their_bins[0]"),
}


@pytest.mark.parametrize("case", sorted(CELL_DAMAGE))
def test_a_damaged_cell_is_one_line_naming_the_field_in_every_reader(tmp_path, case):
    """``replication_doc``, ``rasp report``'s rows (``cell_rows``) and the predictor's checks
    (``prediction_checks``) read a corrupted-but-JSON cell as one damaged line naming the file
    and the field (they raised AttributeError/KeyError/TypeError)."""
    from analysis.experiment import replication as R
    from analysis.reporting import replication_doc
    change, field = CELL_DAMAGE[case]
    cell = {**_cell(), **change}
    path = tmp_path / "cells" / "full" / "majority_binary--nope.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(cell))
    with pytest.raises(R.ReplicationError, match=re.escape(f"field {field}")):
        R.read_cell(path)
    [bad] = R.read_cells(tmp_path / "cells")
    assert str(path) in bad["error"] and "\n" not in bad["error"]
    assert R.cell_rows("majority_binary", tmp_path / "cells") == []
    assert R.prediction_checks(tmp_path / "cells") == []
    out = tmp_path / "doc.md"
    assert replication_doc.main(["--cells", str(tmp_path / "cells"), "-o", str(out)]) == 0
    assert f"field {field}" in out.read_text()



def test_the_checks_pass_the_shipped_files_and_refuse_a_wrong_type(tmp_path):
    """The field checks accept every cell and registration the project ships, and refuse
    ``task_file: 5`` in-process too (a RegisteredError, not a TypeError)."""
    from analysis.experiment import replication as R
    from analysis.prediction.registered import RegisteredError, read_registration
    cells = R.read_cells(ROOT / "docs" / "replication")
    assert cells and not [c["error"] for c in cells if "error" in c]
    for p in sorted((ROOT / "docs" / "registered").glob("*.json")):
        assert read_registration(p)["predictions"]
    change = REGISTRATION_DAMAGE["task_file: 5"][0]
    with pytest.raises(RegisteredError, match=re.escape("tasks[0].source.task_file")):
        read_registration(_registration(tmp_path, change))


# -- 3. a registration never runs code the command line did not name --------------------------

PLANTED = '''import pathlib
pathlib.Path(__file__).with_name("RAN").write_text("the planted file ran")
NAME = "planted_task"
VOCAB = ["a", "b"]
KIND = "membership"
LENGTHS = [1, 2, 3]
def inputs(rng, n):
    return list(rng.choice(["a", "b"], n))
def target(t):
    return t.count("a") > t.count("b")
'''


def test_a_registration_does_not_import_a_task_file_named_only_inside_it(tmp_path):
    """``validate-predictor --registered r.json`` imported whatever task file the JSON named
    (a planted file ran, exit 0); now it refuses, with the task-file warning, unless the file
    is named again with --task-file or --trust-task-files is given."""
    from analysis.prediction.registered import read_registration, registered_tasks
    from analysis.prediction.registered import RegisteredError
    planted = tmp_path / "planted.py"
    planted.write_text(PLANTED.replace("RAN", "RAN-at-registration"))
    import hashlib
    doc = json.loads((ROOT / "docs" / "registered" / "abc_cycle.json").read_text())
    doc["tasks"] = [{"name": "planted_task", "in_catalogue": False,
                     "source": {"task_file": str(planted), "name": "planted_task",
                                "sha256": hashlib.sha256(planted.read_bytes()).hexdigest()}}]
    for p in doc["predictions"]:
        p["task"] = "planted_task"
    reg = tmp_path / "r.json"
    reg.write_text(json.dumps(doc))
    [r] = run_cases([["validate-predictor", "--registered", str(reg), "--runs",
                      str(tmp_path / "runs"), "--seeds", "0", "--steps", "1"]], tmp_path)
    assert_one_line(r, 2, "RUNS ITS PYTHON CODE")
    assert "--task-file" in r["err"] and "--trust-task-files" in r["err"]
    assert not list(tmp_path.glob("RAN*")) and not (tmp_path / "runs").exists()
    checked = read_registration(reg)
    with pytest.raises(RegisteredError, match="named only inside the registration"):
        registered_tasks(checked)
    assert [t.name for t in registered_tasks(checked, [str(planted)])] == ["planted_task"]
    assert list(tmp_path.glob("RAN*"))            # named: it is the user's code, and it runs


def test_the_registered_help_warns_as_the_task_file_help_does():
    from rasp_cli.common import TASK_FILE_HELP, TASK_FILE_WARNING
    from tasks.custom import RUNS_CODE_WARNING
    assert TASK_FILE_WARNING == RUNS_CODE_WARNING and RUNS_CODE_WARNING in TASK_FILE_HELP
    p = subprocess.run([sys.executable, "-m", "rasp_cli.main", "validate-predictor", "--help"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    text = " ".join(p.stdout.split())
    assert p.returncode == 0 and "--trust-task-files" in text
    assert text.count(" ".join(RUNS_CODE_WARNING.split())) >= 3      # --task-file, both new


# -- 4. task files: every exception class and result shape, bounds before materialising ----

TASK_BASE = '''NAME = "hostile"
VOCAB = ["a", "b"]
KIND = "membership"
LENGTHS = [1, 2]
def inputs(rng, n):
    return ["a"] * n
def target(t):
    return True
'''

#: name -> lines appended to TASK_BASE (a later definition wins), words the error must hold
HOSTILE_TASKS = {
    "unhashable token": ("def inputs(rng, n):\n    return [['a']] * n", "not in VOCAB"),
    "__iter__ raises": ("class X:\n    def __iter__(self): raise ValueError('boom')\n"
                        "def inputs(rng, n):\n    return X()", "ValueError: boom"),
    "__repr__ __str__ __hash__ raise": (
        "class X:\n    def __repr__(self): raise ValueError('r')\n"
        "    def __str__(self): raise ValueError('s')\n"
        "    def __hash__(self): raise ValueError('h')\n"
        "def inputs(rng, n):\n    return [X()] * n", "not in VOCAB"),
    "a BaseException": ("class B(BaseException): pass\ndef inputs(rng, n):\n    raise B('x')",
                        "raised B"),
    "GeneratorExit": ("def inputs(rng, n):\n    raise GeneratorExit()", "GeneratorExit"),
    "SystemExit(0) in inputs": ("def inputs(rng, n):\n    raise SystemExit(0)", "SystemExit"),
    "SystemExit(0) at import": ("raise SystemExit(0)", "SystemExit"),
    "LENGTHS=[inf]": ("LENGTHS = [float('inf')]", "LENGTHS"),
    "LENGTHS=range(1, 10**8)": ("LENGTHS = range(1, 10**8)", "LENGTHS"),
    "LENGTHS=count()": ("import itertools\nLENGTHS = itertools.count()", "LENGTHS"),
    "VOCAB=count()": ("import itertools\nVOCAB = itertools.count()", "VOCAB"),
    "infinite inputs": ("import itertools\ndef inputs(rng, n):\n"
                        "    return itertools.repeat('a')", "inputs"),
    "infinite target": ("KIND = 'seq2seq'\nimport itertools\ndef target(t):\n"
                        "    return itertools.repeat('a')", "target"),
    "infinite next set": ("KIND = 'next_set'\nimport itertools\ndef target(t):\n"
                          "    return [itertools.repeat('a') for _ in t]", "target"),
    "infinite LABELS": ("KIND = 'next_set'\nimport itertools\n"
                        "LABELS = itertools.repeat({'a'})\ndef target(t):\n"
                        "    return [{'a'} for _ in t]", "LABELS"),
    "a 100 MB message": ("def inputs(rng, n):\n    raise ValueError('x' * 100_000_000)",
                         "ValueError"),
    "a 100 MB NAME": ("NAME = 'a' * 100_000_000", "NAME"),
    "an exception whose __str__ raises": (
        "class E(Exception):\n    def __str__(self): raise ValueError('no')\n"
        "def inputs(rng, n):\n    raise E()", "raised E"),
    "KIND with a raising __eq__": ("class K:\n    def __eq__(self, o): raise ValueError('eq')\n"
                                   "    __hash__ = None\nKIND = K()", "KIND"),
    "a module __getattr__ that exits": ("del LENGTHS\ndef __getattr__(name):\n"
                                        "    raise SystemExit(3)", "SystemExit"),
    "a str token with raising __hash__": (
        "class X(str):\n    def __repr__(self): raise ValueError('r')\n"
        "    def __hash__(self): raise ValueError('h')\nVOCAB = [X('a'), 'b']", "VOCAB"),
}


def test_hostile_task_files_are_one_line_task_file_errors(tmp_path):
    """17 tracebacks of the issue (and a few more): each a one-line error naming the file,
    exit 2, under 2 GB and 60 s (the bounds are checked before anything is materialised;
    SystemExit(0) in inputs ended the command with exit 0 and no output)."""
    cases, files_ = [], []
    for i, case in enumerate(sorted(HOSTILE_TASKS)):
        f = tmp_path / f"task{i}.py"
        f.write_text(TASK_BASE + HOSTILE_TASKS[case][0] + "\n")
        files_.append((case, f))
        cases.append(["verify", "--task-file", str(f)])
    for (case, f), r in zip(files_, run_cases(cases, tmp_path)):
        assert_one_line(r, 2, HOSTILE_TASKS[case][1])
        err = r["err"].strip()
        assert str(f) in err and len(err) < 600, (case, err[:300])


def test_a_keyboard_interrupt_in_a_task_file_stays_an_interrupt(tmp_path):
    from tasks.custom import TaskFileError, load_task_file
    f = tmp_path / "t.py"
    f.write_text(TASK_BASE + "def inputs(rng, n):\n    raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        load_task_file(f)
    f.write_text(TASK_BASE + "def inputs(rng, n):\n    raise GeneratorExit\n")
    with pytest.raises(TaskFileError, match="GeneratorExit"):
        load_task_file(f)


# -- 5. flags -----------------------------------------------------------------------------------

def test_bad_search_replicate_and_score_flags_are_one_line(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory\n")
    cases = {
        "--regex 'a{1000}' (RecursionError)": (
            ["search", "--regex", "a{1000}", "--json"], "repetition count"),
        "--regex 'a{100000}' (minutes in the parser)": (
            ["search", "--regex", "a{100000}", "--json"], "repetition count"),
        "score --search-budget 0 (accepted)": (
            ["score", "count", "--search-budget", "0"], "--search-budget"),
        "score --crasp-budget 0 (accepted)": (
            ["score", "count", "--crasp-budget", "0"], "--crasp-budget"),
        "replicate --pe ,,, (exit 0 doing nothing)": (
            ["replicate", "huang", "majority_binary", "--pe", ",,,"], "names no positional"),
        "replicate --runs FILE (exit 1, no error line)": (
            ["replicate", "huang", "majority_binary", "--pe", "nope", "--scale", "small",
             "--no-predict", "--runs", str(a_file), "-o", str(tmp_path / "cells")], "--runs"),
        "validate-predictor --runs FILE (a failed grid)": (
            ["validate-predictor", "count", "--pe", "nope", "--seeds", "0", "--steps", "1",
             "--runs", str(a_file)], "--runs"),
        "train --grid -o FILE (a failed grid)": (
            ["train", "--grid", "count", "--pe", "nope", "--seeds", "0", "--steps", "1",
             "--serial", "-o", str(a_file)], "-o"),
    }
    for (name, (argv, words)), r in zip(cases.items(), run_cases([c[0] for c in cases.values()],
                                                                 tmp_path)):
        assert_one_line(r, 2, words)
    assert a_file.read_text() == "not a directory\n" and not (tmp_path / "cells").exists()


def test_a_time_capped_search_that_completed_no_size_certifies_nothing(tmp_path):
    """``--time-cap`` hit before size 0 completed printed "no program of size <= -1"."""
    p = subprocess.run([sys.executable, "-m", "rasp_cli.main", "search", "copy_unique",
                        "--time-cap", "0.001"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env={**os.environ, "RASP_PROGRESS_EVERY": "0"})
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-800:]
    assert "-1" not in p.stdout and "nothing certified" in p.stdout, p.stdout


@pytest.mark.parametrize("flags", [["--grid", "more_a_than_b"], ["--seeds", "0,1"],
                                   ["--seeds", "0-1"]])
def test_train_a_task_file_grid(tmp_path, flags):
    """``rasp train --task-file F --grid NAME`` counted the task twice ("two runs of the grid
    write the same run directory"); ``--task-file F --seeds 0,1`` said "need --grid", with no
    TASK to name after it: both train the grid."""
    out = tmp_path / "runs"
    [r] = run_cases([["train", "--task-file", str(EXAMPLE_TASK), "--pe", "nope", "--steps", "2",
                      "--preset", "quick", "--serial", "--no-progress", "-o", str(out),
                      *flags]], tmp_path)
    assert r["tb"] is None and r["rc"] == 0, (r["rc"], r["err"][-800:])
    seeds = sorted(p.name for p in out.glob("more_a_than_b/nope/seed*"))
    assert seeds == (["seed0-quick"] if flags[0] == "--grid" else ["seed0-quick", "seed1-quick"])


# -- 6. concurrent replications of one cell ----------------------------------------------------

def _tiny_scale():
    from dataclasses import replace
    from analysis.experiment import replication as R
    return replace(R.SMALL, name="tiny", train_lengths=(0, 3), bins=((0, 3), (4, 6)),
                   configs=(R.SweepConfig(1, 1, 16, 1e-3),), steps=20, fit_every=10,
                   bin_samples=8, batch_size=8, fitting=2, max_seeds=3,
                   fallback=R.SweepConfig(1, 1, 16, 1e-3), fallback_steps=20, eval_stride=2,
                   eval_samples=4)


def test_a_second_replication_of_a_cell_is_refused_not_counted_as_failed(tmp_path):
    """Two `rasp replicate` on one runs directory: the second counted the seed the first held
    locked as failed and trained an extra seed, so the last writer's cell held a seed set the
    protocol would not choose. Now the second is refused while the cell (or one of its runs)
    is in use, and nothing of the cell is written."""
    from analysis.experiment import replication as R
    from analysis.training.runs import RunLock
    scale = _tiny_scale()

    def replicate():
        return R.replicate_cell("majority_binary", "nope", scale, tmp_path / "runs",
                                tmp_path / "cells", grid_kwargs={"serial": True}, waves=1,
                                log=lambda s: None)
    cell = R.cell_path(tmp_path / "cells", "majority_binary", "nope", scale)
    with RunLock(tmp_path / "runs" / "huang" / "tiny" / "majority_binary" / "nope"):
        with pytest.raises(R.ReplicationError, match="being replicated by another process"):
            replicate()
    assert not cell.exists()
    tag = scale.configs[0].tag
    seed0 = tmp_path / "runs" / "huang" / "tiny" / "majority_binary" / "nope" / tag / "seed0"
    with RunLock(seed0):                     # another process trains the sweep's run
        with pytest.raises(R.ReplicationError, match="in use by another process"):
            replicate()
    assert not (tmp_path / "runs" / "huang" / "tiny" / "majority_binary" / "nope" / tag /
                "seed1").exists()
    assert replicate()["seeds_tried"]        # once it is free, the cell runs


# -- 7. `rasp train --address` to a cluster of `ray start` with token authentication ----------

def test_train_connects_to_a_token_authenticated_cluster_with_nothing_exported(tmp_path):
    """A user's machine with a Ray token (``~/.ray/auth_token``: any earlier local instance
    writes one) starts a head with ``ray start --head``: Ray 2.60 then enables token
    authentication. ``rasp train --grid ... --address HOST:PORT`` with nothing exported failed
    with "Authentication token is missing or incorrect" (``RAY_AUTH_MODE`` was set after
    ``import ray``, which reads it)."""
    import tempfile
    from test_grid_ray import RAY, _env, head_node
    home = Path(tempfile.mkdtemp(prefix="rt-", dir="/tmp"))     # short: Ray's socket paths
    env = _env(home)
    for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        env.pop(k, None)
    subprocess.run([str(RAY), "get-auth-token", "--generate"], env=env, cwd=home,
                   capture_output=True, timeout=120, check=True)
    assert (home / ".ray" / "auth_token").is_file()
    with head_node(home, env) as (address, _):
        p = subprocess.run([sys.executable, "-m", "rasp_cli.main", "train", "--grid", "count",
                            "--pe", "nope", "--seeds", "0", "--steps", "2", "--preset", "quick",
                            "--no-progress", "--address", address,
                            "-o", str(tmp_path / "runs")], env=env, cwd=tmp_path,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        assert f"ray://{address}" in p.stderr


@pytest.mark.parametrize("code, words", [
    ("def inputs(rng, n):\n    while True:\n        try:\n            pass\n"
     "        except BaseException:\n            pass\n", "inputs(rng, 1) took more than 1 s"),
    ("import time\nwhile True:\n    time.sleep(0.05)\n", "loading the task file took more"),
    ("def inputs(rng, n):\n    def forever():\n        while True:\n            pass\n"
     "        yield 'a'\n    return forever()\n", "iterating the result of inputs"),
])
def test_a_task_file_call_has_a_time_limit(tmp_path, code, words):
    """User code had no time limit: a call that never returns (even one that catches the
    interrupt) is one line after RASP_TASK_FILE_SECONDS."""
    f = tmp_path / "slow.py"
    f.write_text(TASK_BASE + code)
    p = subprocess.run([sys.executable, "-m", "rasp_cli.main", "verify", "--task-file", str(f)],
                       cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "RASP_TASK_FILE_SECONDS": "1"})
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-800:]
    assert words in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_a_slow_task_file_call_shows_progress(tmp_path):
    """User code had no progress line: a call of the task file's code that runs past a few
    seconds says so (the file, the call, the limit) while it runs, and the command goes on."""
    f = tmp_path / "slow.py"
    f.write_text(TASK_BASE + "import time\nSLEPT = []\ndef inputs(rng, n):\n"
                 "    if not SLEPT:\n        SLEPT.append(1)\n        time.sleep(4)\n"
                 "    return ['a'] * n\n")
    p = subprocess.run([sys.executable, "-m", "rasp_cli.main", "verify", "--task-file", str(f)],
                       cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "RASP_TASK_FILE_SECONDS": "30",
                            "RASP_PROGRESS_EVERY": "1"})
    assert "Traceback" not in p.stderr, p.stderr[-800:]
    lines = [x for x in p.stderr.splitlines() if "slow.py: inputs(rng, 1)" in x]
    assert lines and "working" in lines[0] and "30 s" in lines[0], p.stderr[-800:]
