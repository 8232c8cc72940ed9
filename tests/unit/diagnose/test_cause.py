"""The cause is a computed tensor whose error reaches a failing output, not a divergence the graph absorbs."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from harness.convert import ConvertOptions, convert
from harness.diagnose import ModelPair, first_divergence
from harness.diagnose.profile import divergence_profile
from harness.judge.tolerances import TolerancePolicy
from tests.helpers.graphs import make_model
from tests.helpers.llama import MASK_FILL, NORM_NODES, llama_feeds, llama_model

F32 = TensorProto.FLOAT


def test_llama_at_data_max_inf_is_diagnosed_at_the_rmsnorm_not_the_mask_fill() -> None:
    model, feeds = llama_model(), llama_feeds()
    converted = convert(model, options=ConvertOptions(data_max=math.inf), magnitudes=None).model
    profile = divergence_profile(ModelPair(model, converted, feeds, precision="fp16", policy=TolerancePolicy()))
    rows = {r.tensor: r for r in profile.rows}
    # the mask fill and the masked scores are beyond tolerance (clamped -FLT_MAX); Softmax absorbs it
    assert not rows[f"{MASK_FILL}_output_0"].passed and not rows[f"{MASK_FILL}_output_0"].computed
    assert not rows["masked"].passed and rows["masked"].computed and rows["probs"].passed
    found = first_divergence(ModelPair(model, converted, feeds, precision="fp16", policy=TolerancePolicy()))
    assert found is not None
    assert found.node in NORM_NODES and found.op in ("Pow", "Mul", "ReduceMean")
    assert (found.tensor, found.node) == ("x2", "/m/norm/Pow") and math.isinf(found.max_abs)


def relu_absorbs_model() -> onnx.ModelProto:
    """t = x + mask, the mask filled with -FLT_MAX where a constant condition is False (clamped to -65504 in
    fp16), is far off there, but Relu(t) is 0 either way; the real failure is the square of s = relu + x, which
    overflows fp16 for x > 256."""
    cond = np.array([[True, False, True, False]])
    nodes = [
        helper.make_node(
            "Constant",
            [],
            ["fill"],
            name="fill",
            value=helper.make_tensor("v", F32, [], [float(np.finfo(np.float32).min)]),
        ),
        helper.make_node("Constant", [], ["zero"], name="zero", value=helper.make_tensor("z", F32, [], [0.0])),
        helper.make_node("Constant", [], ["cond"], name="cond", value=numpy_helper.from_array(cond, "c")),
        helper.make_node("Where", ["cond", "zero", "fill"], ["mask"], name="where"),
        helper.make_node("Add", ["x", "mask"], ["t"], name="shift"),
        helper.make_node("Relu", ["t"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "x"], ["s"], name="add_back"),
        helper.make_node("Mul", ["s", "s"], ["sq"], name="square"),
        helper.make_node("Mul", ["sq", "small"], ["y"], name="scale"),
    ]
    inits = [numpy_helper.from_array(np.array(1e-3, np.float32), "small")]
    return make_model(nodes, [("x", F32, [1, 4])], [("y", F32, [1, 4])], initializers=inits)


def test_a_computed_divergence_that_relu_absorbs_is_not_the_cause() -> None:
    model = relu_absorbs_model()
    feeds = [{"x": np.random.default_rng(0).uniform(200, 250, (1, 4)).astype(np.float32)}]
    converted = convert(model, options=ConvertOptions(data_max=math.inf), magnitudes=None).model
    profile = divergence_profile(ModelPair(model, converted, feeds, precision="fp16", policy=TolerancePolicy()))
    rows = {r.tensor: r for r in profile.rows}
    assert not rows["t"].passed and rows["t"].computed and rows["r"].passed  # born and absorbed
    found = first_divergence(ModelPair(model, converted, feeds, precision="fp16", policy=TolerancePolicy()))
    assert found is not None and (found.tensor, found.node, found.op) == ("sq", "square", "Mul")


def test_no_cause_when_every_output_agrees() -> None:
    model = relu_absorbs_model()
    feeds = [{"x": np.random.default_rng(0).uniform(1, 2, (1, 4)).astype(np.float32)}]
    converted = convert(model, options=ConvertOptions(data_max=math.inf), magnitudes=None).model
    profile = divergence_profile(ModelPair(model, converted, feeds, precision="fp16", policy=TolerancePolicy()))
    assert not profile.row("t").passed  # type: ignore[union-attr]
    assert first_divergence(ModelPair(model, converted, feeds, precision="fp16", policy=TolerancePolicy())) is None


def if_reads_the_square() -> onnx.ModelProto:
    """sq = x * x overflows fp16; an If reads sq only from inside its branches (outer scope), so the path from the
    cause to the output runs through a subgraph."""

    def branch(name: str, factor: float) -> onnx.GraphProto:
        k = numpy_helper.from_array(np.array(factor, np.float32), f"{name}_k")
        return helper.make_graph(
            [helper.make_node("Mul", ["sq", f"{name}_k"], [f"{name}_y"], name=f"{name}_mul")],
            name,
            [],
            [helper.make_tensor_value_info(f"{name}_y", F32, [1, 4])],
            [k],
        )

    nodes = [
        helper.make_node("Mul", ["x", "x"], ["sq"], name="square"),
        helper.make_node(
            "If", ["flag"], ["y"], name="choose", then_branch=branch("then", 1e-3), else_branch=branch("else", 2e-3)
        ),
    ]
    return make_model(nodes, [("x", F32, [1, 4]), ("flag", TensorProto.BOOL, [])], [("y", F32, [1, 4])])


def test_a_cause_read_only_inside_an_if_branch_is_still_the_cause() -> None:
    model = if_reads_the_square()
    feeds = [{"x": np.random.default_rng(0).uniform(300, 400, (1, 4)).astype(np.float32), "flag": np.array(True)}]
    converted = convert(model, options=ConvertOptions(data_max=math.inf), magnitudes=None).model
    found = first_divergence(ModelPair(model, converted, feeds, precision="fp16", policy=TolerancePolicy()))
    assert found is not None and (found.tensor, found.node) == ("sq", "square")
