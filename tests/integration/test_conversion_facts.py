"""The exporters' FP32 Casts and QDQ models in a real sweep (issue 32 items 7 and 8): report.json's fields, the
report's notes and the run summary, from an empty project folder with ``pytest --model``."""

from __future__ import annotations

import json

import pytest

from tests.helpers.graphs import save
from tests.unit.convert.test_exporter_casts import clip_like, hand_counts
from tests.unit.convert.test_qdq import qdq_cnn

pytest_plugins = ["pytester"]
ONE = ("--data-max", "512", "--exclude-ops", "none", "--runner", "emulate", "-p", "no:cacheprovider")


def _cases(pytester: pytest.Pytester) -> dict[str, dict[str, object]]:
    data = json.loads((pytester.path / "castguard-report" / "report.json").read_text())
    return {c["case_id"]: c for c in data["cases"]}


def test_the_exporters_casts_are_reported_and_swept(pytester: pytest.Pytester) -> None:
    save(clip_like(), pytester.path / "models" / "clip like.onnx")
    result = pytester.runpytest(
        "--model", "models/clip like.onnx", "--precision", "fp16", "--keep-io-types", "true",
        "--fp32-casts", "respect,ignore", *ONE,
    )  # fmt: skip
    cases = _cases(pytester)
    respect = cases["fp16-dmax512-imax65504-excl_none-keepio1-emulate"]
    ignore = cases["fp16-dmax512-imax65504-excl_none-keepio1-emulate-casts_ignore"]
    conv, total = hand_counts()
    assert [pair[0] for pair in respect["kept_fp32"]] == ["patch_conv"]  # type: ignore[index, union-attr]
    assert respect["fp32_cast_share"] == pytest.approx(conv / total)
    assert ignore["kept_fp32"] == [] and ignore["fp32_cast_share"] == 0.0
    assert ignore["lowp_flop_share"] > respect["lowp_flop_share"]  # type: ignore[operator]
    summary = result.stdout.str()
    assert "clip like: the model's own Casts to FP32 keep 1 node(s) FP32" in summary and "patch_conv" in summary
    assert "the model's own Casts to FP32" in (pytester.path / "castguard-report" / "report.md").read_text()


def test_a_qdq_model_is_named_and_its_fp16_case_passes_on_emulate(pytester: pytest.Pytester) -> None:
    save(qdq_cnn(), pytester.path / "models" / "qdq.onnx")
    result = pytester.runpytest("--model", "models/qdq.onnx", "--precision", "fp16", *ONE)
    (case,) = _cases(pytester).values()
    assert case["status"] == "pass", case["message"]
    assert {"conv", "gemm", "dq_w1", "q_conv"} <= set(case["qdq_kept"])  # type: ignore[arg-type]
    assert "qdq: QDQ model:" in result.stdout.str()
    assert "QDQ model:" in (pytester.path / "castguard-report" / "report.md").read_text()
