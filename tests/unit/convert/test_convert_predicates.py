"""A user's Cast read only by IsInf/IsNaN is dropped (harness.convert.predicates): IsInf(Cast(x, DOUBLE)) is
IsInf(x) for any float x, so the Cast asks for nothing; the predicate then reads the stored type where its schema
allows it (fp16 from opset 20), else an fp32 Cast (AutoCast's test_conv_isinf_conversion, opsets 13 and 21)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from harness.convert import ConvertOptions, convert
from harness.runners import make_runner
from tests.helpers.convert_builders import F32, elem_types, model, node, vi

F16, F64, BOOL = TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BOOL


def isinf_model(*, opset: int, to: int = F64, extra_reader: bool = False) -> onnx.ModelProto:
    nodes = [
        node("Relu", ["x"], ["r"], "relu"),
        node("Cast", ["r"], ["c"], "user_cast", to=to),
        node("IsInf", ["c"], ["inf"], "isinf"),
        node("IsNaN", ["c"], ["nan"], "isnan"),
        node("Or", ["inf", "nan"], ["y"], "or"),
    ]
    outputs = [vi("y", BOOL, [2, 4])]
    if extra_reader:
        nodes.append(node("Neg", ["c"], ["z"], "neg"))
        outputs.append(vi("z", to, [2, 4]))
    return model(nodes, [vi("x", F32, [2, 4])], outputs, opset=opset)


def reader_input_type(converted: onnx.ModelProto, op: str) -> int:
    types = elem_types(converted)
    return types[next(n for n in converted.graph.node if n.op_type == op).input[0]]


@pytest.mark.parametrize(("opset", "read_as"), [(13, F32), (21, F16)])
def test_a_double_cast_read_only_by_predicates_is_dropped(opset: int, read_as: int) -> None:
    converted = convert(isinf_model(opset=opset), options=ConvertOptions(), magnitudes=None).model
    assert "user_cast" not in {n.name for n in converted.graph.node}
    assert reader_input_type(converted, "IsInf") == read_as  # IsInf takes fp16 from opset 20 only
    assert reader_input_type(converted, "IsNaN") == F16  # IsNaN does from opset 13
    onnx.checker.check_model(converted, full_check=True)
    feed = {"x": np.array([[1, -2, 3e4, 7], [60000, 0.5, -1, 2]], np.float32)}
    want = make_runner("ort", isinf_model(opset=opset)).run([feed]).outputs[0]["y"]
    got = make_runner("emulate", converted).run([{"x": feed["x"].astype(np.float16)}]).outputs[0]["y"]
    np.testing.assert_array_equal(got, want)


def test_a_cast_with_another_reader_is_kept() -> None:
    converted = convert(
        isinf_model(opset=21, extra_reader=True), options=ConvertOptions(keep_io_types=True), magnitudes=None
    ).model
    cast = next(n for n in converted.graph.node if n.name == "user_cast")
    assert reader_input_type(converted, "IsInf") == F64 and cast.attribute[0].i == F64


def test_a_narrowing_cast_is_kept_it_changes_the_answer() -> None:
    """IsInf(Cast(x, FLOAT16)) is True for x = 1e5: that Cast is part of the question."""
    converted = convert(isinf_model(opset=21, to=F16), options=ConvertOptions(), magnitudes=None).model
    assert "user_cast" in {n.name for n in converted.graph.node}
