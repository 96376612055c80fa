"""Plots of the reckon report section (base64 PNG, Agg canvas, mathtext off — as in `report.plots`)."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure

from proctor.report.plots import _png_base64, _short, plot_style

_PALETTE = [
    "#4c72b0",
    "#dd8452",
    "#55a868",
    "#c44e52",
    "#8172b3",
    "#937860",
    "#da8bc3",
    "#8c8c8c",
    "#ccb974",
    "#64b5cd",
]


def convergence(series: dict[str, Sequence[int]], total: int) -> str:
    """Remaining (not yet judged) units after each round, one line per candidate; round 0 = all units."""
    with plot_style():
        fig = Figure(figsize=(5.2, 3.0))
        ax = fig.add_subplot()
        longest = 1
        for i, (name, ys) in enumerate(series.items()):
            ax.plot(
                range(len(ys)),
                list(ys),
                marker="o",
                lw=1.6,
                color=_PALETTE[i % len(_PALETTE)],
                label=_short(name),
            )
            longest = max(longest, len(ys))
        ax.set_xticks(range(longest))
        ax.set_xlabel("round (0 = before the first round)")
        ax.set_ylabel("units not yet judged")
        ax.set_ylim(-0.3, max(1, total) * 1.08)
        ax.set_title("Convergence: remaining units per round", fontsize=10, loc="left")
        ax.grid(color="#dddddd", lw=0.6)
        if series:
            ax.legend(fontsize=8, frameon=False)
        return _png_base64(fig)


def unit_map(
    xs: Sequence[float],
    ys: Sequence[float],
    clusters: Sequence[int | None],
    names: Sequence[str],
    labels: Sequence[str] = (),
) -> str:
    """2-D PCA map of unit embeddings, coloured by round-1 cluster, each cluster labelled with its name;
    with at most 40 units each point also carries its keyword."""
    with plot_style():
        fig = Figure(figsize=(6.4, 4.6))
        ax = fig.add_subplot()
        for k, name in enumerate(names):
            idx = [i for i, c in enumerate(clusters) if c == k]
            if not idx:
                continue
            color = _PALETTE[k % len(_PALETTE)]
            px, py = [xs[i] for i in idx], [ys[i] for i in idx]
            ax.scatter(px, py, s=36, color=color, alpha=0.85, edgecolors="white", linewidths=0.5, zorder=2)
            ax.annotate(
                _short(name, 34),
                (sum(px) / len(px), sum(py) / len(py)),
                fontsize=8,
                ha="center",
                va="bottom",
                color=color,
                weight="bold",
                xytext=(0, 6),
                textcoords="offset points",
                zorder=3,
            )
        if labels and len(labels) <= 40:
            for x, y, text in zip(xs, ys, labels, strict=True):
                ax.annotate(
                    _short(text, 24),
                    (x, y),
                    fontsize=6.5,
                    color="#555555",
                    xytext=(4, -8),
                    textcoords="offset points",
                )
        lone = [i for i, c in enumerate(clusters) if c is None or c >= len(names)]
        if lone:
            ax.scatter(
                [xs[i] for i in lone], [ys[i] for i in lone], s=30, color="#999999", marker="x", zorder=2
            )
        ax.set_xlabel("PC 1")
        ax.set_ylabel("PC 2")
        ax.set_title(
            "Knowledge units (PCA of embeddings), coloured by round-1 cluster", fontsize=10, loc="left"
        )
        ax.grid(color="#eeeeee", lw=0.6, zorder=0)
        return _png_base64(fig)


def ask_frequency(freq: dict[str, dict[str, int]]) -> str:
    """How often each unit was asked, per candidate: grouped bars of unit counts per number of asks."""
    with plot_style():
        fig = Figure(figsize=(5.2, 2.8))
        ax = fig.add_subplot()
        times = sorted({int(t) for f in freq.values() for t in f})
        width = 0.8 / max(1, len(freq))
        for i, (name, f) in enumerate(freq.items()):
            xs = [t + (i - (len(freq) - 1) / 2) * width for t in times]
            ax.bar(
                xs,
                [f.get(str(t), 0) for t in times],
                width=width,
                color=_PALETTE[i % len(_PALETTE)],
                label=_short(name),
                zorder=2,
            )
        ax.set_xticks(times)
        ax.set_xlabel("times a unit was asked")
        ax.set_ylabel("units")
        ax.set_title("How often each unit was asked", fontsize=10, loc="left")
        ax.grid(axis="y", color="#dddddd", lw=0.6, zorder=0)
        if freq:
            ax.legend(fontsize=8, frameon=False)
        return _png_base64(fig)


def cost_bars(steps: Sequence[str], reckon: Sequence[int], baseline: Sequence[int]) -> str:
    """Tokens per step, RECKON next to the per-unit baseline."""
    with plot_style():
        fig = Figure(figsize=(5.2, 2.8))
        ax = fig.add_subplot()
        xs = list(range(len(steps)))
        ax.bar([x - 0.2 for x in xs], reckon, width=0.4, color=_PALETTE[0], label="RECKON", zorder=2)
        ax.bar(
            [x + 0.2 for x in xs], baseline, width=0.4, color=_PALETTE[1], label="per-unit baseline", zorder=2
        )
        for x, r, b in zip(xs, reckon, baseline, strict=True):
            ax.annotate(f"{r:,}", (x - 0.2, r), ha="center", va="bottom", fontsize=7)
            ax.annotate(f"{b:,}", (x + 0.2, b), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(xs, list(steps))
        ax.set_ylabel("tokens (prompt + completion)")
        ax.set_title("Tokens per step", fontsize=10, loc="left")
        ax.grid(axis="y", color="#dddddd", lw=0.6, zorder=0)
        ax.legend(fontsize=8, frameon=False)
        return _png_base64(fig)
