"""The task registry: :data:`TASKS`, :func:`get_task`, :func:`list_tasks`."""

from __future__ import annotations

import re

from .base import Task, UnknownTaskError
from .generalization import make_generalization_tasks
from .huang import make_huang_tasks
from .sequence import PARAMETRIC, make_sequence_tasks

__all__ = ["TASKS", "GENERALIZATION_TASKS", "SEQUENCE_PROGRAMS", "HUANG_TASKS", "get_task",
           "list_tasks"]

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
    ``count_token(b)`` (also ``shift_by_3``).

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
    raise UnknownTaskError(
        f"unknown task {name!r}; known tasks: {', '.join(list_tasks())} "
        f"(parametrised: shift_by(k), count_less_freq(n), count_token(t))")
