"""Issue 29, items 1 and 2 (the parts outside training): absurd model shapes, deeply nested
files and huge REPL values end in one clear line before anything is allocated, never a
traceback or an out-of-memory kill."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def rasp(args, env=None, timeout=300, stdin=None):
    e = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "rasp_cli.main", *args], cwd=ROOT, env=e,
                          input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


# -- model shapes against the model budget ---------------------------------------------------

@pytest.mark.parametrize("cfg", [
    dict(n_layers=2, d_model=16, n_heads=2, d_head=8, d_mlp=32, d_vocab=7, n_ctx=10,
         pe="ape_learned"),
    dict(n_layers=3, d_model=12, n_heads=[3, 0, 1], d_head=4, d_mlp=[0, 5, 7], d_vocab=5,
         d_vocab_out=9, n_ctx=6, pe="t5", attn_bias=False, relative_attention_num_buckets=8),
    dict(n_layers=1, d_model=8, n_heads=1, d_head=8, d_mlp=16, d_vocab=5, n_ctx=4, pe="rope",
         normalization_type=None, mlp_bias=False, tied_embeddings=True),
    dict(n_layers=0, d_model=4, d_head=2, n_heads=1, d_mlp=1, d_vocab=3, n_ctx=3,
         pe="ape_sinusoidal"),
])
def test_parameter_count_is_the_built_models(cfg):
    from rasp_model import Transformer, TransformerConfig
    c = TransformerConfig(**cfg)
    assert c.parameter_count() == sum(p.numel() for p in Transformer(c).parameters())


@pytest.mark.parametrize("change, words", [
    (dict(d_model=10 ** 9), "model budget"),
    (dict(d_mlp=[10 ** 8, 1]), "model budget"),
    (dict(n_layers=100_000, n_heads=1, d_mlp=1), "n_layers=100,000"),
    (dict(n_layers=10 ** 15, n_heads=1, d_mlp=1), "n_layers=1,000,000,000,000,000"),
    (dict(d_model=10 ** 400), "model budget"),
    (dict(pe="t5", relative_attention_num_buckets=10 ** 12), "model budget"),
    (dict(pe="t5", relative_attention_num_buckets=0), "positive int"),
])
def test_absurd_model_shapes_are_refused_before_allocation(change, words):
    """Refused at once (no per-layer loop over 10^15 layers, no float overflow of 10^400)."""
    from rasp_model import TransformerConfig, TransformerConfigError
    base = dict(n_layers=2, d_model=16, n_heads=2, d_head=8, d_mlp=[32, 32], d_vocab=7,
                n_ctx=10)
    if "n_layers" in change or "d_mlp" in change:
        base.pop("d_mlp")
    t0 = time.perf_counter()
    with pytest.raises(TransformerConfigError, match=words):
        TransformerConfig(**{**base, **change})
    assert time.perf_counter() - t0 < 1.0


def test_the_model_budget_can_be_raised(monkeypatch):
    import rasp_model.config as config
    shape = dict(n_layers=2, d_model=256, d_mlp=1024, d_vocab=10, n_ctx=10)
    monkeypatch.setattr(config, "MAX_MODEL_BYTES", 2 ** 20)
    with pytest.raises(config.TransformerConfigError, match="1 MiB"):
        config.TransformerConfig(**shape)
    monkeypatch.setattr(config, "MAX_MODEL_BYTES", 64 * 2 ** 20)
    assert config.TransformerConfig(**shape).memory_bytes() < 64 * 2 ** 20


def test_train_with_a_huge_shape_is_one_line(tmp_path):
    for setting in ("d_model=1000000000", "n_layers=100000"):
        p = rasp(["train", "copy_unique", "--pe", "nope", "--steps", "1", "--set", setting,
                  "-o", str(tmp_path / "run")])
        assert p.returncode == 2, p.stderr[-800:]
        assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
        assert "model budget" in p.stderr


def test_a_weight_file_claiming_100000_layers_is_refused_before_building(tmp_path):
    """A small file whose metadata config says n_layers 100000 (it drove probe and report
    past 4 GB) is refused by the loader, which builds nothing first."""
    import torch
    from safetensors.torch import save_file
    from rasp_model import load_safetensors
    cfg = dict(n_layers=100_000, d_model=2, d_head=2, n_heads=1, d_mlp=1, d_vocab=3, n_ctx=4)
    path = tmp_path / "model.safetensors"
    save_file({"embed.W_E": torch.zeros(3, 2)}, str(path),
              metadata={"config": json.dumps(cfg), "format": "rasp-lab-transformer"})
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="n_layers=100,000 would need more than the model"):
        load_safetensors(path)
    assert time.perf_counter() - t0 < 2.0


# -- REPL and run values: displayable integers, bounded collections ---------------------------

def _limited(code: str, mb: int = 1500) -> subprocess.CompletedProcess:
    """Run ``code`` under an address-space cap (resource.setrlimit) in a fresh interpreter."""
    pre = ("import resource\n"
           f"resource.setrlimit(resource.RLIMIT_AS, ({mb} * 2**20, {mb} * 2**20))\n")
    return subprocess.run([sys.executable, "-c", pre + code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_a_legal_big_integer_is_displayed_in_full(tmp_path):
    """``2 ^ 20000`` (6,021 digits, within MAX_INT_BITS) is printed, not a ValueError from
    Python's 4,300-digit conversion limit; a literal above MAX_INT_BITS is one line."""
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)          # this test's own conversions (restored below)
    try:
        _big_integers(tmp_path)
    finally:
        sys.set_int_max_str_digits(old)


