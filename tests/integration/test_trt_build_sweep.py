"""The TensorRT build check inside the sweep: every case's converted model built by TensorRT-RTX on this CPU.

Needs ``pip install "castguard[trt]"`` (CI: ``.ci/legs/30-tensorrt-rtx.sh``, ``-m trt_build``); without a TensorRT
module the build tests skip with :data:`NO_TRT` and the option tests check the not-installed behaviour.
``test_every_committed_model_builds_in_every_sweep_case`` globs ``test_models/``, so every committed export is
covered: its default sweep's cases must build with the converted types, or fail in the parser for a known bf16 op
(timm's MobileNetV3: HardSwish) and then build with ``--target tensorrt``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import test_models
from harness import AccuracySession, Case, HarnessConfig, SweepPoint, bundled_models_dir
from harness.core.errors import UserError
from harness.pipeline.build_check import build_check_enabled
from harness.runners.tensorrt.library import installed_module
from tests.helpers.graphs import save
from tests.helpers.trt_models import hardswish_cnn

pytest_plugins = ["pytester"]
REPO = Path(__file__).resolve().parents[2]
NO_TRT = 'no TensorRT module is installed (neither tensorrt nor tensorrt_rtx_bindings): pip install "castguard[trt]"'
HAS_TRT = installed_module() is not None
requires_trt = pytest.mark.skipif(not HAS_TRT, reason=NO_TRT)
REFUSED_IN_BF16 = {"HardSwish", "Mish"}  # the parser's bf16 refusals (harness/convert/target_data/tensorrt.json)


@pytest.mark.skipif(HAS_TRT, reason="a TensorRT module is installed here: the not-installed error cannot happen")
def test_asking_for_the_build_check_without_tensorrt_is_a_usage_error(pytester: pytest.Pytester) -> None:
    assert build_check_enabled(None) is False and build_check_enabled(False) is False
    with pytest.raises(UserError, match=r'fix: pip install "castguard\[trt\]" \(TensorRT-RTX: builds on any machine'):
        build_check_enabled(True)
    result = pytester.runpytest("-p", "no:cacheprovider", "--model", "mnist", "--trt-build-check")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--trt-build-check*neither tensorrt nor tensorrt_rtx_bindings is installed*"])


@pytest.mark.trt_build
@requires_trt
def test_the_sweep_reports_what_does_not_build_and_target_tensorrt_builds(pytester: pytest.Pytester) -> None:
    """A MobileNetV3-style CNN in bf16: emulate passes, TensorRT refuses HardSwish; --target tensorrt builds."""
    model = save(hardswish_cnn(), pytester.path / "hs cnn.onnx")
    common = (
        "-p",
        "no:cacheprovider",
        f"--model=hs={model}",
        "--precision",
        "bf16",
        "--data-max=inf",
        "--exclude-ops",
        "none",
        "--input-shapes",
        "x:2x3x16x16",
    )
    pytester.runpytest(*common)  # writes the golden
    plain = pytester.runpytest(*common)
    plain.assert_outcomes(passed=2)  # accuracy is fine: the finding is TensorRT's
    plain.stdout.fnmatch_lines(
        [
            "castguard: TensorRT build check (TensorRT-RTX *): 0 of 1 checked case(s) build with the converted types, "
            "1 does not build as converted or changed types; 1 distinct build(s)*",
            "  hs [[]bf16-dmaxinf-imax65504-excl_none-keepio0-emulate[]]: does not build in TensorRT-RTX *: HardSwish "
            "(bf16) at node /bn1/act/HardSwish: Assertion failed: *The current type = BF16.",
        ]
    )
    case = json.loads((pytester.path / "castguard-report" / "report.json").read_text())["cases"][0]
    assert case["status"] == "pass" and case["trt_build"]["outcome"] == "parse"
    assert case["trt_build"]["parse_failures"][0]["node"] == "/bn1/act/HardSwish"
    markdown = (pytester.path / "castguard-report" / "report.md").read_text()
    assert "| DOES NOT BUILD: HardSwish (bf16) |" in markdown
    targeted = pytester.runpytest(*common, "--target", "tensorrt")
    targeted.assert_outcomes(passed=2)
    targeted.stdout.fnmatch_lines(
        [
            "castguard: TensorRT build check (TensorRT-RTX *): 1 of 1 checked case(s) build "
            "with the converted types; 1 distinct build(s)*"
        ]
    )
    forced = pytester.runpytest(*common, "--target", "tensorrt", "--node-precisions", "HardSwish:bf16")
    forced.assert_outcomes(passed=1, failed=1)  # meant for TensorRT, does not build: a failure
    forced.stdout.fnmatch_lines(["*is converted for TensorRT but does not build in TensorRT-RTX *: HardSwish (bf16)*"])
    off = pytester.runpytest(*common, "--no-trt-build-check")
    off.assert_outcomes(passed=2)
    assert "TensorRT build check" not in off.stdout.str()
    assert json.loads((pytester.path / "castguard-report" / "report.json").read_text())["cases"][0]["trt_build"] is None


@pytest.mark.trt_build
@requires_trt
def test_builds_are_cached_by_converted_model(tmp_path: Path) -> None:
    shutil.copytree(REPO / "goldens" / "mnist", tmp_path / "goldens" / "mnist")
    config = HarnessConfig(
        models=("mnist",),
        goldens_dir=tmp_path / "goldens",
        report_dir=tmp_path / "report",
        cache_dir=tmp_path / "cache",
    )
    first = AccuracySession.open(config, bundled_dir=bundled_models_dir()).check_low_precision(
        Case("mnist", SweepPoint())
    )
    again = AccuracySession.open(config, bundled_dir=bundled_models_dir()).check_low_precision(
        Case("mnist", SweepPoint())
    )
    assert first.record is not None and again.record is not None
    assert first.record.trt_build is not None and first.record.trt_build.ok
    assert again.record.trt_build == first.record.trt_build  # read back from the cache, not rebuilt
    assert len(list((tmp_path / "cache" / "trt-build").glob("*.json"))) == 1


@pytest.mark.trt_build
@pytest.mark.slow
@requires_trt
@pytest.mark.parametrize("name", test_models.names())
def test_every_committed_model_builds_in_every_sweep_case(name: str, tmp_path: Path) -> None:
    if (REPO / "goldens" / name).is_dir():
        shutil.copytree(REPO / "goldens" / name, tmp_path / "goldens" / name)
    config = HarnessConfig(
        models=(name,), goldens_dir=tmp_path / "goldens", report_dir=tmp_path / "report", cache_dir=tmp_path / "cache"
    )
    session = AccuracySession.open(config, bundled_dir=bundled_models_dir())
    session.golden(name, allow_update=True)  # a new export without a committed golden
    refused: set[str] = set()
    for sweep_case in session.cases:
        record = session.check_low_precision(sweep_case).record
        assert record is not None and record.trt_build is not None, sweep_case.id
        build = record.trt_build
        if not build.ok:
            assert build.outcome == "parse" and sweep_case.case.precision == "bf16", build.summary()
            assert {f.op for f in build.parse_failures} <= REFUSED_IN_BF16, build.summary()
            refused.add(sweep_case.case.precision)
        else:
            assert build.checked > 0 and not build.type_changes
    for precision in refused:  # the fix the report points to
        record = session.check_low_precision(Case(name, SweepPoint(precision=precision, target="tensorrt"))).record
        assert record is not None and record.trt_build is not None and record.trt_build.ok, record.trt_build
