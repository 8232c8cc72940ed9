"""Compare a TensorRT engine's realized precisions (from ``inspector``) with the ONNX model's declared types.

Under strong typing the engine must keep every type the ONNX model declares; a difference means a
parser or type-inference problem, a weakly typed build, or an engine that silently dropped precision
(roboflow/rf-detr#1453 in ``docs/runtime-facts.md`` §3.5). Pure code, no tensorrt import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import onnx

from harness.core.errors import RunnerError
from harness.runners.tensorrt.datatypes import ELEM_TO_PRECISION, FLOAT_PRECISIONS, LOW_PRECISIONS
from harness.runners.tensorrt.inspector import LayerInfo, PrecisionReport


@dataclass(frozen=True)
class Mismatch:
    """One place where the engine's realized precision differs from the ONNX model's declared type."""

    kind: Literal["io", "tensor", "node", "engine"]
    subject: str  # tensor name, ONNX node names, or "" for the engine as a whole
    expected: str  # declared by the ONNX model
    realized: str  # found in the engine
    layer: str = ""

    def __str__(self) -> str:
        where = f" (engine layer {self.layer!r})" if self.layer else ""
        subject = f" {self.subject!r}" if self.subject else ""
        return f"{self.kind}{subject}: ONNX declares {self.expected}, the engine has {self.realized}{where}"


def declared_precisions(model: onnx.ModelProto) -> dict[str, str]:
    """Tensor name -> precision label of every main-graph tensor whose type the model declares or implies."""
    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    types = {t.name: t.data_type for t in graph.initializer}
    types.update(
        {
            v.name: v.type.tensor_type.elem_type
            for v in (*graph.input, *graph.value_info, *graph.output)
            if v.type.HasField("tensor_type")
        }
    )
    return {name: ELEM_TO_PRECISION[elem] for name, elem in types.items() if elem in ELEM_TO_PRECISION}


def _layer_nodes(layer: LayerInfo, order: Sequence[str]) -> list[str]:
    known = set(order)
    if layer.node_range and layer.node_range[0] in known and layer.node_range[1] in known:
        first, last = order.index(layer.node_range[0]), order.index(layer.node_range[1])
        return list(order[first : last + 1])
    return [n for n in layer.onnx_nodes if n in known]


def _exit_precisions(nodes: Sequence[str], graph: onnx.GraphProto, declared: Mapping[str, str]) -> set[str]:
    """Declared float precisions of the tensors that leave a fused group of ONNX nodes."""
    group = set(nodes)
    by_name = {n.name: n for n in graph.node}
    used_outside = {i for n in graph.node if n.name not in group for i in n.input}
    used_outside |= {o.name for o in graph.output}
    return {
        declared[o]
        for name in nodes
        for o in by_name[name].output
        if o in used_outside and declared.get(o) in FLOAT_PRECISIONS
    }


def check_against_onnx(report: PrecisionReport, model: onnx.ModelProto) -> list[Mismatch]:
    """Compare the engine's per-tensor and per-node float precision with the types the ONNX model declares.

    Checked, in order: engine I/O tensors (11.x dumps carry their types); every layer tensor named like an
    ONNX tensor; for fused layers whose outputs have engine-internal names (Myelin), the types of the
    tensors leaving the fused ONNX nodes; and the engine as a whole (a model with fp16/bf16 compute nodes
    whose engine has no low-precision compute layer, as when precision was silently dropped). Only float
    types are compared: TensorRT may legitimately store int64 shape tensors as int32.
    """
    if not report.detailed:
        raise RunnerError(
            "the engine inspector dump has layer names only; build the engine with "
            "profiling_verbosity = ProfilingVerbosity.DETAILED to check precisions"
        )
    declared = declared_precisions(model)
    graph = model.graph
    found: list[Mismatch] = []

    def differs(name: str, precision: str | None) -> bool:
        expected = declared.get(name)
        return expected in FLOAT_PRECISIONS and precision in FLOAT_PRECISIONS and precision != expected

    for io in report.io_tensors:
        if differs(io.name, io.precision):
            found.append(Mismatch("io", io.name, declared[io.name], str(io.precision)))
    reported: set[str] = {m.subject for m in found}
    for layer in report.layers:
        for tensor in (*layer.inputs, *layer.outputs):
            if tensor.name not in reported and differs(tensor.name, tensor.precision):
                reported.add(tensor.name)
                found.append(Mismatch("tensor", tensor.name, declared[tensor.name], str(tensor.precision), layer.name))
    order = [n.name for n in graph.node]
    for layer in report.compute_layers():
        nodes = _layer_nodes(layer, order)
        if not nodes or any(t.name in declared for t in layer.outputs):
            continue  # unmapped, or its outputs carry ONNX names and were checked above
        expected = _exit_precisions(nodes, graph, declared)
        realized = {t.precision for t in layer.outputs if t.precision in FLOAT_PRECISIONS}
        if expected and realized and expected != realized:
            found.append(
                Mismatch(
                    "node",
                    ", ".join(nodes),
                    "+".join(sorted(expected)),
                    "+".join(sorted(str(p) for p in realized)),
                    layer.name,
                )
            )
    low_nodes = [
        n.name for n in graph.node if n.op_type != "Cast" and any(declared.get(o) in LOW_PRECISIONS for o in n.output)
    ]
    if low_nodes and report.compute_layers() and report.low_precision_share() == 0.0:
        found.append(
            Mismatch(
                "engine",
                "",
                f"{len(low_nodes)} low-precision nodes (e.g. {low_nodes[0]!r})",
                f"no fp16/bf16 compute layer ({report.histogram()})",
            )
        )
    return found
