"""Write ``docs/huang-replication.md``: Huang et al. 2025's experiment as we ran it, beside theirs.

    python -m analysis.reporting.replication_doc --cells replication -o docs/huang-replication.md

Reads the cell files of ``rasp replicate huang`` (:mod:`analysis.experiment.replication`) and
writes, per (task, PE) cell: our selected configuration, our mean exact match over the fitting
seeds per bin with its range, their released number (``tasks/huang.py`` ``RELEASED``; formal
languages ``RELEASED_FORMAL``), our
prediction as registered before the runs, and whether our runs agree with theirs by the claims
rule ("their model did not fit" first where their ID mean is below 100%). Cells at their scale
come first; cells of ``--scale small`` are listed apart (a cut of their protocol, not theirs to
compare). Cells not run are listed with the command to run them and an upper bound on their
compute. Every prediction check is marked in-sample (spec predictor.md §5). The protocol's
settings come from :mod:`analysis.evidence.huang_protocol` (their released code, file named per
setting), with the per-language table of their formal languages.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from analysis.experiment import replication as R
from analysis.training.runs import atomic_write_text

__all__ = ["render", "main"]

_PE_NAME = {"ape_learned": "learned APE (random offsets)", "nope": "NoPE"}


def _f(x, pct: bool = False) -> str:
    if x is None:
        return "–"
    return f"{100 * x:.1f}%" if pct else f"{x:.3f}"


def _bins_cell(b: dict) -> str:
    if b.get("mean") is None:
        return "–"
    spread = f" [{_f(b.get('min'))}, {_f(b.get('max'))}]" if (b.get("seeds") or 0) > 1 else ""
    return f"{_f(b['mean'])}{spread}"


def _prediction(cell: dict) -> str:
    p = cell.get("prediction")
    if not p:
        return "not registered"
    registered = (p.get("registered") or "?")[:16]
    return f"{p.get('label') or p.get('prediction')} (registered {registered})"


def _agreement(cell: dict) -> str:
    """The agreement per bin; a cell file written before their ID was checked gets "their
    model did not fit" here too (:func:`R.their_fit_label`)."""
    ag = cell.get("agreement") or []
    if not ag:
        return "–"
    unfit = R.their_fit_label(cell.get("theirs"))

    def label(a):
        if unfit and a.get("label") in ("agrees", "disagrees", "inconclusive"):
            return unfit
        return a.get("label") or "–"
    return "; ".join(f"{a['bin'][0]}-{a['bin'][1]}: {label(a)}" for a in ag)


def _stale(cell: dict) -> bool:
    """A cell run with an older generator than ours (:func:`R.stale_reason`)."""
    return R.stale_reason(cell) is not None


def _stale_note(cells: list[dict]) -> list[str]:
    """One paragraph naming the stale cells, why, and the command that reruns them."""
    stale = [c for c in cells if _stale(c)]
    if not stale:
        return []
    names = "; ".join(f"{c['task']} / {_PE_NAME.get(c['pe'], c['pe'])} ({c.get('scale')}: "
                      f"{R.stale_reason(c)})" for c in stale)
    return [f"Stale cells (marked in the tables): {names}. Their runs drew strings our "
            "generators, now as theirs, no longer draw. To "
            "rerun one, move its finished runs aside (`runs/huang/<scale>/<task>/`: a rerun "
            "reuses finished runs whose settings still match), then `rasp replicate "
            "huang TASK --pe PE [--scale small] -o docs/replication` (the cell file keeps the "
            "prediction registered before its first run). Their numbers are unchanged.", ""]


def _seconds(cell: dict) -> str:
    """Training seconds of a cell, every run once (:func:`R.cell_compute`): ``<= s`` where an
    old cell file counted a run twice."""
    comp = R.cell_compute(cell)
    return f"{'' if comp['exact'] else '<= '}{comp['train_seconds']:.0f}"


