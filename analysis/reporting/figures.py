"""Figures of the report (matplotlib, Agg backend, PNG files).

Every function writes one PNG to ``path`` and returns the path (with ``path`` None it returns
the matplotlib figure instead, for tests and notebooks). Colours of the six positional
encodings are fixed so the same PE has the same colour in every figure.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from rasp_model.positional import PE_LABELS, PE_NAMES  # noqa: E402
from rasp_model.files import atomic_write  # a planted link at the PNG is never followed

__all__ = ["PE_COLORS", "accuracy_figure", "claims_figure", "curve_figure", "accuracy_bands", "heatmap_figure",
           "distance_chart", "layer_diagram", "save", "text_px", "wrap_label"]

#: PNG text key under which :func:`save` records the smallest font size of a figure, in the
#: PNG's pixels (the page scales it by its displayed width over the PNG's width).
TEXT_PX_KEY = "rasp-lab min-text-px"

PE_COLORS = {"nope": "#d62728", "t5": "#1f77b4", "alibi": "#2ca02c", "rope": "#9467bd",
             "ape_sinusoidal": "#ff7f0e", "ape_learned": "#8c564b"}

#: Kazemnejad et al. 2023 (Fig. 4 / §6): layer-averaged distance of each model from NoPE.
PAPER_DISTANCE_FROM_NOPE = {"t5": 0.263, "alibi": 0.49, "ape_sinusoidal": 0.72, "rope": 0.99,
                            "nope": 0.265}


def save(fig, path: str | os.PathLike, dpi: float = 96,
         min_text_px: float | None = None) -> str:
    """Save a figure as PNG, close it, and return the path.

    The PNG records (text key :data:`TEXT_PX_KEY`) the font size of the figure's smallest
    visible text in the PNG's pixels (points x dpi / 72), read back by :func:`text_px`.
    ``min_text_px``: raise the resolution above ``dpi`` where the smallest text would be
    drawn smaller than that (a figure shown at its natural size)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sizes = [t.get_fontsize() for t in fig.findobj(Text)
             if t.get_visible() and t.get_text().strip()]
    if min_text_px and sizes:
        dpi = max(dpi, math.ceil(min_text_px * 72 / min(sizes)))
    meta = {TEXT_PX_KEY: f"{min(sizes) * dpi / 72:.2f}"} if sizes else {}
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=dpi, bbox_inches="tight",
                                             metadata=meta))
    plt.close(fig)
    return str(path)


def _done(fig, path: str | os.PathLike | None):
    """The figure itself when ``path`` is None, else :func:`save` it there."""
    return fig if path is None else save(fig, path)


def text_px(path: str | os.PathLike) -> float | None:
    """The smallest font size of a PNG written by :func:`save`, in the PNG's pixels (None for
    a PNG without the record)."""
    # start-up: PIL loads only when this runs
    from PIL import Image
    with Image.open(path) as im:
        v = (getattr(im, "text", None) or {}).get(TEXT_PX_KEY)
    return float(v) if v else None


