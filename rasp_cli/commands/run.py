"""`rasp run FILE --name NAME --input WORD [--json] [--causal]`: run a .rasp file and evaluate one
of its names on an input.

WORD is either a string, split into characters (``hello``), or a list literal (``[1,2,3]``,
``["a","b"]``) read with :func:`ast.literal_eval` (never ``eval``). Output::

    reverse("hello") = [o, l, l, e, h] (strings)

or with ``--json`` one object ``{"name", "input", "output"}`` where ``output`` is a list for an
s-op, a 0/1 ``[query][key]`` matrix for a selector and the value itself for an atom, list or dict.
A missing file, unknown name or bad input is a usage error (exit 2, one message on stderr).
"""

from __future__ import annotations

import ast
import json
import os

import numpy as np

from rasp.ir import Selector, SOp
from rasp_cli.common import UsageError
from rasp import limits
from rasp.errors import RASPResourceError
from rasp.interpreter import evaluate
from rasp.repl.display import format_selector_value, format_sop_value, written_size
from rasp.repl.session import run_file
from rasp.values import kind_of

#: the one-line help of `rasp run` (shown by `rasp --help` without importing the command)
HELP = 'run a .rasp file and evaluate a name on an input'


def add_arguments(p) -> None:
    p.description = (
        "Run a .rasp program and evaluate NAME on an input: an s-op gives its "
        "values per position, a selector its [query, key] matrix, an atom itself.")
    p.add_argument("file", metavar="FILE", help="the .rasp program")
    p.add_argument("--name", "-n", default="out",
                   help="the name to evaluate (default: out, the last bare expression)")
    p.add_argument("--input", "-i", default="hello", metavar="WORD",
                   help='the input: a string split into characters, or a list literal such as '
                        '[1,2,3] (default: hello)')
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--causal", action="store_true",
                   help="run the file in RASP-L causal mode (every select is causal)")


def parse_input(word: str) -> list:
    """The input tokens of WORD: a list literal (``[1, 2, 3]``; atoms only) or the characters
    of a string. Raises ``UsageError`` for an empty or malformed input."""
    text = word.strip()
    if text.startswith("["):
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise UsageError(f"cannot read the input {word!r} as a list literal") from None
        if not isinstance(value, list):
            raise UsageError(f"the input {word!r} is not a list")
        for v in value:
            if not isinstance(v, (bool, int, float, str)):
                raise UsageError(f"input list elements must be numbers, strings or booleans, "
                                 f"got {v!r}")
        seq = value
    else:
        seq = list(word)
    if not seq:
        raise UsageError("the input is empty; RASP evaluates non-empty sequences")
    return seq


def _jsonable(v):
    if isinstance(v, (np.generic,)):
        return v.item()
    if isinstance(v, np.ndarray):
        return [_jsonable(x) for x in v.tolist()]
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    return repr(v)


def _show_input(word: str, seq: list) -> str:
    if word.strip().startswith("["):
        return word.strip()
    return json.dumps("".join(seq), ensure_ascii=False)


def run(args) -> int:
    """Run ``args.file`` and print ``args.name`` evaluated on ``args.input``; returns 0."""
    if not os.path.isfile(args.file):
        raise UsageError(f"no such file: {args.file}")
    seq = parse_input(args.input)
    env = run_file(args.file, causal=args.causal)
    if args.name not in env:
        own = [n for n in env.own_names() if not n.startswith("_")]
        raise UsageError(f"unknown name {args.name!r} in {args.file}; defined: "
                         + (", ".join(own) if own else "(nothing)"))
    value = env[args.name]
    kind = kind_of(value)
    if isinstance(value, (SOp, Selector)):
        out = np.asarray(evaluate(value, [seq], causal=True if args.causal else None))[0]
        if isinstance(value, Selector):
            output = out.astype(int).tolist()
            shown = "\n" + format_selector_value(out, keys=seq, queries=seq)
        else:
            output = out.tolist()
            shown = " " + format_sop_value(out)
        if args.json:
            print(json.dumps({"name": args.name, "input": seq, "output": _jsonable(output)},
                             ensure_ascii=False))
        else:
            print(f"{args.name}({_show_input(args.input, seq)}) ={shown}")
        return 0
    if kind == "function":
        raise UsageError(f"{args.name!r} is a function; give the name of an s-op, selector "
                         "or value")
    size = written_size(value, limits.MEMORY_BUDGET_BYTES)
    if size > limits.MEMORY_BUDGET_BYTES:
        raise RASPResourceError(
            f"{args.name!r} would take more than {limits.MEMORY_BUDGET_BYTES / 2**20:.0f} MiB "
            f"written out, the memory budget (RASP_MEMORY_BUDGET_MB); print a part of it "
            f"(an index, len(...))")
    if args.json:
        print(json.dumps({"name": args.name, "input": seq, "output": _jsonable(value)},
                         ensure_ascii=False))
    else:
        print(f"{args.name} = {_jsonable(value)!r}")
    return 0
