"""Files castguard writes, names and reads: one atomic writer, one streamed hash, one safe path component, one
TOML reader (:func:`read_toml`: ``pyproject.toml`` and ``--sweep`` files; ``tomllib`` from Python 3.11, the
``tomli`` backport, a declared dependency there, on 3.10).

Every file castguard leaves behind (goldens, reports, outputs, history runs, cache entries, converted models) is
written through :func:`atomic_write`: a temporary file in the destination's folder, then ``os.replace``, so a
crash, a full disk or Ctrl-C never leaves a partial file under the final name. ``durable=True`` also fsyncs
before the rename (goldens: a committed artefact); caches skip it, since they need atomicity, not durability.
A full disk (or quota) is one :class:`~harness.core.errors.DiskFull` naming the folder (:func:`disk_full`); a
read-only or misplaced folder one :class:`~harness.core.errors.NotWritable` (:mod:`harness.core.folders` says it
before a run starts). Where two folders share a file system, :func:`atomic_link` gives a file a second name instead
of a second copy.

A SIGKILL (or a power cut) in the middle of a write leaves its hidden temporary file: nothing can remove it at that
moment. Every temporary name carries its writer's host and process id (:func:`_writer_tag`), so the next run
removes the ones whose writer is dead (:func:`remove_stale_temps`) and never a live writer's (two runs at once).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from harness.core.errors import DiskFull, NotWritable, UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 only
    import tomli as tomllib

__all__ = [
    "atomic_link",
    "atomic_write",
    "atomic_write_all",
    "atomic_write_text",
    "disk_full",
    "not_writable",
    "read_toml",
    "remove_stale_temps",
    "safe_component",
    "sha256_file",
    "sha256_files",
]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]")
_NO_SPACE = frozenset(code for code in (errno.ENOSPC, getattr(errno, "EDQUOT", None)) if code is not None)
_NO_WRITE = frozenset((errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EEXIST))
_CHUNK = 1 << 20
_TAGGED = re.compile(r"\.cg-(?P<host>[A-Za-z0-9_]+)-(?P<pid>[0-9]+)\.")


def _writer_tag() -> str:
    """``cg-<host>-<pid>``: who writes a temporary file (see :func:`remove_stale_temps`)."""
    return f"cg-{re.sub(r'[^A-Za-z0-9]', '_', socket.gethostname())}-{os.getpid()}"


def atomic_write(
    path: Path, data: bytes | Callable[[IO[bytes]], None], *, durable: bool = False, mode: int = 0o644
) -> None:
    """Write ``data`` (bytes, or a function that writes to a binary handle) to ``path`` all at once or not at all.

    The folder is created if needed. The file gets ``mode`` (NamedTemporaryFile would leave 0600, but goldens and
    reports are shared files). On any error, KeyboardInterrupt included, the temporary file is removed and the
    previous content of ``path`` (if any) is untouched.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = tempfile.NamedTemporaryFile(
            dir=path.parent, prefix=f".{path.name}.{_writer_tag()}.", suffix=".tmp", delete=False
        )
    except OSError as err:
        raise (disk_full(path, err) or not_writable(path.parent, err) or err) from None
    try:
        with handle:
            if callable(data):
                data(handle)
            else:
                handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.chmod(handle.name, mode)
        os.replace(handle.name, path)
    except BaseException as err:
        Path(handle.name).unlink(missing_ok=True)
        full = (disk_full(path, err) or not_writable(path.parent, err)) if isinstance(err, OSError) else None
        if full is not None:
            raise full from None
        raise


