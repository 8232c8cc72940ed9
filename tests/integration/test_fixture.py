"""The ``castguard`` fixture in a project that is not castguard's (issue 24.1), with pytester.

The project has its own pyproject.toml ([tool.castguard]), conftest.py (its calibration batches), models/ and a
test file parametrized over two precisions. Its cases go into the report and the nightly history; a conversion
that breaks accuracy fails the user's test with castguard's message.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from harness.nightly.history import read_history
from harness.runners.registry import registered
from tests.conftest import Run
from tests.helpers.graphs import cancellation_model, mlp_model, save
from tests.helpers.plugin_dist import PACKAGE, install_into

pytest_plugins = ["pytester"]

CONFTEST = """
import numpy as np
import pytest


@pytest.fixture
def my_batches():
    rng = np.random.default_rng(1)
    return [{"x": rng.normal(size=(1, 8)).astype(np.float32)} for _ in range(3)]
"""

USER_TESTS = """
import pytest


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_mlp(castguard, my_batches, precision):
    result = castguard.check("models/mlp.onnx", precision=precision, data_max=512, inputs=my_batches,
                             runner="emulate")
    assert result.passed, result.explain()
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    save(mlp_model(), pytester.path / "models" / "mlp.onnx")
    save(cancellation_model(), pytester.path / "models" / "cancel.onnx")
    pytester.makepyprojecttoml(
        '[project]\nname = "user-project"\nversion = "0"\n\n'
        '[tool.castguard]\ngoldens_dir = "gold"\nreport_dir = "rep"\n'
    )
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_cg_user=USER_TESTS)
    return pytester


def _report(project: pytest.Pytester) -> dict:  # type: ignore[type-arg]
    return json.loads((project.path / "rep" / "report.json").read_text())


def test_user_tests_over_two_precisions_write_the_golden_once_then_pass_into_report_and_history(
    project: pytest.Pytester, tmp_path: Path, castguard_in: Run
) -> None:
    first = castguard_in(project, "-v")
    first.assert_outcomes(failed=2)  # every check of the run that wrote the golden fails, whichever wrote it
    first.stdout.fnmatch_lines(
        [
            "*test_mlp?fp16? FAILED*",
            "*test_mlp?bf16? FAILED*",
            "*golden written in this run*gold/models.mlp/file-*.npz*",
        ]
    )
    assert "Traceback" not in first.stdout.str()
    history = tmp_path / "history"
    second = castguard_in(project, "-v", f"--history={history}")
    second.assert_outcomes(passed=2)
    second.stdout.fnmatch_lines(["*castguard sweep report*", "*castguard: 2 cases: 2 pass*rep/report.md*"])
    cases = {(c["model"], c["case_id"], c["status"]) for c in _report(project)["cases"]}
    assert cases == {
        ("models.mlp", "fp16-dmax512-imax65504-excl_none-keepio0-emulate", "pass"),
        ("models.mlp", "bf16-dmax512-imax65504-excl_none-keepio0-emulate", "pass"),
    }
    night = read_history(history).runs
    assert len(night) == 1
    assert {(c.model, c.case_id, c.status) for c in night[0].report.cases} == cases
    same = castguard_in(
        project, "-v", "--update-goldens"
    )  # regenerated, value-identical: nothing to review (issue 34.5)
    same.assert_outcomes(passed=2)


def test_a_broken_conversion_fails_the_users_test_with_castguards_message(
    project: pytest.Pytester, castguard_in: Run
) -> None:
    project.makepyfile(
        test_cg_cancel="""
def test_cancel(castguard):
    result = castguard.check("models/cancel.onnx", precision="fp16", data_max=512, runner="emulate")
    assert result.status == "fail" and result.first_divergence is not None
    assert result.passed, result.explain()
"""
    )
    castguard_in(project, "test_cg_cancel.py")  # writes the golden
    result = castguard_in(project, "test_cg_cancel.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            (
                "*castguard models.cancel [[]fp16-dmax512-*-emulate[]]: fail; on emulate; worst "
                "output 'y': max abs error 0.1*; first divergence at y (Sub node sub*"
            ),
            "*does not match its FP32 golden on emulate*",
            "*fix:*",
        ]
    )
    (case,) = _report(project)["cases"]
    assert case["status"] == "fail" and case["model"] == "models.cancel"


