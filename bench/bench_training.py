"""Training benchmark (docs/benchmarks.md, "## Training").

For the default configuration (``analysis/training/configs.py``) on a task (default ``copy_unique``),
measures side by side in one run, for every positional encoding:

* training throughput: tokens per second and seconds per optimizer step over ``--steps`` steps
  (after 5 warm-up steps), with 1 torch thread and, with ``--threads 1,2``, 2 threads; each step
  the trainer's own (:func:`analysis.training.stepper.optimizer_step` of a ``SingleStepper``:
  the run's batches of step s, learning-rate schedule and clipping);
* the evaluation pass of a run (greedy decoding, ID + OOD lengths, the default sample count) of
  an untrained model (it never stops early, so this is an upper bound);
* the projected wall time of one default run = steps x s/step + evaluation;
* with ``--full-quick``, the measured wall time of one complete ``quick``-preset run per PE
  (what the report demo trains 13 of).

Writes ``bench/results/training.json`` and prints a table. Run:
``.venv/bin/python -m bench.bench_training`` (``--task``, ``--steps``, ``--threads``,
``--pes``, ``--full-quick``).

``--stacked`` (issue 26): at the demo preset (``--preset``), for group sizes ``--sizes``
(default 1,2,5,10,30), side by side in one process with one torch thread: ``M`` runs trained one
after another (one run per task, as the grid runs them without stacking) against one stack of
``M`` members (:mod:`analysis.training.stacked`), ``--steps`` optimizer steps each (the
trainer's ``optimizer_step`` of a ``SingleStepper`` per run and of one ``StackStepper``), plus the
evaluation pass (greedy decoding of the demo's evaluation set) of the ``M`` models separately
and stacked. Reports CPU seconds per member-step, real tokens per second, and runs per CPU-hour
projected to a whole run (``steps x CPU-s per step + evaluation``); writes
``bench/results/training_stacked.json``.

``--train-lengths 10,60`` (issue 47): the same child at several maximum training lengths (count,
NoPE by default), alternating: runs per CPU-hour at each and the ratio to the first; writes
``bench/results/training_lengths.json``.

``--loop`` (issue 35): the real training path, before/after in one run. For each checkout of
``--roots`` (default: this one; e.g. ``--roots /tmp/before,.`` with the former commit unpacked
by ``git archive``), alternately for ``--reps`` repetitions, a child process with one torch
thread trains ``--runs`` demo-preset runs one per call of ``trainer.train`` (``--no-stack``) and,
with ``--stack M``, ``M`` runs as one stack (``stacked.train_group``), ``--steps`` steps each;
CPU time of the loop per step (from its ``step_hook``) and of the evaluation. Runs per CPU-hour
= 3,600 / (3,000 x loop CPU-s per step + evaluation CPU-s per run). Writes
``bench/results/training_loop.json``.
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
from analysis.training.evaluation import evaluate  # noqa: E402
from analysis.training.stepper import Member, SingleStepper, optimizer_step  # noqa: E402
from analysis.training.trainer import resolve_spec, resolve_task, train  # noqa: E402
from bench import cpu_model  # noqa: E402
from rasp_model import PE_NAMES, Transformer  # noqa: E402


#: the training-settings comparison (``--settings``): name -> TrainConfig overrides
SETTINGS = {"eager float32": {}, "torch_compile": {"torch_compile": True},
            "autocast bfloat16": {"autocast": "bfloat16"},
            "torch_compile + bfloat16": {"torch_compile": True, "autocast": "bfloat16"}}


def measure_pe(task, pe: str, steps: int, threads: int, preset: str = "default",
               settings: dict | None = None, with_eval: bool = True) -> dict:
    """Throughput of ``steps`` training steps of the resolved config for (task, pe), after 5
    warm-up steps (timed apart: ``warmup_s`` holds torch.compile's compile time): the
    trainer's own step (:func:`analysis.training.stepper.optimizer_step` of a
    :class:`~analysis.training.stepper.SingleStepper`: the run's batches, learning-rate
    schedule, clipping, ``torch_compile`` and ``autocast`` settings). ``settings``:
    TrainConfig overrides (``torch_compile``, ``autocast``)."""
    torch.set_num_threads(threads)
    torch._dynamo.reset()
    spec = resolve_spec(task, pe, 0, preset, config_overrides=settings or None)
    tr = spec.train
    pairs = list(spec.eval_lengths)
    torch.manual_seed(0)
    model = Transformer(spec.model)
    stepper = SingleStepper.fresh(spec, task, model)
    stepper.train_mode()
    tokens = 0
    t0 = None
    w0 = time.perf_counter()
    for s in range(steps + 5):
        if s == 5:
            t0, tokens, c0 = time.perf_counter(), 0, time.process_time()
            warmup_s = t0 - w0
        batch, _, loss = optimizer_step(stepper, s)
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
            "s_per_step": sps, "eval_s": eval_s, "final_loss": float(loss.detach()[0]),
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
    ap.add_argument("--stacked", action="store_true",
                    help="instead: stacked training vs one run per task, group sizes --sizes")
    ap.add_argument("--sizes", default="1,2,5,10,30", help="group sizes for --stacked")
    ap.add_argument("--preset", default="demo", help="training preset for --stacked")
    ap.add_argument("--device", default="cpu", help="torch device for --stacked")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "training.json"))
    ap.add_argument("--loop", action="store_true",
                    help="instead: the real trainer (train / train_group) per checkout of "
                         "--roots, CPU time per step and runs per CPU-hour")
    ap.add_argument("--roots", default=str(ROOT), help="comma-separated checkouts for --loop")
    ap.add_argument("--reps", type=int, default=2, help="repetitions for --loop")
    ap.add_argument("--runs", type=int, default=2, help="separate runs per child for --loop")
    ap.add_argument("--stack", type=int, default=0, help="also a stack of M for --loop")
    ap.add_argument("--train-lengths", default=None, metavar="L,L",
                    help="the real trainer at these maximum training lengths (count, NoPE, "
                         "--preset; issue 47): runs per CPU-hour side by side")
    a = ap.parse_args(argv)
    if a.train_lengths:
        return lengths_main(a)
    if a.loop:
        return loop_main(a)
    if a.settings:
        return settings_main(a)
    if a.stacked:
        return stacked_main(a)
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


def _timed(fn):
    """(result, wall seconds, CPU seconds of this process) of ``fn()``."""
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def run_sizes(a, task, pe: str, device: str, sizes, steps: int, quiet: bool = False) -> list:
    """The ``--stacked`` rows of the group sizes ``sizes`` (``steps`` timed steps each)."""
    from analysis.training import stacked
    from analysis.training.evaluation import eval_set, greedy_decode

    rows = []
    for M in sizes:
        specs = [resolve_spec(task, pe, s, a.preset) for s in range(M)]
        tr = specs[0].train

        def models():
            out = []
            for sp in specs:
                m = Transformer(sp.model)
                m.reset_parameters(seed=sp.seed)
                out.append(m.to(device))
            return out

        def separate():           # one SingleStepper per run, as run_loop trains each
            tokens, ms = 0, models()
            for m, sp in zip(ms, specs):
                stepper = SingleStepper.fresh(sp, task, m, device)
                stepper.train_mode()
                for step in range(steps):
                    tokens += optimizer_step(stepper, step).batch.real_tokens
            return tokens, ms

        def stack():              # one StackStepper, as train_group trains the group
            members = [Member.fresh(sp, m) for m, sp in zip(models(), specs)]
            stepper = stacked.StackStepper(members, task, device)
            tokens = 0
            try:
                stepper.train_mode()
                for step in range(steps):
                    tokens += sum(stepper.real_tokens(optimizer_step(stepper, step).batch))
            finally:
                stepper.close()
            return tokens, stepper.model

        (tok_a, ms), wall_a, cpu_a = _timed(separate)
        (tok_b, sm), wall_b, cpu_b = _timed(stack)
        # the evaluation's decoding at full answer length (EOS never ends a row: an upper
        # bound, the same work for both; barely trained models would stop at random places)
        evals = [eval_set(task, n, tr.eval_samples) for n, _ in specs[0].eval_lengths]
        work = [([p for p, _ in d], max(len(x) for _, x in d) + 2) for d in evals]
        _, _, ev_a = _timed(lambda: [greedy_decode(m, p, k, -1, tr.eval_batch_size)
                                     for m in ms for p, k in work])
        _, _, ev_b = _timed(lambda: [stacked.greedy_decode_stacked(sm, p, k, -1,
                                                                   tr.eval_batch_size)
                                     for p, k in work])
        if device != "cpu":          # CPU time says nothing about a GPU: use wall time
            cpu_a, cpu_b = wall_a, wall_b
        per_a, per_b = cpu_a / (M * steps), cpu_b / (M * steps)
        run_a = tr.steps * per_a + ev_a / M
        run_b = tr.steps * per_b + ev_b / M
        r = {"members": M, "pe": pe, "steps_timed": steps, "run_steps": tr.steps,
             "cpu_s_per_member_step": {"separate": per_a, "stacked": per_b},
             "tokens_per_s": {"separate": tok_a / wall_a, "stacked": tok_b / wall_b},
             "eval_cpu_s_per_member": {"separate": ev_a / M, "stacked": ev_b / M},
             "runs_per_cpu_hour": {"separate": 3600 / run_a, "stacked": 3600 / run_b},
             "ratio": run_a / run_b}
        rows.append(r)
        if not quiet:
            print(f"| {M} | {per_a * 1000:.1f} | {per_b * 1000:.1f} | {tok_a / wall_a:,.0f} | "
                  f"{tok_b / wall_b:,.0f} | {ev_a / M:.2f} / {ev_b / M:.2f} | {3600 / run_a:.0f} | "
                  f"{3600 / run_b:.0f} | {r['ratio']:.2f} |", flush=True)
    return rows


def stacked_main(a) -> int:
    """``--stacked``: one run per task vs one stack, per group size (module docstring)."""
    task = resolve_task(a.task if a.task != "copy_unique" else "sort_unique")
    pe = "nope" if a.pes == "all" else a.pes.split(",")[0]
    th = int(a.threads.split(",")[0])
    torch.set_num_threads(th)
    device = a.device
    for M in (1, 2):                 # warm-up (lazy initialisation of torch and vmap), untimed
        run_sizes(a, task, pe, device, [M], 3, quiet=True)
    print(f"| members | one run per task: CPU ms per member-step | stacked | tokens/s separate | "
          f"tokens/s stacked | eval CPU-s per member separate / stacked | runs per CPU-hour "
          f"separate | stacked | ratio |\n|---|---|---|---|---|---|---|---|---|")
    rows = run_sizes(a, task, pe, device, [int(x) for x in a.sizes.split(",")], a.steps)
    out = Path(a.out).with_name("training_stacked.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"task": task.name, "preset": a.preset, "threads": th,
                               "device": device,
                               "machine": {"cpu": cpu_model(), "cores": os.cpu_count(),
                                           "torch": torch.__version__,
                                           "gpu": (torch.cuda.get_device_name(0)
                                                   if device.startswith("cuda") else None),
                                           "load_avg": os.getloadavg()},
                               "rows": rows}, indent=2))
    print(f"wrote {out}")
    return 0


_LOOP_CHILD = r"""
import json, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)
from analysis.training import trainer
task_name, pe, preset, steps, runs, stack = sys.argv[2:8]
steps, runs, stack = int(steps), int(runs), int(stack)
length = int(sys.argv[8]) if len(sys.argv) > 8 else None
task = trainer.resolve_task(task_name)
marks = {}
def hook(point, step):
    if point == "start" and step == 0:
        marks["t0"] = time.process_time()
    if point == "commit" and step == steps - 1:
        marks["t1"] = time.process_time()
