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
reported apart from the catalogue's (:func:`analysis.prediction.validate.format_validation`).

The file: ``{"format", "version", "registered_at" (UTC, ISO 8601), "commit", "command",
"budgets", "tasks": [{"name", "in_catalogue", "source"}], "predictions": [{"task", "pe",
"prediction", "prediction_label", "theory", "theories", "size", "size_lower_bound",
"program_source", "program"}]}``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from rasp.errors import RASPError
from rasp_model import files  # the one reader of files we did not write
from tasks.catalogue import register_task, task_from_source
from tasks.custom import RUNS_CODE_WARNING, task_source, file_sha256

__all__ = ["FORMAT", "VERSION", "RegisteredError", "write_registration", "read_registration",
           "registered_tasks", "registered_predictions"]

#: the ``format`` field of a registration file
FORMAT = "rasp-lab registered predictions"
VERSION = 1


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
    "command": _OPT_STR,
    "budgets": ({"search": (bool, type(None)), "raspl": _OPT_INT, "crasp": _OPT_INT,
                 "unit": _OPT_STR, "time_cap_s": (float, type(None))}, type(None)),
    "tasks": [{"name": str, "in_catalogue": (bool, type(None)), "source": dict}],
    "predictions": [{"task": str, "pe": _OPT_STR, "prediction": str,
                     "prediction_label": str, "theory": _OPT_STR,
                     "theories": {str: {"prediction": str, "label": _OPT_STR,
                                        "reason": _OPT_STR}},
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
    return {"task": p.task, "pe": p.pe, "prediction": p.prediction,
            "prediction_label": p.prediction_label, "theory": p.theory,
            "theories": {k: {"prediction": v["prediction"],
                             "label": v.get("label") or v["prediction"],
                             "reason": v.get("reason")} for k, v in p.theories.items()},
            "size": p.size, "size_lower_bound": p.size_lower_bound,
            "program_source": p.program_source, "program": p.source or p.program}


def write_registration(path, preds, task_objects, search: dict, command: str | None = None
                       ) -> dict:
    """Write ``preds`` (:class:`analysis.prediction.predict.Prediction` list) of the tasks
    ``task_objects`` to ``path`` (module docstring) and return the document.

    Args:
        search: the predictions' search settings (``search``, ``search_budget``,
            ``crasp_budget``, ``search_time_cap``), recorded as the budgets.
        command: the command line that made them.

    Raises:
        RegisteredError: the file cannot be written (the message names it).
    """
    # start-up: torch loads only when this runs
    from analysis.training.trainer import git_commit
    doc = {"format": FORMAT, "version": VERSION,
           "registered_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "commit": git_commit(), "command": command,
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
    try:
        # the one writer: a fresh temporary file, then os.replace (a planted link or FIFO
        # at ``path`` is replaced, never followed or opened)
        files.atomic_write_bytes(path, (json.dumps(doc, indent=1) + "\n").encode("utf-8"))
    except OSError as e:
        raise RegisteredError(f"cannot write {path}: {e.strerror or e}") from None
    return doc


def read_registration(path) -> dict:
    """The registration document at ``path``, after checking it: the format, and every task
    file's sha256 against the file as it is now. A task file no longer at its recorded path is
    looked for beside ``path`` under its name (a registration moved with its task file, e.g.
    ``docs/registered/`` in another clone); the sha256 still decides.

    Raises:
        RegisteredError: unreadable or not a registration file; a task file that is missing
            or changed since registration (its path and both hashes named).
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
