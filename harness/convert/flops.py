"""FLOP estimates from shapes, for the share of work a conversion puts in low precision.

MatMul/Gemm: 2*M*N*K; Conv: 2 * output elements * in-channels/group * kernel volume; ConvTranspose:
2 * input elements * out-channels/group * kernel volume; reductions and pooling: input elements;
LSTM/GRU/RNN, Einsum and the attention contrib ops by their arithmetic (:mod:`harness.convert.opflops`);
everything else: output elements. Unknown shapes count as 0, and the nodes are named (:class:`FlopCount`).

Control flow (given a :class:`Scope`): an If counts its larger branch; a Loop its body times its trip count when
that is a constant (``M`` an initializer or Constant); a Scan its body times the sequence length of its first scan
input when the shape is static. Body nodes count at their own precision (the converter leaves bodies in their
original types). A trip count known only at run time makes the share an upper bound, with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import onnx
from onnx import numpy_helper

from harness.convert.depth import reduction_depth
from harness.convert.opflops import (
    ATTENTION,
    RECURRENT,
    attention_flops,
    einsum_flops,
    onnx_attention_flops,
    recurrent_flops,
)
from harness.core.dtypes import FLOAT_TYPES, LOW_ELEMS

ShapeOf = Callable[[str], tuple[int | None, ...] | None]
_INPUT_SIZED = (
    "Reduce",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "MaxPool",
    "AveragePool",
    "LpPool",
    "Softmax",
    "LogSoftmax",
    "LayerNormalization",
    "BatchNormalization",
    "InstanceNormalization",
)


def _elements(shape: tuple[int | None, ...] | None) -> int | None:
    if shape is None or any(d is None for d in shape):
        return None
    return math.prod(shape)  # type: ignore[arg-type]


def node_flops(node: onnx.NodeProto, shape_of: ShapeOf, initializers: Mapping[str, onnx.TensorProto]) -> int | None:
    """Estimated floating-point operations of one node, or None when shapes are unknown."""
    outputs = [_elements(shape_of(n)) for n in node.output if n]
    out = outputs[0] if outputs else None
    op = node.op_type
    if op in ("MatMul", "Gemm", "Conv"):
        _, depth = reduction_depth(node, shape_of, initializers)
        return None if depth is None or out is None else 2 * out * depth
    if op == "ConvTranspose":
        weight = shape_of(node.input[1])
        inp = _elements(shape_of(node.input[0]))
        if weight is None or inp is None or len(weight) < 3 or any(d is None for d in weight):
            return None
        return 2 * inp * math.prod(weight[1:])  # type: ignore[arg-type]
    if op in RECURRENT:
        return recurrent_flops(node, shape_of)
    if op == "Einsum":
        return einsum_flops(node, shape_of)
    if op in ATTENTION and node.domain == "com.microsoft":
        return attention_flops(node, shape_of)
    if op == "Attention" and node.domain in ("", "ai.onnx"):
        return onnx_attention_flops(node, shape_of)
    if op.startswith(_INPUT_SIZED):
        return _elements(shape_of(node.input[0])) if node.input else None
    return out


@dataclass(frozen=True)
class FlopCount:
    """The low-precision share of a graph's estimated FLOPs.

    ``bound`` (None: exact up to the estimate) says why ``share`` is only a bound: a Loop/Scan whose trip
    count is known only at run time (the share is then the largest over that count, at least one iteration), or
    nodes whose shapes are unknown even at concrete input shapes (``unknown_nodes``, not counted)."""

    share: float
    total: int
    low: int
    unknown: int
    bound: str | None = None
    unknown_nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scope:
    """What counting inside If/Loop/Scan bodies needs: element types and static shapes (None = dynamic dim) of
    every tensor, bodies' included, and the constant values (initializers, Constant outputs) for trip counts."""

    types: Mapping[str, int]
    dims: ShapeOf
    values: Mapping[str, onnx.TensorProto] = field(default_factory=dict)


UNKNOWN_SHOWN = 5
"""Nodes with unknown shapes named in the bound's reason (``unknown_nodes`` holds them all)."""
MANY_TRIPS = 1 << 20
"""A run-time trip count taken as this large for the bound's other end (the share is monotone in each count)."""
_Tally = tuple[int, int, int]


def flop_share(
    nodes: list[onnx.NodeProto],
    is_low: Callable[[onnx.NodeProto], bool],
    shape_of: ShapeOf,
    initializers: Mapping[str, onnx.TensorProto],
    *,
    scope: Scope | None = None,
) -> FlopCount:
    """The low-precision share of the estimated FLOPs of `nodes`; with a `scope`, through control flow."""
    reasons: list[str] = []
    level = _Level(is_low=is_low, shape_of=shape_of, initializers=initializers, scope=scope)
    total, low, unknown = _count(level, nodes, 1, reasons)
    share = low / total if total else 0.0
    names = tuple(
        n.name or n.op_type
        for n in nodes
        if not (scope is not None and _bodies(n)) and node_flops(n, shape_of, initializers) is None
    )
    if names:
        shown = ", ".join(names[:UNKNOWN_SHOWN]) + (", ..." if len(names) > UNKNOWN_SHOWN else "")
        reasons.append(f"{len(names)} node(s) with shapes unknown at the input shapes, not counted: {shown}")
    if not reasons:
        return FlopCount(share=share, total=total, low=low, unknown=unknown)
    many_total, many_low, _ = _count(level, nodes, MANY_TRIPS, [])
    share = max(share, many_low / many_total if many_total else 0.0)
    bound = "; ".join(dict.fromkeys(reasons))
    return FlopCount(share=share, total=total, low=low, unknown=unknown, bound=bound, unknown_nodes=names)


