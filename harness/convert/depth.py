"""Depth of reduction per node: how many products/terms are summed into one output element.

MatMul: K; Gemm: K (transA aware); Conv: in-channels per group x kernel volume; ConvTranspose: the same
on its weight; Reduce*: product of the reduced dims (axes from the attribute or the axes input;
none = all dims unless ``noop_with_empty_axes``); Softmax/LogSoftmax/CumSum: the axis dim;
LayerNormalization: product of the normalised dims; GlobalAveragePool: spatial volume. Other ops: None.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import onnx
from onnx import numpy_helper

Shapes = Callable[[str], tuple[int | None, ...] | None]


def _attr(node: onnx.NodeProto, name: str, default: int) -> int:
    for attr in node.attribute:
        if attr.name == name:
            return int(attr.i)
    return default


def _attr_ints(node: onnx.NodeProto, name: str) -> list[int] | None:
    for attr in node.attribute:
        if attr.name == name:
            return [int(v) for v in attr.ints]
    return None


def _dim(shape: tuple[int | None, ...] | None, axis: int) -> int | None:
    if shape is None or not shape or not -len(shape) <= axis < len(shape):
        return None
    return shape[axis]


def _prod(dims: list[int | None]) -> int | None:
    return None if any(d is None for d in dims) else math.prod(dims)  # type: ignore[arg-type]


def _axes(node: onnx.NodeProto, initializers: Mapping[str, onnx.TensorProto]) -> list[int] | None:
    axes = _attr_ints(node, "axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        init = initializers.get(node.input[1])
        if init is None:
            return None
        axes = [int(a) for a in numpy_helper.to_array(init).reshape(-1)]
    return [] if axes is None else axes


def reduction_depth(
    node: onnx.NodeProto, shape_of: Shapes, initializers: Mapping[str, onnx.TensorProto]
) -> tuple[bool, int | None]:
    """(does this op reduce?, depth or None when the shapes are unknown)."""
    op = node.op_type
    first = shape_of(node.input[0]) if node.input else None
    if op == "MatMul":
        return True, _dim(first, -1)
    if op == "Gemm":
        return True, _dim(first, 0 if _attr(node, "transA", 0) else 1)
    if op in ("Conv", "ConvTranspose"):
        weight = shape_of(node.input[1])
        if weight is None or len(weight) < 3:
            return True, None
        channels = weight[1] if op == "Conv" else weight[0]
        group = _attr(node, "group", 1)
        if op == "ConvTranspose" and channels is not None:
            channels //= group
        return True, _prod([channels, *weight[2:]])
    if op.startswith("Reduce"):
        if first is None:
            return True, None
        axes = _axes(node, initializers)
        if axes is None:
            return True, None
        if not axes:
            if _attr(node, "noop_with_empty_axes", 0):
                return True, 1
            axes = list(range(len(first)))
        return True, _prod([_dim(first, a) for a in axes])
    if op in ("Softmax", "LogSoftmax", "Hardmax", "CumSum"):
        if op == "CumSum":
            init = initializers.get(node.input[1]) if len(node.input) > 1 else None
            axis = int(numpy_helper.to_array(init)) if init is not None else None
        else:
            axis = _attr(node, "axis", -1)
        return True, None if axis is None else _dim(first, axis)
    if op == "LayerNormalization":
        axis = _attr(node, "axis", -1)
        if first is None:
            return True, None
        return True, _prod(list(first[axis:]))
    if op in ("GlobalAveragePool", "GlobalLpPool"):
        return True, None if first is None else _prod(list(first[2:]))
    return False, None
