"""The helpers every subcommand of the `rasp` command uses: its registration (one parser per
command module), the error that means bad input (:class:`UsageError`, exit 2) and how errors are
printed (:func:`run_command`), the checks of numbers, seeds and output directories, the options
several commands share (your own tasks, the grid runner, the program searches, the report) and
their parsing (positional encodings, ``--set KEY=VALUE``).

No subcommand imports another; each imports what it shares from here. Imports of the packages
below (training, the report, the search budgets) stay inside the functions that need them: `rasp
--help` and `rasp run` must start without importing torch (``tests/test_cli_startup.py``).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

from rasp.ir import RASPError
from rasp.repl.session import run_source

#: when this `rasp` process started its work (``time.time()`` at the CLI's import): the report
#: page and the CLI both measure a command's wall time from it, so they print the same number
STARTED = time.time()


class UsageError(RASPError):
    """Bad input detected by a subcommand: printed, exit code 2."""


def register(sub, name: str, module) -> None:
    """Add the subcommand ``name`` to the CLI's subparsers from its module: the one-line
    ``module.HELP`` (what ``rasp --help`` lists), the options ``module.add_arguments(p)`` adds
    (with the parser's description and epilog), and ``module.run(args) -> exit code``."""
    p = sub.add_parser(name, help=module.HELP)
    module.add_arguments(p)
    p.set_defaults(func=module.run)


def run_command(args) -> int:
    """Run the parsed command ``args.func(args)`` and return its exit code. An error of the
    toolkit is printed as one line, never a traceback: :class:`UsageError` and every
    ``RASPError`` (bad input, a refused program) and an ``OSError`` (a file the command cannot
    read or write) exit 2; Ctrl-C exits 130."""
    try:
        return int(args.func(args) or 0)
    except UsageError as e:
        print(f"rasp {args.command}: error: {e}", file=sys.stderr)
        return 2
    except RASPError as e:
        print(f"rasp {args.command}: {e}", file=sys.stderr)
        return 2
    except OSError as e:                 # a file the command cannot read or write
        where = f"{e.filename}: " if e.filename else ""
        print(f"rasp {args.command}: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


# --------------------------------------------------------------------------------------------
# numbers, seeds, directories
# --------------------------------------------------------------------------------------------


def finite_number(value: float | None, flag: str, minimum: float = 0.0,
                  allow_equal: bool = False) -> float | None:
    """``value`` if it is a finite number above ``minimum`` (or equal, with ``allow_equal``),
    else :class:`UsageError` naming ``flag``: NaN, inf and negative values never reach a
    time limit, a budget or a memory size. None passes through (the flag was not given)."""
    if value is None:
        return None
    ok = math.isfinite(value) and (value >= minimum if allow_equal else value > minimum)
    if not ok:
        bound = f">= {minimum:g}" if allow_equal else f"> {minimum:g}"
        raise UsageError(f"{flag} must be a finite number {bound}, got {value!r}")
    return value


#: The largest seed (NumPy's and torch's generators take seeds in 0..2^32-1).
MAX_SEED = 2 ** 32 - 1


def whole_number(value: int | None, flag: str, minimum: int = 0,
                 maximum: int | None = None) -> int | None:
    """``value`` if it is an integer in ``minimum..maximum``, else :class:`UsageError`
    naming ``flag`` and the range (exit 2): every integer flag is checked before any work
    (a run directory, Ray, a thread pool). None passes through (the flag was not given)."""
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, int) or value < minimum
            or (maximum is not None and value > maximum)):
        rng = f"{minimum:,}..{maximum:,}" if maximum is not None else f">= {minimum:,}"
        raise UsageError(f"{flag} must be an integer in {rng}, got {value!r}")
    return value


def seed_flag(value: int | None, flag: str = "--seed") -> int | None:
    """A ``--seed`` value: :func:`whole_number` in ``0..MAX_SEED``."""
    return whole_number(value, flag, 0, MAX_SEED)


#: The most torch threads a command may ask for (``--threads``): more is no faster, and
#: torch crashes on a million.
MAX_THREADS = 256


#: The most seeds one command line may name (a range such as 0-999999 is refused before
#: anything is planned).
MAX_SEEDS = 1000


