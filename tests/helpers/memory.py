"""How many bytes the C allocator has handed out and not had back (glibc's ``mallinfo2``): protobuf's messages
and onnxruntime's buffers live there, out of Python's sight, so a test of what a proto holds reads it here."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys

import pytest


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
    ] + [("keepcost", ctypes.c_size_t)]


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    if not hasattr(libc, "mallinfo2"):
        return None
    libc.mallinfo2.restype = _MallInfo2
    return libc


def allocated() -> int:
    """Bytes in use from the C heap and its mmapped chunks, after a garbage collection."""
    libc = _libc()
    assert libc is not None, "mark the test with needs_mallinfo2"
    gc.collect()
    info = libc.mallinfo2()
    return int(info.uordblks + info.hblkhd)


needs_mallinfo2 = pytest.mark.skipif(_libc() is None, reason="needs glibc's mallinfo2 (Linux, glibc 2.33+)")
