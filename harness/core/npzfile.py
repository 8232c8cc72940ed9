"""The one ``.npz`` reader and writer (as ``np.savez`` writes them; the goldens, a case's saved outputs, feeds).

Reading: ``np.load`` reads a stored (uncompressed) member through ``zipfile``: a CRC pass and a copy per read
chunk, 0.35 s for a decoder's 131 MB logits; hashing the file for the golden's sidecar check read it once more
(0.1 s). :func:`read_npz` reads the file once, front to back: each stored member's array data goes straight into
its own array (``readinto``), and every byte of the file, those included, feeds the sha256 when asked. A stored
member's CRC is checked (``zlib.crc32`` over the array as read) unless the file is hashed: the caller's sha256 of
the whole file (the golden's sidecar) is the stronger check. Deflated members (small arrays) are read with
``zipfile`` and ``numpy.lib.format``, as ``np.load`` would.

Writing: :func:`save_npz_stable` writes a golden (the same arrays, the same bytes; large arrays aligned, so that
:func:`read_npz` can map them); :func:`save_npz` stores each array's memory as it is (its ``.npy`` header, then its bytes), where
``np.savez`` copies it through 16 MB ``tobytes`` buffers: no buffer the size of a chunk is made, on the thread that
writes a case's outputs while the judge runs either (a thread's malloc arena keeps what it freed).

Never unpickles or pickles: object arrays are refused, as ``np.load(allow_pickle=False)`` refuses them.
"""

from __future__ import annotations

import hashlib
import io
import mmap
import struct
import zipfile
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from harness.core.files import COMPRESS_MAX_BYTES

_LOCAL_HEADER = 30
"""Bytes of a zip local file header before its name and extra field; their lengths sit at offset 26."""
_CHUNK = 1 << 20


MAPPED_ABOVE = 1 << 20
"""With ``mapped``, stored arrays of at least this many bytes (whose data starts 64-byte aligned) are views of the
file, not copies."""
_ALIGN = 64


def read_npz(
    path: Path, *, with_sha256: bool = False, mapped: bool = False
) -> tuple[dict[str, np.ndarray], str | None]:
    """The arrays of ``path`` by name (``.npy`` stripped, as ``np.load`` names them), and the file's hex sha256
    when ``with_sha256``. With ``mapped``, each large stored array whose data is aligned in the file (the goldens
    write theirs so) is a read-only view of the file mapped into memory: its pages count in the process's memory
    only while they are read, and :func:`release_pages` lets them go (a golden's logits need not be resident while
    a model runs); the others are read as without. Raises ``zipfile.BadZipFile``, ``ValueError`` or ``EOFError``
    for a file that is not a readable ``.npz``."""
    digest = hashlib.sha256() if with_sha256 else None
    arrays: dict[str, np.ndarray] = {}
    with open(path, "rb") as handle:
        with zipfile.ZipFile(handle) as archive:
            members = sorted(archive.infolist(), key=lambda info: info.header_offset)
            for info in members:
                if info.compress_type != zipfile.ZIP_STORED:
                    arrays[_name(info)] = np.lib.format.read_array(io.BytesIO(archive.read(info)), allow_pickle=False)
        view = _map(handle) if mapped else None
        done = 0  # bytes of the file hashed so far
        for info in (m for m in members if m.compress_type == zipfile.ZIP_STORED):
            start, array = _stored_array(handle, info, view)
            done = _hash_span(handle, digest, done, start)
            if array.base is None:
                _read_into(handle, array, digest)
            elif digest is not None and view is not None:  # a view of the mapped file: hashed where it lies
                digest.update(memoryview(view)[start : start + array.nbytes])
            if digest is None and _crc(handle, info, start, array) != info.CRC:
                raise zipfile.BadZipFile(f"Bad CRC-32 for file {info.filename!r}")
            done = start + array.nbytes
            arrays[_name(info)] = array
        _hash_span(handle, digest, done, None)
    if view is not None:
        release_pages(arrays.values())  # read for the hash or the CRC: resident until let go
    return arrays, digest.hexdigest() if digest is not None else None


