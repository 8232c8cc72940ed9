"""The committed real exports (issue 19, item 4) on the user's terms: tiny Hugging Face and timm models exported
by PyTorch with dynamic ``batch`` and ``sequence`` dims (``test_models/make_real_exports.py``).

Each is converted with no shape options, as AutoCast users do, through ``castguard convert`` and through
``convert_to_mixed_precision(onnx_path=...)``, in both modes (fp16; bf16 + keep_io_types): the output must be
valid (onnx's full check; then it runs, in emulation, at sizes other than the reference data's) and close to
FP32, and a warning must name the dynamic dims it had to size. ``pytest --model PATH --input-shapes ...`` runs
from an empty folder outside the repository on a reduced sweep.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto

import test_models
from harness.cli import main as castguard
from harness.convert import convert_to_mixed_precision
from harness.core.dtypes import np_dtype
from harness.runners import make_runner
from tests.helpers.convert_builders import node_types

REPO = Path(__file__).resolve().parents[2]
REAL = [name for name in test_models.names() if test_models.MODELS[name].made_by == "test_models.make_real_exports"]
TEXT = [name for name in REAL if test_models.MODELS[name].inputs_file is not None]
MODES: dict[str, dict[str, object]] = {"fp16": {}, "bf16-keepio": {"low_precision_type": "bf16", "keep_io_types": True}}
FLAGS = {"fp16": [], "bf16-keepio": ["--low_precision_type", "bf16", "--keep_io_types"]}
BOUND = {"fp16": 1e-2, "bf16-keepio": 5e-2}  # worst |error| / max |FP32| over the outputs; measured <= 1.8e-3, 1.5e-2
VOCAB = 512


def path(name: str) -> Path:
    return test_models.MODELS[name].path


def feed(name: str, *, batch: int, sequence: int) -> dict[str, np.ndarray]:
    """FP32-model inputs at the given sizes: ids below the vocabulary, the last row right-padded."""
    rng = np.random.default_rng(batch * 1000 + sequence)
    if name not in TEXT:
        return {"input": rng.uniform(-1, 1, (batch, 3, 224, 224)).astype(np.float32)}
    mask = np.ones((batch, sequence), dtype=np.int64)
    mask[-1, sequence // 2 :] = 0
    return {"input_ids": rng.integers(0, VOCAB, (batch, sequence), dtype=np.int64), "attention_mask": mask}


def reference(name: str, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path(name)), providers=["CPUExecutionProvider"])
    outputs: list[np.ndarray] = session.run(None, dict(inputs))
    return outputs


def emulated_error(name: str, converted: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> float:
    """Worst |emulated - FP32| / max |FP32| over the outputs; every output finite and of the FP32 shape."""
    declared = {i.name: np_dtype(i.type.tensor_type.elem_type) for i in converted.graph.input}
    with make_runner("emulate", converted) as runner:
        got = runner.infer({k: v.astype(declared[k]) for k, v in inputs.items()})
    worst = 0.0
    for out, expected in zip(converted.graph.output, reference(name, inputs)):
        obtained = got[out.name].astype(np.float32)
        assert obtained.shape == expected.shape and np.isfinite(obtained).all(), out.name
        worst = max(worst, float(np.abs(obtained - expected).max() / np.abs(expected).max()))
    return worst


def dim_names(model: onnx.ModelProto) -> dict[str, list[str | int]]:
    return {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}


def check_converted(name: str, converted: onnx.ModelProto, mode: str, *, batch: int, sequence: int) -> None:
    """Valid (full check), dynamic dims kept, close to FP32 at a size other than the reference data's."""
    onnx.checker.check_model(converted, full_check=True)
    assert dim_names(converted) == dim_names(onnx.load(str(path(name))))
    if mode == "fp16":  # onnxruntime's CPU provider loads fp16 graphs (it has no bf16 kernels)
        ort.InferenceSession(converted.SerializeToString(), providers=["CPUExecutionProvider"])
    error = emulated_error(name, converted, feed(name, batch=batch, sequence=sequence))
    assert error < BOUND[mode], f"{name} {mode} at {batch}x{sequence}: error {error:.3g}"


def check_dynamic_dims_named(name: str, records: list[logging.LogRecord]) -> None:
    """One warning names every dynamic dim castguard sized (the sequence of the text models, the batch of all)
    and how to give real sizes."""
    warnings = [
        r.getMessage()
        for r in records
        if r.levelno == logging.WARNING and r.getMessage().startswith("dynamic dims without a size")
    ]
    assert len(warnings) == 1, warnings
    assert "('batch') = 1" in warnings[0]
    assert "input_shapes" in warnings[0] and "calibration_data" in warnings[0]
    if name in TEXT:
        assert "input_ids" in warnings[0] and "('sequence') = " in warnings[0]


def test_the_real_exports_are_registered() -> None:
    assert sorted(REAL) == ["bert_tiny", "gpt2_tiny", "llama_tiny", "timm_mobilenetv3"]


