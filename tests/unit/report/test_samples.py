"""The shared sample reports are what the report tests assume they are."""

from __future__ import annotations

from tests.helpers.report_samples import hostile_report, sample_report


def test_sample_report_is_the_default_sweep() -> None:
    report = sample_report()
    assert len(report.cases_of("mnist")) == 24
    assert report.counts("mnist") == {"pass": 21, "fail": 2, "xfail": 0, "xpass": 0, "skip": 0, "error": 1}
    assert report.models == ("mnist", "needs_constraints")


def test_hostile_case_id_is_sanitised() -> None:
    case_id = hostile_report().cases[0].case_id
    assert all(ch.isalnum() or ch in "_.+-" for ch in case_id)
