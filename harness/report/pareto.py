"""The Pareto front of a sweep: passing cases for which no other passing case has a larger low-precision FLOP
share at an error that is no larger (NaN errors count as inf). Failing cases are drawn, never on the front: a
numbered point is one a user can pick."""

from __future__ import annotations

import math
from collections.abc import Sequence

from harness.report.model import CaseRecord

PASSING = ("pass", "xpass")
"""The statuses a case on a Pareto front (or a "best passing case") may have."""


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the non-dominated ``(share, error)`` points, maximising share and minimising error.

    A point is dominated when another has share >= and error <= with at least one strict. Identical
    points are all kept. The result is ordered by share, largest first.
    """
    clean = [(share, math.inf if math.isnan(error) else error) for share, error in points]
    front = [
        i for i, (s, e) in enumerate(clean) if not any((s2 >= s and e2 <= e) and (s2 > s or e2 < e) for s2, e2 in clean)
    ]
    return sorted(front, key=lambda i: (-clean[i][0], clean[i][1], i))


def plotted(cases: Sequence[CaseRecord]) -> list[CaseRecord]:
    """The cases that have both a FLOP share and an error to plot."""
    return [c for c in cases if c.lowp_flop_share is not None and c.worst_error is not None]


def front_cases(cases: Sequence[CaseRecord]) -> list[CaseRecord]:
    """The Pareto-front cases among the passing :func:`plotted` ones, largest share first."""
    points = [c for c in plotted(cases) if c.status in PASSING]
    return [points[i] for i in pareto_front([(c.lowp_flop_share, c.worst_error) for c in points])]  # type: ignore[misc]


def front_points(cases: Sequence[CaseRecord]) -> list[list[CaseRecord]]:
    """The front grouped by identical (share, error) points, largest share first: one group per marked point."""
    groups: list[list[CaseRecord]] = []
    for case in front_cases(cases):
        if groups and (groups[-1][0].lowp_flop_share, groups[-1][0].worst_error) == (
            case.lowp_flop_share,
            case.worst_error,
        ):
            groups[-1].append(case)
        else:
            groups.append([case])
    return groups


def best_passing(cases: Sequence[CaseRecord]) -> CaseRecord | None:
    """The fastest passing case when speed was measured (GPU runners); otherwise the passing case with the
    largest FLOP share (then the smallest error); None if none passed."""
    timed = [c for c in cases if c.speedup is not None and c.worst_error is not None and c.status in ("pass", "xpass")]
    if timed:
        return min(timed, key=lambda c: (-c.speedup, c.worst_error, c.case_id))  # type: ignore[operator]
    ok = [c for c in plotted(cases) if c.status in PASSING]
    return min(ok, key=lambda c: (-c.lowp_flop_share, c.worst_error, c.case_id), default=None)  # type: ignore[operator]
