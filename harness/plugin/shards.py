"""pytest wiring for ``--shard K/N``: registered by :mod:`harness.plugin` when a shard runs. Nothing else.

The assignment is :func:`harness.sweep.shards.assign` (done by :class:`harness.run.session.AccuracySession`);
what the shard records about itself is :mod:`harness.run.shard_run`. Here:

* the start marker (``runs/<id>/shard.json``) is written when the plugin is registered (configure time);
* a shard with no work deselects the packaged suite's placeholder items and ends with exit status 0 instead of
  pytest's 5 ("no tests collected"): it passes, and says so;
* failed tests that are not sweep cases (a golden check, an adversarial search) are remembered, so the merged
  report can name them;
* the terminal summary prints ``castguard shard 2/4: 13 of 50 models, 156 cases``.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.plugin import is_case
from harness.report.model import ShardInfo
from harness.sweep.shards import ShardWork


class ShardPlugin:
    """This process's shard: its work, its start record, the non-case tests that failed."""

    def __init__(self, work: ShardWork, info: ShardInfo, *, suite_files: tuple[Path, ...]) -> None:
        self.work = work
        self.info = info
        self.suite_files = suite_files
        self.failed_tests: list[str] = []

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if self.work.work:
            return
        idle = [item for item in items if item.path in self.suite_files]   # empty parametrizations: placeholders
        if idle:
            config.hook.pytest_deselected(items=idle)
            items[:] = [item for item in items if item.path not in self.suite_files]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed and not is_case(report.nodeid):
            self.failed_tests.append(report.nodeid.split("::")[-1])

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.work.work and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            session.exitstatus = pytest.ExitCode.OK          # a shard with no work passes

    def finished(self, exit_status: int) -> ShardInfo:
        """The start record with how the shard ended (for its report.json)."""
        return replace(self.info, exit_status=exit_status, failed_tests=tuple(dict.fromkeys(self.failed_tests)))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.write_line(f"castguard {self.work.summary()}")
