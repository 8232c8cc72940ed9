"""Parse an ONNX model and build a strongly typed TensorRT plan: no GPU, no CUDA library, no harness imports.

This module imports only the standard library (and :mod:`harness.core.child`, which does too), so it runs two ways:

* in process, from :class:`harness.runners.tensorrt.runner.TrtRunner`, which passes in the imported TensorRT module;
* as a child process (``python plan.py``, through :mod:`harness.core.child`: a JSON request in, a JSON answer out), from
  :mod:`harness.runners.tensorrt.typed_build`, so that a crash of the native library cannot take pytest down and
  TensorRT's log never mixes with pytest's output. The child costs about 0.1 s of start-up (Python plus
  ``import tensorrt_rtx_bindings``) on top of the build itself, measured on this project's 2-core CI machine.

What is built: every network strongly typed (TensorRT 10.x: ``1 << STRONGLY_TYPED``; 11.x and TensorRT-RTX: no
flag, strong typing is the only mode), no precision builder flags, TF32 cleared, ``ProfilingVerbosity.DETAILED``,
one optimization profile for the dynamic inputs. Never set: a timing cache or the CURRENT compute-capability target;
both query a GPU and fail on a CPU-only machine (cudaError 35). TensorRT-RTX's default targets (compute
capability 8.0, 8.6, 8.9, 12.x) are kept. Besides the plan, the answer holds the TensorRT type of every ONNX node
output (``OnnxParser.get_layer_output_tensor``), every parser error and every error line of the build log.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from harness.core.child import read_request, write_answer

Shape = tuple[int, ...]
MIN_VERSION = (10, 0)  # strongly typed networks with execute_async_v3 and named I/O tensors
RTX_MIN_VERSION = (1, 0)  # TensorRT-RTX: every network is strongly typed


class Unsupported(Exception):
    """This TensorRT cannot build the strongly typed networks castguard needs."""


def trt_version(version: str) -> tuple[int, int]:
    """``"10.16.0.5"`` -> ``(10, 16)``."""
    match = re.match(r"^\s*(\d+)\.(\d+)", version)
    if not match:
        raise ValueError(f"cannot read a TensorRT version from {version!r}")
    return int(match.group(1)), int(match.group(2))


def network_creation_flags(version: str, flag_values: Mapping[str, int], *, rtx: bool = False) -> int:
    """The ``create_network`` flags for a strongly typed network (raises :class:`Unsupported`).

    ``flag_values`` is ``NetworkDefinitionCreationFlag`` as ``{member name: int value}``. On 10.x strong typing is
    opt-in: ``1 << STRONGLY_TYPED``. On 11.x every network is strongly typed and the flag is deprecated (its value
    changed), so no flag is passed. TensorRT-RTX (``rtx``, versions 1.x) has only ``STRONGLY_TYPED`` and every
    network is strongly typed: no flag is passed either.
    """
    found = trt_version(version)
    if rtx:
        if found < RTX_MIN_VERSION:
            raise Unsupported(
                f"TensorRT-RTX {version} is not supported: castguard needs TensorRT-RTX >= "
                f"{RTX_MIN_VERSION[0]}.{RTX_MIN_VERSION[1]}"
            )
        return 0
    if found < MIN_VERSION:
        raise Unsupported(
            f"TensorRT {version} is too old: castguard builds strongly typed engines and "
            f"needs TensorRT >= {MIN_VERSION[0]}.{MIN_VERSION[1]}"
        )
    if found[0] >= 11:
        return 0
    if "STRONGLY_TYPED" not in flag_values:
        raise Unsupported(f"TensorRT {version} has no NetworkDefinitionCreationFlag.STRONGLY_TYPED")
    return 1 << int(flag_values["STRONGLY_TYPED"])


def builder_flags_to_clear(builder_flags: Collection[str], *, tf32: bool) -> tuple[str, ...]:
    """Builder flags to clear: TF32 (on by default) unless asked for, so fp32 layers compute in fp32."""
    return ("TF32",) if not tf32 and "TF32" in builder_flags else ()


def members(enum: Any) -> dict[str, int]:
    return {name: int(value) for name, value in enum.__members__.items()}


def capturing_logger(trt: Any, *, echo: bool) -> Any:
    """A ``trt.ILogger`` that keeps every WARNING-or-worse line (``.lines``: ``(severity, text)``); with ``echo`` it
    also prints them to stderr, as ``trt.Logger`` would."""

    class Logger(trt.ILogger):  # type: ignore[misc]
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.lines: list[tuple[str, str]] = []

        def log(self, severity: Any, msg: str) -> None:
            if int(severity) <= int(trt.ILogger.Severity.WARNING):
                name = str(severity).rsplit(".", 1)[-1]
                self.lines.append((name, str(msg)))
                if echo:
                    print(f"[TensorRT] {name}: {msg}", file=sys.stderr)

    return Logger()


def _parse_error(error: Any) -> dict[str, str]:
    """One ``ParserError`` as plain strings (node name, op, description, and TensorRT's full text)."""

    def text(method: str) -> str:
        try:
            return str(getattr(error, method)())
        except (AttributeError, TypeError, ValueError, RuntimeError):
            return ""

    return {
        "node": text("node_name"),
        "op": text("node_operator"),
        "desc": text("desc"),
        "code": text("code").rsplit(".", 1)[-1],
        "text": str(error),
    }


def build_plan(
    trt: Any,
    source: str | bytes,
    *,
    path_hint: str | None,
    rtx: bool,
    logger: Any,
    profile: Mapping[str, tuple[Shape, Shape, Shape]],
    nodes: Sequence[tuple[str, int]] = (),
    workspace_bytes: int = 1 << 30,
    optimization_level: int = 3,
    tf32: bool = False,
) -> dict[str, Any]:
    """Parse ``source`` (a file path, or the model's bytes with ``path_hint`` for its external data) and build.

    Returns ``{"stage": "ok" | "parse" | "build", "plan": bytes | None, "parse_errors": [...], "log": [...],
    "node_types": {node: [TensorRT dtype name or None per output]}, "layers": [[name, type, [dtypes]]],
    "parse_s", "build_s"}``. ``nodes`` lists the ONNX nodes (name, number of outputs) whose types are read.
    Raises :class:`Unsupported` for a TensorRT that cannot build strongly typed networks.
    """
    builder = trt.Builder(logger)
    flags = network_creation_flags(str(trt.__version__), members(trt.NetworkDefinitionCreationFlag), rtx=rtx)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    start = time.perf_counter()
    if isinstance(source, str):
        parsed = parser.parse_from_file(source)
    else:
        parsed = parser.parse(source, path_hint) if path_hint else parser.parse(source)
    answer: dict[str, Any] = {
        "stage": "parse",
        "plan": None,
        "parse_s": time.perf_counter() - start,
        "build_s": 0.0,
        "node_types": {},
        "layers": [],
        "parse_errors": [_parse_error(parser.get_error(i)) for i in range(parser.num_errors)],
    }
    if not parsed:
        return answer
    node_types: dict[str, list[str | None]] = {}
    for name, count in nodes:
        found: list[str | None] = []
        for index in range(count):
            tensor = parser.get_layer_output_tensor(name, index) if name else None
            found.append(None if tensor is None else str(tensor.dtype).rsplit(".", 1)[-1])
        node_types[name] = found
    answer["node_types"] = node_types
    answer["layers"] = [
        [
            layer.name,
            str(layer.type).rsplit(".", 1)[-1],
            [str(layer.get_output(j).dtype).rsplit(".", 1)[-1] for j in range(layer.num_outputs)],
        ]
        for layer in (network.get_layer(i) for i in range(network.num_layers))
    ]
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace_bytes)
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    config.builder_optimization_level = optimization_level
    for flag in builder_flags_to_clear(members(trt.BuilderFlag), tf32=tf32):
        config.clear_flag(getattr(trt.BuilderFlag, flag))
    if profile:
        opt_profile = builder.create_optimization_profile()
        for name, (low, opt, high) in profile.items():
            opt_profile.set_shape(name, tuple(low), tuple(opt), tuple(high))
        config.add_optimization_profile(opt_profile)
    start = time.perf_counter()
    plan = builder.build_serialized_network(network, config)
    answer["build_s"] = time.perf_counter() - start
    if plan is None:
        answer["stage"] = "build"
        return answer
    answer["stage"], answer["plan"] = "ok", bytes(memoryview(plan))
    return answer


