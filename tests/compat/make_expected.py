"""Regenerate the expected outputs of the compatibility corpus by running the ORIGINAL RASP REPL.

The expected output of every session ``sessions/NAME.rasp`` is ``sessions/NAME.out``: what the
original REPL (tech-srl/RASP, ``python -m RASP_support``) prints when the session is fed to its
standard input, with its two banner lines removed. Nothing in ``*.out`` is written by hand.

Usage (needs a checkout of tech-srl/RASP and a Python with ``antlr4-python3-runtime==4.9.1``
and ``termcolor``, the original's ``setup.sh`` requirements)::

    python -m venv /tmp/origenv
    /tmp/origenv/bin/pip install antlr4-python3-runtime==4.9.1 termcolor
    git clone https://github.com/tech-srl/RASP /tmp/RASP
    python tests/compat/make_expected.py /tmp/RASP --python /tmp/origenv/bin/python [NAME...]

The sessions are run in a scratch directory holding a link to the original's ``RASP_support``
(its library is loaded from ``RASP_support/rasplib.rasp`` relative to the working directory, as
in the original) and a copy of ``files/``, so ``load "files/x";`` finds ``files/x.rasp`` in
both REPLs. Records the original's commit in ``ORIGINAL_COMMIT``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BANNER_LINES = 2   # "RASP 0.1" and "running example is: hello"


def run_original(original: str, python: str, session_text: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(os.path.join(original, "RASP_support"), os.path.join(tmp, "RASP_support"))
        shutil.copytree(os.path.join(HERE, "files"), os.path.join(tmp, "files"))
        out = subprocess.run([python, "-m", "RASP_support"], input=session_text, cwd=tmp,
                             capture_output=True, text=True, timeout=600,
                             env={**os.environ, "NO_COLOR": "1"})
    if out.returncode != 0:
        raise SystemExit(f"the original REPL failed ({out.returncode}): {out.stderr}")
    lines = out.stdout.split("\n")
    if not lines[0].startswith("RASP "):
        raise SystemExit(f"unexpected banner: {lines[:2]}")
    return "\n".join(lines[BANNER_LINES:])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("original", help="checkout of tech-srl/RASP")
    ap.add_argument("--python", default=sys.executable,
                    help="a Python with antlr4-python3-runtime==4.9.1 and termcolor")
    ap.add_argument("names", nargs="*", help="sessions to regenerate (default: all)")
    a = ap.parse_args(argv)
    sessions = os.path.join(HERE, "sessions")
    names = a.names or sorted(f[:-5] for f in os.listdir(sessions) if f.endswith(".rasp"))
    for name in names:
        with open(os.path.join(sessions, name + ".rasp")) as f:
            text = f.read()
        expected = run_original(os.path.abspath(a.original), a.python, text)
        with open(os.path.join(sessions, name + ".out"), "w") as f:
            f.write(expected)
        print(f"{name}: {expected.count(chr(10))} lines")
    commit = subprocess.run(["git", "-C", a.original, "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    if commit:
        with open(os.path.join(HERE, "ORIGINAL_COMMIT"), "w") as f:
            f.write(commit + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