# ---------------------------------------------------------------- castguard convert, no shape options


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("name", REAL)
def test_castguard_convert_without_shape_options(
    name: str, mode: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    target = tmp_path / "out dir" / f"{name}.onnx"
    target.parent.mkdir()
    with caplog.at_level(logging.INFO, logger="harness.convert"):
        status = castguard(["convert", "--onnx_path", str(path(name)), "--output_path", str(target), *FLAGS[mode]])
    assert status == 0
    check_dynamic_dims_named(name, caplog.records)
    check_converted(name, onnx.load(str(target)), mode, batch=1, sequence=17)


def test_the_console_script_warns_on_stderr_and_exits_0(tmp_path: Path) -> None:
    """The real process, from an empty folder: the warning is one line of stderr, the exit status 0."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "convert",
            "--onnx_path",
            str(path("llama_tiny")),
            "--output_path",
            "llama bf16.onnx",
            "--low_precision_type",
            "bf16",
            "--keep_io_types",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if "WARNING" in line and "sequence" in line]
    assert len(lines) == 1 and "input_ids" in lines[0], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    onnx.checker.check_model(str(tmp_path / "llama bf16.onnx"), full_check=True)


# ---------------------------------------------------------------- the Python API, no shape options


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("name", REAL)
def test_python_api_without_shape_options(name: str, mode: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="harness.convert"):
        converted = convert_to_mixed_precision(onnx_path=str(path(name)), **MODES[mode])  # type: ignore[arg-type]
    check_dynamic_dims_named(name, caplog.records)
    check_converted(name, converted, mode, batch=3, sequence=96)


# ---------------------------------------------------------------- the author's FP32 upcasts (LLaMA)


def identity_upcasts(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """``Cast(to=FLOAT)`` nodes whose input is already FP32: the export's trace of ``x.to(torch.float32)`` and
    ``softmax(..., dtype=torch.float32)``."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type.tensor_type.elem_type for v in [*inferred.graph.value_info, *inferred.graph.input]}
    return [
        n
        for n in model.graph.node
        if n.op_type == "Cast"
        and types.get(n.input[0]) == TensorProto.FLOAT
        and any(a.name == "to" and a.i == TensorProto.FLOAT for a in n.attribute)
    ]


def readers(model: onnx.ModelProto, tensor: str) -> list[str]:
    return [n.name for n in model.graph.node if tensor in n.input]


def test_llama_export_holds_the_readers_of_its_fp32_upcasts_in_fp32() -> None:
    """RMSNorm's ``hidden_states.to(float32)`` and attention's ``softmax(dtype=float32)`` are Cast(to=FLOAT) in
    the export; by default every node reading one stays FP32. Ignoring them gives fewer casts."""
    original = onnx.load(str(path("llama_tiny")))
    upcasts = identity_upcasts(original)
    assert len(upcasts) >= 10, "RMSNorm (5) and attention (2 x 2) upcasts"
    converted = convert_to_mixed_precision(onnx_path=str(path("llama_tiny")))
    types = node_types(converted)
    held = [(c.name, r) for c in upcasts for r in readers(original, c.output[0]) if r in types]
    assert held and all(types[r] == TensorProto.FLOAT for _, r in held), [
        (c, r) for c, r in held if types[r] != TensorProto.FLOAT
    ]
    ignored = convert_to_mixed_precision(onnx_path=str(path("llama_tiny")), respect_fp32_casts=False)
    count = sum(1 for n in converted.graph.node if n.op_type == "Cast")
    assert sum(1 for n in ignored.graph.node if n.op_type == "Cast") < count


# ---------------------------------------------------------------- pytest --model, from an empty folder


def pytest_in(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(
    ("names", "shapes"), [(TEXT, "input_ids:2x64"), (["timm_mobilenetv3"], "input:2x3x224x224")], ids=["text", "cnn"]
)
def test_pytest_model_from_an_empty_folder(names: list[str], shapes: str, tmp_path: Path) -> None:
    """First run: every case passes against the FP32 golden it writes into the empty folder (the golden test
    fails once, by design, asking to review it); the emulated error stays below the fp16 bound."""
    empty = tmp_path / "empty folder"
    empty.mkdir()
    models = [arg for name in names for arg in ("--model", str(path(name)))]
    done = pytest_in(
        empty, *models, f"--input-shapes={shapes}", "--precision", "fp16", "--data-max", "512", "--exclude-ops", "none"
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"{len(names)} failed, {len(names)} passed" in done.stdout, done.stdout[-3000:]
    # one "golden written" per model (pytest repeats it untruncated in the short summary when CI is set)
    assert len(set(re.findall(r"([\w.-]+): golden written", done.stdout))) == len(names), done.stdout[-3000:]
    assert len(list((empty / "goldens").rglob("*.npz"))) == len(names)
    report = json.loads((empty / "castguard-report" / "report.json").read_text())
    assert report["summary"]["pass"] == len(names) == len(report["cases"])
    for case in report["cases"]:
        worst = max(o["max_abs"] / o["golden_absmax"] for o in case["outputs"])
        assert worst < BOUND["fp16"], (case["model"], worst)
