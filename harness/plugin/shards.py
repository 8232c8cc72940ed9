"""pytest wiring for ``--shard K/N``: registered by :mod:`harness.plugin` when a shard runs. Nothing else.

The assignment is :func:`harness.sweep.shards.assign` (done by :class:`harness.pipeline.session.AccuracySession`);
what the shard records about itself is :mod:`harness.pipeline.shard_run`, held by the run object
(:class:`harness.pipeline.shard_run.ShardState`, which also prints ``castguard shard 2/4: 13 of 50 models, 156 cases``).
Here:

* a shard with no work deselects the packaged suite's placeholder items and ends with exit status 0 instead of
  pytest's 5 ("no tests collected"): it passes, and says so;
* failed tests that are not sweep cases (a golden check, an adversarial search) reach the run through the main
  plugin (:class:`harness.plugin.FailedTests`), so the merged report can name them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.conductor import CastguardRun


class ShardPlugin:
    """The pytest hooks of this process's shard (its state is ``run.shard``)."""

    def __init__(self, run: CastguardRun, *, suite_files: tuple[Path, ...]) -> None:
        assert run.shard is not None
        self.run = run
        self.work = run.shard.work
        self.suite_files = suite_files

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if self.work.work:
            return
        idle = [item for item in items if item.path in self.suite_files]  # empty parametrizations: placeholders
        if idle:
            config.hook.pytest_deselected(items=idle)
            items[:] = [item for item in items if item.path not in self.suite_files]

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.work.work and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            session.exitstatus = pytest.ExitCode.OK  # a shard with no work passes
