"""Each run's own working area in the report folder, the lock that publishes a report, and pruning of old runs.

Layout under the report folder::

    report.json  report.md  report.html     the latest *complete* run (published under .castguard.lock)
    runs/<run_id>/cases/<worker>.jsonl       case records while the run is going (one file per process)
    runs/<run_id>/outputs/...                this run's saved outputs (paths in its records are relative to
                                             runs/<run_id>/; the published copy prefixes them)
    runs/<run_id>/report.{json,md,html}      this run's own report, complete or interrupted
    runs/<run_id>/.active                    flock'ed by the run's owning process while it runs
    fixes/<model>/<inputs>/<case>/...        the files a failing case's printed fix: and tune: commands read and
                                             write (the golden's feeds, fix.onnx, tuned.onnx): outside runs/, so
                                             pruning never breaks a command printed by an earlier run

Two runs sharing one report folder (a CI matrix on one checkout) therefore never read or delete each
other's records: each reports exactly its own cases. An interrupted run writes only into its own folder, so
the previous complete report stays where it was. :func:`prune_runs` removes the oldest finished run folders
beyond ``keep``, never one that is running (its ``.active`` lock is held) or that the published report uses.
No pytest here.
"""

from __future__ import annotations

import html
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.core.files import atomic_write, own_folder
from harness.core.locks import HeldLock, held, is_held
from harness.core.runid import new_run_id as new_run_id  # one home: harness.core.runid (re-exported)

RUNS_DIR = "runs"
ACTIVE = ".active"
PUBLISH_LOCK = ".castguard.lock"
DEFAULT_KEEP_RUNS = 3
_RUN_ID = re.compile(r"\d{8}T\d{6}(\d{6})?Z-\d+-[0-9a-f]{4}\Z")  # older ids have no microseconds


def is_run_id(name: str) -> bool:
    return _RUN_ID.match(name) is not None


def run_dir(report_dir: Path, run_id: str) -> Path:
    if not is_run_id(run_id):
        raise ValueError(f"not a castguard run id: {run_id!r}")
    return report_dir / RUNS_DIR / run_id


class ActiveRun:
    """Holds ``runs/<id>/.active`` locked while the run goes on (the kernel drops the lock if the process dies)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock: HeldLock | None = None

    def acquire(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        lock = HeldLock(self.folder / ACTIVE)
        lock.acquire()
        self._lock = lock

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None
            (self.folder / ACTIVE).unlink(missing_ok=True)


def is_active(folder: Path) -> bool:
    """Whether another process holds the run folder's ``.active`` lock (a run that is still going)."""
    return is_held(folder / ACTIVE)


SUPERSEDED = "<!-- castguard: not the latest run -->"


def mark_superseded(report_dir: Path, *, run_id: str, created: str, why: str, own_report: bool = True) -> bool:
    """A run that was not published (interrupted) says so at the top of the published ``report.md`` and
    ``report.html``, so that they never show an older run as if it were the latest: the banner names this run, why
    it was not published and where its own report is. Call under :func:`publish_lock`; False when nothing is
    published yet. A later banner replaces an earlier one; the next published report has none."""
    own = f"{RUNS_DIR}/{run_id}/report.md"
    where = f"its own report is [{own}]({own})" if own_report else "it wrote no report (see its terminal output)"
    text = (
        f"**Not the latest run.** The latest run, `{run_id}` (created {created}), {why}; {where}. What follows "
        "is the last complete run."
    )
    done = False
    for name, banner in (
        ("report.md", f"{SUPERSEDED}\n> {text}\n{SUPERSEDED}\n\n"),
        ("report.html", f'{SUPERSEDED}<p class="superseded"><strong>{html.escape(text)}</strong></p>{SUPERSEDED}\n'),
    ):
        path = report_dir / name
        if not path.is_file():
            continue
        old = path.read_text(encoding="utf-8")
        if old.count(SUPERSEDED) >= 2:  # an earlier banner: replaced
            head, _, rest = old.partition(SUPERSEDED)
            old = head + rest.partition(SUPERSEDED)[2].lstrip("\n")
        at = old.find("<main>\n") + len("<main>\n") if name.endswith(".html") and "<main>\n" in old else 0
        atomic_write(path, (old[:at] + banner + old[at:]).encode())
        done = True
    return done


@contextmanager
def publish_lock(report_dir: Path) -> Iterator[None]:
    """Exclusive lock on the report folder while the three top-level report files are replaced together."""
    own_folder(report_dir)
    with held(report_dir / PUBLISH_LOCK, what="the report folder's publish lock"):
        yield


def run_folders(report_dir: Path) -> list[Path]:
    """Every run folder, oldest first (run ids sort by start time)."""
    folder = report_dir / RUNS_DIR
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.iterdir() if p.is_dir() and is_run_id(p.name)), key=lambda p: p.name)


def folder_size(path: Path) -> int:
    """Bytes the files under ``path`` take on disk (allocated blocks, as ``du`` counts; links not followed)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                stat = os.lstat(os.path.join(root, name))
            except FileNotFoundError:
                continue
            total += max(stat.st_size, 512 * stat.st_blocks)
    return total


def prune_runs(report_dir: Path, *, keep: int, protect: frozenset[str] = frozenset()) -> list[Path]:
    """Delete the oldest finished run folders until at most ``keep`` finished ones remain; returns what was
    deleted. A running folder (locked) or a protected run id is never deleted (but counts towards ``keep``)."""
    if keep < 0:
        raise ValueError(f"keep must be >= 0, got {keep}")
    finished = [p for p in run_folders(report_dir) if not is_active(p)]
    excess = max(0, len(finished) - keep)
    doomed = [p for p in finished if p.name not in protect][:excess]
    for path in doomed:
        shutil.rmtree(path, ignore_errors=True)
    return doomed
