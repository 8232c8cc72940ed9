"""pytest wiring for castguard: options, configuration, suite collection, parametrization, the report. Nothing else.

Loaded through the ``pytest11`` entry point. With ``--model`` and no explicit test paths, pytest collects
only the packaged accuracy suite (``harness/plugin/suite/test_castguard.py``; with ``-m adversarial`` also the
Hypothesis search ``harness/plugin/suite/test_adversarial.py``), so ``pytest --model mnist.onnx`` works in any
repository. The plugin's state is one :class:`PluginState` in ``config.stash[STATE_KEY]``; the run's state is its
:class:`harness.conductor.CastguardRun` (config, accuracy session, report session, nightly run, shard), built only
when castguard is used (a castguard option, or the ``castguard`` fixture: :func:`ensure_run`), so that other
projects' pytest runs do not load castguard's machinery; the hooks only call it:

* ``pytest_configure``: with a castguard option, build it (usage errors stop pytest), ``start()``, point pytest
  at the suite;
* ``pytest_generate_tests``: ``castguard_model`` x models, ``castguard_case`` x (models x sweep cases),
  ``castguard_tuned_case`` x (models x precisions) with ``--tune``;
* ``pytest_runtest_makereport``: a suite test's :class:`CaseRecord` (held by :func:`castguard_record`) is settled
  (xfail/xpass) and added to this process's case file;
* ``pytest_collection_finish`` / ``pytest_xdist_node_collection_finished``: how many sweep cases this run selected;
* ``pytest_sessionfinish``: ``finish(exitstatus)`` builds, judges and writes the report and returns the status;
* ``pytest_terminal_summary``: prints ``terminal_sections()``;
* a suite test id pasted back as an argument (``::test_low_precision[...]``) is pointed at the packaged suite.

Under xdist each worker is pinned to its own GPU when several are visible (:mod:`harness.plugin.xdist`).
With ``--shard K/N`` the owning process registers :mod:`harness.plugin.shards` (idle shards, failed non-case
tests); a shard refuses the nightly options (``castguard merge`` judges the whole night).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from harness.options import options_given
from harness.plugin.aliases import add_namespaced, add_short_forms, header_line
from harness.plugin.nodeids import case_param, is_case
from harness.plugin.rootdir import correct_rootdir
from harness.plugin.state import current_run as _run
from harness.plugin.state import ensure_run, finishing_run, state, workers_run_id
from harness.plugin.suitefiles import SUITE_TESTS, suite_args
from harness.plugin.terminal import live_line, write_sections

if TYPE_CHECKING:  # heavy modules load in pytest_configure, not at plugin import
    from harness.conductor import CastguardRun
    from harness.pipeline.session import AccuracySession
    from harness.report import CaseRecord

pytest_plugins = ("harness.plugin.fixture",)  # the `castguard` fixture for users' own tests (issue 24.1)


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--castguard-NAME`` for every option; the short ``--NAME`` forms come once conftests have had their say."""
    add_namespaced(parser)


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> Generator[None, None, None]:
    """Before the initial conftests: ``--model PATH`` (space form) must not move pytest's rootdir (see
    :mod:`harness.plugin.rootdir`). After them: the short option names nobody else owns (:mod:`.aliases`)."""
    correct_rootdir(early_config, args)
    yield
    state(early_config).owned_elsewhere = add_short_forms(parser)


def pytest_report_header(config: pytest.Config) -> str | None:
    """Said once: the short option names castguard left to another plugin or conftest."""
    return header_line(state(config).owned_elsewhere)


def pytest_configure(config: pytest.Config) -> None:
    """The run is built now only when a castguard option was given; otherwise on first use of the ``castguard``
    fixture (:func:`ensure_run`), so that a project that does not use castguard pays nothing for it (issue 34.2)."""
    config.addinivalue_line("markers", "adversarial: castguard's Hypothesis search for low-precision failures")
    _prepare(config)


def _prepare(config: pytest.Config) -> None:
    """Leave the run's builder in the plugin state; build the run now when a castguard option was given."""
    state(config).build = _build_run
    if options_given(config.option):
        ensure_run(config)


def _build_run(config: pytest.Config) -> CastguardRun:
    """Build and start this process's run (:func:`harness.plugin.state.ensure_run` calls it on first need)."""
    run = _configured_run(config)
    state(config).run = run
    _start(config, run)
    return run


def _start(config: pytest.Config, run: CastguardRun) -> None:
    """Start the run; a shard registers its hooks; with models, pytest is pointed at the suite."""
    run.start()
    config.pluginmanager.register(FailedTests(run), "castguard-failed-tests")
    if run.session is not None:
        run.session.settings = replace(run.session.settings, live=live_line(config))
    if run.shard is not None:
        from harness.plugin.shards import ShardPlugin

        config.pluginmanager.register(ShardPlugin(run, suite_files=tuple(SUITE_TESTS.values())), "castguard-shard")
    if run.session is not None:
        config.args = suite_args(config, tune=run.config.tune)


