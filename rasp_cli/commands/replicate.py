"""`rasp replicate huang`: Huang et al. 2025's experiment, run as they ran it.

    rasp replicate huang TASK... --pe PE[,PE] [--scale small|full] [--runs DIR] [-o DIR]
                         [--address HOST:PORT | --serial] [--device cuda] [--no-predict]

Per (task, PE) cell: their sweep (seed 0 of every configuration, early stop at 100% in
distribution), their selection (best 51-100 exact match among the configurations that fit),
their seeds (the mean of the first five that fit), their bins (``analysis.experiment.replication``).
Our prediction for the cell is computed and written to the cell file before any run starts.
Finished runs are reused and interrupted ones resume: rerun the same command to finish a cell.
Exit codes: 0 every cell done, 1 a cell incomplete (fewer than five seeds fit, a run failed),
2 bad input.
"""

from __future__ import annotations

import time
from pathlib import Path

from rasp_cli.common import (UsageError, add_device_option, check_grid_options, grid_options,
                             output_dir, parse_pes)

#: the one-line help of `rasp replicate` (shown by `rasp --help` without importing the command)
HELP = "run a paper's experiment as its authors did (huang: Huang et al. 2025)"


def add_arguments(p) -> None:
    p.description = (
        "Run Huang et al. 2025's length-generalization experiment (ICLR 2025, "
        "arXiv 2410.02140; their code github.com/lacoco-lab/length_generalization) "
        "for their algorithmic tasks: train lengths 1-50, test bins 51-100 and "
        "101-150 (2,000 examples each), learned APE with a random position offset "
        "per example or NoPE, their sweep over layers {1,2,4} x heads {1,2,4} x "
        "d_model {16,64,256} x lr {1e-3,1e-4} (one seed, early stop at 100% in "
        "distribution), the configuration with the best 51-100 exact match among "
        "those at 100% in distribution, and the mean of the first five seeds that "
        "fit (at most 1,000 tried, as theirs); when none fits, their 12-layer model at "
        "the learning rate their scripts chose for the cell (big 1e-4, bigsmalllr 3e-5). "
        "The full protocol is GPU work (up to 54 configurations x 30,000 steps "
        "per cell); --scale small cuts it to minutes on 2 CPU cores (its numbers are "
        "not theirs to compare). Their formal languages (TASK <language>_nextchar, "
        "next-character sets) follow their formal_lang_suite: a fixed training set "
        "as large as their released one (40 to 10,000 strings), each language's grid, "
        "batch size and epochs from their experiments/<language>.yaml, AdamW lr 1e-5, "
        "the lengths of their released files; their code has no selection script, so the "
        "algorithmic rule is applied (said in every cell file). Each cell writes "
        "OUT/<scale>/<task>--<pe>.json; "
        "`python -m analysis.reporting.replication_doc` turns them into "
        "docs/huang-replication.md.")
    p.add_argument("paper", choices=["huang"], help="the experiment: huang (Huang et al. 2025)")
    p.add_argument("tasks", nargs="+", metavar="TASK",
                   help="their algorithmic tasks (majority_binary, majority, "
                        "majority_interleave, sort_150, copy_unique_150, copy_ab, parity_bits, "
                        "addition_binary) or formal languages (tomita1_nextchar .. "
                        "tomita7_nextchar, dyck1_depth{2,3,4,12}_nextchar, aa_star_nextchar, "
                        "aaaa_star_nextchar, abab_star_nextchar, a_to_e_blocks_nextchar, "
                        "ab_d_bc_nextchar, ends_02_nextchar)")
    p.add_argument("--pe", default="ape_learned,nope",
                   help="ape_learned (learned APE with random offsets) and/or nope, comma "
                        "separated (default both)")
    p.add_argument("--scale", choices=["small", "full"], default="full",
                   help="full: their protocol (default); small: training lengths 1-10, bins "
                        "11-20 / 21-30, 4 configurations, 3,000 steps, 200 examples per bin "
                        "(minutes per cell on 2 cores; not comparable with their numbers); "
                        "formal languages: lengths 1-20, bins 21-30 / 31-40, 1,000 strings for "
                        "20 epochs")
    p.add_argument("--runs", default="runs", metavar="DIR",
                   help="runs root (default runs/; runs go to DIR/huang/<scale>/...)")
    p.add_argument("-o", "--out", default="replication", metavar="DIR",
                   help="where the cell files go (default replication/)")
    p.add_argument("--waves", type=int, default=None, metavar="N",
                   help="runs started at once (default: 2 on this machine's CPU, 8 with "
                        "--address or --device cuda); the sweep stops launching "
                        "configurations after one is 100%% on the ID bin and 51-100, as theirs")
    p.add_argument("--no-predict", action="store_true",
                   help="do not register our prediction before the runs (faster; the cell "
                        "then has none)")
    add_device_option(p)
    p.add_argument("--force", action="store_true", help="retrain finished runs")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    grid_options(p)


