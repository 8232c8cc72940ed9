"""onnxruntime execution provider names: the one place they are spelled (runners, converter, options, probes)."""

from __future__ import annotations

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
TENSORRT = "TensorrtExecutionProvider"
ROCM = "ROCMExecutionProvider"
DIRECTML = "DmlExecutionProvider"
MIGRAPHX = "MIGraphXExecutionProvider"
