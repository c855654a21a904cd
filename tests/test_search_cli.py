"""`rasp search` (task and --examples, with clear errors naming the example), `rasp score --pe`
rows, and the prediction's robustness to padded / obfuscated programs (issue 10)."""

import json

import pytest

import rasp
import tasks
from analysis.prediction.predict import predict, predict_program
from rasp.analyses.crasp import check_crasp
from rasp_cli.main import main


def _write(tmp_path, name, lines):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def test_examples_running_max_found(tmp_path, capsys):
    f = _write(tmp_path, "max.jsonl", [
        '{"prompt": [3, 1, 4], "answer": [4]}', '{"prompt": [2, 7], "answer": [7]}',
        '{"prompt": [5], "answer": [5]}', '{"prompt": [1, 9, 2], "answer": [9]}',
        '{"prompt": [6, 2, 1, 0], "answer": [6]}'])
    assert main(["search", "--examples", f, "--budget", "200M", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["found"] and d["length"] == 2 and d["certified_no_program_up_to"] == 1
    env = rasp.run_source("tokens = tokens_int;\n" + d["program"], causal=True)
    assert rasp.evaluate(env["program"], [[4, 8, 1, 3]], causal=True)[0].tolist() == \
        [4, 8, 8, 8]


@pytest.mark.parametrize("lines,needle", [
    (['{"prompt": [1, 2], "answer": [3]}', '{"prompt": [1, 2], "answer": 3'], ":2: not a JSON"),
    (['{"prompt": [1, 2], "answer": [3]}', '{"prompt": [1], "answr": [2]}'], ":2: expected"),
    (['{"prompt": [1, "a"], "answer": [3]}'], ":1: the example mixes integer and string"),
    (['{"prompt": [1, 2], "answer": [3]}', '{"prompt": ["a"], "answer": ["b"]}'],
     ":2: its tokens are strs but line 1 has ints"),
    (['{"prompt": [1, 2], "answer": [3]}', '{"prompt": [1, 2], "answer": [4]}'],
     ":2: contradicts line 1"),
    (['{"prompt": [1, 200], "answer": [3]}'], ":1: token 200 is outside the int8 range"),
])
def test_bad_examples_are_refused_naming_the_example(tmp_path, capsys, lines, needle):
    f = _write(tmp_path, "bad.jsonl", lines)
    assert main(["search", "--examples", f]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_search_task_json_and_usage_errors(capsys):
    assert main(["search", "sort_unique", "--budget", "200M", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["found"] and d["found_by"] == "enumeration" and d["certified_lower_bound"] == 4
    assert main(["search"]) == 2
    assert main(["search", "no_such_task"]) == 2
    assert "unknown task" in capsys.readouterr().err
    assert main(["search", "sort_unique", "--threads", "0"]) == 2
    assert "--threads" in capsys.readouterr().err
    # one thread finds the same program as the default threads
    assert main(["search", "sort_unique", "--budget", "200M", "--json", "--threads", "1"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert (one["program"], one["explored"]) == (d["program"], d["explored"])


def test_score_json_rows_per_pe(capsys):
    assert main(["score", "sort_unique", "--pe", "nope", "--pe", "ape_learned", "--pe", "t5",
                 "--json", "-K", "2"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["pe"] for r in rows] == ["nope", "ape_learned", "t5"]
    for r in rows:
        for key in ("size_lower_bound", "size_upper_bound", "program_source", "crasp",
                    "prediction", "theory", "verdict_evidence"):
            assert key in r
        assert r["program_source"] == "shipped" and r["size_upper_bound"] >= 4
        # the shipped program is one kqv: a value aggregation, not C-RASP
        assert r["crasp"]["valid"] is False and r["crasp"]["violations"][0]["rule"] == 1
    nope, ape, t5 = rows
    assert nope["theory"].startswith("C-RASP[]") and nope["prediction"] == "unknown"
    assert set(ape["theories"]) == {"raspl", "crasp_pl"}
    assert ape["theories"]["raspl"]["prediction"] == "generalizes"
    assert ape["theories"]["crasp_pl"]["prediction"] == "unknown"     # no search: nothing known
    assert ape["prediction"] == "generalizes"       # one sufficient condition, none against
    assert t5["prediction"] == "no theory" and t5["theories"] == {}
    assert "no paper" in t5["theory"]
    assert main(["score", "sort_unique", "--pe", "xpe"]) == 2


def test_padded_program_gets_the_same_verdict_and_the_search_finds_the_short_one():
    task = tasks.get_task("sort_unique")
    padded_src = task.reference_source() + "\n" + "\n".join(
        f"sort_unique = sort_unique + {1 if i % 2 == 0 else -1};" for i in range(60))
    env = rasp.run_source(padded_src, causal=True)
    padded = env["sort_unique"]
    alone = predict_program(padded, task, samples=2)
    shipped = predict(task, samples=2)
    assert alone.prediction == shipped.prediction == "generalizes"   # existence decides
    assert alone.size == 60 + shipped.size                           # size is only reported
    with_search = predict(task, program=padded, program_label="padded",
                          search=True, search_budget=10_000_000, crasp_budget=10_000, samples=2)
    assert with_search.program_source == "search" and with_search.size == 4
    assert with_search.prediction == "generalizes"
    assert with_search.size_lower_bound == 4 == with_search.size_upper_bound


def test_predictions_doc_refuses_bad_settings_with_one_line(tmp_path):
    """``python -m analysis.reporting.predictions_doc`` (``make predictions``): bad numbers are a one-line
    error and exit 2, and nothing is written."""
    import subprocess
    import sys
    out = tmp_path / "p.md"
    for bad in (["--search-budget", "-1"], ["--search", "20"], ["-N", "0"],
                ["--validate-seeds", "0"]):
        r = subprocess.run([sys.executable, "-m", "analysis.reporting.predictions_doc", "-o", str(out),
                            *bad], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2, (bad, r.stderr)
        assert r.stderr.strip().count("\n") == 0 and "predictions_doc:" in r.stderr
        assert not out.exists()


def test_search_mode_crasp_runs_the_c_rasp_search(capsys, tmp_path):
    # (10)*: after BOS or a 0 the next symbol is 1, after a 1 it is 0 or the end; C-RASP[]
    # says so with one condition (the current token is 1)
    assert main(["search", "tomita2_nextchar", "--mode", "crasp", "--json"]) == 0
    d = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert d["mode"] == d["variant"] == "crasp" and d["found"] and d["size"] >= 1
    assert d["verification"].startswith("tomita2_nextchar: OK")
    env = rasp.run_source(d["program"], causal=True)
    assert check_crasp(env["program"], "crasp").valid
    ex = tmp_path / "ex.jsonl"
    ex.write_text('{"prompt": [1, 2], "answer": [3]}\n')
    assert main(["search", "--examples", str(ex), "--mode", "crasp"]) == 2
    assert "--mode crasp / crasp_pl searches a task" in capsys.readouterr().err


def test_predictions_doc_reads_registrations_as_written_and_refuses_a_changed_task(tmp_path):
    """The doc's section of registered predictions outside the catalogue: none registered
    says so; a registration whose task file changed since is refused (its predictions are
    about the file as it was), before any run."""
    import argparse
    import hashlib
    from analysis.prediction.registered import FORMAT, RegisteredError
    from analysis.reporting.predictions_doc import _registered_section
    args = argparse.Namespace(registered_dir=str(tmp_path), validate_seeds=5,
                              validate_preset="demo", pe="nope,ape_learned",
                              runs=str(tmp_path / "runs"))
    assert _registered_section(args, {}).endswith("None registered yet.")
    task = tmp_path / "t.py"
    task.write_text("NAME = 't'\n")
    then = hashlib.sha256(b"NAME = 'x'\n").hexdigest()
    (tmp_path / "r.json").write_text(json.dumps({
        "format": FORMAT, "version": 1, "tasks": [{"name": "t", "in_catalogue": False,
                                                   "source": {"task_file": str(task),
                                                              "name": "t",
                                                              "sha256": then}}],
        "predictions": [{"task": "t", "pe": "nope", "prediction": "generalizes",
                         "prediction_label": "generalizes", "theories": {}}]}))
    with pytest.raises(RegisteredError, match="changed since registration"):
        _registered_section(args, {})
    assert not (tmp_path / "runs").exists()


def test_a_found_program_s_constants_are_named_by_the_task_s_tokens(capsys):
    """The searched program compares tokens with program values; it prints them as the task's
    symbols (`tokens == SEP`), each bound as an atom in its first lines to the value the task's
    vocabulary gives that token, and runs as printed."""
    import re
    assert main(["search", "sort_unique", "--budget", "1M"]) == 0
    out = capsys.readouterr().out
    text = "\n".join(line[4:] for line in out.splitlines() if line.startswith("    "))
    vocab = tasks.get_task("sort_unique").vocab
    lines = text.splitlines()
    bound = dict(re.findall(r"(\w+) = (-?\d+);", next(
        line for line in lines if re.fullmatch(r"(\w+ = -?\d+; ?)+", line))))
    assert {"SEP", "EOS"} <= set(bound)
    for token, value in bound.items():
        assert vocab.tokens[vocab.id_of_value(int(value))] == token
    body = "\n".join(line for line in lines if re.match(r"(v\d+|program) = ", line))
    assert "SEP" in body and not re.search(r"-\d", body)  # no special token left as a number
    env = rasp.run_source(text, causal=True)
    ids = [vocab.bos, *vocab.encode(["3", "1", "2"]), vocab.sep]
    got = tasks.decode_with_program(tasks.get_task("sort_unique"), env["program"], ids, 5)
    assert vocab.decode(got) == ["1", "2", "3", "EOS"]