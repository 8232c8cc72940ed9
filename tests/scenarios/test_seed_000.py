"""Seed 000: the TensorRT strongly_type_autocast sample flow, run end to end as a subprocess.

``examples/strongly_type_autocast.py --mnist_dir test_models/mnist --working_dir DIR``: pgm -> npz, ORT FP32
gold (all ten digits), conversion with the sample's exact arguments, the converted model on emulate (digits
and allclose 5e-3), then TensorRT: the strongly typed engine is built for real where a TensorRT module is
installed (TensorRT-RTX builds on this CPU) and its node types checked; it runs only where a supported GPU is, and
otherwise the sample says why; and ``Sample finished successfully.``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto

import test_models
from harness.runners.tensorrt.library import installed_module

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "strongly_type_autocast.py"
MNIST = Path(test_models.bundled_dir()) / "mnist"
HAS_TRT = installed_module() is not None


def _sample(mnist_dir: Path, working_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), "--mnist_dir", str(mnist_dir), "--working_dir", str(working_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_sample_flow_passes_end_to_end(tmp_path: Path) -> None:
    done = _sample(MNIST, tmp_path)
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert lines[-1] == "Sample finished successfully."
    assert [line for line in lines if line.startswith("STAGE")][:2] == [
        "STAGE 1: Prepare input data, do inference with onnx runtime on original fp32 onnx model.",
        "STAGE 2: Convert original fp32 onnx model to fp32-fp16 mixed onnx model, do inference with the emulate "
        "runner (fp16 really rounded) on converted onnx model, and check accuracy.",
    ]
    ran = not any(line.startswith("STAGE 3 ") and "skipped" in line for line in lines)
    assert lines.count("Number infer test passed.") == (3 if ran else 2)
    assert lines.count("Outputs and references matches.") == (2 if ran else 1)
    for digit in range(10):
        assert f"Input number is {digit}, inferred number is {digit}, passed." in lines
        with np.load(tmp_path / f"{digit}.npz", allow_pickle=False) as npz:
            assert npz.files == ["Input3"] and npz["Input3"].shape == (1, 1, 28, 28)
    if not HAS_TRT:
        assert any(
            line.startswith("STAGE 3 skipped: no TensorRT engine can be built here (no TensorRT is installed")
            for line in lines
        )
    else:
        built = next(line for line in lines if line.startswith("TensorRT build: "))
        assert built.startswith("TensorRT build: builds in TensorRT") and ": ok, plan " in built, built
        assert (tmp_path / "mnist_converted.engine").stat().st_size > 100_000
        if not ran:  # this machine cannot run it: the sample says exactly why (no GPU, no CUDA library, its CC)
            why = next(
                line for line in lines if line.startswith("STAGE 3 verify skipped: the engine cannot run here (")
            )
            assert any(text in why for text in ("no usable CUDA device", "no CUDA library", "compute capability")), why
    converted = onnx.load(tmp_path / "mnist_converted.onnx")
    nodes = {n.name: n for n in converted.graph.node}
    assert nodes["Plus214"].op_type == "Add" and nodes["Times212"].op_type == "MatMul"
    elem = {v.name: v.type.tensor_type.elem_type for v in [*converted.graph.input, *converted.graph.output]}
    assert elem == {"Input3": TensorProto.FLOAT, "Plus214_Output_0": TensorProto.FLOAT}  # keep_io_types=True
    with (
        np.load(tmp_path / "origin_output.npz", allow_pickle=False) as gold,
        np.load(tmp_path / "converted_output.npz", allow_pickle=False) as mixed,
    ):
        np.testing.assert_allclose(mixed["Plus214_Output_0"], gold["Plus214_Output_0"], rtol=5e-3, atol=5e-3)
        assert list(np.argmax(gold["Plus214_Output_0"], axis=1)) == list(range(10))


def test_a_missing_folder_is_an_error_with_exit_status_1(tmp_path: Path) -> None:
    done = _sample(tmp_path / "nowhere", tmp_path)
    assert done.returncode == 1 and done.stdout.strip() == f"ERROR: {tmp_path / 'nowhere'} is not existed."


def test_a_wrong_prediction_stops_the_sample_with_exit_status_1(tmp_path: Path) -> None:
    mnist = tmp_path / "mnist"
    shutil.copytree(MNIST, mnist)
    (mnist / "0.pgm").write_bytes((MNIST / "1.pgm").read_bytes())
    done = _sample(mnist, tmp_path)
    assert done.returncode == 1
    assert "Input number is 0, inferred number is 1, failed." in done.stdout
    assert done.stdout.splitlines()[-1] == "ERROR: Number infer test failed."
    assert "Sample finished successfully." not in done.stdout
