"""Fewer casts (rules 8-10 and the user-Cast fold), one small real graph per rule, each run in onnxruntime."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper

from harness.convert import ConvertOptions, convert
from tests.helpers.convert_builders import F32, casts, init, model, node, node_types, run_ort, vi

F16, BF16, I64 = TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.INT64
X = np.linspace(-2.0, 2.0, 24, dtype=np.float32).reshape(2, 3, 4)


def test_one_cast_per_tensor_and_type_shared_by_every_consumer() -> None:
    """x (fp32, kept) feeds three low consumers: one Cast to fp16, read by all three."""
    graph = model(
        [
            node("Relu", ["x"], ["a"], "relu"),
            node("Sigmoid", ["x"], ["b"], "sigmoid"),
            node("Tanh", ["x"], ["c"], "tanh"),
            node("Sum", ["a", "b", "c"], ["y"], "sum"),
        ],
        [vi("x", F32, [2, 3, 4])],
        [vi("y", F32, [2, 3, 4])],
    )
    result = convert(graph, options=ConvertOptions(keep_io_types=True), magnitudes=None)
    down = [c for c in casts(result.model) if c.input[0] == "x"]
    assert len(down) == 1
    readers = [n.name for n in result.model.graph.node if down[0].output[0] in n.input]
    assert sorted(readers) == ["relu", "sigmoid", "tanh"]
    (y,) = run_ort(result.model, {"x": X})
    np.testing.assert_allclose(y, np.maximum(X, 0) + 1 / (1 + np.exp(-X)) + np.tanh(X), atol=3e-3)


@pytest.mark.parametrize(
    ("moves", "shape"),
    [
        (["Reshape"], [6, 4]),
        (["Transpose"], [2, 4, 3]),
        (["Reshape", "Transpose"], [4, 6]),
        (["Flatten"], [2, 12]),
        (["Identity", "Squeeze"], [2, 3, 4]),
    ],
)
def test_moves_between_fp32_nodes_stay_fp32_no_cancelling_pair(moves: list[str], shape: list[int]) -> None:
    """Neg (excluded, FP32) -> moves -> Neg (FP32): the moves follow their data, no Cast pair around them."""
    nodes = [node("Neg", ["x"], ["t0"], "neg_in")]
    inits = [init("shape", np.array([6, 4], np.int64)), init("axes", np.array([0], np.int64))]
    for i, op in enumerate(moves):
        src, dst = f"t{i}", f"t{i + 1}"
        if op == "Reshape":
            nodes.append(node(op, [src, "shape"], [dst], f"move{i}"))
        elif op == "Transpose":
            nodes.append(node(op, [src], [dst], f"move{i}", perm=[1, 0] if "Reshape" in moves[:i] else [0, 2, 1]))
        elif op == "Squeeze":
            nodes.append(node("Unsqueeze", [src, "axes"], [f"{dst}u"], f"move{i}u"))
            nodes.append(node(op, [f"{dst}u", "axes"], [dst], f"move{i}"))
        else:
            nodes.append(node(op, [src], [dst], f"move{i}"))
    nodes.append(node("Neg", [f"t{len(moves)}"], ["y"], "neg_out"))
    graph = model(nodes, [vi("x", F32, [2, 3, 4])], [vi("y", F32, shape)], inits)
    result = convert(graph, options=ConvertOptions(op_types_to_exclude=("Neg",), keep_io_types=True), magnitudes=None)
    assert casts(result.model) == []
    assert result.cast_count == 0
    assert all("data movement" in reason for name, reason in result.high_nodes if name.startswith("move"))
    (y,) = run_ort(result.model, {"x": X})
    np.testing.assert_array_equal(np.ravel(y), np.ravel(run_ort(graph, {"x": X})[0]))


def test_move_after_fp32_node_puts_the_cast_after_the_move() -> None:
    """FP32 Neg -> Transpose -> low Relu: the Transpose stays with its data, one Cast right before Relu."""
    graph = model(
        [
            node("Neg", ["x"], ["n"], "neg"),
            node("Transpose", ["n"], ["t"], "transpose", perm=[0, 2, 1]),
            node("Relu", ["t"], ["y"], "relu"),
        ],
        [vi("x", F32, [2, 3, 4])],
        [vi("y", F32, [2, 4, 3])],
    )
    result = convert(graph, options=ConvertOptions(op_types_to_exclude=("Neg",), keep_io_types=True), magnitudes=None)
    types = node_types(result.model)
    assert types["transpose"] == F32 and types["relu"] == F16
    assert [c.input[0] for c in casts(result.model)] == ["t", "y_pre_cast"]


def test_low_islands_merge_through_moves() -> None:
    """MatMul -> Reshape -> Transpose -> Softmax, all low: only the graph I/O Casts (keep_io_types)."""
    rng = np.random.default_rng(0)
    graph = model(
        [
            node("MatMul", ["x", "W"], ["m"], "matmul"),
            node("Reshape", ["m", "s"], ["r"], "reshape"),
            node("Transpose", ["r"], ["t"], "transpose", perm=[1, 0]),
            node("Softmax", ["t"], ["y"], "softmax"),
        ],
        [vi("x", F32, [2, 3, 4])],
        [vi("y", F32, [8, 3])],
        [init("W", rng.standard_normal((4, 4)).astype(np.float32)), init("s", np.array([3, 8], np.int64))],
    )
    result = convert(graph, options=ConvertOptions(keep_io_types=True), magnitudes=None)
    assert result.cast_count == 2 and not result.high_nodes


def test_an_identity_cast_holds_its_small_reader_unless_ignored() -> None:
    """The SDPA-scale pattern of torch exports: Div (low) -> Cast(to fp32, identity in the FP32 model) ->
    Sqrt -> Mul. By default the identity Cast is the author's request: the Sqrt (12 FLOPs, below
    fp32_island_min_flops) stays FP32 (issue 19). With respect_fp32_casts=False the Cast carries no rule: the
    Sqrt goes low and the Cast becomes an Identity."""
    graph = model(
        [
            node("Div", ["x", "two"], ["d"], "div"),
            node("Cast", ["d"], ["d32"], "upcast", to=F32),
            node("Sqrt", ["d32"], ["s"], "sqrt"),
            node("Mul", ["s", "x"], ["y"], "mul"),
        ],
        [vi("x", F32, [3, 4])],
        [vi("y", F32, [3, 4])],
        [init("two", np.array(2.0, np.float32))],
    )
    x = np.linspace(0.5, 3.0, 12, dtype=np.float32).reshape(3, 4)
    ignored = convert(graph, options=ConvertOptions(keep_io_types=True, respect_fp32_casts=False), magnitudes=None)
    respected = convert(graph, options=ConvertOptions(keep_io_types=True), magnitudes=None)
    assert {n.name: n.op_type for n in respected.model.graph.node}["upcast"] == "Cast"
    assert node_types(respected.model)["sqrt"] == F32 and respected.cast_count == 3
    assert {n.name: n.op_type for n in ignored.model.graph.node}["upcast"] == "Identity"
    assert node_types(ignored.model)["sqrt"] == F16 and ignored.cast_count == 2
    for result in (ignored, respected):
        (y,) = run_ort(result.model, {"x": x})
        np.testing.assert_allclose(y, np.sqrt(x / 2) * x, rtol=2e-3)


def test_small_island_required_by_a_rule_stays_fp32_and_the_log_names_the_rule(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An excluded Neg (12 FLOPs) is below the threshold but a rule requires FP32: kept, and logged."""
    graph = model(
        [
            node("Relu", ["x"], ["r"], "relu"),
            node("Neg", ["r"], ["n"], "neg"),
            node("Sigmoid", ["n"], ["y"], "sigmoid"),
        ],
        [vi("x", F32, [3, 4])],
        [vi("y", F32, [3, 4])],
    )
    with caplog.at_level(logging.DEBUG, logger="harness.convert"):
        result = convert(graph, options=ConvertOptions(op_types_to_exclude=("Neg",)), magnitudes=None)
    assert node_types(result.model)["neg"] == F32
    assert any(
        "kept FP32: the rule op_types_to_exclude requires it for neg" in r.message
        for r in caplog.records
        if r.levelno == logging.DEBUG
    )
    assert any(
        "0 made low (no rule required FP32), 1 kept FP32" in r.message
        for r in caplog.records
        if r.levelno == logging.INFO
    )


