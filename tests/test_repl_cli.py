"""`rasp` with statements piped on stdin (no terminal, no tmux): values printed, exit codes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

REVERSE = "reverse = aggregate(select(indices, length - indices - 1, ==), tokens);\n"


def rasp(args, stdin, tmp_path):
    env = dict(os.environ, RASP_HISTORY=str(tmp_path / "history"))
    return subprocess.run([sys.executable, "-m", "rasp_cli.main", *args], input=stdin,
                          capture_output=True, text=True, env=env, timeout=120,
                          cwd=str(tmp_path))


def test_rasp_with_piped_stdin_prints_values_and_exits_0(tmp_path):
    p = rasp([], REVERSE + "n = 1 +\n  2;\n", tmp_path)
    assert p.returncode == 0, p.stderr
    assert 'reverse("hello") = [o, l, l, e, h] (strings)' in p.stdout
    assert "value: n =  3" in p.stdout
    # the original's prompts, written before each line is read, and a newline at the end
    assert p.stdout.startswith(">>      s-op: reverse\n") and p.stdout.endswith(">> \n")
    assert "Traceback" not in p.stderr
    assert not (tmp_path / "history").exists()   # piped input is not typed history


def test_rasp_repl_failed_statement_exits_1_with_one_message(tmp_path):
    p = rasp(["repl", "--no-history"], "x = nope;\ny = 2;\n", tmp_path)
    assert p.returncode == 1
    # errors go to standard output framed as the original frames them, with a position
    assert ">> \t\t!!ignoring input:\n\t <stdin>:1:5: unknown name 'nope'" in p.stdout
    assert p.stderr == "" and "Traceback" not in p.stdout
    assert "value: y =  2" in p.stdout            # the REPL went on after the error


def test_rasp_repl_loads_files_first(tmp_path):
    lib = tmp_path / "squares.rasp"
    lib.write_text("def sq(x) {\n  return x * x;\n}\n")
    causal = tmp_path / "prefix.rasp"
    causal.write_text("#!causal\ndef seen(x) { return selector_width(select(x, x, ==)); }\n")
    p = rasp(["repl", str(lib), str(causal)],
             "show causal\nc = seen(tokens);\nset example [1, 2, 3]\ns = sq(tokens_int);\n",
             tmp_path)
    assert p.returncode == 0, p.stderr
    assert "s([1, 2, 3]) = [1, 4, 9] (ints)" in p.stdout
    # a #!causal file switches the session to RASP-L mode; its select sees only the prefix
    assert "causal (RASP-L) mode: on" in p.stdout
    word = "hello"
    prefix_counts = [word[:i + 1].count(ch) for i, ch in enumerate(word)]
    assert f'c("hello") = [{", ".join(map(str, prefix_counts))}] (ints)' in p.stdout


def test_rasp_repl_missing_file_is_a_usage_error(tmp_path):
    p = rasp(["repl", str(tmp_path / "nope.rasp")], "", tmp_path)
    assert p.returncode == 2
    assert "cannot read" in p.stderr and "Traceback" not in p.stderr


def test_rasp_repl_causal_flag(tmp_path):
    p = rasp(["repl", "--causal"], "m = selector_width(select(indices, indices, >=));\n",
             tmp_path)
    assert p.returncode == 0, p.stderr
    # keys >= query within the causal prefix: only the query itself -> width 1 everywhere
    assert 'm("hello") = [1]*5 (ints)' in p.stdout


def test_load_statement_in_the_repl(tmp_path):
    (tmp_path / "mylib.rasp").write_text("def inc(x) { return x + 1; }\n_hidden = 3;\n")
    p = rasp([], 'load "mylib";\nk = inc(41);\n', tmp_path)
    assert p.returncode == 0, p.stderr
    # load prints the names the file defines (not the private ones), as the original
    assert p.stdout.startswith(">>      mylib function: inc(x)\n>>     value: k =  42")
    assert "_hidden" not in p.stdout


def test_the_papers_programs_run_on_the_default_example(tmp_path):
    """The REPL's running example is "hello", as the original's; every s-op and selector of
    the paper's programs (rasp/stdlib/examples.rasp, Weiss et al. 2021) shows its value on it
    without an error, and the values are the programs' (checked in plain Python)."""
    from collections import Counter

    from rasp import load_library
    from rasp.ir import Selector, SOp
    env = load_library("examples")
    sops = [n for n in env.own_names() if isinstance(env.get(n), SOp)]
    sels = [n for n in env.own_names() if isinstance(env.get(n), Selector)]
    assert {"reverse", "hist", "sort_tokens", "dyck1"} <= set(sops) and "flip" in sels
    p = rasp([], 'load "examples";\n' + "".join(f"{n};\n" for n in sops + sels), tmp_path)
    assert p.returncode == 0 and "ignoring input" not in p.stdout, p.stdout
    for n in sops:
        assert f'Example: {n}("hello") = ' in p.stdout, n
    for n in sels:
        assert f"selector: {n}\n \t Example:\n \t\t\t     h e l l o\n" in p.stdout, n
    word = "hello"
    counts = Counter(word)
    assert f'reverse("hello") = [{", ".join(word[::-1])}] (strings)' in p.stdout
    assert f'hist("hello") = [{", ".join(str(counts[c]) for c in word)}] (ints)' in p.stdout
    assert f'sort_tokens("hello") = [{", ".join(sorted(word))}] (strings)' in p.stdout
    from rasp.repl.repl import Repl
    assert 'running example: "hello"' in Repl(input=[]).banner()
