"""Small CNNs with the ops TensorRT-RTX 1.7.1 cannot build in bf16 (HardSwish, ConvTranspose), built in code."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.helpers.graphs import make_model

F = TensorProto.FLOAT


def _conv(rng: np.random.Generator, name: str, cin: int, cout: int) -> onnx.TensorProto:
    return numpy_helper.from_array((rng.standard_normal((cout, cin, 3, 3)) * 0.2).astype(np.float32), name)


def hardswish_cnn(seed: int = 0) -> onnx.ModelProto:
    """x[N,3,16,16] -> Conv -> HardSwish (node ``/bn1/act/HardSwish``, as in timm's MobileNetV3) -> Conv -> Relu
    -> GlobalAveragePool -> y[N,8,1,1], opset 17 with a dynamic batch."""
    rng = np.random.default_rng(seed)
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="/conv_stem/Conv", pads=[1, 1, 1, 1]),
        helper.make_node("HardSwish", ["c1"], ["h1"], name="/bn1/act/HardSwish"),
        helper.make_node("Conv", ["h1", "w2"], ["c2"], name="/blocks/Conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="/blocks/Relu"),
        helper.make_node("GlobalAveragePool", ["r2"], ["y"], name="/pool"),
    ]
    return make_model(
        nodes,
        [("x", F, ["N", 3, 16, 16])],
        [("y", F, ["N", 8, 1, 1])],
        initializers=[_conv(rng, "w1", 3, 8), _conv(rng, "w2", 8, 8)],
    )


def conv_transpose_net(seed: int = 0) -> onnx.ModelProto:
    """x[1,4,8,8] -> ConvTranspose (node ``up``, stride 2) -> Relu -> y[1,4,16,16], opset 17."""
    rng = np.random.default_rng(seed)
    weight = numpy_helper.from_array((rng.standard_normal((4, 4, 2, 2)) * 0.3).astype(np.float32), "w")
    nodes = [
        helper.make_node("ConvTranspose", ["x", "w"], ["u"], name="up", strides=[2, 2]),
        helper.make_node("Relu", ["u"], ["y"], name="act"),
    ]
    return make_model(nodes, [("x", F, [1, 4, 8, 8])], [("y", F, [1, 4, 16, 16])], initializers=[weight])
