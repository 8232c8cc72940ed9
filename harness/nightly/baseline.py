"""The baseline a run is compared with (:func:`load_baseline`): a ``report.json``, a report folder, or a history
folder's latest clean run, with the note the summary prints about where it came from or why there is none."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import UserError
from harness.nightly.history import History, HistoryRun, read_history
from harness.report.io import read_report
from harness.report.model import Report


@dataclass(frozen=True)
class Baseline:
    report: Report
    source: str  # the file it was read from
    history: History | None = None  # when it came from a history folder
    run: HistoryRun | None = None


def load_baseline(path: Path) -> tuple[Baseline | None, str]:
    """The baseline at ``path`` and a note for the summary; ``(None, note)`` when a history folder has none yet."""
    if path.is_file():
        return Baseline(report=read_report(path), source=str(path)), f"baseline: {path}"
    if (path / "report.json").is_file():
        return Baseline(
            report=read_report(path / "report.json"), source=str(path / "report.json")
        ), f"baseline: {path / 'report.json'}"
    if path.suffix == ".json":
        raise UserError(
            where=path,
            problem="baseline report not found",
            fix="give an existing report.json, a report folder or a history folder",
        )
    history = read_history(path)
    run = history.latest_clean()
    if run is None and history.skipped and not history.runs:  # every file unreadable: not "no runs yet"
        raise UnreadableHistory(
            where=path,
            problem=f"every file of the history folder is unreadable ({len(history.skipped)} file(s): "
            + "; ".join(f"{s.path.name}: {s.reason}" for s in history.skipped[:3])
            + ("; ..." if len(history.skipped) > 3 else "")
            + "); there is no baseline to compare with",
            fix="move the damaged files away (or give --baseline a report.json); an empty folder starts afresh",
        )
    if run is None:
        why = (
            "has no runs yet"
            if not history.runs
            else f"has no clean run ({history.why_not_clean()}); mark known failures with [tool.castguard] xfail "
            f"/ --xfail PATTERN, or accept the latest night: castguard history {shlex.quote(str(path))} --accept latest"
        )
        skipped = f" ({len(history.skipped)} unreadable file(s) skipped)" if history.skipped else ""
        return None, f"no baseline: history folder {path} {why}{skipped}; nothing was compared"
    newer = history.after(run)
    passed_over = f"; {len(newer)} newer run(s) not used: {history.why_not_clean(newer)}" if newer else ""
    return (
        Baseline(report=run.report, source=str(run.path), history=history, run=run),
        f"baseline: {run.path} (latest clean run of {len(history.runs)}: complete, "
        + ("accepted by a person" if run.accepted else "no failing or erroring case, no unaccepted regression")
        + f", every case of its own baseline{passed_over})",
    )


class UnreadableHistory(UserError):
    """The history folder has files, but none can be read: a run compared with nothing must not pass as clean."""
