"""Plots of the exam protocol's report section (base64 PNG, off-screen Agg canvas, no pyplot).

Same conventions as `proctor.report.plots`: object-oriented figures, mathtext off (labels come from run
data), each figure cleared after rendering.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure

from proctor.report.plots import _png_base64, _short, finite, plot_style

_BAR = "#4c72b0"
_CHANCE = "#c44e52"
_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974")


def baselines_plot(
    names: Sequence[str],
    values: Sequence[float],
    lo: Sequence[float],
    hi: Sequence[float],
    letter_counts: Mapping[str, int],
    chance: float,
) -> str:
    """Left: the no-knowledge baselines with 95% intervals against chance; right: correct-letter counts."""
    with plot_style():
        fig = Figure(figsize=(8.6, 2.4))
        ax, ax2 = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.6, 1]})
        ys = list(range(len(names)))
        ax.barh(ys, values, color=_BAR, height=0.55, zorder=2)
        err = [
            [max(0.0, v - a) for v, a in zip(values, lo, strict=True)],
            [max(0.0, b - v) for v, b in zip(values, hi, strict=True)],
        ]
        ax.errorbar(values, ys, xerr=err, fmt="none", ecolor="#333333", capsize=3, lw=1, zorder=3)
        ax.axvline(chance, color=_CHANCE, ls="--", lw=1, zorder=4)
        ax.axvspan(chance - 0.05, chance + 0.05, color=_CHANCE, alpha=0.08, zorder=1)
        for y, v in zip(ys, values, strict=True):
            ax.annotate(f"{100 * v:.1f}%", (v, y), xytext=(5, 6), textcoords="offset points", fontsize=8)
        ax.set_yticks(ys, [_short(n) for n in names])
        ax.set_ylim(len(names) - 0.5, -0.5)
        ax.set_xlim(0, max(0.6, max((b for b in hi if finite(b)), default=0.5) + 0.05))
        ax.set_xlabel("score of a strategy that reads no question (dashed: chance; band: ±5 points)")
        ax.set_title("Bias baselines", fontsize=10, loc="left")
        letters = list(letter_counts)
        counts = [letter_counts[x] for x in letters]
        ax2.bar(letters, counts, color=_BAR, zorder=2)
        total = sum(counts)
        if total:
            ax2.axhline(total * chance, color=_CHANCE, ls="--", lw=1)
        ax2.set_title("Correct letter", fontsize=10, loc="left")
        ax2.set_ylabel("questions")
        for ax_ in (ax, ax2):
            ax_.grid(axis="x" if ax_ is ax else "y", color="#dddddd", lw=0.6, zorder=0)
        return _png_base64(fig)


def curves_plot(
    title: str,
    theta: Sequence[float],
    curves: Mapping[str, Sequence[float]],
    *,
    ylabel: str,
    styles: Mapping[str, str] | None = None,
    ylim01: bool = False,
) -> str:
    """Several curves over ability (ICCs, information functions), one legend entry each."""
    with plot_style():
        fig = Figure(figsize=(5.2, 3.1))
        ax = fig.add_subplot()
        for i, (label, ys) in enumerate(curves.items()):
            ax.plot(
                theta,
                ys,
                color=_COLORS[i % len(_COLORS)],
                lw=1.4,
                ls=(styles or {}).get(label, "-"),
                label=_short(label, 34),
            )
        ax.set_xlabel("ability θ")
        ax.set_ylabel(ylabel)
        if ylim01:
            ax.set_ylim(0, 1.02)
        ax.set_title(title, fontsize=10, loc="left")
        ax.grid(color="#eeeeee", lw=0.6)
        if curves:
            ax.legend(fontsize=7, frameon=False, loc="best", ncol=1 if len(curves) <= 6 else 2)
        return _png_base64(fig)


def components_plot(
    components: Mapping[str, Mapping[str, float | None]], se: Mapping[str, Mapping[str, float | None]]
) -> str:
    """Component abilities (hierarchical IRT), grouped by factor, with ±1.96 SE whiskers."""
    with plot_style():
        rows: list[tuple[str, str, float, float]] = []
        for f, levels in components.items():
            for lv, v in levels.items():
                if finite(v):
                    s = (se.get(f) or {}).get(lv)
                    rows.append((f, lv, float(v), float(s) if finite(s) else 0.0))
        fig = Figure(figsize=(5.2, max(1.8, 0.36 * len(rows) + 0.9)))
        ax = fig.add_subplot()
        factors = list(components)
        ys = list(range(len(rows)))
        colors = [_COLORS[factors.index(f) % len(_COLORS)] for f, _, _, _ in rows]
        ax.barh(ys, [r[2] for r in rows], color=colors, height=0.6, zorder=2)
        ax.errorbar(
            [r[2] for r in rows],
            ys,
            xerr=[1.96 * r[3] for r in rows],
            fmt="none",
            ecolor="#333333",
            capsize=3,
            lw=1,
            zorder=3,
        )
        ax.axvline(0, color="#333333", lw=0.8)
        ax.set_yticks(ys, [f"{f}: {_short(lv, 24)}" for f, lv, _, _ in rows])
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_xlabel("component ability (levels of a factor sum to zero; whiskers ±1.96 SE)")
        ax.set_title("Component abilities", fontsize=10, loc="left")
        ax.grid(axis="x", color="#dddddd", lw=0.6, zorder=0)
        return _png_base64(fig)


def adaptive_plot(
    names: Sequence[str],
    full: Sequence[float],
    full_se: Sequence[float],
    adaptive: Sequence[float],
    adaptive_se: Sequence[float],
    used: Sequence[int],
) -> str:
    """Adaptive-test ability vs full-exam ability per pipeline, both with ±1 SE."""
    with plot_style():
        fig = Figure(figsize=(5.2, max(1.8, 0.36 * len(names) + 0.9)))
        ax = fig.add_subplot()
        ys = list(range(len(names)))
        ax.errorbar(
            full,
            [y - 0.12 for y in ys],
            xerr=full_se,
            fmt="o",
            color=_BAR,
            ms=4,
            capsize=2,
            lw=1,
            label="full exam",
        )
        ax.errorbar(
            adaptive,
            [y + 0.12 for y in ys],
            xerr=adaptive_se,
            fmt="s",
            color="#dd8452",
            ms=4,
            capsize=2,
            lw=1,
            label="adaptive",
        )
        ax.set_yticks(ys, [f"{_short(n, 26)} ({u} items)" for n, u in zip(names, used, strict=True)])
        ax.set_ylim(len(names) - 0.5, -0.5)
        ax.set_xlabel("ability θ (±1 SE)")
        ax.set_title("Adaptive testing vs the full exam", fontsize=10, loc="left")
        ax.legend(fontsize=7, frameon=False)
        ax.grid(axis="x", color="#dddddd", lw=0.6)
        return _png_base64(fig)


def guessability_plot(
    values: Sequence[float],
    threshold: float,
    chance: float,
    difficulty: Sequence[tuple[float, float]] = (),
) -> str:
    """Left: the items' closed-book guessability (histogram, chance and the filter's threshold marked);
    right, when IRT was fitted: guessability against IRT difficulty, one point per kept item."""
    with plot_style():
        fig = Figure(figsize=(8.6 if difficulty else 5.2, 2.6))
        axes = fig.subplots(1, 2 if difficulty else 1, squeeze=False)[0]
        ax = axes[0]
        bins = [i / 10 for i in range(11)]
        ax.hist(list(values), bins=bins, color=_BAR, edgecolor="white", zorder=2)
        ax.axvline(chance, color="#333333", ls=":", lw=1, label=f"chance {chance:.2f}")
        ax.axvline(threshold, color=_CHANCE, ls="--", lw=1, label=f"threshold {threshold:.2f}")
        ax.set_xlim(0, 1)
        ax.set_xlabel("P(correct option), answered closed-book")
        ax.set_ylabel("items")
        ax.set_title("Guessability", fontsize=10, loc="left")
        ax.legend(fontsize=7, frameon=False)
        ax.grid(axis="y", color="#dddddd", lw=0.6, zorder=0)
        if difficulty:
            ax2 = axes[1]
            ax2.scatter([x for x, _ in difficulty], [y for _, y in difficulty], s=14, color=_BAR, zorder=2)
            ax2.axvline(threshold, color=_CHANCE, ls="--", lw=1)
            ax2.set_xlim(0, 1)
            ax2.set_xlabel("guessability")
            ax2.set_ylabel("IRT difficulty")
            ax2.set_title("Guessability vs IRT difficulty (kept items)", fontsize=10, loc="left")
            ax2.grid(color="#eeeeee", lw=0.6, zorder=0)
        return _png_base64(fig)
