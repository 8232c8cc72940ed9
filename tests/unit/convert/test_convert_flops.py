"""FLOP share from shapes, and Constant values converted by their users."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

from harness.convert import ConvertOptions, convert
from tests.helpers.convert_builders import F32, casts, init, model, node, vi


def test_lowp_flop_share_is_weighted_by_matmul_flops() -> None:
    graph = model(
        [node("MatMul", ["x", "W"], ["m"], "mm"), node("Relu", ["m"], ["y"], "relu")],
        [vi("x", F32, [4, 64])],
        [vi("y", F32, [4, 32])],
        [init("W", np.ones((64, 32), np.float32) / 64)],
    )
    matmul, relu = 2 * 4 * 32 * 64, 4 * 32
    excluded = convert(graph, options=ConvertOptions(op_types_to_exclude=("MatMul",)), magnitudes=None)
    assert excluded.lowp_flop_share == pytest.approx(relu / (matmul + relu))
    everything = convert(graph, options=ConvertOptions(), magnitudes=None)
    assert everything.lowp_flop_share == 1.0


def test_conv_flops_use_channels_per_group_and_kernel() -> None:
    graph = model(
        [node("Conv", ["x", "W"], ["c"], "conv", group=2), node("Relu", ["c"], ["y"], "relu")],
        [vi("x", F32, [1, 4, 8, 8])],
        [vi("y", F32, [1, 6, 6, 6])],
        [init("W", np.ones((6, 2, 3, 3), np.float32) / 18)],
    )
    conv, relu = 2 * (6 * 6 * 6) * (2 * 3 * 3), 6 * 6 * 6
    result = convert(graph, options=ConvertOptions(op_types_to_exclude=("Relu",)), magnitudes=None)
    assert result.lowp_flop_share == pytest.approx(conv / (conv + relu))


def test_constant_values_are_converted_by_their_users() -> None:
    graph = model(
        [
            node("Constant", [], ["k"], "const", value=init("", np.array([0.5, 1.5], np.float32))),
            node("Mul", ["x", "k"], ["y"], "mul"),
        ],
        [vi("x", F32, [2])],
        [vi("y", F32, [2])],
    )
    result = convert(graph, options=ConvertOptions(), magnitudes=None)
    constant = next(n for n in result.model.graph.node if n.op_type == "Constant")
    assert constant.attribute[0].t.data_type == TensorProto.FLOAT16
    assert casts(result.model) == []
