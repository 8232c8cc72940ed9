"""TensorRT runner: a strongly typed engine built from the ONNX model, run through pycuda.

Thin on purpose: every decision that does not need TensorRT (flags per version, dtypes and bf16 bits,
optimization-profile shapes, inspector parsing and the precision check) lives in plain, tested code
(``trt_types``, ``trt_inspect``, ``trt_check`` and :func:`profile_shapes` below). ``tensorrt`` and
``pycuda`` are imported in :meth:`TrtRunner.activate`; when either is missing the runner raises
:class:`~harness.errors.RunnerUnavailable`, which the suite turns into a skip with that reason.

Strong typing: each tensor keeps the type the ONNX model gives it (Cast nodes, initializer types); no
precision builder flags are ever set (10.x rejects them on strongly typed networks, 11.x removed them).
TF32 is cleared unless ``TrtOptions(tf32=True)``, so fp32 layers compute in fp32. The engine is built with
``ProfilingVerbosity.DETAILED``; after the first inference ``inspector_json`` and ``precision_report`` hold
the engine's per-layer precisions and :meth:`TrtRunner.check_precisions` compares them with the ONNX types.

pycuda uses the device's *primary* context (``pycuda.autoprimaryctx``), the one TensorRT's runtime API,
ORT-GPU and torch share; all GPU work must stay on the thread that activated the runner.
"""
from __future__ import annotations

import importlib
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import onnx

from harness.errors import RunnerError, RunnerUnavailable, UserError
from harness.data.feeds import Feed, InputSpec
from harness.runners.base import Runner, RunResult
from harness.runners.ort import session_source
from harness.runners.trt_check import Mismatch, check_against_onnx
from harness.runners.trt_inspect import PrecisionReport, parse_inspector_json
from harness.runners.trt_types import (
    builder_flags_to_clear,
    from_engine_array,
    host_dtype,
    network_creation_flags,
    to_engine_array,
    trt_version,
)

INSTALL_HINT = "pip install castguard[trt] on a machine with an NVIDIA GPU"
Shape = tuple[int, ...]
ProfileShapes = dict[str, tuple[Shape, Shape, Shape]]  # input -> (min, opt, max)


@dataclass(frozen=True)
class TrtOptions:
    """How the engine is built. ``input_shapes`` fixes dynamic inputs when ``activate()`` is called directly;
    :meth:`TrtRunner.run` derives the optimization profile from its feeds instead."""

    workspace_bytes: int = 1 << 30
    optimization_level: int = 3
    tf32: bool = False
    plugins: tuple[Path, ...] = ()
    input_shapes: tuple[tuple[str, Shape], ...] = ()

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


def profile_shapes(specs: Sequence[InputSpec], shapes: Sequence[Mapping[str, Shape]]) -> ProfileShapes:
    """One optimization profile covering ``shapes`` for every input with a dynamic dim (opt = the first)."""
    dynamic = [s for s in specs if s.dims is None or any(d is None for d in s.dims)]
    if dynamic and not shapes:
        names = ", ".join(s.name for s in dynamic)
        raise RunnerError(f"trt: inputs {names} have dynamic dims; pass TrtOptions(input_shapes=...) "
                          "or use runner.run(feeds), which sizes the optimization profile from the feeds")
    profile: ProfileShapes = {}
    for spec in dynamic:
        seen = []
        for i, feed_shapes in enumerate(shapes):
            if spec.name not in feed_shapes:
                raise RunnerError(f"trt: no shape for dynamic input {spec.name!r} in feed {i}")
            seen.append(tuple(int(d) for d in feed_shapes[spec.name]))
        if len({len(s) for s in seen}) != 1 or (spec.dims is not None and len(seen[0]) != len(spec.dims)):
            raise RunnerError(f"trt: input {spec.name!r} is fed with shapes of different ranks {sorted(set(seen))}")
        stacked = np.array(seen)
        profile[spec.name] = (tuple(int(d) for d in stacked.min(axis=0)), seen[0],
                              tuple(int(d) for d in stacked.max(axis=0)))
    return profile


