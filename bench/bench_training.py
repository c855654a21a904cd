"""Training benchmark (docs/benchmarks.md, "## Training").

For the default configuration (``analysis/configs.py``) on a task (default ``copy_unique``),
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

from analysis import configs  # noqa: E402
from analysis.batches import make_step, step_loss  # noqa: E402
from analysis.evaluation import evaluate  # noqa: E402
from analysis.training import (make_optimizer, resolve_spec,  # noqa: E402
                               resolve_task, train)
from bench import cpu_model  # noqa: E402
from model import PE_NAMES, Transformer  # noqa: E402


def measure_pe(task, pe: str, steps: int, threads: int, preset: str = "default") -> dict:
    """Throughput of ``steps`` training steps of the resolved config for (task, pe)."""
    torch.set_num_threads(threads)
    spec = resolve_spec(task, pe, 0, preset)
    tr = spec.train
    lo, hi = spec.train_lengths
    lengths = [n for n in range(lo, hi + 1) if task.length_ok(n)]
    pairs = list(spec.eval_lengths)
    torch.manual_seed(0)
    model = Transformer(spec.model)
    opt = make_optimizer(model, tr)
    tokens = 0
    t0 = None
    for s in range(steps + 5):
        if s == 5:
            t0, tokens = time.perf_counter(), 0
        batch = make_step(task, lengths, tr.batch_size, np.random.default_rng([0, s]),
                          spec.model.n_ctx, tr.position_offsets, tr.batching)
        loss, _ = step_loss(model, batch)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += batch.real_tokens             # real tokens only (padding not counted)
    dt = time.perf_counter() - t0
    t1 = time.perf_counter()
    evaluate(model, task, pairs, samples=tr.eval_samples, batch_size=tr.eval_batch_size)
    eval_s = time.perf_counter() - t1
    sps = dt / steps
    return {"pe": pe, "threads": threads, "params": model.num_parameters(),
            "tokens_per_s": tokens / dt, "s_per_step": sps, "eval_s": eval_s,
            "run_steps": tr.steps, "projected_run_s": tr.steps * sps + eval_s}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="copy_unique")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--threads", default="1", help="comma-separated thread counts")
    ap.add_argument("--pes", default="all")
    ap.add_argument("--full-quick", action="store_true",
                    help="also time one complete quick-preset run per PE")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "training.json"))
    a = ap.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
