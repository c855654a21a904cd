"""Runs per GPU-minute of stacked training (issue 35; docs/benchmarks.md, "Stacked training").

On a CUDA device, at the demo size (preset ``demo``: 2 layers, d_model 64, batch 32; sort_unique,
NoPE), for each stack size of ``--stacks`` (default 1, 16, 64, 256, 1024): one
:class:`analysis.training.stacked.StackStepper` of M fresh members (the path ``train_group``
takes: batches made ahead by the background producer, static shapes, the whole step captured as
CUDA graphs unless ``--no-capture``), stepped by the trainer's own
:func:`analysis.training.stepper.optimizer_step`, runs ``--warmup`` untimed steps (capture of
the shapes met) and ``--steps`` timed steps (``torch.cuda.synchronize`` around the timer);
then the stacked evaluation of the M members (greedy decoding of the preset's test set). Reported per M:
ms per step, ms per member-step, evaluation seconds, and

    runs_per_gpu_minute = 60 * M / (run_steps * s_per_step + eval_s)

with ``run_steps`` the preset's 3,000. ``--main-job`` also trains the main job's 35 runs
(sort_unique x 6 PEs x 5 seeds, learned APE with random offsets, plus copy_repeat NoPE x 5, the
demo preset) through the grid in this process (``run_grid(serial=True)``, stacked by
``auto_stack``) and reports its wall seconds.

Writes JSON (``--out``, default ``bench/results/gpu_stack.json``) with ``"device"``, the GPU
name and per stack ``runs_per_gpu_minute``. Runs on a CPU too (``--device cpu``; timings are
then CPU wall time, no capture); ``--smoke`` shrinks everything (a tiny model, stacks 1 and 3,
a few steps, 3 main-job runs) for a test of the script itself, not a measurement.

Run (on the GPU machine): ``python -m bench.bench_gpu_stack --main-job``
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

import torch  # noqa: E402

from analysis.training import stacked, trainer  # noqa: E402
from analysis.training.evaluation import eval_set  # noqa: E402
from analysis.training.stepper import Member, optimizer_step  # noqa: E402
from rasp_model import PE_NAMES, Transformer  # noqa: E402

#: ``--smoke``: a model and run small enough for a CPU test of this script
SMOKE = {"n_layers": 1, "d_model": 16, "d_head": 8, "n_heads": 2, "d_mlp": 16,
         "batch_size": 8, "eval_samples": 4, "eval_stride": 4}


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure_stack(task, pe: str, preset: str, M: int, device: str, steps: int, warmup: int,
                  capture: bool | None, overrides: dict | None = None) -> dict:
    """One stack of ``M`` fresh members: ms per step over ``steps`` timed steps after
    ``warmup`` steps, the stacked evaluation's seconds, and runs per device-minute."""
    specs = [trainer.resolve_spec(task, pe, s, preset, config_overrides=overrides)
             for s in range(M)]
    members = []
    for spec in specs:
        m = Transformer(spec.model)
        m.reset_parameters(seed=spec.seed)
        m.to(device)
        members.append(Member.fresh(spec, m))
    tr = specs[0].train
    stepper = stacked.StackStepper(members, task, device, capture=capture)
    try:
        stepper.train_mode()
        for s in range(warmup):
            optimizer_step(stepper, s)          # the trainer's own step (train_steps runs it)
        _sync(device)
        t0 = time.perf_counter()
        for s in range(warmup, warmup + steps):
            optimizer_step(stepper, s)
        _sync(device)
        dt = (time.perf_counter() - t0) / steps
    finally:
        stepper.close()
    graphs = len(stepper.captured.graphs) if stepper.captured is not None else 0
    t1 = time.perf_counter()
    for n, _ in specs[0].eval_lengths:
        data = eval_set(task, n, tr.eval_samples)
        stacked.stacked_answers(stepper.model, task, [p for p, _ in data],
                                max(len(a) for _, a in data) + 2, tr.eval_batch_size)
    _sync(device)
    eval_s = time.perf_counter() - t1
    return {"members": M, "ms_per_step": dt * 1000, "ms_per_member_step": dt * 1000 / M,
            "eval_s": eval_s, "run_steps": tr.steps, "graphs": graphs,
            "captured": stepper.captured is not None,
            "runs_per_gpu_minute": 60 * M / (tr.steps * dt + eval_s)}