@pytest.mark.parametrize(("precision", "folded"), [("fp16", True), ("bf16", False)])
def test_int_to_float_user_cast_absorbs_our_cast(precision: str, folded: bool) -> None:
    """Shape -> Cast(to fp32) -> Sqrt (low): in fp16 the user's Cast casts straight to fp16 (one rounding either
    way), no Cast of ours; in bf16 an int64 is not exact in fp32 beyond 2**24, so our Cast stays."""
    graph = model(
        [
            node("Shape", ["x"], ["shp"], "shape"),
            node("Cast", ["shp"], ["f"], "to_float", to=F32),
            node("Sqrt", ["f"], ["s"], "sqrt"),
            node("Mul", ["x", "s"], ["y"], "mul"),
        ],
        [vi("x", F32, [4, 2])],
        [vi("y", F32, [4, 2])],
    )
    result = convert(
        graph,
        options=ConvertOptions(low_precision_type=precision, keep_io_types=True, fp32_island_min_flops=0),
        magnitudes=None,
    )
    user = next(n for n in result.model.graph.node if n.name == "to_float")
    low = F16 if precision == "fp16" else BF16
    assert user.attribute[0].i == (low if folded else F32)
    assert any(c.input[0] == "f" for c in casts(result.model)) is not folded
    if precision == "fp16":
        x = np.ones((4, 2), np.float32)
        (y,) = run_ort(result.model, {"x": x})
        np.testing.assert_allclose(y, x * np.sqrt([4.0, 2.0]), rtol=1e-3)


