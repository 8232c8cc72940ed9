"""The TensorRT build check: does a (converted) ONNX model build as a strongly typed engine, with the ONNX types?

:func:`check_build` parses and builds the model in a child process (:mod:`harness.runners.tensorrt.plan`, with
``tensorrt`` if installed, else TensorRT-RTX's ``tensorrt_rtx_bindings``), then compares the TensorRT type of every
ONNX node output with the type the ONNX model declares (int64 stored as int32 is allowed). It needs neither a GPU
nor a CUDA library: TensorRT-RTX builds ahead of time on a CPU-only machine. The answer is one
:class:`TrtBuild`: it builds (plan size, seconds), or the parser refused a node (op, dtype, node, TensorRT's
message), or the builder failed (its error lines), or TensorRT changed a type, or the builder process crashed.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from harness.core.child import ChildFailed, run_child
from harness.core.errors import RunnerError, RunnerUnavailable
from harness.data.feeds import InputSpec, input_specs
from harness.runners.ortsource import session_source
from harness.runners.tensorrt.blame import blame_build_error
from harness.runners.tensorrt.buildfacts import NODE_ROWS as NODE_ROWS
from harness.runners.tensorrt.buildfacts import OUTCOMES as OUTCOMES
from harness.runners.tensorrt.buildfacts import BuildCulprit, NodeTypes, ParseFailure, TrtBuild
from harness.runners.tensorrt.datatypes import precision_of_trt_dtype
from harness.runners.tensorrt.library import backend_label, installed_module
from harness.runners.tensorrt.precision_diff import declared_precisions

BUILD_SCRIPT = Path(__file__).resolve().with_name("plan.py")
TIMEOUT_S = 900.0
Shape = tuple[int, ...]
ProfileShapes = dict[str, tuple[Shape, Shape, Shape]]  # input -> (min, opt, max)
_SAME = frozenset({("int64", "int32")})  # (ONNX, TensorRT) pairs that are not a change


def profile_shapes(specs: Sequence[InputSpec], shapes: Sequence[Mapping[str, Shape]]) -> ProfileShapes:
    """One optimization profile covering ``shapes`` for every input with a dynamic dim (opt = the first)."""
    dynamic = [s for s in specs if s.dims is None or any(d is None for d in s.dims)]
    if dynamic and not shapes:
        names = ", ".join(s.name for s in dynamic)
        raise RunnerError(
            f"trt: inputs {names} have dynamic dims; pass TrtOptions(input_shapes=...) "
            "or use runner.run(feeds), which sizes the optimization profile from the feeds"
        )
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
        profile[spec.name] = (
            tuple(int(d) for d in stacked.min(axis=0)),
            seen[0],
            tuple(int(d) for d in stacked.max(axis=0)),
        )
    return profile


def compare_types(
    model: onnx.ModelProto, node_types: Mapping[str, Sequence[str | None]]
) -> tuple[tuple[NodeTypes, ...], tuple[NodeTypes, ...], tuple[str, ...], int]:
    """Every node's ONNX vs TensorRT output types; returns (all rows, changed rows, unmapped nodes, compared)."""
    declared = declared_precisions(model)
    rows, changed, unmapped, compared = [], [], [], 0
    for node in model.graph.node:
        found = node_types.get(node.name, [])
        onnx_types = [declared.get(o, "?") if o else "" for o in node.output]
        trt_types = [precision_of_trt_dtype(t) if t else "" for t in found] + [""] * (len(node.output) - len(found))
        row = NodeTypes(node.name, node.op_type, ",".join(onnx_types), ",".join(trt_types) if any(trt_types) else "")
        rows.append(row)
        if not any(trt_types):
            if node.op_type != "Constant" and any(node.output):
                unmapped.append(node.name or f"({node.op_type})")
            continue
        pairs = [(o, t) for o, t in zip(onnx_types, trt_types) if o not in ("", "?") and t]
        compared += len(pairs)
        if any(o != t and (o, t) not in _SAME for o, t in pairs):
            changed.append(row)
    return tuple(rows), tuple(changed), tuple(unmapped), compared


def _input_precision(model: onnx.ModelProto, node_name: str) -> str:
    declared = declared_precisions(model)
    node = next((n for n in model.graph.node if n.name == node_name), None)
    return "" if node is None else next((declared[i] for i in node.input if i in declared), "")


