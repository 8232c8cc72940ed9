"""What this machine's onnxruntime can do, asked in a child process (used by the converter and the runners).

Two questions need more than onnxruntime's public API answers: which ops the CPU provider has bf16 kernels for
(only the private ``get_all_opkernel_def`` lists kernels) and why a GPU provider that
``get_available_providers()`` lists cannot be created (onnxruntime logs the missing library to stderr and falls
back to the CPU). The private call segfaults when onnxruntime-gpu is installed without the CUDA/TensorRT
libraries (it loads every provider library), so it never runs in castguard's own process: a child process asks,
prints JSON, and a child that dies (signal, non-zero exit, garbage, time-out) means "unknown".

Each answer depends only on the interpreter and the onnxruntime installation, so it is remembered per
(interpreter, onnxruntime location) for the life of the process: a sweep asks once, not once per bf16 case.
"""
from __future__ import annotations

import json
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

PROBE_TIMEOUT_S = 120.0

_KERNELS = """
import json
from onnxruntime.capi import _pybind_state as state
pairs = sorted({("" if k.domain == "ai.onnx" else k.domain, k.op_name) for k in state.get_all_opkernel_def()
                if k.provider == "CPUExecutionProvider"
                and any("tensor(bfloat16)" in t for t in k.type_constraints.values())})
print(json.dumps(pairs))
"""

_LOAD_LIBRARY = """
import ctypes, json, sys
try:
    ctypes.CDLL(sys.argv[1])
    print(json.dumps(None))
except OSError as err:
    print(json.dumps(str(err)))
"""


def _ort_location() -> str | None:
    """The folder of the importable onnxruntime package, found without importing it; None when absent."""
    import importlib.util

    spec = importlib.util.find_spec("onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(next(iter(spec.submodule_search_locations)))


def _ask_child(code: str, *args: str) -> tuple[object, str]:
    """Run ``code`` in a fresh interpreter; (its JSON answer, "") or (None, why there is no answer)."""
    try:
        done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, f"the probe process could not finish ({err})"
    if done.returncode != 0:
        how = f"signal {-done.returncode}" if done.returncode < 0 else f"exit code {done.returncode}"
        return None, f"the probe process died ({how})"
    try:
        return json.loads(done.stdout.strip().splitlines()[-1]), ""
    except (ValueError, IndexError):
        return None, "the probe process printed no answer"


@lru_cache(maxsize=8)
def _cpu_bf16_ops_at(location: str) -> frozenset[tuple[str, str]] | None:
    del location  # the cache key: one answer per onnxruntime installation
    answer, _ = _ask_child(_KERNELS)
    if not isinstance(answer, list):
        return None
    return frozenset((str(domain), str(op)) for domain, op in answer)


def cpu_bf16_ops() -> frozenset[tuple[str, str]] | None:
    """(domain, op type) pairs with a CPU kernel accepting bfloat16; None when onnxruntime cannot tell (absent,
    or the child asking it died, as it does with onnxruntime-gpu and no CUDA libraries)."""
    location = _ort_location()
    return None if location is None else _cpu_bf16_ops_at(location)


@lru_cache(maxsize=8)
def _provider_load_error_at(location: str, library: str) -> str | None:
    path = Path(location) / "capi" / library
    if not path.is_file():
        return f"{path} is missing"
    answer, why = _ask_child(_LOAD_LIBRARY, str(path))
    if why:
        return f"{path} could not be checked: {why}"
    return None if answer is None else str(answer)


def provider_load_error(library: str = "libonnxruntime_providers_cuda.so") -> str | None:
    """Why onnxruntime's provider library ``library`` cannot load here (the loader's message, naming the missing
    shared library, e.g. "libcublasLt.so.13: cannot open shared object file"); None when it loads."""
    location = _ort_location()
    if location is None:
        return "onnxruntime is not installed"
    return _provider_load_error_at(location, library)
