"""FLOP estimates from shapes, for the share of work a conversion puts in low precision.

MatMul/Gemm: 2*M*N*K; Conv: 2 * output elements * in-channels/group * kernel volume; ConvTranspose:
2 * input elements * out-channels/group * kernel volume; reductions and pooling: input elements;
everything else: output elements. Unknown shapes count as 0 (logged by the caller as unknown).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import onnx

from harness.convert.depth import reduction_depth

ShapeOf = Callable[[str], tuple[int | None, ...] | None]
_INPUT_SIZED = ("Reduce", "GlobalAveragePool", "GlobalMaxPool", "MaxPool", "AveragePool", "LpPool", "Softmax",
                "LogSoftmax", "LayerNormalization", "BatchNormalization", "InstanceNormalization")


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
    if op.startswith(_INPUT_SIZED):
        return _elements(shape_of(node.input[0])) if node.input else None
    return out


def flop_share(nodes: list[onnx.NodeProto], is_low: Callable[[onnx.NodeProto], bool], shape_of: ShapeOf,
               initializers: Mapping[str, onnx.TensorProto]) -> tuple[float, int, int]:
    """(low-precision share of the estimated FLOPs, total FLOPs, number of nodes with unknown FLOPs)."""
    total = low = unknown = 0
    for node in nodes:
        flops = node_flops(node, shape_of, initializers)
        if flops is None:
            unknown += 1
            continue
        total += flops
        if is_low(node):
            low += flops
    return (low / total if total else 0.0), total, unknown
