"""Registered predictions: written before any run, checked later against the file as written.

A prediction is evidence only when it was made before the outcome was seen
(``../shared/spec/predictor.md`` §5: Huang et al.'s 50 cells are in-sample for the search
grammars, built with those cells in view). ``rasp score ... --register FILE.json``
(:func:`write_registration`) writes the predictions with what they were made from: the code
commit (:func:`analysis.training.trainer.git_commit`), the search budgets, every task's source
(a catalogue name; a task file's absolute path and sha256; a regular expression) and the time.
``rasp validate-predictor --registered FILE.json`` (:func:`read_registration`) checks later
runs against the predictions *as written* -- they are never recomputed -- and refuses when a
task file changed since (its sha256 differs), since the predictions are then about another
task. Tasks outside the catalogue are flagged (``in_catalogue``) so that their results are
reported apart from the catalogue's (:func:`analysis.experiment.validate.format_validation`).

Edits show (issue 46 item 5):

- ``sha256`` (version 2): one hash over the whole document -- predictions, budgets, every task's
  source (a regular expression, a task file's path and sha256, a catalogue name), the code
  state, the time -- (:func:`registration_sha256`: canonical JSON without the field itself),
  printed by ``rasp score --register`` for the user to publish or commit. Reading refuses a
  document whose contents no longer give its hash (an edited prediction, a removed hash) and,
  with ``expect_sha256``, one whose hash is not the published one. Version 1 files (before
  hashes, e.g. ``docs/registered/`` of issue 40) stay readable: "registered before hashes; not
  checkable" (:func:`hash_status`).
- ``commit`` is recorded only from a clean tree (:func:`code_state`); otherwise ``code`` says
  "uncommitted changes", the HEAD they sit on and the sha256 of ``git diff HEAD``.
- :func:`refuse_existing_runs`: a (task, PE) cell whose runs already exist under the runs root
  is not registered (a prediction written after its runs is not a test).
- :func:`provenance`: when the registration first appeared in git (``git log --diff-filter=A``;
  "not in git" otherwise), whether the file was edited since, and whether that precedes the
  creation time of every run checked against it (their ``config.json`` ``created``).

Each prediction names the training protocol its theories assume (``assumes``: e.g.
``{"position_offsets": "random"}`` for a learned APE, :func:`analysis.prediction.theories.
required_offsets`, which the encoding states; its ``theory`` sentence says it in words).

The file: ``{"format", "version", "registered_at" (UTC, ISO 8601), "commit", "code":
{"state", "head", "diff_sha256", "untracked"}, "command", "budgets", "tasks": [{"name",
"in_catalogue", "source"}], "predictions": [{"task", "pe", "prediction", "prediction_label",
"theory", "theories", "assumes", "size", "size_lower_bound", "program_source", "program"}],
"sha256"}``.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from datetime import datetime
from pathlib import Path

from rasp.errors import RASPError
from rasp_model import files  # the one reader of files we did not write
from tasks.catalogue import register_task, task_from_source
from tasks.custom import RUNS_CODE_WARNING, task_source, file_sha256

__all__ = ["FORMAT", "VERSION", "RegisteredError", "write_registration", "read_registration",
           "registered_tasks", "registered_predictions", "registration_sha256", "hash_status",
           "code_state", "existing_runs", "refuse_existing_runs", "provenance",
           "format_provenance", "NOT_CHECKABLE"]

#: the ``format`` field of a registration file
FORMAT = "rasp-lab registered predictions"
VERSION = 2
#: what a registration written before hashes (version 1) is, as the reports say it
NOT_CHECKABLE = "registered before hashes; not checkable"


class RegisteredError(RASPError):
    """A registration file that cannot be written or read, or whose task file changed."""


_OPT_STR = (str, type(None))
_OPT_INT = (int, type(None))
#: a task's ``source`` (:func:`tasks.custom.task_source`): a catalogue name, a task file or a
#: regular expression, told apart by their keys
_SOURCES = ({"catalogue": str},
            {"task_file": str, "name": str, "sha256": str},
            {"regex": str, "format": _OPT_STR, "alphabet": _OPT_STR,
             "components": ([str], type(None)), "name": _OPT_STR})
#: the fields of a registration file its readers use, checked field by field
#: (:func:`rasp_model.files.check_json`)
SCHEMA = {
    "format": str, "version": int, "registered_at": _OPT_STR, "commit": _OPT_STR,
    "command": _OPT_STR, "sha256": _OPT_STR,
    "code": ({"state": str, "head": _OPT_STR, "diff_sha256": _OPT_STR,
              "untracked": _OPT_INT}, type(None)),
    "budgets": ({"search": (bool, type(None)), "raspl": _OPT_INT, "crasp": _OPT_INT,
                 "unit": _OPT_STR, "time_cap_s": (float, type(None))}, type(None)),
    "tasks": [{"name": str, "in_catalogue": (bool, type(None)), "source": dict}],
    "predictions": [{"task": str, "pe": _OPT_STR, "prediction": str,
                     "prediction_label": str, "theory": _OPT_STR,
                     "theories": {str: {"prediction": str, "label": _OPT_STR,
                                        "reason": _OPT_STR}},
                     "assumes": ({str: str}, type(None)),
                     "size": _OPT_INT, "size_lower_bound": _OPT_INT,
                     "program_source": _OPT_STR, "program": _OPT_STR}],
}


def _check_source(src: dict, where: str, field: str) -> None:
    """A task's ``source``: exactly one of its kinds (:data:`_SOURCES`), checked."""
    kinds = [k for k in ("catalogue", "task_file", "regex") if k in src]
    if len(kinds) != 1:
        raise RegisteredError(f"{where}: field {field} must name one of catalogue, task_file "
                              f"or regex, got keys {sorted(map(str, src))[:5]}")
    schema = _SOURCES[("catalogue", "task_file", "regex").index(kinds[0])]
    try:
        files.check_json(src, schema, where, field)
    except files.FileReadError as e:
        raise RegisteredError(str(e)) from None


