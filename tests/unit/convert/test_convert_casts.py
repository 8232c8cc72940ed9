"""Cast insertion, graph I/O types, control-flow bodies and fp32 accumulation, on real graphs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from harness.convert import ConvertOptions, convert
from harness.convert.castcleanup import cleanup_casts
from harness.runners import make_runner
from tests.helpers.convert_builders import (
    F32,
    casts,
    chain,
    elem_types,
    init,
    mlp,
    model,
    node,
    node_types,
    run_ort,
    vi,
)

F16, BF16, F64 = TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE


def fan_out() -> onnx.ModelProto:
    """x feeds two FP32 nodes (excluded Neg) and one low node; their outputs are graph outputs."""
    return model(
        [
            node("Neg", ["x"], ["a"], "neg_a"),
            node("Neg", ["x"], ["b"], "neg_b"),
            node("Relu", ["x"], ["r"], "relu"),
            node("Add", ["a", "r"], ["s"], "add"),
        ],
        [vi("x", F32, [2, 4])],
        [vi("b", F32, [2, 4]), vi("s", F32, [2, 4])],
    )


def test_one_cast_per_tensor_and_direction() -> None:
    options = ConvertOptions(op_types_to_exclude=("Neg",), keep_io_types=True)
    result = convert(fan_out(), options=options, magnitudes=None)
    cast_inputs = sorted((c.input[0], c.attribute[0].i) for c in casts(result.model))
    assert cast_inputs == [("a", F16), ("s_pre_cast", F32), ("x", F16)]
    assert result.cast_count == 3


@pytest.mark.parametrize("keep_io_types", [True, False])
def test_io_types_follow_keep_io_types_even_for_fp32_producers(keep_io_types: bool) -> None:
    options = ConvertOptions(op_types_to_exclude=("Neg",), keep_io_types=keep_io_types)
    result = convert(fan_out(), options=options, magnitudes=None)
    want = F32 if keep_io_types else F16
    graph = result.model.graph
    assert [(v.name, v.type.tensor_type.elem_type) for v in graph.input] == [("x", want)]
    assert [(v.name, v.type.tensor_type.elem_type) for v in graph.output] == [("b", want), ("s", want)]
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    b, s = run_ort(result.model, {"x": x.astype(np.float32 if keep_io_types else np.float16)})
    np.testing.assert_allclose(b, -x, atol=1e-3)
    np.testing.assert_allclose(s, -x + np.maximum(x, 0), atol=1e-3)


def test_fp64_io_with_keep_io_types() -> None:
    """AutoCast raises 'element type changed' here; FP64 I/O stays FP64 and the inside converts."""
    graph = model(
        [
            node("Cast", ["x"], ["x32"], "in_cast", to=F32),
            node("Relu", ["x32"], ["r"], "relu"),
            node("Mul", ["r", "d"], ["y"], "mul"),
        ],
        [vi("x", F64, [3])],
        [vi("y", F64, [3])],
        [init("d", np.full(3, 2.0, np.float64))],
    )
    result = convert(graph, options=ConvertOptions(keep_io_types=True), magnitudes=None)
    assert [v.type.tensor_type.elem_type for v in [*result.model.graph.input, *result.model.graph.output]] == [F64, F64]
    assert node_types(result.model)["relu"] == F16
    (y,) = run_ort(result.model, {"x": np.array([-1.0, 0.5, 3.0])})
    np.testing.assert_allclose(y, [0.0, 1.0, 6.0])
    default = convert(graph, options=ConvertOptions(), magnitudes=None)
    assert default.model.graph.output[0].type.tensor_type.elem_type == F16


def test_graph_io_names_unchanged_and_output_cast_restores_name() -> None:
    result = convert(mlp(), options=ConvertOptions(keep_io_types=True), magnitudes=None)
    assert [i.name for i in result.model.graph.input] == ["x"]
    assert [o.name for o in result.model.graph.output] == ["y"]
    last = result.model.graph.node[-1]
    assert last.op_type == "Cast" and list(last.output) == ["y"] and last.attribute[0].i == F32


def test_cleanup_removes_only_our_dead_and_redundant_casts() -> None:
    graph = model(
        [
            node("Cast", ["x"], ["u16"], "user16", to=F16),
            node("Cast", ["u16"], ["u32"], "user32", to=F32),
            node("Cast", ["x"], ["dead"], "ours_dead", to=F16),
            node("Cast", ["u16"], ["w32"], "ours_up", to=F32),
            node("Cast", ["w32"], ["w16"], "ours_down", to=F16),
            node("Add", ["u32", "u32"], ["y"], "add"),
            node("Neg", ["w16"], ["z"], "neg"),
        ],
        [vi("x", F32, [2])],
        [vi("y", F32, [2]), vi("z", F16, [2])],
    )
    storage = {"x": F32, "u16": F16, "u32": F32, "dead": F16, "w32": F32, "w16": F16}
    removed = cleanup_casts(graph.graph, {"ours_dead", "ours_up", "ours_down"}, storage)
    assert removed == 3
    names = [n.name for n in graph.graph.node]
    assert names == ["user16", "user32", "add", "neg"]  # the user's lossy 16->32 pair is never touched
    assert list(graph.graph.node[-1].input) == ["u16"]
    onnx.checker.check_model(graph, full_check=True)


def if_model() -> onnx.ModelProto:
    """h = Relu(x) (low) is captured by both If branches (MatMul inside); If stays in its original types."""
    w = init("Wb", np.eye(4, dtype=np.float32) * 2)
    then = helper.make_graph([node("MatMul", ["h", "Wb"], ["t"], "then_mm")], "then", [], [vi("t", F32, [1, 4])], [w])
    other = helper.make_graph([node("Neg", ["h"], ["e"], "else_neg")], "else", [], [vi("e", F32, [1, 4])])
    return model(
        [
            node("Relu", ["x"], ["h"], "relu"),
            node("If", ["c"], ["i"], "if", then_branch=then, else_branch=other),
            node("Add", ["i", "h"], ["y"], "add"),
        ],
        [vi("x", F32, [1, 4]), vi("c", TensorProto.BOOL, [])],
        [vi("y", F32, [1, 4])],
    )


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_if_bodies_stay_fp32_with_captures_cast(precision: str) -> None:
    result = convert(
        if_model(), options=ConvertOptions(low_precision_type=precision, keep_io_types=True), magnitudes=None
    )
    assert dict(result.high_nodes)["if"].startswith("control flow")
    if_node = next(n for n in result.model.graph.node if n.op_type == "If")
    branch_inputs = {n.input[0] for g in if_node.attribute for n in g.g.node}
    assert branch_inputs == {"h_cast_to_fp32"}
    assert node_types(result.model)["relu"] == (F16 if precision == "fp16" else BF16)
    x = np.array([[-1.0, 0.5, 2.0, -3.0]], np.float32)
    for cond in (True, False):
        feed = {"x": x, "c": np.array(cond)}
        with make_runner("emulate", result.model) as runner:
            y = runner.infer(feed)["y"]
        h = np.maximum(x, 0)
        np.testing.assert_allclose(y, (2 * h if cond else -h) + h, rtol=1e-2)


def loop_model() -> onnx.ModelProto:
    """A Loop whose body adds the captured low-precision activation h to the carried state 3 times."""
    body = helper.make_graph(
        [node("Add", ["s_in", "h"], ["s_out"], "body_add"), node("Identity", ["cond_in"], ["cond_out"], "body_cond")],
        "body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("s_in", F32, [1, 4])],
        [vi("cond_out", TensorProto.BOOL, []), vi("s_out", F32, [1, 4])],
    )
    return model(
        [node("Relu", ["x"], ["h"], "relu"), node("Loop", ["n", "", "x"], ["y"], "loop", body=body)],
        [vi("x", F32, [1, 4])],
        [vi("y", F32, [1, 4])],
        [init("n", np.array(3, np.int64))],
    )


def test_loop_body_kept_in_original_types() -> None:
    result = convert(loop_model(), options=ConvertOptions(keep_io_types=True), magnitudes=None)
    x = np.array([[-1.0, 0.5, 2.0, 3.0]], np.float32)
    (y,) = run_ort(result.model, {"x": x})
    np.testing.assert_allclose(y, x + 3 * np.maximum(x, 0), rtol=1e-3)
    assert {c.name for c in casts(result.model)} == {"x_cast_to_fp16", "h_cast_to_fp32"}


def test_scan_body_kept_in_original_types() -> None:
    """Scan sums the rows of x weighted by the captured low-precision activation h = Relu(w)."""
    body = helper.make_graph(
        [node("Mul", ["row", "h"], ["p"], "body_mul"), node("Add", ["s_in", "p"], ["s_out"], "body_add")],
        "body",
        [vi("s_in", F32, [4]), vi("row", F32, [4])],
        [vi("s_out", F32, [4])],
    )
    graph = model(
        [node("Relu", ["w"], ["h"], "relu"), node("Scan", ["s0", "x"], ["y"], "scan", body=body, num_scan_inputs=1)],
        [vi("x", F32, [3, 4]), vi("w", F32, [4])],
        [vi("y", F32, [4])],
        [init("s0", np.zeros(4, np.float32))],
    )
    result = convert(graph, options=ConvertOptions(keep_io_types=True), magnitudes=None)
    assert node_types(result.model)["relu"] == F16 and dict(result.high_nodes)["scan"].startswith("control flow")
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 8
    w = np.array([1.0, -1.0, 0.5, 2.0], np.float32)
    (y,) = run_ort(result.model, {"x": x, "w": w})
    np.testing.assert_allclose(y, x.sum(axis=0) * np.maximum(w, 0), rtol=1e-3)


def test_fp32_accumulation_wraps_low_matmul_and_gemm() -> None:
    rng = np.random.default_rng(0)
    graph = model(
        [
            node("MatMul", ["x", "W"], ["m"], "matmul"),
            node("Gemm", ["m", "G", "C"], ["g"], "gemm"),
            node("Relu", ["g"], ["y"], "relu"),
        ],
        [vi("x", F32, [2, 64])],
        [vi("y", F32, [2, 8])],
        [
            init("W", rng.standard_normal((64, 16)).astype(np.float32) / 8),
            init("G", rng.standard_normal((16, 8)).astype(np.float32) / 4),
            init("C", rng.standard_normal(8).astype(np.float32)),
        ],
    )
    result = convert(graph, options=ConvertOptions(fp32_accumulation=True, keep_io_types=True), magnitudes=None)
    nodes = {n.name: n for n in result.model.graph.node}
    types = elem_types(result.model)
    for name in ("matmul", "gemm"):
        wrapped = nodes[name]
        assert all(types[i] == F32 for i in wrapped.input) and types[wrapped.output[0]] == F32
        assert all(nodes[i].op_type == "Cast" and types[nodes[i].input[0]] == F16 for i in wrapped.input)
    assert nodes["m"].op_type == "Cast" and nodes["m"].attribute[0].i == F16
    assert all(i.data_type == F16 for i in result.model.graph.initializer)
    assert types[nodes["relu"].input[0]] == F16
    x = rng.uniform(-1, 1, (2, 64)).astype(np.float32)
    gold = np.maximum((x @ numpy(graph, "W")) @ numpy(graph, "G") + numpy(graph, "C"), 0)
    with make_runner("emulate", result.model) as runner:
        acc = runner.infer({"x": x})["y"]
    plain = convert(graph, options=ConvertOptions(keep_io_types=True), magnitudes=None)
    with make_runner("emulate", plain.model) as runner:
        low = runner.infer({"x": x})["y"]
    assert np.abs(acc - gold).max() <= np.abs(low - gold).max() + 1e-6
    np.testing.assert_allclose(acc, gold, atol=2e-2)


def numpy(graph: onnx.ModelProto, name: str) -> np.ndarray:
    return next(onnx.numpy_helper.to_array(i) for i in graph.graph.initializer if i.name == name)


def resize_model(mode: str, *, shared: bool = False) -> onnx.ModelProto:
    roi = "scales" if shared else "roi"  # AutoCast's conv_resize model: one empty tensor as roi and scales
    inits = [init("scales", np.array([], np.float32)), init("sizes", np.array([1, 1, 4, 4], np.int64))]
    if not shared:
        inits.append(init("roi", np.array([0, 0, 0, 0, 1, 1, 1, 1], np.float32)))
    return model(
        [
            node("Relu", ["x"], ["r"], "relu"),
            node(
                "Resize",
                ["r", roi, "scales", "sizes"],
                ["y"],
                "resize",
                mode="nearest",
                coordinate_transformation_mode=mode,
            ),
        ],
        [vi("x", F32, [1, 1, 2, 2])],
        [vi("y", F32, [1, 1, 4, 4])],
        inits,
    )


def resize_input_types(converted: onnx.ModelProto) -> list[int]:
    inferred = onnx.shape_inference.infer_shapes(converted, strict_mode=True)
    types = {v.name: v.type.tensor_type.elem_type for v in [*inferred.graph.value_info, *inferred.graph.input]}
    types.update({i.name: i.data_type for i in inferred.graph.initializer})
    resize = next(n for n in inferred.graph.node if n.op_type == "Resize")
    return [types[name] for name in resize.input[:3]]


@pytest.mark.parametrize("low", ["fp16", "bf16"])
def test_resize_roi_follows_the_node_where_the_mode_ignores_it(low: str) -> None:
    """roi is ignored unless coordinate_transformation_mode is tf_crop_and_resize: it goes with the node's type
    (AutoCast's behaviour) where the schema allows the type (roi has no bf16); scales is tensor(float) in the
    schema and stays FP32."""
    elem, roi = (F16, F16) if low == "fp16" else (BF16, F32)
    result = convert(resize_model("asymmetric"), options=ConvertOptions(low_precision_type=low), magnitudes=None)
    assert resize_input_types(result.model) == [elem, roi, F32]
    onnx.checker.check_model(result.model, full_check=True)


def test_resize_crop_roi_keeps_fp32() -> None:
    """With tf_crop_and_resize, roi holds crop coordinates: they keep their stored FP32 type."""
    result = convert(resize_model("tf_crop_and_resize"), options=ConvertOptions(), magnitudes=None)
    assert resize_input_types(result.model) == [F16, F32, F32]


def test_shared_empty_roi_and_scales_get_a_typed_empty_copy_not_a_cast() -> None:
    """One empty tensor as roi and scales (AutoCast's conv_resize model): roi reads an empty fp16 initializer,
    scales the empty fp32 one; inference must still see scales empty (a Cast's output would not be)."""
    result = convert(resize_model("asymmetric", shared=True), options=ConvertOptions(), magnitudes=None)
    assert resize_input_types(result.model) == [F16, F16, F32]
    assert all(c.input[0] != "scales" for c in casts(result.model))
    empties = [i for i in result.model.graph.initializer if 0 in i.dims]
    assert sorted(i.data_type for i in empties) == sorted([F16, F32])
    onnx.checker.check_model(result.model, full_check=True)


def test_chain_of_low_nodes_has_only_io_casts() -> None:
    result = convert(
        chain(["Relu", "Neg", "Abs", "Sigmoid"]), options=ConvertOptions(keep_io_types=True), magnitudes=None
    )
    assert [c.name for c in casts(result.model)] == ["x_cast_to_fp16", "y_pre_cast_to_output"]
