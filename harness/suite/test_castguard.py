"""castguard's accuracy suite: FP32 goldens, then the low-precision model on each runner.

Parametrized by ``harness.plugin.pytest_generate_tests``; every check lives in :mod:`harness.accuracy`.
User errors fail the test with their message (no traceback); unavailable runners and runners that are not a
low-precision oracle skip with the reason.
"""
from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.accuracy import AccuracySession, LowPrecisionCase, Outcome
from harness.errors import RunnerUnavailable, UserError


def _run(check: Callable[[], Outcome]) -> Outcome:
    try:
        return check()
    except UserError as err:
        return Outcome("fail", str(err))
    except RunnerUnavailable as err:
        return Outcome("unavailable", str(err))


def _report(check: Callable[[], Outcome]) -> None:
    __tracebackhide__ = True
    outcome = _run(check)
    if outcome.status == "unavailable":
        pytest.skip(outcome.message)
    if outcome.status == "fail":
        pytest.fail(outcome.message, pytrace=False)
    if outcome.status == "not-oracle":
        pytest.skip(outcome.message)


def test_fp32_golden(castguard_model: str, castguard_session: AccuracySession) -> None:
    _report(lambda: castguard_session.check_fp32_golden(castguard_model))


def test_low_precision(castguard_case: LowPrecisionCase, castguard_session: AccuracySession) -> None:
    _report(lambda: castguard_session.check_low_precision(castguard_case))
