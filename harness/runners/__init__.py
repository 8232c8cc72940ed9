"""Runner registry: ``make_runner(name, model)`` builds one of :data:`RUNNER_NAMES`.

Each backend is imported only when asked for, so a missing optional library (tensorrt) costs nothing
unless its runner is used; ``trt`` raises :class:`~harness.errors.RunnerUnavailable` when TensorRT is absent.
"""
from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path

import onnx

from harness.errors import RunnerUnavailable, UserError
from harness.runners.base import Runner, RunResult

RUNNER_NAMES = ("ort", "ort-cuda", "emulate", "reference", "trt")

__all__ = ["RUNNER_NAMES", "RunResult", "Runner", "make_runner"]


def make_runner(name: str, model: onnx.ModelProto, *, model_dir: Path | None = None,
                providers: Sequence[str] = ()) -> Runner:
    """A fresh, inactive runner. ``providers`` applies to ``ort`` only (default: CPU)."""
    if name not in RUNNER_NAMES:
        raise UserError(where="--runner", problem=f"unknown runner {name!r}",
                        fix=f"use one of: {', '.join(RUNNER_NAMES)}")
    if providers and name != "ort":
        raise ValueError(f"providers apply to the ort runner only, not {name!r}")
    if name == "ort":
        from harness.runners.ort import CPU, OrtRunner

        return OrtRunner(model, model_dir=model_dir, providers=tuple(providers) or (CPU,))
    if name == "ort-cuda":
        from harness.runners.ort_cuda import OrtCudaRunner

        return OrtCudaRunner(model, model_dir=model_dir)
    if name == "emulate":
        from harness.runners.emulate import EmulateRunner

        return EmulateRunner(model, model_dir=model_dir)
    if name == "reference":
        from harness.runners.reference import ReferenceRunner

        return ReferenceRunner(model, model_dir=model_dir)
    return _make_trt(model, model_dir=model_dir)


def _make_trt(model: onnx.ModelProto, *, model_dir: Path | None) -> Runner:
    try:
        trt = importlib.import_module("harness.runners.tensorrt.runner")
    except ModuleNotFoundError as err:
        if err.name != "harness.runners.tensorrt.runner":
            raise
        raise RunnerUnavailable("trt: harness.runners.tensorrt.runner is not part of this install") from err
    runner: Runner = trt.TrtRunner(model, model_dir=model_dir)
    return runner
