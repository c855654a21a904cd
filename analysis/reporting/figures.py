"""Figures of the report (matplotlib, Agg backend, PNG files).

Every function writes one PNG to ``path`` and returns the path. Colours of the six positional
encodings are fixed so the same PE has the same colour in every figure.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from rasp_model.positional import PE_LABELS, PE_NAMES  # noqa: E402

__all__ = ["PE_COLORS", "accuracy_figure", "heatmap_figure",
           "distance_chart", "layer_diagram", "save"]

PE_COLORS = {"nope": "#d62728", "t5": "#1f77b4", "alibi": "#2ca02c", "rope": "#9467bd",
             "ape_sinusoidal": "#ff7f0e", "ape_learned": "#8c564b"}

#: Kazemnejad et al. 2023 (Fig. 4 / §6): layer-averaged distance of each model from NoPE.
PAPER_DISTANCE_FROM_NOPE = {"t5": 0.263, "alibi": 0.49, "ape_sinusoidal": 0.72, "rope": 0.99,
                            "nope": 0.265}


def save(fig, path: str | os.PathLike) -> str:
    """Save a figure as PNG (96 dpi), close it, and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=96, bbox_inches="tight")
    plt.close(fig)
    return str(path)


def accuracy_figure(curves: dict[str, list[dict]], train_range: tuple[int, int],
                    path: str | os.PathLike, title: str = "") -> str:
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
        if n_seeds > 1:
            ax.fill_between(xs, [min(by_len[x]) for x in xs], [max(by_len[x]) for x in xs],
                            color=color, alpha=0.18, lw=0)
        elif wilson:
            bx = [x for x in xs if x in wilson]
            ax.fill_between(bx, [wilson[x][0] for x in bx], [wilson[x][1] for x in bx],
                            color=color, alpha=0.08, lw=0.8, ls=":")
    ax.set_xlabel("input length")
    ax.set_ylabel("exact match")
    ax.set_ylim(-0.03, 1.03)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    if title:
        ax.set_title(title, fontsize=10)
    return save(fig, path)


def heatmap_figure(panels: Sequence[tuple[str, Any]], path: str | os.PathLike,
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
            if tokens is not None and len(tokens) == mat.shape[0] and len(tokens) <= 40:
                size = 8 if len(tokens) <= 24 else 6
                ax.set_xticks(range(len(tokens)))
                ax.set_xticklabels(tokens, rotation=90, fontsize=size)
                ax.set_yticks(range(len(tokens)))
                ax.set_yticklabels(tokens, fontsize=size)
            else:
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
    return save(fig, path)


def distance_chart(panels: dict[str, tuple[dict[str, list[float]], list[float]]],
                   path: str | os.PathLike, reference: str = "nope",
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
        ax.set_xticklabels([PE_LABELS.get(p, p) for p in pes], fontsize=8, rotation=15)
        ax.set_ylabel(f"distance from {PE_LABELS.get(reference, reference)} ({units})")
        ax.set_title(f"{agg} aggregation" + (f" — {title}" if title else ""), fontsize=9)
        ax.set_ylim(0, max(top + [0.1]) * 1.15)
        ax.grid(axis="y", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    return save(fig, path)


def layer_diagram(heads: Sequence[int], mlp: Sequence[int], path: str | os.PathLike,
                  title: str = "", head_labels: dict[tuple[int, int], str] | None = None) -> str:
    """Layer diagram of a (compiled) model: per layer its attention heads and MLP width.

    Args:
        heads: number of heads per layer.
        mlp: MLP hidden width per layer (0 = no MLP).
        head_labels: optional text per (layer, head), e.g. the s-op the head computes.
    """
    n = len(heads)
    fig, ax = plt.subplots(figsize=(max(3.0, 1.9 * n + 0.8), 2.6))
    for l in range(n):
        x = l * 1.9
        ax.add_patch(plt.Rectangle((x, 1.2), 0.8, 0.9, color="#1f77b4", alpha=0.25))
        text = f"attn\n{heads[l]} head" + ("s" if heads[l] != 1 else "")
        if head_labels:
            names = [head_labels[(l, h)] for h in range(heads[l]) if (l, h) in head_labels]
            if names:
                text += "\n" + "\n".join(n_[:14] for n_ in names[:3])
        ax.text(x + 0.4, 1.65, text, ha="center", va="center", fontsize=7)
        ax.add_patch(plt.Rectangle((x + 0.9, 1.2), 0.8, 0.9,
                                   color="#ff7f0e" if mlp[l] else "#dddddd", alpha=0.3))
        ax.text(x + 1.3, 1.65, f"MLP\n{mlp[l]}" if mlp[l] else "no\nMLP", ha="center",
                va="center", fontsize=7)
        ax.text(x + 0.85, 0.95, f"layer {l}", ha="center", fontsize=8)
    ax.annotate("", xy=(1.9 * n, 2.3), xytext=(-0.2, 2.3),
                arrowprops=dict(arrowstyle="->", color="#555555"))
    ax.text(-0.2, 2.4, "residual stream", fontsize=7, color="#555555")
    ax.set_xlim(-0.3, 1.9 * n + 0.1)
    ax.set_ylim(0.8, 2.6)
    ax.set_axis_off()
    if title:
        ax.set_title(title, fontsize=10)
    return save(fig, path)
