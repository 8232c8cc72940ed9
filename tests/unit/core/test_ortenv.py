"""onnxruntime is asked about itself only in child processes, and only through public names in castguard's own.

onnxruntime-gpu without the CUDA libraries segfaults on ``_pybind_state.get_all_opkernel_def()`` (it loads every
provider library); the CI leg ``.ci/legs/20-onnxruntime-gpu.sh`` runs castguard with that package. These tests
pin the mechanism on any onnxruntime.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

import harness.core.ortenv as ortenv
from harness.core.errors import RunnerUnavailable
from harness.core.ortenv import _ask_child, cpu_bf16_ops, cuda_provider_problem
from harness.runners.ort_cuda import require_cuda_session

ROOT = Path(__file__).resolve().parents[3]


def test_a_child_that_dies_is_unknown_not_a_crash() -> None:
    """The probe's child dies (harness.core.child reports it as ChildFailed, kind "signal"): the answer is unknown."""
    assert _ask_child("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)") is None


def test_a_child_that_prints_nothing_is_unknown() -> None:
    assert _ask_child("pass") is None
    answered = _ask_child("from harness.core.child import write_answer; write_answer([['', 'Cast']])")
    assert answered is not None and answered.answer == [["", "Cast"]]


def test_cpu_bf16_kernels_are_read_in_a_child() -> None:
    ops = cpu_bf16_ops()
    assert ops is not None, "the CPU onnxruntime package answers the kernel probe"
    assert ("", "Cast") in ops  # every build has a bf16 Cast
    assert ("", "Conv") not in ops  # and no bf16 Conv on the CPU (why the converter's note exists)


@pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None, reason="onnxruntime is not installed")
def test_the_cuda_problem_is_onnxruntime_s_own_words_or_none() -> None:
    """CPU onnxruntime: no CUDA provider at all, so a CUDA session falls back and the child says why; with
    onnxruntime-gpu and no CUDA libraries it names the missing library (the CI leg checks that one)."""
    import onnxruntime as ort

    problem = cuda_provider_problem()
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        assert problem is not None and "\x1b" not in problem


def test_the_cuda_check_started_ahead_is_asked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``start_cuda_check`` (the ort-cuda runner's start-up work) starts the child; the runner's later question
    gets that answer: one child per onnxruntime installation."""
    asked: list[str] = []

    def ask(code: str) -> None:
        asked.append(code)  # the child died: unknown

    monkeypatch.setattr(ortenv, "_ask_child", ask)
    ortenv._cuda_problem_at.cache_clear()
    try:
        ortenv.start_cuda_check()
        assert cuda_provider_problem() is None and cuda_provider_problem() is None
        assert len(asked) == 1 and "CUDAExecutionProvider" in asked[0]
    finally:
        ortenv._cuda_problem_at.cache_clear()


class _CpuOnlySession:
    def get_providers(self) -> list[str]:
        return ["CPUExecutionProvider"]


def test_a_session_that_fell_back_to_the_cpu_is_refused() -> None:
    with pytest.raises(RunnerUnavailable, match="lists CUDAExecutionProvider but cannot use it on this machine"):
        require_cuda_session(_CpuOnlySession(), "ort-cuda")


def test_no_private_onnxruntime_name_in_castguard_processes() -> None:
    """Only harness/core/ortenv.py's child-process code may name onnxruntime's private binding module."""
    private = re.compile(r"_pybind_state|onnxruntime_pybind11_state|get_all_opkernel_def|onnxruntime\.capi")
    offenders = []
    for folder in ("harness", "benchmarks", "examples"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name == "ortenv.py":
                continue
            offenders += [
                f"{path.relative_to(ROOT)}:{n}"
                for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                if private.search(line)
            ]
    assert offenders == []


def _ort_exception(name: str, text: str) -> Exception:
    cls = type(name, (Exception,), {"__module__": "onnxruntime.capi.onnxruntime_pybind11_state"})
    return cls(text)


def test_a_node_no_provider_placed_is_a_missing_kernel() -> None:
    """What ORT CUDA says for a bf16 MaxPool (measured on the H100 with onnxruntime-gpu 1.31.1): no kernel, so the
    case is skipped with the reason, not reported as an error."""
    from harness.runners.ort import is_not_implemented, is_ort_error

    placed = _ort_exception(
        "Fail",
        "[ONNXRuntimeError] : 1 : FAIL : Exception during initialization: "
        "transformer_memcpy.cc:253 ... Provider type for MaxPool node with name 'Pooling66' "
        "is not set.",
    )
    assert is_ort_error(placed) and is_not_implemented(placed)
    assert is_not_implemented(_ort_exception("NotImplemented", "Could not find an implementation for Conv(22)"))
    assert not is_not_implemented(_ort_exception("InvalidArgument", "Invalid rank for input: x"))
    assert not is_ort_error(ValueError("not onnxruntime's"))
