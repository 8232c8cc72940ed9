"""One castguard run, start to end, without pytest: :class:`CastguardRun` owns everything a run carries.

The pytest plugin (:mod:`harness.plugin`) keeps one :class:`CastguardRun` in ``config.stash`` and its hooks only
call it; ``castguard goldens`` builds the same object, and ``castguard merge`` builds it from the shards of one
night (:meth:`CastguardRun.from_night`), so that a merged night is judged, written and stored by the same
:meth:`CastguardRun.finish` as a ``pytest`` run. It owns:

* the validated :class:`~harness.config.HarnessConfig` and the project folder it came from;
* the :class:`~harness.pipeline.session.AccuracySession` (goldens, sweep cases) when models are given;
* the :class:`~harness.report.collect.ReportSession` (this run's folder, case files, the published report);
* the :class:`~harness.nightly.run.NightlyRun` (``--baseline``/``--history``/``--fail-on-regression``);
* the shard (``--shard K/N``): its work, its start record and the non-case tests that failed;
* ``castguard merge``: the shards' night (:class:`~harness.nightly.merge.ShardNight`) in place of a session.

Life cycle: :meth:`CastguardRun.from_options` (usage errors raise :class:`~harness.core.errors.UserError` before
anything runs) -> :meth:`start` -> :meth:`add` per settled case record -> :meth:`finish` (builds, judges and
writes the report; returns the exit status) -> :meth:`terminal_lines` -> :meth:`close`.

A requested runner whose every case skipped fails the run: :mod:`harness.report.banner`.
"""

from harness.conductor.run import CastguardRun
from harness.conductor.summary import Section

__all__ = ["CastguardRun", "Section"]
