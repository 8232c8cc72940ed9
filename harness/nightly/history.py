"""Run history for nightly regression: one JSON file per run, read back with corrupt files skipped by name.

A history folder holds ``<created>-<sha8>.json`` files (sortable by time), each::

    {"castguard_history": 1, "report": <report.json contents, provenance included>,
     "verdict": null | {"baseline": <created of the baseline>, "rules": [...], "regressions": N, "accepted": false,
                        "baseline_cases": B, "shared": S}}

Files are written atomically (temporary file + rename), so a crashed run leaves no partial file. A file that
cannot be read is listed in :attr:`History.skipped` with the reason and never used. The baseline of a
history folder is its latest *clean* run: one that had no regressions, or that someone accepted
(``castguard history DIR --accept NAME``); a regressed night therefore keeps failing until it is fixed or
accepted, instead of becoming the next night's baseline. A *partial* run, one that lacks some of its baseline's
cases (``baseline 12 cases, this run 12, shared 4``: a changed option renamed them), is never the baseline
either unless accepted, so a baseline never shrinks silently: the next complete night is compared with the last
baseline that had every case. :mod:`harness.nightly.trend_data` summarises the last N runs per model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.core.errors import UserError
from harness.core.files import atomic_write
from harness.core.jsonfile import read_json
from harness.nightly.comparison import Change, Comparison, judge
from harness.report.model import Report
from harness.report.serde import ReportFormatError, report_from_dict, report_to_dict

HISTORY_SCHEMA = 1


@dataclass(frozen=True)
class RunVerdict:
    """How a stored run fared against its own baseline."""

    baseline: str  # ``created`` of the baseline it was compared with
    rules: tuple[str, ...]
    regressions: int
    accepted: bool = False
    baseline_cases: int | None = None  # cases of that baseline (None: stored before castguard counted them)
    shared: int | None = None  # of those, how many this run has too

    @property
    def missing(self) -> int:
        """The baseline's cases this run lacks (0 when not recorded)."""
        return 0 if self.baseline_cases is None or self.shared is None else self.baseline_cases - self.shared


@dataclass(frozen=True)
class HistoryRun:
    path: Path
    report: Report
    verdict: RunVerdict | None = None  # None: the run had no baseline

    @property
    def clean(self) -> bool:
        """Usable as a baseline: a complete run with no failing or erroring case (cases marked xfail that fail
        are expected, not failing) or a person accepted its known failures, and nothing regressed or a person
        accepted the regressions, and every case of its own baseline present (or a person accepted the smaller
        set). An interrupted run never is (accepting does not change it)."""
        return self.report.complete and (self.report.clean or self.accepted) and not self.regressed and not self.partial

    @property
    def accepted(self) -> bool:
        """A person accepted this run as a baseline (``castguard history DIR --accept``)."""
        return self.verdict is not None and self.verdict.accepted

    @property
    def partial(self) -> bool:
        """It lacks some of its baseline's cases and nobody accepted that: adopting it would shrink the baseline."""
        return self.verdict is not None and self.verdict.missing > 0 and not self.verdict.accepted

    @property
    def regressed(self) -> bool:
        return self.verdict is not None and self.verdict.regressions > 0 and not self.verdict.accepted

    @property
    def mark(self) -> str:
        """How the night fared, for ``castguard history``'s table: ``REGRESSED (2)``, ``accepted``, ``failing``,
        ``interrupted``, ``partial`` or ``clean``."""
        if self.verdict is not None and self.verdict.regressions > 0:
            return f"REGRESSED ({self.verdict.regressions})" + (", accepted" if self.accepted else "")
        if self.accepted:
            return "accepted"
        reason = self.unclean_reason
        return {"failing or erroring cases": "failing"}.get(reason, reason) or "clean"

    @property
    def unclean_reason(self) -> str:
        """Why the run is not :attr:`clean` ("" when it is)."""
        if self.report.interrupted:
            return "incomplete" if self.report.shards else "interrupted"  # a merged night missing a shard
        if not self.report.clean and not self.accepted:
            return "failing or erroring cases"
        if self.regressed:
            return "unaccepted regressions"
        return "partial" if self.partial else ""


