"""Plots for the HTML report, rendered off-screen and returned as base64 PNG strings.

Figures are built with the object-oriented API on the Agg canvas (never through `pyplot`), so no
global figure registry holds them and nothing depends on a display; each function clears its figure
before returning to bound memory. Labels come from run data (candidate names, model names) and are
drawn as plain text: mathtext parsing is off, so a stray `$` cannot break a plot.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

_BAR = "#4c72b0"
_ERR = "#333333"
_LABEL_MAX = 28
_RC = {"text.parse_math": False, "font.size": 9, "axes.spines.top": False, "axes.spines.right": False}


def _short(label: str, limit: int = _LABEL_MAX) -> str:
    """Shorten long axis labels; the full text stays in the tables next to the plot."""
    return label if len(label) <= limit else label[: limit - 1] + "…"


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _png_base64(fig: Figure) -> str:
    """Render `fig` to PNG, release its artists, and return the base64 text (no data: prefix)."""
    buf = io.BytesIO()
    FigureCanvasAgg(fig)
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    fig.clear()
    return base64.b64encode(buf.getvalue()).decode("ascii")


def metric_bars(
    title: str,
    subjects: Sequence[str],
    values: Sequence[float | None],
    lo: Sequence[float | None],
    hi: Sequence[float | None],
    *,
    ylabel: str = "value",
) -> str:
    """Bar chart of one metric across subjects, with error bars from the [lo, hi] interval.

    Missing values are drawn as empty slots; missing bounds give no error bar. If every value and
    bound lies in [0, 1] the y axis is fixed to [0, 1] so charts of rates are comparable.
    """
    with matplotlib.rc_context(_RC):
        n = len(subjects)
        fig = Figure(figsize=(max(3.6, 0.62 * n + 1.6), 2.9))
        ax = fig.add_subplot()
        xs = list(range(n))
        heights = [v if _finite(v) else 0.0 for v in values]
        err_lo = [max(0.0, v - lo_) if _finite(v) and _finite(lo_) else 0.0 for v, lo_ in zip(values, lo, strict=True)]
        err_hi = [max(0.0, hi_ - v) if _finite(v) and _finite(hi_) else 0.0 for v, hi_ in zip(values, hi, strict=True)]
        ax.bar(xs, heights, color=_BAR, width=0.6, zorder=2)
        if any(err_lo) or any(err_hi):
            ax.errorbar(xs, heights, yerr=[err_lo, err_hi], fmt="none", ecolor=_ERR, capsize=3, lw=1, zorder=3)
        for x, v in zip(xs, values, strict=True):
            if _finite(v):
                ax.annotate(f"{v:.3f}", (x, v), xytext=(4, 2), textcoords="offset points", fontsize=7,
                            color="#555555", ha="left")
        bounded = [x for x in (*values, *lo, *hi) if _finite(x)]
        if bounded and min(bounded) >= 0.0 and max(bounded) <= 1.0:
            ax.set_ylim(0.0, 1.05)
        ax.set_xticks(xs, [_short(s) for s in subjects], rotation=30 if n > 3 else 0, ha="right" if n > 3 else "center")
        ax.set_title(title, fontsize=10, loc="left")
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", color="#dddddd", lw=0.6, zorder=0)
        return _png_base64(fig)


def share_bars(
    title: str, labels: Sequence[str], shares: Sequence[float], counts: Sequence[int], *, xlabel: str = "share"
) -> str:
    """Horizontal bars of shares in [0, 1], each annotated with its percentage and count."""
    with matplotlib.rc_context(_RC):
        n = len(labels)
        fig = Figure(figsize=(6.0, max(1.6, 0.38 * n + 0.9)))
        ax = fig.add_subplot()
        ys = list(range(n))
        ax.barh(ys, shares, color=_BAR, height=0.6, zorder=2)
        for y, s, c in zip(ys, shares, counts, strict=True):
            ax.annotate(f"{100 * s:.1f}%  (n={c})", (s, y), xytext=(4, 0), textcoords="offset points",
                        va="center", fontsize=8, color="#333333")
        ax.set_yticks(ys, [_short(lbl) for lbl in labels])
        ax.invert_yaxis()
        ax.set_xlim(0.0, 1.25)
        ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0], ["0%", "25%", "50%", "75%", "100%"])
        ax.set_xlabel(xlabel)
        ax.set_title(title, fontsize=10, loc="left")
        ax.grid(axis="x", color="#dddddd", lw=0.6, zorder=0)
        return _png_base64(fig)
