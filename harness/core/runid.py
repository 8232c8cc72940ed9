"""A run's id, and the key xdist workers get it under: made where nothing else of castguard is loaded yet (the pytest plugin reserves one for its xdist
workers before it knows that any of them will use castguard), read and checked by :mod:`harness.report.runs`."""

from __future__ import annotations

import os
import secrets
from datetime import datetime, timezone

RUN_ID_KEY = "castguard_run_id"  # an xdist worker's workerinput: the run id its controller writes the report under


def new_run_id(*, now: datetime | None = None) -> str:
    """``20261122T174501123456Z-12345-9f3a``: sorts by start time to the microsecond (two runs of one second, such as
    two shards started together in one folder, keep their order), unique across processes and machines' pids."""
    when = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return f"{when.strftime('%Y%m%dT%H%M%S%fZ')}-{os.getpid()}-{secrets.token_hex(2)}"
