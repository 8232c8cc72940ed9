"""Seed 003: precision constraints on the bundled needs_constraints.onnx with x in [1, 2].

x -> MatMul(flip) -> Add(65504) -> Sub(65504) -> MatMul(flip): forcing Add to fp16 (and Sub to fp32, the way
strong typing needs it spelled out) overflows and fails on ``emulate``: a strict expected failure. The default
conversion keeps the overflowing nodes in fp32 (data_max) and passes. The report shows both.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness import AccuracySession, Case, HarnessConfig, SweepPoint, bundled_models_dir
from harness.runners.tensorrt.library import installed_module

pytest_plugins = ["pytester"]
GOLDENS = Path(__file__).resolve().parents[2] / "goldens"
MODEL = "needs_constraints"
FORCED = SweepPoint(keep_io_types=True, node_precisions=(("Add", "fp16"), ("Sub", "fp32")))
DEFAULT = SweepPoint(keep_io_types=True)
SCENARIO = """
import pytest
from harness import SweepPoint, Case


def _check(session, record, case):
    outcome = session.check_low_precision(Case("needs_constraints", case))
    record(outcome.record)
    assert outcome.status == "pass", outcome.message


def test_default(castguard_session, castguard_record):
    _check(castguard_session, castguard_record, SweepPoint(keep_io_types=True))


@pytest.mark.xfail(strict=True, reason="Add forced to fp16 overflows at 65504")
def test_forced(castguard_session, castguard_record):
    _check(castguard_session, castguard_record,
           SweepPoint(keep_io_types=True, node_precisions=(("Add", "fp16"), ("Sub", "fp32"))))
