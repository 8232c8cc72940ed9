"""Small real ONNX graphs built in code for the harness-core tests (not a test module)."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 10  # onnxruntime 1.31 reads IR <= 13; onnx 1.23 would write 14 by default


def make_model(nodes: Sequence[onnx.NodeProto], inputs: Sequence[tuple[str, int, Sequence[int | str | None]]],
               outputs: Sequence[tuple[str, int, Sequence[int | str | None] | None]], *,
               initializers: Sequence[onnx.TensorProto] = (), opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(
        list(nodes), "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION)
    onnx.checker.check_model(model, full_check=True)
    return model


def fp16_max_model(elem: int = TensorProto.FLOAT16, n: int = 8) -> onnx.ModelProto:
    """Seed 003: x -> MatMul(rot90 I) -> Add(65504) -> Sub(65504) -> MatMul(rot90 I) -> y, all in ``elem``."""
    np_t = helper.tensor_dtype_to_np_dtype(elem)
    flip = np.rot90(np.eye(n)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "flip"], ["a"], name="MatMul_0"),
             helper.make_node("Add", ["a", "big"], ["b"], name="Add"),
             helper.make_node("Sub", ["b", "big"], ["c"], name="Sub"),
             helper.make_node("MatMul", ["c", "flip"], ["y"], name="MatMul_1")]
    inits = [numpy_helper.from_array(flip.astype(np_t), "flip"),
             numpy_helper.from_array(np.array(65504.0, np.float32).astype(np_t), "big")]
    return make_model(nodes, [("x", elem, [1, n])], [("y", elem, [1, n])], initializers=inits)


def mixed_fp16_max_model(n: int = 8) -> onnx.ModelProto:
    """fp32 I/O and MatMuls, Add/Sub in fp16 between explicit Casts (what a converter would emit)."""
    flip = np.rot90(np.eye(n)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "flip"], ["a"]),
             helper.make_node("Cast", ["a"], ["a16"], to=TensorProto.FLOAT16),
             helper.make_node("Add", ["a16", "big"], ["b"]),
             helper.make_node("Sub", ["b", "big"], ["c16"]),
             helper.make_node("Cast", ["c16"], ["c"], to=TensorProto.FLOAT),
             helper.make_node("MatMul", ["c", "flip"], ["y"])]
    inits = [numpy_helper.from_array(flip, "flip"), numpy_helper.from_array(np.array(65504.0, np.float16), "big")]
    return make_model(nodes, [("x", TensorProto.FLOAT, [1, n])], [("y", TensorProto.FLOAT, [1, n])],
                      initializers=inits)


def mlp_model(seed: int = 0, *, hidden: int = 16) -> onnx.ModelProto:
    """fp32 x[1,8] -> Gemm -> Relu -> Gemm -> y[1,4]: a small model for plugin and golden tests."""
    rng = np.random.default_rng(seed)
    w1 = rng.normal(size=(8, hidden)).astype(np.float32)
    w2 = rng.normal(size=(hidden, 4)).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["x", "w1"], ["h"], name="fc1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Gemm", ["r", "w2"], ["y"], name="fc2")]
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")]
    return make_model(nodes, [("x", TensorProto.FLOAT, [1, 8])], [("y", TensorProto.FLOAT, [1, 4])],
                      initializers=inits, opset=13)


def cancellation_model() -> onnx.ModelProto:
    """fp32 y = (x + 256) - 256: activations stay under the converter's data_max=512, but fp16's ulp at 256 is
    0.25, so for x in [-0.5, 0.5] a truly rounded fp16 run returns multiples of 0.25 while ORT CPU's fp32
    island returns x to within fp32's ulp at 256 (3e-5)."""
    nodes = [helper.make_node("Add", ["x", "c"], ["a"], name="add"), helper.make_node("Sub", ["a", "c"], ["y"], name="sub")]
    return make_model(nodes, [("x", TensorProto.FLOAT, [1, 16])], [("y", TensorProto.FLOAT, [1, 16])],
                      initializers=[numpy_helper.from_array(np.array(256.0, np.float32), "c")])


def to_low(model: onnx.ModelProto, elem: int = TensorProto.FLOAT16) -> onnx.ModelProto:
    """Every fp32 initializer and graph I/O of ``model`` retyped to ``elem`` (a fully low-precision model)."""
    low = onnx.ModelProto()
    low.CopyFrom(model)
    np_t = helper.tensor_dtype_to_np_dtype(elem)
    for init in low.graph.initializer:
        if init.data_type == TensorProto.FLOAT:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np_t), init.name))
    for value in [*low.graph.input, *low.graph.output]:
        if value.type.tensor_type.elem_type == TensorProto.FLOAT:
            value.type.tensor_type.elem_type = elem
    onnx.checker.check_model(low, full_check=True)
    return low


def save(model: onnx.ModelProto, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path
