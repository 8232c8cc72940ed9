"""Files castguard writes, names and reads: one atomic writer, one streamed hash, one safe path component, one
TOML reader (:func:`read_toml`: ``pyproject.toml`` and ``--sweep`` files; ``tomllib`` from Python 3.11, the
``tomli`` backport, a declared dependency there, on 3.10).

Every file castguard leaves behind (goldens, reports, outputs, history runs, cache entries, converted models) is
written through :func:`atomic_write`: a temporary file in the destination's folder, then ``os.replace``, so a
crash, a full disk or Ctrl-C never leaves a partial file under the final name. ``durable=True`` also fsyncs
before the rename (goldens: a committed artefact); caches skip it, since they need atomicity, not durability.
A full disk (or quota) is one :class:`~harness.core.errors.DiskFull` naming the folder (:func:`disk_full`).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from harness.core.errors import DiskFull, UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 only
    import tomli as tomllib

__all__ = [
    "atomic_write",
    "atomic_write_all",
    "atomic_write_text",
    "disk_full",
    "read_toml",
    "safe_component",
    "sha256_file",
    "sha256_files",
]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]")
_NO_SPACE = frozenset(code for code in (errno.ENOSPC, getattr(errno, "EDQUOT", None)) if code is not None)
_CHUNK = 1 << 20


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
        handle = tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False)
    except OSError as err:
        raise (disk_full(path, err) or err) from None
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
        full = disk_full(path, err) if isinstance(err, OSError) else None
        if full is not None:
            raise full from None
        raise


def atomic_write_all(contents: dict[Path, bytes]) -> None:
    """Write several files all or none (a report's json, md and html): every temporary file is written first, and
    only when all are complete are they renamed into place. A failure (a full disk: :class:`DiskFull`) leaves
    every old file as it was and no temporary file behind."""
    done: list[tuple[Path, Path]] = []
    try:
        for path, data in contents.items():
            temp = Path(path).with_name(f".{Path(path).name}.all.tmp")
            done.append((temp, Path(path)))
            atomic_write(temp, data)
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
    scratch = Path(tempfile.mkdtemp(prefix=f".{Path(paths[0]).name}.", dir=folder))
    try:
        temps = [scratch / Path(path).name for path in paths]
        write(temps)
        for temp, path in zip(temps, paths):
            os.replace(temp, path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def atomic_write_text(path: Path, text: str, *, durable: bool = False) -> None:
    """:func:`atomic_write` of UTF-8 text (JSON sidecars, plans, cache entries)."""
    atomic_write(path, text.encode("utf-8"), durable=durable)


def disk_full(path: Path, err: OSError) -> DiskFull | None:
    """The :class:`DiskFull` error for a failed write of ``path`` when ``err`` says the disk or quota is full."""
    if err.errno not in _NO_SPACE:
        return None
    return DiskFull(folder=Path(path).parent, name=Path(path).name)


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