def _prediction(task: str, pe: str) -> dict:
    """Our prediction for a cell, as registered in the cell file (verdict, label, theory)."""
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.prediction.predict import predict
    from rasp_model.pe_names import theory_protocol
    rec = predict(task, pe=pe, search=True, position_offsets=theory_protocol(pe))
    return {"prediction": rec.prediction, "label": getattr(rec, "prediction_label", None)
            or rec.prediction, "theory": rec.theory, "budgets": getattr(rec, "budgets", None)}


def run(args) -> int:
    """Run ``rasp replicate``; returns the exit code."""
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.experiment import replication as R
    from analysis.experiment.pipeline import ExperimentError

    pes = parse_pes(args.pe)
    check_grid_options(args)              # --gpus-per-run nan etc. before anything starts
    bad = [pe for pe in pes if pe not in R.HUANG_PES]
    if bad:
        raise UsageError(f"Huang et al. trained {' and '.join(R.HUANG_PES)}; not {', '.join(bad)}")
    known = R.replication_tasks()
    unknown = [t for t in args.tasks if t not in known]
    if unknown:
        raise UsageError(f"not one of Huang et al.'s tasks with released numbers: "
                         f"{', '.join(unknown)} (known: {', '.join(known)})")
    if args.waves is not None and not 1 <= args.waves <= 1024:
        raise UsageError(f"--waves must be in 1..1024, got {args.waves}")
    for path, flag in ((args.runs, "--runs"), (args.out, "-o")):
        output_dir(path, flag)            # a regular file there: one line, before any work
    waves = args.waves or (8 if args.address or str(args.device).startswith("cuda") else 2)
    if args.serial:
        waves = args.waves or 1
    stack = 1 if args.no_stack else args.stack
    scales = {t: R.scale_for(t, args.scale) for t in args.tasks}
    for text in dict.fromkeys(sc.describe() for sc in scales.values()):
        print(f"Huang et al. 2025, {text}")
    grid_kwargs = {"address": args.address, "serial": args.serial, "device": args.device,
                   "num_cpus": args.cpus_per_run, "num_gpus": args.gpus_per_run,
                   "force": args.force, "progress": not args.no_progress, "stack": stack,
                   "budget_s": args.budget}
    cells = [(t, pe) for t in args.tasks for pe in pes]
    t0 = time.time()
    ok = True
    for k, (task, pe) in enumerate(cells, 1):
        print(f"cell {k}/{len(cells)}: {task} / {pe}")
        pred = None
        scale = scales[task]
        if not args.no_predict and not R.cell_path(args.out, task, pe, scale).exists():
            print(f"  registering our prediction for {task} / {pe} before the runs ...")
            pred = _prediction(task, pe)
            print(f"  prediction: {pred['label']}")
        try:
            cell = R.replicate_cell(task, pe, scale, args.runs, args.out, prediction=pred,
                                    grid_kwargs=grid_kwargs, waves=waves,
                                    log=lambda s: print(s, flush=True))
        except ExperimentError as e:
            raise UsageError(str(e)) from None
        except R.ReplicationError as e:
            raise UsageError(str(e)) from None
        print(_summary(cell))
        ok = ok and cell["status"] == "done"
        left = len(cells) - k
        if left:
            per = (time.time() - t0) / k
            print(f"  {k}/{len(cells)} cells in {time.time() - t0:.0f} s; ~{per * left:.0f} s "
                  f"left")
    # the tracked docs/huang-replication.md is `make replication`'s (docs/replication's cells)
    doc = ("docs/huang-replication.md" if Path(args.out).resolve() ==
           (Path.cwd() / "docs" / "replication").resolve() else Path(args.out) / "replication.md")
    print(f"cell files under {args.out}/{args.scale}/; a document of them: python -m "
          f"analysis.reporting.replication_doc --cells {args.out} -o {doc}")
    return 0 if ok else 1


def _summary(cell: dict) -> str:
    """A few lines: the selection, our mean per bin with its range, theirs, the agreement."""
    def f(x):
        return "  -  " if x is None else f"{x:.3f}"
    sel = cell.get("selection") or {}
    lines = [f"  selected {sel.get('config')}: {sel.get('reason')}",
             f"  seeds tried {len(cell.get('seeds_tried', []))}, fitting "
             f"{cell.get('fitting_seeds')} ({cell['status']})"]
    theirs = cell.get("theirs") or [None] * 3
    their_bins = cell.get("their_bins") or ["1-50", "51-100", "101-150"]
    for i, b in enumerate(cell.get("bins", [])):
        lo, hi = b["bin"]
        their = f"  theirs (lengths {their_bins[i]}) {f(theirs[i])}" \
            if i < min(len(theirs), len(their_bins)) else ""
        lines.append(f"  bin {lo}-{hi}: mean {f(b['mean'])} [{f(b['min'])}, {f(b['max'])}] over "
                     f"{b['seeds']} seeds{their}")
    for a in cell.get("agreement", []):
        lines.append(f"  bin {a['bin'][0]}-{a['bin'][1]}: ours {a['ours']}, theirs "
                     f"{a['theirs']} -> {a['label']}")
    if not cell.get("comparable", True):
        lines.append("  (scale small: a cut of their protocol, not theirs to compare)")
    return "\n".join(lines)
