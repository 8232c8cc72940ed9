"""Open a real TensorRT engine for :class:`harness.runners.tensorrt.runner.TrtRunner`: import, device, build, validity, context.

Order: import TensorRT (``tensorrt``, else ``tensorrt_rtx_bindings``), open the device (cuda-python or pycuda),
build the plan in this process, ask the runtime whether the plan is valid on this GPU
(``Runtime.get_engine_validity``, where the bindings have it), deserialize, and make the execution context
(TensorRT-RTX: through a runtime config with a runtime cache). Anything this machine lacks is a
:class:`~harness.core.errors.RunnerUnavailable` naming it; a plan this GPU cannot run names the GPU, its compute
capability and the compute capabilities the plan runs on (:func:`unsupported_gpu`).
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import onnx

from harness.core.errors import RunnerError, RunnerUnavailable, UserError
from harness.core.files import atomic_write
from harness.data.feeds import input_specs
from harness.runners.ortsource import session_source
from harness.runners.tensorrt.device import Device, open_device
from harness.runners.tensorrt.library import TrtModule, import_tensorrt
from harness.runners.tensorrt.plan import Unsupported, build_plan, capturing_logger
from harness.runners.tensorrt.typed_build import Shape, profile_shapes


@dataclass(frozen=True)
class TrtOptions:
    """How the engine is built. ``input_shapes`` fixes dynamic inputs when ``activate()`` is called directly;
    :meth:`TrtRunner.run` derives the optimization profile from its feeds instead."""

    workspace_bytes: int = 1 << 30
    optimization_level: int = 3
    tf32: bool = False
    plugins: tuple[Path, ...] = ()
    input_shapes: tuple[tuple[str, Shape], ...] = ()
    runtime_cache: Path | None = None  # TensorRT-RTX: kernels compiled at first run, kept in this file

    def __post_init__(self) -> None:
        if not 0 <= self.optimization_level <= 5:
            raise ValueError(f"optimization_level must be 0..5, got {self.optimization_level}")
        if self.workspace_bytes <= 0:
            raise ValueError(f"workspace_bytes must be positive, got {self.workspace_bytes}")


@dataclass(frozen=True)
class NetworkLayer:
    """A layer of the parsed network before building: the types strong typing gave its outputs."""

    name: str
    layer_type: str  # TensorRT LayerType name, e.g. "MATRIX_MULTIPLY"
    output_types: tuple[str, ...]  # TensorRT DataType names, e.g. ("HALF",)


@dataclass
class LiveEngine:
    """What :meth:`TrtRunner.activate` opens and the run path uses: a deserialized engine and its execution
    context (TensorRT's Python objects, or fakes with the same methods), the device, and how to inspect and free
    them. :func:`harness.runners.tensorrt.engine.open_engine` makes the real one."""

    engine: Any  # ICudaEngine: get_tensor_profile_shape
    context: Any  # IExecutionContext: set_input_shape, infer_shapes, get_tensor_shape,
    # set_tensor_address, execute_async_v3
    device: Device
    io_dtypes: dict[str, str]  # every I/O tensor -> TensorRT DataType name
    inputs: tuple[str, ...]
    runner_name: str  # "trt-10.13" / "trt-rtx-1.7"
    backend: str  # "TensorRT 10.13.0.35" / "TensorRT-RTX 1.7.1.116"
    plan: bytes = b""
    network_layers: tuple[NetworkLayer, ...] = ()
    inspect: Callable[[], str] = lambda: ""  # the engine inspector's JSON (after an inference)
    release: Callable[[], None] = lambda: None  # frees context, engine and runtime, in that order


class EngineSource(Protocol):
    """What :func:`open_engine` reads from the runner that asks (:class:`~harness.runners.tensorrt.runner.
    TrtRunner`): typed here, so that this module never imports the runner (no import circle)."""

    @property
    def model(self) -> onnx.ModelProto: ...
    @property
    def model_dir(self) -> Path | None: ...
    @property
    def options(self) -> TrtOptions: ...
    @property
    def feed_shapes(self) -> list[dict[str, Shape]]: ...


_SM = re.compile(r"^SM(\d+)(\d)$")  # ComputeCapability.SM86 -> (8, 6); SM120 -> (12, 0)


def rtx_targets(members: list[str]) -> tuple[tuple[int, int], ...]:
    """The compute capabilities a TensorRT-RTX plan built with default targets runs on: every ``SMxy`` member of
    ``ComputeCapability`` from 8.0 up (7.5 must be asked for; ``NONE``/``CURRENT`` are not targets)."""
    found = [(int(m.group(1)), int(m.group(2))) for m in map(_SM.match, members) if m]
    return tuple(sorted(cc for cc in found if cc >= (8, 0)))


def unsupported_gpu(
    backend: str, *, gpu: str, capability: tuple[int, int], supported: tuple[tuple[int, int], ...], detail: str = ""
) -> str:
    """The skip reason for a plan this GPU cannot run."""
    listed = ", ".join(f"{a}.{b}" for a, b in supported) or "(not reported)"
    return (
        f"{backend} cannot run its engine on this GPU: {gpu} (compute capability {capability[0]}.{capability[1]});"
        f" its engines run on compute capability {listed}"
        + (f" ({detail})" if detail else "")
        + ". The build itself works on any machine: the TensorRT build check covers it"
    )


def _build(trt_module: TrtModule, runner: EngineSource, logger: Any) -> dict[str, Any]:
    trt = trt_module.module
    registry = trt.get_plugin_registry()
    for plugin in runner.options.plugins:
        if not Path(plugin).is_file():
            raise UserError(
                where=plugin,
                problem="TensorRT plugin library not found",
                fix="pass the path of an existing plugin .so, or drop it from plugins",
            )
        registry.load_library(str(plugin))
    profile = profile_shapes(input_specs(runner.model), runner.feed_shapes)
    with tempfile.TemporaryDirectory(prefix="castguard-trt-") as tmp:
        source = session_source(runner.model, model_dir=runner.model_dir, scratch=Path(tmp), options=None)
        hint = str(Path(runner.model_dir) / "model.onnx") if runner.model_dir and not isinstance(source, str) else None
        try:
            built = build_plan(
                trt,
                source,
                path_hint=hint,
                rtx=trt_module.rtx,
                logger=logger,
                profile=profile,
                workspace_bytes=runner.options.workspace_bytes,
                optimization_level=runner.options.optimization_level,
                tf32=runner.options.tf32,
            )
        except Unsupported as err:
            raise RunnerUnavailable(str(err)) from err
    if built["stage"] == "parse":
        errors = "; ".join(e["text"] for e in built["parse_errors"]) or "no message"
        raise RunnerError(f"trt: the ONNX parser rejected the model: {errors}")
    if built["stage"] == "build":
        errors = "; ".join(text for severity, text in logger.lines if severity in ("ERROR", "INTERNAL_ERROR"))
        raise RunnerError(f"trt: the engine build failed: {errors or 'see the TensorRT log above'}")
    return built


def _check_validity(trt_module: TrtModule, runtime: Any, plan: bytes, device: Device, logger: Any) -> None:
    """RunnerUnavailable when the runtime says this GPU cannot run the plan (before deserializing it)."""
    trt = trt_module.module
    if not hasattr(runtime, "get_engine_validity"):
        return  # full TensorRT without the API: deserialization decides
    validity, diagnostics = runtime.get_engine_validity(plan)
    if str(validity).rsplit(".", 1)[-1] == "VALID":
        return
    bits = {name: int(value) for name, value in trt.EngineInvalidityDiagnostics.__members__.items()}
    reasons = [name for name, bit in bits.items() if int(diagnostics) & bit]
    said = _capability_said(logger)
    if "UNSUPPORTED_CC" in reasons or said or device.compute_capability not in _supported(trt_module):
        raise _unsupported(trt_module, device, said)
    raise RunnerUnavailable(
        f"{trt_module.backend} says its engine is not valid on this machine "
        f"({', '.join(reasons) or 'no diagnostic'}); GPU {device.name}"
    )


def _capability_said(logger: Any) -> str:
    """The last line of TensorRT's log about the GPU's compute capability, or ""."""
    return next((text for _, text in reversed(logger.lines) if "compute capabilit" in text.lower()), "")


def _unsupported(trt_module: TrtModule, device: Device, said: str) -> RunnerUnavailable:
    """This GPU is not one the TensorRT build's engines run on (``said``: TensorRT's own words)."""
    return RunnerUnavailable(
        unsupported_gpu(
            trt_module.backend,
            gpu=device.name,
            capability=device.compute_capability,
            supported=_supported(trt_module),
            detail=said,
        )
    )


def _supported(trt_module: TrtModule) -> tuple[tuple[int, int], ...]:
    enum = getattr(trt_module.module, "ComputeCapability", None)
    return rtx_targets(list(enum.__members__)) if trt_module.rtx and enum is not None else ()


def open_engine(runner: EngineSource) -> LiveEngine:
    """The real :class:`LiveEngine` for ``runner`` (see the module docstring)."""
    trt_module = import_tensorrt()
    trt = trt_module.module
    device = open_device()
    logger = capturing_logger(trt, echo=True)
    built = _build(trt_module, runner, logger)
    plan: bytes = built["plan"]
    runtime = trt.Runtime(logger)
    _check_validity(trt_module, runtime, plan, device, logger)
    engine = runtime.deserialize_cuda_engine(plan)
    if engine is None:
        said = _capability_said(logger)
        if said:
            raise _unsupported(trt_module, device, said)
        raise RunnerError("trt: the built plan could not be deserialized (see the TensorRT log above)")
    cache, cache_file = None, runner.options.runtime_cache
    if hasattr(engine, "create_runtime_config"):  # TensorRT-RTX: kernels are compiled at first run
        config = engine.create_runtime_config()
        cache = config.create_runtime_cache()
        if cache_file is not None and Path(cache_file).is_file():
            cache.deserialize(Path(cache_file).read_bytes())
        config.set_runtime_cache(cache)
        context = engine.create_execution_context(config)
    else:
        context = engine.create_execution_context()
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    inputs = tuple(n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT)

    def inspect() -> str:
        inspector = engine.create_engine_inspector()
        inspector.execution_context = context
        return str(inspector.get_engine_information(trt.LayerInformationFormat.JSON))

    def release() -> None:
        nonlocal context, engine, runtime
        if cache is not None and cache_file is not None:
            atomic_write(Path(cache_file), bytes(memoryview(cache.serialize())))
        del context, engine, runtime

    layers = tuple(NetworkLayer(name, kind, tuple(types)) for name, kind, types in built["layers"])
    return LiveEngine(
        engine=engine,
        context=context,
        device=device,
        inputs=inputs,
        io_dtypes={n: str(engine.get_tensor_dtype(n)).rsplit(".", 1)[-1] for n in names},
        runner_name=trt_module.runner_name,
        backend=trt_module.backend,
        plan=plan,
        network_layers=layers,
        inspect=inspect,
        release=release,
    )
