"""`rasp validate-predictor [TASK...] [--pe PE ...] [--seeds 0-4] [--preset P] [--steps S]
[--runs DIR] [--search] [--search-budget N] [--crasp-budget N] [--task-file FILE.py]
[--regex PATTERN] [--registered FILE.json [--registered-sha256 HEX]] [--protocol-lengths]
[--json]`: predictions checked
against our own training.

For each task and positional encoding: the prediction (``analysis.prediction.predict``, per PE), the models
trained by ``rasp train --grid`` (finished runs with the same settings are reused, interrupted
ones resumed; the seeds named), the measured outcome with a bootstrap 95% interval across seeds and
test samples, and the label supported / contradicted / inconclusive (the report's rule,
``analysis.evidence.claims.prediction_claim``; one seed is always inconclusive); then the confusion matrix (predicted x measured) and
the agreement rate. See ``analysis/experiment/validate.py`` for the rule. A task whose paper
states the training length its outcome holds from (``tasks.base.Regime``) is trained up to that
length unless ``--protocol-lengths``, then labelled inconclusive: outside the theory's regime. Defaults: count,
copy_unique, sort_unique, copy_repeat, parity, reverse; PEs nope and ape_learned; seeds 0-4; the
quick preset.

Tasks of your own: ``--task-file FILE.py`` / ``--regex PATTERN`` (``rasp score --help``).
``--registered FILE.json`` (from ``rasp score --register``) checks the runs against the
predictions as written there -- never recomputed -- for its tasks and PEs (or the TASKs and
``--pe`` given, which it must hold), and refuses (exit 2) when a task file changed since, when
the file was edited after it was written (its recorded sha256; ``--registered-sha256``: the
one published) -- a registration written before hashes is "registered before hashes; not
checkable"; after the table it says when the registration first appeared in git and whether
that precedes the creation of every run checked (``analysis.prediction.registered.provenance``;
JSON: ``"registration"``). Predictions on tasks outside the catalogue are counted apart.

Exit codes: 0 printed; 2 bad input (unknown task or PE, bad numbers, a broken task file, a
registration file that does not match its task files or its sha256).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rasp_cli.common import (PE_PRESET_HELP, TASK_FILE_WARNING, UsageError, add_search_args,
                             add_task_source_args, output_dir, parse_overrides,
                             parse_pe_presets, parse_pes, parse_seeds, search_settings,
                             tasks_from_args)

#: the one-line help of `rasp validate-predictor` (shown by `rasp --help` without importing the command)
HELP = 'predicted vs measured length generalization per task and PE'


def add_arguments(p) -> None:
    p.description = (__doc__.split("\n\n")[1])
    p.add_argument("tasks", metavar="TASK", nargs="*", help="tasks (default: count, copy_unique, sort_unique, copy_repeat, "
                        "parity, reverse)")
    p.add_argument("--pe", action="append", default=None, metavar="PE",
                   help="positional encoding (repeatable, comma list or 'all'; default: nope, "
                        "ape_learned)")
    p.add_argument("--seeds", default="0-4", metavar="SEEDS",
                   help="seeds: a comma list and ranges, the same in every subcommand (default "
                        "0-4: 5 seeds, the fewest with which a label can be decided, "
                        "analysis/evidence/statistics.py)")
    p.add_argument("--preset", default="quick", help="training preset (default quick)")
    p.add_argument("--pe-preset", action="append", default=[], metavar="PE=PRESET",
                   help=PE_PRESET_HELP)
    p.add_argument("--steps", type=int, default=None, help="override the training steps")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a model or training setting of every run (JSON value), e.g. "
                        "--set position_offsets=random: the protocol the theories for a learned "
                        "APE assume (without it a learned APE has no theory)")
    p.add_argument("--runs", default="runs", metavar="DIR",
                   help="run directories of the grid (default runs/)")
    add_search_args(p)         # default: no search, shipped programs only
    add_task_source_args(p)
    p.add_argument("--registered", metavar="FILE.json", default=None,
                   help="check the runs against the predictions registered in FILE.json "
                        "(`rasp score --register`) as written; refused when a task file "
                        "changed since. A task file it names is loaded only when named again "
                        "with --task-file (or with --trust-task-files): " + TASK_FILE_WARNING)
    p.add_argument("--registered-sha256", metavar="HEX", default=None,
                   help="the sha256 `rasp score --register` printed (published or committed): "
                        "--registered is refused when its file has another")
    p.add_argument("--trust-task-files", action="store_true",
                   help="load the task files --registered names without naming them again: "
                        + TASK_FILE_WARNING)
    p.add_argument("--protocol-lengths", action="store_true",
                   help="train every task on its preset's lengths, also where the task's paper "
                        "states a longer training length (count: 60, Zhou et al. 2023 Fig. 1b; "
                        "Huang et al.'s tasks: 50); such a check is labelled 'inconclusive: "
                        "outside the theory's regime'. Default: train those tasks up to their "
                        "paper's length (runs seed<k>-<preset>-L<n>; count at 60 costs ~5x "
                        "the tokens of 1-10)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("-o", "--out", default=None, metavar="DIR",
                   help="also write validation.json, validation.md (the tables) and "
                        "validation.png (OOD exact match per seed and PE, the mean with its "
                        "95%% interval, the threshold, and each claim's label) to DIR")
    p.add_argument("--address", default=None, metavar="HOST:PORT",
                   help="train on this Ray cluster (default: $RAY_ADDRESS, else a local Ray "
                        "instance; analysis.training.grid)")


def run(args) -> int:
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    import tasks
    from analysis.reporting.presets import VALIDATION_TASKS
    if args.registered_sha256 and not args.registered:
        raise UsageError("--registered-sha256 checks the file of --registered FILE.json")
    found = search_settings(args, args.tasks)
    own = [t.name for t in tasks_from_args(args)]
    registered = None
    if args.registered:
        registered, reg_names, reg_pes = _registered(args, found)
        names = list(dict.fromkeys(list(args.tasks or reg_names)
                                   + [n for n in own if n not in args.tasks]))
    else:
        names = (args.tasks or ([] if own else list(VALIDATION_TASKS))) + own
    for n in names:
        try:
            t = tasks.get_task(n)
        except tasks.UnknownTaskError as e:
            raise UsageError(str(e)) from None
        if t.kind not in ("next_token", "next_set"):
            raise UsageError(f"task {n!r} is a part-B sequence program; predictions are for "
                             "next-token tasks")
    pes = [pe for x in args.pe or ([",".join(reg_pes)] if registered else ["nope,ape_learned"])
           for pe in parse_pes(x)]
    seeds = parse_seeds(args.seeds)
    if args.steps is not None and args.steps < 1:
        raise UsageError("--steps must be positive")
    overrides = parse_overrides(args.set)
    output_dir(args.runs, "--runs")               # a regular file there: one line, no grid
    out_dir = Path(output_dir(args.out)) if args.out else None
    pe_presets = parse_pe_presets(args.pe_preset)
    # start-up: torch loads once the arguments are checked (a usage error answers at once)
    from analysis.evidence.claims import ClaimError
    from analysis.prediction.predict import PredictError
    from analysis.experiment.validate import format_validation, validate
    from analysis.experiment.pipeline import ExperimentError
    from analysis.training.trainer import RunDirError, TrainingError
    try:
        out = validate(names, pes, seeds, preset=args.preset,
                       runs_root=args.runs, steps=args.steps, **found,
                       overrides=overrides, pe_presets=pe_presets,
                       progress=not args.json, address=args.address, registered=registered,
                       at_regime=not args.protocol_lengths,
                       log=None if args.json else (lambda m: print(m, file=sys.stderr)))
    except (TrainingError, RunDirError, PredictError, ExperimentError, ClaimError) as e:
        raise UsageError(str(e)) from None
    if registered is not None:
        # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
        from analysis.prediction.registered import format_provenance, provenance
        out["registration"] = provenance(args.registered,
                                         [d for r in out["rows"] for d in r["run_dirs"]],
                                         args.registered_sha256)
    text = format_validation(out)
    if registered is not None:
        text += "\n\n" + "\n".join(format_provenance(out["registration"]))
    if args.json:
        print(json.dumps(out))
    else:
        print(text)
    if out_dir is not None:
        written = write_validation(out, text, out_dir)
        if not args.json:
            print(f"\nwrote {', '.join(str(p) for p in written)}")
    return 0


def write_validation(out: dict, text: str, out_dir: Path) -> list[Path]:
    """``out_dir``/validation.json, validation.md (``text`` under the command that made it)
    and validation.png (:func:`analysis.reporting.figures.claims_figure`), each written
    atomically; returns their paths."""
    # start-up: matplotlib loads only when a figure is drawn
    from analysis.reporting.figures import claims_figure
    from analysis.training.runs import atomic_write_text
    out_dir.mkdir(parents=True, exist_ok=True)
    command = ("rasp validate-predictor " + " ".join(sys.argv[2:])
               if sys.argv[1:2] == ["validate-predictor"] else None)
    atomic_write_text(out_dir / "validation.json", json.dumps(out, indent=1), mode=0o644)
    atomic_write_text(out_dir / "validation.md", (f"Generated by `{command}`.\n\n" if command
                                                  else "") + text + "\n", mode=0o644)
    png = claims_figure(out["rows"], out_dir / "validation.png")
    return [out_dir / "validation.json", out_dir / "validation.md", Path(png)]


def _registered(args, found) -> tuple[dict, list, list]:
    """The registered predictions of ``--registered`` (checked: refused when a task file
    changed), their tasks (registered so that runs find them) and PEs."""
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.prediction.registered import (read_registration, registered_predictions,
                                                registered_tasks)
    if found["search"]:
        raise UsageError("--registered checks the predictions as written in the file; "
                         "--search / --search-budget / --crasp-budget would recompute them")
    doc = read_registration(args.registered, args.registered_sha256)
    names = [t.name for t in registered_tasks(doc, args.task_file or (),
                                              trust=args.trust_task_files,
                                              where=args.registered)]
    preds = registered_predictions(doc)
    pes = list(dict.fromkeys(pe for _, pe in preds if pe is not None))
    if not pes:
        raise UsageError(f"{args.registered} holds no prediction for a positional encoding; "
                         "register with `rasp score ... --pe nope --pe ape_learned`")
    return preds, names, pes
