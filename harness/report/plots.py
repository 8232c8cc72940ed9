"""The report's two plots, drawn off-screen to PNG bytes.

Uses matplotlib's object API with an Agg canvas (``Figure`` + ``FigureCanvasAgg``), never pyplot, so
no global backend or figure state is touched.
"""
from __future__ import annotations

import io
import math
from collections.abc import Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from harness.report.format import accuracy_ok
from harness.report.model import CaseRecord
from harness.report.pareto import front_points, plotted
from harness.sweep import PRECISIONS, format_number

PRECISION_COLOURS = {"fp16": "#1f77b4", "bf16": "#d62728"}
STATUS_MARKERS = {"pass": "o", "xpass": "^", "fail": "X", "xfail": "v", "error": "s", "skip": "d"}


def error_vs_share_png(cases: Sequence[CaseRecord], *, title: str) -> bytes:
    """Plot 1: worst error (log; max |error| / max |golden|) against low-precision FLOP share, one point per case.

    Colour = precision, marker = status; the Pareto front is ringed, joined and numbered in share
    order (largest share = 1; cases with identical results share a number), matching the list under the plot. Errors of inf/NaN sit on a
    dotted line above the finite ones; exact zeros on one below.
    """
    fig = Figure(figsize=(7.0, 4.4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_title(_plain(title), fontsize=11)
    points = plotted(cases)
    if not points:
        ax.text(0.5, 0.5, "no case has both a FLOP share and an error", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_axis_off()
        return _png(fig)
    errors = [c.worst_error for c in points]
    finite = [e for e in errors if e is not None and math.isfinite(e) and e > 0]
    low, high = (min(finite), max(finite)) if finite else (1e-3, 1e-3)
    ceiling, floor = high * 10.0, low / 10.0
    ax.set_yscale("log")
    ax.set_ylim(floor / 2, ceiling * 2)

    def y_of(case: CaseRecord) -> float:
        error = case.worst_error
        assert error is not None
        return ceiling if not math.isfinite(error) else (floor if error == 0 else error)

    for precision in sorted({c.case.precision for c in points}):
        for status, marker in STATUS_MARKERS.items():
            group = [c for c in points if c.case.precision == precision and c.status == status]
            if group:
                ax.scatter([100 * c.lowp_flop_share for c in group], [y_of(c) for c in group],  # type: ignore[operator]
                           c=PRECISION_COLOURS.get(precision, "grey"), marker=marker, s=46, alpha=0.8,
                           edgecolors="white", linewidths=0.5, zorder=3)
    for case in (c for c in points if c.case.tuned):
        x, y = 100 * case.lowp_flop_share, y_of(case)  # type: ignore[operator]
        ax.scatter([x], [y], marker="*", s=260, facecolors="none", edgecolors=PRECISION_COLOURS.get(
            case.case.precision, "grey"), linewidths=1.4, zorder=5)
        ax.annotate(f"tuned {case.case.precision}", (x, y), xytext=(-10 if x > 85 else 10, -12),
                    textcoords="offset points", fontsize=8, ha="right" if x > 85 else "left")
    front = [group[0] for group in front_points(points)]
    xs = [100 * c.lowp_flop_share for c in front]  # type: ignore[operator]
    ys = [y_of(c) for c in front]
    ax.plot(xs, ys, color="black", linewidth=1, linestyle="--", zorder=2)
    ax.scatter(xs, ys, s=170, facecolors="none", edgecolors="black", linewidths=1.2, zorder=4)
    for rank, (x, y) in enumerate(zip(xs, ys), start=1):
        right = x > 85
        ax.annotate(str(rank), (x, y), xytext=(-9 if right else 9, 8), textcoords="offset points", fontsize=9,
                    weight="bold", ha="right" if right else "left")
    if any(not math.isfinite(e) for e in errors if e is not None):
        ax.axhline(ceiling, color="grey", linestyle=":", linewidth=1)
        ax.text(1.0, ceiling, " inf / NaN", transform=ax.get_yaxis_transform(), va="center", fontsize=8)
    if any(e == 0 for e in errors):
        ax.axhline(floor, color="grey", linestyle=":", linewidth=1)
        ax.text(1.0, floor, " 0 (exact)", transform=ax.get_yaxis_transform(), va="center", fontsize=8)
    ax.set_xlim(-3, 103)
    ax.set_xlabel("low-precision FLOP share (%)")
    ax.set_ylabel("worst error: max |obtained − golden| / max |golden|", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    _legends(ax, sorted({c.case.precision for c in points}), sorted({c.status for c in points}))
    left_out = len(cases) - len(points)
    if left_out:
        ax.text(0.99, 0.02, f"{left_out} case(s) without a share or error not shown", transform=ax.transAxes,
                ha="right", va="bottom", fontsize=8, color="dimgrey")
    fig.tight_layout()
    return _png(fig)


def pass_by_data_max_png(cases: Sequence[CaseRecord], *, title: str) -> bytes:
    """Plot 2: a precision x data_max grid; each cell shows passed/judged cases, coloured by pass rate."""
    cases = [c for c in cases if not c.case.tuned]   # a tuned plan is not a point of the data_max grid
    precisions = [p for p in PRECISIONS if any(c.case.precision == p for c in cases)]
    limits = sorted({c.case.data_max for c in cases})
    fig = Figure(figsize=(max(3.6, 1.25 * len(limits) + 1.4), 0.8 * max(len(precisions), 1) + 1.3), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_title(_plain(title), fontsize=11)
    rate = np.full((len(precisions), len(limits)), np.nan)
    for row, precision in enumerate(precisions):
        for col, limit in enumerate(limits):
            group = [c for c in cases if c.case.precision == precision and c.case.data_max == limit]
            judged = [ok for ok in (accuracy_ok(c.status) for c in group) if ok is not None]
            other = len(group) - len(judged)
            if judged:
                rate[row, col] = sum(judged) / len(judged)
            xfail = sum(c.status == "xfail" for c in group)
            text = f"{sum(judged)}/{len(judged)} pass" if judged else "not judged"
            text += f"\n({xfail} xfail)" if xfail else ""
            text += f"\n{other} error/skip" if other else ""
            ax.text(col, row, text, ha="center", va="center", fontsize=9)
    cmap = LinearSegmentedColormap.from_list("passrate", ["#f1a9a9", "#fbe7a1", "#a8dcb0"]).with_extremes(bad="#e4e7eb")
    ax.imshow(np.ma.masked_invalid(rate), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(limits)), [f"data_max={format_number(v)}" for v in limits])
    ax.set_yticks(range(len(precisions)), precisions)
    ax.set_xticks(np.arange(-0.5, len(limits)), minor=True)
    ax.set_yticks(np.arange(-0.5, len(precisions)), minor=True)
    ax.grid(which="minor", color="white", linewidth=3)
    ax.tick_params(which="both", length=0)
    fig.tight_layout()
    return _png(fig)


def _legends(ax: object, precisions: list[str], statuses: list[str]) -> None:
    colour = [Line2D([], [], color=PRECISION_COLOURS.get(p, "grey"), marker="o", linestyle="", label=p)
              for p in precisions]
    shape = [Line2D([], [], color="dimgrey", marker=STATUS_MARKERS.get(s, "o"), linestyle="", label=s)
             for s in statuses]
    ring = [Line2D([], [], marker="o", markersize=11, markerfacecolor="none", markeredgecolor="black",
                   linestyle="--", color="black", label="Pareto front"),
            Line2D([], [], marker="*", markersize=12, markerfacecolor="none", markeredgecolor="black",
                   linestyle="", label="tuned plan")]
    ax.legend(handles=colour + shape + ring, loc="upper left", fontsize=8, framealpha=0.85)  # type: ignore[attr-defined]


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _plain(text: str) -> str:
    """Escape ``$`` so matplotlib shows model names literally instead of parsing them as mathtext."""
    return text.replace("$", r"\$")
