"""How a run's end is decided beyond pytest's own exit status: a golden not made, the nightly rules' verdict and
the sections their rendering adds to the report (a merged night's notes first)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: a run that is no merged night never imports the merge machinery
    from harness.nightly.merge import ShardNight
    from harness.nightly.run import NightlyRun
    from harness.report import Report

TESTS_FAILED = 1  # pytest's ExitCode.TESTS_FAILED (no pytest import here)
USAGE_ERROR = 2  # pytest's ExitCode.USAGE_ERROR


def no_golden(report: Report, golden_failures: Sequence[str]) -> bool:
    """A golden was not made: by this process's session, or for a case of the report (even with its test
    deselected, or run by an xdist worker)."""
    return bool(golden_failures) or any(c.stopped == "golden_not_made" for c in report.cases)


def run_exit_status(exitstatus: int, nightly: NightlyRun | None, *, failed_here: bool) -> int:
    """pytest's exit status, failed by the nightly rules or by what failed the run here (a requested runner that
    never ran, a golden not made); --fail-on-regression with a history that cannot be read is a usage error."""
    if exitstatus == 0 and ((nightly is not None and nightly.exit_code) or failed_here):
        exitstatus = TESTS_FAILED
    if exitstatus == TESTS_FAILED and nightly is not None and nightly.exit_code == USAGE_ERROR:
        exitstatus = USAGE_ERROR
    return exitstatus


def extra_sections(nightly: NightlyRun | None, night: ShardNight | None) -> tuple[list[str], list[str]]:
    """The markdown and HTML sections the nightly verdict's rendering adds, a merged night's notes first."""
    extra_md, extra_html = nightly.sections() if nightly is not None else ([], [])
    if night is not None:
        night_md, night_html = night.sections()
        extra_md, extra_html = [night_md, *extra_md], [night_html, *extra_html]
    return extra_md, extra_html
