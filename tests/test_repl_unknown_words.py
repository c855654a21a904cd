"""Issue 39 item 4: the REPL as a new user types at it.

Truths checked: a word that is no command and no name (``ls``, ``clear``, ``show names``) is
refused on its own line and the next line is read afresh (so ``x = 3;`` after it binds 3);
the paper's programs are found under the original repository's file name and Tracr's names,
with values computed here in Python (a reversed string, ``collections.Counter`` counts,
``sorted``); ``help`` names the example files.
"""

from __future__ import annotations

import io
import subprocess
import sys
from collections import Counter

import pytest

from rasp.repl.repl import Repl
from rasp.repl.session import Session

UNKNOWN = "unknown command or name"


def piped(lines: list[str]) -> str:
    out = io.StringIO()
    Repl(session=Session(), stdout=out, history_file=False).run_lines(lines)
    return out.getvalue()


@pytest.mark.parametrize("word", ["ls", "clear", "show names", "names please", "hlep"])
def test_an_unknown_word_is_refused_and_the_next_line_is_not_swallowed(word):
    text = piped([word, "x = 3;"])
    assert UNKNOWN in text and "(try `help`)" in text
    assert "value: x =  3" in text          # the second line ran as its own statement
    assert ".." not in text                 # no continuation prompt was shown


def test_near_misses_and_command_words_get_a_hint():
    assert "did you mean help?" in piped(["hlep"])
    assert "usage: show [s-op|selector] example | show causal" in piped(["show names"])


def test_statements_and_commands_that_start_with_bare_words_still_continue():
    # a defined name on its own line continues to the next one, as in the original REPL
    text = piped(["x = 3;", "x", ";"])
    assert text.count("value: x =  3") == 2 and UNKNOWN not in text
    # the original's commands and keyword-led statements are not refused
    text = piped(["set example", '"abc"', "show example", "def f(a) {", "return a;", "}",
                  "for i in [1]", "{ y = i; }", "y;"])
    assert UNKNOWN not in text and 's-op example: "abc"' in text
    assert "console function: f(a)" in text and "value: y =  1" in text


def test_a_terminal_user_at_the_subprocess_prompt():
    """Through the `rasp` command, stdin piped: the unknown word, then a working line."""
    r = subprocess.run([sys.executable, "-m", "rasp_cli.main"], input="clear\nx = 5;\n",
                       capture_output=True, text=True, timeout=120)
    assert UNKNOWN in r.stdout and "value: x =  5" in r.stdout


def _values(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if f"{name}(" in line and "=" in line)


def test_load_paper_examples_as_the_original_readme_says():
    word = "hello"
    text = piped(['load "paper_examples";', "reverse;", "hist_nobos;", "dyck2_ptf;"])
    assert "!!" not in text                  # no error
    assert f"[{', '.join(reversed(word))}]" in _values(text, "reverse")
    counts = Counter(word)
    assert f"[{', '.join(str(counts[c]) for c in word)}]" in _values(text, "hist_nobos")


def test_tracr_names_of_the_paper_programs():
    """make_hist / make_sort / make_length as Tracr's library names them (its docstrings'
    examples: hist("abac") = [2, 1, 2, 1]; sort([2, 4, 1, 2]) = [1, 2, 2, 4])."""
    s = Session()
    s.execute('load "examples"; h = make_hist(); n = make_length(); '
              "srt = make_sort(tokens_int, tokens_int, 5, 1); r = make_reverse(tokens);")
    from rasp import evaluate
    word = "abac"
    assert evaluate(s.env["h"], word)[0].tolist() == [Counter(word)[c] for c in word]
    assert evaluate(s.env["n"], "abcdefg")[0].tolist() == [7] * 7
    assert evaluate(s.env["srt"], [2, 4, 1, 2])[0].tolist() == sorted([2, 4, 1, 2])
    assert "".join(evaluate(s.env["r"], "Hello")[0].tolist()) == "Hello"[::-1]


def test_an_unloaded_paper_name_says_where_it_is():
    text = piped(["make_hist;", "hist_bos;"])
    assert "unknown name 'make_hist'" in text and 'load "examples";' in text
    assert "unknown name 'hist_bos'" in text and 'load "paper_examples";' in text


def test_help_names_the_example_files():
    text = piped(["help"])
    for lib in ("examples", "paper_examples", "rasp_l"):
        assert f'load "{lib}";' in text
