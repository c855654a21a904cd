"""Every program the tool shows runs as printed (issue 46 item 3).

A found program is evidence only if a reader can re-run it: the text ``rasp search`` /
``rasp score`` / ``docs/predictions.md`` print must parse in the REPL's back end
(:class:`rasp.Session`) and pass ``rasp verify --program`` against the task's ground truth,
and its constants must read as the task's symbols. Two programs the issue reports failed that
way: a ``contains_c`` program (``[ab]*c[abc]*``) that ``rasp verify --program`` refused with
"cannot order-compare strings with numbers", and a correct ``(ab)*`` next-character-set
program it called a mismatch (the dialect's ``tokens`` converts the input to strings, so
``tokens == 0`` was never true). The truths here are independent of the search: Python's
``re.fullmatch`` on every word up to a length for the regular languages, the task's plain-Python
ground truth (``rasp verify``) elsewhere.

Printed C-RASP programs must read one way only: inside a count ``#[j<=i]`` every position atom
is at ``j`` (a nested count runs over ``k``), and the query position ``i`` appears only in the
relational comparisons (``tok(j) == tok(i)``) that C-RASP defines that way (Yang & Chiang 2024;
Huang et al. 2025, arXiv 2410.02140, §3).
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys

import numpy as np
import pytest

import rasp
import tasks
from analysis.prediction.search import search
from analysis.prediction.verify import verify_program_on_task
from tasks.custom import regex_task

# (task, grammar, budget): every program the searches below find is checked; the budgets are
# the smallest that find one (RASP-L: candidate programs; C-RASP: the default)
REGEXES = {"contains_c": "[ab]*c[abc]*", "ab_star": "(ab)*", "aa_star_re": "(aa)*"}
CASES = [("contains_c", "raspl", 8_000_000), ("contains_c", "crasp", None),
         ("ab_star/next_set", "raspl", 1_000_000), ("ab_star/next_set", "crasp", None),
         ("ab_star", "crasp", None), ("ab_star", "crasp_pl", None),
         ("aa_star_re", "crasp_pl", None),
         ("sort_unique", "raspl", 1_000_000), ("sort_unique", "crasp", None),
         ("tomita1", "crasp", None), ("tomita2", "crasp", None), ("majority", "crasp", None),
         ("majority_binary", "crasp", None), ("tomita2_nextchar", "crasp", None),
         ("aa_star", "crasp_pl", None)]


def _task(spec: str):
    name, _, fmt = spec.partition("/")
    if name in REGEXES:
        return regex_task(REGEXES[name], fmt or "membership", name=spec.replace("/", "_"))
    return tasks.get_task(name)


_FOUND: dict = {}


def _found(spec, grammar, budget):
    key = (spec, grammar, budget)
    if key not in _FOUND:
        task = _task(spec)
        res = search(task, grammar, budget) if budget else search(task, grammar)
        _FOUND[key] = (task, res)
    return _FOUND[key]


def _bound_symbols(text: str) -> dict:
    """The atoms a printed program binds in its first lines (``yes = 4; EOS = -3;``)."""
    out = {}
    for line in text.splitlines():
        if re.fullmatch(r"(\s*\w+ = -?\d+;)+", line):
            out.update({k: int(v) for k, v in re.findall(r"(\w+) = (-?\d+);", line)})
    return out


def _repl_runs(text: str, then: str) -> str:
    """What the REPL front end prints for ``text`` loaded as ``rasp repl FILE`` loads a file
    (its ``#!causal`` switches the mode on) followed by the statement ``then``; every
    statement must be accepted (the REPL rejects one that fails on its running example)."""
    import io
    from rasp.repl.repl import Repl
    out = io.StringIO()
    repl = Repl(session=rasp.Session(causal="#!causal" in text.splitlines()), stdout=out,
                history_file=False)
    assert repl.run_lines(text.splitlines() + [then]) == 0, out.getvalue()
    return out.getvalue()


@pytest.mark.parametrize("spec,grammar,budget", CASES)
def test_a_found_program_runs_as_printed_and_names_the_task_s_symbols(spec, grammar, budget):
    task, res = _found(spec, grammar, budget)
    assert res.found, res.text()
    text = res.source
    # the REPL front end accepts every statement on the running example the text sets ...
    assert re.search(r"^set example \[", text, re.M), text
    _repl_runs(text, "program;")
    # ... and the program it defines, run as a file runs, passes verification
    sop = rasp.run_source(text)["program"]
    ver = verify_program_on_task(task, sop, max_length=14, samples=5)
    assert ver.ok, f"{ver.summary()}\n{text}"
    # every atom it binds is the token the task's vocabulary gives that value
    vocab = task.vocab
    bound = _bound_symbols(text)
    for sym, value in bound.items():
        assert vocab.tokens[vocab.id_of_value(value)] == sym, (sym, value, text)
    # ... and a special token the body compares with or outputs is written by its name
    body = "\n".join(line for line in text.splitlines() if re.match(r"(v\d+|program) = ", line))
    for tok in ("BOS", "SEP", "EOS"):
        tid = getattr(vocab, tok.lower())
        if tid is not None and tok in bound:
            assert not re.search(rf"(==|>|<|if|else|,) {vocab.values[tid]}\b", body), text


def _membership_truth(pattern: str, alphabet: str, n: int):
    """Every word over ``alphabet`` of length ``n`` with its label by Python's own regex
    engine (``re.fullmatch``): the truth the printed program must give at SEP."""
    for w in itertools.product(alphabet, repeat=n):
        yield "".join(w), re.fullmatch(pattern, "".join(w)) is not None


@pytest.mark.parametrize("spec,grammar,budget", [c for c in CASES if c[0] in REGEXES])
def test_a_membership_program_agrees_with_python_s_regex_on_every_word(spec, grammar, budget):
    task, res = _found(spec, grammar, budget)
    env = rasp.run_source(res.source)            # its own #!causal line sets the mode
    v = task.vocab
    for n in range(0, 7):
        words = list(_membership_truth(REGEXES[spec], "abc"[:task.k], n))
        rows = [[v.values[v.bos]] + [v.values[v.id(ch)] for ch in w] + [v.values[v.sep]]
                for w, _ in words]
        got = np.asarray(rasp.evaluate(env["program"], rows, causal=True))[:, -1]
        want = [v.values[v.id("yes" if ok else "no")] for _, ok in words]
        assert got.tolist() == want, (n, res.source)


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rasp_cli.main", *args], capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("regex,fmt,budget", [("[ab]*c[abc]*", "membership", "8M"),
                                              ("(ab)*", "next_set", "1M")])
def test_the_issue_s_two_programs_pass_rasp_verify_as_rasp_search_prints_them(
        tmp_path, regex, fmt, budget):
    """The two reproducers, through the real commands: ``rasp search --json``'s program,
    saved as printed, passes ``rasp verify --program`` (exit 0); before the fix the first
    exited 1 with an error, the second with a false mismatch."""
    src = ["--regex", regex, "--format", fmt]
    out = _cli("search", *src, "--budget", budget, "--json")
    assert out.returncode == 0, out.stderr
    program = json.loads(out.stdout)["program"]
    assert program and "tokens = tokens_asis;" in program.splitlines()[:2]
    path = tmp_path / "found.rasp"
    path.write_text(program + "\n")
    ver = _cli("verify", *src, "--program", str(path), "--name", "program", "--max-length",
               "16", "--no-progress")
    assert ver.returncode == 0 and ": OK," in ver.stdout, ver.stdout + ver.stderr


# -------------------------------------------------------------------------------------------
# C-RASP notation: one reading only
# -------------------------------------------------------------------------------------------

_POS = r"[a-z]\w*(?:-\d+)?"           # a position: a variable, or one shifted back (i-1)
_ATOM = re.compile(rf"\b(?:Q_[^()\s]+|content|tok)\(({_POS})\)|\(({_POS}) % \d+ ==")
_REL = re.compile(rf"tok\(({_POS})\) (?:==|<|>) tok\(({_POS})\)")
_COUNT = re.compile(rf"#\[([a-z]\w*)<=({_POS})\] ")


def _body_end(s: str, k: int) -> int:
    """Where the body of a count that starts at ``s[k]`` ends (C-RASP notation as
    ``crasp_search.recipes.recipe_text`` writes it)."""
    if s.startswith("not ", k):
        return _body_end(s, k + 4)
    if s.startswith("#[", k):
        return _body_end(s, s.index("] ", k) + 2)
    if s.startswith("true", k):
        return k + 4
    m = _REL.match(s, k)
    if m:
        return m.end()
    if s[k] == "(" or re.match(r"[\w{},]+\(", s[k:]):
        depth, j = 0, s.index("(", k)
        while True:
            depth += {"(": 1, ")": -1}.get(s[j], 0)
            if depth == 0:
                return j + 1
            j += 1
    raise AssertionError(f"no count body at {s[k:k + 20]!r}")


def ambiguities(line: str, top: str = "i") -> list[str]:
    """Position atoms of one C-RASP line that are not at the innermost position in scope: a
    count ``#[v<=p] B`` must bind a fresh ``v`` and count up to the enclosing position ``p``
    (or ``p-c``, the count read at an earlier position); ``B``'s atoms are at ``v`` (or
    ``v-c``) and may mention the upper bound only on the right of a relational comparison
    (``tok(v) == tok(p)``)."""
    bad = []

    def var(pos: str) -> str:
        return pos.split("-")[0]

    def scan(s: str, pos: str, bound: tuple):
        k = 0
        while k < len(s):
            m = _COUNT.match(s, k)
            if m:
                v, p = m.groups()
                if var(p) != pos or v in bound:
                    bad.append(m.group(0))
                end = _body_end(s, m.end())
                body = s[m.end():end]
                for r in _REL.finditer(body):
                    if var(r.group(1)) != v or r.group(2) != p:
                        bad.append(r.group(0))
                scan(_REL.sub(lambda r: f"tok({r.group(1)})", body), v, bound + (v,))
                k = end
                continue
            a = _ATOM.match(s, k)
            if a:
                if var(a.group(1) or a.group(2)) != pos:
                    bad.append(a.group(0))
                k = a.end()
                continue
            k += 1

    scan(line.split(":=", 1)[-1], top, (top,))
    return bad


def test_the_checker_flags_an_outer_position_inside_a_count():
    """The checker itself: the issue's reading (`i % 2` inside a count over `j`) is caught,
    the notation the printer writes is not."""
    assert ambiguities("NEXT_no := (#[j<=i] (Q_b(j) and (i % 2 == 1)) > 0)") == ["(i % 2 =="]
    assert ambiguities("NEXT_no := (#[i<=i] Q_b(i) > 0)")
    assert not ambiguities("NEXT_no := ((i % 2 == 0) or (#[j<=i] (Q_b(j) and "
                           "(j % 2 == 1)) > 0))")
    assert not ambiguities("NEXT_x := (#[j<=i] (Q_a(j) and tok(j) == tok(i)) > #[j<=i] "
                           "not (Q_a(j) or (#[k<=j] Q_a(k) == #[k<=j] Q_b(k))))")
    # a count read at the position before (C-RASP[local]): its bound and relation at i-1
    assert not ambiguities("NEXT_no := (#[j<=i-1] ((#[k<=j] (k % 3 == 2) == 0) and "
                           "tok(j) == tok(i-1)) == 0)")
    assert ambiguities("NEXT_no := (#[j<=i-1] (Q_a(j) and tok(j) == tok(i)) == 0)")
    assert ambiguities("NEXT_no := (#[j<=i] (Q_a(i-1) and Q_b(j)) > 0)")


@pytest.mark.parametrize("spec,grammar,budget", [c for c in CASES if c[1] != "raspl"])
def test_a_printed_c_rasp_program_reads_one_way(spec, grammar, budget):
    _, res = _found(spec, grammar, budget)
    assert res.schema
    for line in res.schema.splitlines():
        assert not ambiguities(line), line


def test_rasp_score_shows_a_c_rasp_program_also_as_rasp_that_passes_verify(capsys, tmp_path):
    """`rasp score` shows a C-RASP program in C-RASP notation (not the REPL's language) and
    beside it as `.rasp`: that text, saved as printed, passes `rasp verify --program`."""
    from rasp_cli.main import main
    src = ["--regex", "(ab)*"]
    assert main(["score", *src, "--pe", "nope", "--search-budget", "1M", "--json"]) == 0
    (pred,) = json.loads(capsys.readouterr().out)
    th = pred["theories"]["crasp"]
    assert th["prediction"] == "generalizes" and "NEXT_" in th["program"]
    runnable = th["evidence"]["runnable"]
    path = tmp_path / "crasp.rasp"
    path.write_text(runnable + "\n")
    assert main(["verify", *src, "--program", str(path), "--name", "program",
                 "--max-length", "16", "--no-progress"]) == 0
    assert ": OK," in capsys.readouterr().out


@pytest.mark.parametrize("task", ["(ab)*", "b(ba)*", "dyck1_depth2_nextchar"])
def test_a_constructed_program_s_definitions_read_one_way(task):
    """A program constructed from potentials prints as named definitions ``X(i) := ...``
    read at ``i`` and, inside a count over ``j``, at ``j``: every line reads one way."""
    from analysis.prediction.crasp_decision import decide_task
    t = regex_task(task) if "(" in task else tasks.get_task(task)
    d = decide_task(t, "crasp")
    assert d.program["construction"] == "potentials"
    lines = d.program["text"].splitlines()
    assert any("#[j<=i]" in line for line in lines)
    for line in lines:
        assert not ambiguities(line), line
        # a definition read inside a count is read at the count's variable
        assert not re.search(r"#\[j<=i\][^#]*\b[A-Z][A-Za-z0-9_]*\(i\)", line), line
