"""Command line and files: AutoCast flags, bad input (message, exit 2, no partial output), external data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from harness.convert import convert_to_mixed_precision
from harness.convert.cli import console, get_parser
from harness.core.errors import ModelError
from harness.data.onnxfile import load_model
from harness.data.onnxsave import save_model
from tests.helpers.convert_builders import F32, init, mlp, model, node, node_types, vi

F16 = onnx.TensorProto.FLOAT16


@pytest.fixture
def mlp_path(tmp_path: Path) -> Path:
    path = tmp_path / "m.onnx"
    onnx.save(mlp(), path)
    return path


def outputs(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != "m.onnx" and not p.name.endswith(".npz"))


def test_python_dash_m_converts_with_autocast_flags(mlp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.convert",
            "--onnx_path",
            str(mlp_path),
            "-t",
            "bf16",
            "--keep_io_types",
            "-ope",
            "Softmax",
            "--data_max",
            "inf",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Converted 3/4 nodes" in proc.stderr
    converted = onnx.load(mlp_path.with_name("m.bf16.onnx"))
    assert converted.opset_import[0].version == 22


def test_help_explains_every_autocast_flag() -> None:
    text = get_parser().format_help()
    for flag in (
        "--onnx_path",
        "--output_path",
        "--low_precision_type",
        "--calibration_data",
        "--nodes_to_exclude",
        "--op_types_to_exclude",
        "--nodes_to_include",
        "--op_types_to_include",
        "--data_max",
        "--init_max",
        "--init_conversion_max_bytes",
        "--max_depth_of_reduction",
        "--keep_io_types",
        "--log_level",
        "--providers",
        "--trt_plugins",
        "--trt_plugins_precision",
        "--opset",
        "--use_standalone_type_inference",
        "--node_precisions",
        "--fp32_accumulation",
        "--respect_existing_types",
    ):
        assert flag in text


def test_node_precisions_flag(tmp_path: Path, mlp_path: Path) -> None:
    out = tmp_path / "np.onnx"
    assert (
        console(["--onnx_path", str(mlp_path), "--output_path", str(out), "--node_precisions", "Add:fp32,relu:fp16"])
        == 0
    )
    types = node_types(onnx.load(out))
    assert (types["matmul"], types["add"], types["relu"]) == (F16, F32, F16)


def bad_cases(tmp_path: Path, mlp_path: Path) -> dict[str, tuple[list[str], str]]:
    (tmp_path / "junk.onnx").write_bytes(b"this is not a protobuf \x00\xff")
    unknown = model([node("MyPlugin", ["x"], ["y"], "plugin")], [vi("x", F32, [2])], [vi("y", F32, [2])])
    onnx.save(unknown, tmp_path / "unknown.onnx")
    np.savez(tmp_path / "names.npz", nope=np.zeros((1, 16), np.float32))
    np.savez(tmp_path / "shape.npz", x=np.zeros((1, 15), np.float32))
    old = model(
        [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], "bn", spatial=0)],
        [vi("x", F32, [1, 2, 2]), *(vi(n, F32, [2, 2]) for n in "sbmv")],
        [vi("y", F32, [1, 2, 2])],
        [init(n, np.ones((2, 2), np.float32)) for n in "sbmv"],
        opset=7,
        ir=3,
    )
    onnx.save(old, tmp_path / "old.onnx")
    m = str(mlp_path)
    return {
        "not onnx": (["--onnx_path", str(tmp_path / "junk.onnx")], "not an ONNX model"),
        "unknown op": (["--onnx_path", str(tmp_path / "unknown.onnx"), "--data_max", "inf"], "custom_ops"),
        "invalid regex": (["--onnx_path", m, "--nodes_to_exclude", "mat(mul"], "invalid regular expression"),
        "calibration names": (["--onnx_path", m, "-d", str(tmp_path / "names.npz")], "do not match the model"),
        "calibration shape": (["--onnx_path", m, "-d", str(tmp_path / "shape.npz")], "the model declares"),
        "negative threshold": (["--onnx_path", m, "--data_max", "-1"], "non-negative"),
        "bf16 opset": (
            ["--onnx_path", str(tmp_path / "old.onnx"), "-t", "bf16", "--data_max", "inf"],
            "from opset 7 to 22",
        ),
        "output is input": (["--onnx_path", m, "--output_path", m], "equals the input model path"),
        "bad node precision": (["--onnx_path", m, "--node_precisions", "Add=fp16"], "bad node precision"),
        "node precision matches nothing": (["--onnx_path", m, "--node_precisions", "Nope:fp16"], "match no node"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "not onnx",
        "unknown op",
        "invalid regex",
        "calibration names",
        "calibration shape",
        "negative threshold",
        "bf16 opset",
        "output is input",
        "bad node precision",
        "node precision matches nothing",
    ],
)
def test_bad_input_exits_2_with_message_and_no_output(
    case: str, tmp_path: Path, mlp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, message = bad_cases(tmp_path, mlp_path)[case]
    before = outputs(tmp_path)
    assert console(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "fix:" in err and "Traceback" not in err
    assert outputs(tmp_path) == before
    assert mlp_path.read_bytes() == onnx.load(mlp_path).SerializeToString()


def test_force_allows_overwriting_the_input(mlp_path: Path) -> None:
    assert console(["--onnx_path", str(mlp_path), "--output_path", str(mlp_path), "--force", "--data_max", "inf"]) == 0
    assert onnx.load(mlp_path).graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16


def test_external_data_roundtrip_and_refusal(tmp_path: Path) -> None:
    big = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 4096
    graph = model(
        [node("MatMul", ["x", "W"], ["y"], "mm")], [vi("x", F32, [1, 64])], [vi("y", F32, [1, 64])], [init("W", big)]
    )
    out = tmp_path / "ext" / "model.onnx"
    save_model(graph, out, external_above=1000)
    assert (out.parent / "model.onnx.data").stat().st_size == big.nbytes
    assert sorted(p.name for p in out.parent.iterdir()) == ["model.onnx", "model.onnx.data"]  # no temp leftovers
    converted = convert_to_mixed_precision(out, keep_io_types=True)
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(converted.graph.initializer[0]), big.astype(np.float16))
    loaded = onnx.load(out, load_external_data=False)
    loaded.graph.initializer[0].external_data[0].value = "../outside.data"
    onnx.save(loaded, tmp_path / "ext" / "evil.onnx")
    (tmp_path / "outside.data").write_bytes(big.tobytes())
    with pytest.raises(ModelError, match="outside the model's folder"):
        load_model(tmp_path / "ext" / "evil.onnx")