def parse_seeds(text: str, flag: str = "--seeds") -> list[int]:
    """The seeds a ``--seeds`` value names, in every subcommand the same way: a comma list of
    seeds and inclusive ranges (``0,1,2``, ``0-4``, ``3``, ``0-2,7``), each seed >= 0, at most
    :data:`MAX_SEEDS`, no duplicates. :class:`UsageError` otherwise (one line)."""
    seeds: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise UsageError(f"{flag} takes seeds and ranges such as 0,1,2 or 0-4 (integers "
                             f">= 0), got {text!r}") from None
        if b < a:
            raise UsageError(f"{flag}: the range {part!r} is empty (write low-high)")
        if b - a + 1 + len(seeds) > MAX_SEEDS:
            raise UsageError(f"{flag}: at most {MAX_SEEDS} seeds, got {text!r}")
        seeds.extend(range(a, b + 1))
    if not seeds:
        raise UsageError(f"{flag} needs at least one seed, e.g. 0 or 0-4")
    if len(set(seeds)) != len(seeds):
        raise UsageError(f"{flag} names a seed twice: {text!r}")
    return seeds


def output_dir(path: str, flag: str = "-o") -> str:
    """Create the output directory ``path`` (and parents) or raise :class:`UsageError` with a
    one-line reason (an existing file, a read-only or virtual file system such as /proc);
    ``flag`` names the option that gave it."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{path} exists and is not a directory; choose another directory "
                         f"with {flag}")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create the output directory {path}: {e.strerror or e}") \
            from None
    return path


def add_device_option(p, what: str = "torch device") -> None:
    """``--device``: the torch device a command trains or runs on (default ``cpu``; the
    training checks it, e.g. ``cuda`` without CUDA is one line, exit 2)."""
    p.add_argument("--device", default="cpu", help=f"{what}: cpu (default) or cuda")


# --------------------------------------------------------------------------------------------
# your own tasks
# --------------------------------------------------------------------------------------------


#: the warning of every option that loads a task file (the text of
#: ``tasks.custom.RUNS_CODE_WARNING``, not imported: `rasp --help` must not build the catalogue)
TASK_FILE_WARNING = ("Loading the file RUNS ITS PYTHON CODE (it is imported as a module): give "
                     "only your own or trusted files")
#: what ``--help`` says about a task file (the user's own Python, run when it loads)
TASK_FILE_HELP = (
    "your own task, defined in a Python file: NAME, VOCAB (input tokens), KIND (seq2seq | "
    "membership | next_set), inputs(rng, n) and target(tokens), optional LENGTHS (training "
    "lengths, default 1-20); example: tasks/examples/more_a_than_b.py, contract: tasks/custom.py. "
    + TASK_FILE_WARNING)


def add_task_source_args(p, regex: bool = True, many: bool = True) -> None:
    """The options of a task outside the catalogue: ``--task-file FILE.py`` (repeatable when
    ``many``) and, with ``regex``, ``--regex PATTERN`` with its ``--alphabet``, ``--format``,
    ``--next-set-components`` and ``--task-name`` (:mod:`tasks.custom`)."""
    g = p.add_argument_group("your own task (outside the catalogue)")
    g.add_argument("--task-file", action="append" if many else "store", default=None,
                   metavar="FILE.py", help=TASK_FILE_HELP + (" (repeatable)" if many else ""))
    if not regex:
        return
    g.add_argument("--regex", default=None, metavar="PATTERN",
                   help="a language over single-character symbols as a regular expression "
                        "(e.g. '(aa)*', '1*', '[ab]*d[bc]*'), served by the code of Huang et "
                        "al.'s languages; tested up to length 150 as theirs")
    g.add_argument("--alphabet", default=None, metavar="SYMBOLS",
                   help="the regex's symbols in value order, e.g. 01 (default: the "
                        "expression's, sorted)")
    g.add_argument("--format", choices=("membership", "next_set"), default="membership",
                   help="the regex task's format: membership (BOS w SEP -> yes|no EOS, "
                        "default) or next_set (Huang et al.'s next-character sets)")
    g.add_argument("--next-set-components", default=None, metavar="LIST",
                   help="next_set: the comma-separated symbols and/or EOS a label lists "
                        "(default: every symbol and EOS)")
    g.add_argument("--task-name", default=None, metavar="NAME",
                   help="the regex task's name (default regex_<hash>)")


def tasks_from_args(args) -> list:
    """The tasks of :func:`add_task_source_args`' options, loaded and registered
    (:func:`tasks.catalogue.register_task`) so every consumer finds them by name.

    Raises:
        tasks.custom.TaskFileError: a broken task file or bad expression (one line, exit 2).
        UsageError: regex-only options without ``--regex``.
    """
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from tasks.catalogue import register_task
    from tasks.custom import load_task_file, regex_task
    files = getattr(args, "task_file", None) or []
    files = [files] if isinstance(files, str) else files
    out = [register_task(load_task_file(f)) for f in files]
    pattern = getattr(args, "regex", None)
    if pattern is None:
        extra = [f for f in ("alphabet", "next_set_components", "task_name")
                 if getattr(args, f, None) is not None]
        if extra:
            raise UsageError(f"--{extra[0].replace('_', '-')} is an option of --regex")
        return out
    comps = args.next_set_components
    if comps is not None and args.format != "next_set":
        raise UsageError("--next-set-components is for --format next_set")
    out.append(register_task(regex_task(
        pattern, args.format, list(args.alphabet) if args.alphabet else None, args.task_name,
        [c.strip() for c in comps.split(",") if c.strip()] if comps is not None else None)))
    return out


def load_program(task, path: str, name: str | None):
    """Run a .rasp file (causal mode when the task's programs are causal) and return the s-op
    ``name``. Raises UsageError for a missing file or name, RASPError for a program error."""
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from rasp.ir import SOp
    if not os.path.isfile(path):
        raise UsageError(f"no such file: {path}")
    name = name or task.reference_name
    if name is None:
        raise UsageError(f"task {task.name!r} has no reference program to name the s-op: give "
                         f"the s-op of {path} with --name")
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from rasp_model.files import read_text
    env = run_source(read_text(path, "a RASP program"), filename=path,
                     causal=bool(task.causal))        # the one reader: a regular file, capped
    if name is None or name not in env:
        own = [n for n in env.own_names() if not n.startswith("_")]
        raise UsageError(f"{path} defines no s-op {name!r}; defined: "
                         + (", ".join(own) if own else "(nothing)") + " (choose with --name)")
    sop = env[name]
    if not isinstance(sop, SOp):
        raise UsageError(f"{name!r} in {path} is not an s-op (it is {type(sop).__name__})")
    return sop


# --------------------------------------------------------------------------------------------
# positional encodings, settings, the grid runner (train, sweep, replicate)
# --------------------------------------------------------------------------------------------


PE_HELP = "nope, ape_learned, ape_sinusoidal, t5, alibi, rope, or 'all' (comma-separated list ok)"


def parse_pes(text):
    """PE names from ``--pe`` text (comma list or ``all``: the six built-ins,
    :data:`rasp_model.pe_names.PE_NAMES`); UsageError for a name no encoding is registered
    under (:func:`rasp_model.pe_names.registered_pes`: the built-ins and any encoding this
    process registered with ``register_pe``)."""
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none);
    # the registry is torch-free, so a usage error still answers before torch loads
    from rasp_model.pe_names import PE_NAMES, registered_pes
    if not text:
        raise UsageError(f"--pe is required: {PE_HELP}")
    if text == "all":
        return list(PE_NAMES)
    pes = [s.strip() for s in text.split(",") if s.strip()]
    if not pes:
        raise UsageError(f"--pe {text!r} names no positional encoding: {PE_HELP}")
    bad = [s for s in pes if s not in registered_pes()]
    if bad:
        raise UsageError(f"unknown positional encoding {bad[0]!r}; known: "
                         f"{', '.join(registered_pes())} (or 'all')")
    return pes


PE_PRESET_HELP = ("another training preset for one PE (repeatable), e.g. --pe-preset "
                  "ape_learned=demo_random_offsets: the random position offsets the theories "
                  "for a learned APE assume, as the main job trains it")


def parse_pe_presets(items) -> dict:
    """``--pe-preset PE=PRESET`` items as ``{pe: preset}``; :class:`UsageError` naming the
    item when it is not ``PE=PRESET`` with a known PE and training preset."""
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.training.configs import TRAIN_PRESETS
    from rasp_model.pe_names import registered_pes
    out = {}
    for item in items or ():
        pe, sep, preset = item.partition("=")
        pe, preset = pe.strip(), preset.strip()
        if not sep or pe not in registered_pes() or preset not in TRAIN_PRESETS:
            raise UsageError(f"--pe-preset {item!r}: expected PE=PRESET with PE one of "
                             f"{', '.join(registered_pes())} and PRESET one of "
                             f"{', '.join(TRAIN_PRESETS)}")
        out[pe] = preset
    return out


def parse_overrides(items) -> dict:
    """``--set KEY=VALUE`` items as a dict: each value read as JSON, else kept as the string
    (``act=gelu``); :class:`UsageError` without ``=`` or for a value nested too deeply."""
    out = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--set expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        try:
            out[k.strip()] = json.loads(v)
        except json.JSONDecodeError:
            out[k.strip()] = v  # a bare string such as act=gelu
        except RecursionError:
            raise UsageError(f"--set {k.strip()}: the value is nested too deeply") from None
    return out


def grid_options(p) -> None:
    """Add the options of the grid runner (``analysis.training.grid``) to a subcommand's parser."""
    g = p.add_argument_group("grid runner (Ray)")
    g.add_argument("--address", default=None, metavar="HOST:PORT",
                   help="Ray cluster to run on (default: $RAY_ADDRESS, else a local Ray "
                        "instance sized to this machine); run directories (-o) must then be "
                        "on a path every node sees")
    g.add_argument("--serial", action="store_true",
                   help="train the runs in this process, one at a time (debugging)")
    g.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="wall-clock budget: no new run starts when it would not finish in "
                        "time; the rest is listed and trained by the next call")
    g.add_argument("--cpus-per-run", type=int, default=1, metavar="N",
                   help="CPUs (and torch threads) each run declares (default 1)")
    g.add_argument("--gpus-per-run", type=float, default=None, metavar="F",
                   help="GPU fraction each run declares with --device cuda (default 0.25)")
    g.add_argument("--stack", type=int, default=None, metavar="N",
                   help="train up to N seeds of one configuration as one stacked model per "
                        "Ray task (each still its own run directory; default: 16 with "
                        "--device cuda, 1 on a CPU, where it does not pay)")
    g.add_argument("--no-stack", action="store_true",
                   help="one run per Ray task (same as --stack 1)")


