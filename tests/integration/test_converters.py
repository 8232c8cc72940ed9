"""Any converter (issue 30): castguard, ort-fp16 and autocast side by side on the bundled BERT-like export, and a
model the user converted (--candidate) judged against the FP32 golden. Real ``python -m pytest`` runs from an
empty folder whose path has a space; the candidates are made by onnxconverter-common's
``float16.convert_float_to_float16`` (onnxruntime's copy of it where the package is not installed)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

try:  # onnxconverter-common (the dev extra); onnxruntime ships the same module as onnxruntime.transformers.float16
    from onnxconverter_common import float16
except ImportError:
    from onnxruntime.transformers import float16  # type: ignore[no-redef]

from tests.helpers.graphs import cancellation_model, mlp_model, save
from tests.integration.test_any_folder import pytest_in

HAS_MODELOPT = importlib.util.find_spec("modelopt") is not None


def _cases(folder: Path) -> list[dict[str, object]]:
    return json.loads((folder / "castguard-report" / "report.json").read_text())["cases"]  # type: ignore[no-any-return]


def test_three_converters_run_side_by_side_on_the_bundled_bert(tmp_path: Path) -> None:
    folder = tmp_path / "empty folder"
    folder.mkdir()
    args = ["--model", "bert_tiny", "--precision", "fp16", "--data-max", "512", "--exclude-ops", "none"]
    convs = ["--converter", "castguard", "--converter", "ort-fp16", "--converter", "autocast"]
    done = pytest_in(folder, *args, *convs, "--runner", "emulate", "--runner", "ort", "--allow-skipped-runner", "-rs")
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    cases = {c["case_id"]: c for c in _cases(folder)}
    by_converter = {c["case"]["converter"] for c in cases.values()}  # type: ignore[index]
    assert by_converter == {"castguard", "ort-fp16", "autocast"}
    assert set(cases) >= {
        "fp16-dmax512-imax65504-excl_none-keepio0-emulate",
        "ort-fp16-excl_none-keepio0-emulate",
        "ort-fp16-excl_none-keepio0-ort",
        "autocast-fp16-dmax512-imax65504-excl_none-keepio0-emulate",
    }
    fused = cases["ort-fp16-excl_none-keepio0-emulate"]
    assert fused["status"] == "skip" and "emulate cannot round com.microsoft::" in str(fused["message"])
    on_ort = cases["ort-fp16-excl_none-keepio0-ort"]
    assert on_ort["outputs"] and 0.5 < float(on_ort["lowp_flop_share"]) <= 1.0  # type: ignore[arg-type]
    assert "converted by ort-fp16" in on_ort["notes"]  # type: ignore[operator]
    autocast = cases["autocast-fp16-dmax512-imax65504-excl_none-keepio0-emulate"]
    if not HAS_MODELOPT:
        assert autocast["status"] == "skip"
        assert 'pip install "nvidia-modelopt[onnx]"' in str(autocast["message"])
    report = json.loads((folder / "castguard-report" / "report.json").read_text())
    sources = {row[0]: row for row in report["provenance"]["converter_sources"]}
    assert "onnxruntime" in sources["ort-fp16"][2] and set(sources) == {"castguard", "ort-fp16", "autocast"}
    md = (folder / "castguard-report" / "report.md").read_text()
    assert "Converters side by side" in md and "| `ort-fp16` |" in md and "| `autocast` |" in md
    html = (folder / "castguard-report" / "report.html").read_text()
    assert "<h3>Converters side by side</h3>" in html and "<code>ort-fp16</code>" in html


def _emulated_error(candidate: onnx.ModelProto, golden: np.ndarray, x: np.ndarray) -> float:
    """An independent emulation: onnx's ReferenceEvaluator rounds every fp16 op's result (numpy in fp16)."""
    (out,) = ReferenceEvaluator(candidate).run(None, {"x": x.astype(np.float16)})
    return float(np.abs(out.astype(np.float64) - golden).max())


def test_candidates_are_judged_against_the_fp32_golden(tmp_path: Path) -> None:
    folder, models = tmp_path / "empty folder", tmp_path / "my models"
    folder.mkdir()
    x = np.random.default_rng(3).uniform(-0.5, 0.5, (1, 16)).astype(np.float32)
    np.savez(models.mkdir() or models / "x.npz", x=x)
    fp32 = cancellation_model()
    save(fp32, models / "cancel.onnx")
    candidate = float16.convert_float_to_float16(fp32, keep_io_types=False)  # fp16 input: golden inputs get cast
    save(candidate, models / "cancel.fp16.onnx")
    done = pytest_in(
        folder,
        "--model",
        f"cancel={models / 'cancel.onnx'}",
        "--candidate",
        f"cancel={models / 'cancel.fp16.onnx'}",
        "--inputs",
        str(models / "x.npz"),
        "--precision",
        "fp16",
        "--data-max",
        "512",
        "--exclude-ops",
        "none",
    )
    cases = {c["case_id"]: c for c in _cases(folder)}
    judged = cases["candidate-emulate"]
    golden = ReferenceEvaluator(fp32).run(None, {"x": x})[0].astype(np.float64)
    expected = _emulated_error(candidate, golden, x)
    assert expected > 0.01  # fp16's ulp at 256 is 0.25: the candidate really loses x
    assert judged["status"] == "fail" and done.returncode == 1, done.stdout[-3000:]
    assert abs(float(judged["outputs"][0]["max_abs"]) - expected) <= 1e-6  # type: ignore[index]
    assert judged["case"]["converter"] == "candidate"  # type: ignore[index]


def test_a_good_candidate_passes(tmp_path: Path) -> None:
    folder, models = tmp_path / "empty folder", tmp_path / "models"
    folder.mkdir()
    save(mlp_model(), models / "mlp.onnx")
    save(float16.convert_float_to_float16(mlp_model(), keep_io_types=True), models / "mlp16.onnx")
    done = pytest_in(
        folder,
        "--model",
        f"mlp={models / 'mlp.onnx'}",
        "--candidate",
        f"mlp={models / 'mlp16.onnx'}",
        "--precision",
        "fp16",
        "--data-max",
        "512",
        "--exclude-ops",
        "none",
    )
    assert "1 failed, 2 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]  # the new golden's note
    assert {c["case_id"]: c["status"] for c in _cases(folder)}["candidate-emulate"] == "pass"


def test_a_candidate_with_another_signature_is_one_error_naming_both(tmp_path: Path) -> None:
    folder, models = tmp_path / "empty folder", tmp_path / "models"
    folder.mkdir()
    save(mlp_model(), models / "mlp.onnx")
    save(float16.convert_float_to_float16(cancellation_model()), models / "other.onnx")
    done = pytest_in(folder, "--model", f"mlp={models / 'mlp.onnx'}", "--candidate", f"mlp={models / 'other.onnx'}")
    text = done.stdout + done.stderr
    assert done.returncode not in (0, 1) and "Traceback" not in text
    assert "x:float[1,8]" in text and "x:float16[1,16]" in text and "other.onnx" in text
