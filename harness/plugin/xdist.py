"""Pin each pytest-xdist worker to its own GPU: ``CUDA_VISIBLE_DEVICES`` from the worker id.

Worker ``gwN`` gets the N-th visible GPU (round robin when there are more workers than GPUs). The visible
GPUs are those of ``CUDA_VISIBLE_DEVICES`` when it is set (indices or UUIDs, as CUDA accepts them), else
the ones ``nvidia-smi`` lists. Nothing is pinned outside xdist, or with fewer than two GPUs. The plugin
sets the variable in the worker's ``pytest_configure``, before any runner loads CUDA.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping

VARIABLE = "CUDA_VISIBLE_DEVICES"
_WORKER = re.compile(r"gw(\d+)\Z")


def visible_gpus(env: Mapping[str, str], *, detected: int) -> tuple[str, ...]:
    """The GPU ids this process may use: ``CUDA_VISIBLE_DEVICES`` when set, else ``0..detected-1``.

    As in CUDA, the list stops at the first invalid entry (``-1`` hides every GPU); ``""`` means none.
    """
    if VARIABLE not in env:
        return tuple(str(i) for i in range(detected))
    ids = []
    for item in (part.strip() for part in env[VARIABLE].split(",")):
        if not item or item.startswith("-"):
            break
        ids.append(item)
    return tuple(ids)


def worker_gpu(worker_id: str | None, env: Mapping[str, str], *, detected: int) -> str | None:
    """The ``CUDA_VISIBLE_DEVICES`` value for an xdist worker (``gw0``...), or None to leave it alone."""
    match = _WORKER.match(worker_id or "")
    gpus = visible_gpus(env, detected=detected)
    if match is None or len(gpus) < 2:
        return None
    return gpus[int(match[1]) % len(gpus)]


def count_gpus() -> int:
    """GPUs that ``nvidia-smi -L`` lists; 0 when nvidia-smi is absent or fails (no NVIDIA driver)."""
    from harness.report.provenance import gpu_names

    return len(gpu_names())


def pin_worker(worker_id: str | None, env: Mapping[str, str]) -> str | None:
    """:func:`worker_gpu` for this machine (asks nvidia-smi only when ``CUDA_VISIBLE_DEVICES`` is unset)."""
    if _WORKER.match(worker_id or "") is None:
        return None
    return worker_gpu(worker_id, env, detected=0 if VARIABLE in env else count_gpus())


def apply_pin(worker_id: str | None, environ: MutableMapping[str, str]) -> str | None:
    """Set ``CUDA_VISIBLE_DEVICES`` in ``environ`` for this worker when :func:`pin_worker` picks a GPU."""
    gpu = pin_worker(worker_id, environ)
    if gpu is not None:
        environ[VARIABLE] = gpu
    return gpu
