"""How much memory this machine can give castguard now, and the one check that a planned allocation fits it.

:func:`available_bytes` reads what the operating system says is available without swapping (Linux
``MemAvailable`` in ``/proc/meminfo``; elsewhere ``os.sysconf`` where it knows; Windows through
``GlobalMemoryStatusEx``). ``CASTGUARD_MEMORY_LIMIT_MB`` caps it (CI containers whose cgroup limit the kernel's
figure does not show; tests). :func:`check_fits` refuses a plan whose bytes, times the copies castguard keeps of
them, exceed it: a usage error naming the size, before anything is allocated (issue 33.12). :func:`give_back_freed`
returns what the C allocator keeps of freed memory to the system.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

from harness.core.errors import UserError

ENV_LIMIT = "CASTGUARD_MEMORY_LIMIT_MB"


def available_bytes() -> int | None:
    """Bytes available now (capped by ``CASTGUARD_MEMORY_LIMIT_MB``); None where the system does not say."""
    found = _system_available()
    limit = os.environ.get(ENV_LIMIT, "").strip()
    if limit:
        try:
            capped = int(float(limit) * 2**20)
        except ValueError:
            raise UserError(
                where=f"environment variable {ENV_LIMIT}", problem=f"{limit!r} is not a number", fix="e.g. 4096"
            ) from None
        found = capped if found is None else min(found, capped)
    return found


def _system_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    if sys.platform == "win32":
        return _windows_available()
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _windows_available() -> int | None:  # pragma: no cover - Windows only
    import ctypes  # noqa: PLC0415

    class Status(ctypes.Structure):
        _fields_ = [("length", ctypes.c_ulong), ("load", ctypes.c_ulong)] + [
            (name, ctypes.c_ulonglong)
            for name in ("total", "avail", "page_total", "page_avail", "virt_total", "virt_avail", "ext")
        ]

    status = Status()
    status.length = ctypes.sizeof(Status)
    ok = ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status))  # type: ignore[attr-defined]
    return int(status.avail) if ok else None


def human(n: float) -> str:
    """``4.0 GB``, ``512 MB``, ``12 kB`` (decimal units, as the messages state sizes)."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def check_fits(need: int, *, copies: int, what: str, where: str, fix: str) -> None:
    """UserError when ``need`` bytes, kept ``copies`` times, exceed the memory available now."""
    available = available_bytes()
    if available is None or need * copies <= available:
        return
    raise UserError(
        where=where,
        problem=f"{what} need {human(need)}; castguard keeps about {copies} copies of them ({human(need * copies)}), "
        f"and this machine has {human(available)} of memory available",
        fix=fix,
    )


def give_back_freed() -> None:
    """Hand the memory this process has freed but its C allocator keeps back to the system (glibc's
    ``malloc_trim(0)``): an onnxruntime session's arena, freed with the session, stays in the process otherwise and
    counts on top of whatever is allocated next (a decoder's fix evaluations: 691 -> 619-635 MB peak). Where the C
    library has no ``malloc_trim`` (not glibc), nothing is done: only the peak differs."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Any:
    import ctypes  # noqa: PLC0415
    import ctypes.util  # noqa: PLC0415

    name = ctypes.util.find_library("c") if sys.platform.startswith("linux") else None
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None
