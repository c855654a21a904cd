"""`rasp compile FILE --name NAME --vocab a,b,c --max-len N [--causal] [-o DIR] [--verify K]
[--raising refuse|declare]`:
compile an s-op of a .rasp file into transformer weights.

Prints the size table (layers, heads, d_model, d_head, MLP hidden, parameters, non-zero
parameters, compile time). ``-o DIR`` writes ``DIR/model.safetensors`` (TransformerLens names and
shapes, with ``W_U``) and ``DIR/model.json`` (config, vocabulary, residual labels, output
encoding); ``compiler.load_compiled(DIR)`` loads it back. It also writes the TransformerLens
export ``DIR/tl_config.json`` + ``DIR/tl_model.safetensors`` (heads and MLP units zero-padded to
uniform widths, zero biases, TransformerLens's config names), which ``HookedTransformer`` loads
strictly; see docs/compiler.md or ``compiler.to_transformer_lens``. Compilation itself verifies
the model against the interpreter (exhaustively for small input spaces, else 8 random inputs per
length) and refuses one that differs; ``--verify K`` repeats that check with K random inputs per
length 1..N.

A file whose selects are all causal (``#!causal``) is compiled to a causal (decoder-only)
model even without ``--causal``.

A program on which the interpreter raises for some input of the vocabulary and lengths is
refused with that input and the operation (exit 2); ``--raising declare`` compiles it with
those inputs declared out of contract (``stats.raising_inputs`` in ``model.json``; the model
raises on them as the interpreter does).

Exit codes: 0 success, 1 ``--verify`` found a mismatch, 2 bad input (missing file, unknown
name, bad vocabulary / length, a construct the compiler refuses).
"""

from __future__ import annotations

import os

from rasp_cli.common import UsageError, output_dir, seed_flag, whole_number
from rasp.ir import Select, SOp, topological_order
from rasp.repl.session import run_source
import compiler

#: the one-line help of `rasp compile` (shown by `rasp --help` without importing the command)
HELP = 'compile an s-op of a .rasp file into transformer weights'


def add_arguments(p) -> None:
    p.description = (
        "Compile an s-op into the weights of a transformer (safetensors + JSON), "
        "print its size, optionally verify it against the interpreter. Exit 0 ok, "
        "1 verification mismatch, 2 bad input.")
    p.epilog = (
        "TransformerLens: -o DIR also writes DIR/tl_config.json and "
        "DIR/tl_model.safetensors, which TransformerLens loads strictly: "
        "cfg = json.load(open('DIR/tl_config.json')); cfg['dtype'] = getattr(torch, "
        "cfg['dtype']); model = HookedTransformer(HookedTransformerConfig(**cfg)); "
        "model.load_state_dict(safetensors.torch.load_file('DIR/tl_model.safetensors'), "
        "strict=True). Token ids: BOS 0, vocabulary values 1..n in --vocab order, PAD "
        "n+1 (DIR/model.json). In Python: compiler.to_transformer_lens(model).")
    p.add_argument("file", metavar="FILE", help="the .rasp program")
    p.add_argument("--name", "-n", required=True, help="the s-op to compile")
    p.add_argument("--vocab", required=True, metavar="a,b,c",
                   help="the input token values, comma-separated (as rasp.evaluate receives "
                        "them: strings; tokens_int converts)")
    p.add_argument("--max-len", type=int, required=True, metavar="N",
                   help="the longest input the model handles")
    p.add_argument("--causal", action="store_true",
                   help="run the file in RASP-L causal mode and compile a decoder-only model")
    p.add_argument("-o", "--out", metavar="DIR", default=None,
                   help="write DIR/model.safetensors and DIR/model.json, and the "
                        "TransformerLens export DIR/tl_config.json + DIR/tl_model.safetensors")
    p.add_argument("--verify", type=int, default=0, metavar="K",
                   help="after compiling (which already checks 8 random inputs per length, or "
                        "all inputs when few), check K random inputs per length against the "
                        "interpreter")
    p.add_argument("--seed", type=int, default=0, help="seed of --verify's inputs")
    p.add_argument("--raising", choices=["refuse", "declare"], default="refuse",
                   help="a program on which the interpreter raises for some input of --vocab "
                        "and lengths 1..N: refuse it, naming the input and the operation "
                        "(default, exit 2), or compile it with those inputs declared out of "
                        "contract (listed in model.json's stats; the model raises there too)")


def _parse_vocab(text: str) -> list[str]:
    items = [s.strip() for s in (text or "").split(",")]
    items = [s for s in items if s]
    if not items:
        raise UsageError("--vocab needs at least one token value, e.g. --vocab a,b,c")
    return list(dict.fromkeys(items))


def verify(cm, sop, k: int, seed: int = 0) -> tuple[int, int, str | None]:
    """The compiler's verification gate with ``k`` random inputs per length
    (:func:`compiler.verification.verify_compiled`; exhaustive when the input space is small).
    Returns ``(mismatches, total, first mismatch description or None)``."""
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from compiler.verification import verify_compiled
    res = verify_compiled(cm, sop, samples=k, seed=seed, progress=True, token_budget=None)
    return res.mismatches, res.checked, res.counterexample


def run(args) -> int:
    """Compile ``args.name`` of ``args.file``; returns 0, or 1 on a verification mismatch."""
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from rasp_model.files import read_text

    if not os.path.isfile(args.file):
        raise UsageError(f"no such file: {args.file}")
    if args.max_len < 1:
        raise UsageError("--max-len must be a positive integer")
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.prediction.verify import MAX_SAMPLES
    whole_number(args.verify, "--verify", 0, MAX_SAMPLES)
    seed_flag(args.seed)
    vocab = _parse_vocab(args.vocab)
    if args.out:
        output_dir(args.out)                 # refuse a bad -o before compiling
    env = run_source(read_text(args.file, "a RASP program"), filename=args.file,
                     causal=args.causal)              # the one reader: a regular file, capped
    if args.name not in env:
        raise UsageError(f"unknown name {args.name!r} in {args.file}")
    sop = env[args.name]
    if not isinstance(sop, SOp):
        raise UsageError(f"{args.name!r} is not an s-op (it is {type(sop).__name__})")
    selects = [n for n in topological_order(sop) if isinstance(n, Select)]
    causal = args.causal or (bool(selects) and all(s.causal for s in selects))
    cm = compiler.compile_program(sop, vocab, args.max_len, causal=causal,
                                  raising=args.raising)
    print(f"compiled {args.name} from {args.file} (vocab {','.join(vocab)}, max_len "
          f"{args.max_len}, {'causal' if causal else 'bidirectional'})")
    print(cm.size_table())
    if args.out:
        cm.save(args.out)
        print(f"wrote {os.path.join(args.out, 'model.safetensors')}, "
              f"{os.path.join(args.out, 'model.json')} and, for TransformerLens, "
              f"{os.path.join(args.out, 'tl_config.json')} + "
              f"{os.path.join(args.out, 'tl_model.safetensors')}")
    if args.verify:
        bad, total, first = verify(cm, sop, args.verify, args.seed)
        print(f"verify: {total - bad}/{total} inputs equal to the interpreter"
              + (f"; first mismatch: {first}" if first else ""))
        return 1 if bad else 0
    return 0
