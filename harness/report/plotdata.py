"""What each of the report's plots draws, as plain data (no matplotlib): one frozen spec per plot.

A plot is a pure function of its spec (:mod:`harness.report.plots` and :mod:`harness.report.charts` draw only
from it), so the spec is also its content key (:mod:`harness.report.plotcache`): a warm run whose plotted data did
not change reuses the PNG without importing matplotlib. Only the fields a plot draws go into its spec (never a
case's timings or messages), so a re-run with the same results keys the same PNG.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.report.format import accuracy_ok
from harness.report.model import CaseRecord
from harness.report.pareto import front_points, plotted
from harness.report.speed import speed_front, timed
from harness.sweep import PRECISIONS, format_number


@dataclass(frozen=True)
class SharePoint:
    """One case of the error-vs-share plot."""

    share: float  # low-precision FLOP share, 0..1
    error: float  # worst error (inf or NaN: the band above the axis)
    precision: str
    status: str
    tuned: bool


@dataclass(frozen=True)
class ShareSpec:
    """Plot 1: worst error against low-precision FLOP share (:func:`harness.report.plots.error_vs_share_figure`)."""

    title: str
    points: tuple[SharePoint, ...]
    front: tuple[int, ...]  # indices into points: one per marked point of the Pareto front, largest share first
    tolerances: tuple[tuple[str, float], ...]  # (precision, tolerance line), by precision
    left_out: int  # cases without a share or an error (not drawn)


@dataclass(frozen=True)
class SpeedPoint:
    """One timed case of the error-vs-speedup plot."""

    speedup: float
    error: float
    precision: str
    status: str


@dataclass(frozen=True)
class SpeedSpec:
    """Plot 3 (GPU runners): worst error against the measured speedup (:func:`harness.report.charts.speed_figure`)."""

    title: str
    points: tuple[SpeedPoint, ...]  # timed cases with a finite, non-zero error
    front: tuple[int, ...]  # indices into points: the Pareto front of the passing ones


@dataclass(frozen=True)
class GridCell:
    text: str
    rate: float | None  # passed / judged; None: nothing judged (grey)


@dataclass(frozen=True)
class GridSpec:
    """Plot 2: the precision x data_max grid of pass rates (:func:`harness.report.charts.grid_figure`)."""

    title: str
    precisions: tuple[str, ...]  # rows
    limits: tuple[str, ...]  # columns: data_max, formatted
    cells: tuple[tuple[GridCell, ...], ...]  # one row per precision


PlotSpec = ShareSpec | SpeedSpec | GridSpec


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


def share_spec(cases: Sequence[CaseRecord], *, title: str) -> ShareSpec:
    """What plot 1 draws of ``cases``: the cases with both a share and an error, in order, and its front."""
    points = plotted(cases)
    index = {id(case): i for i, case in enumerate(points)}
    return ShareSpec(
        title=title,
        points=tuple(
            SharePoint(
                share=_known(c.lowp_flop_share),
                error=_known(c.worst_error),
                precision=c.case.precision,
                status=c.status,
                tuned=c.case.tuned,
            )
            for c in points
        ),
        front=tuple(index[id(group[0])] for group in front_points(points)),
        tolerances=tuple(sorted(tolerance_levels(points).items())),
        left_out=len(cases) - len(points),
    )


def speed_spec(cases: Sequence[CaseRecord], *, title: str) -> SpeedSpec:
    """What plot 3 draws of ``cases``: the timed cases with a finite, non-zero error, and their front."""
    points = [
        c for c in timed(cases) if c.worst_error is not None and math.isfinite(c.worst_error) and c.worst_error > 0
    ]
    index = {id(case): i for i, case in enumerate(points)}
    return SpeedSpec(
        title=title,
        points=tuple(
            SpeedPoint(
                speedup=_known(c.speedup), error=_known(c.worst_error), precision=c.case.precision, status=c.status
            )
            for c in points
        ),
        front=tuple(index[id(c)] for c in speed_front(points)),
    )


def grid_spec(cases: Sequence[CaseRecord], *, title: str) -> GridSpec:
    """What plot 2 draws of ``cases``: per precision and data_max, passed/judged cases (tuned plans left out)."""
    cases = [c for c in cases if not c.case.tuned]  # a tuned plan is not a point of the data_max grid
    precisions = [p for p in PRECISIONS if any(c.case.precision == p for c in cases)]
    limits = sorted({c.case.data_max for c in cases})
    rows = []
    for precision in precisions:
        row = []
        for limit in limits:
            group = [c for c in cases if c.case.precision == precision and c.case.data_max == limit]
            judged = [ok for ok in (accuracy_ok(c.status) for c in group) if ok is not None]
            other = len(group) - len(judged)
            xfail = sum(c.status == "xfail" for c in group)
            text = f"{sum(judged)}/{len(judged)} pass" if judged else "not judged"
            text += f"\n({xfail} xfail)" if xfail else ""
            text += f"\n{other} error/skip" if other else ""
            row.append(GridCell(text=text, rate=sum(judged) / len(judged) if judged else None))
        rows.append(tuple(row))
    return GridSpec(
        title=title,
        precisions=tuple(precisions),
        limits=tuple(f"data_max={format_number(v)}" for v in limits),
        cells=tuple(rows),
    )


def _known(value: float | None) -> float:
    """A field the spec's filter guarantees is set (:func:`~harness.report.pareto.plotted`, ``timed``)."""
    assert value is not None
    return float(value)
