"""What this machine's onnxruntime can do, asked in a child process (used by the converter and the runners).

Two questions need more than a call in castguard's own process: which ops the CPU provider has bf16 kernels
for (only the private ``get_all_opkernel_def`` lists kernels) and why the CUDA provider that
``get_available_providers()`` lists cannot be created (onnxruntime only logs the missing library to stderr and
falls back to the CPU: the child creates a one-node CUDA session and its stderr is read). The private call segfaults when onnxruntime-gpu is installed without the CUDA/TensorRT
libraries (it loads every provider library), so it never runs in castguard's own process: a child process asks,
answers through :mod:`harness.core.child`, and a child that dies (signal, non-zero exit, no answer, time-out) means
"unknown".

Each answer depends only on the interpreter and the onnxruntime installation, so it is remembered per
(interpreter, onnxruntime location) for the life of the process: a sweep asks once, not once per bf16 case. The
CUDA question can be asked ahead (:func:`start_cuda_check`, the ``ort-cuda`` runner's start-up work): its child
(1-2 s on a GPU machine, mostly onnxruntime-gpu's import and the CUDA context) then runs while the run plans.
"""

from __future__ import annotations

import re
from functools import lru_cache

from harness.core.background import PendingAnswer, answer_later
from harness.core.child import ChildAnswer, ChildFailed, run_child
from harness.core.providers import CPU, CUDA

PROBE_TIMEOUT_S = 120.0
_ANSI = re.compile(r"\x1b\[[0-9;]*m")

_KERNELS = f"""
from onnxruntime.capi import _pybind_state as state
from harness.core.child import write_answer
pairs = sorted({{("" if k.domain == "ai.onnx" else k.domain, k.op_name) for k in state.get_all_opkernel_def()
                if k.provider == {CPU!r}
                and any("tensor(bfloat16)" in t for t in k.type_constraints.values())}})
write_answer(pairs)
"""

_CUDA_SESSION = f"""
import onnxruntime as ort
from onnx import TensorProto, helper
from harness.core.child import write_answer
graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
session = ort.InferenceSession(model.SerializeToString(), providers=[{CUDA!r}])
write_answer({CUDA!r} in session.get_providers())
"""


def _ort_location() -> str | None:
    """The folder of the importable onnxruntime package, found without importing it; None when absent."""
    import importlib.util

    spec = importlib.util.find_spec("onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(next(iter(spec.submodule_search_locations)))


def _ask_child(code: str) -> ChildAnswer | None:
    """Run ``code`` in a fresh interpreter; its answer, or None when it gave none (it died: unknown)."""
    try:
        return run_child(code, None, what="onnxruntime capability probe", timeout_s=PROBE_TIMEOUT_S)
    except ChildFailed:
        return None


@lru_cache(maxsize=8)
def _cpu_bf16_ops_at(location: str) -> frozenset[tuple[str, str]] | None:
    del location  # the cache key: one answer per onnxruntime installation
    done = _ask_child(_KERNELS)
    if done is None or not isinstance(done.answer, list):
        return None
    return frozenset((str(domain), str(op)) for domain, op in done.answer)


def cpu_bf16_ops() -> frozenset[tuple[str, str]] | None:
    """(domain, op type) pairs with a CPU kernel accepting bfloat16; None when onnxruntime cannot tell (absent,
    or the child asking it died, as it does with onnxruntime-gpu and no CUDA libraries)."""
    location = _ort_location()
    return None if location is None else _cpu_bf16_ops_at(location)


@lru_cache(maxsize=8)
def _cuda_problem_at(location: str) -> PendingAnswer[str | None]:
    del location  # the cache key: one answer per onnxruntime installation
    return answer_later(_ask_cuda, name="cuda")


def _ask_cuda() -> str | None:
    done = _ask_child(_CUDA_SESSION)
    if done is None:
        return None  # the child died: unknown, the session the runner creates decides
    if done.answer is True:
        return None
    failed = [line for line in done.stderr.splitlines() if "Failed to load library" in line]
    if failed:
        return _ANSI.sub("", failed[-1].split("with error:", 1)[-1]).strip()
    said = [line for line in done.stderr.splitlines() if "CUDA" in line] or ["no message"]
    return f"onnxruntime could not create the CUDA provider ({_ANSI.sub('', said[0]).strip()[:300]})"


def cuda_provider_problem() -> str | None:
    """Why onnxruntime's CUDA provider cannot be created here, in onnxruntime's words (the library the loader
    misses, e.g. "libcublasLt.so.13: cannot open shared object file"); None when a CUDA session works, or when
    the child asking died (unknown: the runner's own session then shows whether CUDA is in use)."""
    location = _ort_location()
    if location is None:
        return "onnxruntime is not installed"
    return _cuda_problem_at(location).result()


def start_cuda_check() -> None:
    """Start :func:`cuda_provider_problem`'s child in the background, if not asked yet; its answer is kept."""
    location = _ort_location()
    if location is not None:
        _cuda_problem_at(location)
