"""Small real ONNX graphs for the converter tests, built with onnx.helper (no files, no downloads)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32 = TensorProto.FLOAT
IR = 8  # loadable by onnxruntime 1.31 (max IR 13) and valid for opsets up to 22


def vi(name: str, elem: int = F32, shape: Sequence[int | str] | None = None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    initializers: Sequence[onnx.TensorProto] = (),
    *,
    opset: int = 17,
    ir: int = IR,
    extra_opsets: Sequence[tuple[str, int]] = (),
) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    opsets = [helper.make_opsetid("", opset), *(helper.make_opsetid(d, v) for d, v in extra_opsets)]
    built = helper.make_model(graph, opset_imports=opsets, producer_name="castguard-tests")
    built.ir_version = ir
    return built


def mlp(*, k: int = 16, n: int = 8, scale: float = 1.0, seed: int = 0) -> onnx.ModelProto:
    """x[2,k] -> MatMul(W) -> Add(B) -> Relu -> Softmax -> y."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((k, n)) * scale).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["mm"], name="matmul"),
        helper.make_node("Add", ["mm", "B"], ["add"], name="add"),
        helper.make_node("Relu", ["add"], ["relu"], name="relu"),
        helper.make_node("Softmax", ["relu"], ["y"], name="softmax", axis=-1),
    ]
    return model(nodes, [vi("x", F32, ["batch", k])], [vi("y", F32, ["batch", n])], [init("W", w), init("B", b)])


def chain(ops: Sequence[str], *, shape: Sequence[int] = (2, 4)) -> onnx.ModelProto:
    """x -> op0 -> op1 -> ... -> y for unary ops, nodes named n0, n1, ..."""
    names = ["x", *[f"t{i}" for i in range(len(ops) - 1)], "y"]
    nodes = [helper.make_node(op, [names[i]], [names[i + 1]], name=f"n{i}") for i, op in enumerate(ops)]
    return model(nodes, [vi("x", F32, list(shape))], [vi("y", F32, list(shape))])


def node(op: str, inputs: Sequence[str], outputs: Sequence[str], name: str, **attrs: object) -> onnx.NodeProto:
    return helper.make_node(op, list(inputs), list(outputs), name=name, **attrs)


def elem_types(converted: onnx.ModelProto) -> dict[str, int]:
    """Element type of every top-level tensor of a converted model (after strict inference)."""
    inferred = onnx.shape_inference.infer_shapes(converted, strict_mode=True)
    types = {
        vi.name: vi.type.tensor_type.elem_type
        for vi in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]
    }
    types.update({i.name: i.data_type for i in converted.graph.initializer})
    return types


def node_types(converted: onnx.ModelProto) -> dict[str, int]:
    """Node name -> element type of its first output."""
    types = elem_types(converted)
    return {n.name: types[n.output[0]] for n in converted.graph.node}


def casts(converted: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in converted.graph.node if n.op_type == "Cast"]


def run_ort(converted: onnx.ModelProto, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(converted.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feed)
