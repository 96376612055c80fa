"""Plots of the rageval report section: matching radar, error distribution, deployment scatter."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from proctor.report.plots import _png_base64, _short, plot_style

_PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")
_CATS = {"EM": "#55a868", "AM": "#8fd19e", "GE": "#dd8452", "ME": "#c44e52", "TE": "#8172b3", "RE": "#8c8c8c"}


def radar(tasks: Sequence[str], values: Mapping[str, Sequence[float | None]]) -> str:
    """Each system's mean F1 on each task, as a closed polygon (matching analysis)."""
    with plot_style():
        fig = Figure(figsize=(5.6, 5.0))
        ax = fig.add_subplot(projection="polar")
        angles = np.linspace(0, 2 * np.pi, len(tasks), endpoint=False).tolist()
        for i, (name, vals) in enumerate(values.items()):
            ys = [v if v is not None else 0.0 for v in vals]
            ax.plot(
                [*angles, angles[0]],
                [*ys, ys[0]],
                color=_PALETTE[i % len(_PALETTE)],
                lw=1.2,
                label=_short(name),
            )
            ax.fill([*angles, angles[0]], [*ys, ys[0]], color=_PALETTE[i % len(_PALETTE)], alpha=0.08)
        ax.set_xticks(angles, [_short(t, 18) for t in tasks], fontsize=7)
        ax.set_ylim(0, 1)
        ax.set_title("F1 per task (matching)", fontsize=10, loc="left")
        ax.legend(fontsize=7, loc="upper right", bbox_to_anchor=(1.35, 1.1), frameon=False)
        return _png_base64(fig)


def error_bars(systems: Sequence[str], counts: Mapping[str, Mapping[str, int]]) -> str:
    """Stacked shares of the taxonomy classes per system (error analysis)."""
    with plot_style():
        fig = Figure(figsize=(6.4, 0.45 * len(systems) + 1.4))
        ax = fig.add_subplot()
        left = np.zeros(len(systems))
        for cat, color in _CATS.items():
            totals = np.array([max(1, sum(counts[s].values())) for s in systems])
            share = np.array([counts[s].get(cat, 0) for s in systems]) / totals
            ax.barh(range(len(systems)), share, left=left, color=color, label=cat, height=0.7)
            left += share
        ax.set_yticks(range(len(systems)), [_short(s) for s in systems])
        ax.set_ylim(len(systems) - 0.5, -0.5)
        ax.set_xlim(0, 1)
        ax.set_xlabel("share of answers")
        ax.set_title("Error taxonomy (R-Eval)", fontsize=10, loc="left")
        ax.legend(fontsize=7, ncol=6, loc="upper center", bbox_to_anchor=(0.5, -0.25), frameon=False)
        fig.tight_layout()
        return _png_base64(fig)


def deployment(points: Mapping[str, tuple[float, float]], front: Sequence[str]) -> str:
    """Mean tokens per question vs F1, with the Pareto front (deployment analysis)."""
    with plot_style():
        fig = Figure(figsize=(6.0, 3.6))
        ax = fig.add_subplot()
        for i, (name, (x, y)) in enumerate(points.items()):
            ax.scatter([x], [y], color=_PALETTE[i % len(_PALETTE)], s=28, zorder=3)
            ax.annotate(_short(name, 22), (x, y), fontsize=7, xytext=(4, 3), textcoords="offset points")
        if len(front) > 1:
            xs, ys = zip(*(points[n] for n in front), strict=True)
            ax.plot(xs, ys, color="#333333", lw=0.8, ls="--", zorder=2, label="Pareto front")
            ax.legend(fontsize=7, frameon=False)
        ax.set_xlabel("mean tokens per question")
        ax.set_ylabel("F1")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title("Deployment: cost vs F1", fontsize=10, loc="left")
        ax.grid(color="#eeeeee", lw=0.6)
        return _png_base64(fig)