def _bodies(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    return [a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH]


@dataclass(frozen=True)
class _Level:
    """How one graph level's nodes are counted: which run in low precision, their tensors' shapes, the initializers
    in scope, and the control-flow scope (None: bodies are not entered)."""

    is_low: Callable[[onnx.NodeProto], bool]
    shape_of: ShapeOf
    initializers: Mapping[str, onnx.TensorProto]
    scope: Scope | None


def _count(level: _Level, nodes: list[onnx.NodeProto], trips: int, reasons: list[str]) -> _Tally:
    """(total, low, unknown) FLOPs of ``nodes``; a Loop/Scan of unknown trip count counts ``trips`` trips (the
    reason is added to ``reasons``)."""
    is_low, shape_of, initializers, scope = level.is_low, level.shape_of, level.initializers, level.scope
    total = low = unknown = 0
    for node in nodes:
        if scope is not None and node.op_type in ("If", "Loop", "Scan", "SequenceMap") and _bodies(node):
            t, lo, u = _control_flow(node, initializers, scope, trips, reasons)
            total, low, unknown = total + t, low + lo, unknown + u
            continue
        flops = node_flops(node, shape_of, initializers)
        if flops is None:
            unknown += 1
            continue
        total += flops
        low += flops if is_low(node) else 0
    return total, low, unknown


def _control_flow(
    node: onnx.NodeProto, initializers: Mapping[str, onnx.TensorProto], scope: Scope, trips: int, reasons: list[str]
) -> _Tally:
    """FLOPs of an If (its larger branch), Loop or Scan (its body times the trip count)."""
    counts = [_body(graph, initializers, scope, trips, reasons) for graph in _bodies(node)]
    if node.op_type == "If":
        return max(counts, key=lambda c: (c[0], c[1]))
    body = counts[0]
    count = _trip_count(node, scope, initializers)
    if isinstance(count, str):
        reasons.append(f"{node.op_type} {node.name!r}: {count}")
        count = trips
    return body[0] * count, body[1] * count, body[2]


def _body(
    graph: onnx.GraphProto, initializers: Mapping[str, onnx.TensorProto], scope: Scope, trips: int, reasons: list[str]
) -> _Tally:
    inner_inits = {**initializers, **{i.name: i for i in graph.initializer}}
    values = {**scope.values, **{i.name: i for i in graph.initializer}}
    for inner in graph.node:
        if inner.op_type == "Constant" and inner.attribute and inner.attribute[0].name == "value":
            values[inner.output[0]] = inner.attribute[0].t
    inner_scope = Scope(types=scope.types, dims=scope.dims, values=values)

    def shape_of(name: str) -> tuple[int | None, ...] | None:
        if name in inner_inits:
            return tuple(inner_inits[name].dims)
        dims = scope.dims(name)
        return None if dims is None else tuple(1 if d is None else d for d in dims)

    def own_precision_low(node: onnx.NodeProto) -> bool:
        floats = [scope.types[n] for n in [*node.output, *node.input] if n and scope.types.get(n) in FLOAT_TYPES]
        return any(t in LOW_ELEMS for t in floats)

    inner = _Level(is_low=own_precision_low, shape_of=shape_of, initializers=inner_inits, scope=inner_scope)
    return _count(inner, list(graph.node), trips, reasons)


def _trip_count(node: onnx.NodeProto, scope: Scope, initializers: Mapping[str, onnx.TensorProto]) -> int | str:
    """The constant trip count of a Loop/Scan, or why it is known only at run time."""
    if node.op_type == "Loop":
        name = node.input[0] if node.input else ""
        if not name:
            return "no trip count: it runs until its condition is false, known only at run time"
        value = scope.values.get(name, initializers.get(name))
        if value is None:
            return f"trip count {name!r} is computed at run time"
        return max(int(numpy_helper.to_array(value).reshape(-1)[0]), 0)
    if node.op_type == "Scan":
        scans = next((int(a.i) for a in node.attribute if a.name == "num_scan_inputs"), 1)
        axes = next((list(a.ints) for a in node.attribute if a.name == "scan_input_axes"), [0])
        first = node.input[len(node.input) - scans]
        dims = scope.dims(first)
        axis = axes[0] if axes else 0
        if dims is None or not -len(dims) <= axis < len(dims) or dims[axis] is None:
            return f"the sequence length of {first!r} is dynamic"
        return int(dims[axis])  # type: ignore[arg-type]
    return "runs its body once per sequence element, a count known only at run time"