def check_grid_options(args) -> None:
    """The grid runner's numbers, checked before any run is planned or Ray is started:
    ``--budget`` finite >= 0, ``--cpus-per-run`` 1..1024, ``--gpus-per-run`` finite in
    (0, 64], ``--stack`` 1..1024. UsageError (exit 2) naming the flag."""
    finite_number(args.budget, "--budget", allow_equal=True)
    whole_number(args.cpus_per_run, "--cpus-per-run", 1, 1024)
    if finite_number(args.gpus_per_run, "--gpus-per-run") is not None and args.gpus_per_run > 64:
        raise UsageError(f"--gpus-per-run must be at most 64, got {args.gpus_per_run!r}")
    whole_number(args.stack, "--stack (1 = no stacking)", 1, 1024)


def run_grid_from_args(runs, args, runs_root):
    """Run ``runs`` (``GridRun`` list) with the grid options of ``args``; GridError -> usage
    error (exit 2)."""
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.training.grid import GridError, run_grid
    check_grid_options(args)
    stack = 1 if args.no_stack else args.stack
    try:
        return run_grid(runs, runs_root=runs_root, address=args.address, budget_s=args.budget,
                        serial=args.serial, device=args.device, num_cpus=args.cpus_per_run,
                        num_gpus=args.gpus_per_run, force=args.force,
                        progress=not args.no_progress, stack=stack)
    except GridError as e:
        raise UsageError(str(e)) from None


