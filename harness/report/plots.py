"""The report's two plots, drawn off-screen to PNG bytes.

Uses matplotlib's object API with an Agg canvas (``Figure`` + ``FigureCanvasAgg``), never pyplot, so
no global backend or figure state is touched.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.transforms import offset_copy

from harness.report.format import accuracy_ok
from harness.report.model import CaseRecord
from harness.report.pareto import front_points, plotted
from harness.sweep import PRECISIONS, format_number

PRECISION_COLOURS = {"fp16": "#1f77b4", "bf16": "#d62728"}
STATUS_MARKERS = {"pass": "o", "xpass": "^", "fail": "X", "xfail": "v", "error": "s", "skip": "d"}


def precision_colour(name: str) -> str:
    """The colour of a precision (``fp16``) or a case family that starts with one (``fp16-emulate``), the same in
    every chart of castguard; anything else is grey."""
    return PRECISION_COLOURS.get(name.split("-", 1)[0], "grey")


def share_limits(shares: Sequence[float]) -> tuple[float, float]:
    """An x range in percent zoomed to the data (at least 10 points wide), never beyond [0, 100]: a point at 100 %
    sits on the edge and is drawn unclipped, with its label inside the figure."""
    low, high = 100 * min(shares), 100 * max(shares)
    pad = max(2.0, 0.08 * (high - low))
    if high - low < 10.0:
        middle = (low + high) / 2
        low, high = middle - 5.0, middle + 5.0
    return max(0.0, low - pad), min(100.0, high + pad)  # a share is never beyond 0..100 %


MARKER_STEP_PT = 9.0
"""Markers of different precisions or statuses at one spot stand side by side, this far apart (points)."""


def _markers(
    points: Sequence[CaseRecord], where: Callable[[CaseRecord], tuple[object, float]]
) -> list[tuple[Any, float, float, str, str, int, float]]:
    """One marker per (axes, position, precision, status), with the number of cases it stands for; markers that
    share a position are shifted apart sideways so that none hides another (the x value stays the data's)."""
    groups: dict[tuple[int, float, str, str, str], list[CaseRecord]] = {}
    targets: dict[int, object] = {}
    for case in points:
        target, y = where(case)
        targets[id(target)] = target
        x = 100 * case.lowp_flop_share  # type: ignore[operator]
        groups.setdefault((id(target), round(x, 6), f"{y:.6g}", case.case.precision, case.status), []).append(case)
    spots: dict[tuple[int, float, str], list[tuple[str, str]]] = {}
    for tid, px, py, precision, status in sorted(groups):
        spots.setdefault((tid, px, py), []).append((precision, status))
    placed = []
    for (tid, px, py, precision, status), cases in sorted(groups.items()):
        here = spots[(tid, px, py)]
        shift = (here.index((precision, status)) - (len(here) - 1) / 2) * MARKER_STEP_PT
        placed.append((targets[tid], px, float(py), precision, status, len(cases), shift))
    return placed


def tolerance_levels(cases: Sequence[CaseRecord]) -> dict[str, float]:
    """Per precision, the tolerance line of the error plot: the tightest :attr:`OutputStats.allowed_scaled_error`
    over the cases' outputs (with the default tolerances every case of a precision has the same one)."""
    levels: dict[str, float] = {}
    for case in cases:
        for output in case.outputs:
            allowed = output.allowed_scaled_error
            if allowed is not None:
                precision = case.case.precision
                levels[precision] = min(levels.get(precision, allowed), allowed)
    return levels


def error_vs_share_png(cases: Sequence[CaseRecord], *, title: str) -> bytes:
    """:func:`error_vs_share_figure` as PNG bytes."""
    return _png(error_vs_share_figure(cases, title=title))


def error_vs_share_figure(cases: Sequence[CaseRecord], *, title: str) -> Figure:
    """Plot 1: worst error (log; max |error| / max |golden|) against low-precision FLOP share, one point per case.

    Colour = precision, marker = status. Cases whose error is inf or NaN are drawn as marked points in a band
    *above* the log axis (labelled "inf / NaN"), never as a rise near the top tick; exact zeros on a dotted line
    below the finite ones. A dash-dotted line per precision, in its colour, is its tolerance
    (:func:`tolerance_levels`): an elemwise-judged output above it fails. The share axis is zoomed to the data. The Pareto front of the passing cases is ringed,
    joined and numbered in share order (largest share = 1; cases with identical results share a number), matching
    the list under the plot; failing cases are drawn, never numbered. The numbers are placed so that they do not
    overlap each other or the points.
    """
    fig = Figure(figsize=(7.0, 4.8), dpi=100)
    FigureCanvasAgg(fig)
    points = plotted(cases)
    if not points:
        ax = fig.add_subplot()
        ax.set_title(_plain(title), fontsize=11)
        ax.text(
            0.5, 0.5, "no case has both a FLOP share and an error", ha="center", va="center", transform=ax.transAxes
        )
        ax.set_axis_off()
        return fig
    errors = [c.worst_error for c in points]
    lost = [c for c in points if not math.isfinite(c.worst_error)]  # type: ignore[arg-type]
    if lost:
        band, ax = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": (1, 7)})
        band.set_title(_plain(title), fontsize=11)
    else:
        band, ax = None, fig.add_subplot()
        ax.set_title(_plain(title), fontsize=11)
    finite = [e for e in errors if e is not None and math.isfinite(e) and e > 0]
    low, high = (min(finite), max(finite)) if finite else (1e-3, 1e-3)
    floor = low / 10.0
    levels = tolerance_levels(points)
    ax.set_yscale("log")
    ax.set_ylim(min([floor / 2, *(v / 2 for v in levels.values())]), max([high * 4, *(v * 2 for v in levels.values())]))
    for precision, level in sorted(levels.items()):
        ax.axhline(
            level,
            color=precision_colour(precision),
            linestyle="-.",
            linewidth=1,
            zorder=1,
            gid=f"tolerance-{precision}",
        )
    ax.set_xlim(*share_limits([c.lowp_flop_share for c in points]))  # type: ignore[misc]

    def where(case: CaseRecord) -> tuple[object, float]:
        error = case.worst_error
        assert error is not None
        if not math.isfinite(error):
            return band, 0.5
        return ax, (floor if error == 0 else error)

    for target, x, y, precision, status, count, shift in _markers(points, where):
        target.scatter(
            [x],
            [y],
            c=precision_colour(precision),
            marker=STATUS_MARKERS.get(status, "o"),
            s=46,
            alpha=0.8,
            edgecolors="white",
            linewidths=0.5,
            zorder=3,
            clip_on=False,  # a case at 100 % sits on the axis' edge, drawn whole
            transform=offset_copy(target.transData, fig=fig, x=shift, y=0.0, units="points"),
        )
        if count > 1:  # a marker standing for several cases says how many, on its own side of the spot
            side = "right" if shift < 0 else ("left" if shift > 0 else "center")
            target.annotate(
                f"×{count}",
                (x, y),
                xytext=(shift + {"right": -5, "left": 5, "center": 0}[side], 8 if side == "center" else 5),
                textcoords="offset points",
                fontsize=7,
                ha=side,
                color=precision_colour(precision),
                annotation_clip=False,
            )
    if band is not None:
        band.set_ylim(0, 1)
        band.set_yticks([0.5], ["inf / NaN"], fontsize=8)
        band.tick_params(axis="x", which="both", bottom=False, labelbottom=False)
        band.set_facecolor("#fdecec")
        band.grid(True, axis="x", alpha=0.3)
    for case in (c for c in points if c.case.tuned):
        target, y = where(case)
        x = 100 * case.lowp_flop_share  # type: ignore[operator]
        target.scatter(  # type: ignore[attr-defined]
            [x],
            [y],
            marker="*",
            s=260,
            facecolors="none",
            edgecolors=precision_colour(case.case.precision),
            linewidths=1.4,
            zorder=5,
        )
        target.annotate(  # type: ignore[attr-defined]
            f"tuned {case.case.precision}",
            (x, y),
            xytext=(0, -16),
            textcoords="offset points",
            fontsize=8,
            ha="center",
        )
    front = [group[0] for group in front_points(points)]
    for target in (ax, band):
        mine = [c for c in front if where(c)[0] is target]
        if target is None or not mine:
            continue
        xs, ys = [100 * c.lowp_flop_share for c in mine], [where(c)[1] for c in mine]  # type: ignore[operator]
        target.plot(xs, ys, color="black", linewidth=1, linestyle="--", zorder=2)
        target.scatter(xs, ys, s=170, facecolors="none", edgecolors="black", linewidths=1.2, zorder=4, clip_on=False)
    if any(e == 0 for e in errors):
        ax.axhline(floor, color="grey", linestyle=":", linewidth=1)
        ax.text(1.0, floor, " 0 (exact)", transform=ax.get_yaxis_transform(), va="center", fontsize=8)
    ax.set_xlabel("low-precision FLOP share (%)")
    ax.set_ylabel("worst error: max |obtained − golden| / max |golden|", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    _legends(
        ax,
        sorted({c.case.precision for c in points}),
        sorted({c.status for c in points}),
        tuned=any(c.case.tuned for c in points),
        tolerances=sorted(levels),
    )
    left_out = len(cases) - len(points)
    if left_out:
        ax.text(
            0.99,
            0.02,
            f"{left_out} case(s) without a share or error not shown",
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize=8,
            color="dimgrey",
        )
    fig.subplots_adjust(left=0.12, right=0.87, bottom=0.11, top=0.93, hspace=0.05)  # fixed: labels placed in pixels
    _number_front(
        fig,
        [(where(c)[0], 100 * c.lowp_flop_share, where(c)[1]) for c in front],  # type: ignore
        others=[(where(c)[0], 100 * c.lowp_flop_share, where(c)[1]) for c in points],  # type: ignore[operator]
    )
    return fig


_OFFSETS = [
    (dx * r, dy * r)
    for r in (11, 19, 28, 38)
    for dx, dy in ((1, 1), (-1, 1), (1, -1), (-1, -1), (0, 1.3), (0, -1.3), (1.4, 0), (-1.4, 0))
]


def _number_front(
    fig: Figure, front: Sequence[tuple[object, float, float]], *, others: Sequence[tuple[object, float, float]]
) -> None:
    """Number the front's points 1..n, each label at the first nearby spot (in pixels) that overlaps no other
    label and no point; a label moved away from its point gets a thin leader line."""

    def pixel(target: object, x: float, y: float) -> tuple[float, float]:
        px, py = target.transData.transform((x, y))  # type: ignore[attr-defined]
        return float(px), float(py)

    taken: list[tuple[float, float, float, float]] = [
        (px - 5, py - 5, px + 5, py + 5) for px, py in (pixel(t, x, y) for t, x, y in others)
    ]
    width, height = fig.bbox.width, fig.bbox.height
    for rank, (target, x, y) in enumerate(front, start=1):
        px, py = pixel(target, x, y)
        w, h = 7.0 * len(str(rank)) + 2, 12.0
        choice = _OFFSETS[0]
        for dx, dy in _OFFSETS:
            box = (px + dx - w / 2, py + dy - h / 2, px + dx + w / 2, py + dy + h / 2)
            inside = 0 <= box[0] and box[2] <= width and 0 <= box[1] and box[3] <= height
            if inside and not any(_overlap(box, other) for other in taken):
                choice = (dx, dy)
                break
        dx, dy = choice
        taken.append((px + dx - w / 2, py + dy - h / 2, px + dx + w / 2, py + dy + h / 2))
        far = abs(dx) > 12 or abs(dy) > 14
        target.annotate(  # type: ignore[attr-defined]
            str(rank),
            (x, y),
            xytext=(dx, dy),
            textcoords="offset pixels",
            fontsize=9,
            weight="bold",
            ha="center",
            va="center",
            zorder=5,
            arrowprops={"arrowstyle": "-", "color": "dimgrey", "linewidth": 0.6} if far else None,
            annotation_clip=False,
        )


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def error_vs_speedup_png(cases: Sequence[CaseRecord], *, title: str) -> bytes:
    """Plot 3 (GPU runners only): worst error (log) against the measured speedup over FP32, one point per timed
    case; the Pareto front of the passing cases (faster at no larger error) is ringed and joined. Speedups below 1 are slower than FP32."""
    from harness.report.speed import speed_front, timed

    fig = Figure(figsize=(7.0, 4.4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_title(_plain(title), fontsize=11)
    points = [
        c for c in timed(cases) if c.worst_error is not None and math.isfinite(c.worst_error) and c.worst_error > 0
    ]
    if not points:
        ax.text(
            0.5, 0.5, "no timed case with a finite, non-zero error", ha="center", va="center", transform=ax.transAxes
        )
        ax.set_axis_off()
        return _png(fig)
    ax.set_yscale("log")
    for precision in sorted({c.case.precision for c in points}):
        for status, marker in STATUS_MARKERS.items():
            group = [c for c in points if c.case.precision == precision and c.status == status]
            if group:
                ax.scatter(
                    [_num(c.speedup) for c in group],
                    [_num(c.worst_error) for c in group],
                    c=precision_colour(precision),
                    marker=marker,
                    s=46,
                    alpha=0.8,
                    edgecolors="white",
                    linewidths=0.5,
                    zorder=3,
                )
    front = speed_front(points)
    xs, ys = [_num(c.speedup) for c in front], [_num(c.worst_error) for c in front]
    ax.plot(xs, ys, color="black", linewidth=1, linestyle="--", zorder=2)
    ax.scatter(xs, ys, s=170, facecolors="none", edgecolors="black", linewidths=1.2, zorder=4)
    ax.axvline(1.0, color="grey", linestyle=":", linewidth=1)
    speeds = [_num(c.speedup) for c in points] + [1.0]
    pad = 0.1 * (max(speeds) - min(speeds)) + 0.02
    ax.set_xlim(min(speeds) - pad, max(speeds) + pad)
    errors = [_num(c.worst_error) for c in points]
    ax.set_ylim(min(errors) / 3, max(errors) * 3)
    ax.set_xlabel("measured speedup over FP32 (same runner; > 1 is faster)")
    ax.set_ylabel("worst error: max |obtained − golden| / max |golden|", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    _legends(ax, sorted({c.case.precision for c in points}), sorted({c.status for c in points}), loc="best")
    fig.tight_layout()
    return _png(fig)


def pass_by_data_max_png(cases: Sequence[CaseRecord], *, title: str) -> bytes:
    """Plot 2: a precision x data_max grid; each cell shows passed/judged cases, coloured by pass rate."""
    cases = [c for c in cases if not c.case.tuned]  # a tuned plan is not a point of the data_max grid
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


def _legends(
    ax: object,
    precisions: list[str],
    statuses: list[str],
    *,
    loc: str = "upper left",
    tuned: bool = False,
    tolerances: Sequence[str] = (),
) -> None:
    colour = [Line2D([], [], color=precision_colour(p), marker="o", linestyle="", label=p) for p in precisions]
    shape = [
        Line2D([], [], color="dimgrey", marker=STATUS_MARKERS.get(s, "o"), linestyle="", label=s) for s in statuses
    ]
    ring = [
        Line2D(
            [],
            [],
            marker="o",
            markersize=11,
            markerfacecolor="none",
            markeredgecolor="black",
            linestyle="--",
            color="black",
            label="Pareto front",
        )
    ]
    if tuned:
        ring.append(
            Line2D(
                [],
                [],
                marker="*",
                markersize=12,
                markerfacecolor="none",
                markeredgecolor="black",
                linestyle="",
                label="tuned plan",
            )
        )
    ring += [
        Line2D([], [], color=precision_colour(p), linestyle="-.", linewidth=1, label=f"{p} tolerance")
        for p in tolerances
    ]
    ax.legend(handles=colour + shape + ring, loc=loc, fontsize=8, framealpha=0.85)  # type: ignore[attr-defined]


def _num(value: float | None) -> float:
    return math.nan if value is None else value


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _plain(text: str) -> str:
    """Escape ``$`` so matplotlib shows model names literally instead of parsing them as mathtext."""
    return text.replace("$", r"\$")
