"""Trend data over the last N runs (data only; :mod:`harness.nightly.trends` draws it): per model and case family
(precision and runner), each run's largest error and best passing low-precision FLOP share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.core.errors import UserError
from harness.nightly.history import History
from harness.nightly.options import DEFAULT_TREND_RUNS as DEFAULT_TREND_RUNS
from harness.report.model import CaseRecord, Report


def family(record: CaseRecord) -> str:
    """The case family a trend line follows: precision and runner (e.g. ``fp16-emulate``)."""
    return f"{record.case.precision}-{record.case.runner}"


@dataclass(frozen=True)
class TrendRun:
    created: str
    commit: str | None
    passed: int
    total: int
    max_error: tuple[float | None, ...]  # per family: largest worst_error (inf for overflow/NaN)
    best_share: tuple[float | None, ...]  # per family: largest lowp FLOP share among passing cases
    mark: str = ""  # how the night fared against its baseline (HistoryRun.mark); "" when not from a history


@dataclass(frozen=True)
class Trend:
    model: str
    families: tuple[str, ...]
    runs: tuple[TrendRun, ...]


def trends(
    reports: Sequence[Report], *, last: int = DEFAULT_TREND_RUNS, marks: Sequence[str] = ()
) -> tuple[Trend, ...]:
    """Per model, over the last ``last`` reports (oldest first): max error and best passing share per family.
    ``marks``: one per report (:attr:`HistoryRun.mark`), or none."""
    if last < 1:
        raise UserError(where="--last", problem=f"must be >= 1, got {last}", fix="e.g. --last 20")
    if marks and len(marks) != len(reports):
        raise ValueError(f"{len(marks)} marks for {len(reports)} reports")
    recent = list(reports)[-last:]
    recent_marks = list(marks)[-last:] if marks else [""] * len(recent)
    models = dict.fromkeys(m for r in recent for m in r.models)
    return tuple(_trend(model, recent, recent_marks) for model in models)


def history_trends(history: History, *, last: int = DEFAULT_TREND_RUNS) -> tuple[Trend, ...]:
    """:func:`trends` of a history folder's runs, each marked with how its night fared."""
    return trends([run.report for run in history.runs], last=last, marks=[run.mark for run in history.runs])


def _trend(model: str, reports: Sequence[Report], marks: Sequence[str]) -> Trend:
    families = tuple(sorted({family(c) for r in reports for c in r.cases_of(model)}))
    runs = []
    for report, mark in zip(reports, marks):
        cases = report.cases_of(model)
        errors, shares = [], []
        for fam in families:
            mine = [c for c in cases if family(c) == fam]
            errs = [c.worst_error for c in mine if c.worst_error is not None]
            errors.append(max((math.inf if math.isnan(e) else e for e in errs), default=None))
            ok = [c.lowp_flop_share for c in mine if c.status in ("pass", "xpass") and c.lowp_flop_share is not None]
            shares.append(max(ok, default=None))
        runs.append(
            TrendRun(
                created=report.created,
                commit=report.provenance.git_commit,
                passed=sum(c.status == "pass" for c in cases),
                total=len(cases),
                max_error=tuple(errors),
                best_share=tuple(shares),
                mark=mark,
            )
        )
    return Trend(model=model, families=families, runs=tuple(runs))