def _big_integers(tmp_path):
    f = tmp_path / "big.rasp"
    f.write_text("x = 2 ^ 20000;\ny = " + "7" * 20000 + ";\nz = " + "1" * 40000 + ";\n")
    p = rasp(["run", str(f), "--name", "x"])
    assert p.returncode == 2 and "40000 digits" in p.stderr and "Traceback" not in p.stderr
    f.write_text("x = 2 ^ 20000;\ny = " + "7" * 20000 + ";\n")
    p = rasp(["run", str(f), "--name", "x"])
    assert p.returncode == 0, p.stderr[-500:]
    assert p.stdout.strip() == f"x = {2 ** 20000!r}"
    p = rasp(["run", str(f), "--name", "y", "--json"])
    assert p.returncode == 0 and json.loads(p.stdout)["output"] == int("7" * 20000)
    p = rasp([], stdin="x = 2 ^ 20000;\nx;\n")
    assert "Traceback" not in p.stdout + p.stderr and str(2 ** 20000)[-50:] in p.stdout


def test_many_large_strings_in_one_statement_are_refused_under_a_memory_cap():
    """The fault test's program passed 4 GB in 6 s: 5,000 distinct strings of a million
    characters each (each within MAX_COLLECTION). Under a 1.5 GB cap it is refused with the
    memory budget's one line, the session survives, and a list of 5,000 references to one
    string (40 KB) is still built."""
    code = ("from rasp.repl.session import Session\n"
            "out = []\n"
            "s = Session(output=out.append)\n"
            "s.execute('s = \"a\" * 999999;')\n"
            "try:\n"
            "    s.execute('t = [s + \"b\" for i in range(5000)];')\n"
            "except Exception as e:\n"
            "    print(type(e).__name__, str(e).splitlines()[0])\n"
            "s.execute('u = [s for i in range(5000)];')\n"
            "print(len(s.env['u']), 't' in s.env)\n")
    p = _limited(code)
    assert p.returncode == 0, p.stderr[-800:]
    first, second = p.stdout.strip().splitlines()
    assert first.startswith("RASPResourceError") and "memory budget" in first
    assert second == "5000 False"


def test_the_statement_budget_follows_the_memory_budget_variable(tmp_path):
    f = tmp_path / "loop.rasp"
    f.write_text('s = "a" * 100000;\nt = [s + "b" for i in range(300)];\nn = len(t);\n')
    small = rasp(["run", str(f), "--name", "n"], env={"RASP_MEMORY_BUDGET_MB": "16"})
    assert small.returncode == 2 and "16 MiB" in small.stderr and "Traceback" not in small.stderr
    big = rasp(["run", str(f), "--name", "n"], env={"RASP_MEMORY_BUDGET_MB": "64"})
    assert big.returncode == 0 and big.stdout.strip() == "n = 300"


def test_a_value_too_big_to_write_out_is_refused_before_printing(tmp_path):
    """40 KB in memory but 5 GB as text: ``rasp run --name u`` (and --json) refuse in one line
    instead of a MemoryError traceback."""
    f = tmp_path / "u.rasp"
    f.write_text('s = "a" * 999999;\nu = [s for i in range(5000)];\n')
    for extra in ([], ["--json"]):
        p = rasp(["run", str(f), "--name", "u", *extra])
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-500:]
        assert "written out" in p.stderr and p.stdout == ""


def test_written_size_counts_shared_elements_and_stops_early():
    from rasp.repl.display import written_size
    s = "a" * 1000
    for v in ([s, s], [-5, 2 ** 300, -1.2345678901234567e-308, True, None, "x"],
              {"k": [1, [2, [3]]], 7: "abc"}, [[[]]], 10 ** 40):
        assert len(repr(v)) <= written_size(v, 10 ** 9) <= 2 * len(repr(v)) + 10, v
    deep: list = []
    for _ in range(100_000):
        deep = [deep]                               # no recursion limit
    assert written_size(deep, 10 ** 9) > 100_000
    t0 = time.perf_counter()
    assert written_size([s] * 10 ** 6, 10 ** 6) > 10 ** 6       # stops after ~1,000 elements
    assert time.perf_counter() - t0 < 0.5


