"""The report's two smaller charts, drawn from their specs (:mod:`harness.report.plotdata`): the pass-rate grid
per precision and data_max, and (GPU runners) worst error against the measured speedup."""

from __future__ import annotations

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.figure import Figure

from harness.report.plotdata import GridSpec, SpeedSpec
from harness.report.plotstyle import STATUS_MARKERS, legend_handles, plain, precision_colour


def speed_figure(spec: SpeedSpec) -> Figure:
    """Plot 3 (GPU runners only): worst error (log) against the measured speedup over FP32, one point per timed
    case; the Pareto front of the passing cases (faster at no larger error) is ringed and joined. Speedups below 1
    are slower than FP32."""
    fig = Figure(figsize=(7.0, 4.4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_title(plain(spec.title), fontsize=11)
    points = spec.points
    if not points:
        ax.text(
            0.5, 0.5, "no timed case with a finite, non-zero error", ha="center", va="center", transform=ax.transAxes
        )
        ax.set_axis_off()
        return fig
    ax.set_yscale("log")
    for precision in sorted({p.precision for p in points}):
        for status, marker in STATUS_MARKERS.items():
            group = [p for p in points if p.precision == precision and p.status == status]
            if group:
                ax.scatter(
                    [p.speedup for p in group],
                    [p.error for p in group],
                    c=precision_colour(precision),
                    marker=marker,
                    s=46,
                    alpha=0.8,
                    edgecolors="white",
                    linewidths=0.5,
                    zorder=3,
                )
    front = [points[i] for i in spec.front]
    xs, ys = [p.speedup for p in front], [p.error for p in front]
    ax.plot(xs, ys, color="black", linewidth=1, linestyle="--", zorder=2)
    ax.scatter(xs, ys, s=170, facecolors="none", edgecolors="black", linewidths=1.2, zorder=4)
    ax.axvline(1.0, color="grey", linestyle=":", linewidth=1)
    speeds = [p.speedup for p in points] + [1.0]
    pad = 0.1 * (max(speeds) - min(speeds)) + 0.02
    ax.set_xlim(min(speeds) - pad, max(speeds) + pad)
    errors = [p.error for p in points]
    ax.set_ylim(min(errors) / 3, max(errors) * 3)
    ax.set_xlabel("measured speedup over FP32 (same runner; > 1 is faster)")
    ax.set_ylabel("worst error: max |obtained − golden| / max |golden|", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    handles = legend_handles(sorted({p.precision for p in points}), sorted({p.status for p in points}))
    ax.legend(handles=handles, loc="best", fontsize=8, framealpha=0.85)
    fig.tight_layout()
    return fig


def grid_figure(spec: GridSpec) -> Figure:
    """Plot 2: a precision x data_max grid; each cell shows passed/judged cases, coloured by pass rate."""
    precisions, limits = spec.precisions, spec.limits
    fig = Figure(figsize=(max(3.6, 1.25 * len(limits) + 1.4), 0.8 * max(len(precisions), 1) + 1.3), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_title(plain(spec.title), fontsize=11)
    rate = np.full((len(precisions), len(limits)), np.nan)
    for row, cells in enumerate(spec.cells):
        for col, cell in enumerate(cells):
            if cell.rate is not None:
                rate[row, col] = cell.rate
            ax.text(col, row, cell.text, ha="center", va="center", fontsize=9)
    cmap = LinearSegmentedColormap.from_list("passrate", ["#f1a9a9", "#fbe7a1", "#a8dcb0"]).with_extremes(bad="#e4e7eb")
    ax.imshow(np.ma.masked_invalid(rate), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(limits)), list(limits))
    ax.set_yticks(range(len(precisions)), list(precisions))
    ax.set_xticks(np.arange(-0.5, len(limits)), minor=True)
    ax.set_yticks(np.arange(-0.5, len(precisions)), minor=True)
    ax.grid(which="minor", color="white", linewidth=3)
    ax.tick_params(which="both", length=0)
    fig.tight_layout()
    return fig