def wrap_label(text: str, width: int = 18) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken after ``_ , ( ) =`` or a
    space where it can be, inside a word only where a word is longer than a line; nothing is
    dropped (``"".join(lines)`` is ``text`` less the spaces at the breaks)."""
    parts = [p for p in re.split(r"(?<=[_,() =])", text) if p]
    lines: list[str] = []
    cur = ""
    for part in parts:
        while len(part) > width:                   # a word longer than a line: cut it
            if cur:
                lines.append(cur.rstrip())
                cur = ""
            lines.append(part[:width])
            part = part[width:]
        if len(cur) + len(part.rstrip()) > width and cur:
            lines.append(cur.rstrip())
            cur = part.lstrip()
        else:
            cur += part
    if cur.strip():
        lines.append(cur.rstrip())
    return lines or [""]


def accuracy_bands(curves: dict[str, list[dict]]) -> dict[str, str]:
    """The band :func:`accuracy_figure` draws around each PE's curve: ``"seed range"`` (the
    min..max over its seeds, when it has several), ``"wilson"`` (the 95% Wilson interval of
    its one seed) or ``"none"`` (one seed without intervals)."""
    out = {}
    for pe, rows in curves.items():
        rows = [r for r in rows if r.get("em") is not None]
        if not rows:
            continue
        if len({r.get("seed", 0) for r in rows}) > 1:
            out[pe] = "seed range"
        elif any(r.get("ci_low") is not None and r.get("ci_high") is not None for r in rows):
            out[pe] = "wilson"
        else:
            out[pe] = "none"
    return out


def accuracy_figure(curves: dict[str, list[dict]], train_range: tuple[int, int],
                    path: str | os.PathLike | None, title: str = "") -> str:
    """Exact match vs input length, one curve per PE: the mean over seeds with a seed band.

    Args:
        curves: PE -> rows ``{"length", "em" (0..1 or None), "ci_low", "ci_high"[, "seed"]}``
            (the rows of ``accuracy.json``; several seeds concatenated, each row tagged with its
            ``seed``). The line is the mean over seeds per length; the band is the range over
            seeds (min..max) when the PE has several seeds, else the 95% Wilson interval of its
            one seed (dotted edge).
        train_range: (min, max) training length; shaded grey.
        path: PNG path.
    """
    fig, ax = plt.subplots(figsize=(7.0, 3.6))
    bands = accuracy_bands(curves)
    lo, hi = train_range
    ax.axvspan(lo - 0.5, hi + 0.5, color="#cccccc", alpha=0.5, label="training lengths")
    for pe in sorted(curves, key=lambda p: PE_NAMES.index(p) if p in PE_NAMES else 99):
        by_len: dict[int, list] = {}
        wilson: dict[int, tuple] = {}
        seeds = set()
        for i, r in enumerate(curves[pe]):
            if r.get("em") is None:
                continue
            seeds.add(r.get("seed", 0))
            by_len.setdefault(int(r["length"]), []).append(float(r["em"]))
            if r.get("ci_low") is not None and r.get("ci_high") is not None:
                wilson.setdefault(int(r["length"]), (float(r["ci_low"]), float(r["ci_high"])))
        if not by_len:
            continue
        xs = sorted(by_len)
        ys = [float(np.mean(by_len[x])) for x in xs]
        color = PE_COLORS.get(pe)
        n_seeds = len(seeds)
        ax.plot(xs, ys, marker="o", ms=3, lw=1.6, color=color,
                label=f"{PE_LABELS.get(pe, pe)} ({n_seeds} seed{'s' if n_seeds != 1 else ''})")
        if bands.get(pe) == "seed range":
            ax.fill_between(xs, [min(by_len[x]) for x in xs], [max(by_len[x]) for x in xs],
                            color=color, alpha=0.18, lw=0)
        elif wilson:
            bx = [x for x in xs if x in wilson]
            ax.fill_between(bx, [wilson[x][0] for x in bx], [wilson[x][1] for x in bx],
                            color=color, alpha=0.08, lw=0.8, ls=":")
    ax.set_xlabel("input length")
    ax.set_ylabel("exact match")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))      # lengths are whole numbers
    ax.set_ylim(-0.03, 1.03)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    if title:
        ax.set_title(title, fontsize=10)
    return _done(fig, path)


def curve_figure(curve: dict, path: str | os.PathLike | None, title: str = "") -> str:
    """A training-length curve (:class:`analysis.experiment.curve.Curve` as a dict): OOD exact
    match (lengths L+1..2L) vs the maximum training length L, one line per PE (the mean over
    seeds, the seeds as dots, the bootstrap 95% interval over seeds as a band, a star at the
    shortest length that generalizes), the claims rule's threshold dashed, and the paper's regime (where it states one) as a vertical line.

    Args:
        curve: ``{"task", "pes", "lengths", "points": [{"pe", "train_max_len", "ood_em" (per
            seed), "ood_mean", "ood_ci"}], "threshold", "regime"}``.
        path: PNG path (None: return the matplotlib figure).
    """
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for pe in curve["pes"]:
        pts = sorted((p for p in curve["points"] if p["pe"] == pe),
                     key=lambda p: p["train_max_len"])
        pts = [p for p in pts if p["ood_mean"] is not None]
        if not pts:
            continue
        color = PE_COLORS.get(pe)
        xs = [p["train_max_len"] for p in pts]
        ax.plot(xs, [p["ood_mean"] for p in pts], marker="o", ms=4, lw=1.6, color=color,
                label=PE_LABELS.get(pe, pe))
        for p in pts:
            seeds = [x for x in p["ood_em"] if x is not None]
            ax.scatter([p["train_max_len"]] * len(seeds), seeds, s=9, color=color, alpha=0.45,
                       lw=0)
        first = (curve.get("shortest") or {}).get(pe)
        if first is not None:
            at = next(p for p in pts if p["train_max_len"] == first)
            ax.plot([first], [at["ood_mean"]], marker="*", ms=13, color=color, mec="black",
                    mew=0.6, ls="none")
        banded = [p for p in pts if p.get("ood_ci")]
        if banded:
            ax.fill_between([p["train_max_len"] for p in banded],
                            [p["ood_ci"][0] for p in banded], [p["ood_ci"][1] for p in banded],
                            color=color, alpha=0.15, lw=0)
    if curve.get("threshold") is not None:
        ax.axhline(curve["threshold"], color="#555555", ls="--", lw=1,
                   label=f"threshold {curve['threshold']:.2f}")
    if curve.get("regime"):
        ax.axvline(curve["regime"]["train_max_len"], color="#999999", ls=":", lw=1.2,
                   label=f"paper's regime (L >= {curve['regime']['train_max_len']})")
    ax.set_xlabel("maximum training length L (trained on 1..L)")
    ax.set_ylabel("OOD exact match (L+1..2L)")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xticks(sorted(curve["lengths"]))            # the lengths trained, and only those
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.set_title(title or f"{curve['task']}: training-length curve", fontsize=10)
    return _done(fig, path)


def claims_figure(rows: Sequence[dict], path: str | os.PathLike | None) -> str:
    """Predictions checked against runs (``rasp validate-predictor -o``): one panel per task,
    one column per PE with its seeds' OOD exact match as dots, the mean with the bootstrap
    95% interval over seeds as a bar, the claims rule's threshold dashed, and under each
    column the prediction, the measured outcome and the label (supported / contradicted /
    inconclusive).

    Args:
        rows: :meth:`analysis.experiment.validate.ValidationRow.to_dict` records: ``{"task",
            "pe", "prediction_label", "ood_em" (per seed), "ood_mean", "ood_ci95",
            "measured", "label", "threshold"}``.
        path: PNG path (None: return the matplotlib figure).
    """
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    n_pe = max([sum(1 for r in rows if r["task"] == t) for t in tasks] + [1])
    fig, axes = plt.subplots(1, max(1, len(tasks)), squeeze=False,
                             figsize=(max(3.4, 2.3 * n_pe) * max(1, len(tasks)), 3.9))
    for ax, task in zip(axes[0], tasks):
        mine = [r for r in rows if r["task"] == task]
        for x, r in enumerate(mine):
            color = PE_COLORS.get(r["pe"])
            seeds = [v for v in r["ood_em"] if v is not None]
            ax.scatter([x] * len(seeds), seeds, s=16, color=color, alpha=0.6, lw=0,
                       zorder=3)
            if r.get("ood_mean") is not None:
                ci = r.get("ood_ci95")
                err = None if not ci else [[r["ood_mean"] - ci[0]], [ci[1] - r["ood_mean"]]]
                ax.errorbar([x + 0.18], [r["ood_mean"]], yerr=err, fmt="o", ms=5,
                            color=color, capsize=4, lw=1.4, zorder=4)
            if r.get("threshold") is not None:
                ax.plot([x - 0.35, x + 0.35], [r["threshold"]] * 2, color="#555555", ls="--",
                        lw=1)
        ax.set_xticks(range(len(mine)))
        ax.set_xticklabels([f"{PE_LABELS.get(r['pe'], r['pe'])}\npredicted "
                            f"{r['prediction_label']}\nmeasured {r['measured']}\n"
                            f"-> {r['label']}" for r in mine], fontsize=8)
        ax.set_xlim(-0.6, len(mine) - 0.4)
        ax.set_ylim(-0.03, 1.03)
        ax.set_ylabel("OOD exact match per seed")
        ax.grid(alpha=0.3, axis="y")
        ax.set_title(f"{task}: predictions vs runs (dashed: threshold)", fontsize=10)
    return _done(fig, path)


def heatmap_figure(panels: Sequence[tuple[str, Any]], path: str | os.PathLike | None,
                   tokens: Sequence[str] | None = None, title: str = "") -> str:
    """Attention heatmaps side by side (query rows, key columns, probabilities 0..1).

    Args:
        panels: (caption, ``[query, key]`` matrix or None for "not available").
        tokens: token labels for the axes (optional; shown when short).
    """
    n = len(panels)
    # one panel per row of at most 3, each about 4 inches: token labels at 8 pt stay readable
    # at the page's width (the report shows a figure at most ~900 px wide)
    cols = min(n, 3)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 4.2 * rows), squeeze=False,
                             constrained_layout=True)
    image = None
    for ax, (caption, mat) in zip(axes.flat, panels):
        if mat is None:
            ax.text(0.5, 0.5, "not available", ha="center", va="center")
            ax.set_axis_off()
        else:
            mat = np.asarray(mat, dtype=float)
            image = ax.imshow(mat, cmap="viridis", vmin=0.0, vmax=1.0, interpolation="nearest")
            if tokens is not None and len(tokens) == mat.shape[0]:
                # one label per row of the panel while the rows are at least as tall as an
                # 8 pt label (a panel is ~3.3 in: 24 rows); beyond that every k-th token
                step = max(1, math.ceil(len(tokens) / 24))
                ticks = list(range(0, len(tokens), step))
                ax.set_xticks(ticks)
                ax.set_xticklabels([tokens[i] for i in ticks], rotation=90, fontsize=8)
                ax.set_yticks(ticks)
                ax.set_yticklabels([tokens[i] for i in ticks], fontsize=8)
            else:
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))
                ax.yaxis.set_major_locator(MaxNLocator(integer=True))
                ax.tick_params(labelsize=8)
            ax.set_xlabel("key", fontsize=9)
            ax.set_ylabel("query", fontsize=9)
        ax.set_title(caption, fontsize=10)
    for ax in list(axes.flat)[n:]:
        ax.set_axis_off()
    if image is not None:
        bar = fig.colorbar(image, ax=axes, shrink=0.8, label="attention probability")
        bar.ax.tick_params(labelsize=8)
    if title:
        fig.suptitle(title, fontsize=11)
    return _done(fig, path)


def distance_chart(panels: dict[str, tuple[dict[str, list[float]], list[float]]],
                   path: str | os.PathLike | None, reference: str = "nope",
                   paper: dict[str, float] | None = PAPER_DISTANCE_FROM_NOPE,
                   title: str = "") -> str:
    """Kazemnejad-style distance chart, one panel per aggregation, with the seed spread.

    Args:
        panels: aggregation (``"standard"``, ``"released"``) -> (PE -> per-seed distances
            from the reference models of the other seeds; the reference's own per-seed
            distances from its other seeds: the baseline). Bars show the mean, black dots each
            seed, the whisker the range; the dashed line and grey band the baseline's mean and
            range.
        paper: the paper's values, drawn as diamonds **only** in the ``"released"`` panel (the
            only one computed the paper's way: their JSD variant in nats, their aggregation).
    """
    aggs = [a for a in ("standard", "released") if a in panels] + [
        a for a in panels if a not in ("standard", "released")]
    fig, axes = plt.subplots(1, max(1, len(aggs)), figsize=(6.2 * max(1, len(aggs)), 3.4),
                             squeeze=False)
    for ax, agg in zip(axes[0], aggs):
        distances, baseline = panels[agg]
        pes = [p for p in PE_NAMES if p in distances] + [p for p in distances
                                                         if p not in PE_NAMES]
        xs = np.arange(len(pes))
        means = [float(np.nanmean(distances[p])) if distances[p] else np.nan for p in pes]
        ax.bar(xs, means, color=[PE_COLORS.get(p, "#777777") for p in pes], alpha=0.8)
        for x, p in zip(xs, pes):
            v = distances[p]
            ax.scatter([x] * len(v), v, color="black", s=9, zorder=3)
            if len(v) > 1:
                ax.plot([x, x], [min(v), max(v)], color="black", lw=1, zorder=3)
        top = [m for m in means if np.isfinite(m)]
        if baseline:
            b = float(np.nanmean(baseline))
            ax.axhline(b, ls="--", color=PE_COLORS.get(reference, "black"),
                       label=f"{PE_LABELS.get(reference, reference)} vs its other seeds: "
                             f"{b:.3f} ({len(baseline)} seed{'s' if len(baseline) != 1 else ''})")
            if len(baseline) > 1:
                ax.axhspan(min(baseline), max(baseline), color="#999999", alpha=0.15)
            top.append(max(baseline))
        if paper and agg == "released":
            px = [x for x, p in zip(xs, pes) if p in paper]
            if px:
                ax.scatter(px, [paper[pes[int(x)]] for x in px], marker="D", color="white",
                           edgecolor="black", s=30, zorder=4,
                           label="Kazemnejad et al. 2023 (SCAN, 12 layers)")
                top += [paper[pes[int(x)]] for x in px]
            if reference in paper:
                ax.axhline(paper[reference], ls=":", color="black", lw=0.8,
                           label=f"paper (SCAN): NoPE other seed {paper[reference]}")
        units = "nats" if agg == "released" else "bits"
        ax.set_xticks(xs)
        # "APE (sinusoidal)" on two lines: six labels side by side never overlap
        ax.set_xticklabels(["\n".join(wrap_label(PE_LABELS.get(p, p), 10)) for p in pes],
                           fontsize=8)
        ax.set_ylabel(f"distance from {PE_LABELS.get(reference, reference)} ({units})")
        ax.set_title(f"{agg} aggregation" + (f" — {title}" if title else ""), fontsize=9)
        ax.set_ylim(0, max(top + [0.1]) * 1.15)
        ax.grid(axis="y", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    return _done(fig, path)


def layer_diagram(heads: Sequence[int], mlp: Sequence[int], path: str | os.PathLike | None,
                  title: str = "", head_labels: dict[tuple[int, int], str] | None = None,
                  per_row: int = 4) -> str:
    """Layer diagram of a (compiled) model: per layer its attention heads and MLP width.

    Drawn at 10 pt (13 px at the PNG's 96 dpi) and at most ``per_row`` layers to a row (fewer
    where wide labels need it), so that a row fits the report's width (~1,100 px) without
    being scaled down; every head's
    label is shown whole, wrapped (:func:`wrap_label`), never cut.

    Args:
        heads: number of heads per layer.
        mlp: MLP hidden width per layer (0 = no MLP).
        head_labels: optional text per (layer, head), e.g. the s-op the head computes.
    """
    fs, line = 10, 10 * 1.35 / 72                  # font size (pt), line height (inches)
    char = 0.56 * fs / 72                          # a character's mean advance (inches)
    n = len(heads)
    cells = []
    for l in range(n):
        text = ([f"attn: {heads[l]} head" + ("s" if heads[l] != 1 else "")] if heads[l]
                else ["no attention"])
        for h in range(heads[l]):
            if head_labels and (l, h) in head_labels:
                name = wrap_label(str(head_labels[(l, h)]), 18)
                text += [f"H{h}: {name[0]}"] + [f"    {x}" for x in name[1:]]
        mtext = ["MLP", f"width {mlp[l]:,}"] if mlp[l] else ["no MLP"]
        cells.append((text, mtext))
    attn_w = max(max(len(x) for x in t) for t, _ in cells) * char + 0.25
    mlp_w = max(max(len(x) for x in m) for _, m in cells) * char + 0.25
    box_h = max(max(len(t), len(m)) for t, m in cells) * line + 0.3
    cell_w = attn_w + 0.12 + mlp_w
    gap = 0.45
    # as many layers to a row as fit 11.3 in (1,085 px at 96 dpi), at most per_row
    cols = max(1, min(n, per_row, int((11.3 + gap) // (cell_w + gap))))
    rows = max(1, math.ceil(n / cols))
    row_h = box_h + 0.95                           # arrow, box, "layer k" underneath
    width = cols * cell_w + (cols - 1) * gap + 0.3
    height = rows * row_h + 0.1
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))               # data units = inches: text and boxes agree
    for l in range(n):
        r, c = divmod(l, cols)
        x = 0.15 + c * (cell_w + gap)
        top = height - 0.1 - r * row_h - 0.45
        y = top - box_h
        text, mtext = cells[l]
        ax.add_patch(plt.Rectangle((x, y), attn_w, box_h,
                                   color="#1f77b4" if heads[l] else "#dddddd", alpha=0.25))
        ax.text(x + 0.12, top - 0.15, "\n".join(text), ha="left", va="top", fontsize=fs,
                linespacing=1.35)
        ax.add_patch(plt.Rectangle((x + attn_w + 0.12, y), mlp_w, box_h,
                                   color="#ff7f0e" if mlp[l] else "#dddddd", alpha=0.3))
        ax.text(x + attn_w + 0.12 + mlp_w / 2, top - 0.15, "\n".join(mtext), ha="center",
                va="top", fontsize=fs, linespacing=1.35)
        ax.text(x + cell_w / 2, y - 0.12, f"layer {l}", ha="center", va="top", fontsize=fs)
        if c == 0:
            last = min(n, l + cols) - l
            right = 0.15 + last * (cell_w + gap) - gap
            ax.annotate("", xy=(right, top + 0.2), xytext=(0.15, top + 0.2),
                        arrowprops=dict(arrowstyle="->", color="#555555"))
            ax.text(0.15, top + 0.27, "residual stream" + (" (continued)" if r else ""),
                    fontsize=fs, color="#555555", va="bottom")
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_axis_off()
    if title:
        fig.suptitle(title, fontsize=11, y=1.0, va="bottom")
    return _done(fig, path)
