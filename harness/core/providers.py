"""onnxruntime execution provider names: the one place they are spelled (runners, converter, options, probes)."""

from __future__ import annotations

from collections.abc import Sequence

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
TENSORRT = "TensorrtExecutionProvider"
ROCM = "ROCMExecutionProvider"
DIRECTML = "DmlExecutionProvider"
MIGRAPHX = "MIGraphXExecutionProvider"


def on_host(providers: Sequence[str]) -> bool:
    """Whether work on these providers runs in the host's memory: the CPU alone (none named: the CPU)."""
    return all(p == CPU for p in providers)