def main_job(device: str, smoke: bool) -> dict:
    """The main job's runs through the grid in this process; wall seconds."""
    from analysis.reporting.presets import theory_presets
    from analysis.training.grid import GridRun, auto_stack, run_grid
    presets = theory_presets("demo")     # a learned APE: the random offsets its theories assume
    runs = [GridRun("sort_unique", pe, s, preset=presets.get(pe, "demo"))
            for pe in PE_NAMES for s in range(5)]
    runs += [GridRun("copy_repeat", "nope", s, preset="demo") for s in range(5)]
    if smoke:
        runs = [GridRun(r.task, r.pe, r.seed, r.preset, overrides=SMOKE, steps=3)
                for r in runs if r.pe == "nope" and r.task == "sort_unique"][:3]
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        rep = run_grid(runs, runs_root=d, serial=True, device=device, progress=False)
        wall = time.perf_counter() - t0
    return {"runs": len(runs), "wall_s": wall, "ok": rep.ok, "stack": auto_stack(device),
            "statuses": sorted({r.status for r in rep.results})}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--stacks", default="1,16,64,256,1024")
    ap.add_argument("--steps", type=int, default=30, help="timed steps per stack")
    ap.add_argument("--warmup", type=int, default=40,
                    help="untimed steps first (the CUDA graphs of the shapes met are captured)")
    ap.add_argument("--task", default="sort_unique")
    ap.add_argument("--pe", default="nope")
    ap.add_argument("--preset", default="demo")
    ap.add_argument("--no-capture", action="store_true", help="eager stacked step on CUDA")
    ap.add_argument("--main-job", action="store_true", help="also time the main job's 35 runs")
    ap.add_argument("--smoke", action="store_true", help="tiny settings (a test of the script)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "gpu_stack.json"))
    a = ap.parse_args(argv)
    device = trainer._check_device(a.device)
    torch.set_num_threads(1)
    task = trainer.resolve_task(a.task)
    stacks = [int(x) for x in a.stacks.split(",")]
    overrides = None
    if a.smoke:
        stacks, a.steps, a.warmup, overrides = [1, 3], 3, 2, SMOKE
    capture = False if a.no_capture else None
    gpu = torch.cuda.get_device_name(0) if device.startswith("cuda") else None
    print(f"device {device} ({gpu or 'no GPU'}), {a.task}/{a.pe}, preset {a.preset}")
    print("| members | ms per step | ms per member-step | eval s | graphs | runs per "
          "GPU-minute |\n|---|---|---|---|---|---|")
    rows = []
    for M in stacks:
        try:
            r = measure_stack(task, a.pe, a.preset, M, device, a.steps, a.warmup, capture,
                              overrides)
        except torch.cuda.OutOfMemoryError as e:       # the largest stacks may not fit
            r = {"members": M, "error": f"out of memory: {str(e).splitlines()[0]}"}
            torch.cuda.empty_cache()
            print(f"| {M} | {r['error']} |", flush=True)
            rows.append(r)
            continue
        rows.append(r)
        print(f"| {M} | {r['ms_per_step']:.2f} | {r['ms_per_member_step']:.3f} | "
              f"{r['eval_s']:.1f} | {r['graphs']} | {r['runs_per_gpu_minute']:.1f} |",
              flush=True)
    job = main_job(device, a.smoke) if a.main_job else None
    if job:
        print(f"main job: {job['runs']} runs in {job['wall_s']:.0f} s wall "
              f"(stacks of up to {job['stack']}; {', '.join(job['statuses'])})")
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "device": device, "gpu": gpu, "task": a.task, "pe": a.pe, "preset": a.preset,
        "smoke": a.smoke, "steps_timed": a.steps, "warmup_steps": a.warmup,
        "torch": torch.__version__, "cores": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"), "stacks": rows, "main_job": job}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
