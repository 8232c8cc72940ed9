"""Collects the sweep's :class:`CaseRecord` objects during a run and writes the report at the end. No pytest here.

Every process that runs cases (the only process, or each pytest-xdist worker) appends one JSON line per
case to ``<report_dir>/cases/<worker>.jsonl`` as soon as the case is settled; the process that owns the
run (the only process, or the xdist controller) clears those files when the run starts and, when it ends,
merges them into one :class:`Report`, writes ``report.json``, ``report.md`` and ``report.html`` and
removes the case files.
Workers never write a partial report. Lines are appended with one ``write`` each, so a reader sees whole
lines; a worker that crashes loses only the cases it never wrote.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from harness.errors import UserError
from harness.report import CaseRecord, Provenance, Report, ReportPaths, utc_now, write_report
from harness.report.format import counts_text
from harness.files import safe_component
from harness.report.serde import ReportFormatError, record_from_dict, record_to_dict

CASES_DIR = "cases"
Sections = Callable[[Report], tuple[Sequence[str], Sequence[str]]]


def settle(record: CaseRecord, *, expected_failure: bool) -> CaseRecord:
    """The record's final status once pytest has judged the test: an expected failure is xfail/xpass."""
    if expected_failure and record.status in ("pass", "fail"):
        return replace(record, status="xpass" if record.status == "pass" else "xfail")
    return record


@dataclass(frozen=True)
class FinishedReport:
    """What :meth:`ReportSession.finish` wrote."""

    report: Report
    paths: ReportPaths

    def summary_line(self, *, relative_to: Path | None = None) -> str:
        """``castguard: 24 cases: 24 pass; report: castguard-report/report.md, report.html, report.json``."""
        markdown = self.paths.markdown
        if relative_to is not None and markdown.is_relative_to(relative_to):
            markdown = markdown.relative_to(relative_to)
        return (f"castguard: {counts_text(self.report.counts())}; report: {markdown}, {self.paths.html.name}, "
                f"{self.paths.json.name}")


class ReportSession:
    """Per-process record keeping for one run; ``worker`` names this process's case file."""

    def __init__(self, *, report_dir: Path, worker: str = "main") -> None:
        self.report_dir = report_dir
        self.cases_file = report_dir / CASES_DIR / f"{safe_component(worker)}.jsonl"

    def start(self) -> None:
        """Called once per run by the owning process: forget the case files of earlier runs."""
        for path in self._case_files():
            path.unlink()
        folder = self.report_dir / CASES_DIR
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()

    def add(self, record: CaseRecord) -> None:
        """Append one settled record to this process's case file."""
        self.cases_file.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(record_to_dict(record), allow_nan=False) + "\n"
        with open(self.cases_file, "a", encoding="utf-8") as handle:
            handle.write(line)

    def collect(self) -> list[CaseRecord]:
        """Every record written by any process of this run; a re-run of the same case replaces the earlier one."""
        records: dict[tuple[str, str, str], CaseRecord] = {}
        for path in self._case_files():
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                try:
                    record = record_from_dict(json.loads(line))
                except (json.JSONDecodeError, ReportFormatError) as err:
                    raise UserError(where=f"{path}:{number}", problem=f"unreadable case record ({err})",
                                    fix="re-run; do not share one --report-dir between concurrent runs") from err
                records[record.key] = record
        return list(records.values())

    def finish(self, *, provenance: Provenance, extra: Sections | None = None) -> FinishedReport | None:
        """Merge the case files into the report and write it; None when no case ran (nothing is written).

        ``extra(report)`` returns markdown and HTML sections to add (the nightly comparison and trends)."""
        records = self.collect()
        if not records:
            return None
        report = Report.build(records, created=utc_now(), provenance=provenance)
        extra_md, extra_html = extra(report) if extra is not None else ((), ())
        paths = write_report(report, self.report_dir, extra_md=extra_md, extra_html=extra_html)
        self.start()   # merged into report.json: the case files are not needed any more
        return FinishedReport(report=report, paths=paths)

    def _case_files(self) -> Iterable[Path]:
        folder = self.report_dir / CASES_DIR
        return sorted(folder.glob("*.jsonl")) if folder.is_dir() else []


def worker_name(workerinput: dict[str, object] | None) -> str:
    """``gw0``… under pytest-xdist (from the worker's ``workerinput``), ``main`` otherwise."""
    return str(workerinput["workerid"]) if workerinput else "main"
