"""The expensive step: reference data (random, calibration files), abs-max folding, errors and crashes."""

from __future__ import annotations

import base64
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto

from harness.convert import Magnitudes, collect_magnitudes
from harness.core.errors import ConversionError, InputDataError, UserError
from tests.helpers.convert_builders import F32, init, mlp, model, node, vi


def scale_model() -> object:
    """x[batch,4] -> Mul(3) -> y; static batch 2."""
    return model(
        [node("Mul", ["x", "k"], ["y"], "mul")],
        [vi("x", F32, [2, 4])],
        [vi("y", F32, [2, 4])],
        [init("k", np.array(3.0, np.float32))],
    )


def test_random_data_is_described_by_its_input_plan() -> None:
    data = collect_magnitudes(mlp(), seed=3)
    assert data.data_source == (
        "random: seed 3, 1 iteration(s); x float32[1x16]: uniform in [-1, 1] (default; "
        "--calibration_data for real data); x dim 0 ('batch') is dynamic: set to 1 (castguard's batch "
        "default; --input-shapes to change)"
    )
    assert data.shapes["x"] == (1, 16) and data.shapes["mm"] == (1, 8)
    assert 0 < data.absmax["x"] <= 1 and data.dtypes["y"] == TensorProto.FLOAT
    wide = collect_magnitudes(mlp(), input_shapes={"x": (5, 16)})
    assert wide.shapes["y"] == (5, 8) and "x float32[5x16]" in wide.data_source


def test_unknown_input_shape_name_is_an_error() -> None:
    with pytest.raises(UserError, match="has no input named 'nope'"):
        collect_magnitudes(mlp(), input_shapes={"nope": (1, 16)})


def test_npz_batches_split_by_model_batch_and_fold_by_absmax(tmp_path: Path) -> None:
    rows = np.zeros((6, 4), np.float32)
    rows[3, 1] = -5.0  # in the second batch of 2
    np.savez(tmp_path / "calib.npz", x=rows)
    data = collect_magnitudes(scale_model(), calibration_data=tmp_path / "calib.npz")
    assert data.batches == 3 and data.absmax["y"] == 15.0 and data.shapes["x"] == (2, 4)


def test_folder_of_npz_and_polygraphy_json(tmp_path: Path) -> None:
    folder = tmp_path / "calib"
    folder.mkdir()
    for index, value in enumerate((1.0, -7.0)):
        np.savez(folder / f"b{index}.npz", x=np.full((2, 4), value, np.float32))
    assert collect_magnitudes(scale_model(), calibration_data=folder).absmax["y"] == 21.0

    def encode(array: np.ndarray) -> dict:
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        return {"array": base64.b64encode(buffer.getvalue()).decode(), "polygraphy_class": "ndarray"}

    feeds = [{"x": encode(np.full((2, 4), v, np.float32))} for v in (2.0, 4.0)]
    (tmp_path / "inputs.json").write_text(json.dumps(feeds))
    data = collect_magnitudes(scale_model(), calibration_data=tmp_path / "inputs.json")
    assert data.batches == 2 and data.absmax["y"] == 12.0


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"z": np.zeros((2, 4), np.float32)}, "input names do not match the model"),
        ({"x": np.zeros((2, 5), np.float32)}, "has shape \\[2, 5\\], the model declares \\[2,4\\]"),
        ({"x": np.zeros((3, 4), np.float32)}, "has shape \\[3, 4\\], the model declares \\[2,4\\] \\(dim 0 differs\\)"),
        ({"x": np.zeros((2, 4, 1), np.float32)}, "rank 3"),
    ],
)
def test_calibration_mismatch_is_a_clear_error(tmp_path: Path, arrays: dict, message: str) -> None:
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(InputDataError, match=message):
        collect_magnitudes(scale_model(), calibration_data=tmp_path / "bad.npz")


def test_pickled_npz_is_refused(tmp_path: Path) -> None:
    np.savez(tmp_path / "obj.npz", x=np.array([{"a": 1}], dtype=object))
    with pytest.raises(InputDataError, match="object arrays"):
        collect_magnitudes(scale_model(), calibration_data=tmp_path / "obj.npz")


def test_json_roundtrip_keeps_inf() -> None:
    data = Magnitudes(
        absmax={"a": math.inf, "b": 2.5}, shapes={"a": (1, 2)}, dtypes={"a": 1}, data_source="s", batches=4
    )
    assert Magnitudes.from_json(data.to_json()) == data
    with pytest.raises(InputDataError, match="cannot read cached magnitudes"):
        Magnitudes.from_json('{"schema_version": 99}')


def test_ort_failure_names_the_node_and_suggests_calibration_data() -> None:
    graph = model(
        [node("Reshape", ["x", "shape"], ["r"], "reshape_3rows"), node("Relu", ["r"], ["y"], "relu")],
        [vi("x", F32, ["n", 4])],
        [vi("y", F32, [3, None])],
        [init("shape", np.array([3, -1], np.int64))],
    )
    with pytest.raises(ConversionError, match="calibration data") as err:
        collect_magnitudes(graph)
    assert err.value.node == "reshape_3rows" and err.value.step == "reference run"


@pytest.mark.parametrize("signal_name", ["SIGFPE", "SIGSEGV"])
def test_native_crash_in_onnxruntime_does_not_kill_the_caller(
    signal_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reference child dies of a native signal (the test-only hook of refrun.py sends it where onnxruntime
    runs the model, deterministically); the caller survives and gets a ConversionError naming the signal."""
    from harness.convert.refrun import TEST_SIGNAL_VARIABLE

    monkeypatch.setenv(TEST_SIGNAL_VARIABLE, signal_name)
    with pytest.raises(ConversionError, match=f"crashed with {signal_name}"):
        collect_magnitudes(mlp())


def test_unknown_provider_is_an_error() -> None:
    with pytest.raises(ConversionError, match="unknown execution provider"):
        collect_magnitudes(mlp(), providers=("tpu",))
