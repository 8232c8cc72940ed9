"""The one inter-process lock of castguard: an OS file lock (``filelock``) that the kernel drops when its holder dies.

Goldens, cache entries, the report folder's publish lock and a running run's ``.active`` marker are all held
through this module. The lock is an advisory lock on an open file (``flock`` on POSIX, ``LockFileEx`` on
Windows), never the *existence* of a file: a run killed with SIGKILL, or a machine that lost power, leaves at
most an empty ``.lock`` file behind, which the next run takes at once. No POSIX-only module is imported.

- :func:`held` waits for the lock (``timeout_s`` seconds at most; then :class:`LockTimeout`, a UserError naming
  the lock file), holds it for a ``with`` block and releases it;
- :func:`try_held` takes it only if it is free and yields whether it did;
- :class:`HeldLock` holds it across calls (``acquire``/``release``; a run's ``.active`` marker);
- :func:`is_held` tells whether some other holder has it now;
- :func:`lock_for` is where the lock of a file that may sit in a read-only folder lives (the goldens of a
  read-only checkout): a folder of the system's temporary directory, keyed by the file's resolved path, so
  reading such a file needs no write access beside it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from filelock import FileLock, Timeout, UnixFileLock

from harness.core.errors import UserError

__all__ = ["HeldLock", "LockTimeout", "held", "is_held", "lock_for", "try_held"]

_POLL_S = 0.05


class LockTimeout(UserError):
    """A lock was still held by another process when the wait ran out."""


def lock_for(path: Path) -> Path:
    """The lock file for ``path``, outside ``path``'s folder: ``<tmp>/castguard-locks-<user>/<hash>.lock``.

    Every process of one user on one machine (xdist workers, concurrent runs) maps the same file to the same lock,
    whatever folder it was named from (the path is resolved). Locks of different users do not meet: two users
    writing one goldens folder at once are not serialised (their writes stay atomic)."""
    key = hashlib.sha256(os.fsencode(Path(path).resolve())).hexdigest()[:32]
    user = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    return Path(tempfile.gettempdir()) / f"castguard-locks-{user}" / f"{key}.lock"


def _lock(path: Path) -> FileLock:
    path.parent.mkdir(parents=True, exist_ok=True)
    # thread_local=False: a lock taken in one thread may be released in another (the plugin's hooks)
    return FileLock(str(path), thread_local=False)


@contextmanager
def held(path: Path, *, timeout_s: float | None = None, what: str = "lock", remove: bool = False) -> Iterator[None]:
    """Hold the lock on ``path`` for the block; wait at most ``timeout_s`` seconds (None: as long as it takes).

    ``remove=True`` deletes the lock file when the block ends (a committed folder such as the goldens keeps no
    ``.lock`` file). Then a waiter may win the lock on a file that its holder has just deleted, so a lock is only
    taken as held when ``path`` named the same file before and after it was won; otherwise it is taken again.
    """
    path = Path(path)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        before = _identity(path)
        lock = _lock(path)
        left = -1.0 if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            lock.acquire(timeout=left, poll_interval=_POLL_S)
        except Timeout:
            raise LockTimeout(
                where=path,
                problem=f"{what} still held by another process after {timeout_s:g} s",
                fix="wait for the other castguard run to finish (a dead run's lock is freed by the "
                "system at once; the file itself may stay)",
            ) from None
        # only flock keeps the file on release; the Windows and soft-file backends delete it themselves
        unlink = remove and isinstance(lock, UnixFileLock)
        if not unlink or (before is not None and _identity(path) == before):
            break
        lock.release()  # won a file that was deleted or replaced meanwhile: again
    try:
        yield
    finally:
        if unlink:
            with suppress(OSError):
                path.unlink()
        lock.release()


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


@contextmanager
def try_held(path: Path) -> Iterator[bool]:
    """Take the lock on ``path`` only if it is free now; yields whether it was (and holds it for the block)."""
    lock = _lock(Path(path))
    try:
        lock.acquire(blocking=False)
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def is_held(path: Path) -> bool:
    """Whether another holder has the lock on ``path`` now (a missing file is a free lock; none is created)."""
    path = Path(path)
    if not path.exists():
        return False
    with try_held(path) as free:
        return not free


class HeldLock:
    """A lock held across calls: :meth:`acquire` waits for it, :meth:`release` lets it go (idempotent)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock: FileLock | None = None

    def acquire(self) -> None:
        lock = _lock(self.path)
        lock.acquire(poll_interval=_POLL_S)
        self._lock = lock

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None
