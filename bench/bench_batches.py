"""Padding-free batches benchmark (docs/benchmarks.md, "## Padding-free batches").

Trains the same model for ``--steps`` optimizer steps from the same initial weights on the same
examples (the batch of step s depends only on (seed, s)) once per batch layout, side by side in
one run, each step the trainer's own (``optimizer_step`` of a ``SingleStepper``): ``padded`` (one batch padded to the longest example, the old behaviour),
``bucketed:k`` (at most k forward passes over groups of similar length) and ``packed`` (whole
examples packed into rows, segment-masked attention) — see ``analysis.training.batches``. Reports CPU seconds per step, real
tokens/s (padding not counted), the padding fraction of the processed tokens, and the loss after
the last step (equal across settings up to float rounding: the gradient is the padded batch's).

Writes ``bench/results/batches.json``. Run:
``.venv/bin/python -m bench.bench_batches`` (``--task``, ``--pe``, ``--steps``, ``--layouts``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from analysis.training import batches  # noqa: E402
from analysis.training.stepper import SingleStepper, batch_maker, optimizer_step  # noqa: E402
from analysis.training.trainer import resolve_spec, resolve_task  # noqa: E402
from bench import cpu_model  # noqa: E402
from rasp_model import Transformer  # noqa: E402


def measure(task, pe: str, steps: int, layout: str, preset: str, offsets: str) -> dict:
    """``steps`` steps of the trainer's own step (:func:`analysis.training.stepper.optimizer_step`
    of a ``SingleStepper``: the run's model, learning-rate schedule and clipping) for the
    run of ``preset`` with ``batching`` and ``position_offsets`` set from ``layout`` /
    ``offsets``; ``bucketed:k`` makes the batches with at most k passes (the trainer's
    ``bucketed`` is k = 4)."""
    batching, _, k = layout.partition(":")
    torch.set_num_threads(1)
    spec = resolve_spec(task, pe, 0, preset, config_overrides={"batching": batching,
                                                              "position_offsets": offsets})
    model = Transformer(spec.model)
    model.reset_parameters(seed=0)
    stepper = SingleStepper.fresh(spec, task, model, make=batch_maker(spec, task, int(k or 4)))
    stepper.train_mode()
    real = padded = 0
    loss = None
    c0, w0 = time.process_time(), time.time()
    for s in range(steps):
        st, _, loss = optimizer_step(stepper, s)
        real += st.real_tokens
        padded += st.padded_tokens
    cpu, wall = time.process_time() - c0, time.time() - w0
    return {"layout": layout, "steps": steps, "cpu_s_per_step": cpu / steps,
            "wall_s_per_step": wall / steps, "real_tokens_per_cpu_s": real / cpu,
            "padding_fraction": 1 - real / padded, "final_loss": float(loss.detach()[0])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="sort_unique")
    ap.add_argument("--pe", default="nope")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--layouts", default="padded,bucketed:2,bucketed:4,packed")
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--offsets", default="none", choices=batches.OFFSET_PROTOCOLS)
    args = ap.parse_args(argv)
    task = resolve_task(args.task)
    rows = []
    print(f"{args.task} / {args.pe}, preset {args.preset}, {args.steps} steps, 1 thread")
    print("layout        CPU ms/step  real tok/CPU-s  padding  final loss  speed-up")
    for b in args.layouts.split(","):
        r = measure(task, args.pe, args.steps, b, args.preset, args.offsets)
        rows.append(r)
        base = rows[0]["cpu_s_per_step"]
        print(f"{b:12s}  {1000 * r['cpu_s_per_step']:11.2f}  {r['real_tokens_per_cpu_s']:14.0f}  "
              f"{r['padding_fraction']:7.1%}  {r['final_loss']:10.5f}  "
              f"{base / r['cpu_s_per_step']:7.2f}x", flush=True)
    out = ROOT / "bench" / "results" / "batches.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"task": args.task, "pe": args.pe, "preset": args.preset,
                               "cpu": cpu_model(), "torch": torch.__version__,
                               "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
