"""A linear head whose worst input is a corner of the input box (the hunt's test model, built in code)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def square_head(n: int = 256, m: int = 16, peak: float = 400.0, seed: int = 0) -> onnx.ModelProto:
    """x [1,n] -> h = x @ w -> h * h -> mean over the m columns. Random x in [-1,1] gives |h| ~ 8 (h^2 ~ 60); the
    corner x = sign(w[:, j]) of the largest column gives |h_j| = peak = 400 and h_j^2 = 160000 > 65504."""
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.5, 1.0, (n, m)) * rng.choice([-1.0, 1.0], (n, m))
    w *= peak / np.abs(w).sum(axis=0).max()
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="proj"),
        helper.make_node("Mul", ["h", "h"], ["sq"], name="square"),
        helper.make_node("ReduceMean", ["sq"], ["y"], name="mean", axes=[1], keepdims=1),
    ]
    graph = helper.make_graph(
        nodes,
        "square_head",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])],
        initializer=[numpy_helper.from_array(w.astype(np.float32), "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="castguard-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def weights(model: onnx.ModelProto) -> np.ndarray:
    return numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == "w")).astype(np.float64)


def worst_corner(w: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """The corner of [lo, hi]^n with the largest |x @ w| over every column (brute force over columns and signs)."""
    best, corner = -1.0, np.zeros(w.shape[0])
    for j in range(w.shape[1]):
        for sign in (1.0, -1.0):
            x = np.where(sign * w[:, j] > 0, hi, lo)
            value = abs(float(x @ w[:, j]))
            if value > best:
                best, corner = value, x
    return corner