def atomic_link(source: Path, path: Path) -> bool:
    """Make ``path`` a hard link to ``source``, replacing what was there at once; False (nothing changed) where the
    file system cannot (another device, no hard links, no permission). For a file its writer only ever replaces
    (:func:`atomic_write` makes a new file each time), the link keeps the content it has now."""
    temp = path.with_name(f".{path.name}.{_writer_tag()}.link.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.link(source, temp)
        os.replace(temp, path)
    except OSError:
        temp.unlink(missing_ok=True)
        return False
    return True


def atomic_write_all(contents: dict[Path, bytes], *, durable: bool = False) -> None:
    """Write several files all or none (a report's json, md and html): every temporary file is written first, and
    only when all are complete are they renamed into place. A failure (a full disk: :class:`DiskFull`) leaves
    every old file as it was and no temporary file behind."""
    done: list[tuple[Path, Path]] = []
    try:
        for path, data in contents.items():
            temp = Path(path).with_name(f".{Path(path).name}.{_writer_tag()}.all.tmp")
            done.append((temp, Path(path)))
            atomic_write(temp, data, durable=durable)
    except BaseException as err:
        for temp, _path in done:
            temp.unlink(missing_ok=True)
        if isinstance(err, DiskFull):
            raise DiskFull(folder=done[-1][1].parent, name=done[-1][1].name) from None
        raise
    for temp, path in done:
        os.replace(temp, path)


def atomic_write_files(paths: Sequence[Path], write: Callable[[Sequence[Path]], None]) -> None:
    """Write several files of one folder (a model and its external data) all or none, streamed: ``write`` gets a
    temporary path per final path (in a hidden folder beside them) and writes them; only when it returns are they
    renamed into place, in order (the last one is what readers open first). On any error nothing is renamed and the
    temporary folder is removed."""
    folder = Path(paths[0]).parent
    folder.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{Path(paths[0]).name}.{_writer_tag()}.", suffix=".tmp", dir=folder))
    try:
        temps = [scratch / Path(path).name for path in paths]
        write(temps)
        for temp, path in zip(temps, paths):
            os.replace(temp, path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def remove_stale_temps(folder: Path) -> int:
    """Remove the temporary files (and folders) that writers on this host left in ``folder`` (searched through)
    when they were killed mid-write; the number removed. A temporary name whose process still runs (another run
    at once), whose host is another machine (a shared folder), or that castguard did not name is left alone."""
    folder = Path(folder)
    if not folder.is_dir():
        return 0
    host = _writer_tag().split("-")[1]
    removed = 0
    for path in sorted(folder.rglob(".*.tmp")):
        tag = _TAGGED.search(path.name)
        if tag is None or tag["host"] != host or _alive(int(tag["pid"])):
            continue
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        except OSError:  # a read-only folder (read-only goldens are checked, not written): left as it is
            continue
        removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def atomic_write_text(path: Path, text: str, *, durable: bool = False) -> None:
    """:func:`atomic_write` of UTF-8 text (JSON sidecars, plans, cache entries)."""
    atomic_write(path, text.encode("utf-8"), durable=durable)


def disk_full(path: Path, err: OSError) -> DiskFull | None:
    """The :class:`DiskFull` error for a failed write of ``path`` when ``err`` says the disk or quota is full."""
    if err.errno not in _NO_SPACE:
        return None
    return DiskFull(folder=Path(path).parent, name=Path(path).name)


def not_writable(folder: Path, err: OSError) -> NotWritable | None:
    """The :class:`NotWritable` error for a folder that cannot be written (read-only, not permitted, not a folder)."""
    if err.errno not in _NO_WRITE:
        return None
    return check_folder_error(Path(folder)) or NotWritable(
        folder=Path(folder),
        problem=f"cannot write here: {err.strerror or err}; nothing was written",
        fix="make the folder writable, or point castguard at another one (--goldens-dir, --cache-dir, --report-dir)",
    )


def check_folder_error(folder: Path, *, what: str = "the folder") -> NotWritable | None:
    """:func:`check_folder`'s error, or None."""
    for path in (folder, *folder.parents):
        if path.is_symlink() and not path.exists():
            return NotWritable(
                folder=path,
                problem=f"{what} is a symbolic link to {os.readlink(path)}, which does not exist",
                fix="create the folder it points to, remove the link, or point the option at another folder",
            )
        if path.exists() and not path.is_dir():
            return NotWritable(
                folder=path,
                problem=f"{what} needs a folder here, but this is a file"
                + (f" (on the way to {folder})" if path != folder else ""),
                fix="move the file away, or point the option at another folder",
            )
    return None


def sha256_file(path: Path) -> str:
    """Hex sha256 of one file, read in 1 MiB chunks (never the whole file in memory)."""
    return sha256_files([Path(path)])


def sha256_files(paths: list[Path]) -> str:
    """Hex sha256 over several files' bytes in the given order (a model plus its external-data files)."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as stream:
            for chunk in iter(lambda: stream.read(_CHUNK), b""):
                digest.update(chunk)
    return digest.hexdigest()


def safe_component(name: str) -> str:
    """A file-name-safe, collision-free form of ``name`` (unchanged when already safe)."""
    clean = _UNSAFE.sub("_", name)
    if clean == name and name not in ("", ".", ".."):
        return name
    return f"{clean.strip('.')}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def read_toml(path: Path, *, what: str) -> dict[str, object]:
    """Parse a TOML file; a missing, unreadable or malformed file is a UserError naming it."""
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise UserError(where=path, problem=f"{what} not found", fix="check the path") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise UserError(where=path, problem=f"{what} is not valid TOML: {err}", fix="fix the TOML syntax") from err


COMPRESS_MAX_BYTES = 16_000_000
"""Arrays (a golden's members, a case's saved outputs) above this are stored in their ``.npz`` uncompressed: float
tensors barely deflate (random fp32 logits by about 7 %), and deflating a 134 MB logits tensor took 45 s on the
2-core machine (issue 31). Smaller ones stay compressed, so small committed goldens stay small."""


IGNORE_ALL = b"# created by castguard; nothing in this folder belongs in version control\n*\n"


def own_folder(folder: Path) -> Path:
    """Create castguard's own folder (the cache, the report folder) with a ``*`` ``.gitignore`` in it, as pytest,
    mypy and ruff do for their caches, so that ``git add .`` never takes it. A folder that already exists is left
    as it is (the user's own folder given as ``--report-dir`` may be meant for version control)."""
    if folder.is_dir():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / ".gitignore", IGNORE_ALL)
    return folder