# -- deeply nested and unbounded files ---------------------------------------------------------

NESTED = "[" * 100_000          # json and tomllib raise RecursionError on it


def test_deeply_nested_run_files_are_refused_in_one_line(tmp_path):
    from analysis.training.runs import RunDirError, read_json
    f = tmp_path / "config.json"
    f.write_text(NESTED)
    with pytest.raises(RunDirError, match="nested too deeply"):
        read_json(f, "run configuration")
    f.write_text('{"eval_lengths": [[1e400, "id"]]}')        # parsed as inf before
    with pytest.raises(RunDirError, match="non-finite number 1e400"):
        read_json(f, "run configuration")
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(NESTED)
    (run / "DONE").write_text("{}")
    p = rasp(["probe", str(run)])
    assert p.returncode == 2 and "Traceback" not in p.stderr and "nested too deeply" in p.stderr


def test_a_run_spec_with_an_infinite_length_is_a_config_error():
    from analysis.training.configs import ConfigError, RunSpec
    d = {"task": "t", "pe": "nope", "seed": 0, "train_lengths": [1, 2], "model": {},
         "train": {}, "eval_lengths": [[float("inf"), "id"]]}
    with pytest.raises(ConfigError):
        RunSpec.from_dict(d)


def test_nested_json_elsewhere_is_one_line(tmp_path):
    from analysis.evidence.claims import ClaimError, load_runs
    from rasp_model import load_safetensors
    import torch
    from safetensors.torch import save_file
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(NESTED)
    (run / "accuracy.json").write_text("[]")
    with pytest.raises(ClaimError, match="nested too deeply"):
        load_runs([run])
    model = tmp_path / "model.safetensors"
    save_file({"embed.W_E": torch.zeros(3, 2)}, str(model),
              metadata={"config": NESTED, "format": "rasp-lab-transformer"})
    with pytest.raises(ValueError, match="nested too deeply"):
        load_safetensors(model)
    examples = tmp_path / "ex.jsonl"
    examples.write_text('{"prompt": [1], "answer": ' + NESTED + "\n")
    p = rasp(["search", "--examples", str(examples), "--budget", "2M"])
    assert p.returncode == 2 and "Traceback" not in p.stderr and "nested too deeply" in p.stderr
    p = rasp(["train", "copy_unique", "--pe", "nope", "--steps", "1", "-o", str(tmp_path / "t"),
              "--set", "steps=" + NESTED])
    assert p.returncode == 2 and "Traceback" not in p.stderr and "nested too deeply" in p.stderr


@pytest.mark.parametrize("text, words", [
    ("lr = " + NESTED + "\n", "nested too deeply"),
    ("".join(f"{k} = [1, 2, 3, 4, 5, 6, 7, 8]\n" for k in
             ("n_layers", "d_model", "d_mlp", "steps", "batch_size", "warmup_steps", "d_head",
              "n_heads", "eval_samples", "log_every")), "1,073,741,824 configurations"),
    ("steps = 1\n" + "# padding\n" * 200_000, "larger than 1024 KiB"),
])
def test_bad_sweep_files_are_refused_before_expanding(tmp_path, text, words):
    from analysis.training.sweep import SweepError, load_sweep
    f = tmp_path / "sweep.toml"
    f.write_text(text)
    t0 = time.perf_counter()
    with pytest.raises(SweepError, match=words):
        load_sweep(f)
    assert time.perf_counter() - t0 < 2.0


def test_a_sweep_file_that_never_ends_is_refused():
    from analysis.training.sweep import SweepError, load_sweep
    with pytest.raises(SweepError, match="not a regular file"):
        load_sweep("/dev/zero")


@pytest.mark.parametrize("args, words", [
    (["verify", "parity", "--max-length", "1000000000"], "at most 1,000"),
    (["verify", "copy_unique", "--samples", "99999999999999999999999"], "at most 1,000"),
    (["score", "copy_unique", "--max-length", "1000000000"], "at most 1,000"),
])
def test_verify_and_score_sizes_are_bounded(args, words):
    """One flag of 10^9 ran for minutes (verify, score) before the bound."""
    t0 = time.perf_counter()
    p = rasp(args, timeout=60)
    assert p.returncode == 2 and words in p.stderr and "Traceback" not in p.stderr
    assert time.perf_counter() - t0 < 30
