"""`rasp tasks [--group A|B|H] [--json]`: list the task catalogue.

One row per task: its name, its group (A: the generalization tasks of Zhou et al. 2023 and
Kazemnejad et al. 2023 in next-token format, the ones `rasp train` accepts; B: the RASP classics,
per-position sequence programs; H: the tasks of Huang et al. 2025, next-token, no shipped
program), what its length counts, the lengths it accepts, whether its
reference program is valid RASP-L (A only) and its source. Parametrised part-B tasks
(``shift_by(k)``, ``count_less_freq(n)``, ``count_token(t)``) are listed by family name.
Details per task: ``docs/tasks.md``.
"""

from __future__ import annotations

import json

#: the one-line help of `rasp tasks` (shown by `rasp --help` without importing the command)
HELP = 'list the task catalogue (names for rasp train / verify / report)'

GROUPS = {"A": "generalization (next-token, trainable)", "B": "sequence program (per position)",
          "H": "Huang et al. 2025 (next-token; *_nextchar: next-character sets; trainable)"}


def add_arguments(p) -> None:
    p.description = (__doc__.split("\n", 1)[1].strip())
    p.add_argument("--group", choices=sorted(GROUPS), default=None,
                   help="only part A (trainable next-token tasks) or part B (sequence programs)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")


def rows(group: str | None = None) -> list[dict]:
    """One dict per task: ``name, group, length, lengths, raspl, source``."""
    # start-up: a command's own dependencies load when it runs (`rasp --help` loads none)
    import tasks
    out = []
    for name in tasks.list_tasks():
        t = tasks.get_task(name)
        g = ("A" if name in tasks.GENERALIZATION_TASKS else
             "H" if name in tasks.HUANG_TASKS else "B")
        if group and g != group:
            continue
        hi = "" if t.max_length is None else str(t.max_length)
        out.append({"name": name, "group": g, "length": t.length_definition,
                    "lengths": f"{t.min_length}..{hi}",
                    "raspl": ("valid" if t.valid_raspl else "no valid program known")
                    if g == "A" else "", "source": t.source})
    return out


def run(args) -> int:
    table = rows(args.group)
    if args.json:
        print(json.dumps(table, indent=1))
        return 0
    cols = [("name", "task"), ("group", "group"), ("length", "length (what it counts)"),
            ("lengths", "lengths"), ("raspl", "RASP-L"), ("source", "source")]
    widths = {k: max(len(h), *(len(r[k]) for r in table)) for k, h in cols}
    print("  ".join(h.ljust(widths[k]) for k, h in cols).rstrip())
    for r in table:
        print("  ".join(r[k].ljust(widths[k]) for k, _ in cols).rstrip())
    print("\ngroups: " + "; ".join(f"{g} = {d}" for g, d in GROUPS.items()))
    return 0
