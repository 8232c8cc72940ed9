"""QDQ (int8) models (issue 32 item 8): Q/DQ found and named, the DQ -> op -> Q pattern never split by Casts, the
rest of the model converted."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto

from harness.convert import ConvertOptions, convert
from harness.convert.qdq import qdq_nodes
from tests.helpers.convert_builders import F32, init, model, node, vi

SCALE = np.float32(0.02)


def _q(name: str, x: str, out: str) -> onnx.NodeProto:
    return node("QuantizeLinear", [x, "s", "zp"], [out], name)


def _dq(name: str, x: str, out: str, scale: str = "s", zp: str = "zp") -> onnx.NodeProto:
    return node("DequantizeLinear", [x, scale, zp], [out], name)


def qdq_cnn() -> onnx.ModelProto:
    """x -> Q -> DQ -> Conv (DQ int8 weights) -> Q -> DQ -> Relu -> GlobalAveragePool -> Flatten -> Q -> DQ ->
    Gemm (DQ int8 weights) -> Q -> DQ -> a float tail (Mul, Add, Softmax) that is no QDQ pattern."""
    rng = np.random.default_rng(0)
    w1 = rng.integers(-100, 100, (8, 3, 3, 3), dtype=np.int8)
    w2 = rng.integers(-100, 100, (8, 10), dtype=np.int8)
    return model(
        [
            _q("q_in", "x", "xq"),
            _dq("dq_in", "xq", "xd"),
            _dq("dq_w1", "w1", "w1d", "sw", "zpw"),
            node("Conv", ["xd", "w1d", "b1"], ["c"], "conv", pads=[1, 1, 1, 1]),
            _q("q_conv", "c", "cq"),
            _dq("dq_conv", "cq", "cd"),
            node("Relu", ["cd"], ["r"], "relu"),
            node("GlobalAveragePool", ["r"], ["p"], "pool"),
            node("Flatten", ["p"], ["f"], "flatten"),
            _q("q_flat", "f", "fq"),
            _dq("dq_flat", "fq", "fd"),
            _dq("dq_w2", "w2", "w2d", "sw", "zpw"),
            node("Gemm", ["fd", "w2d", "b2"], ["g"], "gemm"),
            _q("q_gemm", "g", "gq"),
            _dq("dq_gemm", "gq", "gd"),
            node("Mul", ["gd", "two"], ["m"], "tail_mul"),
            node("Add", ["m", "one"], ["a"], "tail_add"),
            node("Softmax", ["a"], ["y"], "tail_softmax"),
        ],
        [vi("x", F32, [1, 3, 8, 8])],
        [vi("y", F32, [1, 10])],
        [
            init("s", np.array(SCALE)),
            init("zp", np.array(0, np.int8)),
            init("sw", np.array(np.float32(0.005))),
            init("zpw", np.array(0, np.int8)),
            init("w1", w1),
            init("b1", np.zeros(8, np.float32)),
            init("w2", w2),
            init("b2", np.zeros(10, np.float32)),
            init("two", np.array([2.0], np.float32)),
            init("one", np.array([1.0], np.float32)),
        ],
        opset=13,
    )


def test_qdq_nodes_are_the_pattern_and_nothing_else() -> None:
    found = qdq_nodes(list(qdq_cnn().graph.node))
    quant = {n.name for n in qdq_cnn().graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")}
    assert quant | {"conv", "relu", "flatten", "gemm", "tail_mul"} == set(found)
    assert qdq_nodes(list(model([node("Relu", ["x"], ["y"], "r")], [vi("x")], [vi("y")]).graph.node)) == {}


def test_no_cast_splits_dq_op_q_and_the_rest_is_converted() -> None:
    result = convert(qdq_cnn(), options=ConvertOptions(), magnitudes=None)
    graph = result.model.graph
    producer = {o: n for n in graph.node for o in n.output}
    for op in (n for n in graph.node if n.op_type in ("Conv", "Gemm")):
        for name in op.input[:2]:
            assert producer[name].op_type == "DequantizeLinear", f"{op.name} reads {producer[name].op_type}"
    for name in ("q_conv", "q_flat", "q_gemm"):  # op -> Q: the op's own output, no Cast between
        (q,) = [n for n in graph.node if n.name == name]
        assert producer[q.input[0]].op_type in ("Conv", "Flatten", "Gemm"), (
            f"{producer[q.input[0]].op_type} feeds {name}"
        )
    readers = [n for n in graph.node for i in n.input if i in producer and producer[i].op_type == "DequantizeLinear"]
    assert readers and all(n.op_type != "Cast" for n in readers)  # nothing casts a DQ's output
    assert set(result.qdq_kept()) >= {"conv", "gemm", "q_conv", "dq_w1"}
    assert {"pool", "tail_add", "tail_softmax"} <= set(result.low_nodes)  # the rest is converted
    types = {v.name: v.type.tensor_type.elem_type for v in [*graph.value_info, *graph.output]}
    assert types["xq"] == TensorProto.INT8 and types["cd"] == TensorProto.FLOAT
