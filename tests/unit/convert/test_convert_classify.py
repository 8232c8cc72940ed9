"""Classification rules, each on a real graph built with onnx.helper."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto

from harness.convert import ConvertOptions, Magnitudes, collect_magnitudes, convert
from harness.core.errors import ConversionError, UserError
from tests.helpers.convert_builders import F32, casts, chain, init, mlp, model, node, node_types, vi

F16, BF16 = TensorProto.FLOAT16, TensorProto.BFLOAT16


def mags(absmax: dict[str, float], dtypes: dict[str, int] | None = None) -> Magnitudes:
    return Magnitudes(absmax=absmax, shapes={}, dtypes=dtypes or {}, data_source="test")


def reasons(result) -> dict[str, str]:  # noqa: ANN001
    return dict(result.high_nodes)


def test_default_converts_everything_in_range() -> None:
    result = convert(mlp(), options=ConvertOptions(), magnitudes=collect_magnitudes(mlp()))
    assert result.low_nodes == ("matmul", "add", "relu", "softmax")
    assert result.high_nodes == ()
    assert result.lowp_flop_share == 1.0


def test_nodes_to_exclude_is_anchored_at_the_start() -> None:
    graph = chain(["Relu", "Relu", "Neg"])
    graph.graph.node[0].name, graph.graph.node[1].name, graph.graph.node[2].name = "relu_a", "my_relu", "neg"
    result = convert(graph, options=ConvertOptions(nodes_to_exclude=("relu",)), magnitudes=None)
    assert reasons(result) == {"relu_a": "nodes_to_exclude: 'relu_a' matches 'relu'"}
    substring = convert(graph, options=ConvertOptions(nodes_to_exclude=(".*relu",)), magnitudes=None)
    assert set(reasons(substring)) == {"relu_a", "my_relu"}


def test_op_types_to_exclude_and_include_overrides() -> None:
    graph = chain(["Relu", "Neg", "Relu"])
    result = convert(graph, options=ConvertOptions(op_types_to_exclude=("Relu",)), magnitudes=None)
    assert set(reasons(result)) == {"n0", "n2"}
    by_name = convert(
        graph, options=ConvertOptions(op_types_to_exclude=("Relu",), nodes_to_include=("n2",)), magnitudes=None
    )
    assert set(reasons(by_name)) == {"n0"}
    by_type = convert(
        graph, options=ConvertOptions(op_types_to_exclude=("Relu",), op_types_to_include=("Relu",)), magnitudes=None
    )
    assert reasons(by_type) == {}


def test_init_max_keeps_node_with_large_initializer_fp32() -> None:
    graph = model(
        [node("Div", ["x", "K"], ["d"], "div"), node("Mul", ["d", "M"], ["y"], "mul")],
        [vi("x", F32, [4])],
        [vi("y", F32, [4])],
        [init("K", np.full(4, 1e6, np.float32)), init("M", np.full(4, 2.0, np.float32))],
    )
    result = convert(graph, options=ConvertOptions(), magnitudes=None)
    assert reasons(result) == {"div": "init_max: initializer 'K' absmax 1e+06 > 65504"}
    assert {i.name: i.data_type for i in result.model.graph.initializer} == {"K": F32, "M": F16}


def test_init_max_applies_to_constant_node_values() -> None:
    graph = model(
        [
            node("Constant", [], ["k"], "const", value=init("", np.full(4, 1e6, np.float32))),
            node("Div", ["x", "k"], ["y"], "div"),
        ],
        [vi("x", F32, [4])],
        [vi("y", F32, [4])],
    )
    result = convert(graph, options=ConvertOptions(), magnitudes=None)
    assert "init_max" in reasons(result)["div"]


def test_data_max_keeps_producer_and_consumers_fp32_with_reason() -> None:
    graph = model(
        [
            node("Mul", ["x", "S"], ["big"], "scale"),
            node("Relu", ["big"], ["r"], "relu"),
            node("Softmax", ["r"], ["y"], "softmax"),
        ],
        [vi("x", F32, [1, 8])],
        [vi("y", F32, [1, 8])],
        [init("S", np.full(8, 70000.0, np.float32))],
    )
    data = collect_magnitudes(graph, feeds=[{"x": np.ones((1, 8), np.float32)}])
    result = convert(graph, options=ConvertOptions(init_max=math.inf), magnitudes=data)
    assert reasons(result)["scale"] == "data_max: output 'big' absmax 70000 > 512"
    assert reasons(result)["relu"] == "data_max: input 'big' absmax 70000 > 512"
    assert "data_max: input 'r'" in reasons(result)["softmax"]


def test_integer_tensors_are_never_range_checked() -> None:
    table = np.arange(1000 * 4, dtype=np.float32).reshape(1000, 4) / 4000
    graph = model(
        [node("Gather", ["T", "ids"], ["g"], "gather"), node("Relu", ["g"], ["y"], "relu")],
        [vi("ids", TensorProto.INT64, [3])],
        [vi("y", F32, [3, 4])],
        [init("T", table)],
    )
    data = collect_magnitudes(graph, feeds=[{"ids": np.array([5, 900, 7], np.int64)}])
    assert data.absmax["ids"] == 900
    result = convert(graph, options=ConvertOptions(), magnitudes=data)
    assert result.low_nodes == ("gather", "relu")


def test_non_finite_magnitudes_count_as_above_every_threshold() -> None:
    graph = model(
        [node("Div", ["x", "Z"], ["d"], "div"), node("Neg", ["d"], ["y"], "neg")],
        [vi("x", F32, [2])],
        [vi("y", F32, [2])],
        [init("Z", np.zeros(2, np.float32))],
    )
    data = collect_magnitudes(graph, feeds=[{"x": np.ones(2, np.float32)}])
    assert data.absmax["d"] == math.inf
    result = convert(graph, options=ConvertOptions(data_max=1e30), magnitudes=data)
    assert set(reasons(result)) == {"div", "neg"}


@pytest.mark.parametrize(("limit", "kept"), [(8, True), (16, False)])
def test_max_depth_of_reduction_matmul(limit: int, kept: bool) -> None:
    result = convert(mlp(k=16), options=ConvertOptions(max_depth_of_reduction=limit), magnitudes=None)
    assert ("matmul" in reasons(result)) is kept
    if kept:
        assert reasons(result)["matmul"] == f"max_depth_of_reduction: depth 16 > {limit}"


def test_depth_with_data_max_inf_uses_inferred_shapes() -> None:
    """AutoCast crashes (TypeError) on data_max=inf + max_depth_of_reduction; here shapes come from inference."""
    conv = model(
        [
            node("Conv", ["x", "W"], ["c"], "conv", pads=[1, 1, 1, 1]),
            node("ReduceSum", ["c", "axes"], ["y"], "sum", keepdims=0),
        ],
        [vi("x", F32, [1, 4, 8, 8])],
        [vi("y", F32, [1, 4])],
        [init("W", np.ones((4, 4, 3, 3), np.float32) / 36), init("axes", np.array([2, 3], np.int64))],
    )
    result = convert(conv, options=ConvertOptions(data_max=math.inf, max_depth_of_reduction=40), magnitudes=None)
    assert reasons(result) == {"sum": "max_depth_of_reduction: depth 64 > 40"}  # conv: 4*3*3 = 36


def test_schema_without_low_type_stays_fp32() -> None:
    graph = model(
        [node("Range", ["s", "l", "d"], ["r"], "range"), node("Relu", ["r"], ["y"], "relu")],
        [vi("l", F32, [])],
        [vi("y", F32, [None])],
        [init("s", np.array(0.0, np.float32)), init("d", np.array(1.0, np.float32))],
    )
    result = convert(graph, options=ConvertOptions(op_types_to_include=("Range",)), magnitudes=None)
    assert reasons(result) == {"range": "schema: Range has no tensor(fp16) at opset 17"}
    assert node_types(result.model)["relu"] == F16


def test_bf16_schema_is_consulted_at_the_target_opset() -> None:
    graph = model(
        [node("TopK", ["x", "k"], ["v", "i"], "topk"), node("Relu", ["v"], ["y"], "relu")],
        [vi("x", F32, [1, 8])],
        [vi("y", F32, [1, 2])],
        [init("k", np.array([2], np.int64))],
    )
    result = convert(graph, options=ConvertOptions(low_precision_type="bf16"), magnitudes=None)
    assert reasons(result) == {"topk": "schema: TopK has no tensor(bf16) at opset 22"}
    assert result.model.opset_import[0].version == 22


def test_non_default_domain_ops_are_never_rewritten() -> None:
    graph = model(
        [
            node("Relu", ["x"], ["r"], "relu"),
            helper_gelu := node("Gelu", ["r"], ["g"], "ms_gelu", domain="com.microsoft"),
            node("Neg", ["g"], ["y"], "neg"),
        ],
        [vi("x", F32, [2, 4])],
        [vi("y", F32, [2, 4])],
        extra_opsets=[("com.microsoft", 1)],
    )
    data = collect_magnitudes(graph)
    result = convert(graph, options=ConvertOptions(), magnitudes=data)
    assert reasons(result) == {"ms_gelu": "domain com.microsoft: op Gelu is never rewritten"}
    gelu = next(n for n in result.model.graph.node if n.name == "ms_gelu")
    assert gelu.domain == helper_gelu.domain == "com.microsoft"
    assert [c.name for c in casts(result.model)] == ["r_cast_to_fp32", "g_cast_to_fp16"]


def test_unknown_op_needs_custom_ops() -> None:
    graph = model(
        [node("MyPlugin", ["x"], ["p"], "plugin"), node("Relu", ["p"], ["y"], "relu")],
        [vi("x", F32, [2])],
        [vi("y", F32, [2])],
    )
    graph.graph.value_info.append(vi("p", F32, [2]))
    with pytest.raises(ConversionError, match="MyPlugin.*custom_ops") as err:
        convert(graph, options=ConvertOptions(), magnitudes=None)
    assert isinstance(err.value, UserError) and err.value.node == "plugin"
    result = convert(graph, options=ConvertOptions(custom_ops=("MyPlugin",)), magnitudes=None)
    assert reasons(result) == {"plugin": "custom_ops: fp32"}
    assert node_types(result.model)["relu"] == F16


def test_node_precisions_by_name_and_op_type_win_over_rules() -> None:
    graph = chain(["Relu", "Neg", "Abs"])
    options = ConvertOptions(node_precisions=(("n0", "fp32"), ("Abs", "fp16")), op_types_to_exclude=("Abs",))
    result = convert(graph, options=options, magnitudes=None)
    assert reasons(result) == {"n0": "node_precisions: fp32"}
    assert result.low_nodes == ("n1", "n2")


def test_node_precisions_key_matching_nothing_is_an_error() -> None:
    with pytest.raises(ConversionError, match=r"\['Nope'\] match no node name or op type"):
        convert(chain(["Relu"]), options=ConvertOptions(node_precisions=(("Nope", "fp16"),)), magnitudes=None)


def test_node_precisions_impossible_request_is_an_error() -> None:
    graph = model(
        [node("Range", ["s", "l", "d"], ["y"], "range")],
        [vi("l", F32, [])],
        [vi("y", F32, [None])],
        [init("s", np.array(0.0, np.float32)), init("d", np.array(1.0, np.float32))],
    )
    with pytest.raises(ConversionError, match="Range:fp16 cannot be honoured") as err:
        convert(graph, options=ConvertOptions(node_precisions=(("Range", "fp16"),)), magnitudes=None)
    assert err.value.node == "range"


def test_user_cast_to_fp32_is_kept_and_its_consumer_stays_fp32() -> None:
    """AutoCast deletes an explicit fp32 upcast before Softmax; the user's intent must survive (the Softmax,
    8192 FLOPs, is above fp32_island_min_flops)."""
    graph = model(
        [
            node("MatMul", ["x", "W"], ["m"], "matmul"),
            node("Cast", ["m"], ["m32"], "upcast", to=F32),
            node("Softmax", ["m32"], ["y"], "softmax"),
        ],
        [vi("x", F32, [64, 128])],
        [vi("y", F32, [64, 128])],
        [init("W", np.eye(128, dtype=np.float32))],
    )
    result = convert(graph, options=ConvertOptions(), magnitudes=None)
    assert reasons(result) == {
        "upcast": "user cast: kept as is",
        "softmax": "user cast: input 'm32' is an explicit Cast to fp32",
    }
    upcast = next(n for n in result.model.graph.node if n.name == "upcast")
    assert list(upcast.input) == ["m"] and upcast.attribute[0].i == F32
    assert node_types(result.model) == {"matmul": F16, "upcast": F32, "softmax": F32, "y_pre_cast_to_output": F16}


def test_respect_existing_types_keeps_explicit_typing() -> None:
    rng = np.random.default_rng(0)
    graph = model(
        [
            node("MatMul", ["x", "W1"], ["h1"], "linear1"),
            node("Cast", ["h1"], ["h1h"], "to16", to=F16),
            node("MatMul", ["h1h", "W2"], ["h2"], "linear2"),
            node("Cast", ["h2"], ["h2f"], "to32", to=F32),
            node("MatMul", ["h2f", "W3"], ["y"], "linear3"),
        ],
        [vi("x", F32, [1, 10])],
        [vi("y", F32, [1, 40])],
        [
            init("W1", rng.standard_normal((10, 10)).astype(np.float32)),
            init("W2", rng.standard_normal((10, 30)).astype(np.float16)),
            init("W3", rng.standard_normal((30, 40)).astype(np.float32)),
        ],
    )
    before = node_types(graph)
    result = convert(graph, options=ConvertOptions(respect_existing_types=True), magnitudes=None)
    assert (
        node_types(result.model) == before == {"linear1": F32, "to16": F16, "linear2": F16, "to32": F32, "linear3": F32}
    )
    assert result.low_nodes == ("linear2",)
    assert casts(result.model) == [n for n in result.model.graph.node if n.name in ("to16", "to32")]