def release_pages(arrays: Iterable[np.ndarray]) -> None:
    """Let the pages of the file-mapped arrays among ``arrays`` (:func:`read_npz` with ``mapped``) go from the
    process's memory; they are read again from the file (the page cache, mostly) when next used. Others: nothing.
    A system without ``madvise(MADV_DONTNEED)`` keeps them."""
    advice = getattr(mmap, "MADV_DONTNEED", None)
    seen: set[int] = set()
    for array in arrays:
        base: object = array
        while isinstance(base, (np.ndarray, memoryview)):
            base = base.base if isinstance(base, np.ndarray) else base.obj
        if isinstance(base, mmap.mmap) and id(base) not in seen and advice is not None:
            seen.add(id(base))
            base.madvise(advice)


def _map(handle: IO[bytes]) -> mmap.mmap | None:
    """The whole file mapped read-only (None for an empty file, which mmap refuses)."""
    handle.seek(0, 2)
    if handle.tell() == 0:
        return None
    return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)


def _name(info: zipfile.ZipInfo) -> str:
    return info.filename.removesuffix(".npy")


def _stored_array(handle: IO[bytes], info: zipfile.ZipInfo, view: mmap.mmap | None) -> tuple[int, np.ndarray]:
    """Where a stored member's array data starts in the file, and an empty array of its shape and type, or (with
    ``view``, for a large array whose data is aligned) the array as a view of the mapped file."""
    handle.seek(info.header_offset)
    local = handle.read(_LOCAL_HEADER)
    if len(local) != _LOCAL_HEADER or local[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"member {info.filename!r}: no local header at {info.header_offset}")
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    member_start = info.header_offset + _LOCAL_HEADER + name_len + extra_len
    handle.seek(member_start)
    version = np.lib.format.read_magic(handle)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(handle)
    else:
        raise ValueError(f"member {info.filename!r}: .npy format version {version} is not read here")
    if dtype.hasobject:
        raise ValueError(f"member {info.filename!r} holds Python objects (pickled); it is not loaded")
    start = handle.tell()
    count = int(np.prod(shape, dtype=np.int64))
    if start - member_start + count * dtype.itemsize != info.file_size:
        raise ValueError(f"member {info.filename!r}: {info.file_size} bytes do not hold a {dtype} array {shape}")
    if view is not None and start % _ALIGN == 0 and count * dtype.itemsize >= MAPPED_ABOVE:
        flat = np.frombuffer(view, dtype=dtype, count=count, offset=start)
        return start, flat.reshape(shape[::-1]).T if fortran else flat.reshape(shape)
    return start, np.empty(shape, dtype=dtype, order="F" if fortran else "C")


def _bytes(array: np.ndarray) -> memoryview:
    """The array's memory as flat bytes, in the order the ``.npy`` stores it (C or Fortran)."""
    c_ordered = array.T if array.flags.f_contiguous and not array.flags.c_contiguous else array
    return c_ordered.reshape(-1).view(np.uint8).data  # a view: the array is contiguous


def _read_into(handle: IO[bytes], array: np.ndarray, digest: hashlib._Hash | None) -> None:
    """Fill ``array`` with the file's next bytes."""
    view = _bytes(array)
    got = handle.readinto(view) if view.nbytes else 0  # type: ignore[attr-defined]
    if got != view.nbytes:
        raise EOFError(f"the file ends inside an array: {got} of {view.nbytes} bytes")
    if digest is not None:
        digest.update(view)


def _crc(handle: IO[bytes], info: zipfile.ZipInfo, start: int, array: np.ndarray) -> int:
    """The zip CRC-32 of a stored member: its ``.npy`` header's bytes, then the array's."""
    member_start = start - (info.file_size - array.nbytes)
    handle.seek(member_start)
    crc = zlib.crc32(handle.read(start - member_start))
    handle.seek(start + array.nbytes)
    return zlib.crc32(_bytes(array), crc)