def test_sweep_returns_every_case_with_typed_figures(project: pytest.Pytester, castguard_in: Run) -> None:
    project.makepyfile(
        test_cg_sweep="""
from harness.report import OutputStats


def test_sweep(castguard, my_batches):
    results = castguard.sweep("models/mlp.onnx", precisions=["fp16", "bf16"], data_max=[8, 512],
                              inputs=my_batches)
    assert [r.case_id.split("-")[:2] for r in results] == [["fp16", "dmax8"], ["fp16", "dmax512"],
                                                          ["bf16", "dmax8"], ["bf16", "dmax512"]]
    for r in results:
        assert r.passed, r.explain()
        assert isinstance(r.outputs[0], OutputStats) and r.outputs[0].name == "y"
        assert 0 <= r.outputs[0].max_abs < r.outputs[0].atol + r.outputs[0].rtol * 100
        assert 0 < r.lowp_flop_share <= 1 and r.worst_error is not None and r.first_divergence is None
        assert r.explain().startswith(f"castguard models.mlp [{r.case_id}]: pass; on emulate")
"""
    )
    first = castguard_in(project, "test_cg_sweep.py")  # writes the golden: every case of this run says so
    first.assert_outcomes(failed=1)
    first.stdout.fnmatch_lines(["*golden written in this run*"])
    castguard_in(project, "test_cg_sweep.py").assert_outcomes(passed=1)
    assert len(_report(project)["cases"]) == 4


def test_bad_input_fails_the_test_with_one_message(project: pytest.Pytester, castguard_in: Run) -> None:
    project.makepyfile(
        test_cg_bad="""
import numpy as np


def test_missing(castguard):
    castguard.check("models/nope.onnx")


def test_wrong_inputs(castguard):
    castguard.check("models/mlp.onnx", inputs=[{"x": np.zeros((3, 3), np.float32)}])
"""
    )
    result = castguard_in(project, "test_cg_bad.py")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "Traceback" not in out and "harness/check/" not in out
    assert "During handling" not in out
    result.stdout.fnmatch_lines(
        [
            "*models/nope.onnx: no such file*",
            "*fix: pass a path to an .onnx file*",
            (
                "*inputs= of check('models/mlp.onnx') (your feeds, saved as *.json): iteration 0: "
                "input 'x' has shape [[]3, 3[]], the model declares [[]1,8[]]*"
            ),
            "*fix: give feeds that match the model's inputs*",
        ]
    )


def test_under_xdist_every_workers_cases_reach_the_report(project: pytest.Pytester, castguard_in: Run) -> None:
    castguard_in(project)  # goldens
    result = castguard_in(project, "-n", "2")
    result.assert_outcomes(passed=2)
    assert len(_report(project)["cases"]) == 2
    assert sorted(c["case_id"][:4] for c in _report(project)["cases"]) == ["bf16", "fp16"]


def test_a_plugin_runner_through_the_fixture_is_named_in_provenance(
    project: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, castguard_in: Run
) -> None:
    registered.cache_clear()
    monkeypatch.syspath_prepend(str(install_into(tmp_path / "site")))
    monkeypatch.delitem(sys.modules, PACKAGE, raising=False)
    project.makepyfile(
        test_cg_plugin="""
import pytest


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_onnxref(castguard, my_batches, precision):
    castguard.check("models/mlp.onnx", inputs=my_batches)     # the golden
    result = castguard.check("models/mlp.onnx", precision=precision, inputs=my_batches, runner="onnxref")
    if precision == "bf16":
        assert result.status == "skip" and "runs fp16 only" in result.message
    else:
        assert result.passed and result.runner == "onnxref", result.explain()
"""
    )
    try:
        castguard_in(project, "test_cg_plugin.py").assert_outcomes(failed=2)  # the run that writes the golden
        castguard_in(project, "test_cg_plugin.py").assert_outcomes(passed=2)
        report = _report(project)
    finally:
        registered.cache_clear()
    assert ["onnxref", "castguard-onnxref-runner", "0.1.0"] in report["provenance"]["runner_sources"]
    statuses = {c["case_id"]: c["status"] for c in report["cases"] if c["case_id"].endswith("onnxref")}
    assert statuses == {
        "fp16-dmax512-imax65504-excl_none-keepio0-onnxref": "pass",
        "bf16-dmax512-imax65504-excl_none-keepio0-onnxref": "skip",
    }


def test_an_xfail_user_test_records_its_cases_as_xfail(project: pytest.Pytester, castguard_in: Run) -> None:
    project.makepyfile(
        test_cg_xfail="""
import pytest


@pytest.mark.xfail(reason="cancellation is known to break in fp16", strict=True)
def test_cancel(castguard):
    result = castguard.check("models/cancel.onnx", precision="fp16", runner="emulate")
    assert result.passed, result.explain()
"""
    )
    first = castguard_in(project, "test_cg_xfail.py")  # writes the golden: a failure the xfail mark does not cover
    first.assert_outcomes(failed=1)
    first.stdout.fnmatch_lines(["*golden written in this run*", "*marked xfail; a golden written in this run*"])
    castguard_in(project, "test_cg_xfail.py").assert_outcomes(xfailed=1)
    assert [c["status"] for c in _report(project)["cases"]] == ["xfail"]


