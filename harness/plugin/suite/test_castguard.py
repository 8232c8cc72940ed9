"""castguard's accuracy suite: FP32 goldens, then the conversion sweep (model x case) on each runner.

Parametrized by ``harness.plugin.pytest_generate_tests``; every check lives in :mod:`harness.pipeline.session`.
User errors fail the test with their message (no traceback); unavailable runners and runners that are not a
low-precision oracle skip with the reason; a golden onnxruntime could not make fails test_fp32_golden once, in
full, and every other test of that model skips in one line. Each sweep case hands its record to the report
(``castguard_record``), whatever its outcome.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.core.errors import GoldenRunFailed, RunnerUnavailable, UserError
from harness.pipeline.session import AccuracySession, Outcome, SweepCase
from harness.report import CaseRecord


def _run(check: Callable[[], Outcome], *, skip_no_golden: bool = True) -> Outcome:
    try:
        return check()
    except GoldenRunFailed as err:  # said in full once, by test_fp32_golden; other tests skip in one line
        return Outcome("skip", err.skip_reason) if skip_no_golden else Outcome("error", str(err))
    except UserError as err:
        return Outcome("error", str(err))
    except RunnerUnavailable as err:
        return Outcome("skip", str(err))


def _report(outcome: Outcome) -> None:
    __tracebackhide__ = True
    if outcome.status == "skip":
        pytest.skip(outcome.message)
    if outcome.status in ("fail", "error"):
        pytest.fail(outcome.message, pytrace=False)


def test_fp32_golden(castguard_model: str, castguard_session: AccuracySession) -> None:
    _report(_run(lambda: castguard_session.check_fp32_golden(castguard_model), skip_no_golden=False))


def test_low_precision(
    castguard_case: SweepCase, castguard_session: AccuracySession, castguard_record: Callable[[CaseRecord], None]
) -> None:
    outcome = _run(lambda: castguard_session.check_low_precision(castguard_case))
    if outcome.record is not None:
        castguard_record(outcome.record)
    _report(outcome)
