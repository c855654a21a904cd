"""`rasp run FILE --name NAME --input WORD [--json] [--causal]`."""

import json

import pytest

from rasp_cli.main import main

PROG = """
reverse = aggregate(select(indices, length - indices - 1, ==), tokens);
flip = select(indices, length - indices - 1, ==);
prefix = selector_width(select(indices, indices, "TRUE"));
n = 3;
"""


@pytest.fixture
def prog(tmp_path):
    p = tmp_path / "prog.rasp"
    p.write_text(PROG)
    return str(p)


def test_run_text_output(prog, capsys):
    assert main(["run", prog, "--name", "reverse", "--input", "hello"]) == 0
    assert capsys.readouterr().out.strip() == 'reverse("hello") = [o, l, l, e, h] (strings)'


def test_run_json_sop_selector_atom(prog, capsys):
    assert main(["run", prog, "--name", "reverse", "--input", "[1,2,3]", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d == {"name": "reverse", "input": [1, 2, 3], "output": ["3", "2", "1"]}
    assert main(["run", prog, "--name", "flip", "--input", "abc", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["output"] == [[0, 0, 1], [0, 1, 0], [1, 0, 0]]
    assert main(["run", prog, "--name", "n", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["output"] == 3


def test_run_causal_flag(prog, capsys):
    assert main(["run", prog, "--name", "prefix", "--input", "abcd", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["output"] == [4, 4, 4, 4]
    assert main(["run", prog, "--name", "prefix", "--input", "abcd", "--json", "--causal"]) == 0
    assert json.loads(capsys.readouterr().out)["output"] == [1, 2, 3, 4]


@pytest.mark.parametrize("argv, needle", [
    (["--name", "nope"], "unknown name 'nope'"),
    (["--name", "reverse", "--input", "[1,"], "list literal"),
    (["--name", "reverse", "--input", "[]"], "empty"),
    (["--name", "reverse", "--input", "[[1]]"], "elements"),
    (["--name", "reverse", "--input", "__import__('os')"], None),
])
def test_run_bad_input_exit_2(prog, capsys, argv, needle):
    rc = main(["run", prog] + argv)
    err = capsys.readouterr().err
    if needle is None:   # a plain word is split into characters, never evaluated
        assert rc == 0
        return
    assert rc == 2 and needle in err and "Traceback" not in err


def test_run_missing_file_and_program_errors(tmp_path, capsys):
    assert main(["run", str(tmp_path / "none.rasp"), "--name", "x"]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.rasp"
    bad.write_text("x = 1;\ny = (2 +;\n")
    assert main(["run", str(bad), "--name", "x"]) == 2
    err = capsys.readouterr().err
    assert "bad.rasp:2:" in err and "Traceback" not in err
    avg = tmp_path / "avg.rasp"
    avg.write_text("m = aggregate(select(indices, indices, <=), tokens);\n")
    assert main(["run", str(avg), "--name", "m", "--input", "abc"]) == 2
    assert "avg.rasp:1:5" in capsys.readouterr().err
