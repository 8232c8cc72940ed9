"""``--target``: the probed ORT CUDA table keeps ops without a low-precision kernel in FP32, with the reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import onnx
import pytest

from harness.convert import ConvertOptions, convert, convert_to_mixed_precision
from harness.convert.targets import load_target
from harness.core.errors import ConversionError

REPO = Path(__file__).resolve().parents[3]
MNIST = REPO / "test_models" / "mnist" / "mnist.onnx"


def test_probe_table_is_dated_and_names_its_onnxruntime_gpu() -> None:
    data = json.loads(resources.files("harness.convert").joinpath("target_data", "ort_cuda.json").read_text())
    assert data["measured"] and data["onnxruntime_gpu"] and "H100" in data["device"]
    assert {"MaxPool", "GlobalAveragePool"} <= set(data["no_kernel"]["bf16"])
    table = load_target("ort-cuda")
    assert table is not None and table.problem("Conv", "bf16") is None
    assert "runs it on its CPU EP" in (table.problem("MaxPool", "bf16") or "")  # none at opset 22 at all
    assert "CPU EP" not in (table.problem("GlobalAveragePool", "bf16") or "CPU EP")  # fp32 runs on the GPU


@pytest.mark.parametrize("form", ["split", "equals"])
def test_cli_target_keeps_bf16_maxpool_fp32_from_an_empty_folder(tmp_path: Path, form: str) -> None:
    args = ["--target", "ort-cuda"] if form == "split" else ["--target=ort-cuda"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.convert",
            "--onnx_path",
            str(MNIST),
            "--output_path",
            "out.onnx",
            "-t",
            "bf16",
            "--keep_io_types",
            "--log_level",
            "DEBUG",
            *args,
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "kept out of bf16: target ort-cuda (Pooling66, Pooling160)" in proc.stderr  # the INFO summary
    assert "target ort-cuda: no bf16 kernel for MaxPool" in proc.stderr  # DEBUG: each node
    assert pool_types(onnx.load(tmp_path / "out.onnx")) == {onnx.TensorProto.FLOAT}


def pool_types(converted: onnx.ModelProto) -> set[int]:
    inferred = onnx.shape_inference.infer_shapes(converted)
    types = {v.name: v.type.tensor_type.elem_type for v in inferred.graph.value_info}
    return {types[n.output[0]] for n in converted.graph.node if n.op_type == "MaxPool"}


def test_any_is_todays_behaviour_and_the_api_takes_target() -> None:
    model = onnx.load(MNIST)
    plain = convert(model, options=ConvertOptions(low_precision_type="bf16", keep_io_types=True), magnitudes=None)
    assert not any("target" in reason for _, reason in plain.high_nodes)
    api = convert_to_mixed_precision(
        str(MNIST), low_precision_type="bf16", keep_io_types=True, data_max=float("inf"), target="ort-cuda"
    )
    assert pool_types(api) == {onnx.TensorProto.FLOAT}
    assert pool_types(plain.model) == {onnx.TensorProto.BFLOAT16}
    with pytest.raises(ConversionError, match="unknown target 'gpu'"):
        ConvertOptions(target="gpu")


def test_tensorrt_table_is_probed_and_dated() -> None:
    data = json.loads(resources.files("harness.convert").joinpath("target_data", "tensorrt.json").read_text())
    assert data["measured"] and "tensorrt" in data["tensorrt"] and "parse + build" in data["source"]
    assert set(data["no_kernel"]["bf16"]) == {"ConvTranspose", "HardSwish", "Mish"}
    assert data["no_kernel"]["fp16"] == {}
    table = load_target("tensorrt")
    assert table is not None and table.problem("Conv", "bf16") is None and table.problem("HardSwish", "fp16") is None
    assert "Only FLOAT, HALF or INT8 input is supported for the HardSwish" in (table.problem("HardSwish", "bf16") or "")


@pytest.mark.parametrize("target", ["any", "tensorrt"])
def test_target_tensorrt_keeps_hardswish_fp32_in_bf16_on_a_timm_export(target: str) -> None:
    """timm's mobilenetv3 (19 HardSwish): TensorRT's parser refuses HardSwish in bf16, so --target tensorrt keeps
    every one of them FP32; fp16 and the other ops are untouched."""
    source = REPO / "test_models" / "timm_mobilenetv3" / "timm_mobilenetv3.onnx"
    converted = convert_to_mixed_precision(str(source), low_precision_type="bf16", target=target)
    inferred = onnx.shape_inference.infer_shapes(converted)
    types = {v.name: v.type.tensor_type.elem_type for v in [*inferred.graph.value_info, *inferred.graph.output]}
    hardswish = [n for n in converted.graph.node if n.op_type == "HardSwish"]
    assert len(hardswish) == 19
    expected = onnx.TensorProto.FLOAT if target == "tensorrt" else onnx.TensorProto.BFLOAT16
    assert {types[n.output[0]] for n in hardswish} == {expected}
    convs = [n for n in converted.graph.node if n.op_type == "Conv"]
    assert {types[n.output[0]] for n in convs} == {onnx.TensorProto.BFLOAT16}
