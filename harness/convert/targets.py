"""Deployment targets for ``--target``: which ops have no fp16/bf16 kernel there, so they stay FP32.

``any`` keeps every op the ONNX schema allows in low precision (the converter's behaviour without a target).
``ort-cuda`` reads ``target_data/ort_cuda.json``, written by ``benchmarks/probe_ort_cuda.py`` on a GPU (it
records the date, the onnxruntime-gpu version and the device). ``tensorrt`` reads ``target_data/tensorrt.json``,
written by ``benchmarks/probe_tensorrt.py``: every op parsed and built as a strongly typed engine by TensorRT-RTX
on the CPU (ahead-of-time building needs no GPU); it records the date and the TensorRT version.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources

from harness.core.errors import ConversionError

_FILES = {"ort-cuda": "ort_cuda.json", "tensorrt": "tensorrt.json"}


@dataclass(frozen=True)
class TargetTable:
    target: str
    source: str
    """Where the table comes from, e.g. 'probed 2026-11-22, onnxruntime-gpu 1.31.1, NVIDIA H100'."""
    no_kernel: dict[str, dict[str, str]]
    """low type ('fp16'/'bf16') -> op type -> why it has no kernel."""
    cpu_only_at_bf16_opset: frozenset[str] = frozenset()
    """Ops with no kernel at the bf16 opset in fp32 either: kept FP32 they still run on the CPU EP."""

    def problem(self, op_type: str, low: str) -> str | None:
        why = self.no_kernel.get(low, {}).get(op_type)
        if why is None:
            return None
        text = f"target {self.target}: no {low} kernel for {op_type} ({self.source}: {why[:120]})"
        if low == "bf16" and op_type in self.cpu_only_at_bf16_opset:
            text += "; it has no fp32 kernel at the bf16 opset either, so the target runs it on its CPU EP"
        return text


@cache
def load_target(target: str) -> TargetTable | None:
    """The table for `target` (None for 'any'); a ConversionError when the package lacks it."""
    if target == "any":
        return None
    name = _FILES.get(target)
    if name is None:
        raise ConversionError(
            where="target",
            step="options",
            problem=f"unknown target {target!r}",
            fix=f"use one of: any, {', '.join(_FILES)}",
        )
    try:
        text = resources.files("harness.convert").joinpath("target_data", name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConversionError(
            where="target",
            step="options",
            problem=f"the kernel table for {target} ({name}) is missing from this install",
            fix="reinstall castguard, or write it with benchmarks/probe_ort_cuda.py (on a GPU) or "
            "benchmarks/probe_tensorrt.py",
        ) from None
    data = json.loads(text)
    source = data.get("source") or (
        f"probed {data['measured']}, onnxruntime-gpu {data['onnxruntime_gpu']}, {data.get('device', 'GPU')}"
    )
    return TargetTable(
        target=target,
        source=source,
        no_kernel={k: dict(v) for k, v in data["no_kernel"].items()},
        cpu_only_at_bf16_opset=frozenset(data.get("fp32_at_bf16_opset", {})),
    )
