"""castguard's accuracy suite: FP32 goldens, then the conversion sweep (model x case) on each runner.

Parametrized by ``harness.plugin.pytest_generate_tests``; every check lives in :mod:`harness.pipeline.session`
and every status is decided in :mod:`harness.pipeline.verdict`: these tests only turn the outcome into
pass/fail/skip. A golden onnxruntime could not make fails test_fp32_golden once, in full, and every other test
of that model skips in one line. Each sweep case hands its record to the report (``castguard_record``),
whatever its outcome.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.pipeline.session import AccuracySession, Case, Outcome
from harness.report import CaseRecord


def report_outcome(outcome: Outcome, hand: Callable[[CaseRecord], None] | None = None) -> None:
    """Hand the outcome's record to the report (when it has one) and turn its status into pytest's."""
    __tracebackhide__ = True
    if hand is not None and outcome.record is not None:
        hand(outcome.record)
    if outcome.status == "skip":
        pytest.skip(outcome.message)
    if outcome.status in ("fail", "error"):
        pytest.fail(outcome.message, pytrace=False)


def test_fp32_golden(castguard_model: str, castguard_session: AccuracySession) -> None:
    report_outcome(castguard_session.check_fp32_golden(castguard_model))


def test_low_precision(
    castguard_case: Case, castguard_session: AccuracySession, castguard_record: Callable[[CaseRecord], None]
) -> None:
    report_outcome(castguard_session.check_low_precision(castguard_case), castguard_record)