# --------------------------------------------------------------------------------------------
# the program searches (score, validate-predictor)
# --------------------------------------------------------------------------------------------


def add_search_args(p) -> None:
    """The search flags of ``rasp score`` and ``rasp validate-predictor``: budgets in work."""
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.prediction.budget import (DEFAULT_CRASP_BUDGET, DEFAULT_SEARCH_BUDGET,
                                            parse_budget)
    # nargs="?": an old "--search SECONDS" reaches search_settings (a clear error); a task
    # name right after --search is a task
    p.add_argument("--search", nargs="?", const=True, default=False, metavar="",
                   help="run the shortest-program searches with their default work budgets: "
                        "a found program or a certificate becomes evidence")
    p.add_argument("--search-budget", type=parse_budget, default=None, metavar="N",
                   help="candidate programs per RASP-L search (implies --search; default "
                        f"{DEFAULT_SEARCH_BUDGET:,}; 40M, 500k also read)")
    p.add_argument("--crasp-budget", type=parse_budget, default=None, metavar="N",
                   help="candidate Booleans and counts per C-RASP search (implies --search; "
                        f"default {DEFAULT_CRASP_BUDGET:,})")
    p.add_argument("--search-time-cap", type=float, default=None, metavar="S",
                   help="a wall-clock safety stop per search in seconds (default none): a "
                        "search that hits it gives 'unknown (time cap)', never another verdict")


