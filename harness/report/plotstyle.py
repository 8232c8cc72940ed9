"""The look every castguard chart shares: a precision's colour, a status's marker, the legend, the PNG encoding.

matplotlib's object API only (``Figure`` + an Agg canvas), never pyplot, so no global backend or figure state is
touched. Imported only when a chart is drawn (a cached plot is not: :mod:`harness.report.plotcache`).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Literal

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

PRECISION_COLOURS = {"fp16": "#1f77b4", "bf16": "#d62728"}
STATUS_MARKERS = {"pass": "o", "xpass": "^", "fail": "X", "xfail": "v", "error": "s", "skip": "d"}


def precision_colour(name: str) -> str:
    """The colour of a precision (``fp16``) or a case family that starts with one (``fp16-emulate``), the same in
    every chart of castguard; anything else is grey."""
    return PRECISION_COLOURS.get(name.split("-", 1)[0], "grey")


def legends(
    ax: object,
    precisions: list[str],
    statuses: list[str],
    *,
    loc: str = "upper left",
    tuned: bool = False,
    tolerances: Sequence[str] = (),
) -> None:
    """One legend: the precisions' colours, the statuses' markers, the front's ring, the tuned star, the
    tolerance lines."""
    colour = [Line2D([], [], color=precision_colour(p), marker="o", linestyle="", label=p) for p in precisions]
    shape = [
        Line2D([], [], color="dimgrey", marker=STATUS_MARKERS.get(s, "o"), linestyle="", label=s) for s in statuses
    ]
    ring = [_hollow("o", 11, "--", "Pareto front")]
    if tuned:
        ring.append(_hollow("*", 12, "", "tuned plan"))
    ring += [
        Line2D([], [], color=precision_colour(p), linestyle="-.", linewidth=1, label=f"{p} tolerance")
        for p in tolerances
    ]
    ax.legend(handles=colour + shape + ring, loc=loc, fontsize=8, framealpha=0.85)  # type: ignore[attr-defined]


def _hollow(marker: str, size: float, linestyle: Literal["--", ""], label: str) -> Line2D:
    """A legend entry of a hollow black marker (the front's ring, the tuned plan's star)."""
    return Line2D(
        [],
        [],
        marker=marker,
        markersize=size,
        markerfacecolor="none",
        markeredgecolor="black",
        linestyle=linestyle,
        color="black",
        label=label,
    )


def num(value: float | None) -> float:
    return math.nan if value is None else value


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG bytes, with no software or date stamp (the same data gives the same bytes)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def plain(text: str) -> str:
    """Escape ``$`` so matplotlib shows model names literally instead of parsing them as mathtext."""
    return text.replace("$", r"\$")
