"""The suite's knowledge-map heatmap (base64 PNG, Agg canvas, mathtext off — as in `report.plots`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from proctor.report.plots import _png_base64, _short, finite, plot_style


def mastery_heatmap(
    topics: Sequence[str],
    candidates: Sequence[str],
    values: Sequence[Sequence[float | None]],
    counts: Sequence[Sequence[int]],
) -> str:
    """Topics (rows) x candidates (columns), coloured by pooled mastery in [0, 1] (red 0, green 1); each
    cell shows its value and n, a cell without evidence is grey with a dash."""
    with plot_style():
        grid = np.array([[v if finite(v) else np.nan for v in row] for row in values], dtype=float)
        n_rows, n_cols = len(topics), len(candidates)
        fig = Figure(figsize=(max(3.6, 1.3 * n_cols + 2.6), max(1.8, 0.5 * n_rows + 1.2)))
        ax = fig.add_subplot()
        cmap = colormaps["RdYlGn"].with_extremes(bad="#e6e6e6")
        image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
        for i in range(n_rows):
            for j in range(n_cols):
                v = grid[i, j]
                text = "—" if np.isnan(v) else f"{v:.2f}\nn={counts[i][j]}"
                dark = not np.isnan(v) and (v < 0.2 or v > 0.8)  # the colormap's deep ends
                ax.text(
                    j, i, text, ha="center", va="center", fontsize=8, color="white" if dark else "#111111"
                )
        ax.set_xticks(range(n_cols), [_short(c, 20) for c in candidates], rotation=20, ha="right")
        ax.set_yticks(range(n_rows), [_short(t, 36) for t in topics])
        ax.tick_params(length=0)
        for side in ("top", "right", "bottom", "left"):
            ax.spines[side].set_visible(False)
        fig.colorbar(image, ax=ax, fraction=0.04, pad=0.03, label="mastery (share correct)")
        ax.set_title("Knowledge map: pooled mastery per topic", fontsize=10, loc="left")
        return _png_base64(fig)
