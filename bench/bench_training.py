"""Training benchmark (docs/benchmarks.md, "## Training").

For the default configuration (``analysis/training/configs.py``) on a task (default ``copy_unique``),
measures side by side in one run, for every positional encoding:

* training throughput: tokens per second and seconds per optimizer step over ``--steps`` steps
  (after 5 warm-up steps), with 1 torch thread and, with ``--threads 1,2``, 2 threads;
* the evaluation pass of a run (greedy decoding, ID + OOD lengths, the default sample count) of
  an untrained model (it never stops early, so this is an upper bound);
* the projected wall time of one default run = steps x s/step + evaluation;
* with ``--full-quick``, the measured wall time of one complete ``quick``-preset run per PE
  (what the report demo trains 13 of).

Writes ``bench/results/training.json`` and prints a table. Run:
``.venv/bin/python -m bench.bench_training`` (``--task``, ``--steps``, ``--threads``,
``--pes``, ``--full-quick``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from analysis.training import configs  # noqa: E402
from analysis.training.batches import make_step, step_loss  # noqa: E402
from analysis.training.evaluation import evaluate  # noqa: E402
from analysis.training.trainer import (autocast_context, make_optimizer,  # noqa: E402
                               resolve_spec, resolve_task, train)
from bench import cpu_model  # noqa: E402
from rasp_model import PE_NAMES, Transformer  # noqa: E402


#: the training-settings comparison (``--settings``): name -> TrainConfig overrides
SETTINGS = {"eager float32": {}, "torch_compile": {"torch_compile": True},
            "autocast bfloat16": {"autocast": "bfloat16"},
            "torch_compile + bfloat16": {"torch_compile": True, "autocast": "bfloat16"}}


def measure_pe(task, pe: str, steps: int, threads: int, preset: str = "default",
               settings: dict | None = None, with_eval: bool = True) -> dict:
    """Throughput of ``steps`` training steps of the resolved config for (task, pe), after 5
    warm-up steps (timed apart: ``warmup_s`` holds torch.compile's compile time).
    ``settings``: TrainConfig overrides (``torch_compile``, ``autocast``), applied as
    :func:`analysis.training.trainer.run_loop` applies them."""
    torch.set_num_threads(threads)
    torch._dynamo.reset()
    spec = resolve_spec(task, pe, 0, preset, config_overrides=settings or None)
    tr = spec.train
    lo, hi = spec.train_lengths
    lengths = [n for n in range(lo, hi + 1) if task.length_ok(n)]
    pairs = list(spec.eval_lengths)
    torch.manual_seed(0)
    model = Transformer(spec.model)
    fwd = torch.compile(model, dynamic=True) if tr.torch_compile else model
    opt = make_optimizer(model, tr)
    tokens = 0
    t0 = None
    w0 = time.perf_counter()
    for s in range(steps + 5):
        if s == 5:
            t0, tokens, c0 = time.perf_counter(), 0, time.process_time()
            warmup_s = t0 - w0
        batch = make_step(task, lengths, tr.batch_size, np.random.default_rng([0, s]),
                          spec.model.n_ctx, tr.position_offsets, tr.batching)
        with autocast_context(tr, "cpu"):
            loss, _ = step_loss(fwd, batch)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += batch.real_tokens             # real tokens only (padding not counted)
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    t1 = time.perf_counter()
    if with_eval:
        evaluate(model, task, pairs, samples=tr.eval_samples, batch_size=tr.eval_batch_size)
    eval_s = time.perf_counter() - t1
    sps = dt / steps
    return {"pe": pe, "threads": threads, "params": model.num_parameters(),
            "settings": settings or {}, "warmup_s": warmup_s, "cpu_s": cpu,
            "tokens_per_s": tokens / dt, "tokens_per_cpu_s": tokens / max(cpu, 1e-9),
            "s_per_step": sps, "eval_s": eval_s, "final_loss": float(loss.detach()),
            "run_steps": tr.steps, "projected_run_s": tr.steps * sps + eval_s}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="copy_unique")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--threads", default="1", help="comma-separated thread counts")
    ap.add_argument("--pes", default="all")
    ap.add_argument("--full-quick", action="store_true",
                    help="also time one complete quick-preset run per PE")
    ap.add_argument("--settings", action="store_true",
                    help="instead: eager float32 vs torch_compile vs bfloat16 autocast vs both, "
                         "side by side per PE (training steps only)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "training.json"))
    a = ap.parse_args(argv)
    if a.settings:
        return settings_main(a)
    task = resolve_task(a.task)
    pes = list(PE_NAMES) if a.pes == "all" else a.pes.split(",")
    rows = []
    for th in [int(t) for t in a.threads.split(",")]:
        for pe in pes:
            rows.append(measure_pe(task, pe, a.steps, th))
            r = rows[-1]
            print(f"{a.task:<12} {pe:<15} threads={th}  {r['tokens_per_s']:>9.0f} tok/s  "
                  f"{r['s_per_step'] * 1000:>7.1f} ms/step  eval {r['eval_s']:>6.1f} s  "
                  f"projected run {r['projected_run_s']:>6.0f} s", flush=True)
    quick = []
    if a.full_quick:
        with tempfile.TemporaryDirectory() as d:
            for pe in pes:
                t0 = time.perf_counter()
                res = train(task, pe, seed=0, preset="quick", out_dir=Path(d) / pe,
                            progress=False, verbose=False, threads=1)
                quick.append({"pe": pe, "wall_s": time.perf_counter() - t0,
                              "id_em": res.id_em, "ood_em": res.ood_em})
                print(f"quick run {a.task} {pe:<15} {quick[-1]['wall_s']:>6.1f} s  "
                      f"ID EM {res.id_em:.2f}  OOD EM {res.ood_em:.2f}", flush=True)
    result = {"task": a.task, "machine": {"cpu": cpu_model(), "cores": os.cpu_count(),
                                          "torch": torch.__version__,
                                          "load_avg": os.getloadavg()},
              "default_config": {**configs.MODEL_DEFAULTS, **configs.TrainConfig().to_dict()},
              "throughput": rows, "quick_runs": quick}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=2))
    print(f"wrote {a.out}")
    return 0


def settings_main(a) -> int:
    """``--settings``: the four precision/compile settings side by side, per PE."""
    task = resolve_task(a.task)
    pes = ["nope", "rope"] if a.pes == "all" else a.pes.split(",")
    th = int(a.threads.split(",")[0])
    rows = []
    print(f"| PE | setting | warm-up s (5 steps) | tokens/s | tokens/CPU-s | ratio to eager | "
          f"loss after {a.steps + 5} steps |\n|---|---|---|---|---|---|---|")
    for pe in pes:
        base = None
        for name, st in SETTINGS.items():
            r = measure_pe(task, pe, a.steps, th, settings=st, with_eval=False)
            r["setting"] = name
            base = base or r["tokens_per_s"]
            rows.append(r)
            print(f"| {pe} | {name} | {r['warmup_s']:.1f} | {r['tokens_per_s']:.0f} | "
                  f"{r['tokens_per_cpu_s']:.0f} | {r['tokens_per_s'] / base:.2f} | "
                  f"{r['final_loss']:.3f} |", flush=True)
    out = Path(a.out).with_name("training_settings.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"task": a.task, "steps": a.steps, "threads": th,
                               "machine": {"cpu": cpu_model(), "cores": os.cpu_count(),
                                           "torch": torch.__version__,
                                           "load_avg": os.getloadavg()},
                               "rows": rows}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