def interpret(model: onnx.ModelProto, answer: Mapping[str, Any], *, backend: str) -> TrtBuild:
    """A :class:`TrtBuild` from :func:`harness.runners.tensorrt.plan.build_plan`'s answer (as the child prints it)."""
    seconds = float(answer.get("parse_s", 0.0)) + float(answer.get("build_s", 0.0))
    errors = [text for severity, text in answer.get("log", ()) if severity in ("ERROR", "INTERNAL_ERROR")]
    base = TrtBuild(
        backend=backend,
        outcome="parse",
        seconds=seconds,
        plan_bytes=answer.get("plan_bytes"),
        nodes_total=len(model.graph.node),
    )
    if answer["stage"] == "parse":
        failures = tuple(
            ParseFailure(
                node=e["node"], op=e["op"], dtype=_input_precision(model, e["node"]), message=e["desc"] or e["text"]
            )
            for e in answer["parse_errors"]
        )
        return replace(base, parse_failures=failures)
    rows, changed, unmapped, compared = compare_types(model, answer["node_types"])
    base = replace(base, checked=compared, unmapped=unmapped, nodes=rows if len(rows) <= NODE_ROWS else changed)
    if answer["stage"] == "build":
        error = "; ".join(errors) or "the engine build failed (no message)"
        return replace(
            base,
            outcome="build",
            build_error=error,
            build_culprits=blame_build_error(model, error, layers=answer.get("layers", ())),
        )
    return replace(base, outcome="types" if changed else "ok", type_changes=changed)


def check_build(
    model: onnx.ModelProto,
    *,
    model_dir: Path | None,
    feed_shapes: Sequence[Mapping[str, Shape]] = (),
    timeout_s: float = TIMEOUT_S,
    plan_out: Path | None = None,
) -> TrtBuild:
    """Build ``model`` in a child process and check its types; RunnerUnavailable when no TensorRT can be loaded.

    ``feed_shapes`` size the optimization profile of dynamic inputs; ``plan_out`` keeps the plan in a file.
    """
    module = installed_module()
    if module is None:
        from harness.runners.tensorrt.library import INSTALL_HINT

        raise RunnerUnavailable(f"no TensorRT is installed: {INSTALL_HINT}")
    profile = profile_shapes(input_specs(model), feed_shapes)
    with tempfile.TemporaryDirectory(prefix="castguard-trt-build-") as tmp:
        scratch = Path(tmp)
        source = session_source(model, model_dir=model_dir, scratch=scratch, options=None)
        path_hint = None
        if not isinstance(source, str):
            (scratch / "graph.onnx").write_bytes(source)
            path_hint = str((model_dir or scratch) / "model.onnx")  # external data is read relative to it
            source = str(scratch / "graph.onnx")
        request = {
            "module": module,
            "source": source,
            "path_hint": path_hint,
            "profile": {k: [list(s) for s in v] for k, v in profile.items()},
            "nodes": [[n.name, len(n.output)] for n in model.graph.node],
            "plan_out": str(plan_out) if plan_out is not None else None,
        }
        try:
            answer = run_child(BUILD_SCRIPT, request, what="TensorRT build", timeout_s=timeout_s, cwd=scratch).answer
        except ChildFailed as failed:  # a time-out, a crash of the native library, no answer
            return TrtBuild(
                backend=backend_label(module, "?"),
                outcome="crash",
                build_error=failed.reason,
                nodes_total=len(model.graph.node),
            )
    if answer["stage"] == "unavailable":
        raise RunnerUnavailable(str(answer["error"]))
    return interpret(model, answer, backend=backend_label(module, str(answer["version"])))


def build_to_dict(build: TrtBuild) -> dict[str, Any]:
    """JSON-compatible data (the cache's format; the report writes the same fields)."""
    return dataclasses.asdict(build)


def build_from_dict(data: Mapping[str, Any]) -> TrtBuild:
    """The inverse of :func:`build_to_dict`; ValueError for data of another shape."""
    try:
        return TrtBuild(
            **{
                **data,
                "parse_failures": tuple(ParseFailure(**f) for f in data["parse_failures"]),
                "type_changes": tuple(NodeTypes(**r) for r in data["type_changes"]),
                "unmapped": tuple(str(u) for u in data["unmapped"]),
                "nodes": tuple(NodeTypes(**r) for r in data["nodes"]),
                "build_culprits": tuple(BuildCulprit(**c) for c in data.get("build_culprits", ())),
            }
        )
    except (KeyError, TypeError) as err:
        raise ValueError(f"not a TensorRT build check result: {err}") from err