def search_settings(args, names: list) -> dict:
    """``predict``'s search keywords from :func:`add_search_args`' flags. An old ``--search
    SECONDS`` gets a clear error; a task name right after ``--search`` joins ``names``.

    Raises:
        UsageError: ``--search`` with a number, or a bad time cap.
    """
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.prediction.budget import DEFAULT_CRASP_BUDGET, DEFAULT_SEARCH_BUDGET
    if isinstance(args.search, str):
        try:
            float(args.search)
        except ValueError:
            names.insert(0, args.search)        # "--search TASK": a flag, then a task
        else:
            raise UsageError(f"--search {args.search}: --search no longer takes seconds "
                             "(searches stop on work, so a verdict does not depend on the "
                             "machine's load); use --search for the default budgets, or "
                             "--search-budget N / --crasp-budget N (candidates), and "
                             "optionally --search-time-cap S")
    finite_number(args.search_time_cap, "--search-time-cap")
    # as `rasp search --budget`: a search of no candidates certifies nothing
    whole_number(args.search_budget, "--search-budget (candidate programs)", 1)
    whole_number(args.crasp_budget, "--crasp-budget (candidate Booleans and counts)", 1)
    on = bool(args.search or args.search_budget is not None or args.crasp_budget is not None)
    return {"search": on,
            "search_budget": DEFAULT_SEARCH_BUDGET if args.search_budget is None
            else args.search_budget,
            "crasp_budget": DEFAULT_CRASP_BUDGET if args.crasp_budget is None
            else args.crasp_budget,
            "search_time_cap": args.search_time_cap}


# --------------------------------------------------------------------------------------------
# the report (report, demo)
# --------------------------------------------------------------------------------------------


def add_report_arguments(p, default_preset: str = "tour") -> None:
    """Options shared by ``rasp report`` and ``rasp demo`` (whose default study preset is
    ``"main"``; the presets are :data:`analysis.reporting.presets.REPORT_PRESETS`)."""
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.reporting.presets import DEFAULT_TASKS
    p.add_argument("tasks", nargs="*", metavar="TASK",
                   help=f"tasks to report on (default: {' '.join(DEFAULT_TASKS)})")
    p.add_argument("-o", "--out", default="reports", metavar="DIR",
                   help="output directory (default: reports/, ignored by git)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--demo", dest="preset", action="store_const", const="main",
                   help="study preset 'main', the main job's experiment: the small model for "
                        "3,000 steps at batch 32 (training preset demo), 5 seeds per PE, the "
                        "learned APE with random position offsets (default of `rasp demo`)")
    g.add_argument("--quick", dest="preset", action="store_const", const="tour",
                   help="study preset 'tour', a smoke test: 600 steps (training preset "
                        "quick), 1 seed per PE + 2 NoPE seeds (default of `rasp report`; the "
                        "encodings do not separate at this budget)")
    g.add_argument("--full", dest="preset", action="store_const", const="confirmation",
                   help="study preset 'confirmation', the demo's experiment on more "
                        "tasks: `rasp demo --full` adds a "
                        "task the demo did not select for (count) and reports whether each "
                        "claim is confirmed there")
    p.set_defaults(preset=default_preset)
    p.add_argument("--seeds", default=None, metavar="SEEDS",
                   help="training seeds per PE, e.g. 0-6 (default: the study preset's: 0-4 "
                        "for --demo, 0-6 for --full, 0 and NoPE 0-1 for --quick); the command "
                        "says before training what they can decide (5 seeds: a comparison "
                        "supported, not contradicted; 7: both; fewer than 5: nothing)")
    p.add_argument("--pe", default="all",
                   help="comma-separated positional encodings (default: all six)")
    p.add_argument("--runs", metavar="DIR", help="root of the run directories")
    add_device_option(p, "torch device for training")
    p.add_argument("-j", "--jobs", type=int, default=None,
                   help="CPUs of the local Ray instance = training runs side by side "
                        "(default: all cores)")
    p.add_argument("--address", default=None, metavar="HOST:PORT",
                   help="train missing runs on this Ray cluster (default: $RAY_ADDRESS, else a "
                        "local Ray instance); --runs must be a path every node sees")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="wall-clock budget: no new training run starts when it would not "
                        "finish in time (skipped runs are named in the report and trained by "
                        "the next call)")
    p.add_argument("--no-train", action="store_true",
                   help="do not train missing runs; report what exists and say what is missing")
    p.add_argument("--variant", choices=["standard", "kazemnejad"], default="standard",
                   help="JSD variant (default standard)")
    p.add_argument("--results", metavar="FILE",
                   help="also write the results document (Markdown: claims with labels, "
                        "per-seed numbers, the command at its top), e.g. docs/results.md")
    p.add_argument("--replication", metavar="DIR", default=None,
                   help="cell files of `rasp replicate huang` whose checked predictions the "
                        "report shows for Huang et al.'s tasks (default: docs/replication of "
                        "this checkout)")
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.prediction.budget import DEFAULT_CRASP_BUDGET, DEFAULT_SEARCH_BUDGET
    search = default_preset == "main"
    p.add_argument("--search", dest="search", action="store_true", default=search,
                   help="run the program searches where the checkers leave a prediction "
                        f"unknown (work budgets: RASP-L {DEFAULT_SEARCH_BUDGET:,} candidate "
                        f"programs, C-RASP {DEFAULT_CRASP_BUDGET:,} candidate Booleans and "
                        "counts; minutes per task)"
                        + (" (the default here)" if search else ""))
    p.add_argument("--no-search", dest="search", action="store_false",
                   help="no program searches: an unknown prediction stays unknown"
                        + ("" if search else " (the default here)"))
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    p.add_argument("--force", action="store_true",
                   help="replace a report of another preset in the output directory (without "
                        "it, a report never overwrites one of another preset: write it "
                        "elsewhere with -o)")


