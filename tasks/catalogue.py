"""The task registry: :data:`TASKS`, :func:`get_task`, :func:`list_tasks`."""

from __future__ import annotations

import re

from .base import Task, UnknownTaskError
from .generalization import make_generalization_tasks
from .huang import make_huang_tasks
from .sequence import PARAMETRIC, make_sequence_tasks

__all__ = ["TASKS", "GENERALIZATION_TASKS", "SEQUENCE_PROGRAMS", "HUANG_TASKS", "get_task",
           "list_tasks", "register_task", "user_task", "user_tasks", "task_from_source"]

_A = make_generalization_tasks()
_B = make_sequence_tasks()
_H = make_huang_tasks()

#: Part A names (tasks.md table A), in the table's order.
GENERALIZATION_TASKS: list[str] = list(_A)
#: Part B names (tasks.md B); ``reverse`` / ``sort_unique`` are ``reverse_seq`` /
#: ``sort_unique_seq`` here, ``shift_by`` = shift_by(1), ``count_less_freq`` = (2),
#: ``count_token`` = ("a"); other parameters via ``get_task("shift_by(3)")``.
SEQUENCE_PROGRAMS: list[str] = list(_B)
#: The tasks of Huang et al. 2025 (``tasks/huang.py``): next-token format, no shipped
#: program (predictions come from the search and the checkers).
HUANG_TASKS: list[str] = list(_H)
#: Every registered task by name.
TASKS: dict[str, Task] = {**_A, **_B, **_H}

_PARAM_RE = re.compile(r"^\s*([a-z_]+)\s*[\(_]\s*([A-Za-z0-9]+)\s*\)?\s*$")


def list_tasks() -> list[str]:
    """All registered task names: part A first, then part B, then Huang et al.'s."""
    return list(TASKS)


def get_task(name: str) -> Task:
    """The task called ``name``.

    Parametrised part-B programs accept their parameter: ``shift_by(3)``, ``count_less_freq(1)``,
    ``count_token(b)`` (also ``shift_by_3``). A task of your own registered with
    :func:`register_task` (a task file, a regular expression) is found by its name.

    Raises:
        UnknownTaskError (a ``KeyError``) whose message lists the known tasks.
    """
    if isinstance(name, Task):
        return name
    if not isinstance(name, str):
        raise UnknownTaskError(f"a task name is a string, got {type(name).__name__}")
    if name in TASKS:
        return TASKS[name]
    m = _PARAM_RE.match(name)
    if m and m.group(1) in PARAMETRIC:
        make, conv = PARAMETRIC[m.group(1)]
        arg = m.group(2)
        try:
            return make(conv(arg))
        except ValueError as e:
            raise UnknownTaskError(f"bad parameter in task {name!r}: {e}") from None
    mine = user_task(name)                   # your own tasks (task files, regexes)
    if mine is not None:
        return mine
    raise UnknownTaskError(
        f"unknown task {name!r}; known tasks: {', '.join(list_tasks())} "
        f"(parametrised: shift_by(k), count_less_freq(n), count_token(t))")


# ------------------------------------------------------------------------------------------
# your own tasks (tasks/custom.py): task files and regular expressions, found by name in the
# process that registered them; another process (a Ray worker of the grid) is handed the
# task's source record (tasks.custom.task_source, carried by the experiment's plan and the
# grid's runs) and loads it with task_from_source, never by name
# ------------------------------------------------------------------------------------------
_USER: dict[str, Task] = {}


def task_from_source(spec: dict, check_sha256: bool = False) -> Task:
    """The task a :func:`task_source` record describes (a task file is loaded: its code
    runs). ``check_sha256``: a task file must still have the record's ``sha256`` (it did not
    change since the record was made). Raises TaskFileError / UnknownTaskError."""
    # breaks an import cycle: .custom imports this module
    from .custom import TaskFileError, load_task_file, regex_task
    if "task_file" in spec:
        task = load_task_file(spec["task_file"])
        want = spec.get("sha256")
        if check_sha256 and want is not None and task.sha256 != want:
            raise TaskFileError(f"{spec['task_file']}: changed since its runs were planned "
                                f"(sha256 {want[:12]}..., now {task.sha256[:12]}...); "
                                "plan the runs again")
        return task
    if "regex" in spec:
        return regex_task(spec["regex"], spec.get("format", "membership"),
                          list(spec["alphabet"]) if spec.get("alphabet") else None,
                          spec.get("name"), spec.get("components"))
    return get_task(spec["catalogue"])


def register_task(task: Task) -> Task:
    """Make ``task`` (from :func:`load_task_file` or :func:`regex_task`) findable by
    :func:`tasks.get_task` under its name in this process (another process is handed its
    source record: :func:`task_from_source`).

    Raises:
        TaskFileError: the name is a catalogue task's, or another registered task's.
    """
    # breaks an import cycle: .custom imports this module
    from .custom import TaskFileError, task_source
    if task.name in TASKS:
        where = getattr(task, "path", None) or f"regular expression {task.spec.get('regex')!r}"
        raise TaskFileError(f"{where}: the name {task.name!r} is a catalogue task's; choose "
                            "another NAME (run directories are named by it)")
    old = _USER.get(task.name)
    if old is not None and task_source(old) != task_source(task):
        raise TaskFileError(f"two tasks are called {task.name!r} ({_describe(old)} and "
                            f"{_describe(task)}); give them different names")
    _USER[task.name] = task
    return task


def _describe(task) -> str:
    spec = getattr(task, "spec", {}) or {}
    return spec.get("task_file") or f"/{spec.get('regex')}/"


def user_tasks() -> dict[str, Task]:
    """The registered tasks of this process, by name."""
    return dict(_USER)


def user_task(name: str) -> Task | None:
    """The task registered as ``name`` in this process (:func:`register_task`), else None."""
    return _USER.get(name)

