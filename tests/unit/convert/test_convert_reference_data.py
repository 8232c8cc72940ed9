"""Random reference data for models it cannot fully stand for (found on the ONNX backend node tests):
zero-size dims, integer inputs feeding shape-like parameters, non-tensor inputs, ai.onnx.ml-only models."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from harness.convert import convert_to_mixed_precision
from harness.convert.calibration import random_feeds
from tests.helpers.convert_builders import F32, model, node, vi

I64 = TensorProto.INT64


def _save(built: onnx.ModelProto, tmp_path: Path, name: str) -> str:
    path = tmp_path / f"{name}.onnx"
    onnx.save(built, path)
    return str(path)


def test_zero_size_dims_are_kept_in_random_data(tmp_path: Path) -> None:
    """A declared zero-size dim stays 0 in the reference data (it used to become 1)."""
    concat = model(
        [node("Concat", ["x", "e"], ["c"], "cat", axis=1), node("Relu", ["c"], ["y"], "relu")],
        [vi("x", F32, [2, 3]), vi("e", F32, [2, 0])],
        [vi("y", F32, [2, 3])],
    )
    feeds, _ = random_feeds(concat, seed=0, input_shapes=None)
    assert feeds[0]["e"].shape == (2, 0)
    converted = convert_to_mixed_precision(_save(concat, tmp_path, "concat"), keep_io_types=True)
    onnx.checker.check_model(converted, full_check=True)


def test_empty_axes_input_converts_without_magnitudes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """ReduceSum with an `axes` input of shape [0]: a shape-like integer input random data cannot invent."""
    reduce = model(
        [node("ReduceSum", ["x", "axes"], ["y"], "sum", keepdims=1)],
        [vi("x", F32, [2, 3]), vi("axes", I64, [0])],
        [vi("y", F32, [1, 1])],
        opset=18,
    )
    with caplog.at_level(logging.WARNING, logger="harness.convert"):
        converted = convert_to_mixed_precision(_save(reduce, tmp_path, "reduce"), keep_io_types=True)
    onnx.checker.check_model(converted, full_check=True)
    assert "axes: " in caplog.text and "converting without magnitudes" in caplog.text


def test_gather_indices_stay_within_their_table() -> None:
    gather = model(
        [node("Gather", ["x", "idx"], ["y"], "gather", axis=0)],
        [vi("x", F32, [5, 2]), vi("idx", I64, [4])],
        [vi("y", F32, [4, 2])],
    )
    feeds, _ = random_feeds(gather, seed=0, input_shapes=None)
    assert 0 <= feeds[0]["idx"].min() and feeds[0]["idx"].max() < 5


def test_shape_input_converts_without_magnitudes_and_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Reshape(x, shape) with `shape` a graph input: random data cannot invent a valid shape, so the model
    converts (no data rule) with a warning naming the input."""
    reshape = model(
        [node("Reshape", ["x", "shape"], ["r"], "reshape"), node("Relu", ["r"], ["y"], "relu")],
        [vi("x", F32, [2, 3]), vi("shape", I64, [2])],
        [vi("y", F32, ["a", "b"])],
    )
    with caplog.at_level(logging.WARNING, logger="harness.convert"):
        converted = convert_to_mixed_precision(_save(reshape, tmp_path, "reshape"))
    onnx.checker.check_model(converted, full_check=True)
    assert "shape-like" in caplog.text and "shape: " in caplog.text and "converting without magnitudes" in caplog.text


def test_calibration_data_that_fails_is_still_an_error(tmp_path: Path) -> None:
    from harness.core.errors import ConversionError

    reshape = model(
        [node("Reshape", ["x", "shape"], ["y"], "reshape")],
        [vi("x", F32, [2, 3]), vi("shape", I64, [2])],
        [vi("y", F32, ["a", "b"])],
    )
    with pytest.raises(ConversionError, match="cannot run the model"):
        convert_to_mixed_precision(
            _save(reshape, tmp_path, "reshape"),
            calibration_data={"x": np.ones((2, 3), np.float32), "shape": np.array([4, 4], np.int64)},
        )


def test_sequence_input_converts_without_a_reference_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    seq_in = helper.make_tensor_sequence_value_info("s", F32, [2])
    built = model(
        [node("SequenceAt", ["s", "pos"], ["a"], "at"), node("Relu", ["a"], ["y"], "relu")],
        [seq_in, vi("pos", I64, [])],
        [vi("y", F32, [2])],
    )
    with caplog.at_level(logging.WARNING, logger="harness.convert"):
        converted = convert_to_mixed_precision(_save(built, tmp_path, "seq"), keep_io_types=True)
    onnx.checker.check_model(converted, full_check=True)
    assert "cannot hold inputs s (a sequence_type)" in caplog.text


def test_ml_only_model_gets_a_default_opset_for_its_casts(tmp_path: Path) -> None:
    """An ai.onnx.ml-only model (no default-domain import) cannot go through the version converter; its ops
    are never rewritten, and the Casts at its converted graph I/O need the default domain."""
    graph = helper.make_graph(
        [helper.make_node("Scaler", ["x"], ["y"], name="scale", domain="ai.onnx.ml", scale=[2.0], offset=[0.5])],
        "g",
        [vi("x", F32, [2, 1])],
        [vi("y", F32, [2, 1])],
    )
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("ai.onnx.ml", 1)])
    built.ir_version = 8
    converted = convert_to_mixed_precision(_save(built, tmp_path, "ml"))
    onnx.checker.check_model(converted, full_check=True)
    assert {o.domain: o.version for o in converted.opset_import}[""] == 13
    assert [n.op_type for n in converted.graph.node] == ["Cast", "Scaler", "Cast"]


def test_reference_child_reads_big_in_memory_weights_from_raw_bytes(tmp_path: Path) -> None:
    """Weights above 1 KiB go to the child as external data (weights.bin, page-aligned), not serialized into
    the graph; the figures match numpy's."""
    from harness.convert.childmodel import WEIGHTS_FILE, child_model
    from harness.convert.reference import collect_magnitudes
    from tests.helpers.convert_builders import init

    rng = np.random.default_rng(3)
    w1, w2 = rng.standard_normal((64, 48)).astype(np.float32), rng.standard_normal((48, 8)).astype(np.float32)
    built = model(
        [node("MatMul", ["x", "w1"], ["h"], "mm1"), node("MatMul", ["h", "w2"], ["y"], "mm2")],
        [vi("x", F32, [2, 64])],
        [vi("y", F32, [2, 8])],
        [init("w1", w1), init("w2", w2)],
    )
    child = child_model(built, external_ok=True)
    stubs = {t.name: {e.key: e.value for e in t.external_data} for t in child.model.graph.initializer}
    assert stubs["w1"] == {"location": WEIGHTS_FILE, "offset": "0", "length": str(w1.nbytes)}
    assert stubs["w2"]["offset"] == "12288" and child.size == 12288 + w2.nbytes
    assert [o.name for o in child.model.graph.output] == ["y", "h"]
    x = rng.uniform(-1, 1, (2, 64)).astype(np.float32)
    data = collect_magnitudes(built, feeds=[{"x": x}])
    assert data.absmax["h"] == pytest.approx(float(np.abs(x @ w1).max()), rel=1e-5)
    assert data.absmax["y"] == pytest.approx(float(np.abs(x @ w1 @ w2).max()), rel=1e-5)
