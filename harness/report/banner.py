"""Why a run failed, in words, from the facts that failed it: the banner of ``report.md``/``report.html``.

Each reason is stated only when its fact is there (failing or erroring cases, an unexpected pass of a case
marked xfail, tests outside the sweep cases that failed, regressions under ``--fail-on-regression``, a requested
runner that never ran, a golden that could not be made); a non-zero exit status with none of them says so
instead of guessing. Pure: no rendering here beyond the sentences.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.report.model import Report

_SHOWN = 5  # names listed per reason


@dataclass(frozen=True)
class RunTrouble:
    """What failed a run besides its cases' statuses (each empty when it did not happen)."""

    regressions: int = 0  # regressions that fail the run (--fail-on-regression)
    skipped_runners: tuple[str, ...] = ()  # requested runners whose every case skipped
    no_golden: tuple[str, ...] = ()  # models whose golden onnxruntime could not make
    failed_tests: tuple[str, ...] = ()  # failed tests that are not sweep cases (a golden written, a user test)


def _names(names: tuple[str, ...]) -> str:
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return ", ".join(names[:_SHOWN]) + more


def failure_reasons(report: Report, trouble: RunTrouble, *, exitstatus: int) -> list[str]:
    """The true reasons of a failed run (exit status non-zero), most specific first."""
    counts = report.counts()
    reasons = []
    if counts["fail"]:
        reasons.append(f"{counts['fail']} case(s) failed their accuracy check")
    if counts["error"]:
        reasons.append(f"{counts['error']} case(s) could not run (error)")
    if trouble.failed_tests:
        reasons.append(
            f"{len(trouble.failed_tests)} test(s) outside the sweep cases failed: {_names(trouble.failed_tests)}"
        )
    if trouble.no_golden:
        reasons.append(f"no FP32 golden could be made for: {_names(trouble.no_golden)}")
    if trouble.regressions:
        reasons.append(f"{trouble.regressions} regression(s) against the baseline (--fail-on-regression)")
    if trouble.skipped_runners:
        reasons.append(f"every case of the requested runner(s) {_names(trouble.skipped_runners)} skipped")
    if not reasons:
        reasons.append(f"pytest ended with exit status {exitstatus} for a reason outside castguard's cases")
    return reasons


def failure_head(exitstatus: int, reasons: list[str]) -> str:
    """``This run FAILED (exit status 1): 2 case(s) failed their accuracy check.``"""
    return f"This run FAILED (exit status {exitstatus}): " + "; ".join(reasons) + "."