def _formal_table() -> list[str]:
    """Their formal languages' settings per language (:data:`R.FORMAL_PROTOCOL`)."""
    out = ["| language | their experiment file | layers | heads | d_model | batch | epochs | "
           "training strings (their train_src.txt) | their bin sizes | steps |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for lang, fp in R.FORMAL_PROTOCOL.items():
        steps = fp.epochs * -(-fp.train_set // fp.batch_size)
        out.append(f"| {lang} | experiments/{fp.experiment} | {', '.join(map(str, fp.layers))} | "
                   f"{', '.join(map(str, fp.heads))} | {', '.join(map(str, fp.d_models))} | "
                   f"{fp.batch_size} | {fp.epochs} | {fp.train_set:,} | "
                   f"{' / '.join(f'{n:,}' for n in fp.bin_sizes)} | {steps:,} |")
    return out


def _rate(cells: list[dict]) -> float | None:
    """FLOP/s of the finished runs of ``cells`` (measured compute over training seconds)."""
    flops = sum((c.get("compute") or {}).get("flops", 0.0) for c in cells)
    sec = sum((c.get("compute") or {}).get("train_seconds", 0.0) for c in cells)
    return flops / sec if sec > 0 and flops > 0 else None


def _table(cells: list[dict], scale: R.Scale | None) -> list[str]:
    """The cells' table; ``scale`` None: their formal languages, whose bins differ per
    language (each value then names its lengths)."""
    formal = scale is None
    names = (["bin 0 (ID)", "bin 1", "bin 2"] if formal
             else [f"{max(1, lo)}-{hi}" for lo, hi in scale.bins])
    head = (["task", "PE", "status", "selected (of sweep)", "theirs selected"]
            + [f"ours {n}" for n in names]
            + ["theirs" if formal else "theirs " + " / ".join(("1-50", "51-100", "101-150")),
               "our prediction", "agreement (claims rule)", "seeds fit / tried", "train s"])
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for c in cells:
        if "error" in c:
            damaged = c["error"].replace("|", "\\|")
            out.append(f"| {c['task']} | {c['pe']} | damaged: {damaged} |"
                       + " |" * (len(head) - 3))
            continue
        sel = c.get("selection") or {}
        bins = c.get("bins") or []
        ours = [(f"{bins[i]['bin'][0]}-{bins[i]['bin'][1]}: " if formal else "")
                + _bins_cell(bins[i]) if i < len(bins) else "–" for i in range(len(names))]
        theirs = c.get("theirs")
        th = " / ".join(_f(x) for x in theirs) if theirs else "–"
        if formal and theirs:
            their = c.get("their_bins") or R.their_bins(c["task"])
            th = " / ".join(f"{b}: {_f(x)}" for b, x in zip(their, theirs))
        n_configs = len((scale or R.scale_for(c["task"], c.get("scale", "full"))).configs)
        swept = len(c.get("sweep") or [])
        chosen = sel.get("config") or "–"
        if sel.get("fallback"):
            chosen += " (none fit: the best ID)" if formal else " (fallback: none fit)"
        out.append("| " + " | ".join(
            [c["task"], _PE_NAME.get(c["pe"], c["pe"]),
             (c.get("status") or "?") + (" (stale: older generator)" if _stale(c) else ""),
             f"{chosen} ({swept} of {n_configs} configurations run)",
             c.get("their_selected") or R.THEIR_SELECTED.get(c["pe"], {}).get(c["task"], "–")]
            + ours +
            [th, _prediction(c), _agreement(c),
             f"{len(c.get('fitting_seeds') or [])} / {len(c.get('seeds_tried') or [])}",
             _seconds(c)]) + " |")
    return out


def render(cells: list[dict], command: str) -> str:
    """The markdown of the document (module docstring) from the cell files' contents."""
    by = {(c.get("scale"), c.get("task"), c.get("pe")): c for c in cells}
    def formal(c):
        return R.formal_language(c.get("task", "")) is not None
    full = [c for c in cells if c.get("scale") == "full" and not formal(c)]
    small = [c for c in cells if c.get("scale") == "small" and not formal(c)]
    full_f = [c for c in cells if c.get("scale") == "full" and formal(c)]
    small_f = [c for c in cells if c.get("scale") == "small" and formal(c)]
    t4 = R.formal_scale("tomita4_nextchar", "full")
    tasks = list(R.replication_tasks())
    lines = [
        "# Huang et al. 2025's experiment, run as they ran it",
        "",
        f"Generated by `{command}` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}); do "
        "not edit by hand. The cells come from `rasp replicate huang TASK... --pe PE [--scale "
        "small]` (`analysis/experiment/replication.py`); rerunning a cell reuses its finished runs.",
        "",
        "## The protocol",
        "",
        "Their paper: Huang et al., *A Formal Framework for Understanding Length Generalization "
        "in Transformers*, ICLR 2025 (arXiv 2410.02140), §5 and App. E.3; their code: "
        "github.com/lacoco-lab/length_generalization (`algorithmic/language_modeling_train.py`, "
        "`algorithmic/run_multiple_seeds.py`).",
        "",
        f"- Their scale: {R.FULL.describe()}; when no configuration fits, their 12-layer model "
        "(12 heads, d_model 768, 60,000 steps, 3,000 warmup) and every seed counts, at the "
        "learning rate their `run_multiple_seeds.py` names for the cell: "
        + ", ".join(f"{t} / {_PE_NAME[pe]}: `{R.fallback_config(t, pe, R.FULL).tag}` "
                    f"(lr {R.fallback_config(t, pe, R.FULL).lr:g})"
                    for pe in R.HUANG_PES for t in R.replication_tasks()
                    if R.THEIR_SELECTED[pe].get(t, "").startswith("big"))
        + "; `big` (lr 1e-4) in the other cells.",
        f"- Our CPU cut: {R.SMALL.describe()}.",
        "- Where their code and paper differ we follow the code:",
        *[f"  - {x}" for x in R.CODE_NOT_PAPER],
        "- Our model is the project's Transformer with GPT-2's settings (pre-LN, GELU, MLP 4 "
        "d_model, tied embeddings, init std 0.02, no dropout; AdamW betas (0.9, 0.999), weight "
        "decay 0.01, linear decay, clipping 1.0, batch 64). Where our algorithmic cells differ "
        "from their code:",
        *[f"  - {x}" for x in R.NOT_THEIRS],
        "- Agreement: per out-of-distribution bin, our five fitting seeds are classified by the "
        "claims rule (`analysis/evidence/statistics.py` `task_outcome`: exact sign test and "
        "seed bootstrap against max(0.5, chance + 0.1)); their mean is put on the side of the "
        "same threshold. `agrees` / `disagrees` when ours is decided, else `inconclusive`; "
        "checked first, `their model did not fit (ID x)` where their in-distribution mean is "
        "below 100% (their fallback's seeds count at any ID accuracy, and their plotted formal "
        "runs need not fit): such a number is no evidence about length generalization.",
        "- Their formal languages (the `_nextchar` tasks, next-character sets) follow their "
        "`formal_lang_suite/train_with_ce.py` and `experiments/<language>.yaml`, per language "
        "(the table below; `analysis/evidence/huang_protocol.py` `FORMAL_PROTOCOL`), e.g. "
        f"{t4.describe().replace('scale full: ', 'Tomita 4: ')}, with each language's lengths "
        "those of their released files; AdamW lr 1e-5, weight decay 0.1 "
        "(`configs/optimizer/adamw.yaml`), constant rate, no clipping; learned APE with an "
        "offset uniform in [0, n_positions / 2) per training example (n_positions = 2 x the "
        "longest test input), none at test. Our CPU cut: "
        f"{R.formal_scale('tomita4_nextchar', 'small').describe()}. Where ours differs from "
        "their code:",
        *[f"  - {x}" for x in R.FORMAL_NOT_THEIRS],
        "",
        *_formal_table(),
        "",
        "- The prediction is ours (`rasp score`'s predictor with its searches), written to the "
        "cell file before the cell's first run; their C-RASP flags and outcomes are never read "
        "by the predictor.",
        "",
        "## Cells at their scale",
        "",
        *_stale_note(cells),
    ]
    if full:
        lines += _table(full, R.FULL)
    else:
        lines.append("None run yet: the full protocol is GPU work (below).")
    if full_f:
        lines += ["", "Their formal languages:", ""] + _table(full_f, None)
    lines += ["", "### Cells not run at their scale", ""]
    rate = _rate(small + full)
    rate_text = (f"at the throughput of the runs made here ({rate / 1e9:.2f} GFLOP/s per "
                 f"single-thread CPU run; small models are overhead-bound, larger ones run "
                 f"faster)") if rate else ""
    done = [c for c in full if c.get("compute")]
    if done:
        comp = {id(c): R.cell_compute(c) for c in done}
        lines += ["The cells run at their scale cost " + "; ".join(
            f"{c['task']} / {c['pe']}: {comp[id(c)]['runs']} runs, "
            f"{'at most ' if not comp[id(c)]['exact'] else ''}"
            f"{comp[id(c)]['train_seconds']:,.0f} training seconds"
            + (f" ({comp[id(c)]['note']})" if comp[id(c)]['note'] else "") for c in done)
            + " (every run counted once; early stops and the sweep's stop make real cells far "
              "cheaper than the bound below).", ""]
    lines += ["| task | PE | command | compute (upper bound: every configuration, no early "
              "stop) |",
              "| --- | --- | --- | --- |"]
    for t in tasks:
        for pe in R.HUANG_PES:
            if ("full", t, pe) in by:
                continue
            est = R.estimate_flops(t, R.scale_for(t, "full"))
            hours = f"; ~{est['total_flops_max'] / rate / 3600:,.0f} CPU-hours {rate_text}" \
                if rate else ""
            lines.append(f"| {t} | {_PE_NAME[pe]} | `rasp replicate huang {t} --pe {pe}` | "
                         f"{est['total_flops_max']:.2e} FLOPs ({est['runs']} runs: sweep + "
                         f"{R.FULL.fitting} seeds){hours} |")
    lines.append("")
    lines += ["## Our registered predictions checked against these runs", ""]
    checks = R.prediction_checks_of(cells)
    if checks:
        lines += ["The prediction written to each cell file before its first run, against the "
                  "claims rule's outcome on the farthest bin (`analysis.experiment.replication."
                  "prediction_check`). Every one of Huang et al.'s 50 cells (16 algorithmic, 34 "
                  "formal-language) is in-sample for the search grammars (spec predictor.md §5, "
                  "docs/predictions.md): each row below is marked so, and a `supported` there is "
                  "a fit, not an out-of-sample test.", "",
                  "| task | PE | scale | predicted (registered) | measured | label | in-sample |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {r['task']} | {_PE_NAME.get(r['pe'], r['pe'])} | {r['scale']}"
                  f"{'' if r['comparable'] else ' (not comparable)'} | {r['predicted'] or '–'} "
                  f"({(r['registered'] or '?')[:16]}) | {r['measured']} | **{r['label']}** | "
                  f"{'yes: a fit, not a test' if r.get('in_sample') else 'no'} |"
                  for r in checks]
    else:
        lines.append("No finished cell yet.")
    lines += ["", "## Cells at the small scale (not theirs to compare)", ""]
    if small:
        lines += ["A cut of their protocol for 2 CPU cores: shorter lengths, fewer "
                  "configurations and steps. Their numbers are shown for orientation only; "
                  "the agreement column compares our small-scale bins with their bins of the "
                  "same rank (1-50 / 51-100 / 101-150).", ""]
        lines += _table(small, R.SMALL)
    if small_f:
        lines += ["", "Their formal languages at the small scale (lengths 1-20, bins 21-30 / "
                  "31-40; their bins of the same rank beside them):", ""] + _table(small_f, None)
    if not small and not small_f:
        lines.append("None run yet: `rasp replicate huang TASK --pe PE --scale small`.")
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """The command line (module docstring); exit 2 on bad input."""
    p = argparse.ArgumentParser(prog="python -m analysis.reporting.replication_doc",
                                description="Write docs/huang-replication.md from the cell "
                                            "files of `rasp replicate huang`.")
    p.add_argument("--cells", default="replication", metavar="DIR",
                   help="the cell files' directory (`rasp replicate -o`; default replication/)")
    p.add_argument("-o", "--out", default="docs/huang-replication.md", metavar="FILE")
    args = p.parse_args(argv)
    if not Path(args.cells).is_dir():
        print(f"{p.prog}: error: {args.cells} is not a directory of cell files (run `rasp "
              f"replicate huang ...` first)", file=sys.stderr)
        return 2
    command = f"python -m analysis.reporting.replication_doc --cells {args.cells} -o {args.out}"
    text = render(R.read_cells(args.cells), command)
    atomic_write_text(Path(args.out), text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
