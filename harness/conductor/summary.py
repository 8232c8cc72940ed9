"""What a run prints at its end, as :class:`Section` blocks: the report's place and headline with the facts every run
repeats (the TensorRT build check, degenerate goldens, QDQ models, unexpected passes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.report.banner import xpass_lines
from harness.report.collect import FinishedReport


@dataclass(frozen=True)
class Section:
    """A block of the terminal summary: ``title`` (None: no separator line) and its lines."""

    title: str | None
    lines: tuple[str, ...]


def report_section(finished: FinishedReport, *, relative_to: Path) -> Section:
    """The written report: where it is, its headline, old run folders deleted, and the facts every run repeats."""
    from harness.report.format import degenerate_lines, summary_facts
    from harness.report.view import trt_terminal_lines

    lines = [finished.summary_line(relative_to=relative_to)]
    if finished.pruned:
        lines.append(f"castguard: deleted {finished.pruned} old run folder(s) (keep_runs)")
    lines += trt_terminal_lines(finished.view)  # the TensorRT build check (issue 17)
    lines += degenerate_lines(finished.report)  # every run, not only when the golden was written
    lines += summary_facts(finished.view.report.cases)  # QDQ models, the model's own FP32 Casts
    lines += xpass_lines(finished.view.report.cases)
    return Section("castguard sweep report", tuple(lines))


def plain_lines(sections: Sequence[Section]) -> list[str]:
    """Sections as plain lines, each titled one behind a ``title:`` line (the CLI)."""
    return [line for s in sections for line in ((s.title + ":",) if s.title else ()) + s.lines]
