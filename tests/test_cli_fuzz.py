"""Fuzz the ``rasp`` command line (issue 29, item 1): hypothesis draws subcommands with bad,
odd and valid flags and files of every kind the commands read (missing, empty, binary,
deeply nested, a directory, a device, ``/proc``), and no draw may end in a Python traceback —
only the exit codes 0, 1 and 2 with their one-line messages.

In-process (``rasp_cli.main.main``) so that 300 draws fit in seconds: an exception escaping
``main`` is exactly what would print a traceback from the ``rasp`` script, and argparse's
``SystemExit`` is its usage error (exit 2). Values that would start real work (training steps,
long verifications) are drawn only from ones that are refused."""

import contextlib
import io
import os
import string

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from rasp_cli.main import main

NUMBERS = ["nan", "inf", "-inf", "-1", "0", "1e20", "1e400", "abc", "", "0x10", "2",
           "99999999999999999999999", "1.5", " 3", "-0"]
SMALL = ["nan", "-1", "0", "abc", "", "1", "2", "1e20", "99999999999999999999999"]
SECONDS = ["nan", "inf", "-1", "0", "abc", "0.05"]
TASKS = ["copy_unique", "sort_unique", "parity", "no_such_task", "", "../etc", "a/b"]
PES = ["nope", "all", "bogus", "", "NoPE", "rope,alibi", ","]
JUNK = st.sampled_from(["--json", "--force", "-o", "--", "-", "--no-such-flag", "=", "%s",
                        "\u202e", "é", "--help"]) | st.text(
    alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
    max_size=12)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    made = {
        "valid.rasp": "x = tokens;\nn = 2 ^ 20000;\ns = \"ab\" * 3;\nl = [1, [2, 3]];\n",
        "bad.rasp": "x = = ;\n",
        "empty.rasp": "",
        "nested.json": "[" * 100_000,
        "nested.rasp": "x = " + "(" * 5000 + "1" + ")" * 5000 + ";\n",
        "examples.jsonl": '{"prompt": [1, 2], "answer": [2, 1]}\n{"prompt": [1]}\n',
        "sweep.toml": "lr = [1e-3, 1e-2]\nsteps = 0\n",
    }
    for name, text in made.items():
        (d / name).write_text(text)
    (d / "binary.rasp").write_bytes(bytes(range(256)) * 4)
    (d / "dir").mkdir()
    run = d / "run"
    run.mkdir()
    (run / "config.json").write_text("[" * 100_000)
    (run / "DONE").write_text("{")
    paths = [str(d / n) for n in [*made, "binary.rasp", "dir", "run", "missing"]]
    return d, paths + ["/dev/null", "/dev/zero", "/proc/self/environ", "", "-"]


def argv_strategy(files):
    d, paths = files
    path = st.sampled_from(paths)
    program = st.just(str(d / "valid.rasp")) | path      # often valid, to reach the commands
    num, small, secs = (st.sampled_from(NUMBERS), st.sampled_from(SMALL),
                        st.sampled_from(SECONDS))
    task, pe = st.sampled_from(TASKS), st.sampled_from(PES)
    name = st.sampled_from(["x", "n", "s", "l", "reverse", "nope", ""])
    text = st.text(alphabet=string.printable, max_size=8)
    out = st.just(str(d / "out"))

    def opt(flag, value):
        return st.one_of(st.just([]), value.map(lambda v: [flag, v]))

    commands = [
        st.tuples(st.just(["run"]), program.map(lambda p: [p]), st.just("--name"), name,
                  opt("--input", text | st.sampled_from(["[1, 2]", "[[1]]", "[", "hello"])),
                  st.sampled_from([[], ["--json"], ["--causal"]])),
        st.tuples(st.just(["check"]), program.map(lambda p: [p]), opt("--max-len", num),
                  st.sampled_from([[], ["--json"]])),
        st.tuples(st.just(["tasks"]), st.sampled_from([[], ["--json"]])),
        st.tuples(st.just(["verify"]), task.map(lambda t: [t]), opt("--max-length", small),
                  opt("--samples", small), opt("--seed", num), opt("--program", path)),
        st.tuples(st.just(["score"]), task.map(lambda t: [t]), opt("--max-length", small),
                  opt("--pe", pe)),
        st.tuples(st.just(["search"]), task.map(lambda t: [t]), opt("--examples", path),
                  st.just(["--time-cap"]), secs.map(lambda s: [s]), opt("--max-length", small),
                  opt("--memory-mb", num)),
        st.tuples(st.just(["compile"]), program.map(lambda p: [p]), st.just("--name"), name,
                  st.just("--vocab"), st.sampled_from(["a,b", "a,b", "", ",", "a,a"]),
                  st.just("--max-len"), st.sampled_from(["2", "3", *SMALL]),
                  out.map(lambda o: ["-o", o])),
        st.tuples(st.just(["probe"]), path.map(lambda p: [p])),
        # training: --steps is never valid, so nothing trains
        st.tuples(st.just(["train"]), task.map(lambda t: [t]), opt("--pe", pe),
                  st.just(["--steps"]), st.sampled_from(["nan", "-1", "0", "abc", "1e20", "1.5"])
                  .map(lambda s: [s]), opt("--set", st.sampled_from(
                      ["d_model=1000000000", "n_layers=100000", "x", "steps=[[[", "lr=nan"])),
                  out.map(lambda o: ["-o", o])),
        st.tuples(st.just(["sweep"]), task.map(lambda t: [t]), st.just(["--pe", "nope"]),
                  st.just(["--grid-file"]), path.map(lambda p: [p]),
                  out.map(lambda o: ["-o", o])),
    ]
    base = st.one_of(*commands).map(
        lambda parts: [a for part in parts for a in ([part] if isinstance(part, str) else part)])
    return st.tuples(base, st.lists(JUNK, max_size=2), st.integers(0, 3)).map(
        lambda t: t[0] + t[1] if t[2] == 0 else t[0])          # junk in a quarter of draws


def _call(argv):
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            rc = main(argv)
        except SystemExit as e:                  # argparse: usage errors and --help
            rc = e.code if isinstance(e.code, int) else 2
    return rc, err.getvalue()


def test_no_cli_input_ends_in_a_traceback(files):
    old = os.getcwd()

    @settings(max_examples=300, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(argv_strategy(files))
    def check(argv):
        try:
            rc, err = _call(argv)
        except BaseException as e:      # what the rasp script would print as a traceback
            raise AssertionError(f"rasp {argv!r} raised {type(e).__name__}: {e}") from e
        assert rc in (0, 1, 2), (argv, rc, err[-500:])
        assert "Traceback" not in err, (argv, err[-800:])
        if rc == 2:                     # a message naming the command (or argparse's usage)
            assert any(line.startswith(("rasp ", "usage:")) for line in err.splitlines()), \
                (argv, err[-500:])

    os.chdir(files[0])
    try:
        check()
    finally:
        os.chdir(old)
