"""`rasp check`: measures and RASP-L verdicts of a .rasp file, exit codes 0 / 1 / 2."""

import json

import pytest

from rasp_cli.main import main

REVERSE = """
flip = select(indices, length - indices - 1, ==);
reverse = aggregate(flip, tokens);
"""

CAUSAL_OK = """#!causal
hist = selector_width(select(tokens, tokens, ==));
prev = aggregate(select(indices, indices - 1, ==), tokens_int, 0);
"""


@pytest.fixture
def files(tmp_path):
    rev = tmp_path / "reverse.rasp"
    rev.write_text(REVERSE)
    ok = tmp_path / "ok.rasp"
    ok.write_text(CAUSAL_OK)
    return rev, ok


def test_invalid_program_exit_1_and_names_rules(files, capsys):
    rev, _ = files
    assert main(["check", str(rev), "--name", "reverse"]) == 1
    out = capsys.readouterr().out
    assert "layers 2" in out
    assert "rule 1" in out and "rule 3" in out and "rule 4" in out
    # rule 3 points at `length - indices`, line 2 of the file
    line = [ln for ln in out.splitlines() if "rule 3" in ln][0]
    assert f"{rev}:2:" in line


def test_valid_program_exit_0_json(files, capsys):
    _, ok = files
    assert main(["check", str(ok), "--json", "--vocab", "1,2,3", "--max-len", "20"]) == 0
    data = json.loads(capsys.readouterr().out)
    names = [d["name"] for d in data]
    assert names == ["hist", "prev"]        # library names are skipped
    assert all(d["raspl"]["valid"] for d in data)
    assert data[0]["measures"]["layers"] == 1
    assert data[0]["measures"]["length"] == 2


def test_rule_2_with_vocab_and_long_inputs(files, capsys):
    _, ok = files
    # a selector width reaches 200 at length 200: outside int8
    assert main(["check", str(ok), "--name", "hist", "--vocab", "a,b",
                 "--max-len", "200"]) == 1
    assert "rule 2" in capsys.readouterr().out


def test_causal_flag_makes_selects_causal(tmp_path, capsys):
    f = tmp_path / "h.rasp"
    f.write_text("hist = selector_width(select(tokens, tokens, ==));\n")
    assert main(["check", str(f)]) == 1
    assert main(["check", str(f), "--causal"]) == 0


@pytest.mark.parametrize("argv", [
    ["check", "/nonexistent/file.rasp"],
    ["check", "{ok}", "--name", "nope"],
    ["check", "{ok}", "--vocab", ","],
    ["check", "{ok}", "--max-len", "0"],
])
def test_bad_input_exit_2(files, argv, capsys):
    _, ok = files
    argv = [a.replace("{ok}", str(ok)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "error" in err and "Traceback" not in err


def test_syntax_error_exit_2(tmp_path, capsys):
    f = tmp_path / "bad.rasp"
    f.write_text("x = select(indices, ;\n")
    assert main(["check", str(f)]) == 2
    assert "bad.rasp:1:" in capsys.readouterr().err
