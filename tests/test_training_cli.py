"""`rasp train`: bad input exits 2 with a message; the grid table lists tasks x PEs."""

import json

import pytest

from analysis.training.runs import RunResult
from rasp_cli.commands.train import format_grid
from rasp_cli.main import main


@pytest.mark.parametrize("argv, message", [
    (["train", "no_such_task", "--pe", "nope"], "unknown task"),
    (["train", "copy_unique", "--pe", "sinusoid"], "unknown positional encoding"),
    (["train", "copy_unique"], "--pe is required"),
    (["train", "--pe", "nope"], "give a TASK"),
    (["train", "copy_unique", "--pe", "nope", "--set", "no_such_key=1"], "unknown configuration"),
    (["train", "copy_unique", "--pe", "nope", "--set", "noequals"], "KEY=VALUE"),
    (["train", "copy_unique", "--pe", "all"], "need --grid"),
    (["train", "--grid", "copy_unique", "--pe", "nope", "--seeds", "a,b"], "seeds and ranges"),
    (["train", "copy_unique", "--pe", "nope", "--preset", "huge"], "preset"),
])
def test_bad_input_exit_2(argv, message, capsys, tmp_path):
    rc = main(argv + ["-o", str(tmp_path / "r"), "--no-progress"])
    assert rc == 2
    assert message in capsys.readouterr().err


def test_grid_table_has_one_row_per_task_and_means_over_seeds():
    rs = [RunResult("d", "count", "nope", 0, "quick", 1, [], 1.0, 0.5),
          RunResult("d", "count", "nope", 1, "quick", 1, [], 0.5, 0.25),
          RunResult("d", "count", "t5", 0, "quick", 1, [], 0.9, None),
          RunResult("d", "parity", "nope", 0, "quick", 1, [], 0.6, 0.4)]
    lines = format_grid(rs).splitlines()
    assert "nope" in lines[0] and "t5" in lines[0]
    count = [l for l in lines if l.startswith("count")][0]
    assert "0.75 / 0.38" in count and "0.90 /   -" in count
    parity = [l for l in lines if l.startswith("parity")][0]
    assert "0.60 / 0.40" in parity


def test_rasp_tasks_lists_every_task_with_group_length_and_source(capsys):
    import tasks
    assert main(["tasks", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(rows) == set(tasks.list_tasks())
    for name in tasks.GENERALIZATION_TASKS:
        t = tasks.get_task(name)
        assert rows[name]["group"] == "A" and rows[name]["length"] == t.length_definition
        assert rows[name]["source"] == t.source
    assert {r["group"] for n, r in rows.items() if n in tasks.SEQUENCE_PROGRAMS} == {"B"}
    assert main(["tasks", "--group", "A"]) == 0
    out = capsys.readouterr().out
    assert "copy_unique" in out and "dyck2" not in out
    with pytest.raises(SystemExit) as e:
        main(["train", "--help"])
    assert e.value.code == 0 and "rasp tasks --group A" in capsys.readouterr().out
