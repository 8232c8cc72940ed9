"""Collects the sweep's :class:`CaseRecord` objects during a run and writes the report at the end. No pytest here.

Every run has its own working folder ``<report_dir>/runs/<run_id>/`` (:mod:`harness.report.runs`). Every
process that runs cases (the only process, or each pytest-xdist worker) appends one JSON line per case to
``runs/<run_id>/cases/<worker>.jsonl`` as soon as the case is settled. The process that owns the run (the
only process, or the xdist controller) locks the folder while the run goes on; at the end it merges the case
files of *its* run into one :class:`Report` (:meth:`ReportSession.build`) and, once the caller has added its
sections, writes it (:meth:`ReportSession.write`): always into the run folder, and, for a complete run, also
as the report folder's top-level ``report.json``/``.md``/``.html`` (replaced together under a lock). An
interrupted run never replaces the previous complete report, but puts a banner on top of it naming itself
(:func:`harness.report.runs.mark_superseded`), so that it never passes for this run. Old run folders beyond
``keep_runs`` are pruned.

Lines are appended with one ``write`` each, so a reader sees whole lines; a worker that crashes loses only the
cases it never wrote. Two runs sharing a report folder never see each other's records.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from harness.core.errors import DiskFull, HarnessError, UserError
from harness.core.files import disk_full, own_folder, safe_component
from harness.report import CaseRecord, Provenance, Report, ReportPaths, utc_now, write_report
from harness.report.format import completion_text, counts_text
from harness.report.io import render_report, report_paths, write_shard_marker
from harness.report.model import ShardInfo
from harness.report.plotcache import PlotCache
from harness.report.provenance import with_case_converters, with_case_runners
from harness.report.runs import (
    DEFAULT_KEEP_RUNS,
    RUNS_DIR,
    SUPERSEDED,
    ActiveRun,
    mark_superseded,
    new_run_id,
    prune_runs,
    publish_lock,
    run_dir,
)
from harness.report.serde import ReportFormatError, record_from_dict, record_to_dict
from harness.report.view import ReportView, report_view

CASES_DIR = "cases"


@dataclass(frozen=True)
class FinishedReport:
    """What :meth:`ReportSession.write` wrote: the run's own copy, and the published one (complete runs).
    ``error``: why the report could not be written (a full disk); then nothing was, and the summary says so."""

    report: Report
    run_paths: ReportPaths
    view: ReportView  # what the pages rendered; the terminal summary renders it too
    published: ReportPaths | None = None
    pruned: int = 0
    error: UserError | None = None
    stale_note: str = ""  # with ``error``: what became of the previous published report

    @property
    def paths(self) -> ReportPaths:
        return self.published or self.run_paths

    def summary_line(self, *, relative_to: Path | None = None) -> str:
        """``castguard: 24 cases: 24 pass; report: castguard-report/report.md, report.html, report.json``, or for
        an interrupted run ``castguard: interrupted after 5 of 24 cases (5 pass); partial report: ...``."""

        def shown(path: Path) -> Path:
            return (
                path.relative_to(relative_to) if relative_to is not None and path.is_relative_to(relative_to) else path
            )

        if self.error is not None:
            counts = counts_text(self.report.counts())
            done = counts if self.report.complete else f"{completion_text(self.report)} ({counts})"
            note = f"\n  {self.stale_note}" if self.stale_note else ""
            return f"castguard: {done}; the report was not written: {self.error}{note}"
        if self.published is None:
            return (
                f"castguard: {completion_text(self.report)} ({counts_text(self.report.counts())}); partial "
                f"report: {shown(self.run_paths.markdown)}; the previous complete report (if any) is kept, marked as not the "
                "latest run"
            )
        same = self.view.shared_models
        shared = f" ({same} share another case's converted model)" if same else ""
        return (
            f"castguard: {counts_text(self.report.counts())}{shared}; report: {shown(self.published.markdown)}, "
            f"{self.published.html.name}, {self.published.json.name}"
        )


class ReportSession:
    """Per-process record keeping for one run (``run_id``); ``worker`` names this process's case file."""

    def __init__(
        self, *, report_dir: Path, run_id: str | None = None, worker: str = "main", keep_runs: int = DEFAULT_KEEP_RUNS
    ) -> None:
        self.report_dir = report_dir
        self.run_id = run_id or new_run_id()
        self.run_dir = run_dir(report_dir, self.run_id)
        self.cases_file = self.run_dir / CASES_DIR / f"{safe_component(worker)}.jsonl"
        self.keep_runs = keep_runs
        self._active = ActiveRun(self.run_dir)
        self._error: DiskFull | None = None  # a case record that could not be written (full disk)

    def start(self) -> None:
        """Called once per run by the owning process: create and lock this run's folder."""
        own_folder(self.report_dir)
        self._active.acquire()

    def add(self, record: CaseRecord) -> None:
        """Append one settled record to this process's case file."""
        line = json.dumps(record_to_dict(record), allow_nan=False) + "\n"
        try:
            own_folder(self.report_dir)
            self.cases_file.parent.mkdir(parents=True, exist_ok=True)
            with open(self.cases_file, "a", encoding="utf-8") as handle:
                handle.write(line)
        except OSError as err:  # kept for write(): the run's summary says it, once
            full = disk_full(self.cases_file, err)
            if full is None:
                raise
            self._error = self._error or full

    def collect(self) -> list[CaseRecord]:
        """Every record written by any process of this run; a re-run of the same case replaces the earlier one."""
        return collect_records(self.run_dir)[0]

    def mark_shard(self, shard: ShardInfo, *, provenance: Provenance) -> None:
        """A shard's start marker (``runs/<id>/shard.json``): a shard killed before its report stays detectable."""
        write_shard_marker(self.run_dir, shard, provenance=provenance)

    def build(
        self,
        *,
        provenance: Provenance,
        interrupted: bool = False,
        planned_cases: int | None = None,
        shard: ShardInfo | None = None,
    ) -> Report | None:
        """This run's report; None when no case ran and the run was not interrupted (nothing is written then),
        except for a shard, whose report says it had no work."""
        records = self.collect()
        if not records and not interrupted and shard is None:
            self.close()
            return None
        provenance = with_case_runners(provenance, [r.case.runner for r in records])
        provenance = with_case_converters(provenance, [r.case.converter for r in records])
        return Report.build(
            records,
            created=utc_now(),
            provenance=provenance,
            run_id=self.run_id,
            interrupted=interrupted,
            planned_cases=planned_cases,
            shard=shard,
        )

    def write(
        self,
        report: Report,
        *,
        extra_md: Sequence[str] = (),
        extra_html: Sequence[str] = (),
        plots: PlotCache | None = None,
    ) -> FinishedReport:
        """Write the run's report into its folder and, when complete, publish it; then prune and unlock. A full
        disk (now, or when a case record was written) writes nothing: the result's ``error`` says where.
        ``plots``: the plots' cache (:mod:`harness.report.plotcache`; None: drawn now)."""
        if self._error is not None:
            self.close()
            return self._unwritten(report, report_view(report), self._error)
        view = report_view(report)
        try:
            pages = render_report(view, extra_md=extra_md, extra_html=extra_html, plots=plots)  # once, written twice
            run_paths = write_report(report, self.run_dir, rendered=pages)
            published = None
            if report.complete:
                prefix = f"{RUNS_DIR}/{self.run_id}/"
                top = replace(report, cases=tuple(_prefixed(c, prefix) for c in report.cases))
                with publish_lock(self.report_dir):
                    published = write_report(top, self.report_dir, rendered=pages)
            else:  # the published report must not pass for this run's
                self.supersede(created=report.created, why=f"did not complete ({completion_text(report)})")
            shutil.rmtree(self.run_dir / CASES_DIR, ignore_errors=True)  # merged into report.json
        except UserError as err:  # a full or read-only report folder (DiskFull, files.not_writable)
            self.close()
            return self._unwritten(report, view, err)
        except OSError as err:
            self.close()
            fix = "make the report folder writable with free space, or pass another --report-dir"
            problem = f"the report could not be written ({err.strerror or err})"
            return self._unwritten(report, view, UserError(where=self.report_dir, problem=problem, fix=fix))
        finally:
            self.close()
        pruned = prune_runs(
            self.report_dir, keep=self.keep_runs, protect=frozenset({self.run_id, *_published_run(self.report_dir)})
        )
        return FinishedReport(report=report, run_paths=run_paths, published=published, pruned=len(pruned), view=view)

    def _unwritten(self, report: Report, view: ReportView, error: UserError) -> FinishedReport:
        """No report for this run: its half-written run folder goes (which frees its space), and the published
        report, an older run's, is marked as not the latest where the folder still allows it."""
        shutil.rmtree(self.run_dir, ignore_errors=True)
        pages = [self.report_dir / name for name in ("report.md", "report.html")]
        note = ""
        if any(page.is_file() for page in pages):
            why = f"could not write its report ({error.problem})"
            try:
                self.supersede(created=report.created, why=why, own_report=False)
            except (UserError, OSError):
                pass  # said below, file by file
            marked = [p for p in pages if p.is_file() and p.read_text(encoding="utf-8").count(SUPERSEDED) >= 2]
            unmarked = [p.name for p in pages if p.is_file() and p not in marked]
            note = f"the previous report in {self.report_dir} is an older run's: " + (
                f"{', '.join(p.name for p in marked) or 'none of its pages'} marked as not the latest run"
                + (f"; {', '.join(unmarked)} could not be marked (the folder is full or read-only)" if unmarked else "")
            )
        return FinishedReport(
            report=report, run_paths=report_paths(self.run_dir), view=view, error=error, stale_note=note
        )

    def supersede(self, *, created: str, why: str, own_report: bool = True) -> None:
        """Mark the published report as not this run's (:func:`~harness.report.runs.mark_superseded`)."""
        with publish_lock(self.report_dir):
            mark_superseded(self.report_dir, run_id=self.run_id, created=created, why=why, own_report=own_report)

    def interrupted_at_end(self) -> str:
        """Ctrl-C while this run's report was written (issue 33.5): every file castguard writes is atomic, so what
        is there is whole; unless this run's report was published, the published one (an older run's) is marked
        as not the latest, and the folder is unlocked. The one line the run prints."""
        try:
            published = json.loads((self.report_dir / "report.json").read_text(encoding="utf-8"))
            ours = isinstance(published, dict) and published.get("run_id") == self.run_id
        except (OSError, ValueError):
            ours = False
        if ours:
            return "castguard: interrupted (Ctrl-C) after this run's report was published; it is whole"
        try:
            self.supersede(
                created=utc_now(), why="was interrupted (Ctrl-C) while its report was written", own_report=False
            )
        except (OSError, HarnessError):
            pass  # nothing published, or a folder that cannot be written: the line below stays true
        finally:
            self.close()
        return (
            "castguard: interrupted (Ctrl-C) while the report was written: no report for this run (files already "
            "there are whole; a published report is marked as not the latest run)"
        )

    def close(self) -> None:
        """Unlock the run folder (the run is over); idempotent."""
        self._active.release()