@dataclass(frozen=True)
class Skipped:
    path: Path
    reason: str


@dataclass(frozen=True)
class History:
    """The readable runs of a folder, oldest first, and the files that were skipped."""

    folder: Path
    runs: tuple[HistoryRun, ...] = ()
    skipped: tuple[Skipped, ...] = ()

    def latest_clean(self) -> HistoryRun | None:
        return next((run for run in reversed(self.runs) if run.clean), None)

    def why_not_clean(self, runs: Sequence[HistoryRun] | None = None) -> str:
        """``2 interrupted, 1 with failing or erroring cases``: why none of ``runs`` (default: all) is a baseline."""
        from collections import Counter

        found = Counter(run.unclean_reason for run in (self.runs if runs is None else runs) if not run.clean)
        words = {
            "interrupted": "interrupted",
            "incomplete": "incomplete (a shard missing, killed or failed)",
            "failing or erroring cases": "with failing or erroring cases",
            "unaccepted regressions": "with unaccepted regressions",
            "partial": "partial (lacking some of their baseline's cases)",
        }
        return ", ".join(f"{count} {words[reason]}" for reason, count in sorted(found.items()))

    def after(self, run: HistoryRun) -> tuple[HistoryRun, ...]:
        """The runs stored after ``run``."""
        return self.runs[self.runs.index(run) + 1 :]


def read_history(folder: Path) -> History:
    """Every ``*.json`` run in ``folder`` (hidden temporary files ignored); a missing folder is empty."""
    if not folder.exists():
        return History(folder=folder)
    if not folder.is_dir():
        raise UserError(where=folder, problem="is not a folder", fix="give a history folder (created if missing)")
    runs: list[HistoryRun] = []
    skipped: list[Skipped] = []
    for path in sorted(p for p in folder.glob("*.json") if not p.name.startswith(".")):
        try:
            runs.append(read_run(path))
        except UserError as err:
            skipped.append(Skipped(path=path, reason=err.problem))
    runs.sort(key=lambda r: (r.report.created, r.path.name))
    return History(folder=folder, runs=tuple(runs), skipped=tuple(skipped))


def read_run(path: Path) -> HistoryRun:
    """One history file; any defect is a UserError naming the file."""
    fix = "delete or move the file (castguard skips it meanwhile)"
    data = read_json(path, what="history file", fix=fix)
    if not isinstance(data, dict) or data.get("castguard_history") != HISTORY_SCHEMA:
        found = data.get("castguard_history") if isinstance(data, dict) else None
        raise UserError(
            where=path,
            problem=f"not a castguard history file of schema {HISTORY_SCHEMA} (castguard_history={found!r})",
            fix=fix,
        )
    try:
        report = report_from_dict(data.get("report"))
        verdict = _verdict_from(data.get("verdict"))
    except (ReportFormatError, TypeError, KeyError, ValueError) as err:
        raise UserError(where=path, problem=f"invalid history file: {err}", fix=fix) from err
    return HistoryRun(path=path, report=report, verdict=verdict)


def _verdict_from(raw: Any) -> RunVerdict | None:
    if raw is None:
        return None
    required, counts = {"baseline", "rules", "regressions", "accepted"}, {"baseline_cases", "shared"}
    if not isinstance(raw, dict) or set(raw) not in (required, required | counts):  # older files lack the counts
        raise ValueError(
            f"verdict must have baseline, rules, regressions and accepted (and baseline_cases and shared), got {raw!r}"
        )
    if not (
        isinstance(raw["regressions"], int)
        and isinstance(raw["accepted"], bool)
        and isinstance(raw["baseline"], str)
        and all(isinstance(r, str) for r in raw["rules"])
        and all(type(raw.get(k, 0)) is int and raw.get(k, 0) >= 0 for k in counts)
    ):
        raise ValueError(f"verdict has values of the wrong type: {raw!r}")
    return RunVerdict(
        baseline=raw["baseline"],
        rules=tuple(raw["rules"]),
        regressions=raw["regressions"],
        accepted=raw["accepted"],
        baseline_cases=raw.get("baseline_cases"),
        shared=raw.get("shared"),
    )