def _prediction_record(p) -> dict:
    # start-up: the theories' table only (no search code)
    from analysis.prediction.theories import required_offsets
    need = required_offsets(p.pe)
    return {"task": p.task, "pe": p.pe, "prediction": p.prediction,
            "prediction_label": p.prediction_label, "theory": p.theory,
            "theories": {k: {"prediction": v["prediction"],
                             "label": v.get("label") or v["prediction"],
                             "reason": v.get("reason")} for k, v in p.theories.items()},
            "assumes": {"position_offsets": need} if need else None,
            "size": p.size, "size_lower_bound": p.size_lower_bound,
            "program_source": p.program_source, "program": p.source or p.program}


def write_registration(path, preds, task_objects, search: dict, command: str | None = None,
                       repo=None) -> dict:
    """Write ``preds`` (:class:`analysis.prediction.predict.Prediction` list) of the tasks
    ``task_objects`` to ``path`` (module docstring) and return the document, its ``sha256``
    (:func:`registration_sha256`) last.

    Args:
        search: the predictions' search settings (``search``, ``search_budget``,
            ``crasp_budget``, ``search_time_cap``), recorded as the budgets.
        command: the command line that made them.
        repo: the checkout whose code made them (None: this toolkit's,
            :func:`code_state`); its commit is recorded only when its tree is clean.

    Raises:
        RegisteredError: the file cannot be written (the message names it).
    """
    code = code_state(repo)
    doc = {"format": FORMAT, "version": VERSION,
           "registered_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "commit": code["head"] if code["state"] == "clean" else None, "code": code,
           "command": command,
           "budgets": {"search": bool(search.get("search")),
                       "raspl": search.get("search_budget"), "crasp": search.get("crasp_budget"),
                       "unit": "candidates", "time_cap_s": search.get("search_time_cap")},
           "tasks": [], "predictions": [_prediction_record(p) for p in preds]}
    seen = set()
    for t in task_objects:
        if t.name not in seen:
            seen.add(t.name)
            src = task_source(t)
            doc["tasks"].append({"name": t.name, "in_catalogue": "catalogue" in src,
                                 "source": src})
    doc["sha256"] = registration_sha256(doc)
    try:
        # the one writer: a fresh temporary file, then os.replace (a planted link or FIFO
        # at ``path`` is replaced, never followed or opened)
        files.atomic_write_bytes(path, (json.dumps(doc, indent=1) + "\n").encode("utf-8"))
    except OSError as e:
        raise RegisteredError(f"cannot write {path}: {e.strerror or e}") from None
    return doc


