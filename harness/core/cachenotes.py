"""What castguard's optional caches say: one :class:`CacheSkipped` warning per problem, never an error.

The content cache (:mod:`harness.pipeline.cache`) and the report's plot cache (:mod:`harness.report.plotcache`)
share a folder (``--cache-dir``) and these rules: a folder that cannot be used (a file in its place, read-only,
full) is skipped for the rest of the process, and an unreadable entry is rebuilt; each says so once, and the run
goes on without the cache.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from harness.core.errors import UserError
from harness.core.files import check_folder_error, not_writable


class CacheSkipped(UserWarning):
    """The cache (optional) could not be used, or an entry was rebuilt; the run goes on. Said once per process,
    cache and cause."""


class CacheNotes:
    """One cache object's voice and its skipped state (``skipped``: why the cache is not used, None while it is)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.skipped: UserError | None = check_folder_error(root, what="the cache folder (--cache-dir)")
        self._said: set[str] = set()
        if self.skipped is not None:
            self.say(self.skipped)

    def say(self, err: UserError) -> None:
        """One warning per kind of problem (not one per case or plot): the cache is skipped, or an entry rebuilt."""
        if err.problem not in self._said:
            self._said.add(err.problem)
            warnings.warn(CacheSkipped(f"castguard cache skipped: {err}"), stacklevel=3)

    def skip(self, err: Exception, *, goes_on: str = "the run goes on without the cache") -> None:
        """Skip the cache from now on: its folder could not be written (``err``); say so once."""
        if isinstance(err, OSError):
            err = not_writable(self.root, err) or UserError(where=self.root, problem=str(err), fix="-")
        assert isinstance(err, UserError)
        self.skipped = UserError(where=err.where, problem=f"{err.problem}; {goes_on}", fix=err.fix)
        self.say(self.skipped)

    def corrupt(self, path: Path, why: object, *, then: str = "") -> UserError:
        """The problem of an unreadable entry (``why``: the error or what is wrong), rebuilt (``then``: how)."""
        return UserError(
            where=path,
            problem=f"unreadable cache entry ({why}){then}",
            fix=f"delete the cache folder {self.root}; castguard rebuilds it",
        )
