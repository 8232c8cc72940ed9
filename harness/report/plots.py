"""The report's main plot, worst error against low-precision FLOP share, drawn off-screen from its spec
(:mod:`harness.report.plotdata`); and the PNG of each plot's spec (:func:`draw_png`), which
:mod:`harness.report.plotcache` calls on a cache miss.

Uses matplotlib's object API with an Agg canvas (``Figure`` + ``FigureCanvasAgg``), never pyplot, so
no global backend or figure state is touched.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import offset_copy

from harness.report.charts import grid_figure, speed_figure
from harness.report.model import CaseRecord
from harness.report.plotdata import (
    GridSpec,
    PlotSpec,
    SharePoint,
    ShareSpec,
    SpeedSpec,
    grid_spec,
    share_spec,
    speed_spec,
)
from harness.report.plotstyle import STATUS_MARKERS, legend_handles, plain, png_bytes, precision_colour, share_limits

__all__ = [
    "draw_png",
    "error_vs_share_figure",
    "error_vs_share_png",
    "error_vs_speedup_png",
    "pass_by_data_max_png",
    "share_figure",
]


def draw_png(spec: PlotSpec) -> bytes:
    """The PNG of one plot, drawn from its spec alone."""
    if isinstance(spec, ShareSpec):
        return png_bytes(share_figure(spec))
    if isinstance(spec, SpeedSpec):
        return png_bytes(speed_figure(spec))
    assert isinstance(spec, GridSpec)
    return png_bytes(grid_figure(spec))


def error_vs_share_png(cases: Sequence[CaseRecord], *, title: str) -> bytes:
    """Plot 1 of ``cases`` as PNG bytes (drawn now; report.html reuses cached ones: :mod:`.plotcache`)."""
    return draw_png(share_spec(cases, title=title))


def error_vs_speedup_png(cases: Sequence[CaseRecord], *, title: str) -> bytes:
    """Plot 3 of ``cases`` (timed cases: GPU runners) as PNG bytes, drawn now."""
    return draw_png(speed_spec(cases, title=title))


def pass_by_data_max_png(cases: Sequence[CaseRecord], *, title: str) -> bytes:
    """Plot 2 of ``cases`` (pass rate per precision and data_max) as PNG bytes, drawn now."""
    return draw_png(grid_spec(cases, title=title))


MARKER_STEP_PT = 9.0
"""Markers of different precisions or statuses at one spot stand side by side, this far apart (points)."""

Where = Callable[[SharePoint], tuple[Any, float]]  # a point's axes (the main one, or the inf/NaN band) and y


def _markers(points: Sequence[SharePoint], where: Where) -> list[tuple[Any, float, float, str, str, int, float]]:
    """One marker per (axes, position, precision, status), with the number of cases it stands for; markers that
    share a position are shifted apart sideways so that none hides another (the x value stays the data's)."""
    groups: dict[tuple[int, float, str, str, str], list[SharePoint]] = {}
    targets: dict[int, object] = {}
    for point in points:
        target, y = where(point)
        targets[id(target)] = target
        x = 100 * point.share
        groups.setdefault((id(target), round(x, 6), f"{y:.6g}", point.precision, point.status), []).append(point)
    spots: dict[tuple[int, float, str], list[tuple[str, str]]] = {}
    for tid, px, py, precision, status in sorted(groups):
        spots.setdefault((tid, px, py), []).append((precision, status))
    placed = []
    for (tid, px, py, precision, status), cases in sorted(groups.items()):
        here = spots[(tid, px, py)]
        shift = (here.index((precision, status)) - (len(here) - 1) / 2) * MARKER_STEP_PT
        placed.append((targets[tid], px, float(py), precision, status, len(cases), shift))
    return placed


def error_vs_share_figure(cases: Sequence[CaseRecord], *, title: str) -> Figure:
    """Plot 1 of ``cases`` (:func:`share_figure` of their :func:`~harness.report.plotdata.share_spec`)."""
    return share_figure(share_spec(cases, title=title))


def share_figure(spec: ShareSpec) -> Figure:
    """Plot 1: worst error (log; max |error| / max |golden|) against low-precision FLOP share, one point per case.

    Colour = precision, marker = status. Cases whose error is inf or NaN are drawn as marked points in a band
    *above* the log axis (labelled "inf / NaN"), never as a rise near the top tick; exact zeros on a dotted line
    below the finite ones. A dash-dotted line per precision, in its colour, is its tolerance
    (:func:`~harness.report.plotdata.tolerance_levels`): an elemwise-judged output above it fails. The share axis is
    zoomed to the data. The Pareto front of the passing cases is ringed, joined and numbered in share order (largest
    share = 1; cases with identical results share a number), matching the list under the plot; failing cases are
    drawn, never numbered. The numbers are placed so that they do not overlap each other or the points.
    """
    fig = Figure(figsize=(7.0, 4.8), dpi=100)
    FigureCanvasAgg(fig)
    points = spec.points
    if not points:
        ax = fig.add_subplot()
        ax.set_title(plain(spec.title), fontsize=11)
        ax.text(
            0.5, 0.5, "no case has both a FLOP share and an error", ha="center", va="center", transform=ax.transAxes
        )
        ax.set_axis_off()
        return fig
    if any(not math.isfinite(p.error) for p in points):
        band, ax = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": (1, 7)})
        band.set_title(plain(spec.title), fontsize=11)
    else:
        band, ax = None, fig.add_subplot()
        ax.set_title(plain(spec.title), fontsize=11)
    finite = [p.error for p in points if math.isfinite(p.error) and p.error > 0]
    floor = (min(finite) if finite else 1e-3) / 10.0

    def where(point: SharePoint) -> tuple[Any, float]:
        if not math.isfinite(point.error):
            return band, 0.5
        return ax, (floor if point.error == 0 else point.error)

    _axes(ax, spec, floor=floor, high=max(finite) if finite else 1e-3)
    _points(fig, points, where)
    if band is not None:
        band.set_ylim(0, 1)
        band.set_yticks([0.5], ["inf / NaN"], fontsize=8)
        band.tick_params(axis="x", which="both", bottom=False, labelbottom=False)
        band.set_facecolor("#fdecec")
        band.grid(True, axis="x", alpha=0.3)
    _tuned(points, where)
    front = [points[i] for i in spec.front]
    for target in (ax, band):  # the front, ringed and joined on each axes it reaches
        mine = [p for p in front if where(p)[0] is target]
        if target is None or not mine:
            continue
        xs, ys = [100 * p.share for p in mine], [where(p)[1] for p in mine]
        target.plot(xs, ys, color="black", linewidth=1, linestyle="--", zorder=2)
        target.scatter(xs, ys, s=170, facecolors="none", edgecolors="black", linewidths=1.2, zorder=4, clip_on=False)
    fig.subplots_adjust(left=0.12, right=0.87, bottom=0.11, top=0.93, hspace=0.05)  # fixed: labels placed in pixels
    _number_front(
        fig,
        [(where(p)[0], 100 * p.share, where(p)[1]) for p in front],
        others=[(where(p)[0], 100 * p.share, where(p)[1]) for p in points],
    )
    return fig


def _axes(ax: Any, spec: ShareSpec, *, floor: float, high: float) -> None:
    """The main axes: log scale, tolerance lines, the exact-zero line, labels, legend and the left-out count."""
    points, levels = spec.points, dict(spec.tolerances)
    ax.set_yscale("log")
    ax.set_ylim(min([floor / 2, *(v / 2 for v in levels.values())]), max([high * 4, *(v * 2 for v in levels.values())]))
    for precision, level in spec.tolerances:
        ax.axhline(
            level,
            color=precision_colour(precision),
            linestyle="-.",
            linewidth=1,
            zorder=1,
            gid=f"tolerance-{precision}",
        )
    ax.set_xlim(*share_limits([p.share for p in points]))
    if any(p.error == 0 for p in points):
        ax.axhline(floor, color="grey", linestyle=":", linewidth=1)
        ax.text(1.0, floor, " 0 (exact)", transform=ax.get_yaxis_transform(), va="center", fontsize=8)
    ax.set_xlabel("low-precision FLOP share (%)")
    ax.set_ylabel("worst error: max |obtained − golden| / max |golden|", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    handles = legend_handles(
        sorted({p.precision for p in points}),
        sorted({p.status for p in points}),
        tuned=any(p.tuned for p in points),
        tolerances=sorted(levels),
    )
    ax.legend(handles=handles, loc="upper left", fontsize=8, framealpha=0.85)
    if spec.left_out:
        ax.text(
            0.99,
            0.02,
            f"{spec.left_out} case(s) without a share or error not shown",
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize=8,
            color="dimgrey",
        )


def _points(fig: Figure, points: Sequence[SharePoint], where: Where) -> None:
    """One marker per spot, precision and status (:func:`_markers`), with its count when it stands for several."""
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


def _tuned(points: Sequence[SharePoint], where: Where) -> None:
    """A star and a label on each tuned plan."""
    for point in (p for p in points if p.tuned):
        target, y = where(point)
        x = 100 * point.share
        colour = precision_colour(point.precision)
        target.scatter([x], [y], marker="*", s=260, facecolors="none", edgecolors=colour, linewidths=1.4, zorder=5)
        target.annotate(
            f"tuned {point.precision}", (x, y), xytext=(0, -16), textcoords="offset points", fontsize=8, ha="center"
        )


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
