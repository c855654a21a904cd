"""Do the training defaults fit? (docs/training.md, "Default preset: why copy_unique stopped
fitting").

Trains ``copy_unique`` with NoPE, seed 0, with the ``default`` preset (``rasp train copy_unique
--pe nope``: the README promises >= 0.99 ID exact match) and prints its ID / OOD exact match and
seconds. With ``--demo`` it also trains the ``demo`` preset on every demo task
(:data:`analysis.reporting.presets.DEFAULT_TASKS`, or ``--tasks``) and every positional
encoding (or ``--pes``), one seed.

Runs are written under ``--out`` (default a fresh temporary directory; never the repository),
one torch thread each (``$RASP_TORCH_THREADS``, default 1), one after another. ``--set KEY=VALUE``
overrides a setting (as ``rasp train --set``), e.g. to compare initialisations. Writes
``bench/results/default_fit.json`` unless ``--json`` names another file (``--json -``: none).

Run: ``.venv/bin/python -m bench.bench_default_fit`` (about 10 minutes on one free core;
``--demo`` adds ~50 CPU-s per demo run; ``--steps N`` shortens the default run, which then no
longer measures the default).
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

from analysis.reporting.presets import DEFAULT_TASKS  # noqa: E402
from analysis.training.trainer import train  # noqa: E402
from rasp_model import PE_NAMES  # noqa: E402

#: the README's promise for ``rasp train copy_unique --pe nope`` (default preset)
FIT_THRESHOLD = 0.99


def _value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def run_one(task: str, pe: str, preset: str, out: Path, overrides: dict,
            steps: int | None = None, seed: int = 0) -> dict:
    """Train one run into ``out`` and return its summary (ID/OOD EM, seconds)."""
    t0, c0 = time.time(), time.process_time()
    res = train(task, pe, seed=seed, preset=preset, steps=steps, out_dir=out,
                config_overrides=overrides or None, progress=False, verbose=False,
                force=True)
    wall, cpu = time.time() - t0, time.process_time() - c0
    return {"task": task, "pe": pe, "seed": seed, "preset": preset,
            "steps": res.steps, "overrides": overrides,
            "id_em": res.id_em, "ood_em": res.ood_em,
            "train_seconds": round(float(res.train_seconds or 0.0), 1),
            "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1), "run_dir": str(out)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--demo", action="store_true",
                    help="also train the demo preset on every demo task and PE (one seed)")
    ap.add_argument("--tasks", default=",".join(DEFAULT_TASKS),
                    help="demo tasks (comma-separated; default: the demo's)")
    ap.add_argument("--pes", default=",".join(PE_NAMES),
                    help="demo PEs (comma-separated; default: all)")
    ap.add_argument("--no-default", action="store_true",
                    help="skip the default-preset copy_unique/NoPE run")
    ap.add_argument("--steps", type=int, default=None,
                    help="shorten the default run (then it no longer measures the default)")
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    metavar="KEY=VALUE", help="override a setting of every run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="runs root (default: a temporary directory)")
    ap.add_argument("--json", default=str(ROOT / "bench" / "results" / "default_fit.json"),
                    help="where to write the results ('-': nowhere)")
    args = ap.parse_args(argv)
    overrides = {}
    for kv in args.overrides:
        k, _, v = kv.partition("=")
        overrides[k.strip()] = _value(v)
    os.environ.setdefault("RASP_TORCH_THREADS", "1")
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="default_fit_"))

    rows = []

    def em(x) -> str:
        return f"{'n/a':>6}" if x is None else f"{x:>6.3f}"

    def show(r: dict) -> None:
        print(f"{r['task']:<12} {r['pe']:<15} {r['preset']:<8} {r['steps']:>6} "
              f"{em(r['id_em'])} {em(r['ood_em'])} {r['train_seconds']:>8.1f} "
              f"{r['cpu_seconds']:>6.1f} {r['wall_seconds']:>7.1f}", flush=True)

    print(f"{'task':<12} {'pe':<15} {'preset':<8} {'steps':>6} {'ID EM':>6} {'OODEM':>6} "
          f"{'train s':>8} {'CPU s':>6} {'wall s':>7}", flush=True)
    status = 0
    if not args.no_default:
        r = run_one("copy_unique", "nope", "default",
                    root / "default" / "copy_unique" / "nope" / f"seed{args.seed}",
                    overrides, steps=args.steps, seed=args.seed)
        rows.append(r)
        show(r)
        if r["id_em"] is None or r["id_em"] < FIT_THRESHOLD:
            print(f"default preset does NOT fit copy_unique/NoPE: ID EM {r['id_em']:.3f} < "
                  f"{FIT_THRESHOLD}", flush=True)
            status = 1
    if args.demo:
        for task in [t for t in args.tasks.split(",") if t]:
            for pe in [p for p in args.pes.split(",") if p]:
                r = run_one(task, pe, "demo", root / "demo" / task / pe / f"seed{args.seed}",
                            overrides, seed=args.seed)
                rows.append(r)
                show(r)
    if args.json != "-":
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"threads": os.environ.get("RASP_TORCH_THREADS"),
                                    "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                              time.gmtime()),
                                    "runs": rows}, indent=1) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
