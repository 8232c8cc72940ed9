"""The look every castguard chart shares: a precision's colour, a status's marker, the legend, the PNG encoding.

matplotlib's object API only (``Figure`` + an Agg canvas), never pyplot, so no global backend or figure state is
touched. Imported only when a chart is drawn (a cached plot is not: :mod:`harness.report.plotcache`).
"""

from __future__ import annotations

import io
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


def share_limits(shares: Sequence[float]) -> tuple[float, float]:
    """An x range in percent zoomed to the data (at least 10 points wide), never beyond [0, 100]: a point at 100 %
    sits on the edge and is drawn unclipped, with its label inside the figure."""
    low, high = 100 * min(shares), 100 * max(shares)
    pad = max(2.0, 0.08 * (high - low))
    if high - low < 10.0:
        middle = (low + high) / 2
        low, high = middle - 5.0, middle + 5.0
    return max(0.0, low - pad), min(100.0, high + pad)  # a share is never beyond 0..100 %


def legend_handles(
    precisions: list[str], statuses: list[str], *, tuned: bool = False, tolerances: Sequence[str] = ()
) -> list[Line2D]:
    """One legend's entries: the precisions' colours, the statuses' markers, the front's ring, the tuned star, the
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
    return colour + shape + ring


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


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG bytes, with no software or date stamp (the same data gives the same bytes)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def plain(text: str) -> str:
    """Escape ``$`` so matplotlib shows model names literally instead of parsing them as mathtext."""
    return text.replace("$", r"\$")
