"""The ``tuned`` case per model and precision (collected only with ``pytest --model X --tune``).

The work is :func:`harness.pipeline.tuned.check_tuned`: tune on the golden's inputs (or check the stored plan), record
the case for the report (also when it stops: an unreadable plan, a golden just written), fail naming the nodes to
move when a stored plan no longer meets its bound.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.pipeline.session import AccuracySession, Case
from harness.pipeline.tuned import check_tuned
from harness.plugin.suite.test_castguard import report_outcome
from harness.report import CaseRecord


def test_tuned(
    castguard_tuned_case: Case, castguard_session: AccuracySession, castguard_record: Callable[[CaseRecord], None]
) -> None:
    report_outcome(check_tuned(castguard_session, castguard_tuned_case), castguard_record)