def _hash_span(handle: IO[bytes], digest: hashlib._Hash | None, start: int, stop: int | None) -> int:
    """Hash the file's bytes from ``start`` to ``stop`` (None: the end); returns ``stop``."""
    if digest is None:
        return start if stop is None else stop
    handle.seek(start)
    left = None if stop is None else stop - start
    while left is None or left > 0:
        chunk = handle.read(_CHUNK if left is None else min(_CHUNK, left))
        if not chunk:
            break
        digest.update(chunk)
        left = None if left is None else left - len(chunk)
    if left:
        raise EOFError("the file ends before its last member")
    return start if stop is None else stop


def save_npz(file: IO[bytes] | Path, arrays: Mapping[str, Any], *, compressed: bool = False) -> None:
    """What ``np.savez`` (``np.savez_compressed``) writes, for plain arrays, on every numpy castguard supports:
    members ``<name>.npy``; uncompressed ones written from the arrays' own memory (see the module docstring).

    Object arrays (which numpy would pickle) are refused: ``np.savez`` only takes an ``allow_pickle`` keyword from
    numpy 2.2; before that it stores the keyword as an array named ``allow_pickle``.
    """
    values = {name: np.asanyarray(value) for name, value in arrays.items()}
    for name, value in values.items():
        if value.dtype.hasobject:
            raise ValueError(f"save_npz: array {name!r} holds Python objects; only numeric arrays are saved")
    if compressed:
        np.savez_compressed(file, **values)
        return
    with zipfile.ZipFile(file, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, value in values.items():
            array = value if value.flags.c_contiguous or value.flags.f_contiguous else np.ascontiguousarray(value)
            header = io.BytesIO()
            fields = np.lib.format.header_data_from_array_1_0(array)
            try:
                np.lib.format.write_array_header_1_0(header, fields)
            except ValueError:  # a header over 64 KB (a huge structured dtype): format 2.0, as numpy does
                header = io.BytesIO()
                np.lib.format.write_array_header_2_0(header, fields)
            with archive.open(name + ".npy", "w", force_zip64=True) as member:
                member.write(header.getvalue())
                member.write(_bytes(array))


_STABLE_DATE = (1980, 1, 1, 0, 0, 0)
_PAD_FIELD = 0xCA57
"""The zip extra field (an unregistered id, which readers skip) that pads a stored member so that its array data
starts 64-byte aligned in the file: :func:`read_npz` maps such arrays instead of copying them."""
_ZIP64_LOCAL = 20
"""The zip64 extra field zipfile adds to a local header written with ``force_zip64`` (a test checks the alignment)."""


def save_npz_stable(handle: IO[bytes], arrays: Mapping[str, np.ndarray]) -> None:
    """The goldens' ``.npz``: the same arrays give the same bytes (members sorted, fixed zip timestamps); an array
    above :data:`~harness.core.files.COMPRESS_MAX_BYTES` stored, its data 64-byte aligned in the file (a padding
    extra field), the others deflated. ``handle`` must tell its position (a file or ``io.BytesIO``)."""
    with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for key in sorted(arrays):
            info = zipfile.ZipInfo(key + ".npy", date_time=_STABLE_DATE)
            stored = arrays[key].nbytes > COMPRESS_MAX_BYTES
            info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
            if stored:  # the .npy header is a multiple of 64 bytes: align where it starts
                before = handle.tell() + _LOCAL_HEADER + len(info.filename.encode()) + 4 + _ZIP64_LOCAL  # as written
                info.extra = struct.pack("<HH", _PAD_FIELD, -before % _ALIGN) + bytes(-before % _ALIGN)
            with archive.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.ascontiguousarray(arrays[key]), allow_pickle=False)
