"""What a run prints at its end, as :class:`Section` blocks: the report's place and headline with the facts every run
repeats (the TensorRT build check, degenerate goldens, QDQ models, unexpected passes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from harness.pipeline.session import AccuracySession
from harness.pipeline.shard_run import ShardState
from harness.report.banner import xpass_lines
from harness.report.collect import FinishedReport

if TYPE_CHECKING:
    from harness.nightly.merge import ShardNight
    from harness.nightly.run import NightlyRun  # a nightly run's (imported there): not on a plain run's path


@dataclass(frozen=True)
class Section:
    """A block of the terminal summary: ``title`` (None: no separator line) and its lines."""

    title: str | None
    lines: tuple[str, ...]


class EndedRun(Protocol):
    """What the summary reads of a finished run (:class:`~harness.conductor.run.CastguardRun`)."""

    invocation_dir: Path
    is_worker: bool
    session: AccuracySession | None
    nightly: NightlyRun | None
    shard: ShardState | None
    night: ShardNight | None
    finished: FinishedReport | None
    evicted: str
    skipped_runners: list[str]


def terminal_sections(run: EndedRun) -> list[Section]:
    """What the run prints at the end: the report's place and headline, inputs, nightly verdict."""
    sections = [Section(None, tuple(run.night.terminal_lines()))] if run.night is not None else []
    if run.finished is not None:
        sections.append(report_section(run.finished, relative_to=run.invocation_dir))
    tail = [*([run.evicted] if run.evicted else []), *run.skipped_runners]
    if run.session is not None and not run.is_worker:
        tail += [
            f"castguard inputs of {name}: " + "; ".join(loaded.input_lines)  # on every run (issue 9)
            for name, loaded in run.session.models.items()
        ]
    if run.shard is not None:
        tail.append(f"castguard {run.shard.work.summary()}")
    if tail:
        sections.append(Section(None, tuple(tail)))
    nightly = run.nightly.terminal_lines() if run.nightly is not None else []
    if nightly:  # decided: the run wrote its report
        sections.append(Section("castguard nightly regression", tuple(nightly)))
    return sections


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
