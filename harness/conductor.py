"""One castguard run, start to end, without pytest: :class:`CastguardRun` owns everything a run carries.

The pytest plugin (:mod:`harness.plugin`) keeps one :class:`CastguardRun` in ``config.stash`` and its hooks only
call it; ``castguard goldens`` builds the same object. It owns:

* the validated :class:`~harness.config.HarnessConfig` and the project folder it came from;
* the :class:`~harness.pipeline.session.AccuracySession` (goldens, sweep cases) when models are given;
* the :class:`~harness.report.collect.ReportSession` (this run's folder, case files, the published report);
* the :class:`~harness.nightly.run.NightlyRun` (``--baseline``/``--history``/``--fail-on-regression``);
* the shard (``--shard K/N``): its work, its start record and the non-case tests that failed.

Life cycle: :meth:`CastguardRun.from_options` (usage errors raise :class:`~harness.core.errors.UserError` before
anything runs) -> :meth:`start` -> :meth:`add` per settled case record -> :meth:`finish` (builds, judges and
writes the report; returns the exit status) -> :meth:`terminal_lines` -> :meth:`close`.

A requested runner whose every case skipped fails the run: :mod:`harness.report.banner`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.config import HarnessConfig, find_project, load_table
from harness.core.errors import INTERRUPTED_EXIT, HarnessError, UserError
from harness.core.files import check_folder, check_writable
from harness.nightly.run import NightlyOptions, NightlyRun, options_from
from harness.options import given_options
from harness.pipeline.session import AccuracySession, SessionRole
from harness.pipeline.verdict import settled
from harness.report import CaseRecord, Provenance
from harness.report.banner import RunTrouble, all_skipped, run_status_sections, skipped_runner_lines, xpass_lines
from harness.report.collect import FinishedReport, ReportSession, worker_name
from harness.report.model import ShardInfo
from harness.sweep.shards import ShardWork

if TYPE_CHECKING:
    from harness.check import Checker

RUN_ID_KEY = "castguard_run_id"  # the controller's run id, handed to xdist workers in their workerinput
TESTS_FAILED = 1  # pytest's ExitCode.TESTS_FAILED (no pytest import here)
SHARD_REFUSES = (
    "a shard is one part of the night: comparing it with a baseline would call the other shards' cases missing"
)


@dataclass
class ShardState:
    """This process's shard: its work, its start record, the non-case tests that failed (for the merge)."""

    work: ShardWork
    info: ShardInfo
    failed_tests: list[str] = field(default_factory=list)

    def finished(self, exit_status: int) -> ShardInfo:
        """The start record with how the shard ended (for its report.json)."""
        return replace(self.info, exit_status=exit_status, failed_tests=tuple(dict.fromkeys(self.failed_tests)))


@dataclass(frozen=True)
class Section:
    """A block of the terminal summary: ``title`` (None: no separator line) and its lines."""

    title: str | None
    lines: tuple[str, ...]


def requested_runners(given: Mapping[str, Any], table: Mapping[str, Any], config: HarnessConfig) -> tuple[str, ...]:
    """The runners the user named (command line or pyproject); () when the sweep's default runner is used."""
    sweep_table = table.get("sweep")
    named = (
        given.get("castguard_runners") is not None
        or "runners" in table
        or (isinstance(sweep_table, Mapping) and "runners" in sweep_table)
        or given.get("castguard_sweep_file") is not None
    )
    return config.runners if named else ()


