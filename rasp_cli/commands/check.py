"""`rasp check FILE [--name NAME] [--json] [--causal] [--vocab a,b,c] [--max-len N]`: measure
the s-ops of a .rasp file and check that they are valid RASP-L.

For each s-op (NAME, or every s-op the file defines when ``--name`` is absent: library names
and private names starting with ``_`` are skipped) prints its measures (length, attention /
MLP ops, layers, heads per layer; ``rasp.analyses.measures``) and its RASP-L verdict (``rasp.analyses.raspl``):
every violation with its rule, operation and ``file:line:col``. Rule 2 (int8 values) is
checked when ``--vocab`` and ``--max-len`` are given, otherwise reported undecided.

``--json`` prints one JSON list with an object per name:
``{"name", "measures": {...}, "raspl": {"valid", "violations", ...}}``.

Exit codes: 0 every checked s-op is valid RASP-L, 1 at least one is not, 2 bad input (missing
file, unknown name, syntax error, bad ``--vocab`` / ``--max-len``).
"""

from __future__ import annotations

import json
import os

from rasp.ir import Indices, Selector, SOp, Tokens
from rasp_cli.common import UsageError
from rasp.repl.session import run_file

#: the one-line help of `rasp check` (shown by `rasp --help` without importing the command)
HELP = "measure a .rasp file's s-ops and check they are valid RASP-L"


def add_arguments(p) -> None:
    p.description = (
        "Print the measures (length, layers, heads) and the RASP-L verdict "
        "(rules 1-5, each violation with rule, operation and line:column) of the "
        "s-ops defined in a .rasp file. Exit 0 all valid, 1 some invalid, 2 bad "
        "input.")
    p.add_argument("file", metavar="FILE", help="the .rasp program")
    p.add_argument("--name", "-n", action="append", default=None,
                   help="the s-op to check (repeatable; default: every s-op the file defines)")
    p.add_argument("--json", action="store_true", help="print a JSON list of objects")
    p.add_argument("--causal", action="store_true",
                   help="run and check the file in RASP-L causal mode (every select causal)")
    p.add_argument("--vocab", metavar="a,b,c", default=None,
                   help="the input token values, comma-separated (for rule 2, int8 values)")
    p.add_argument("--max-len", type=int, default=None, metavar="N",
                   help="the largest input length (for rules 2 and 5)")


def parse_vocab(text: str | None) -> list[str] | None:
    """The vocabulary of ``--vocab``: comma-separated token values (kept as strings, as
    ``rasp.evaluate`` receives characters; ``tokens_int`` converts them). Raises UsageError for
    an empty vocabulary."""
    if text is None:
        return None
    items = [s.strip() for s in text.split(",")]
    items = [s for s in items if s]
    if not items:
        raise UsageError("--vocab needs at least one token value, e.g. --vocab a,b,c")
    return list(dict.fromkeys(items))


def check_names(env, names: list[str] | None, vocab=None, max_len=None, causal=False,
                filename: str = "FILE") -> list[dict]:
    """Measure and check the named s-ops of an environment (every own s-op when ``names`` is
    None). Returns one dict per name: ``name``, ``measures`` (:class:`~rasp.analyses.measures.Measures`),
    ``report`` (:class:`~rasp.analyses.raspl.RASPLReport`). Raises UsageError for an unknown name, a name
    that is not an s-op or selector, or a file without s-ops."""
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from rasp.analyses.measures import measure
    from rasp.analyses.raspl import check

    if names is None:
        names = [n for n in env.own_names()
                 if not n.startswith("_") and isinstance(env[n], SOp)
                 and not isinstance(env[n], (Tokens, Indices))]   # `tokens = tokens_int;`
        if not names:
            raise UsageError(f"{filename} defines no s-op to check")
    out = []
    for name in names:
        if name not in env:
            own = [n for n in env.own_names() if not n.startswith("_")]
            raise UsageError(f"unknown name {name!r} in {filename}; defined: "
                             + (", ".join(own) if own else "(nothing)"))
        value = env[name]
        if not isinstance(value, (SOp, Selector)):
            raise UsageError(f"{name!r} is not an s-op (it is {type(value).__name__}); "
                             "give the name of an s-op")
        m = measure(value)
        rep = check(value, vocab=vocab, max_seq_len=max_len, causal=True if causal else None)
        out.append({"name": name, "measures": m, "report": rep})
    return out


def _text(item) -> str:
    m, rep = item["measures"], item["report"]
    heads = "/".join(str(h) for h in m.heads_per_layer) or "-"
    lines = [f"{item['name']}: length {m.length}, attention ops {m.attention_ops}, "
             f"MLP ops {m.mlp_ops}, layers {m.layers}, heads per layer {heads}"]
    lines += ["  " + line for line in rep.format().splitlines()]
    return "\n".join(lines)


def run(args) -> int:
    """Run ``args.file`` and check its s-ops; returns 0 (all valid) or 1 (some invalid)."""
    if not os.path.isfile(args.file):
        raise UsageError(f"no such file: {args.file}")
    if args.max_len is not None and args.max_len < 1:
        raise UsageError("--max-len must be a positive integer")
    vocab = parse_vocab(args.vocab)
    env = run_file(args.file, causal=args.causal)
    items = check_names(env, args.name, vocab=vocab, max_len=args.max_len,
                        causal=args.causal, filename=args.file)
    if args.json:
        print(json.dumps([{"name": it["name"], "measures": it["measures"].to_dict(),
                           "raspl": it["report"].to_dict()} for it in items],
                         ensure_ascii=False, indent=None))
    else:
        print("\n".join(_text(it) for it in items))
    return 0 if all(it["report"].valid for it in items) else 1
