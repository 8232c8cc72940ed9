"""TensorRT runner: a strongly typed engine built from the ONNX model, with full TensorRT or TensorRT-RTX.

Building and running are split. The build (:func:`harness.runners.trt_build.build_plan`) needs no GPU and no CUDA
library: TensorRT-RTX builds on any machine, and the sweep's build check (:mod:`harness.runners.trt_buildcheck`)
runs it on every converted model. Running needs a GPU the engine supports and a CUDA library for device memory
(:mod:`harness.runners.trt_device`: cuda-python or pycuda). :meth:`TrtRunner.activate` imports ``tensorrt``, else
``tensorrt_rtx_bindings`` (:mod:`harness.runners.trt_module`), opens the device, builds, checks that the engine is
valid on this GPU (``Runtime.get_engine_validity``; a TensorRT-RTX plan runs on compute capability 8.0, 8.6, 8.9
and 12.x), and deserializes it; whatever is missing raises :class:`~harness.errors.RunnerUnavailable`, which the
suite turns into a skip with the reason (an unsupported GPU is named, with its compute capability and the list).

Strong typing: each tensor keeps the type the ONNX model gives it (Cast nodes, initializer types); no precision
builder flags are ever set. TF32 is cleared unless ``TrtOptions(tf32=True)``, so fp32 layers compute in fp32. The
engine is built with ``ProfilingVerbosity.DETAILED``; after the first inference ``inspector_json`` and
``precision_report`` hold the engine's per-layer precisions and :meth:`TrtRunner.check_precisions` compares them
with the ONNX types. TensorRT-RTX compiles kernels at first run; ``TrtOptions(runtime_cache=PATH)`` keeps them.

The run path goes through :class:`LiveEngine` (engine, context, device), which :func:`open_engine` makes; unit
tests inject a fake one (``TrtRunner(..., open_engine=...)``). All GPU work stays on the activating thread.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from harness.errors import RunnerError
from harness.data.feeds import Feed
from harness.runners.base import Runner, RunResult
from harness.runners.trt_buildcheck import ProfileShapes, Shape, profile_shapes
from harness.runners.trt_check import Mismatch, check_against_onnx
from harness.runners.trt_device import Device
from harness.runners.trt_inspect import PrecisionReport, parse_inspector_json
from harness.runners.trt_module import INSTALL_HINT
from harness.runners.trt_types import from_engine_array, host_dtype, to_engine_array

__all__ = ["INSTALL_HINT", "LiveEngine", "NetworkLayer", "ProfileShapes", "TrtOptions", "TrtRunner", "profile_shapes"]


@dataclass(frozen=True)
class TrtOptions:
    """How the engine is built. ``input_shapes`` fixes dynamic inputs when ``activate()`` is called directly;
    :meth:`TrtRunner.run` derives the optimization profile from its feeds instead."""

    workspace_bytes: int = 1 << 30
    optimization_level: int = 3
    tf32: bool = False
    plugins: tuple[Path, ...] = ()
    input_shapes: tuple[tuple[str, Shape], ...] = ()
    runtime_cache: Path | None = None    # TensorRT-RTX: kernels compiled at first run, kept in this file

    def __post_init__(self) -> None:
        if not 0 <= self.optimization_level <= 5:
            raise ValueError(f"optimization_level must be 0..5, got {self.optimization_level}")
        if self.workspace_bytes <= 0:
            raise ValueError(f"workspace_bytes must be positive, got {self.workspace_bytes}")


@dataclass(frozen=True)
class NetworkLayer:
    """A layer of the parsed network before building: the types strong typing gave its outputs."""

    name: str
    layer_type: str      # TensorRT LayerType name, e.g. "MATRIX_MULTIPLY"
    output_types: tuple[str, ...]  # TensorRT DataType names, e.g. ("HALF",)



@dataclass
class LiveEngine:
    """What :meth:`TrtRunner.activate` opens and the run path uses: a deserialized engine and its execution
    context (TensorRT's Python objects, or fakes with the same methods), the device, and how to inspect and free
    them. :func:`harness.runners.trt_engine.open_engine` makes the real one."""

    engine: Any                      # ICudaEngine: get_tensor_profile_shape
    context: Any                     # IExecutionContext: set_input_shape, infer_shapes, get_tensor_shape,
                                     # set_tensor_address, execute_async_v3
    device: Device
    io_dtypes: dict[str, str]        # every I/O tensor -> TensorRT DataType name
    inputs: tuple[str, ...]
    runner_name: str                 # "trt-10.13" / "trt-rtx-1.7"
    backend: str                     # "TensorRT 10.13.0.35" / "TensorRT-RTX 1.7.1.116"
    plan: bytes = b""
    network_layers: tuple[NetworkLayer, ...] = ()
    inspect: Callable[[], str] = lambda: ""          # the engine inspector's JSON (after an inference)
    release: Callable[[], None] = lambda: None       # frees context, engine and runtime, in that order


class _Buffers:
    """Host + device buffers per I/O tensor, reused while the shape stays the same."""

    def __init__(self, device: Device) -> None:
        self._device = device
        self._by_name: dict[str, tuple[np.ndarray, int]] = {}

    def get(self, name: str, shape: Shape, dtype: np.dtype) -> tuple[np.ndarray, int]:
        held = self._by_name.get(name)
        if held is None or held[0].shape != shape or held[0].dtype != dtype:
            if held is not None:
                self._device.free(held[1])
            host = self._device.host(shape, dtype)
            self._by_name[name] = (host, self._device.alloc(max(host.nbytes, 1)))
        return self._by_name[name]

    def free(self) -> None:
        for _, address in self._by_name.values():
            self._device.free(address)
        self._by_name.clear()


Opener = Callable[["TrtRunner"], LiveEngine]


class TrtRunner(Runner):
    """``trt``: a TensorRT strongly typed engine. ``name`` becomes ``trt-<major>.<minor>`` (full TensorRT) or
    ``trt-rtx-<major>.<minor>`` (TensorRT-RTX) once activated; ``backend`` says which built it."""

    def __init__(self, model: onnx.ModelProto, *, model_dir: Path | None = None,
                 options: TrtOptions = TrtOptions(), open_engine: Opener | None = None) -> None:
        super().__init__(model, name="trt", rounds_low_precision=True, model_dir=model_dir)
        self.options = options
        self.backend = ""
        self.plan: bytes | None = None
        self.network_layers: tuple[NetworkLayer, ...] = ()
        self.inspector_json: str | None = None
        self.precision_report: PrecisionReport | None = None
        self.feed_shapes: list[dict[str, Shape]] = [dict(options.input_shapes)] if options.input_shapes else []
        self._open = open_engine
        self._live: LiveEngine | None = None
        self._buffers: _Buffers | None = None

    def run(self, feeds: Sequence[Feed]) -> RunResult:
        if not self.is_active and not self.options.input_shapes:
            self.feed_shapes = [{name: tuple(arr.shape) for name, arr in feed.items()} for feed in feeds]
        return super().run(feeds)

    def check_precisions(self) -> list[Mismatch]:
        """Where the engine's realized precisions differ from the ONNX types (empty list: none)."""
        if self.precision_report is None:
            raise RunnerError("trt: no engine inspector report yet; run at least one inference first")
        return check_against_onnx(self.precision_report, self.model)

    def activate_impl(self) -> None:
        if self._open is None:
            from harness.runners.trt_engine import open_engine

            self._open = open_engine
        live = self._open(self)
        self.name, self.backend, self.plan, self.network_layers = (live.runner_name, live.backend, live.plan,
                                                                   live.network_layers)
        self._live, self._buffers = live, _Buffers(live.device)

    def infer_impl(self, feed: Feed) -> dict[str, np.ndarray]:
        live, buffers = self._live, self._buffers
        assert live is not None and buffers is not None
        context, device = live.context, live.device
        staged = {n: to_engine_array(feed[n], live.io_dtypes[n], tensor=n) for n in live.inputs}
        for n, arr in staged.items():
            if not context.set_input_shape(n, arr.shape):
                raise RunnerError(f"trt: input {n!r} shape {arr.shape} is outside the engine's optimization "
                                  f"profile {live.engine.get_tensor_profile_shape(n, 0)}")
        unresolved = context.infer_shapes()
        if unresolved:
            raise RunnerError(f"trt: cannot infer the shapes of {', '.join(unresolved)}")
        held = {}
        for n, dtype in live.io_dtypes.items():
            held[n] = buffers.get(n, tuple(context.get_tensor_shape(n)), host_dtype(dtype, tensor=n))
            context.set_tensor_address(n, held[n][1])
        for n, arr in staged.items():
            np.copyto(held[n][0], arr)
            device.upload(held[n][1], held[n][0])
        if not context.execute_async_v3(device.stream):
            raise RunnerError("trt: execute_async_v3 failed (see the TensorRT log above)")
        outputs = [o.name for o in self.model.graph.output]
        for n in outputs:
            device.download(held[n][0], held[n][1])
        device.synchronize()
        if self.inspector_json is None:
            self.inspector_json = live.inspect()
            self.precision_report = parse_inspector_json(self.inspector_json)
        return {n: from_engine_array(held[n][0].copy(), live.io_dtypes[n], tensor=n) for n in outputs}

    def deactivate_impl(self) -> None:
        """Free while the CUDA context is still current: context, engine and runtime, then buffers, then the stream."""
        live, buffers = self._live, self._buffers
        self._live = self._buffers = None
        if live is not None:
            live.release()                   # drops its own references (a runtime cache is written first)
            live.context = None
            live.engine = None
            if buffers is not None:
                buffers.free()
            live.device.close()