class CastguardRun:
    """One run's state; see the module docstring. Build it with :meth:`from_options`."""

    def __init__(
        self,
        *,
        config: HarnessConfig,
        project: Path,
        invocation_dir: Path,
        worker_input: Mapping[str, Any] | None = None,
        nightly: NightlyRun | None = None,
        session: AccuracySession | None = None,
        report: ReportSession | None = None,
        requested: tuple[str, ...] = (),
        allow_skipped_runner: bool = False,
        hypothesis_seed: object = None,
        nightly_options: NightlyOptions | None = None,
    ) -> None:
        self.config = config
        self.project = project
        self.invocation_dir = invocation_dir
        self.is_worker = worker_input is not None
        self._worker_input = dict(worker_input or {})
        self.nightly = nightly
        self.session = session
        self.report = report
        self.requested = requested
        self.allow_skipped_runner = allow_skipped_runner
        self.hypothesis_seed = hypothesis_seed
        self.nightly_options = nightly_options
        self.shard: ShardState | None = None
        self.planned: int | None = None
        self.planned_ids: tuple[str, ...] = ()  # the selected sweep cases' parameter ids (Case.id)
        self.finished: FinishedReport | None = None
        self.evicted = ""
        self.skipped_runners: list[str] = []
        self.failed_tests: list[str] = []  # failed tests that are not sweep cases (the banner names them)
        self._pending: dict[str, list[CaseRecord]] = {}  # a test's records until pytest judges it
        self._checker: Checker | None = None
        self._benchmarks_existed = (invocation_dir / ".benchmarks").exists()

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
    ) -> CastguardRun:
        """The run the parsed options describe (pytest's ``config.option`` or the CLI's namespace); usage errors
        raise :class:`UserError` before anything runs. ``with_report=False``: no report folder (``castguard
        goldens``)."""
        given = given_options(option)
        project = project or find_project(invocation_dir, fallback=rootpath)
        table = load_table(project)
        config = HarnessConfig.from_sources(cli=given, table=table, rootdir=project, invocation_dir=invocation_dir)
        if config.models:  # a misplaced folder is one error before anything runs (the cache is optional: a warning)
            check_folder(config.goldens_dir, what="the goldens folder (--goldens-dir)")
            if with_report and worker_input is None:
                check_writable(config.report_dir, what="the report folder (--report-dir)")
        nightly_options = options_from(option, invocation_dir=invocation_dir)
        if config.models and nightly_options.history is not None and worker_input is None:
            check_writable(nightly_options.history, what="the history folder (--history)")
        run_id = worker_input.get(RUN_ID_KEY) if worker_input else None  # absent when the controller runs no model
        report = (
            ReportSession(
                report_dir=config.report_dir,
                worker=worker_name(dict(worker_input or {}) or None),
                run_id=str(run_id) if run_id else None,
                keep_runs=config.keep_runs,
            )
            if with_report
            else None
        )
        role = SessionRole(
            output_dir=report.run_dir if report else None, strict_provenance=nightly_options.strict_provenance
        )
        session = AccuracySession.open(config, bundled_dir=_bundled_dir(), role=role) if config.models else None
        if session is not None and session.shard_work is not None and nightly_options.active:
            raise UserError(
                where="--shard",
                problem=SHARD_REFUSES,
                fix="drop --baseline/--history/--fail-on-regression here and give them to "
                "`castguard merge SHARD_DIR... --out DIR`, which compares the whole night once",
            )
        nightly = (
            NightlyRun(nightly_options)
            if session is not None and nightly_options.active and worker_input is None
            else None
        )
        return cls(
            config=config,
            project=project,
            invocation_dir=invocation_dir,
            worker_input=worker_input,
            nightly=nightly,
            session=session,
            report=report if session is not None else None,
            requested=requested_runners(given, table, config),
            allow_skipped_runner=bool(getattr(option, "castguard_allow_skipped_runner", None)),
            hypothesis_seed=getattr(option, "hypothesis_seed", None),
            nightly_options=nightly_options,
        )

    @property
    def run_id(self) -> str | None:
        return self.report.run_id if self.report is not None else None

    def worker_input(self) -> dict[str, str]:
        """What an xdist worker is handed (its ``workerinput``): this run's id, so every worker writes into its folder."""
        return {RUN_ID_KEY: self.run_id} if self.run_id is not None else {}

    def start(self) -> None:
        """The owning process (not an xdist worker): lock this run's folder; a shard writes its start marker."""
        if self.is_worker or self.report is None or self.session is None:
            return
        self.report.start()
        if self.session.shard_work is not None:
            from harness.pipeline.shard_run import shard_info

            self.shard = ShardState(self.session.shard_work, shard_info(self.config, self.session.shard_work))
            self.report.mark_shard(self.shard.info, provenance=self.provenance())

    def report_session(self, *, run_id: str | None = None, start: bool = True) -> ReportSession:
        """The run's report session, made now when the run has none (a run without ``--model`` whose tests use the
        ``castguard`` fixture): an xdist worker writes into the ``run_id`` its controller reserved; the owning process
        locks the folder (``start``). The nightly options then apply to it as to a ``--model`` run."""
        if self.report is None:
            self.report = ReportSession(
                report_dir=self.config.report_dir,
                worker=worker_name(self._worker_input or None),
                run_id=run_id,
                keep_runs=self.config.keep_runs,
            )
            if not self.is_worker and start:
                self.report.start()
            if (
                self.nightly is None
                and self.nightly_options is not None
                and self.nightly_options.active
                and not self.is_worker
            ):
                self.nightly = NightlyRun(self.nightly_options)
        return self.report

    def provenance(self) -> Provenance:
        from hypothesis import settings

        from harness.report import collect_provenance

        seed = self.hypothesis_seed  # a nightly run's seed, recorded to replay it
        profile = settings.get_current_profile_name() + (f" (seed {seed})" if seed is not None else "")
        return collect_provenance(hypothesis_profile=profile, runners=self.config.runners, project_dir=self.project)

    def hold(self, test_id: str, record: CaseRecord) -> None:
        """A test's record (a suite case, or each case of a ``castguard`` fixture call), kept until the test is
        judged (:meth:`settle`)."""
        self._pending.setdefault(test_id, []).append(record)

    def plan_cases(self, case_ids: Sequence[str]) -> None:
        """The sweep cases this run selected (their parameter ids): each ends with a record in the report."""
        self.planned_ids = tuple(case_ids)
        self.planned = len(case_ids)

    def settle(self, test_id: str, *, expected_failure: bool, case_id: str | None = None) -> None:
        """The test was judged: its held records go into the report, xfail/xpass settled. A sweep case's test
        (``case_id``) that held none (it raised, or its setup failed) is recorded as such."""
        held = self._pending.pop(test_id, [])
        if not held and case_id is not None and self.session is not None:
            why = f"its test {test_id} ended without a record (it raised: see its failure in the test report)"
            lost = self.session.lost_case(case_id, why)
            held = [lost] if lost is not None else []
        for record in held:
            self.add(settled(record, expected_failure=expected_failure))

    def _record_unreached(self, *, interrupted: bool) -> None:
        """A planned sweep case with no record in the run's case files gets one: never reached."""
        if self.report is None or self.session is None or not self.planned_ids:
            return
        reported = {f"{r.model}-{r.case_id}" for r in self.report.collect()}
        why = (
            "never reached: the run was interrupted before this case"
            if interrupted
            else "never reached: the process running it ended before handing its record (a crashed worker?)"
        )
        for case_id in self.planned_ids:
            if case_id not in reported:
                record = self.session.lost_case(case_id, why)
                if record is not None:
                    self.add(record)

    def checker(self, *, run_id: str | None = None) -> Checker:
        """The ``castguard`` fixture's checker of this process (:mod:`harness.check`), writing into this run's
        report folder (made now when the run has none: see :meth:`report_session`)."""
        if self._checker is None:
            from harness.check import Checker

            strict = self.nightly_options.strict_provenance if self.nightly_options is not None else False
            self._checker = Checker(
                self.config,
                output_dir=self.report_session(run_id=run_id).run_dir,
                bundled_dir=_bundled_dir(),
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
        self._record_unreached(interrupted=interrupted)
        shard = self.shard
        planned = self.planned if self.planned is not None or shard is None else shard.work.case_count
        if self.session is None:  # only the castguard fixture: its tests record cases as they go, none planned
            planned = None
        report = self.report.build(
            provenance=self.provenance(),
            interrupted=interrupted,
            planned_cases=planned,
            shard=None if shard is None else shard.finished(exitstatus),
        )
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
        no_golden = (self.session is not None and bool(self.session.golden_failures)) or any(
            c.stopped == "golden_not_made" for c in report.cases
        )  # even with its test deselected, or run by an xdist worker
        if exitstatus == 0 and (
            (self.nightly is not None and self.nightly.exit_code) or self.skipped_runners or no_golden
        ):
            exitstatus = TESTS_FAILED  # nightly rules / a requested runner that never ran / a golden not made
            if self.nightly is not None and self.nightly.exit_code == 2:
                exitstatus = 2  # --fail-on-regression with a history that cannot be read: as castguard merge says
        extra_md, extra_html = (
            self.nightly.sections() if self.nightly is not None else ([], [])
        )  # ... then its rendering
        trouble = RunTrouble(
            regressions=self.nightly.failing_regressions if self.nightly is not None else 0,
            skipped_runners=() if self.allow_skipped_runner else all_skipped(report, self.requested),
            no_golden=tuple(self.session.golden_failures) if self.session is not None else (),
            failed_tests=tuple(dict.fromkeys(self.failed_tests)),
        )
        status_md, status_html = run_status_sections(report, exitstatus, self.skipped_runners, trouble)
        self.finished = self.report.write(
            report, extra_md=[status_md, *extra_md], extra_html=[status_html, *extra_html]
        )
        if self.finished.error is not None and exitstatus == 0:
            exitstatus = TESTS_FAILED  # no report written (a full disk): the summary says why
        from harness.pipeline.cache_size import evict_note

        self.evicted = evict_note(self.config.cache_dir, max_mb=self.config.cache_max_mb)
        return exitstatus

    def interrupted_at_end(self) -> str:
        """Ctrl-C while the run's report was written (issue 33.5): every file castguard writes is atomic, so what
        is there is whole; unless this run's report was published, the published one (an older run's) is marked
        as not the latest. The one line the run prints."""
        if self.report is None or self.is_worker:
            return "castguard: interrupted (Ctrl-C)"
        try:
            published = json.loads((self.config.report_dir / "report.json").read_text(encoding="utf-8"))
            ours = isinstance(published, dict) and published.get("run_id") == self.report.run_id
        except (OSError, ValueError):
            ours = False
        if ours:
            return "castguard: interrupted (Ctrl-C) after this run's report was published; it is whole"
        try:
            from harness.report import utc_now

            self.report.supersede(
                created=utc_now(), why="was interrupted (Ctrl-C) while its report was written", own_report=False
            )
        except (OSError, HarnessError):
            pass  # nothing published, or a folder that cannot be written: the line below stays true
        finally:
            self.report.close()
        return (
            "castguard: interrupted (Ctrl-C) while the report was written: no report for this run (files already "
            "there are whole; a published report is marked as not the latest run)"
        )

    def terminal_sections(self) -> list[Section]:
        """What the run prints at the end: the report's place and headline, inputs, nightly verdict."""
        sections: list[Section] = []
        if self.finished is not None:
            from harness.report.format import degenerate_lines, summary_facts
            from harness.report.view import trt_terminal_lines

            finished = self.finished
            lines = [finished.summary_line(relative_to=self.invocation_dir)]
            if finished.pruned:
                lines.append(f"castguard: deleted {finished.pruned} old run folder(s) (keep_runs)")
            lines += trt_terminal_lines(finished.view)  # the TensorRT build check (issue 17)
            lines += degenerate_lines(finished.report)  # every run, not only when the golden was written
            lines += summary_facts(finished.view.report.cases)  # QDQ models, the model's own FP32 Casts
            lines += xpass_lines(finished.view.report.cases)
            sections.append(Section("castguard sweep report", tuple(lines)))
        tail = [*([self.evicted] if self.evicted else []), *self.skipped_runners]
        if self.session is not None and not self.is_worker:
            tail += [
                f"castguard inputs of {name}: " + "; ".join(loaded.input_lines)  # on every run (issue 9)
                for name, loaded in self.session.models.items()
            ]
        if self.shard is not None:
            tail.append(f"castguard {self.shard.work.summary()}")
        if tail:
            sections.append(Section(None, tuple(tail)))
        if self.nightly is not None:
            sections.append(Section("castguard nightly regression", tuple(self.nightly.terminal_lines())))
        return sections

    def terminal_lines(self) -> list[str]:
        """:meth:`terminal_sections` as plain lines (the CLI)."""
        return [line for s in self.terminal_sections() for line in ((s.title + ":",) if s.title else ()) + s.lines]

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


def _bundled_dir() -> Path:
    from harness.data.models import bundled_models_dir

    return bundled_models_dir()
