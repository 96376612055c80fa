"""Plots for the HTML report, rendered off-screen and returned as base64 PNG strings.

Figures are built with the object-oriented API on the Agg canvas (never through `pyplot`), so no
global figure registry holds them and nothing depends on a display; each function clears its figure
before returning to bound memory. Labels come from run data (candidate names, model names) and are
drawn as plain text: mathtext parsing is off, so a stray `$` cannot break a plot.
"""

from __future__ import annotations

import base64
import contextlib
import io
import logging
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeGuard, cast

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

log = logging.getLogger(__name__)

_BAR = "#4c72b0"
_ERR = "#333333"
_LABEL_MAX = 28
_RC: dict[str, Any] = {
    "text.parse_math": False,
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def safe_plot(fn: Callable[..., str], *args: Any, **kwargs: Any) -> str | None:
    """A failing plot must not cost the user the report: it is logged and left out (its table stays)."""
    try:
        return fn(*args, **kwargs)
    except Exception:
        log.exception("report plot %s failed", getattr(fn, "__name__", fn))
        return None


@contextlib.contextmanager
def plot_style() -> Iterator[None]:
    """The report's matplotlib settings (plain-text labels, small font, no top/right spines)."""
    with matplotlib.rc_context(cast(Any, _RC)):
        yield


def _short(label: str, limit: int = _LABEL_MAX) -> str:
    """Shorten long axis labels; the full text stays in the tables next to the plot."""
    return label if len(label) <= limit else label[: limit - 1] + "…"


def finite(x: float | None) -> TypeGuard[float]:
    """A number to plot (not None, not NaN or infinite)."""
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
    xlabel: str = "value",
) -> str:
    """Horizontal bar chart of one metric across subjects, with error bars from the [lo, hi] interval.

    Subjects sit on the vertical axis (long candidate names stay readable). Missing values are drawn
    as empty slots; missing bounds give no error bar. If every value lies in [0, 1] the metric is
    taken for a rate: the axis is fixed to [0, 1] so charts are comparable, and whiskers are clipped
    to it (a normal-approximation interval can overshoot; the table shows the stored bounds).
    """
    with plot_style():
        n = len(subjects)
        present = [v for v in values if finite(v)]
        rate = bool(present) and min(present) >= 0.0 and max(present) <= 1.0
        if rate:
            lo = [min(1.0, max(0.0, x)) if finite(x) else None for x in lo]
            hi = [min(1.0, max(0.0, x)) if finite(x) else None for x in hi]
        fig = Figure(figsize=(4.8, max(1.7, 0.42 * n + 1.0)))
        ax = fig.add_subplot()
        ys = list(range(n))
        widths = [v if finite(v) else 0.0 for v in values]
        err_lo = [
            max(0.0, v - lo_) if finite(v) and finite(lo_) else 0.0 for v, lo_ in zip(values, lo, strict=True)
        ]
        err_hi = [
            max(0.0, hi_ - v) if finite(v) and finite(hi_) else 0.0 for v, hi_ in zip(values, hi, strict=True)
        ]
        ax.barh(ys, widths, color=_BAR, height=0.6, zorder=2)
        if any(err_lo) or any(err_hi):
            ax.errorbar(widths, ys, xerr=[err_lo, err_hi], fmt="none", ecolor=_ERR, capsize=3, lw=1, zorder=3)
        for y, v, w, e in zip(ys, values, widths, err_hi, strict=True):
            ax.annotate(
                f"{w:.3f}" if finite(v) else "no value",
                (w + e, y),
                xytext=(5, 0),
                textcoords="offset points",
                va="center",
                fontsize=8,
                color="#333333",
            )
        if rate:
            ax.set_xlim(0.0, 1.18)
            ax.set_xticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
        ax.set_yticks(ys, [_short(s) for s in subjects])
        ax.set_ylim(n - 0.5, -0.5)  # first subject on top, as in the table
        ax.set_title(title, fontsize=10, loc="left")
        ax.set_xlabel(xlabel)
        ax.grid(axis="x", color="#dddddd", lw=0.6, zorder=0)
        return _png_base64(fig)


def share_bars(
    title: str,
    labels: Sequence[str],
    shares: Sequence[float],
    counts: Sequence[int],
    *,
    xlabel: str = "share",
) -> str:
    """Horizontal bars of shares in [0, 1], each annotated with its percentage and count."""
    with plot_style():
        n = len(labels)
        fig = Figure(figsize=(4.8, max(1.7, 0.42 * n + 1.0)))
        ax = fig.add_subplot()
        ys = list(range(n))
        ax.barh(ys, shares, color=_BAR, height=0.6, zorder=2)
        for y, s, c in zip(ys, shares, counts, strict=True):
            ax.annotate(
                f"{100 * s:.1f}%  (n={c})",
                (s, y),
                xytext=(4, 0),
                textcoords="offset points",
                va="center",
                fontsize=8,
                color="#333333",
            )
        ax.set_yticks(ys, [_short(lbl) for lbl in labels])
        ax.invert_yaxis()
        ax.set_xlim(0.0, 1.25)
        ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0], ["0%", "25%", "50%", "75%", "100%"])
        ax.set_xlabel(xlabel)
        ax.set_title(title, fontsize=10, loc="left")
        ax.grid(axis="x", color="#dddddd", lw=0.6, zorder=0)
        return _png_base64(fig)
