"""A run's case records between pytest and the report: each test's records held until pytest judges it, and the
sweep cases the run planned, each of which ends with a record (a lost or never-reached case gets one)."""

from __future__ import annotations

from collections.abc import Sequence

from harness.pipeline.session import AccuracySession
from harness.report import CaseRecord


class CaseLedger:
    """The held records per test id, and the planned sweep cases' parameter ids (``Case.id``)."""

    def __init__(self) -> None:
        self.pending: dict[str, list[CaseRecord]] = {}  # a test's records until pytest judges it
        self.planned: int | None = None
        self.planned_ids: tuple[str, ...] = ()

    def hold(self, test_id: str, record: CaseRecord) -> None:
        self.pending.setdefault(test_id, []).append(record)

    def plan(self, case_ids: Sequence[str]) -> None:
        self.planned_ids = tuple(case_ids)
        self.planned = len(case_ids)

    def take(self, test_id: str, *, case_id: str | None, session: AccuracySession | None) -> list[CaseRecord]:
        """The judged test's held records; a sweep case's test that held none (it raised, or its setup failed)
        gets its case's lost record."""
        held = self.pending.pop(test_id, [])
        if not held and case_id is not None and session is not None:
            why = f"its test {test_id} ended without a record (it raised: see its failure in the test report)"
            lost = session.lost_case(case_id, why)
            held = [lost] if lost is not None else []
        return held

    def unreached(self, reported: set[str], *, session: AccuracySession, interrupted: bool) -> list[CaseRecord]:
        """A record for every planned case whose id is not among ``reported``: never reached."""
        why = (
            "never reached: the run was interrupted before this case"
            if interrupted
            else "never reached: the process running it ended before handing its record (a crashed worker?)"
        )
        lost = (session.lost_case(case_id, why) for case_id in self.planned_ids if case_id not in reported)
        return [record for record in lost if record is not None]