def main() -> int:
    """The child process: ``{"module", "source", "path_hint", "profile", "nodes", "plan_out"}`` on stdin; the
    answer (without the plan, which goes to ``plan_out`` when given) as one JSON object on stdout."""
    request = read_request()
    import importlib

    try:
        trt = importlib.import_module(request["module"])
    except (ImportError, OSError) as err:
        write_answer({"stage": "unavailable", "error": f"{request['module']} cannot be loaded: {err}"})
        return 0
    logger = capturing_logger(trt, echo=False)
    profile: dict[str, tuple[Shape, Shape, Shape]] = {
        name: (tuple(low), tuple(opt), tuple(high)) for name, (low, opt, high) in request["profile"].items()
    }
    source: str | bytes = request["source"]
    if request.get("path_hint"):  # a graph whose external weights are read relative to path_hint
        with open(request["source"], "rb") as handle:
            source = handle.read()
    try:
        answer = build_plan(
            trt,
            source,
            path_hint=request.get("path_hint"),
            rtx=request["module"] == "tensorrt_rtx_bindings",
            logger=logger,
            profile=profile,
            nodes=[(str(n), int(k)) for n, k in request["nodes"]],
        )
    except Unsupported as err:
        write_answer({"stage": "unavailable", "error": str(err)})
        return 0
    plan = answer.pop("plan")
    answer["plan_bytes"] = None if plan is None else len(plan)
    if plan is not None and request.get("plan_out"):
        with open(request["plan_out"], "wb") as handle:
            handle.write(plan)
    answer["log"] = logger.lines
    answer["version"] = str(trt.__version__)
    write_answer(answer)
    return 0


if __name__ == "__main__":
    if sys.path and sys.path[0] and __file__.startswith(sys.path[0]):
        del sys.path[0]  # run as a script: import nothing from this folder by a bare name
    sys.exit(main())