def test_move_of_a_constant_read_only_by_fp32_nodes_stays_fp32() -> None:
    """A tied weight: W -> Identity -> excluded MatMul (FP32), and W -> MatMul (low). The Identity follows its
    FP32 reader, so W is stored once in fp32 for it and no Cast sits on the tied path."""
    rng = np.random.default_rng(0)
    graph = model(
        [
            node("Identity", ["W"], ["Wt"], "tie"),
            node("MatMul", ["x", "Wt"], ["a"], "keep"),
            node("MatMul", ["x", "W"], ["b"], "low"),
            node("Add", ["a", "b"], ["y"], "add"),
        ],
        [vi("x", F32, [2, 4])],
        [vi("y", F32, [2, 4])],
        [init("W", rng.standard_normal((4, 4)).astype(np.float32))],
    )
    result = convert(graph, options=ConvertOptions(nodes_to_exclude=("keep",), keep_io_types=True), magnitudes=None)
    assert node_types(result.model)["tie"] == F32
    assert not any(c.input[0] == "Wt" or c.output[0] == "Wt" for c in casts(result.model))
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    (y,) = run_ort(result.model, {"x": x})
    w = numpy_helper.to_array(graph.graph.initializer[0])
    np.testing.assert_allclose(y, 2 * x @ w, rtol=5e-3, atol=5e-3)


def test_bf16_fold_of_an_int64_cast_needs_the_reference_run_to_vouch_for_its_range() -> None:
    """With magnitudes (the reference run saw the Shape values, 4 and 2, within 2**24) the bf16 fold is exact."""
    from harness.convert import collect_magnitudes

    graph = model(
        [
            node("Shape", ["x"], ["shp"], "shape"),
            node("Cast", ["shp"], ["f"], "to_float", to=F32),
            node("Sqrt", ["f"], ["s"], "sqrt"),
            node("Mul", ["x", "s"], ["y"], "mul"),
        ],
        [vi("x", F32, [4, 2])],
        [vi("y", F32, [4, 2])],
    )
    mags = collect_magnitudes(graph, feeds=[{"x": np.ones((4, 2), np.float32)}])
    result = convert(
        graph,
        options=ConvertOptions(low_precision_type="bf16", keep_io_types=True, fp32_island_min_flops=0),
        magnitudes=mags,
    )
    user = next(n for n in result.model.graph.node if n.name == "to_float")
    assert user.attribute[0].i == BF16 and not any(c.input[0] == "f" for c in casts(result.model))


def test_mask_fill_where_goes_low_with_its_readers_and_the_fill_is_clamped() -> None:
    """BERT's attention mask: Where(mask, 0, -3.4e38) -> Add(scores) -> Softmax. init_max would keep the Where
    FP32 and cast its output down (the fill becomes -inf there anyway); it goes low with its reader instead, the
    fill clamped to -65504 (logged), and the masked positions still get zero weight."""
    fill = np.array(np.finfo(np.float32).min, np.float32)
    graph = model(
        [
            node("Where", ["m", "zero", "fill"], ["bias"], "mask"),
            node("Add", ["x", "bias"], ["s"], "add"),
            node("Softmax", ["s"], ["y"], "softmax", axis=-1),
        ],
        [vi("x", F32, [2, 4]), vi("m", TensorProto.BOOL, [2, 4])],
        [vi("y", F32, [2, 4])],
        [init("zero", np.array(0.0, np.float32)), init("fill", fill)],
    )
    result = convert(graph, options=ConvertOptions(keep_io_types=True), magnitudes=None)
    assert node_types(result.model)["mask"] == F16
    assert result.cast_count == 2 and any("clamped" in c or "65504" in c for c in result.clamped)
    keep = np.array([[True, True, False, False], [True, False, True, False]])
    (y,) = run_ort(result.model, {"x": np.zeros((2, 4), np.float32), "m": keep})
    np.testing.assert_allclose(y, keep / keep.sum(axis=1, keepdims=True), atol=1e-3)


def test_a_real_user_upcast_holds_even_a_small_island() -> None:
    """The bundled explicit_typing model: MatMul -> Cast(fp16) -> MatMul -> Cast(fp32) -> MatMul. The last MatMul
    (800 FLOPs) reads a real widening Cast, so it stays FP32: no Cast of ours undoes the user's upcast."""
    graph = onnx.load(Path(__file__).resolve().parents[3] / "test_models" / "explicit_typing" / "explicit_typing.onnx")
    result = convert(graph, options=ConvertOptions(keep_io_types=True), magnitudes=None)
    assert node_types(result.model)["/linear3/MatMul"] == F32
    producers = {o: n for n in result.model.graph.node for o in n.output}
    for cast in casts(result.model):
        source = producers.get(cast.input[0])
        assert source is None or source.op_type != "Cast", f"{cast.name} re-casts {source.name}"