def registration_sha256(doc: dict) -> str:
    """The sha256 of a registration: its canonical JSON (sorted keys, no spaces, UTF-8)
    without the ``sha256`` field itself -- every prediction, budget, task source (regular
    expressions and task files' hashes included), the code state and the time."""
    body = {k: v for k, v in doc.items() if k != "sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def hash_status(doc: dict, path="the registration", expect_sha256: str | None = None) -> str:
    """``"sha256 <hex> (checked)"`` for a document whose contents give its recorded hash, or
    :data:`NOT_CHECKABLE` for a version-1 document without one.

    Raises:
        RegisteredError: the contents do not give the recorded hash (the file was edited), a
            version-2 document without a hash, or a hash other than ``expect_sha256`` (the
            one published at registration); one line naming ``path`` and both hashes.
    """
    recorded = doc.get("sha256")
    if recorded is None and doc.get("version", 1) < 2 and expect_sha256 is None:
        return NOT_CHECKABLE
    if recorded is None and doc.get("version", 1) < 2:
        raise RegisteredError(f"{path}: {NOT_CHECKABLE} (version {doc.get('version')}): it "
                              "cannot be checked against a published sha256")
    if recorded is None:
        raise RegisteredError(f"{path}: no sha256 in a registration of version "
                              f"{doc.get('version')} (written with one): refused as edited")
    now = registration_sha256(doc)
    if now != recorded:
        raise RegisteredError(
            f"{path}: the registration was edited after it was written (its contents give "
            f"sha256 {now[:16]}..., it records {str(recorded)[:16]}...): refused")
    if expect_sha256 is not None and expect_sha256.strip().lower() != recorded:
        raise RegisteredError(
            f"{path}: sha256 {recorded[:16]}... is not the published {expect_sha256[:16]}...: "
            "another registration than the one published; refused")
    return f"sha256 {recorded} (checked: the contents give it)"


def read_registration(path, expect_sha256: str | None = None) -> dict:
    """The registration document at ``path``, after checking it: the format, its own sha256
    (:func:`hash_status`; ``expect_sha256``: the hash published at registration), and every
    task file's sha256 against the file as it is now. A task file no longer at its recorded path is
    looked for beside ``path`` under its name (a registration moved with its task file, e.g.
    ``docs/registered/`` in another clone); the sha256 still decides.

    Raises:
        RegisteredError: unreadable or not a registration file; edited since it was written
            or not the published one (:func:`hash_status`); a task file that is missing or
            changed since registration (its path and both hashes named).
    """
    what = "registered predictions"
    try:
        doc = files.read_json(Path(path), what)
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise RegisteredError(f"{path} is not a file of `rasp score --register` (its "
                                  f"format field is not {FORMAT!r})")
        files.check_json(doc, SCHEMA, f"{path}: {what}")
    except FileNotFoundError as e:
        raise RegisteredError(f"cannot read {path}: {e.strerror or e}") from None
    except files.FileReadError as e:
        raise RegisteredError(str(e)) from None
    except OSError as e:
        raise RegisteredError(f"cannot read {path}: {e.strerror or e}") from None
    for i, t in enumerate(doc["tasks"]):
        _check_source(t["source"], f"{path}: {what}", f"tasks[{i}].source")
    hash_status(doc, path, expect_sha256)          # before the task files' paths are moved
    for i, p in enumerate(doc["predictions"]):
        if p["task"] not in {t["name"] for t in doc["tasks"]}:
            raise RegisteredError(f"{path}: {what}: field predictions[{i}].task names "
                                  f"{p['task'][:60]!r}, which is not among its tasks")
    for t in doc["tasks"]:
        src = t["source"]
        if "task_file" not in src:
            continue
        f = src["task_file"]
        beside = Path(path).parent / Path(f).name
        if not Path(f).is_file() and beside.is_file():
            # a registration kept with its task file (a clone, a copied folder): the file
            # beside it, if its sha256 is the registered one (checked below)
            f = src["task_file"] = str(beside.resolve())
        if not Path(f).is_file():
            raise RegisteredError(f"{path}: the task file {f} of {t.get('name')!r} is gone; the "
                                  "registered predictions are about the file as it was")
        now = file_sha256(f)
        if now != src.get("sha256"):
            raise RegisteredError(
                f"{path}: the task file {f} changed since registration (sha256 "
                f"{str(src.get('sha256'))[:12]}... then, {now[:12]}... now): the registered "
                "predictions are about the file as it was; register the new file again")
    return doc


def registered_tasks(doc: dict, task_files=(), trust: bool = False, where: str = "") -> list:
    """The tasks of a checked document (:func:`read_registration`), loaded and registered
    (:func:`tasks.catalogue.register_task`; a task file's code runs) so runs can find them.

    A task file named only inside the document is code the user did not ask to run: it is
    loaded only when it is one of ``task_files`` (the files the user named, e.g. with
    ``--task-file``; compared by resolved path) or with ``trust``.

    Raises:
        RegisteredError: a task file neither named nor trusted (``where`` names the document).
    """
    named = {str(Path(f).resolve()) for f in task_files}
    for t in doc["tasks"]:
        f = t["source"].get("task_file")
        if f is not None and not trust and str(Path(f).resolve()) not in named:
            raise RegisteredError(
                f"{where or 'the registration'}: the task {t['name'][:60]!r} is defined by the "
                f"task file {f}, named only inside the registration; {RUNS_CODE_WARNING}. "
                f"Name it again with --task-file {f}, or pass --trust-task-files")
    out = []
    for t in doc["tasks"]:
        task = task_from_source(t["source"])
        out.append(task if "catalogue" in t["source"] else register_task(task))
    return out


def registered_predictions(doc: dict) -> dict:
    """``{(task, pe): prediction record}`` of a document, each with ``in_catalogue``."""
    inside = {t["name"]: bool(t.get("in_catalogue")) for t in doc["tasks"]}
    return {(p["task"], p["pe"]): {**p, "in_catalogue": inside.get(p["task"], True)}
            for p in doc["predictions"]}


# -- the code, the runs and git ---------------------------------------------------------------

def _git(args: list, cwd) -> bytes | None:
    """``git ARGS`` run in ``cwd`` (no shell): its stdout, or None when git is missing, fails
    (not a repository) or takes over 30 s."""
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def code_state(repo=None) -> dict:
    """The state of the code that made a registration: ``{"state": "clean" | "uncommitted
    changes" | "not in git", "head", "diff_sha256" (sha256 of ``git diff HEAD``, with
    uncommitted changes), "untracked" (files git does not ignore, not in the diff)}``.
    ``repo``: a directory of the checkout (None: this toolkit's)."""
    where = Path(repo) if repo is not None else Path(__file__).resolve().parent
    head = _git(["rev-parse", "HEAD"], where)
    if head is None:
        return {"state": "not in git", "head": None, "diff_sha256": None, "untracked": None}
    status = _git(["status", "--porcelain", "--untracked-files=all"], where) or b""
    untracked = sum(1 for line in status.splitlines() if line.startswith(b"??"))
    if not status.strip():
        return {"state": "clean", "head": head.decode().strip(), "diff_sha256": None,
                "untracked": 0}
    diff = _git(["diff", "--no-ext-diff", "--no-color", "--binary", "HEAD"], where) or b""
    return {"state": "uncommitted changes", "head": head.decode().strip(),
            "diff_sha256": hashlib.sha256(diff).hexdigest(), "untracked": untracked}


def existing_runs(runs_root, cells) -> dict:
    """``{(task, pe): [run directory, ...]}`` of the cells (``(task, pe)``; pe None: any PE)
    that already have runs under ``runs_root`` (``<task>/<pe>/<run>/config.json``, the layout
    of :mod:`analysis.training.runs`)."""
    root = Path(runs_root)
    out = {}
    for task, pe in cells:
        base = root / task
        pes = [base / pe] if pe is not None else (
            sorted(d for d in base.iterdir() if d.is_dir()) if base.is_dir() else [])
        found = [str(r.parent) for d in pes if d.is_dir()
                 for r in sorted(d.glob("*/config.json"))]
        if found:
            out[(task, pe)] = found
    return out


def refuse_existing_runs(runs_root, cells) -> None:
    """Refuse to register cells whose runs already exist under ``runs_root``.

    Raises:
        RegisteredError: one line naming every such cell and (up to three of) its runs.
    """
    found = existing_runs(runs_root, cells)
    if not found:
        return
    said = "; ".join(f"{t}/{pe or '*'}: {', '.join(d[:3])}" + (f" and {len(d) - 3} more"
                                                               if len(d) > 3 else "")
                     for (t, pe), d in found.items())
    raise RegisteredError(
        f"cannot register {len(found)} cell(s) whose runs already exist under {runs_root} "
        f"({said}): a prediction written after its runs is not a test; register before "
        "training, or name the runs root the checks will train into with --runs")


def first_in_git(path) -> dict:
    """When the file at ``path`` first appeared in git (``git log --diff-filter=A --format=%H
    %cI -- FILE``, its oldest entry): ``{"commit", "date", "edited_since" (the file now differs
    from that commit's), "note"}``; ``note`` "not in git" when no commit adds it."""
    p = Path(path).resolve()
    out = _git(["log", "--diff-filter=A", "--format=%H %cI", "--", p.name], p.parent)
    lines = (out or b"").decode("utf-8", "replace").split("\n")
    lines = [x.split() for x in lines if len(x.split()) == 2]
    if not lines:
        return {"commit": None, "date": None, "edited_since": None, "note": "not in git"}
    commit, date = lines[-1]
    then = _git(["show", f"{commit}:./{p.name}"], p.parent)
    try:
        edited = then is None or then != p.read_bytes()
    except OSError:
        edited = None
    return {"commit": commit, "date": date, "edited_since": edited,
            "note": f"first in git at {commit[:12]} ({date})"
                    + ("; the file differs from that commit's" if edited else "")}


def _when(text):
    try:
        t = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo is not None else None


def provenance(path, run_dirs=(), expect_sha256: str | None = None) -> dict:
    """Where a registration stands against the runs checked with it: ``{"file", "sha256"
    (:func:`hash_status`), "code", "git" (:func:`first_in_git`), "runs", "runs_created":
    [earliest, latest], "before_git": runs created before it first appeared in git, "before_
    registered_at": before the time it records, "precedes": True / False / None (not in git)}``.

    Raises:
        RegisteredError: unreadable, or edited since written (:func:`hash_status`).
    """
    try:
        doc = files.read_json(Path(path), "registered predictions")
    except (files.FileReadError, OSError) as e:
        raise RegisteredError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}"
                              ) from None
    status = hash_status(doc, path, expect_sha256)
    created = []
    for d in dict.fromkeys(map(str, run_dirs)):
        try:
            cfg = files.read_json(Path(d) / "config.json", "run configuration")
        except (files.FileReadError, OSError):
            continue
        t = _when(cfg.get("created")) if isinstance(cfg, dict) else None
        if t is not None:
            created.append(t)
    git = first_in_git(path)
    at_git, at_doc = _when(git["date"]), _when(doc.get("registered_at"))
    code = doc.get("code") or {"state": f"commit {doc.get('commit')} (before hashes: whether "
                               "its tree was clean is not recorded)" if doc.get("commit")
                               else "not recorded", "head": doc.get("commit")}
    return {"file": str(path), "sha256": status, "code": code, "git": git,
            "runs": len(created),
            "runs_created": [min(created).isoformat(), max(created).isoformat()]
            if created else None,
            "before_git": sum(t < at_git for t in created) if at_git else None,
            "before_registered_at": sum(t < at_doc for t in created) if at_doc else None,
            "precedes": (not any(t < at_git for t in created))
            if at_git and created else None}