"""


def _copy_goldens(into: Path) -> Path:
    shutil.copytree(GOLDENS / MODEL, into / MODEL)
    return into


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> AccuracySession:
    tmp = tmp_path_factory.mktemp("seed003")
    config = HarnessConfig(
        models=(MODEL,), goldens_dir=_copy_goldens(tmp / "goldens"), report_dir=tmp / "report", cache_dir=tmp / "cache"
    )
    return AccuracySession.open(config, bundled_dir=bundled_models_dir())


def test_default_conversion_keeps_the_overflowing_nodes_fp32_and_passes(session: AccuracySession) -> None:
    assert session.models[MODEL].recipe.val_ranges == (("x", 1.0, 2.0),)
    outcome = session.check_low_precision(Case(MODEL, DEFAULT))
    assert outcome.status == "pass", outcome.message
    assert outcome.record is not None and outcome.record.high_nodes == 2 and outcome.record.low_nodes == 2


@pytest.mark.xfail(strict=True, reason="Add forced to fp16: x + 65504 rounds to 65504, so Sub returns 0, not x")
def test_forcing_add_fp16_and_sub_fp32_passes_on_emulate(session: AccuracySession) -> None:
    outcome = session.check_low_precision(Case(MODEL, FORCED))
    assert outcome.status == "pass", outcome.message


def test_the_forced_case_is_a_real_accuracy_failure_at_sub(session: AccuracySession) -> None:
    outcome = session.check_low_precision(Case(MODEL, FORCED))
    record = outcome.record
    assert outcome.status == "fail" and record is not None and record.first_divergent is not None
    assert (record.first_divergent.tensor, record.first_divergent.node) == ("subbed", "Sub")
    assert record.case_id == "fp16-dmax512-imax65504-excl_none-keepio1-emulate-np_Add.fp16+Sub.fp32"
    assert "node_precisions={'Add': 'fp16', 'Sub': 'fp32'}" in outcome.message
    assert "note: this case forces node precisions (Add:fp16, Sub:fp32)" in outcome.message, outcome.message
    assert "cause: tensor 'subbed' from node 'Sub' (Sub)" in outcome.message
    assert "verified" not in outcome.message and "fix: not found within 8 evaluations" in outcome.message


def test_the_report_shows_the_passing_default_and_the_expected_failure(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_scenario=SCENARIO)
    goldens = _copy_goldens(pytester.path / "goldens")
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--model", MODEL, "--goldens-dir", str(goldens), "test_scenario.py"
    )
    result.assert_outcomes(passed=1, xfailed=1)
    report = json.loads((pytester.path / "castguard-report" / "report.json").read_text())
    by_id = {c["case_id"]: c for c in report["cases"]}
    assert by_id[DEFAULT.id]["status"] == "pass"
    forced = by_id[FORCED.id]
    assert forced["status"] == "xfail" and forced["first_divergent"]["tensor"] == "subbed"
    markdown = (pytester.path / "castguard-report" / "report.md").read_text()
    assert f"| `{FORCED.id}` | xfail |" in markdown and f"| `{DEFAULT.id}` | pass |" in markdown
    assert "`subbed (Sub) 1.00e+00`" in markdown
    html = (pytester.path / "castguard-report" / "report.html").read_text()
    assert FORCED.id in html and "Cause: <code>subbed</code>" in html


def test_the_suite_option_forces_every_case_and_names_the_divergence(pytester: pytest.Pytester) -> None:
    goldens = _copy_goldens(pytester.path / "goldens")

    def suite(node_precisions: str) -> pytest.RunResult:
        return pytester.runpytest(
            "-p",
            "no:cacheprovider",
            "--model",
            MODEL,
            "--goldens-dir",
            str(goldens),
            "--node-precisions",
            node_precisions,
            "--precision",
            "fp16",
            "--data-max",
            "512",
            "--exclude-ops",
            "none",
            "--keep-io-types",
            "true",
        )

    forced = suite("Add:fp16,Sub:fp32")
    forced.assert_outcomes(passed=1, failed=1)
    forced.stdout.fnmatch_lines(
        [
            "*test_low_precision[[]needs_constraints-*-np_Add.fp16+Sub.fp32[]]*",
            "*cause: tensor 'subbed' from node 'Sub' (Sub)*",
        ]
    )
    unknown = suite("Mul:fp16")
    unknown.assert_outcomes(passed=1, failed=1)
    unknown.stdout.fnmatch_lines(["*keys [[]'Mul'[]] match no node name or op type in the model*"])


@pytest.mark.trt_build
@pytest.mark.skipif(
    installed_module() is None,
    reason='no TensorRT module is installed (neither tensorrt nor tensorrt_rtx_bindings): pip install "castguard[trt]"',
)
def test_the_forced_model_builds_in_tensorrt_and_the_report_shows_its_types_per_node(pytester: pytest.Pytester) -> None:
    """Strong typing keeps the forced plan: Add in fp16, Sub in fp32, as the seed's constrained network asks."""
    goldens = _copy_goldens(pytester.path / "goldens")
    pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "--model",
        MODEL,
        "--goldens-dir",
        str(goldens),
        "--node-precisions",
        "Add:fp16,Sub:fp32",
        "--precision",
        "fp16",
        "--data-max",
        "512",
        "--exclude-ops",
        "none",
        "--keep-io-types",
        "true",
    ).assert_outcomes(passed=1, failed=1)
    case = json.loads((pytester.path / "castguard-report" / "report.json").read_text())["cases"][0]
    build = case["trt_build"]
    assert case["case_id"] == FORCED.id and build["outcome"] == "ok" and build["plan_bytes"] > 0
    rows = {r["node"]: (r["op"], r["onnx"], r["tensorrt"]) for r in build["nodes"]}
    assert rows["Add"] == ("Add", "fp16", "fp16") and rows["Sub"] == ("Sub", "fp32", "fp32")
    markdown = (pytester.path / "castguard-report" / "report.md").read_text()
    assert "Types per ONNX node, converted model vs TensorRT" in markdown
    assert "| `Add` | Add | fp16 | fp16 | same |" in markdown and "| `Sub` | Sub | fp32 | fp32 | same |" in markdown
    html = (pytester.path / "castguard-report" / "report.html").read_text()
    assert "<h3>TensorRT build check</h3>" in html and "<td><code>Sub</code></td><td>Sub</td><td>fp32</td>" in html
