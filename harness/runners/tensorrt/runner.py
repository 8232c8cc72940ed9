"""TensorRT runner: a strongly typed engine built from the ONNX model, with full TensorRT or TensorRT-RTX.

Building and running are split. The build (:func:`harness.runners.tensorrt.plan.build_plan`) needs no GPU and no CUDA
library: TensorRT-RTX builds on any machine, and the sweep's build check (:mod:`harness.runners.tensorrt.typed_build`)
runs it on every converted model. Running needs a GPU the engine supports and a CUDA library for device memory
(:mod:`harness.runners.tensorrt.device`: cuda-python or pycuda). :meth:`TrtRunner.activate` imports ``tensorrt``, else
``tensorrt_rtx_bindings`` (:mod:`harness.runners.tensorrt.library`), opens the device, builds, checks that the engine is
valid on this GPU (``Runtime.get_engine_validity``; a TensorRT-RTX plan runs on compute capability 8.0, 8.6, 8.9
and 12.x), and deserializes it; whatever is missing raises :class:`~harness.core.errors.RunnerUnavailable`, which the
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
from pathlib import Path

import numpy as np
import onnx

from harness.core.errors import RunnerError
from harness.data.feeds import Feed
from harness.runners.base import Runner, RunResult
from harness.runners.tensorrt.datatypes import from_engine_array, host_dtype, to_engine_array
from harness.runners.tensorrt.device import Device
from harness.runners.tensorrt.engine import LiveEngine, NetworkLayer, TrtOptions
from harness.runners.tensorrt.inspector import PrecisionReport, parse_inspector_json
from harness.runners.tensorrt.library import INSTALL_HINT
from harness.runners.tensorrt.precision_diff import Mismatch, check_against_onnx
from harness.runners.tensorrt.typed_build import ProfileShapes, Shape, profile_shapes

__all__ = ["INSTALL_HINT", "LiveEngine", "NetworkLayer", "ProfileShapes", "TrtOptions", "TrtRunner", "profile_shapes"]


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

    def __init__(
        self,
        model: onnx.ModelProto,
        *,
        model_dir: Path | None = None,
        options: TrtOptions = TrtOptions(),
        open_engine: Opener | None = None,
    ) -> None:
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
            from harness.runners.tensorrt.engine import open_engine  # imports TensorRT when called

            self._open = open_engine
        live = self._open(self)
        self.name, self.backend, self.plan, self.network_layers = (
            live.runner_name,
            live.backend,
            live.plan,
            live.network_layers,
        )
        self._live, self._buffers = live, _Buffers(live.device)

    def infer_impl(self, feed: Feed) -> dict[str, np.ndarray]:
        live, buffers = self._live, self._buffers
        assert live is not None and buffers is not None
        context, device = live.context, live.device
        staged = {n: to_engine_array(feed[n], live.io_dtypes[n], tensor=n) for n in live.inputs}
        for n, arr in staged.items():
            if not context.set_input_shape(n, arr.shape):
                raise RunnerError(
                    f"trt: input {n!r} shape {arr.shape} is outside the engine's optimization "
                    f"profile {live.engine.get_tensor_profile_shape(n, 0)}"
                )
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
            live.release()  # drops its own references (a runtime cache is written first)
            live.context = None
            live.engine = None
            if buffers is not None:
                buffers.free()
            live.device.close()
