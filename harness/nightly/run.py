"""Nightly regression for one pytest run: its options and what happens when the run ends.

The plugin builds :class:`NightlyOptions` when options are read (rules parsed, bad ones are usage errors),
loads the baseline with :func:`~harness.nightly.baseline.load_baseline` at configure time, and at session end
calls :func:`finish` with the run's :class:`~harness.report.Report`: compare with the baseline, store the run in
the history folder, and return the report sections and the exit code. Nothing here imports pytest.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import UserError
from harness.nightly.baseline import Baseline, UnreadableHistory, load_baseline
from harness.nightly.comparison import Comparison, compare_reports
from harness.nightly.history import (
    History,
    Skipped,
    read_history,
    with_since,
    write_run,
)
from harness.nightly.options import DISPLAY_RULES as DISPLAY_RULES
from harness.nightly.options import NightlyOptions as NightlyOptions
from harness.nightly.options import nightly_options as nightly_options
from harness.nightly.options import options_from as options_from
from harness.report.model import Report


@dataclass(frozen=True)
class NightlyOutcome:
    comparison: Comparison | None
    fail_on_regression: bool
    baseline_error: UserError | None = None  # the baseline could not be read (--fail-on-regression: exit 2)
    history_file: Path | None = None
    history: History | None = None  # as read after this run was stored (for trends)
    notes: tuple[str, ...] = ()
    history_error: UserError | None = None  # the history folder could not take this run (full, read-only)

    @property
    def skipped(self) -> tuple[Skipped, ...]:
        return self.history.skipped if self.history is not None else ()

    @property
    def exit_code(self) -> int:
        """Non-zero for regressions under --fail-on-regression (2 when the baseline could not be read), and 1 when
        the run could not be stored (the history a nightly relies on is missing a run)."""
        if self.fail_on_regression and self.baseline_error is not None:
            return 2
        if self.history_error is not None:
            return 1
        return self.comparison.exit_code if self.fail_on_regression and self.comparison is not None else 0

    def trend_reports(self, *, last: int) -> tuple[Report, ...]:
        return tuple(run.report for run in self.history.runs[-last:]) if self.history is not None else ()


def finish(
    options: NightlyOptions,
    baseline: Baseline | None,
    report: Report,
    *,
    notes: Sequence[str] = (),
    baseline_error: UserError | None = None,
) -> NightlyOutcome:
    """Compare ``report`` with the baseline and store it in the history folder (when one is set)."""
    comparison = None
    if baseline is not None:
        comparison = compare_reports(report, baseline.report, rules=options.effective_rules, source=baseline.source)
        if baseline.history is not None:
            comparison = with_since(comparison, baseline.history, baseline.run)
    stored = history = None
    error = None
    if options.history is not None:
        try:
            stored = write_run(options.history, report, comparison=comparison)
            history = read_history(options.history)
        except UserError as err:  # a full or read-only folder: said once, the run goes on to its report
            error = UserError(
                where=options.history,
                problem=err.problem,
                fix="free space or make the folder writable, or pass another --history DIR",
            )
        except OSError as err:
            error = UserError(
                where=options.history,
                problem=f"the history folder cannot take this run ({err.strerror or err})",
                fix="make it a writable folder with free space, or pass another --history DIR",
            )
    elif baseline is not None and baseline.history is not None:
        history = baseline.history
    if error is not None:
        notes = (*notes, f"history: this run was NOT stored: {error}")
    return NightlyOutcome(
        comparison=comparison,
        fail_on_regression=bool(options.rules),
        history_file=stored,
        history=history,
        notes=tuple(notes),
        baseline_error=baseline_error,
        history_error=error,
    )


def trend_source(outcome: NightlyOutcome, report: Report, *, last: int) -> tuple[Report, ...]:
    """The reports to draw trends from: the history (this run included once stored), else this run alone."""
    reports = outcome.trend_reports(last=last)
    if outcome.history_file is None:
        reports = (*reports, report)[-last:]
    return reports


def report_sections(outcome: NightlyOutcome, report: Report, *, last: int) -> tuple[list[str], list[str]]:
    """The markdown and HTML sections this run adds to ``report.md``/``report.html`` (comparison, trends)."""
    from harness.nightly.render import comparison_html, comparison_markdown, notes_html, notes_markdown
    from harness.nightly.trend_data import trends
    from harness.nightly.trends import trends_html, trends_markdown

    markdown, html = [notes_markdown(outcome.notes, outcome.skipped)], [notes_html(outcome.notes, outcome.skipped)]
    if outcome.comparison is not None:
        markdown.append(comparison_markdown(outcome.comparison))
        html.append(comparison_html(outcome.comparison))
    found = trends(trend_source(outcome, report, last=last), last=last)
    markdown.append(trends_markdown(found))
    html.append(trends_html(found))
    return [m for m in markdown if m], [h for h in html if h]


class NightlyRun:
    """This run's nightly state: the baseline is loaded when built (configure time). Once the run's report exists
    (session end), :meth:`decide` compares and stores it and keeps the outcome (the verdict); only then
    :meth:`sections` and :meth:`terminal_lines` render it. The verdict never depends on rendering."""

    def __init__(self, options: NightlyOptions) -> None:
        self.options = options
        self.baseline_error: UserError | None = None
        try:
            self.baseline, note = load_baseline(options.compare_with) if options.compare_with else (None, "")
        except UnreadableHistory as err:  # said in the summary; exit 2 under --fail-on-regression
            self.baseline, note, self.baseline_error = None, f"no baseline: {err}", err
        self.note = note
        self.outcome: NightlyOutcome | None = None
        self._report: Report | None = None

    def decide(self, report: Report) -> NightlyOutcome:
        """Compare ``report`` with the baseline and store it in the history folder; the verdict, kept."""
        notes = tuple(n for n in (self.note, _interrupted_note(report)) if n)
        self.outcome = finish(self.options, self.baseline, report, notes=notes, baseline_error=self.baseline_error)
        self._report = report
        return self.outcome

    def sections(self) -> tuple[list[str], list[str]]:
        """The markdown and HTML sections of the decided outcome (nothing before :meth:`decide`)."""
        if self.outcome is None or self._report is None:
            return [], []
        return report_sections(self.outcome, self._report, last=self.options.trend_runs)

    @property
    def exit_code(self) -> int:
        return self.outcome.exit_code if self.outcome is not None else 0

    @property
    def failing_regressions(self) -> int:
        """Regressions that fail the run (under --fail-on-regression); 0 when they are only shown."""
        if not self.exit_code or self.outcome is None or self.outcome.comparison is None:
            return 0
        return len(self.outcome.comparison.regressions)

    def terminal_lines(self) -> list[str]:
        from harness.nightly.render import comparison_lines, skipped_lines

        if self.outcome is None:
            return []
        lines = list(self.outcome.notes)
        if self.outcome.comparison is not None:
            lines += comparison_lines(self.outcome.comparison)
            if self.outcome.comparison.regressions and not self.outcome.fail_on_regression:
                lines.append("  (shown only: pass --fail-on-regression RULES to fail the run on regressions)")
        if self.outcome.history_file is not None:
            lines.append(f"history: stored {self.outcome.history_file}")
            if self.outcome.comparison is not None and self.outcome.comparison.partial:
                stored = self.outcome.history_file
                lines.append(
                    f"  to adopt its smaller case set as the baseline: castguard history "
                    f"{shlex.quote(str(stored.parent))} --accept {shlex.quote(stored.name)}"
                )
        if self.outcome.skipped:
            lines.append(f"history: {len(self.outcome.skipped)} unreadable file(s) skipped")
            lines += skipped_lines(self.outcome.skipped)
        return lines


def _interrupted_note(report: Report) -> str:
    if not report.interrupted:
        return ""
    from harness.report.format import completion_text

    return f"this run was {completion_text(report)}: it is stored marked as such and is never used as a baseline"
