"""Plots of the KIEval report section (base64 PNG, off-screen Agg, mathtext off — as `report.plots`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure

from proctor.report.plots import _png_base64, _short, finite, plot_style

_PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")
_FLAG = "#c44e52"


def aspect_bars(
    candidates: Sequence[str],
    aspects: Sequence[str],
    values: Mapping[str, Sequence[tuple[float | None, float | None, float | None]]],
) -> str:
    """Grouped horizontal bars: one group per aspect, one bar per candidate, 0-100 with 95% whiskers.

    `values[candidate][j]` is (mean, lo, hi) of aspect j."""
    with plot_style():
        n_c, n_a = len(candidates), len(aspects)
        height = 0.8 / max(1, n_c)
        fig = Figure(figsize=(6.4, max(2.4, 0.22 * n_a * n_c + 1.4)))
        ax = fig.add_subplot()
        for i, cand in enumerate(candidates):
            ys = [j + (i - (n_c - 1) / 2) * height for j in range(n_a)]
            triples = values[cand]
            widths = [v if finite(v) else 0.0 for v, _, _ in triples]
            lo_err = [max(0.0, v - lo) if finite(v) and finite(lo) else 0.0 for v, lo, _ in triples]
            hi_err = [max(0.0, hi - v) if finite(v) and finite(hi) else 0.0 for v, _, hi in triples]
            color = _PALETTE[i % len(_PALETTE)]
            ax.barh(ys, widths, height=height * 0.9, color=color, label=_short(cand), zorder=2)
            if any(lo_err) or any(hi_err):
                ax.errorbar(
                    widths,
                    ys,
                    xerr=[lo_err, hi_err],
                    fmt="none",
                    ecolor="#333333",
                    capsize=2,
                    lw=0.8,
                    zorder=3,
                )
        ax.set_yticks(range(n_a), [_short(a) for a in aspects])
        ax.set_ylim(n_a - 0.5, -0.5)
        ax.set_xlim(0, 105)
        ax.set_xlabel("KIEval score (0-100, reference form) — whiskers: 95% interval")
        ax.set_title("Scores per aspect", fontsize=10, loc="left")
        ax.grid(axis="x", color="#dddddd", lw=0.6, zorder=0)
        if n_c > 1:
            ax.legend(fontsize=7, loc="lower right", frameon=False)
        return _png_base64(fig)


def stop_reason_bars(
    candidates: Sequence[str], reasons: Sequence[str], counts: Mapping[str, Mapping[str, int]]
) -> str:
    """Stacked horizontal bars: how each candidate's conversations ended (completed or the stop reason)."""
    with plot_style():
        n = len(candidates)
        fig = Figure(figsize=(6.4, max(1.8, 0.45 * n + 1.4)))
        ax = fig.add_subplot()
        left = [0.0] * n
        for k, reason in enumerate(reasons):
            widths = [float(counts.get(c, {}).get(reason, 0)) for c in candidates]
            if not any(widths):
                continue
            color = "#55a868" if reason == "completed" else _PALETTE[(k + 1) % len(_PALETTE)]
            ax.barh(range(n), widths, left=left, color=color, label=reason, height=0.6, zorder=2)
            left = [a + b for a, b in zip(left, widths, strict=True)]
        ax.set_yticks(range(n), [_short(c) for c in candidates])
        ax.set_ylim(n - 0.5, -0.5)
        ax.set_xlabel("conversations")
        ax.set_title("How conversations ended", fontsize=10, loc="left")
        ax.grid(axis="x", color="#dddddd", lw=0.6, zorder=0)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        return _png_base64(fig)


def contamination_scatter(
    names: Sequence[str],
    static_accuracy: Sequence[float],
    kieval: Sequence[float],
    *,
    slope: float | None,
    intercept: float | None,
    flagged: Sequence[str] = (),
) -> str:
    """Static multiple-choice accuracy (%) against KIEval score, with the regression line when fitted;
    flagged candidates (far below the line) in red."""
    with plot_style():
        fig = Figure(figsize=(5.2, 3.8))
        ax = fig.add_subplot()
        xs = [100.0 * a for a in static_accuracy]
        placed: list[tuple[float, float]] = []
        for name, x, y in zip(names, xs, kieval, strict=True):
            bad = name in flagged
            # Stack the labels of (nearly) coinciding points instead of printing them over each other.
            stack = sum(1 for px, py in placed if abs(px - x) < 3 and abs(py - y) < 3)
            placed.append((x, y))
            ax.scatter([x], [y], s=36, color=_FLAG if bad else "#4c72b0", zorder=3)
            ax.annotate(
                _short(name, 22) + (" (flagged)" if bad else ""),
                (x, y),
                xytext=(5, 4 + 9 * stack),
                textcoords="offset points",
                fontsize=7,
                color=_FLAG if bad else "#333333",
            )
        if slope is not None and intercept is not None:
            ax.plot([0, 100], [intercept, intercept + 100 * slope], color="#888888", lw=1, ls="--", zorder=2)
        ax.set_xlim(-2, 105)
        ax.set_ylim(-2, 105)
        ax.set_xlabel("static multiple-choice accuracy (%)")
        ax.set_ylabel("KIEval score (reference form)")
        ax.set_title("Static accuracy vs. KIEval", fontsize=10, loc="left")
        ax.grid(color="#eeeeee", lw=0.6, zorder=0)
        return _png_base64(fig)
