"""harness.pipeline.estimate: the shapes a cost announcement suggests are ones castguard accepts for the model."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from harness.data.feeds import input_specs
from harness.data.shapes import parse_input_shapes, resolve_shapes
from harness.pipeline.estimate import smaller_shapes


def _model(inputs: list[tuple[str, int, list[int | str]]]) -> onnx.ModelProto:
    values = [helper.make_tensor_value_info(name, elem, dims) for name, elem, dims in inputs]
    nodes = [helper.make_node("Identity", [name], [f"{name}_out"]) for name, _, _ in inputs]
    outputs = [helper.make_tensor_value_info(f"{name}_out", elem, None) for name, elem, _ in inputs]
    return helper.make_model(
        helper.make_graph(nodes, "g", values, outputs), opset_imports=[helper.make_opsetid("", 17)]
    )


def test_only_dynamic_dims_are_halved_and_castguard_accepts_the_result() -> None:
    model = _model(
        [
            ("input_ids", TensorProto.INT64, ["batch", "sequence"]),
            ("attention_mask", TensorProto.INT64, ["batch", "sequence"]),
            ("pixels", TensorProto.FLOAT, [1, 3, 16, 16]),
            ("hidden", TensorProto.FLOAT, ["batch", 64]),
        ]
    )
    feed = {
        "input_ids": np.zeros((8, 512), np.int64),
        "attention_mask": np.ones((8, 512), np.int64),
        "pixels": np.zeros((1, 3, 16, 16), np.float32),
        "hidden": np.zeros((8, 64), np.float32),
    }
    suggested = smaller_shapes(model, feed)
    assert suggested == "--input-shapes input_ids:4x256,attention_mask:4x256,hidden:4x64"
    given = parse_input_shapes(suggested.removeprefix("--input-shapes "))
    plan = resolve_shapes(input_specs(model), given, where="test")  # raises on a shape the model refuses
    assert plan is not None


def test_a_model_with_fixed_shapes_gets_no_shape_suggestion() -> None:
    model = _model([("x", TensorProto.FLOAT, [1, 16]), ("b", TensorProto.FLOAT, ["batch", 4])])
    assert smaller_shapes(model, {"x": np.zeros((1, 16), np.float32), "b": np.zeros((1, 4), np.float32)}) == ""