def report_options(args):
    """The report's options (``ReportOptions``) from :func:`add_report_arguments`' flags;
    :class:`UsageError` for an unknown PE, ``--jobs`` < 1 or a bad ``--budget``."""
    pes = parse_pes(args.pe)
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be >= 1")
    finite_number(args.budget, "--budget", allow_equal=True)
    seeds = parse_seeds(args.seeds) if getattr(args, "seeds", None) else None
    # start-up: torch loads once the arguments are checked (a usage error answers at once)
    from analysis.reporting.report import ReportOptions
    return ReportOptions(preset=args.preset, pes=pes, runs_root=args.runs, device=args.device,
                         # NoPE's other-seed baseline needs two NoPE seeds
                         seeds=seeds, nope_seeds=None if seeds is None else
                         (0 if len(seeds) > 1 else 2),
                         train_missing=not args.no_train, variant=args.variant,
                         progress=not args.quiet, jobs=args.jobs,
                         budget_s=args.budget, address=args.address,
                         replication_dir=getattr(args, "replication", None),
                         search=getattr(args, "search", False), started_at=STARTED)


def generate_report_from_args(args) -> int:
    """Write the report of :func:`add_report_arguments`' flags (and ``--results``); 0."""
    own = [t.name for t in tasks_from_args(args)]      # your own tasks, found by name
    opts = report_options(args)                        # the flags checked before torch loads
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.evidence.statistics import decidable_with
    from analysis.reporting.report import ReportError, generate_report
    try:
        n_seeds = len(opts.resolved()["seeds"])
    except ReportError as e:
        raise UsageError(str(e))
    if not args.quiet:                 # what the seeds can decide, said before any training
        print(f"[report] {decidable_with(n_seeds)['sentence']}", file=sys.stderr)
    try:
        path = generate_report((args.tasks + own) or None, args.out, opts,
                               force=getattr(args, "force", False))
    except ReportError as e:
        raise UsageError(str(e))
    print(f"report written to {path.resolve()}")
    if args.results:
        write_results_file(path.parent / "report.json", args.results, args.command_line)
    return 0


def write_results_file(report_json, results_path, command: str) -> None:
    """Write the results document of a report (``--results``), naming the command line."""
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    from analysis.reporting.results import write_results

    doc = json.loads(Path(report_json).read_text())
    try:
        out = write_results(doc, results_path, command)
    except OSError as e:
        raise UsageError(f"cannot write {results_path}: {e.strerror or e}")
    print(f"results written to {out}")
