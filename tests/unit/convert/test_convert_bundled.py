"""Done-when checks on the bundled models: the TensorRT sample's call on mnist, seeds 002 and 003."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto

import test_models
from harness.convert import ConvertOptions, collect_magnitudes, convert, convert_to_mixed_precision
from harness.runners import make_runner
from tests.helpers.convert_builders import node_types

F16, F32 = TensorProto.FLOAT16, TensorProto.FLOAT
MNIST = Path(test_models.bundled_dir()) / "mnist"


def predictions(converted: onnx.ModelProto, digits: np.ndarray) -> list[int]:
    with make_runner("emulate", converted) as runner:
        return [int(np.argmax(runner.infer({"Input3": digits[i : i + 1]})["Plus214_Output_0"])) for i in range(10)]


@pytest.fixture(scope="module")
def digits() -> np.ndarray:
    with np.load(MNIST / "digits.npz", allow_pickle=False) as npz:
        return npz["Input3"]


def test_tensorrt_sample_call_on_mnist_predicts_all_ten_digits(digits: np.ndarray) -> None:
    converted = convert_to_mixed_precision(
        onnx_path=str(MNIST / "mnist.onnx"),
        low_precision_type="fp16",
        nodes_to_exclude=["Plus214"],
        op_types_to_exclude=["MatMul"],
        data_max=4,
        init_max=4,
        keep_io_types=True,
        calibration_data=str(MNIST / "8.npz"),
    )
    onnx.checker.check_model(converted, full_check=True)
    assert [i.type.tensor_type.elem_type for i in [*converted.graph.input, *converted.graph.output]] == [F32, F32]
    types = node_types(converted)
    assert types["Plus214"] == F32 and types["Times212"] == F32
    assert types["Convolution28"] == F16  # the bundled mnist's first block sits below data_max=4 by design
    assert predictions(converted, digits) == list(range(10))


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_default_conversion_of_mnist_predicts_all_ten_digits(precision: str, digits: np.ndarray) -> None:
    model = onnx.load(MNIST / "mnist.onnx")
    data = collect_magnitudes(model, feeds=[{"Input3": digits[i : i + 1]} for i in range(10)])
    result = convert(model, options=ConvertOptions(low_precision_type=precision, keep_io_types=True), magnitudes=data)
    assert result.lowp_flop_share > 0.99
    assert predictions(result.model, digits) == list(range(10))


def test_seed_003_node_precisions_force_add_fp16_sub_fp32() -> None:
    model = onnx.load(Path(test_models.bundled_dir()) / "needs_constraints" / "needs_constraints.onnx")
    x = np.random.default_rng(0).uniform(1, 2, (1, 8)).astype(np.float32)
    forced = convert(
        model,
        options=ConvertOptions(node_precisions=(("Add", "fp16"), ("Sub", "fp32")), keep_io_types=True),
        magnitudes=None,
    )
    types = node_types(forced.model)
    assert types["Add"] == F16 and types["Sub"] == F32
    with make_runner("emulate", forced.model) as runner:
        wrong = runner.infer({"x": x})["y"]
    assert not np.allclose(wrong, x, atol=1e-2)
    data = collect_magnitudes(model, feeds=[{"x": x}])
    default = convert(model, options=ConvertOptions(keep_io_types=True), magnitudes=data)
    assert {"Add", "Sub"} <= dict(default.high_nodes).keys()
    with make_runner("emulate", default.model) as runner:
        np.testing.assert_allclose(runner.infer({"x": x})["y"], x, atol=1e-2)


def test_seed_002_explicit_typing_is_respected_and_fp32_accumulation_applies() -> None:
    model = onnx.load(Path(test_models.bundled_dir()) / "explicit_typing" / "explicit_typing.onnx")
    before = node_types(model)
    options = ConvertOptions(respect_existing_types=True)
    kept = convert(model, options=options, magnitudes=None)
    assert node_types(kept.model) == before
    accumulated = convert(
        model,
        options=ConvertOptions(respect_existing_types=True, keep_io_types=True, fp32_accumulation=True),
        magnitudes=None,
    )
    matmul = next(n for n in accumulated.model.graph.node if n.name == "/linear2/MatMul")
    assert node_types(accumulated.model)["/linear2/MatMul"] == F32
    producers = {o: n for n in accumulated.model.graph.node for o in n.output}
    assert all(producers[i].op_type == "Cast" for i in matmul.input)
