"""First divergent tensor: intermediates of the FP32 model vs the emulated converted model, in graph order."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from harness.convert import ConvertOptions, convert
from harness.diagnose import ModelPair, first_divergence, with_outputs
from harness.judge.tolerances import TolerancePolicy
from tests.helpers.graphs import cancellation_model, make_model, mlp_model

F32 = TensorProto.FLOAT


def overflow_chain() -> onnx.ModelProto:
    """x -> Mul(x, x) [overflows fp16 for x > 256] -> Mul(1e-3) -> Relu -> y: the square is where fp16 breaks."""
    nodes = [
        helper.make_node("Mul", ["x", "x"], ["sq"], name="square"),
        helper.make_node("Mul", ["sq", "small"], ["down"], name="scale_down"),
        helper.make_node("Relu", ["down"], ["y"], name="relu"),
    ]
    inits = [numpy_helper.from_array(np.array(1e-3, np.float32), "small")]
    return make_model(nodes, [("x", F32, [1, 4])], [("y", F32, [1, 4])], initializers=inits)


def _feeds(low: float, high: float, shape: tuple[int, ...]) -> list[dict[str, np.ndarray]]:
    return [{"x": np.random.default_rng(0).uniform(low, high, shape).astype(np.float32)}]


def test_the_first_tensor_beyond_tolerance_is_named_not_a_later_one() -> None:
    model = overflow_chain()
    converted = convert(model, options=ConvertOptions(data_max=math.inf), magnitudes=None).model
    found = first_divergence(
        ModelPair(model, converted, _feeds(300, 400, (1, 4)), precision="fp16", policy=TolerancePolicy())
    )
    assert found is not None
    assert (found.tensor, found.node, found.op) == ("sq", "square", "Mul")
    assert math.isinf(found.max_abs)


def test_rounding_that_only_shows_after_cancellation_is_found_where_it_shows() -> None:
    model = cancellation_model()
    converted = convert(model, options=ConvertOptions(), magnitudes=None).model
    found = first_divergence(
        ModelPair(model, converted, _feeds(-0.5, 0.5, (1, 16)), precision="fp16", policy=TolerancePolicy())
    )
    assert found is not None and (found.tensor, found.node, found.op) == ("y", "sub", "Sub")
    assert found.max_rel > 0.01


def test_a_converted_model_within_tolerance_has_no_divergence() -> None:
    model = mlp_model()
    converted = convert(model, options=ConvertOptions(keep_io_types=True), magnitudes=None).model
    assert (
        first_divergence(ModelPair(model, converted, _feeds(-1, 1, (1, 8)), precision="fp16", policy=TolerancePolicy()))
        is None
    )


def test_with_outputs_adds_only_missing_names_and_leaves_the_model_alone() -> None:
    model = mlp_model()
    marked = with_outputs(model, ["h", "y", "r"])
    assert [o.name for o in marked.graph.output] == ["y", "h", "r"]
    assert [o.name for o in model.graph.output] == ["y"]