def one(fn):
    marks.clear()
    c0 = time.process_time()
    fn()
    c2 = time.process_time()
    return {"loop_cpu_s": marks["t1"] - marks["t0"], "eval_cpu_s": c2 - marks["t1"],
            "setup_cpu_s": marks["t0"] - c0}
out = {"separate": [], "stacked": None}
with tempfile.TemporaryDirectory() as d:
    for s in range(runs):
        out["separate"].append(one(lambda: trainer.train(
            task, pe, s, preset=preset, steps=steps, out_dir=f"{d}/a{s}", progress=False,
            verbose=False, threads=1, step_hook=hook, train_max_len=length)))
    if stack:
        from analysis.training import stacked
        specs = [trainer.resolve_spec(task, pe, s, preset, steps=steps) for s in range(stack)]
        out["stacked"] = one(lambda: stacked.train_group(
            task, specs, [f"{d}/b{s}" for s in range(stack)], progress=False, verbose=False,
            threads=1, step_hook=hook))
print(json.dumps(out))
"""


def _write_loop_json(a, name: str, task: str, pe: str, rows: list) -> int:
    """Write ``rows`` of a child-process benchmark (``--loop``, ``--train-lengths``) with the
    settings and the machine to ``bench/results/<name>``; 0."""
    out = Path(a.out).with_name(name)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"task": task, "pe": pe, "preset": a.preset, "steps": a.steps,
                               "reps": a.reps, "machine": {"cpu": cpu_model(),
                                                           "cores": os.cpu_count(),
                                                           "torch": torch.__version__,
                                                           "load_avg": os.getloadavg()},
                               "rows": rows}, indent=2))
    print(f"wrote {out}")
    return 0


def lengths_main(a) -> int:
    """``--train-lengths 10,60`` (issue 47 item 4): the real trainer (:func:`trainer.train`, the
    ``--loop`` child) at each maximum training length, side by side in one run, alternating the
    lengths over ``--reps`` repetitions: loop CPU seconds per step, evaluation CPU seconds per run
    (ID and OOD lengths up to 2L), runs per CPU-hour projected to the preset's steps, and each
    length's ratio to the first. Writes ``bench/results/training_lengths.json``."""
    import subprocess
    task = "count" if a.task == "copy_unique" else a.task
    pe = "nope" if a.pes == "all" else a.pes.split(",")[0]
    lengths = [int(x) for x in a.train_lengths.split(",")]
    full = configs.resolve(a.preset)[1].steps
    per: dict = {L: [] for L in lengths}
    for rep in range(a.reps):
        for L in lengths:
            p = subprocess.run([sys.executable, "-c", _LOOP_CHILD, str(ROOT), task, pe, a.preset,
                                str(a.steps), str(a.runs), "0", str(L)],
                               capture_output=True, text=True, cwd=str(ROOT),
                               env={**os.environ, "RASP_TORCH_THREADS": "1"})
            if p.returncode:
                print(p.stderr[-3000:], file=sys.stderr)
                return 1
            per[L] += json.loads(p.stdout.strip().splitlines()[-1])["separate"]
    rows = []
    print(f"{task}, {pe}, preset {a.preset} ({full:,} steps projected), {a.steps} timed steps "
          f"x {a.runs} runs x {a.reps} reps per length\n\n| train lengths | loop CPU ms per "
          f"step | eval CPU-s per run | runs per CPU-hour | ratio to 1..{lengths[0]} |\n"
          f"|---|---|---|---|---|")
    for L in lengths:
        ms = float(np.median([x["loop_cpu_s"] / a.steps for x in per[L]]))
        ev = float(np.median([x["eval_cpu_s"] for x in per[L]]))
        rows.append({"train_max_len": L, "cpu_s_per_step": ms, "eval_cpu_s": ev,
                     "runs_per_cpu_hour": 3600 / (full * ms + ev), "samples": per[L]})
    for row in rows:
        row["ratio_to_first"] = row["runs_per_cpu_hour"] / rows[0]["runs_per_cpu_hour"]
        print(f"| 1..{row['train_max_len']} | {row['cpu_s_per_step'] * 1000:.1f} | "
              f"{row['eval_cpu_s']:.1f} | {row['runs_per_cpu_hour']:.1f} | "
              f"{row['ratio_to_first']:.2f} |", flush=True)
    return _write_loop_json(a, "training_lengths.json", task, pe, rows)