def collect_records(run_folder: Path, *, torn_tail_ok: bool = False) -> tuple[list[CaseRecord], int]:
    """The case records of a run folder's case files (a re-run of a case replaces the earlier record) and how many
    damaged last lines were dropped: only with ``torn_tail_ok`` (a process killed while writing its last line);
    any other damaged line is a UserError naming it."""
    records: dict[tuple[str, str, str], CaseRecord] = {}
    torn = 0
    folder = run_folder / CASES_DIR
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            try:
                record = record_from_dict(json.loads(line))
            except (json.JSONDecodeError, ReportFormatError) as err:
                if torn_tail_ok and number == len(lines):
                    torn += 1
                    continue
                raise UserError(
                    where=f"{path}:{number}",
                    problem=f"unreadable case record ({err})",
                    fix="re-run (the line was damaged outside castguard)",
                ) from err
            records[record.key] = record
    return list(records.values()), torn


def _prefixed(record: CaseRecord, prefix: str) -> CaseRecord:
    """The record with its saved-output paths made relative to the report folder instead of the run folder."""
    return replace(
        record,
        outputs_file=None if record.outputs_file is None else prefix + record.outputs_file,
        golden_file=None if record.golden_file is None else prefix + record.golden_file,
    )


def _published_run(report_dir: Path) -> tuple[str, ...]:
    """The run id of the published top-level report (its outputs must survive pruning), if readable."""
    try:
        data = json.loads((report_dir / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ()
    run_id = data.get("run_id") if isinstance(data, dict) else None
    return (run_id,) if isinstance(run_id, str) and run_id else ()


def worker_name(workerinput: dict[str, object] | None) -> str:
    """``gw0``… under pytest-xdist (from the worker's ``workerinput``), ``main`` otherwise."""
    return str(workerinput["workerid"]) if workerinput else "main"