STRICT_TESTS = """
import pytest


def test_cancel_strict(castguard):
    castguard.check("models/cancel.onnx", precision="fp16", runner="emulate", strict=True)   # no assert


def test_mlp_strict(castguard, my_batches):
    castguard.check("models/mlp.onnx", precision="fp16", inputs=my_batches, runner="emulate", strict=True)


def test_sweep_strict(castguard):
    castguard.sweep("models/cancel.onnx", precisions=["fp16", "bf16"], runners=["emulate"], strict=True)


def test_skip_strict(castguard, my_batches):
    castguard.check("models/mlp.onnx", precision="bf16", inputs=my_batches, runner="ort", strict=True)
"""


def test_strict_checks_fail_the_test_without_an_assert(project: pytest.Pytester, castguard_in: Run) -> None:
    project.makepyfile(test_cg_strict=STRICT_TESTS)
    castguard_in(project, "test_cg_strict.py")  # the goldens
    result = castguard_in(project, "test_cg_strict.py", "-rs", "-v")
    result.assert_outcomes(passed=1, failed=2, skipped=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*test_cancel_strict FAILED*",
            "*test_mlp_strict PASSED*",
            "*test_sweep_strict FAILED*",
            "*test_skip_strict SKIPPED*",
        ]
    )
    assert "castguard models.cancel [fp16-dmax512-imax65504-excl_none-keepio0-emulate]: fail" in out  # explain()
    assert "Traceback" not in out


@pytest.mark.parametrize("order", ['"fp16", "bf16"', '"bf16", "fp16"'])
@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_a_first_run_fails_the_same_tests_in_any_order_or_worker(
    project: pytest.Pytester, workers: list[str], order: str, castguard_in: Run
) -> None:
    project.makepyfile(test_cg_user=USER_TESTS.replace('"fp16", "bf16"', order))
    first = castguard_in(project, "-v", *workers)
    first.assert_outcomes(failed=2)
    first.stdout.fnmatch_lines_random(["FAILED *test_mlp?fp16?*", "FAILED *test_mlp?bf16?*"])
    assert first.stdout.str().count("golden written in this run") >= 2
    castguard_in(project, *workers).assert_outcomes(passed=2)


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "user_project"


def test_the_example_project_runs_as_printed_in_the_readme(tmp_path: Path, castguard_in: Run) -> None:
    """examples/user_project: the README prints its test file; run it twice (the first run writes goldens)."""
    readme = (EXAMPLE.parents[1] / "README.md").read_text()
    source = (EXAMPLE / "tests" / "test_castguard_mnist.py").read_text()
    block = readme.split("## castguard in your own tests", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert block in source
    folder = tmp_path / "user_project"
    shutil.copytree(EXAMPLE, folder)
    first = castguard_in(folder, "-q").proc
    assert first.returncode == 1 and "golden written" in first.stdout, first.stdout[-3000:]
    second = castguard_in(folder, "-q").proc
    assert second.returncode == 0, second.stdout[-3000:]
    assert "3 passed" in second.stdout
    report = json.loads((folder / "castguard-report" / "report.json").read_text())
    assert len(report["cases"]) == 4 and {c["status"] for c in report["cases"]} == {"pass"}


def test_a_candidate_is_judged_through_the_fixture(project: pytest.Pytester, castguard_in: Run) -> None:
    """``castguard.check(model, candidate=path)``: the user's own fp16 file against the FP32 golden (issue 30)."""
    from onnxruntime.transformers import float16

    save(float16.convert_float_to_float16(cancellation_model(), keep_io_types=True), project.path / "cancel16.onnx")
    project.makepyfile(
        test_cg_candidate="""
def test_candidate(castguard):
    result = castguard.check("models/cancel.onnx", candidate="cancel16.onnx", runner="emulate")
    assert result.case_id == "candidate-emulate"
    assert result.status == "fail" and result.worst_error > 0.01, result.explain()
"""
    )
    castguard_in(project, "test_cg_candidate.py")  # writes the golden
    result = castguard_in(project, "test_cg_candidate.py")
    result.assert_outcomes(passed=1)
    (case,) = _report(project)["cases"]
    assert case["case"]["converter"] == "candidate" and case["case"]["candidate"].endswith("cancel16.onnx")
