"""A random differential of ``rasp`` against the ORIGINAL RASP REPL (not part of the suite: it
needs the original, see ``make_expected.py`` for how to set it up).

Generates sessions of random original-syntax statements (s-op expressions over tokens, indices,
length, selects, aggregates, selector widths, maps, ternaries, library calls; atoms; lists;
applications; the REPL's commands), runs each through both REPLs (piped) and compares them
statement by statement, error blocks normalised as in ``tests/test_compat_original.py``.
Prints the first differing statement of each differing session and a summary::

    python tests/compat/differential.py /tmp/RASP --python /tmp/origenv/bin/python --seeds 1-50
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)

from tests.test_compat_original import normalise  # noqa: E402


def session(seed: int, n: int = 25) -> str:
    """``n`` random statements (one per line)."""
    rnd = random.Random(seed)
    names: list[str] = []
    cmp_ops = ["==", "<", ">", "<=", ">=", "!="]

    def atom():
        return rnd.choice(["0", "1", "2", "3", "-1", "0.5", "2.5", '"l"', '"a"', '"h"', "True",
                           "False"])

    def sop(d=0):
        base = ["tokens", "indices", "length"] + [x for x in names if rnd.random() < 0.5]
        if d > 2 or rnd.random() < 0.3:
            return rnd.choice(base)
        a, k = sop(d + 1), rnd.randrange(12)
        return [
            lambda: f"({a} {rnd.choice(['+', '-', '*', '/', '%'])} {rnd.choice([atom(), sop(d + 1)])})",
            lambda: f"({a} {rnd.choice(cmp_ops[:5])} {rnd.choice([atom(), sop(d + 1)])})",
            lambda: f"aggregate(select({sop(d + 1)}, {sop(d + 1)}, {rnd.choice(cmp_ops)}), {a})",
            lambda: f"selector_width(select({sop(d + 1)}, {sop(d + 1)}, {rnd.choice(cmp_ops[:3])}))",
            lambda: f"round({a})",
            lambda: f"indicator({a} == {atom()})",
            lambda: f"({a} if {sop(d + 1)} > 1 else {rnd.choice([atom(), sop(d + 1)])})",
            lambda: f"not ({a} == {atom()})",
            lambda: f"{rnd.choice(['count', 'contains'])}({a}, {atom()})",
            lambda: f"aggregate(select(indices, indices, <=), {a})",
            lambda: rnd.choice(["average(", "sort(indices, "]) + f"{a})",
            lambda: f"aggregate(select({sop(d + 1)}, {atom()}, ==), {a}, {atom()})",
        ][k]()

    def stmt():
        k = rnd.randrange(14)
        if k < 5:
            name = rnd.choice(["a", "b", "c", "x", "y"])
            text = f"{name} = {sop()};"
            names.append(name)
            return text
        if k < 8:
            return f"{sop()};"
        if k == 8:
            return rnd.choice(['set example "hello"', 'set example "abcab"',
                               "set example [1, 2, 3]", "set example [3, 1, 1, 2]",
                               'set s-op example "xyz"', 'set selector example "ab"'])
        if k == 9:
            return rnd.choice(["full seq display on", "full seq display off", "examples off",
                               "examples on", "show example", "selector examples off",
                               "s-op examples on"])
        if k == 10:
            return f"select({sop()}, {sop()}, {rnd.choice(['==', '<'])});"
        if k == 11:
            return f"[{atom()}, {atom()}];"
        if k == 12:
            return f"({sop()})(\"{rnd.choice(['ab', 'hello', 'aab'])}\");"
        return f"{atom()} {rnd.choice(['+', '-', '*', '/', '==', '<'])} {atom()};"

    return "\n".join(stmt() for _ in range(n)) + "\n"


def pieces(text: str) -> list[str]:
    """The output of each input line (split at the prompts), errors normalised."""
    return ["\n".join(normalise(p)) for p in text.split(">> ")[1:]]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("original", help="checkout of tech-srl/RASP")
    ap.add_argument("--python", default=sys.executable,
                    help="a Python with antlr4-python3-runtime==4.9.1 and termcolor")
    ap.add_argument("--seeds", default="1-20", help="a range of seeds, e.g. 1-50")
    a = ap.parse_args(argv)
    lo, hi = (int(x) for x in a.seeds.split("-"))
    differing = 0
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(os.path.join(os.path.abspath(a.original), "RASP_support"),
                   os.path.join(tmp, "RASP_support"))
        env = {**os.environ, "PYTHONPATH": ROOT}
        for seed in range(lo, hi + 1):
            text = session(seed)
            orig = subprocess.run([a.python, "-m", "RASP_support"], input=text, text=True,
                                  capture_output=True, cwd=tmp, timeout=300).stdout
            orig = "\n".join(orig.split("\n")[2:])
            ours = subprocess.run([sys.executable, "-m", "rasp_cli.main"], input=text,
                                  text=True, capture_output=True, cwd=tmp, env=env,
                                  timeout=300).stdout
            src = text.split("\n")
            for k, (x, y) in enumerate(zip(pieces(ours), pieces(orig))):
                if x != y:
                    differing += 1
                    print(f"seed {seed}, statement {k + 1}: {src[k]}\n  ours:     {x!r}\n"
                          f"  original: {y!r}")
                    break
    print(f"{differing} of {hi - lo + 1} sessions differ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