def format_provenance(prov: dict) -> list[str]:
    """The lines of :func:`provenance` for a report."""
    code = prov["code"]
    code_line = (f"commit {code['head']}" if code.get("state") == "clean" else
                 f"uncommitted changes on {str(code.get('head'))[:12]} (git diff HEAD sha256 "
                 f"{code.get('diff_sha256')})" if code.get("state") == "uncommitted changes"
                 else str(code.get("state")))
    lines = [f"Registration {prov['file']}: {prov['sha256']}; code: {code_line}.",
             f"In git: {prov['git']['note']}."]
    n = prov["runs"]
    if not n:
        lines.append("Runs: no creation time read.")
    elif prov["precedes"] is None:
        lines.append(f"Runs: {n}, created {prov['runs_created'][0]} .. "
                     f"{prov['runs_created'][1]}; the registration is not in git, so nothing "
                     f"shows it came first ({prov['before_registered_at'] or 0} run(s) created "
                     "before the time it records).")
    elif prov["precedes"]:
        lines.append(f"Runs: {n}, created {prov['runs_created'][0]} .. "
                     f"{prov['runs_created'][1]}: all after the registration first appeared "
                     "in git.")
    else:
        lines.append(f"Runs: {n}, created {prov['runs_created'][0]} .. "
                     f"{prov['runs_created'][1]}: {prov['before_git']} of them BEFORE the "
                     "registration first appeared in git (not a test of those runs).")
    return lines
