"""A size cap for the content cache: least-recently-used eviction, and what ``castguard cache`` shows. No pytest.

An *entry* is every file of one key in one section (``convert/<key>.onnx`` + ``.json`` + ``.onnx.data`` for
a model with external data, ``magnitudes/<key>.json``, ``trt-build/<key>.json`` or a report plot's
``plots/<key>.png``); its lock file goes with it. :class:`~harness.pipeline.cache.ContentCache` (and
:class:`~harness.report.plotcache.PlotCache`) touches an entry's files when it reads them, so their newest
modification time is the entry's last use. :func:`evict` deletes the least recently used entries until the folder
fits the cap; an entry whose lock is held (being written or read by a running case) is skipped, never deleted under
a reader (a plot entry has no lock: one deleted under its reader is a miss, drawn again). Evicting only costs time:
the next run recomputes what it misses.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.core.locks import try_held

SECTIONS = ("convert", "magnitudes", "trt-build", "plots")
MB = 1024 * 1024


@dataclass(frozen=True)
class Entry:
    section: str
    key: str
    files: tuple[Path, ...]
    size: int  # bytes on disk (allocated blocks)
    last_used: float  # newest mtime of its files (seconds since the epoch)


@dataclass(frozen=True)
class CacheUsage:
    root: Path
    entries: tuple[Entry, ...]

    @property
    def size(self) -> int:
        return sum(e.size for e in self.entries)

    def lines(self) -> list[str]:
        """What ``castguard cache`` prints."""
        lines = [f"{self.root}: {_mb(self.size)} in {len(self.entries)} entr{'y' if len(self.entries) == 1 else 'ies'}"]
        for section in SECTIONS:
            mine = [e for e in self.entries if e.section == section]
            if mine:
                lines.append(f"  {section}: {_mb(sum(e.size for e in mine))} in {len(mine)} entries")
        return lines


def _mb(size: int) -> str:
    return f"{size / MB:.1f} MB"


def disk_bytes(stat: os.stat_result) -> int:
    """Bytes a file takes on disk (its allocated blocks, as ``du`` counts them; the size where blocks are unknown)."""
    return max(stat.st_size, 512 * (getattr(stat, "st_blocks", 0) or 0))


def usage(root: Path) -> CacheUsage:
    """Every entry under ``root`` (a missing folder is an empty cache)."""
    entries = []
    for section in SECTIONS:
        folder = root / section
        if not folder.is_dir():
            continue
        groups: dict[str, list[Path]] = {}
        for path in folder.iterdir():
            if path.is_file() and not path.name.startswith(".") and path.suffix != ".lock":
                groups.setdefault(path.name.partition(".")[0], []).append(path)  # <key>.onnx.data goes with <key>
        for key, files in groups.items():
            stats = [f.stat() for f in files if f.exists()]
            if stats:
                entries.append(
                    Entry(
                        section=section,
                        key=key,
                        files=tuple(sorted(files)),
                        size=sum(disk_bytes(s) for s in stats),
                        last_used=max(s.st_mtime for s in stats),
                    )
                )
    return CacheUsage(root=root, entries=tuple(sorted(entries, key=lambda e: (e.last_used, e.section, e.key))))


def touch(paths: tuple[Path, ...]) -> None:
    """Mark an entry as used now (its files' mtime); a vanished file is ignored."""
    for path in paths:
        try:
            os.utime(path)
        except FileNotFoundError:
            continue


def evict_note(root: Path, *, max_mb: int) -> str:
    """Apply a ``cache_max_mb`` cap (0: none) at the end of a run; a line for the terminal when something went."""
    if max_mb <= 0:
        return ""
    gone = evict(root, max_bytes=max_mb * MB)
    if not gone:
        return ""
    return (
        f"castguard: cache {root} was over {max_mb} MB: evicted {len(gone)} least recently used entries "
        f"({_mb(sum(e.size for e in gone))}); `castguard cache` shows it"
    )


def evict(root: Path, *, max_bytes: int) -> tuple[Entry, ...]:
    """Delete least recently used entries until the cache holds at most ``max_bytes``; returns what went."""
    found = usage(root)
    total, gone = found.size, []
    for entry in found.entries:  # oldest first
        if total <= max_bytes:
            break
        with _unlocked(root / entry.section / f"{entry.key}.lock") as free:
            if not free:
                continue  # in use by a running case
            for path in entry.files:
                path.unlink(missing_ok=True)
        total -= entry.size
        gone.append(entry)
    return tuple(gone)


@contextmanager
def _unlocked(lock: Path) -> Iterator[bool]:
    """Try the entry's lock without waiting; yields whether it was free (and holds it meanwhile)."""
    if not lock.exists():
        yield True
        return
    with try_held(lock) as free:
        if not free:
            yield False
            return
        try:
            yield True
        finally:
            lock.unlink(missing_ok=True)
