"""pytest wiring for castguard: options, configuration, suite collection, parametrization, the report. Nothing else.

Loaded through the ``pytest11`` entry point. With ``--model`` and no explicit test paths, pytest collects
only the packaged accuracy suite (``harness/plugin/suite/test_castguard.py``; with ``-m adversarial`` also the
Hypothesis search ``harness/plugin/suite/test_adversarial.py``), so ``pytest --model mnist.onnx`` works in any
repository. The work is done by :mod:`harness.run.session` (checks) and :mod:`harness.report.collect` (the report); the
hooks only wire them in:

* ``pytest_configure``: config + :class:`AccuracySession` + :class:`ReportSession` into ``config.stash``;
* ``pytest_generate_tests``: ``castguard_model`` x models, ``castguard_case`` x (models x sweep cases),
  ``castguard_tuned_case`` x (models x precisions) with ``--tune``;
* ``pytest_runtest_makereport``: a suite test's :class:`CaseRecord` (left by :func:`castguard_record`)
  is settled (xfail/xpass) and added to this process's case file;
* ``pytest_sessionfinish`` (the controller under xdist): merge and write the report; the nightly run
  (:class:`harness.nightly.run.NightlyRun`: --baseline/--history) compares it, stores it and adds its sections,
  and a regression under --fail-on-regression sets the exit status;
  ``pytest_terminal_summary``: print where it is and what regressed.

Under xdist each worker is pinned to its own GPU when several are visible (:mod:`harness.plugin.xdist`).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from harness.options import add_nightly_options, add_options, given_options, path_options

if TYPE_CHECKING:  # heavy modules load in pytest_configure, not at plugin import
    from harness.run.session import AccuracySession
    from harness.config import HarnessConfig
    from harness.nightly.run import NightlyRun
    from harness.report import CaseRecord
    from harness.report.collect import FinishedReport, ReportSession

CONFIG_KEY: pytest.StashKey[HarnessConfig] = pytest.StashKey()
SESSION_KEY: pytest.StashKey[AccuracySession] = pytest.StashKey()
REPORT_KEY: pytest.StashKey[ReportSession] = pytest.StashKey()
FINISHED_KEY: pytest.StashKey[FinishedReport] = pytest.StashKey()
RECORD_KEY: pytest.StashKey[CaseRecord] = pytest.StashKey()
NIGHTLY_KEY: pytest.StashKey[NightlyRun] = pytest.StashKey()
SUITE_FILE = Path(__file__).resolve().parent / "suite" / "test_castguard.py"
ADVERSARIAL_FILE = SUITE_FILE.with_name("test_adversarial.py")   # opt-in: -m adversarial (minutes per model)
TUNED_FILE = SUITE_FILE.with_name("test_tuned.py")               # opt-in: --tune / [tool.castguard] tune


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("castguard", "castguard: mixed-precision ONNX accuracy")
    add_options(group.addoption)
    add_nightly_options(group.addoption)


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")   # set by pytest-xdist on its worker processes


def pytest_configure(config: pytest.Config) -> None:
    from harness.run.session import AccuracySession
    from harness.config import HarnessConfig, check_rootdir, load_table
    from harness.errors import UserError
    from harness.plugin.xdist import apply_pin
    from harness.data.models import bundled_models_dir
    from harness.nightly.run import NightlyRun, options_from
    from harness.report.collect import ReportSession, worker_name

    config.addinivalue_line("markers", "adversarial: castguard's Hypothesis search for low-precision failures")
    apply_pin(worker_name(getattr(config, "workerinput", None)), os.environ)
    given = given_options(config.option)
    try:
        if given["castguard_models"]:
            check_rootdir(config.rootpath, ini_found=config.inipath is not None,
                          invocation_dir=config.invocation_params.dir, option_paths=path_options(given))
        harness_config = HarnessConfig.from_sources(cli=given, table=load_table(config.rootpath),
                                                    rootdir=config.rootpath, invocation_dir=config.invocation_params.dir)
        nightly = options_from(config.option, invocation_dir=config.invocation_params.dir)
        session = AccuracySession(harness_config, bundled_dir=bundled_models_dir(),
                                  strict_provenance=nightly.strict_provenance) if harness_config.models else None
        if session is not None and nightly.active and not _is_worker(config):
            config.stash[NIGHTLY_KEY] = NightlyRun(nightly)
    except UserError as err:
        raise pytest.UsageError(str(err)) from None
    config.stash[CONFIG_KEY] = harness_config
    if session is not None:
        config.stash[SESSION_KEY] = session
        report = ReportSession(report_dir=harness_config.report_dir,
                               worker=worker_name(getattr(config, "workerinput", None)))
        if not _is_worker(config):
            report.start()
        config.stash[REPORT_KEY] = report
        if config.args_source != pytest.Config.ArgsSource.ARGS:
            adversarial = "adversarial" in (config.option.markexpr or "")
            config.args = [str(SUITE_FILE), *([str(TUNED_FILE)] if harness_config.tune else []),
                           *([str(ADVERSARIAL_FILE)] if adversarial else [])]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    session = metafunc.config.stash.get(SESSION_KEY, None)
    if "castguard_model" in metafunc.fixturenames:
        names = list(session.models) if session else []
        metafunc.parametrize("castguard_model", names, ids=names)
    if "castguard_case" in metafunc.fixturenames:
        cases = session.cases if session else []
        metafunc.parametrize("castguard_case", cases, ids=[c.id for c in cases])
    if "castguard_tuned_case" in metafunc.fixturenames:
        tuned = session.tuned_cases if session else []
        metafunc.parametrize("castguard_tuned_case", tuned, ids=[c.id for c in tuned])


@pytest.fixture
def castguard_session(request: pytest.FixtureRequest) -> AccuracySession:
    """The accuracy session of this run (only with --model)."""
    session = request.config.stash.get(SESSION_KEY, None)
    if session is None:
        pytest.skip("castguard accuracy tests need --model NAME|PATH")
    return session


@pytest.fixture
def castguard_record(request: pytest.FixtureRequest) -> Callable[[CaseRecord], None]:
    """Call it with the test's CaseRecord; the record goes into the report once pytest has judged the test."""
    def record(case_record: CaseRecord) -> None:
        request.node.stash[RECORD_KEY] = case_record
    return record


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport,
                                                                                            pytest.TestReport]:
    report = yield
    record = item.stash.get(RECORD_KEY, None)
    reporter = item.config.stash.get(REPORT_KEY, None)
    if report.when == "call" and record is not None and reporter is not None:
        from harness.report.collect import settle

        strict_xpass = report.failed and str(report.longrepr).startswith("[XPASS(strict)]")
        reporter.add(settle(record, expected_failure=hasattr(report, "wasxfail") or strict_xpass))
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    reporter = session.config.stash.get(REPORT_KEY, None)
    if reporter is None or _is_worker(session.config):
        return
    from hypothesis import settings

    from harness.report import collect_provenance

    harness_config = session.config.stash[CONFIG_KEY]
    seed = session.config.getoption("hypothesis_seed", None)   # a nightly run's seed, recorded to replay it
    profile = settings.get_current_profile_name() + (f" (seed {seed})" if seed is not None else "")
    provenance = collect_provenance(hypothesis_profile=profile, runners=harness_config.runners,
                                    project_dir=session.config.rootpath)
    nightly = session.config.stash.get(NIGHTLY_KEY, None)
    finished = reporter.finish(provenance=provenance, extra=nightly.conclude if nightly is not None else None)
    if finished is not None:
        session.config.stash[FINISHED_KEY] = finished
    if nightly is not None and nightly.exit_code and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED   # the verdict of harness.nightly.rules, never raised


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    finished = terminalreporter.config.stash.get(FINISHED_KEY, None)
    if finished is not None:
        terminalreporter.write_sep("-", "castguard sweep report")
        here = terminalreporter.config.invocation_params.dir
        terminalreporter.write_line(finished.summary_line(relative_to=here))
    nightly = terminalreporter.config.stash.get(NIGHTLY_KEY, None)
    if nightly is not None:
        terminalreporter.write_sep("-", "castguard nightly regression")
        for line in nightly.terminal_lines():
            terminalreporter.write_line(line)