def write_run(folder: Path, report: Report, *, comparison: Comparison | None) -> Path:
    """Store one run (atomically); the name sorts by time and is unique by content."""
    verdict = (
        None
        if comparison is None
        else RunVerdict(
            baseline=comparison.baseline_created,
            rules=tuple(r.text for r in comparison.rules),
            regressions=len(comparison.regressions),
            baseline_cases=comparison.baseline_cases,
            shared=comparison.shared,
        )
    )
    return _write(folder, report, verdict)


def _write(folder: Path, report: Report, verdict: RunVerdict | None, *, path: Path | None = None) -> Path:
    data = {
        "castguard_history": HISTORY_SCHEMA,
        "report": report_to_dict(report),
        "verdict": None
        if verdict is None
        else {
            "baseline": verdict.baseline,
            "rules": list(verdict.rules),
            "regressions": verdict.regressions,
            "accepted": verdict.accepted,
            **_counts(verdict),
        },
    }
    text = json.dumps(data, indent=1, allow_nan=False) + "\n"
    if path is None:
        path = folder / f"{_stamp(report.created)}-{hashlib.sha256(text.encode()).hexdigest()[:8]}.json"
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text.encode())
    return path


def _counts(verdict: RunVerdict) -> dict[str, int]:
    if verdict.baseline_cases is None or verdict.shared is None:
        return {}
    return {"baseline_cases": verdict.baseline_cases, "shared": verdict.shared}


def _stamp(created: str) -> str:
    """``2026-11-20T10:00:00+00:00`` -> ``20261120T100000Z`` (UTC, sortable)."""
    try:
        when = datetime.fromisoformat(created)
    except ValueError as err:
        raise UserError(
            where="report.created",
            problem=f"{created!r} is not an ISO 8601 time",
            fix="build reports with harness.report.utc_now()",
        ) from err
    return when.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def accept_run(folder: Path, name: str) -> Path:
    """Mark a stored run as accepted ("latest" = the newest run), so it can be the baseline despite regressions,
    despite known failing cases (they stay failing in the baseline; a case that passed and fails later is still
    a regression), or despite lacking some of its baseline's cases (a partial run: accepting it adopts the smaller
    case set). An interrupted run is refused: some of its cases never ran."""
    history = read_history(folder)
    if not history.runs:
        raise UserError(where=folder, problem="no readable runs in this history folder", fix="check the path")
    run = history.runs[-1] if name == "latest" else next((r for r in history.runs if r.path.name == name), None)
    if run is None:
        names = ", ".join(r.path.name for r in history.runs[-5:])
        raise UserError(where=folder / name, problem="no such run", fix=f"use 'latest' or one of: {names}")
    if run.report.interrupted:
        raise UserError(
            where=run.path,
            problem=f"this run cannot be a baseline: {run.unclean_reason} ({run.report.created})",
            fix="accept a complete run (one that was not interrupted), or run again",
        )
    if run.accepted:
        return run.path
    verdict = run.verdict if run.verdict is not None else RunVerdict(baseline="", rules=(), regressions=0)
    return _write(folder, run.report, replace(verdict, accepted=True), path=run.path)


def first_seen(change: Change, baseline: Report, history: History, *, since: HistoryRun | None) -> str | None:
    """``created`` of the first stored run after ``since`` that already broke ``change``'s rule the same way."""
    old = next((c for c in baseline.cases if c.key == change.key), None)
    if old is None or since is None:
        return None
    for run in history.after(since):
        record = next((c for c in run.report.cases if c.key == change.key), None)
        if record is not None and record.model_sha256 == old.model_sha256:
            found = judge(old, record, change.rule)
            if found is not None and found[0]:
                return run.report.created
    return None


def with_since(comparison: Comparison, history: History, baseline_run: HistoryRun | None) -> Comparison:
    """The comparison with each regression's ``since``: the first stored run that showed it, else this run."""
    if baseline_run is None:
        return comparison
    base = baseline_run.report
    regressions = tuple(
        replace(c, since=first_seen(c, base, history, since=baseline_run)) for c in comparison.regressions
    )
    return replace(comparison, regressions=regressions)
