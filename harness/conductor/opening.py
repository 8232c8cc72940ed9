"""What :meth:`~harness.conductor.run.CastguardRun.from_options` checks and opens before a run starts: the folders it
needs (one error each before anything runs), its report session, the refusal of nightly options on a shard, and the
runners the user named."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.config import HarnessConfig
from harness.core.errors import UserError
from harness.core.files import remove_stale_temps
from harness.core.folders import check_folder, check_writable
from harness.core.runid import RUN_ID_KEY
from harness.nightly.options import NightlyOptions
from harness.report.collect import ReportSession, worker_name

SHARD_REFUSES = (
    "a shard is one part of the night: comparing it with a baseline would call the other shards' cases missing"
)


def check_folders(config: HarnessConfig, nightly: NightlyOptions, *, with_report: bool, worker: bool) -> None:
    """A misplaced goldens, report or history folder is one error before anything runs (the cache is optional: a
    warning); nothing is checked without models, and an xdist worker writes into its controller's folders. The
    controller then removes what a killed run's writes left behind (:func:`remove_stale_temps`)."""
    if not config.models:
        return
    check_folder(config.goldens_dir, what="the goldens folder (--goldens-dir)")
    if with_report and not worker:
        check_writable(config.report_dir, what="the report folder (--report-dir)")
    if nightly.history is not None and not worker:
        check_writable(nightly.history, what="the history folder (--history)")
    if not worker:
        for folder in (config.goldens_dir, config.report_dir, config.cache_dir, nightly.history):
            if folder is not None:
                remove_stale_temps(folder)


def report_session(
    config: HarnessConfig, worker_input: Mapping[str, Any] | None, *, run_id: str | None
) -> ReportSession:
    """The run's report session: an xdist worker's under its controller's run id, a controller's under ``run_id``
    when it handed one to its workers before the run was built."""
    run_id = worker_input.get(RUN_ID_KEY) if worker_input else run_id
    return ReportSession(
        report_dir=config.report_dir,
        worker=worker_name(dict(worker_input or {}) or None),
        run_id=str(run_id) if run_id else None,
        keep_runs=config.keep_runs,
    )


def refuse_nightly_on_a_shard(nightly: NightlyOptions) -> None:
    """A shard with --baseline/--history/--fail-on-regression is one usage error: ``castguard merge`` judges the
    night."""
    if nightly.active:
        raise UserError(
            where="--shard",
            problem=SHARD_REFUSES,
            fix="drop --baseline/--history/--fail-on-regression here and give them to "
            "`castguard merge SHARD_DIR... --out DIR`, which compares the whole night once",
        )


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


def bundled_dir() -> Path:
    from harness.data.models import bundled_models_dir

    return bundled_models_dir()