def loop_main(a) -> int:
    """``--loop``: the real trainer per checkout of ``--roots`` (module docstring)."""
    import subprocess
    task = "sort_unique" if a.task == "copy_unique" else a.task
    pe = "nope" if a.pes == "all" else a.pes.split(",")[0]
    roots = [str(Path(r).resolve()) for r in a.roots.split(",")]
    full = configs.resolve(a.preset)[1].steps
    per: dict = {r: [] for r in roots}
    for rep in range(a.reps):
        for r in roots:
            p = subprocess.run([sys.executable, "-c", _LOOP_CHILD, r, task, pe, a.preset,
                                str(a.steps), str(a.runs), str(a.stack)],
                               capture_output=True, text=True, cwd=r,
                               env={**os.environ, "RASP_TORCH_THREADS": "1"})
            if p.returncode:
                print(p.stderr[-3000:], file=sys.stderr)
                return 1
            per[r].append(json.loads(p.stdout.strip().splitlines()[-1]))
    rows = []
    print(f"| checkout | loop CPU ms per step, separate | eval CPU-s per run | runs per "
          f"CPU-hour separate | stack of {a.stack}: ms per member-step | runs per CPU-hour "
          f"stacked |\n|---|---|---|---|---|---|")
    for r in roots:
        sep = [x for rep in per[r] for x in rep["separate"]]
        ms = float(np.median([x["loop_cpu_s"] / a.steps for x in sep]))
        ev = float(np.median([x["eval_cpu_s"] for x in sep]))
        row = {"root": r, "cpu_s_per_step_separate": ms, "eval_cpu_s_separate": ev,
               "runs_per_cpu_hour_separate": 3600 / (full * ms + ev),
               "samples": per[r]}
        if a.stack:
            st = [rep["stacked"] for rep in per[r]]
            mst = float(np.median([x["loop_cpu_s"] / (a.steps * a.stack) for x in st]))
            evs = float(np.median([x["eval_cpu_s"] / a.stack for x in st]))
            row.update(cpu_s_per_member_step_stacked=mst, eval_cpu_s_stacked=evs,
                       runs_per_cpu_hour_stacked=3600 / (full * mst + evs))
        rows.append(row)
        print(f"| {r} | {ms * 1000:.2f} | {ev:.2f} | {row['runs_per_cpu_hour_separate']:.0f} | "
              + (f"{row['cpu_s_per_member_step_stacked'] * 1000:.2f} | "
                 f"{row['runs_per_cpu_hour_stacked']:.0f} |" if a.stack else "- | - |"),
              flush=True)
    if len(rows) > 1:
        base = rows[0]
        for row in rows[1:]:
            row["ratio_separate_to_first"] = (row["runs_per_cpu_hour_separate"]
                                              / base["runs_per_cpu_hour_separate"])
            if a.stack:
                row["ratio_stacked_to_first"] = (row["runs_per_cpu_hour_stacked"]
                                                 / base["runs_per_cpu_hour_stacked"])
            print(f"{row['root']} / {base['root']}: separate "
                  f"{row['ratio_separate_to_first']:.3f}"
                  + (f", stacked {row['ratio_stacked_to_first']:.3f}" if a.stack else ""))
    return _write_loop_json(a, "training_loop.json", task, pe, rows)


if __name__ == "__main__":
    sys.exit(main())
