"""The low-precision FLOP share through If/Loop/Scan bodies (issue 23 item 3).

The converter keeps control-flow bodies in their original types, so heavy FP32 work inside a body must weigh
against the low-precision work outside it: a model whose MatMuls sit in If branches or a Loop body is ~1 % low
precision, not the 66-100 % that counting the If/Loop node by its output size gave.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from harness.convert import ConvertOptions, convert
from harness.pipeline.cache import ContentCache
from tests.helpers.convert_builders import F32, init, model, node, run_ort, vi

F16 = TensorProto.FLOAT16
ROWS, K = 8, 64
MATMUL = 2 * ROWS * K * K  # one [8,64] @ [64,64]
TINY = ROWS * K  # one elementwise node on [8,64]


def weight(name: str, seed: int) -> onnx.TensorProto:
    return init(name, (np.random.default_rng(seed).standard_normal((K, K)) / K).astype(np.float32))


def if_model() -> onnx.ModelProto:
    """h = Relu(x) (low); If: then = two MatMuls, else = one MatMul (both FP32); y = Add(i, h) (low)."""
    then = helper.make_graph(
        [node("MatMul", ["h", "W1"], ["t1"], "then_mm1"), node("MatMul", ["t1", "W2"], ["t"], "then_mm2")],
        "then",
        [],
        [vi("t", F32, [ROWS, K])],
        [weight("W1", 1), weight("W2", 2)],
    )
    other = helper.make_graph(
        [node("MatMul", ["h", "W3"], ["e"], "else_mm")], "else", [], [vi("e", F32, [ROWS, K])], [weight("W3", 3)]
    )
    return model(
        [
            node("Relu", ["x"], ["h"], "relu"),
            node("If", ["c"], ["i"], "if", then_branch=then, else_branch=other),
            node("Add", ["i", "h"], ["y"], "add"),
        ],
        [vi("x", F32, [ROWS, K]), vi("c", TensorProto.BOOL, [])],
        [vi("y", F32, [ROWS, K])],
    )


def test_if_counts_its_larger_branch_kept_fp32() -> None:
    result = convert(
        if_model(), options=ConvertOptions(op_types_to_exclude=("MatMul",), keep_io_types=True), magnitudes=None
    )
    assert set(result.low_nodes) == {"relu", "add"}
    low = 2 * TINY
    assert result.lowp_flop_share == pytest.approx(low / (low + 2 * MATMUL))  # the then branch: 2 MatMuls
    assert result.lowp_flop_share < 0.02
    assert result.lowp_share_bound is None
    x = np.random.default_rng(0).standard_normal((ROWS, K)).astype(np.float32)
    (y,) = run_ort(result.model, {"x": x, "c": np.array(False)})  # the converted model still runs
    assert y.shape == (ROWS, K)


def loop_model(*, trip_count: int | None) -> onnx.ModelProto:
    """h = Relu(x) (low); Loop: s = s @ W (FP32 body); y = Add(s, h) (low). `trip_count` None: M is an input."""
    body = helper.make_graph(
        [node("MatMul", ["s_in", "W"], ["s_out"], "body_mm"), node("Identity", ["cond_in"], ["cond_out"], "body_cond")],
        "body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("s_in", F32, [ROWS, K])],
        [vi("cond_out", TensorProto.BOOL, []), vi("s_out", F32, [ROWS, K])],
        [weight("W", 4)],
    )
    inputs = [vi("x", F32, [ROWS, K])]
    inits = []
    if trip_count is None:
        inputs.append(vi("n", TensorProto.INT64, []))
    else:
        inits.append(init("n", np.array(trip_count, np.int64)))
    return model(
        [
            node("Relu", ["x"], ["h"], "relu"),
            node("Loop", ["n", "", "x"], ["s"], "loop", body=body),
            node("Add", ["s", "h"], ["y"], "add"),
        ],
        inputs,
        [vi("y", F32, [ROWS, K])],
        inits,
    )


BODY = MATMUL + 1  # the body's MatMul and its Identity on the scalar condition


def test_loop_with_constant_trip_count_counts_its_body_each_time() -> None:
    result = convert(loop_model(trip_count=10), options=ConvertOptions(keep_io_types=True), magnitudes=None)
    assert set(result.low_nodes) == {"relu", "add"}
    low = 2 * TINY
    assert result.lowp_flop_share == pytest.approx(low / (low + 10 * BODY))
    assert result.lowp_flop_share < 0.002
    assert result.lowp_share_bound is None
    once = convert(loop_model(trip_count=1), options=ConvertOptions(keep_io_types=True), magnitudes=None)
    assert once.lowp_flop_share == pytest.approx(low / (low + BODY))


def test_loop_with_dynamic_trip_count_is_a_bound_with_the_reason() -> None:
    result = convert(loop_model(trip_count=None), options=ConvertOptions(keep_io_types=True), magnitudes=None)
    low = 2 * TINY
    assert result.lowp_share_bound is not None
    assert "Loop 'loop'" in result.lowp_share_bound and "'n'" in result.lowp_share_bound
    assert "run time" in result.lowp_share_bound
    # the body is FP32: more trips only lower the share, so one trip gives its upper bound
    assert result.lowp_flop_share == pytest.approx(low / (low + BODY))


def test_scan_counts_its_static_sequence_length() -> None:
    """Scan over 5 rows of x, each row @ W in the FP32 body; the Relu outside is low."""
    body = helper.make_graph(
        [node("MatMul", ["row", "W"], ["p"], "body_mm"), node("Add", ["s_in", "p"], ["s_out"], "body_add")],
        "body",
        [vi("s_in", F32, [K]), vi("row", F32, [K])],
        [vi("s_out", F32, [K])],
        [weight("W", 5)],
    )
    graph = model(
        [node("Relu", ["x"], ["h"], "relu"), node("Scan", ["s0", "h"], ["y"], "scan", body=body, num_scan_inputs=1)],
        [vi("x", F32, [5, K])],
        [vi("y", F32, [K])],
        [init("s0", np.zeros(K, np.float32))],
    )
    result = convert(graph, options=ConvertOptions(keep_io_types=True), magnitudes=None)
    relu, body_flops = 5 * K, 2 * K * K + K
    assert result.lowp_flop_share == pytest.approx(relu / (relu + 5 * body_flops))
    assert result.lowp_share_bound is None
    dynamic = onnx.ModelProto()
    dynamic.CopyFrom(graph)
    dynamic.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "steps"
    bound = convert(dynamic, options=ConvertOptions(keep_io_types=True), magnitudes=None).lowp_share_bound
    assert bound is not None and "Scan 'scan'" in bound and "dynamic" in bound


def test_body_nodes_count_at_their_own_precision() -> None:
    """A Loop body that computes in fp16 (the model's own Casts) counts as low precision, times its trips."""
    body = helper.make_graph(
        [
            node("Cast", ["s_in"], ["s16"], "body_cast_in", to=F16),
            node("MatMul", ["s16", "W16"], ["m16"], "body_mm"),
            node("Cast", ["m16"], ["s_out"], "body_cast_out", to=F32),
            node("Identity", ["cond_in"], ["cond_out"], "body_cond"),
        ],
        "body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("s_in", F32, [ROWS, K])],
        [vi("cond_out", TensorProto.BOOL, []), vi("s_out", F32, [ROWS, K])],
        [init("W16", np.eye(K, dtype=np.float16))],
    )
    graph = model(
        [node("Loop", ["n", "", "x"], ["s"], "loop", body=body), node("Relu", ["s"], ["y"], "relu")],
        [vi("x", F32, [ROWS, K])],
        [vi("y", F32, [ROWS, K])],
        [init("n", np.array(3, np.int64))],
    )
    result = convert(graph, options=ConvertOptions(keep_io_types=True, op_types_to_exclude=("Relu",)), magnitudes=None)
    # low in the body (a node touching fp16, as the converter's existing_elem): both Casts and the MatMul;
    # FP32: the Identity on the condition and the Relu outside
    low, high = 3 * (TINY + MATMUL + TINY), 3 * 1 + TINY
    assert result.lowp_flop_share == pytest.approx(low / (low + high))


def test_the_bound_survives_the_conversion_cache(tmp_path: Path) -> None:
    made = convert(loop_model(trip_count=None), options=ConvertOptions(keep_io_types=True), magnitudes=None)
    cache = ContentCache(tmp_path)
    cache.conversion("k", lambda: made)
    read, hit = cache.conversion("k", lambda: pytest.fail("must not convert again"))
    assert hit and made.lowp_share_bound and read.lowp_share_bound == made.lowp_share_bound
    assert read.lowp_flop_share == made.lowp_flop_share


def test_an_exclusion_that_matches_body_nodes_only_is_not_called_a_typo(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="harness.convert"):
        convert(
            if_model(),
            options=ConvertOptions(op_types_to_exclude=("MatMul",), nodes_to_exclude=("then_mm1",), keep_io_types=True),
            magnitudes=None,
        )
    assert "matches no node" not in caplog.text
    with caplog.at_level("WARNING", logger="harness.convert"):
        convert(if_model(), options=ConvertOptions(op_types_to_exclude=("Conv",), keep_io_types=True), magnitudes=None)
    assert "op type 'Conv' matches no node" in caplog.text
