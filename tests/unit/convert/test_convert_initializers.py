"""Initializers are converted by their users: shared weights, clamping, sign of tiny values, runtime casts."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from onnx import TensorProto, numpy_helper

from harness.convert import ConvertOptions, convert
from tests.helpers.convert_builders import F32, casts, init, model, node, run_ort, vi

F16, BF16 = TensorProto.FLOAT16, TensorProto.BFLOAT16


def inits(result) -> dict[str, np.ndarray]:  # noqa: ANN001
    return {i.name: numpy_helper.to_array(i) for i in result.model.graph.initializer}


def shared_weight(values: np.ndarray) -> object:
    """W is read by an excluded (FP32) MatMul and by a low MatMul."""
    return model(
        [
            node("MatMul", ["x", "W"], ["a"], "keep32"),
            node("MatMul", ["x", "W"], ["b"], "low"),
            node("Add", ["a", "b"], ["y"], "add"),
        ],
        [vi("x", F32, [1, 2])],
        [vi("y", F32, [1, 2])],
        [init("W", values)],
    )


def test_shared_weight_is_stored_once_with_one_cast() -> None:
    weights = np.array([[0.1, 0.2], [0.3, 0.4]], np.float32)  # not exact in fp16: stays fp32, Cast down
    result = convert(
        shared_weight(weights),
        options=ConvertOptions(nodes_to_exclude=("keep32",), keep_io_types=True),
        magnitudes=None,
    )
    assert list(inits(result)) == ["W"] and inits(result)["W"].dtype == np.float32
    weight_casts = [c for c in casts(result.model) if c.input[0] == "W"]
    assert [(c.name, c.attribute[0].i) for c in weight_casts] == [("W_cast_to_fp16", F16)]
    x = np.array([[1.0, -1.0]], np.float32)
    (y,) = run_ort(result.model, {"x": x})
    np.testing.assert_allclose(y, 2 * (x @ weights), rtol=1e-3)


def test_shared_weight_exact_in_fp16_is_stored_low_with_cast_up() -> None:
    weights = np.array([[0.5, 0.25], [2.0, -1.0]], np.float32)
    result = convert(shared_weight(weights), options=ConvertOptions(nodes_to_exclude=("keep32",)), magnitudes=None)
    assert list(inits(result)) == ["W"] and inits(result)["W"].dtype == np.float16
    assert [(c.name, c.attribute[0].i) for c in casts(result.model) if c.input[0] == "W"] == [("W_cast_to_fp32", F32)]


def test_fp16_clamps_to_true_range_and_logs() -> None:
    values = np.array([70000.0, -70000.0, 65504.0, 1.5, np.inf], np.float32)
    graph = model(
        [node("Add", ["x", "K"], ["y"], "add")], [vi("x", F32, [5])], [vi("y", F32, [5])], [init("K", values)]
    )
    result = convert(graph, options=ConvertOptions(init_max=np.inf), magnitudes=None)
    np.testing.assert_array_equal(inits(result)["K"], np.array([65504, -65504, 65504, 1.5, np.inf], np.float16))
    assert result.clamped == ("K: 2 value(s) clamped to +-65504 (max |x| 70000)",)


def test_tiny_values_keep_their_sign_or_become_signed_zero() -> None:
    """AutoCast turns -1e-9 into +5.96e-8; rounding to nearest keeps the sign (or gives -0.0)."""
    values = np.array([-1e-9, 1e-9, -1e-6, 3e-8], np.float32)
    graph = model(
        [node("Add", ["x", "K"], ["y"], "add")], [vi("x", F32, [4])], [vi("y", F32, [4])], [init("K", values)]
    )
    converted = inits(convert(graph, options=ConvertOptions(), magnitudes=None))["K"]
    assert converted.dtype == np.float16
    np.testing.assert_array_equal(np.signbit(converted), np.signbit(values))
    assert converted[0] == 0 and converted[2] < 0 and converted[3] > 0


def test_bf16_clamps_float32_max() -> None:
    values = np.array([np.finfo(np.float32).max, -np.finfo(np.float32).max, 1.0], np.float32)
    graph = model(
        [node("Add", ["x", "K"], ["y"], "add")], [vi("x", F32, [3])], [vi("y", F32, [3])], [init("K", values)]
    )
    result = convert(graph, options=ConvertOptions(low_precision_type="bf16", init_max=np.inf), magnitudes=None)
    converted = inits(result)["K"]
    assert converted.dtype == ml_dtypes.bfloat16 and np.isfinite(converted.astype(np.float32)).all()
    assert len(result.clamped) == 1


def test_init_conversion_max_bytes_casts_large_weights_at_run_time() -> None:
    graph = model(
        [node("MatMul", ["x", "W"], ["m"], "matmul"), node("Add", ["m", "B"], ["y"], "add")],
        [vi("x", F32, [1, 16])],
        [vi("y", F32, [1, 8])],
        [init("W", np.full((16, 8), 0.5, np.float32)), init("B", np.full(8, 0.25, np.float32))],
    )
    result = convert(graph, options=ConvertOptions(init_conversion_max_bytes=100), magnitudes=None)
    assert {k: v.dtype for k, v in inits(result).items()} == {"W": np.float32, "B": np.float16}
    assert [c.name for c in casts(result.model) if c.input[0] == "W"] == ["W_cast_to_fp16"]


def test_fp16_initializer_in_bf16_conversion() -> None:
    """AutoCast PR #1946: an existing fp16 initializer in a bf16 conversion."""
    graph = model(
        [
            node("Cast", ["x"], ["xh"], "to16", to=F16),
            node("Mul", ["xh", "K"], ["m"], "mul"),
            node("Cast", ["m"], ["y"], "to32", to=F32),
        ],
        [vi("x", F32, [2])],
        [vi("y", F32, [2])],
        [init("K", np.array([0.5, 2.0], np.float16))],
    )
    result = convert(graph, options=ConvertOptions(low_precision_type="bf16", keep_io_types=True), magnitudes=None)
    assert inits(result)["K"].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(inits(result)["K"].astype(np.float32), [0.5, 2.0])
