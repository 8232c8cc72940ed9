"""``pytest --model X --tune`` through the plugin (pytester): the tuned case, its stored plan, the report, and a
new model version whose stored plan stops meeting its bound (a regression naming the nodes to move)."""

from __future__ import annotations

import json

import onnx
import pytest

from test_models import tune_models
from tests.conftest import Run

pytest_plugins = ["pytester"]
GRID = ("--precision", "fp16", "--data-max", "512", "--exclude-ops", "none", "--keep-io-types", "false")


SUITE_ARGS = ("--model", "rc.onnx", "--tune", *GRID)  # the options of most runs here


def _cases(pytester: pytest.Pytester) -> dict[str, dict]:
    report = json.loads((pytester.path / "castguard-report" / "report.json").read_text())
    return {c["case_id"]: c for c in report["cases"]}


def test_tuned_case_plan_report_and_new_model_version(pytester: pytest.Pytester, castguard_in: Run) -> None:
    onnx.save(tune_models.residual_cancel(), pytester.path / "rc.onnx")
    first = castguard_in(pytester, *SUITE_ARGS)
    first.assert_outcomes(passed=1, failed=2)  # golden written once; the default grid case misses
    cases = _cases(pytester)
    grid, tuned = cases["fp16-dmax512-imax65504-excl_none-keepio0-emulate"], cases["fp16-tuned-keepio0-emulate"]
    assert grid["status"] == "fail" and tuned["status"] == "pass"
    # the cancellation pair, and what the hunt's counterexamples (corners of the box) add on the golden's one input
    kept = [k for k, _ in tuned["kept_fp32"]]
    assert kept[:2] == ["residual_add", "cancel_sub"]
    assert tuned["lowp_flop_share"] > 0.8 and tuned["case"]["tuned"] is True
    timings = tuned["timings"]  # the tuned case runs the same pipeline: timed steps that add up
    assert timings["tune_s"] > 0 and timings["infer_s"] > 0
    steps = sum(v for k, v in timings.items() if k != "total_s")  # the case's wall time is its steps and the gaps
    assert 0.9 * timings["total_s"] <= steps <= timings["total_s"] + 1e-6  # between them (milliseconds, any load)
    assert (pytester.path / "castguard-report" / tuned["outputs_file"]).is_file()  # saved in its run, like any case
    (plan_file,) = (pytester.path / "goldens" / "rc").glob("*.tuned-fp16.plan.json")
    plan = json.loads(plan_file.read_text())
    assert plan["kept_fp32"] == kept and plan["holds"] is True
    assert len(plan["inputs"]["counterexamples"]) == len(plan["rounds"]) - 1
    md = (pytester.path / "castguard-report" / "report.md").read_text()
    assert "Tuned plans" in md and "`cancel_sub`: local error" in md
    assert "Tuned plans" in (pytester.path / "castguard-report" / "report.html").read_text()

    castguard_in(pytester, *SUITE_ARGS).assert_outcomes(passed=2, failed=1)  # the stored plan still meets its bound
    notes = _cases(pytester)["fp16-tuned-keepio0-emulate"]["notes"]
    assert notes[0].startswith("inputs: ") and "still meets its bound" in notes[-1]  # like every case: its inputs

    onnx.save(tune_models.residual_cancel(second_cancel=True), pytester.path / "rc.onnx")  # a new version
    renewed = castguard_in(pytester, *SUITE_ARGS, "--update-goldens")
    renewed.assert_outcomes(failed=3)
    renewed.stdout.fnmatch_lines(
        [
            "*the tuned plan*no longer meets its bound on this model version*",
            "*move to FP32: *shift_add, unshift_sub",
            "*rewritten (--update-goldens)*",
        ]
    )
    assert {"residual_add", "cancel_sub", "shift_add", "unshift_sub"} <= set(
        json.loads(plan_file.read_text())["kept_fp32"]
    )
    castguard_in(pytester, *SUITE_ARGS).assert_outcomes(passed=2, failed=1)


def test_tune_from_pyproject_and_bad_value(pytester: pytest.Pytester, castguard_in: Run) -> None:
    onnx.save(tune_models.wide_activations(), pytester.path / "rc.onnx")
    pytester.makepyprojecttoml("[tool.castguard]\ntune = true\n")
    result = castguard_in(pytester, "--model", "rc.onnx", *GRID, "--collect-only", "-q")
    assert any("test_tuned[rc-fp16-tuned-keepio0-emulate]" in line for line in result.stdout.lines)
    pytester.makepyprojecttoml('[tool.castguard]\ntune = "yes"\n')
    bad = castguard_in(pytester, "--model", "rc.onnx", *GRID, "--collect-only", "-q")
    assert bad.ret != 0
    bad.stderr.fnmatch_lines(["*tune*expected true or false*"])
