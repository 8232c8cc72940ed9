"""The ``castguard`` fixture: castguard inside a user's own tests (issue 24.1).

::

    def test_detector_fp16(castguard, my_calibration_batches):
        result = castguard.check("models/detector.onnx", precision="fp16", data_max=512,
                                 inputs=my_calibration_batches, runner="emulate")
        assert result.passed, result.explain()

The work is :class:`harness.check.Checker` (no pytest there), one per process, built from the run's
:class:`~harness.config.HarnessConfig` (``[tool.castguard]`` of the project + command-line options). Its records
go into the run's report exactly as the packaged suite's do: settled against the test's own outcome (xfail) in
the main plugin's ``pytest_runtest_makereport`` (the run object holds them per test). The run object has its report
session from start-up (:meth:`harness.conductor.CastguardRun.from_options`), with or without ``--model``; the
first check makes and locks its folder. Under xdist each worker writes into its controller's run (the run id in its
``workerinput``); a worker that used the fixture says so (:func:`pytest_testnodedown`), and the controller's run,
built then if no castguard option built it, takes the folder over at the end. The main plugin's
``pytest_sessionfinish`` builds, judges (nightly rules) and writes that report as for ``pytest --model``.

Bad input (a missing model, inputs that do not fit it) fails the test with castguard's message and no traceback.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn, TypeVar

import pytest

from harness.plugin.state import ensure_run, state

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from harness.check import Checker, CheckResult, CheckSettings, SweepSettings

FIXTURE_USED = "castguard_fixture_used"  # an xdist worker's workeroutput: a test there used the fixture
T = TypeVar("T")


class CastguardFixture:
    """What the ``castguard`` fixture gives a test: :meth:`check` and :meth:`sweep` (see :mod:`harness.check`)."""

    def __init__(self, checker: Checker, item: pytest.Item) -> None:
        self._checker = checker
        self._item = item
        self.golden_written: str | None = None  # the message of a golden one of this test's checks wrote this run

    def check(
        self, model: str | os.PathLike[str], *, strict: bool = False, **settings: Unpack[CheckSettings]
    ) -> CheckResult:
        """One case: convert (or take ``candidate``, a model you converted), run on ``runner``, compare with the
        FP32 golden; ``settings`` and their defaults are :meth:`Checker.check`'s. ``strict=True``: a case that does
        not pass fails the test here, with :meth:`CheckResult.explain` as the message (a skipped case skips it), so
        no ``assert`` can be forgotten."""
        return self._judged(strict, self._guard(lambda: self._checker.check(model, **settings)))[0]

    def sweep(
        self, model: str | os.PathLike[str], *, strict: bool = False, **settings: Unpack[SweepSettings]
    ) -> list[CheckResult]:
        """Every combination of the settings; one result per case (``settings`` and their defaults are
        :meth:`Checker.sweep`'s). ``strict=True``: after every case ran, the test fails with the explanation of
        each case that did not pass."""
        return self._judged(strict, self._guard(lambda: self._checker.sweep(model, **settings)))

    def _judged(self, strict: bool, results: CheckResult | list[CheckResult]) -> list[CheckResult]:
        """Note a golden written in this run on the test (never an expected failure: see
        :func:`golden_written_is_no_expected_failure`); with ``strict``, fail (or skip) the test on what did not
        pass."""
        __tracebackhide__ = True
        listed = results if isinstance(results, list) else [results]
        written = [r.explain() for r in listed if r.golden_written]
        if written:
            self.golden_written = written[0]
        if strict:
            _raise_unless_passed(listed)
        return listed

    def _guard(self, call: Callable[[], T]) -> T:
        __tracebackhide__ = True
        from harness.core.errors import UserError

        try:
            return call()
        except UserError as err:
            message = str(err)
        _fail(message)  # outside the except: one message, no "during handling" chain


def _raise_unless_passed(results: list[CheckResult]) -> None:
    __tracebackhide__ = True
    failed = [r.explain() for r in results if r.status in ("fail", "error")]
    if failed:
        _fail("\n\n".join(failed))
    skipped = [r.explain() for r in results if r.status == "skip"]
    if skipped and len(skipped) == len(results):
        pytest.skip("\n".join(skipped))


def golden_written_is_no_expected_failure(item: pytest.Item, report: pytest.TestReport) -> None:
    """A test whose check wrote its model's golden in this run fails, even where it is marked xfail: the failure
    says "review the new golden", not the failure the mark expects."""
    fixture = getattr(item, "funcargs", {}).get("castguard")
    message = fixture.golden_written if isinstance(fixture, CastguardFixture) else None
    if message is not None and report.when == "call" and hasattr(report, "wasxfail"):
        del report.wasxfail
        report.outcome = "failed"
        report.longrepr = f"{message}\n(this test is marked xfail; a golden written in this run is not that failure)"


def _fail(message: str) -> NoReturn:
    __tracebackhide__ = True
    pytest.fail(message, pytrace=False)


def _checker(config: pytest.Config) -> Checker:
    """This process's checker, from the run object, writing into its report session (an xdist worker's is its
    controller's run: see the module docstring)."""
    from harness.core.runid import RUN_ID_KEY

    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and RUN_ID_KEY not in workerinput:
        _fail("castguard: this xdist worker got no run id from its controller (castguard is not loaded there?)")
    return ensure_run(config).checker()


@pytest.fixture
def castguard(request: pytest.FixtureRequest) -> CastguardFixture:
    """castguard's checks for this test: ``castguard.check(model, precision=..., inputs=...)`` and
    ``castguard.sweep(model, precisions=[...], data_max=[...])``; every case goes into the run's report once
    pytest has judged the test (the main plugin settles it: xfail/xpass)."""
    node, run = request.node, ensure_run(request.config)
    workeroutput = getattr(request.config, "workeroutput", None)  # an xdist worker: tell the controller
    if workeroutput is not None:
        workeroutput[FIXTURE_USED] = True
    return CastguardFixture(_checker(request.config).recording(lambda record: run.hold(node.nodeid, record)), node)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    """pytest-xdist, controller: a worker that used the fixture says so in its ``workeroutput``."""
    if getattr(node, "workeroutput", {}).get(FIXTURE_USED):
        state(node.config).fixture_used = True  # type: ignore[attr-defined]
