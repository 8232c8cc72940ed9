"""Why a run failed, in words, from the facts that failed it: the banner of ``report.md``/``report.html``.

Each reason is stated only when its fact is there (failing or erroring cases, an unexpected pass of a case
marked xfail, tests outside the sweep cases that failed, regressions under ``--fail-on-regression``, a requested
runner that never ran, a golden that could not be made); a non-zero exit status with none of them says so
instead of guessing. Pure: no rendering here beyond the sentences.

A runner the user asked for by name (``--runner``, ``[tool.castguard] runners`` or ``[tool.castguard.sweep]
runners``) whose every case skipped fails the run (exit 1), with the reason printed once, unless
``--allow-skipped-runner``: a CI job whose GPU stack broke does not stay green.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from harness.report.format import completion_text
from harness.report.model import CaseRecord, Report

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
    if report.interrupted:  # a run cut short, or a merged night with a shard that did not complete
        reasons.append(completion_text(report))
    if not reasons:
        reasons.append(f"pytest ended with exit status {exitstatus} for a reason outside castguard's cases")
    return reasons


def failure_head(exitstatus: int, reasons: list[str]) -> str:
    """``This run FAILED (exit status 1): 2 case(s) failed their accuracy check.``"""
    return f"This run FAILED (exit status {exitstatus}): " + "; ".join(reasons) + "."


def xpass_lines(cases: Sequence[CaseRecord]) -> list[str]:
    """Cases expected to fail that passed: their xfail mark no longer holds (said, never silent)."""
    ids = [f"{c.model}-{c.case_id}" for c in cases if c.status == "xpass"]
    if not ids:
        return []
    return [
        f"castguard: {len(ids)} case(s) expected to fail passed (xpass): "
        + ", ".join(ids[:5])
        + (f" and {len(ids) - 5} more" if len(ids) > 5 else ""),
        "  fix: if the pass is meant, drop them from [tool.castguard] xfail / --xfail",
    ]


def all_skipped(report: Report, runners: tuple[str, ...]) -> tuple[str, ...]:
    """The requested runners whose every case skipped."""
    return tuple(
        runner
        for runner in runners
        if (cases := [c for c in report.cases if c.case.runner == runner]) and all(c.status == "skip" for c in cases)
    )


def skipped_runner_lines(report: Report, runners: tuple[str, ...]) -> list[str]:
    """Two lines per requested runner whose every case skipped: the reason (said once) and the fix."""
    lines = []
    for runner in all_skipped(report, runners):
        cases = [c for c in report.cases if c.case.runner == runner]
        if cases:
            reasons = list(dict.fromkeys(c.message.splitlines()[0] for c in cases if c.message))
            ran = [c for c in cases if c.outputs and not c.rounds_low_precision]  # it ran, but does not round
            fix = (
                f"  fix: {runner} ran, but it computes fp16/bf16 in fp32 (rounds_low_precision = False), so it "
                "cannot judge a case: add a rounding runner (--runner emulate), or pass --allow-skipped-runner "
                "to accept its would-pass/would-fail records"
                if ran
                else f"  fix: make {runner} available on this machine, drop it from the runners, or pass "
                "--allow-skipped-runner to accept the skips"
            )
            lines += [
                f"castguard: FAILED: every case of the requested runner {runner!r} skipped ({len(cases)} "
                f"case{'s' if len(cases) > 1 else ''}): " + (" | ".join(reasons[:3]) or "no reason recorded"),
                fix,
            ]
    return lines


def run_status_sections(
    report: Report, exitstatus: int, skipped_runners: Sequence[str], trouble: RunTrouble = RunTrouble()
) -> tuple[str, str]:
    """The report's first section when the run failed (markdown, HTML): the true reasons
    (:func:`harness.report.banner.failure_reasons`), the requested runners that never ran, and the skipped cases
    grouped by reason (a model without a golden says why once)."""
    if exitstatus == 0:
        return "", ""
    reasons = Counter(c.message.splitlines()[0] for c in report.cases if c.status == "skip" and c.message)
    items = [*skipped_runners[::2], *(f"{n} case(s) skipped: {reason}" for reason, n in reasons.items())]
    head = failure_head(exitstatus, failure_reasons(report, trouble, exitstatus=exitstatus))
    md = "\n".join([f"**{head}**", "", *(f"- {item}" for item in items), ""])
    html = f'<p class="failed"><strong>{escape(head)}</strong></p>' + (
        "<ul>" + "".join(f"<li>{escape(item)}</li>" for item in items) + "</ul>" if items else ""
    )
    return md, html
