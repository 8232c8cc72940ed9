"""Measured speed next to accuracy: the error-vs-speedup Pareto front, the fastest passing case, and the
speed table rows the renderers show. Pure data; no drawing (see :func:`harness.report.plots.error_vs_speedup_png`).

Only cases run on a GPU runner carry ``speedup`` (``harness.runners.timing.speed_claim``); the others carry a
``speed_note`` saying why they claim none, which the report prints instead of a number.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.report.format import fmt_error
from harness.report.model import CaseRecord
from harness.report.pareto import PASSING, pareto_front


def timed(cases: Sequence[CaseRecord]) -> list[CaseRecord]:
    """The cases with both a measured speedup and an error."""
    return [c for c in cases if c.speedup is not None and c.worst_error is not None]


def speed_front(cases: Sequence[CaseRecord]) -> list[CaseRecord]:
    """Passing cases no other passing case beats on both speedup (larger) and error (smaller), fastest first
    (failing cases are drawn, never on the front)."""
    points = [c for c in timed(cases) if c.status in PASSING]
    return [points[i] for i in pareto_front([(c.speedup, c.worst_error) for c in points])]  # type: ignore[misc]


def fastest_passing(cases: Sequence[CaseRecord]) -> CaseRecord | None:
    """The passing case with the largest measured speedup (then the smallest error); None without one."""
    ok = [c for c in timed(cases) if c.status in PASSING]
    return min(ok, key=lambda c: (-c.speedup, c.worst_error, c.case_id), default=None)  # type: ignore[operator]


def speed_notes(cases: Sequence[CaseRecord]) -> list[str]:
    """The distinct reasons cases claim no speed, in first-seen order."""
    seen: list[str] = []
    for case in cases:
        if case.speed_note and case.speed_note not in seen:
            seen.append(case.speed_note)
    return seen


def fmt_ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g}"


def fmt_speedup(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def speed_rows(cases: Sequence[CaseRecord]) -> list[tuple[CaseRecord, str, str, str, str, bool, str]]:
    """(case, latency, FP32 latency, speedup, worst error, on the front, end to end) for every timed case, fastest
    first. The first three are as the case's ``speed_basis`` says (device-resident where the runner could bind its
    inputs on the device); end to end: "latency / FP32 ms, speedup" with host copies, or "–"."""
    front = {id(c) for c in speed_front(cases)}
    rows = sorted(timed(cases), key=lambda c: (-(c.speedup or 0.0), c.case_id))
    return [
        (
            c,
            fmt_ms(c.latency_ms),
            fmt_ms(c.fp32_latency_ms),
            fmt_speedup(c.speedup) + ("" if c.speed_basis != "end to end" else " (end to end)"),
            fmt_error(c.worst_error),
            id(c) in front,
            _end_to_end(c),
        )
        for c in rows
    ]


def _end_to_end(c: CaseRecord) -> str:
    if c.e2e_latency_ms is None:
        return "–"
    return f"{fmt_ms(c.e2e_latency_ms)} / {fmt_ms(c.e2e_fp32_latency_ms)}, {fmt_speedup(c.e2e_speedup)}"