def _import(module: str, *, what: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name is not None and (module == err.name or module.startswith(err.name + ".")):
            raise RunnerUnavailable(f"{what} is not installed ({INSTALL_HINT})") from err
        raise RunnerUnavailable(f"{what} is installed but cannot be imported: {err}") from err
    except (ImportError, OSError) as err:  # a missing libnvinfer/libcuda
        raise RunnerUnavailable(f"{what} is installed but cannot be loaded: {err}") from err


def _import_cuda() -> ModuleType:
    cuda = _import("pycuda.driver", what="pycuda")
    try:
        importlib.import_module("pycuda.autoprimaryctx")
    except cuda.Error as err:
        raise RunnerUnavailable(f"no usable CUDA device for TensorRT: {err}") from err
    return cuda


def _members(enum: Any) -> dict[str, int]:
    return {name: int(value) for name, value in enum.__members__.items()}


class _Buffers:
    """Pinned host + device buffers per I/O tensor, reused while the shape stays the same."""

    def __init__(self, cuda: ModuleType) -> None:
        self._cuda = cuda
        self._by_name: dict[str, tuple[np.ndarray, Any]] = {}

    def get(self, name: str, shape: Shape, dtype: np.dtype) -> tuple[np.ndarray, Any]:
        held = self._by_name.get(name)
        if held is None or held[0].shape != shape or held[0].dtype != dtype:
            if held is not None:
                held[1].free()
            host = self._cuda.pagelocked_empty(shape, dtype)
            self._by_name[name] = (host, self._cuda.mem_alloc(max(host.nbytes, 1)))
        return self._by_name[name]

    def free(self) -> None:
        for _, device in self._by_name.values():
            device.free()
        self._by_name.clear()


class TrtRunner(Runner):
    """``trt``: a TensorRT strongly typed engine. ``name`` becomes ``trt-<major>.<minor>`` once activated."""

    def __init__(self, model: onnx.ModelProto, *, model_dir: Path | None = None,
                 options: TrtOptions = TrtOptions()) -> None:
        super().__init__(model, name="trt", rounds_low_precision=True, model_dir=model_dir)
        self.options = options
        self.plan: bytes | None = None
        self.network_layers: tuple[NetworkLayer, ...] = ()
        self.inspector_json: str | None = None
        self.precision_report: PrecisionReport | None = None
        self._feed_shapes: list[dict[str, Shape]] = [dict(options.input_shapes)] if options.input_shapes else []
        self._live: dict[str, Any] = {}

    def run(self, feeds: Sequence[Feed]) -> RunResult:
        if not self.is_active and not self.options.input_shapes:
            self._feed_shapes = [{name: tuple(arr.shape) for name, arr in feed.items()} for feed in feeds]
        return super().run(feeds)

    def check_precisions(self) -> list[Mismatch]:
        """Where the engine's realized precisions differ from the ONNX types (empty list: none)."""
        if self.precision_report is None:
            raise RunnerError("trt: no engine inspector report yet; run at least one inference first")
        return check_against_onnx(self.precision_report, self.model)

    # ---------------------------------------------------------------- lifecycle

    def activate_impl(self) -> None:
        trt = _import("tensorrt", what="tensorrt")
        cuda = _import_cuda()
        major, minor = trt_version(trt.__version__)
        self.name = f"trt-{major}.{minor}"
        logger = trt.Logger(trt.Logger.WARNING)
        registry = trt.get_plugin_registry()
        for plugin in self.options.plugins:
            if not Path(plugin).is_file():
                raise UserError(where=plugin, problem="TensorRT plugin library not found",
                                fix="pass the path of an existing plugin .so, or drop it from plugins")
            registry.load_library(str(plugin))
        self.plan = self._build(trt, logger)
        runtime = trt.Runtime(logger)
        engine = runtime.deserialize_cuda_engine(self.plan)
        if engine is None:
            raise RunnerError("trt: the built plan could not be deserialized (see the TensorRT log above)")
        self._live = {"trt": trt, "cuda": cuda, "runtime": runtime, "engine": engine,
                      "context": engine.create_execution_context(), "stream": cuda.Stream(),
                      "buffers": _Buffers(cuda)}

    def _build(self, trt: ModuleType, logger: Any) -> bytes:
        builder = trt.Builder(logger)
        network = builder.create_network(network_creation_flags(trt.__version__,
                                                                _members(trt.NetworkDefinitionCreationFlag)))
        parser = trt.OnnxParser(network, logger)
        with tempfile.TemporaryDirectory(prefix="castguard-trt-") as tmp:
            source = session_source(self.model, model_dir=self.model_dir, scratch=Path(tmp), options=None)
            if isinstance(source, str):    # written as an external-data model (pending casts, > 2 GB)
                parsed = parser.parse_from_file(source)
            else:                          # external data, if any, is read from model_dir
                parsed = parser.parse(source, str(self.model_dir / "model.onnx")) if self.model_dir else \
                    parser.parse(source)
        if not parsed:
            errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
            raise RunnerError(f"trt: the ONNX parser rejected the model: {errors}")
        self.network_layers = tuple(
            NetworkLayer(layer.name, layer.type.name,
                         tuple(layer.get_output(j).dtype.name for j in range(layer.num_outputs)))
            for layer in (network.get_layer(i) for i in range(network.num_layers)))
        config = builder.create_builder_config()
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, self.options.workspace_bytes)
        config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
        config.builder_optimization_level = self.options.optimization_level
        for flag in builder_flags_to_clear(_members(trt.BuilderFlag), tf32=self.options.tf32):
            config.clear_flag(getattr(trt.BuilderFlag, flag))
        profile = profile_shapes(self._inputs, self._feed_shapes)
        if profile:
            opt_profile = builder.create_optimization_profile()
            for name, (low, opt, high) in profile.items():
                opt_profile.set_shape(name, low, opt, high)
            config.add_optimization_profile(opt_profile)
        plan = builder.build_serialized_network(network, config)
        if plan is None:
            raise RunnerError("trt: the engine build failed (see the TensorRT log above)")
        return bytes(plan)

    def infer_impl(self, feed: Feed) -> dict[str, np.ndarray]:
        trt, cuda, engine, context, stream, buffers = (self._live[k] for k in (
            "trt", "cuda", "engine", "context", "stream", "buffers"))
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        dtypes = {n: engine.get_tensor_dtype(n).name for n in names}
        staged = {n: to_engine_array(feed[n], dtypes[n], tensor=n) for n in inputs}
        for n, arr in staged.items():
            if not context.set_input_shape(n, arr.shape):
                raise RunnerError(f"trt: input {n!r} shape {arr.shape} is outside the engine's optimization "
                                  f"profile {engine.get_tensor_profile_shape(n, 0)}")
        unresolved = context.infer_shapes()
        if unresolved:
            raise RunnerError(f"trt: cannot infer the shapes of {', '.join(unresolved)}")
        held = {}
        for n in names:
            held[n] = buffers.get(n, tuple(context.get_tensor_shape(n)), host_dtype(dtypes[n], tensor=n))
            context.set_tensor_address(n, int(held[n][1]))
        for n, arr in staged.items():
            np.copyto(held[n][0], arr)
            cuda.memcpy_htod_async(held[n][1], held[n][0], stream)
        if not context.execute_async_v3(stream.handle):
            raise RunnerError("trt: execute_async_v3 failed (see the TensorRT log above)")
        outputs = [o.name for o in self.model.graph.output]
        for n in outputs:
            cuda.memcpy_dtoh_async(held[n][0], held[n][1], stream)
        stream.synchronize()
        if self.inspector_json is None:
            self._inspect(trt, engine, context)
        return {n: from_engine_array(held[n][0].copy(), dtypes[n], tensor=n) for n in outputs}

    def _inspect(self, trt: ModuleType, engine: Any, context: Any) -> None:
        inspector = engine.create_engine_inspector()
        inspector.execution_context = context
        self.inspector_json = str(inspector.get_engine_information(trt.LayerInformationFormat.JSON))
        self.precision_report = parse_inspector_json(self.inspector_json)

    def deactivate_impl(self) -> None:
        """Free in dependency order while the CUDA context is still current: context, engine, runtime, buffers."""
        live, self._live = self._live, {}
        for key in ("context", "engine", "runtime"):
            del live[key]
        live["buffers"].free()
        live.clear()