def _configured_run(config: pytest.Config) -> CastguardRun:
    """The run the options describe (a usage error stops pytest before anything runs); xdist workers pinned."""
    from harness.conductor import CastguardRun
    from harness.core.errors import UserError
    from harness.plugin.xdist import apply_pin
    from harness.report.collect import worker_name

    worker_input = getattr(config, "workerinput", None)  # set by pytest-xdist on its worker processes
    apply_pin(worker_name(worker_input), os.environ)
    try:
        return CastguardRun.from_options(
            config.option,
            invocation_dir=config.invocation_params.dir,
            rootpath=config.rootpath,
            worker_input=worker_input,
            run_id=state(config).reserved_run_id,
        )
    except UserError as err:
        raise pytest.UsageError(str(err)) from None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: object) -> None:
    """pytest-xdist, controller: every worker writes into this run's folder (reserved while the run is not built)."""
    from harness.core.runid import RUN_ID_KEY

    node.workerinput[RUN_ID_KEY] = workers_run_id(node.config)  # type: ignore[attr-defined]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    """pytest-xdist, controller: the number of sweep cases this run selected (every worker collects them all)."""
    run = _run(node.config)  # type: ignore[attr-defined]
    if run is not None:
        run.plan_cases([case_param(i) for i in ids if is_case(i)])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Sweep cases matching ``[tool.castguard] xfail`` / ``--xfail`` are expected to fail (xfail/xpass)."""
    for item in items:
        _mark_expected_failure(item, _run(config))


def _mark_expected_failure(item: pytest.Item, run: CastguardRun | None) -> None:
    params = getattr(getattr(item, "callspec", None), "params", {})
    case = params.get("castguard_case") or params.get("castguard_tuned_case")
    if run is None or case is None or not run.config.xfail:
        return
    from harness.sweep.expected import expected_failure, xfail_reason

    pattern = expected_failure(case.model, case.case.id, run.config.xfail)
    if pattern is not None:
        item.add_marker(pytest.mark.xfail(reason=xfail_reason(pattern), strict=False))


class FailedTests:
    """Failed tests that are not sweep cases go to the run (its banner, a shard's merge); under xdist the
    controller sees every worker's reports."""

    def __init__(self, run: CastguardRun) -> None:
        self.run = run

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed and not is_case(report.nodeid):
            self.run.test_failed(report.nodeid.split("::")[-1])


def pytest_collection_finish(session: pytest.Session) -> None:
    run = _run(session.config)
    if run is not None and not run.is_worker and session.items:
        run.plan_cases([case_param(item.nodeid) for item in session.items if is_case(item.nodeid)])


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for fixture, values in _parameters(_run(metafunc.config)).items():
        if fixture in metafunc.fixturenames:
            metafunc.parametrize(fixture, values, ids=[getattr(v, "id", v) for v in values])


def _parameters(run: CastguardRun | None) -> dict[str, list[Any]]:
    """The suite's parameters: models, sweep cases, tuned cases (empty without --model)."""
    session = run.session if run is not None else None
    return {
        "castguard_model": list(session.models) if session else [],
        "castguard_case": list(session.cases) if session else [],
        "castguard_tuned_case": list(session.tuned_cases) if session else [],
    }


@pytest.fixture
def castguard_session(request: pytest.FixtureRequest) -> AccuracySession:
    """The accuracy session of this run (only with --model)."""
    run = _run(request.config)
    if run is None or run.session is None:
        pytest.skip("castguard accuracy tests need --model NAME|PATH")
    return run.session


@pytest.fixture
def castguard_record(request: pytest.FixtureRequest) -> Callable[[CaseRecord], None]:
    """Call it with the test's CaseRecord; the record goes into the report once pytest has judged the test."""
    return lambda case_record: ensure_run(request.config).hold(request.node.nodeid, case_record)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    _settle(item, report)
    return report


def _settle(item: pytest.Item, report: pytest.TestReport) -> None:
    """A judged suite test hands its held record to the run (xfail/xpass settled); a golden written in this run by
    the test's ``castguard`` check is never an expected failure; a sweep case's test that ended without a record
    (it raised, or its setup failed) is recorded as such."""
    from harness.plugin.fixture import golden_written_is_no_expected_failure

    golden_written_is_no_expected_failure(item, report)
    run = _run(item.config)
    if run is not None and (report.when == "call" or (report.when == "setup" and report.failed)):
        strict_xpass = report.failed and str(report.longrepr).startswith("[XPASS(strict)]")
        case_id = case_param(item.nodeid) if is_case(item.nodeid) else None
        run.settle(item.nodeid, expected_failure=hasattr(report, "wasxfail") or strict_xpass, case_id=case_id)


def pytest_sessionfinish(session: pytest.Session) -> None:
    run = finishing_run(session.config)
    if run is not None:
        session.exitstatus = run.finish(int(session.exitstatus), interrupted=_interrupted(session))


def _interrupted(session: pytest.Session) -> bool:
    return session.exitstatus == pytest.ExitCode.INTERRUPTED or bool(session.shouldstop or session.shouldfail)


def pytest_unconfigure(config: pytest.Config) -> None:
    run = _run(config)
    if run is not None:
        run.close()  # a run that ended before its report (a usage error, a crash) unlocks its folder


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    run = _run(terminalreporter.config)
    write_sections(terminalreporter, run.terminal_sections() if run is not None else [])
