"""The converters side by side (``--converter``, ``--candidate``): one row per converter of a model (pure).

Each row is the converter's best judged case: the smallest worst error among its cases that a rounding runner
judged (pass or fail), else among any with figures (a CPU ``ort`` run: recorded, not judged), with its
low-precision FLOP share (read from the converted graph's types), its speed against FP32 where a GPU runner
measured it, and the sweep settings the converter took. A converter none of whose cases ran shows its first
case's status and message (a skip names the reason, an error its cause).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.report.model import CaseRecord


@dataclass(frozen=True)
class ConverterRow:
    """One converter's standing on one model."""

    converter: str
    case: CaseRecord  # the case the row's figures come from
    cases: int  # how many cases the converter had
    judged: bool  # the figures come from a runner that really rounds (a verdict), not a CPU "would" run
    settings: tuple[str, ...]  # the sweep settings the converter took

    @property
    def why(self) -> str:
        """The first line of the row's case message (a skip's reason, an error's cause); "" when it has none."""
        lines = self.case.message.strip().splitlines()
        return lines[0] if lines else ""


def _error(case: CaseRecord) -> float:
    error = case.worst_error
    return math.inf if error is None or math.isnan(error) else error


def converter_rows(cases: Sequence[CaseRecord]) -> tuple[ConverterRow, ...]:
    """One row per converter, in the order converters first appear; empty when the cases used one converter."""
    by: dict[str, list[CaseRecord]] = {}
    for case in cases:
        by.setdefault(case.case.converter, []).append(case)
    if len(by) < 2:
        return ()
    rows = []
    for name, mine in by.items():
        judged = [c for c in mine if c.status in ("pass", "fail", "xfail", "xpass") and c.outputs]
        measured = judged or [c for c in mine if c.outputs]
        best = min(measured, key=_error) if measured else mine[0]
        rows.append(
            ConverterRow(
                converter=name,
                case=best,
                cases=len(mine),
                judged=bool(judged),
                settings=best.case.applied_settings(),
            )
        )
    return tuple(rows)
