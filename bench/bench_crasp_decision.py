"""C-RASP decision benchmark (:func:`analysis.prediction.crasp_decision.decide_crasp`): Huang et
al.'s formal languages and 1,000 outside regular expressions, with the time per decision.

Three tables, printed as Markdown (``--json`` writes the rows to ``bench/results/
crasp_decision.json`` as well):

1. Huang et al.'s languages (``tasks/huang.py``), both formats (membership, next-character
   sets) and both fragments (C-RASP[] for NoPE, C-RASP[periodic, local] for the learned APE):
   our status, the witness, and whether Huang et al. report a C-RASP program for the cell
   (``tasks.huang.HUANG_EXPRESSIVE``, their plotting data; next-set cells only): a decided
   "not in fragment" on a cell they report a program for would be a contradiction.
2. The outside classification: the 1,000 random expressions of ``pentagonalize/crasp_reg``
   (``results/all_results.txt`` at commit 71daa01, copied to ``bench/data/
   crasp_reg_all_results.csv``; their ``+`` is union, converted to ``|``; membership format,
   alphabet = the expression's symbols) against their ``C-RASP`` column. Their decider claims a
   full decision (in / not in); ours proves "not" with a witness, "in" for piecewise testable
   languages (a constructed program, also verified here at lengths 1-6, or Simon's theorem
   alone), and otherwise says nothing, so the table counts: both "not" / both "in" (agree),
   ours "not" and theirs "in" or ours "in" and theirs "not" (a contradiction: one of the two
   is wrong; our witness or program is re-run), ours undecided ("no counter") and theirs
   either way.
3. Time per decision against the minimal automaton's size (states), from table 2.

Run: ``.venv/bin/python -m bench.bench_crasp_decision [--json] [--limit N]``.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DATA = ROOT / "bench" / "data" / "crasp_reg_all_results.csv"
SOURCE = ("pentagonalize/crasp_reg results/all_results.txt (commit 4d2d2fe, unchanged at "
          "71daa01)")


def huang_rows() -> list[dict]:
    """Table 1: every formal language of Huang et al., both formats and fragments."""
    import tasks
    from analysis.prediction.crasp_decision import decide_task
    from tasks.huang import HUANG_EXPRESSIVE
    rows = []
    for name in tasks.TASKS:
        task = tasks.get_task(name)
        if getattr(task, "dfa", None) is None or getattr(task, "spec", None) is not None:
            continue
        for variant, pe in (("crasp", "nope"), ("crasp_pl", "ape")):
            t0 = time.perf_counter()
            d = decide_task(task, variant)
            secs = time.perf_counter() - t0
            wit = d.witness
            rows.append({
                "task": name, "variant": variant, "status": d.status,
                "checked": d.check() if d.proved_not else None,
                "witness": None if wit is None else
                f"u={''.join(wit['u']) or 'ε'} v={''.join(wit['v'])} "
                f"w={''.join(wit['w']) or 'ε'} period {wit['period']}",
                "huang_program": (name in HUANG_EXPRESSIVE[pe]) if name.endswith("_nextchar")
                else None,
                "actions": d.actions, "seconds": round(secs, 4)})
    return rows


def _verify_constructed(pattern: str, max_length: int) -> bool:
    """The constructed program of a decided "in" run as a model would be, against the
    language's own membership (every string of each length while few, the automaton's hard
    cases, random strings), lengths 1..``max_length``: an independent check of the proof."""
    from analysis.prediction.crasp_decision import decide_task
    from tasks.custom import regex_task
    from tasks.decode import verify_program
    task = regex_task(pattern)
    d = decide_task(task, "crasp")
    return bool(verify_program(task, d.sop, task.lengths(max_length), samples=2).ok)


def outside_rows(limit: int | None = None, verify_length: int = 6) -> list[dict]:
    """Table 2: our decision on each outside expression beside their label (a constructed
    program is also verified to ``verify_length``)."""
    from analysis.prediction.crasp_decision import decide_crasp
    from tasks.custom import TaskFileError, regex_dfa
    rows = []
    with DATA.open() as f:
        for rec in list(csv.DictReader(f))[:limit]:
            pattern = rec["regex"].replace("+", "|")
            row = {"index": int(rec["index"]), "regex": rec["regex"], "ours_regex": pattern,
                   "theirs": rec["C-RASP"] == "True"}
            try:
                alpha, dfa = regex_dfa(pattern)
            except TaskFileError as e:
                row.update(status="error", error=str(e))
                rows.append(row)
                continue
            t0 = time.perf_counter()
            d = decide_crasp(dfa, "crasp", alphabet=alpha)
            row.update(status=d.status, states=len(dfa.delta), actions=d.actions,
                       seconds=time.perf_counter() - t0,
                       checked=d.check() if d.proved_not else None,
                       witness=d.witness)
            if d.proved_in and d.program is not None:
                row.update(construction=d.program["construction"], label=d.program["label"],
                           k=d.program.get("k"), features=d.program.get("features"),
                           program_verified=_verify_constructed(pattern, verify_length))
            elif d.proved_in:
                row.update(construction=None, label=None, k=None, features=None,
                           program_verified=None)
            rows.append(row)
    return rows


def _huang_table(rows) -> list[str]:
    out = ["| language | fragment | status | witness (re-checked) | Huang et al. report a "
           "program | actions |", "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        frag = "C-RASP[]" if r["variant"] == "crasp" else "C-RASP[periodic, local]"
        wit = "-" if r["witness"] is None else f"{r['witness']} ({'ok' if r['checked'] else 'FAILED'})"
        hp = "-" if r["huang_program"] is None else ("yes" if r["huang_program"] else "no")
        out.append(f"| {r['task']} | {frag} | {r['status']} | {wit} | {hp} | {r['actions']} |")
    return out


def _outside_summary(rows) -> dict:
    ok = [r for r in rows if r["status"] != "error"]
    cells = {"both not": 0, "ours not, theirs in": 0, "both in": 0, "ours in, theirs not": 0,
             "ours no counter, theirs not": 0, "ours no counter, theirs in": 0, "ours budget": 0}
    for r in ok:
        if r["status"] == "budget":
            cells["ours budget"] += 1
        elif r["status"] == "not in fragment":
            cells["both not" if not r["theirs"] else "ours not, theirs in"] += 1
        elif r["status"] == "in fragment":
            cells["both in" if r["theirs"] else "ours in, theirs not"] += 1
        else:
            cells["ours no counter, theirs in" if r["theirs"]
                  else "ours no counter, theirs not"] += 1
    return {"expressions": len(rows), "errors": len(rows) - len(ok), **cells,
            "witnesses re-checked": sum(1 for r in ok if r.get("checked")),
            "witnesses failed": sum(1 for r in ok if r.get("checked") is False),
            "ours in, constructed from subsequences": sum(
                1 for r in ok if r.get("construction") == "subsequences"),
            "ours in, constructed from potentials": sum(
                1 for r in ok if r.get("construction") == "potentials"),
            "constructed programs verified": sum(1 for r in ok if r.get("program_verified")),
            "constructed programs failed": sum(1 for r in ok
                                               if r.get("program_verified") is False)}


def _timing(rows) -> list[str]:
    ok = [r for r in rows if r["status"] != "error"]
    buckets = {}
    for r in ok:
        b = "1-2" if r["states"] <= 2 else "3-4" if r["states"] <= 4 else \
            "5-8" if r["states"] <= 8 else "9-16" if r["states"] <= 16 else "17+"
        buckets.setdefault(b, []).append(r)
    out = ["| minimal DFA states | expressions | median ms | max ms | max actions |",
           "| --- | --- | --- | --- | --- |"]
    for b in ("1-2", "3-4", "5-8", "9-16", "17+"):
        rs = sorted(buckets.get(b, []), key=lambda r: r["seconds"])
        if rs:
            out.append(f"| {b} | {len(rs)} | {1000 * rs[len(rs) // 2]['seconds']:.2f} | "
                       f"{1000 * rs[-1]['seconds']:.2f} | {max(r['actions'] for r in rs)} |")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true",
                    help="also write the rows to bench/results/crasp_decision.json")
    ap.add_argument("--limit", type=int, default=None,
                    help="only the first N outside expressions (default: all 1,000)")
    args = ap.parse_args(argv)
    from rasp_model.files import atomic_write_bytes   # the one writer
    huang = huang_rows()
    outside = outside_rows(args.limit)
    summary = _outside_summary(outside)
    print("## Huang et al.'s languages\n")
    print("\n".join(_huang_table(huang)))
    print(f"\n## The outside classification ({SOURCE})\n")
    print("| " + " | ".join(summary) + " |")
    print("| " + " | ".join("---" for _ in summary) + " |")
    print("| " + " | ".join(str(v) for v in summary.values()) + " |")
    bad = [r for r in outside if r["status"] == "not in fragment" and r["theirs"]]
    for r in bad:
        w = r["witness"]
        print(f"\n- #{r['index']} `{r['regex']}`: ours not in C-RASP[] (u={''.join(w['u'])!r} "
              f"v={''.join(w['v'])!r} w={''.join(w['w'])!r}, period {w['period']}, "
              f"re-checked {r['checked']}); theirs in")
    for r in (r for r in outside if r["status"] == "in fragment" and not r["theirs"]):
        how = ("J-trivial, program not constructed" if r["construction"] is None else
               f"{r['label']}; program verified {r['program_verified']}")
        print(f"\n- #{r['index']} `{r['regex']}`: ours in C-RASP[] ({how}); theirs not")
    print("\n## Time per decision (C-RASP[], membership)\n")
    print("\n".join(_timing(outside)))
    if args.json:
        out = ROOT / "bench" / "results" / "crasp_decision.json"
        slim = [{k: v for k, v in r.items() if k != "witness"} for r in outside]
        atomic_write_bytes(out, (json.dumps({"huang": huang, "outside_summary": summary,
                                             "outside": slim, "source": SOURCE}, indent=1)
                                 + "\n").encode())
        print(f"\nwrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
