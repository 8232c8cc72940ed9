"""The run object, :class:`CastguardRun` (see :mod:`harness.conductor`): built from the options or from a night's
shards, started, fed settled case records, finished once."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.conductor.ending import TESTS_FAILED, extra_sections, no_golden, run_exit_status
from harness.conductor.ledger import CaseLedger
from harness.conductor.opening import (
    bundled_dir,
    check_folders,
    refuse_nightly_on_a_shard,
    report_session,
    requested_runners,
)
from harness.conductor.summary import Section, plain_lines, terminal_sections
from harness.config import HarnessConfig, find_project, load_table
from harness.core.errors import INTERRUPTED_EXIT
from harness.nightly.options import NightlyOptions, options_from
from harness.options import given_options
from harness.pipeline.session import AccuracySession, SessionRole
from harness.pipeline.shard_run import ShardState
from harness.pipeline.verdict import settled
from harness.report import CaseRecord, Provenance, Report
from harness.report.banner import RunTrouble, all_skipped, run_status_sections, skipped_runner_lines
from harness.report.collect import CASES_DIR, FinishedReport, ReportSession
from harness.report.plotcache import PlotCache

if TYPE_CHECKING:
    from harness.check import Checker
    from harness.nightly.merge import ShardNight  # castguard merge's (imported there): not on a plain run's path
    from harness.nightly.run import NightlyRun  # a nightly run's (imported there): not on a plain run's path


@dataclass(kw_only=True, eq=False)
class CastguardRun:
    """One run's state; see the module docstring. Build it with :meth:`from_options` (or :meth:`from_night`)."""

    config: HarnessConfig
    project: Path
    invocation_dir: Path
    worker_input: InitVar[Mapping[str, Any] | None] = None  # an xdist worker's (its controller's run id)
    nightly: NightlyRun | None = None
    session: AccuracySession | None = None
    report: ReportSession | None = None
    requested: tuple[str, ...] = ()
    allow_skipped_runner: bool = False
    hypothesis_seed: object = None
    nightly_options: NightlyOptions | None = None
    is_worker: bool = field(init=False)
    shard: ShardState | None = field(default=None, init=False)
    night: ShardNight | None = field(default=None, init=False)  # castguard merge's shards (:meth:`from_night`)
    ledger: CaseLedger = field(default_factory=CaseLedger, init=False)  # held records, planned sweep cases
    finished: FinishedReport | None = field(default=None, init=False)
    evicted: str = field(default="", init=False)
    skipped_runners: list[str] = field(default_factory=list, init=False)
    failed_tests: list[str] = field(default_factory=list, init=False)  # failed tests that are not sweep cases
    _checker: Checker | None = field(default=None, init=False, repr=False)
    _report_started: bool = field(default=False, init=False, repr=False)  # the folder is made and locked
    _benchmarks_existed: bool = field(default=False, init=False, repr=False)

    def __post_init__(self, worker_input: Mapping[str, Any] | None) -> None:
        self.is_worker = worker_input is not None
        self._benchmarks_existed = (self.invocation_dir / ".benchmarks").exists()

    @classmethod
    def from_options(
        cls,
        option: Any,
        *,
        invocation_dir: Path,
        rootpath: Path,
        worker_input: Mapping[str, Any] | None = None,
        project: Path | None = None,
        with_report: bool = True,
        run_id: str | None = None,
    ) -> CastguardRun:
        """The run the parsed options describe (pytest's ``config.option`` or the CLI's namespace); usage errors
        raise :class:`UserError` before anything runs. ``with_report=False``: no report folder (``castguard
        goldens``). The report session is made here, with or without ``--model`` (the ``castguard`` fixture's
        cases go into it): an xdist worker's under its controller's run id, a controller's under ``run_id`` when
        it handed one to its workers before the run was built."""
        given = given_options(option)
        project = project or find_project(invocation_dir, fallback=rootpath)
        table = load_table(project)
        config = HarnessConfig.from_sources(cli=given, table=table, rootdir=project, invocation_dir=invocation_dir)
        nightly_options = options_from(option, invocation_dir=invocation_dir)
        check_folders(config, nightly_options, with_report=with_report, worker=worker_input is not None)
        report = report_session(config, worker_input, run_id=run_id) if with_report else None
        role = SessionRole(
            output_dir=report.run_dir if report else None, strict_provenance=nightly_options.strict_provenance
        )
        session = AccuracySession.open(config, bundled_dir=bundled_dir(), role=role) if config.models else None
        if session is not None and session.shard_work is not None:
            refuse_nightly_on_a_shard(nightly_options)
        nightly = _nightly_run(nightly_options, wanted=report is not None and worker_input is None)
        return cls(
            config=config,
            project=project,
            invocation_dir=invocation_dir,
            worker_input=worker_input,
            nightly=nightly,
            session=session,
            report=report,
            requested=requested_runners(given, table, config),
            allow_skipped_runner=bool(getattr(option, "castguard_allow_skipped_runner", None)),
            hypothesis_seed=getattr(option, "hypothesis_seed", None),
            nightly_options=nightly_options,
        )

    @classmethod
    def from_night(
        cls, night: ShardNight, *, out: Path, nightly: NightlyRun | None, invocation_dir: Path
    ) -> CastguardRun:
        """``castguard merge``: the run the shards of one night make, written into ``out``. No session and no
        cache: the shards ran the cases; :meth:`start` copies their outputs, :meth:`finish` judges and writes."""
        config = HarnessConfig(report_dir=out, cache_max_mb=0)
        report = ReportSession(report_dir=out, keep_runs=config.keep_runs)
        run = cls(config=config, project=invocation_dir, invocation_dir=invocation_dir, nightly=nightly, report=report)
        run.night = night
        run.failed_tests = list(night.merged.failed_tests)
        return run

    @property
    def run_id(self) -> str | None:
        return self.report.run_id if self.report is not None else None

    def start(self) -> None:
        """The owning process (not an xdist worker): lock this run's folder; a shard writes its start marker; a
        merged night copies its shards' outputs in."""
        if self.is_worker or self.report is None or (self.session is None and self.night is None):
            return  # the castguard fixture's run: its folder is made by its first check, or at the end (finish)
        self._start_report()
        if self.night is not None:
            self.night.copy_outputs(self.report)
            return
        assert self.session is not None
        if self.session.shard_work is not None:
            from harness.pipeline.shard_run import shard_info

            self.shard = ShardState(self.session.shard_work, shard_info(self.config, self.session.shard_work))
            self.report.mark_shard(self.shard.info, provenance=self.provenance())

    def _start_report(self) -> None:
        """Make and lock this run's folder, once, in the owning process (an xdist worker writes into its
        controller's)."""
        if self.report is not None and not self.is_worker and not self._report_started:
            self.report.start()
            self._report_started = True

    def provenance(self) -> Provenance:
        from harness.report import collect_provenance
        from harness.report.provenance import hypothesis_profile

        profile = hypothesis_profile(self.hypothesis_seed)
        return collect_provenance(hypothesis_profile=profile, runners=self.config.runners, project_dir=self.project)

    def hold(self, test_id: str, record: CaseRecord) -> None:
        """A test's record (a suite case, or each case of a ``castguard`` fixture call), kept until the test is
        judged (:meth:`settle`)."""
        self.ledger.hold(test_id, record)

    def plan_cases(self, case_ids: Sequence[str]) -> None:
        """The sweep cases this run selected (their parameter ids): each ends with a record in the report."""
        self.ledger.plan(case_ids)

    def settle(self, test_id: str, *, expected_failure: bool, case_id: str | None = None) -> None:
        """The test was judged: its held records go into the report, xfail/xpass settled. A sweep case's test
        (``case_id``) that held none (it raised, or its setup failed) is recorded as such."""
        for record in self.ledger.take(test_id, case_id=case_id, session=self.session):
            self.add(settled(record, expected_failure=expected_failure))

    def _record_unreached(self, *, interrupted: bool) -> None:
        """A planned sweep case with no record in the run's case files gets one: never reached."""
        if self.report is not None and self.session is not None and self.ledger.planned_ids:
            reported = {f"{r.model}-{r.case_id}" for r in self.report.collect()}
            for record in self.ledger.unreached(reported, session=self.session, interrupted=interrupted):
                self.add(record)

    def checker(self) -> Checker:
        """The ``castguard`` fixture's checker of this process (:mod:`harness.check`), writing into this run's
        report folder (made and locked now by the owning process)."""
        if self._checker is None:
            from harness.check import Checker

            assert self.report is not None, "the castguard fixture's run has a report session (from_options)"
            self._start_report()
            strict = self.nightly_options.strict_provenance if self.nightly_options is not None else False
            self._checker = Checker(
                self.config,
                output_dir=self.report.run_dir,
                bundled_dir=bundled_dir(),
                strict_provenance=strict,
            )
        return self._checker

    def add(self, record: CaseRecord) -> None:
        """Append one settled record to this process's case file."""
        if self.report is not None:
            self.report.add(record)

    def test_failed(self, name: str) -> None:
        """A test that is not a sweep case failed (the banner names it; a shard names it to the merge)."""
        self.failed_tests.append(name)
        if self.shard is not None:
            self.shard.failed_tests.append(name)

    def finish(self, exitstatus: int, *, interrupted: bool = False) -> int:
        """Build, judge and write this run's report (the owning process); the run's exit status. Ctrl-C while
        the report is written is one line on stderr and exit 130 (issue 33.5: :meth:`interrupted_at_end`)."""
        try:
            return self._finish(exitstatus, interrupted=interrupted)
        except KeyboardInterrupt:
            sys.stderr.write(self.interrupted_at_end() + "\n")
            return INTERRUPTED_EXIT

    def _finish(self, exitstatus: int, *, interrupted: bool) -> int:
        if self.report is None or self.is_worker:
            return exitstatus
        if not self._report_started:  # the castguard fixture's run: used here or by an xdist worker, or not at all
            if not (self.report.run_dir / CASES_DIR).is_dir():
                return exitstatus
            self._start_report()  # an xdist controller takes over the folder its workers' checks wrote into
        report = self._build(exitstatus, interrupted=interrupted)
        if report is None:  # no case ran: a failed run still never leaves an older report passing
            if exitstatus != 0:
                from harness.report import utc_now

                self.report.supersede(
                    created=utc_now(), why=f"failed (exit status {exitstatus}) before any case ran", own_report=False
                )
            return exitstatus
        if self.nightly is not None:
            self.nightly.decide(report)  # the verdict first (harness.nightly.rules) ...
        self.skipped_runners = [] if self.allow_skipped_runner else skipped_runner_lines(report, self.requested)
        golden_failures = tuple(self.session.golden_failures) if self.session is not None else ()
        exitstatus = run_exit_status(
            exitstatus, self.nightly, failed_here=bool(self.skipped_runners) or no_golden(report, golden_failures)
        )
        extra_md, extra_html = extra_sections(self.nightly, self.night)  # ... then its rendering
        trouble = RunTrouble(
            regressions=self.nightly.failing_regressions if self.nightly is not None else 0,
            skipped_runners=() if self.allow_skipped_runner else all_skipped(report, self.requested),
            no_golden=golden_failures,
            failed_tests=tuple(dict.fromkeys(self.failed_tests)),
        )
        status_md, status_html = run_status_sections(report, exitstatus, self.skipped_runners, trouble)
        plots = PlotCache(self.session.cache.notes if self.session is not None else None)  # the sweep's cache folder
        self.finished = self.report.write(
            report, extra_md=[status_md, *extra_md], extra_html=[status_html, *extra_html], plots=plots
        )
        if self.finished.error is not None and exitstatus == 0:
            exitstatus = TESTS_FAILED  # no report written (a full disk): the summary says why
        from harness.pipeline.cache_size import evict_note

        self.evicted = evict_note(self.config.cache_dir, max_mb=self.config.cache_max_mb)
        return exitstatus

    def _build(self, exitstatus: int, *, interrupted: bool) -> Report | None:
        """This run's report from its case files (None: no case ran), or a merged night's from its shards."""
        assert self.report is not None
        if self.night is not None:
            return self.night.report(run_id=self.report.run_id)
        self._record_unreached(interrupted=interrupted)
        shard = self.shard
        planned = self.ledger.planned if self.ledger.planned is not None or shard is None else shard.work.case_count
        if self.session is None:  # only the castguard fixture: its tests record cases as they go, none planned
            planned = None
        return self.report.build(
            provenance=self.provenance(),
            interrupted=interrupted,
            planned_cases=planned,
            shard=None if shard is None else shard.finished(exitstatus),
        )

    def interrupted_at_end(self) -> str:
        """Ctrl-C while the run's report was written (issue 33.5): the one line the run prints
        (:meth:`harness.report.collect.ReportSession.interrupted_at_end`)."""
        if self.report is None or self.is_worker or not self._report_started:
            return "castguard: interrupted (Ctrl-C)"
        return self.report.interrupted_at_end()

    def terminal_sections(self) -> list[Section]:
        """What the run prints at the end: the report's place and headline, inputs, nightly verdict."""
        return terminal_sections(self)

    def terminal_lines(self) -> list[str]:
        """:meth:`terminal_sections` as plain lines (the CLI)."""
        return plain_lines(self.terminal_sections())

    def close(self) -> None:
        """The run is over: unlock its folder (a run that ended before its report), and remove the empty
        ``.benchmarks`` folder pytest-benchmark created if it was not there before."""
        if self.report is not None:
            self.report.close()
        if self._benchmarks_existed or self.is_worker:
            return
        folder = self.invocation_dir / ".benchmarks"
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


def _nightly_run(options: NightlyOptions, *, wanted: bool) -> NightlyRun | None:
    """The run's nightly end when it compares with a baseline or stores history (``wanted``: the owning process,
    with a report); :mod:`harness.nightly.run` is imported only then."""
    if not (wanted and options.active):
        return None
    from harness.nightly.run import NightlyRun

    return NightlyRun(options)
