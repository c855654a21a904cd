"""`rasp --help`, `rasp run`, `rasp check` and the REPL start without importing torch, matplotlib
or ray (they take seconds to import); only the invoked subcommand builds its parser. Speed
itself is measured by `python -m bench.bench_startup`, not here."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "matplotlib", "ray")

PROBE = """
import sys
from rasp_cli.main import main
try:
    rc = main({argv!r})
except SystemExit as e:
    rc = e.code
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print("HEAVY:" + ",".join(heavy), file=sys.stderr)
"""


@pytest.mark.parametrize("argv", [
    ["--help"],
    ["run", "rasp/stdlib/examples.rasp", "--name", "reverse", "--input", "hello"],
    ["check", "tasks/programs/sort_unique.rasp"],
    ["repl"],
    ["tasks"],
])
def test_light_commands_do_not_import_torch(argv):
    p = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)], cwd=ROOT,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    line = [x for x in p.stderr.splitlines() if x.startswith("HEAVY:")]
    assert line, p.stderr[-2000:]
    assert line[-1] == "HEAVY:", f"rasp {' '.join(argv)} imported {line[-1][6:]}"


def test_every_subcommand_still_has_its_full_parser(capsys):
    """Lazy parsers change nothing for the invoked command: its own --help lists its options."""
    from rasp_cli.main import main
    for cmd, option in (("train", "--pe"), ("score", "--search"), ("validate-predictor",
                                                                   "--seeds")):
        with pytest.raises(SystemExit) as e:
            main([cmd, "--help"])
        assert e.value.code == 0
        assert option in capsys.readouterr().out


@pytest.mark.parametrize("argv", [
    ["train", "count", "--pe", "bogus"],
    ["train", "count", "--pe", "nope", "--seeds", "x"],
    ["train", "count", "--pe", "nope", "--pe-preset", "nope=bogus"],
    ["report", "--pe", "bogus"],
    ["report", "--seeds", "x"],
    ["demo", "--pe", "bogus"],
    ["curve", "count", "--train-lengths", "x"],
    ["score", "--pe", "bogus"],
    ["validate-predictor", "--pe", "bogus"],
])
def test_usage_errors_answer_before_torch_loads(argv):
    """A mistyped flag of a heavy command is answered (exit 2) before torch, matplotlib or Ray
    load: under load those imports took 20-30 s before the one-line error (issue 50)."""
    p = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)], cwd=ROOT,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    line = [x for x in p.stderr.splitlines() if x.startswith("HEAVY:")]
    assert line, p.stderr[-2000:]
    assert "error" in p.stderr.lower()
    assert line[-1] == "HEAVY:", f"rasp {' '.join(argv)} imported {line[-1][6:]} first"
