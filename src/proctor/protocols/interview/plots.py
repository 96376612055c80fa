"""Plots of the interview report section (base64 PNG, off-screen Agg — as `report.plots`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure

from proctor.report.plots import _png_base64, _short, plot_style

_PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")
TIERS = ("easy", "medium", "hard")


def tier_trajectories(trajectories: Mapping[str, Mapping[str, Sequence[str]]]) -> str:
    """One panel per candidate: the tier of each batch after the base questions and after each round."""
    with plot_style():
        names = list(trajectories)
        fig = Figure(figsize=(6.4, 1.9 * len(names) + 0.6))
        for i, name in enumerate(names):
            ax = fig.add_subplot(len(names), 1, i + 1)
            for j, (batch, tiers) in enumerate(sorted(trajectories[name].items(), key=lambda kv: int(kv[0]))):
                ys = [TIERS.index(t) + (j - len(trajectories[name]) / 2) * 0.03 for t in tiers]
                ax.plot(range(len(ys)), ys, marker="o", ms=3, lw=1, color=_PALETTE[j % len(_PALETTE)],
                        label=f"batch {int(batch) + 1}")  # fmt: skip
            ax.set_yticks(range(3), TIERS)
            ax.set_ylim(-0.4, 2.4)
            n = max((len(t) for t in trajectories[name].values()), default=1)
            ax.set_xticks(range(n), ["base"] + [f"round {r}" for r in range(1, n)])
            ax.set_title(f"{_short(name)}: tier per batch", fontsize=9, loc="left")
            ax.grid(axis="y", color="#dddddd", lw=0.6)
            if len(trajectories[name]) <= 8:
                ax.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
        fig.tight_layout()
        return _png_base64(fig)


def accuracy_by_tier(values: Mapping[str, Mapping[str, tuple[float, float, float]]]) -> str:
    """Grouped bars: extension accuracy per tier and candidate, with 95% whiskers."""
    with plot_style():
        names = list(values)
        fig = Figure(figsize=(6.4, 2.6))
        ax = fig.add_subplot()
        width = 0.8 / max(1, len(names))
        for i, name in enumerate(names):
            xs, ys, lo, hi = [], [], [], []
            for j, t in enumerate(TIERS):
                if t in values[name]:
                    v, low, high = values[name][t]
                    xs.append(j + (i - (len(names) - 1) / 2) * width)
                    ys.append(v)
                    lo.append(max(0.0, v - low))
                    hi.append(max(0.0, high - v))
            ax.bar(xs, ys, width=width * 0.9, color=_PALETTE[i % len(_PALETTE)], label=_short(name), zorder=2)
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt="none", ecolor="#333333", capsize=2, lw=0.8, zorder=3)
        ax.set_xticks(range(3), TIERS)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("accuracy")
        ax.set_title("Extension accuracy by difficulty (whiskers: 95% interval)", fontsize=10, loc="left")
        ax.grid(axis="y", color="#dddddd", lw=0.6, zorder=0)
        if len(names) > 1:
            ax.legend(fontsize=7, frameon=False)
        return _png_base64(fig)
