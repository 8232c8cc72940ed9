"""The ``castguard`` fixture: castguard inside a user's own tests (issue 24.1).

::

    def test_detector_fp16(castguard, my_calibration_batches):
        result = castguard.check("models/detector.onnx", precision="fp16", data_max=512,
                                 inputs=my_calibration_batches, runner="emulate")
        assert result.passed, result.explain()

The work is :class:`harness.check.Checker` (no pytest there), one per process, built from the run's
:class:`~harness.config.HarnessConfig` (``[tool.castguard]`` of the project + command-line options). Its records
go into the run's report exactly as the packaged suite's do: settled against the test's own outcome (xfail) in
``pytest_runtest_makereport`` and added with :meth:`ReportSession.add`. A run without ``--model`` has no report
session until a test uses the fixture; then this process makes one (under xdist the controller reserves a run id
for its workers and takes the folder over at the end, if any worker wrote a case). The main plugin's
``pytest_sessionfinish`` then builds, judges (nightly rules) and writes that report as for ``pytest --model``.

Bad input (a missing model, inputs that do not fit it) fails the test with castguard's message and no traceback.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterable
from typing import TYPE_CHECKING, NoReturn, TypeVar

import pytest

from harness import plugin as main

if TYPE_CHECKING:
    from harness.check import Checker, CheckResult, Inputs
    from harness.report import CaseRecord
    from harness.report.collect import ReportSession

CHECKER_KEY: pytest.StashKey[Checker] = pytest.StashKey()
RESERVED_KEY: pytest.StashKey[str] = pytest.StashKey()        # controller: the run id reserved for its workers
RECORDS_KEY: pytest.StashKey[list[CaseRecord]] = pytest.StashKey()
FIXTURE_RUN_ID = "castguard_fixture_run_id"
T = TypeVar("T")


class CastguardFixture:
    """What the ``castguard`` fixture gives a test: :meth:`check` and :meth:`sweep` (see :mod:`harness.check`)."""

    def __init__(self, checker: Checker, item: pytest.Item) -> None:
        self._checker = checker
        self._item = item

    def check(self, model: str | os.PathLike[str], *, precision: str = "fp16", data_max: float = 512.0,
              init_max: float = 65504.0, exclusions: str = "none", keep_io_types: bool = False,
              runner: str | None = None, inputs: Inputs = None, key: str | None = None) -> CheckResult:
        """One case: convert, run on ``runner``, compare with the FP32 golden (see :meth:`Checker.check`)."""
        return self._guard(lambda: self._checker.check(
            model, precision=precision, data_max=data_max, init_max=init_max, exclusions=exclusions,
            keep_io_types=keep_io_types, runner=runner, inputs=inputs, key=key))

    def sweep(self, model: str | os.PathLike[str], *, precisions: Iterable[str] = ("fp16", "bf16"),
              data_max: Iterable[float] = (512.0,), init_max: Iterable[float] = (65504.0,),
              exclusions: Iterable[str] = ("none",), keep_io_types: Iterable[bool] = (False,),
              runners: Iterable[str] | None = None, inputs: Inputs = None,
              key: str | None = None) -> list[CheckResult]:
        """Every combination of the settings; one result per case (see :meth:`Checker.sweep`)."""
        return self._guard(lambda: self._checker.sweep(
            model, precisions=precisions, data_max=data_max, init_max=init_max, exclusions=exclusions,
            keep_io_types=keep_io_types, runners=runners, inputs=inputs, key=key))

    def _guard(self, call: Callable[[], T]) -> T:
        __tracebackhide__ = True
        from harness.errors import UserError

        try:
            return call()
        except UserError as err:
            message = str(err)
        _fail(message)          # outside the except: one message, no "during handling" chain


def _fail(message: str) -> NoReturn:
    __tracebackhide__ = True
    pytest.fail(message, pytrace=False)


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _reporter(config: pytest.Config) -> ReportSession:
    """The run's report session: the --model run's, else one made now (see the module docstring)."""
    workerinput = getattr(config, "workerinput", None)
    run_id = workerinput.get(FIXTURE_RUN_ID) if workerinput else None
    if workerinput is not None and not run_id and config.stash[main.RUN_KEY].report is None:
        _fail("castguard: this xdist worker got no run id from its controller (castguard is not loaded there?)")
    return config.stash[main.RUN_KEY].report_session(run_id=str(run_id) if run_id else None)


def _checker(config: pytest.Config) -> Checker:
    checker = config.stash.get(CHECKER_KEY, None)
    if checker is None:
        from harness.check import Checker
        from harness.data.models import bundled_models_dir
        from harness.nightly.run import options_from

        strict = options_from(config.option, invocation_dir=config.invocation_params.dir).strict_provenance
        checker = Checker(config.stash[main.RUN_KEY].config, output_dir=_reporter(config).run_dir,
                          bundled_dir=bundled_models_dir(), strict_provenance=strict)
        config.stash[CHECKER_KEY] = checker
    return checker


@pytest.fixture
def castguard(request: pytest.FixtureRequest) -> CastguardFixture:
    """castguard's checks for this test: ``castguard.check(model, precision=..., inputs=...)`` and
    ``castguard.sweep(model, precisions=[...], data_max=[...])``; every case goes into the run's report."""
    node = request.node
    records: list[CaseRecord] = []
    node.stash[RECORDS_KEY] = records
    return CastguardFixture(_checker(request.config).recording(records.append), node)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: object) -> None:
    """pytest-xdist, controller without --model: reserve a run id for the workers' fixture records."""
    config: pytest.Config = node.config   # type: ignore[attr-defined]
    if config.stash[main.RUN_KEY].report is not None:
        return
    if RESERVED_KEY not in config.stash:
        from harness.report.runs import new_run_id

        config.stash[RESERVED_KEY] = new_run_id()
    node.workerinput[FIXTURE_RUN_ID] = config.stash[RESERVED_KEY]   # type: ignore[attr-defined]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport,
                                                                                            pytest.TestReport]:
    report = yield
    records = item.stash.get(RECORDS_KEY, None)
    if report.when == "call" and records:
        from harness.report.collect import settle

        reporter = _reporter(item.config)
        strict_xpass = report.failed and str(report.longrepr).startswith("[XPASS(strict)]")
        for record in records:
            reporter.add(settle(record, expected_failure=hasattr(report, "wasxfail") or strict_xpass))
        records.clear()
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Controller of an xdist run without --model: when workers wrote fixture cases, this process owns the run's
    report (the main plugin's sessionfinish, next, builds and writes it); the nightly options apply to it."""
    config = session.config
    if _is_worker(config):
        return
    reserved = config.stash.get(RESERVED_KEY, None)
    run = config.stash[main.RUN_KEY]
    if run.report is None and reserved is not None:
        from harness.report.collect import CASES_DIR
        from harness.report.runs import run_dir

        if (run_dir(run.config.report_dir, reserved) / CASES_DIR).is_dir():
            run.report_session(run_id=reserved)
