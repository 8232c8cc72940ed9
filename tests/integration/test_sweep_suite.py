"""The sweep through the pytest plugin (pytester): ids, layered settings, the report, the cache, xdist, usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Run
from tests.helpers.graphs import mlp_model, save

pytest_plugins = ["pytester"]
NARROW = ("--data-max", "512", "--exclude-ops", "none")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    save(mlp_model(), pytester.path / "mlp.onnx")
    return pytester


SUITE_ARGS = ("-rs", "--model", "mlp.onnx")  # the options of most runs here


def _report(pytester: pytest.Pytester, folder: str = "castguard-report") -> dict:
    data: dict = json.loads((pytester.path / folder / "report.json").read_text())
    return data


def test_the_default_sweep_runs_12_cases_and_writes_the_report_then_reuses_the_cache(
    project: pytest.Pytester, castguard_in: Run
) -> None:
    first = castguard_in(project, *SUITE_ARGS)
    first.assert_outcomes(passed=12, failed=1)  # the golden is written once (and fails once)
    first.stdout.fnmatch_lines(
        [
            "*castguard sweep report*",
            "castguard: 12 cases: 12 pass (* share another case's "
            "converted model); report: castguard-report/report.md, report.html, "
            "report.json",
        ]
    )
    report = _report(project)
    assert report["summary"]["pass"] == 12 and len(report["cases"]) == 12
    ids = {c["case_id"] for c in report["cases"]}
    assert "fp16-dmax8-imax65504-excl_none-keepio0-emulate" in ids
    assert "bf16-dmaxinf-imax65504-excl_sensitive-keepio0-emulate" in ids
    assert all(c["runner"] == "emulate" and c["outputs_file"] for c in report["cases"])
    assert {p.name for p in (project.path / "castguard-report").iterdir()} == {
        "report.json",
        "report.md",
        "report.html",
        "runs",
        ".castguard.lock",
        ".gitignore",  # castguard made the folder: git ignores it (issue 34.6)
    }
    (run,) = (project.path / "castguard-report" / "runs").iterdir()
    assert {p.name for p in run.iterdir()} == {"report.json", "report.md", "report.html", "outputs"}
    assert all(c["outputs_file"].startswith(f"runs/{run.name}/outputs/") for c in report["cases"])
    second = castguard_in(project, *SUITE_ARGS)
    second.assert_outcomes(passed=13)
    inputs = "inputs: seed 0, 1 iteration(s); x float32[1x8]: uniform in [-1, 1] (default; --val-range to change)"
    assert all(c["notes"] == [inputs] and c["conversion_cached"] for c in _report(project)["cases"])
    assert all(c["timings"]["magnitudes_s"] == 0.0 for c in _report(project)["cases"])


def test_settings_layer_pyproject_then_sweep_file_then_options(project: pytest.Pytester, castguard_in: Run) -> None:
    project.makepyprojecttoml('[tool.castguard.sweep]\nprecisions = ["bf16"]\ndata_max = [64]\nrunners = ["emulate"]\n')
    (project.path / "sweep.toml").write_text("data_max = [16, 32]\n")
    result = castguard_in(
        project, *SUITE_ARGS, "--sweep", "sweep.toml", "--keep-io-types", "true", "--collect-only", "-q"
    )
    ids = [line.split("[", 1)[1].rstrip("]") for line in result.stdout.lines if "test_low_precision[" in line]
    assert ids == [
        "mlp-bf16-dmax16-imax65504-excl_none-keepio1-emulate",
        "mlp-bf16-dmax16-imax65504-excl_sensitive-keepio1-emulate",
        "mlp-bf16-dmax32-imax65504-excl_none-keepio1-emulate",
        "mlp-bf16-dmax32-imax65504-excl_sensitive-keepio1-emulate",
    ]


def test_exclusion_sets_node_precisions_and_fp32_accumulation_show_in_ids(
    project: pytest.Pytester, castguard_in: Run
) -> None:
    result = castguard_in(
        project,
        *SUITE_ARGS,
        "--precision",
        "fp16",
        "--data-max",
        "inf",
        "--keep-io-types",
        "false",
        "--exclude-ops",
        "gemms=Gemm",
        "--node-precisions",
        "relu:fp32",
        "--fp32-accumulation",
        "--report-dir",
        "out",
    )
    result.assert_outcomes(passed=1, failed=1)
    (case,) = _report(project, "out")["cases"]
    assert case["case_id"] == "fp16-dmaxinf-imax65504-excl_gemms-keepio0-emulate-np_relu.fp32-acc32"
    assert case["case"]["exclusion"] == {"name": "gemms", "ops": ["Gemm"]} and case["lowp_flop_share"] == 0.0


def test_bf16_on_ort_cpu_is_skipped_with_the_reason(project: pytest.Pytester, castguard_in: Run) -> None:
    result = castguard_in(
        project, *SUITE_ARGS, *NARROW, "--precision", "bf16", "--keep-io-types", "true", "--runner", "ort"
    )
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*ort[[]CPUExecutionProvider[]] has no bf16 kernels*--runner emulate*"])
    (case,) = _report(project)["cases"]
    assert case["status"] == "skip" and case["runner"] == "ort[CPUExecutionProvider]"


@pytest.mark.parametrize(
    ("args", "pyproject", "message"),
    [
        (("--data-max", "64,abc"), "", "--data-max: 'abc' is not a number"),
        (("--sweep", "missing.toml"), "", "sweep file not found"),
        (("--exclude-ops", "attention"), "", "no exclusion set named 'attention'"),
        (
            (),
            '[tool.castguard]\nrunners = ["emulate"]\n[tool.castguard.sweep]\nrunners = ["ort"]\n',
            "runners are also set in [tool.castguard.sweep]",
        ),
        ((), '[tool.castguard.tolerances]\nfp16 = { atol = "big" }\n', "has the wrong type"),
    ],
)
def test_bad_sweep_settings_are_one_usage_error(
    project: pytest.Pytester, args: tuple[str, ...], pyproject: str, message: str, castguard_in: Run
) -> None:
    if pyproject:
        project.makepyprojecttoml(pyproject)
    result = castguard_in(project, *SUITE_ARGS, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str() and "fix:" in result.stderr.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_the_report_dir_option_is_relative_to_the_invocation_dir(
    project: pytest.Pytester, tmp_path: Path, castguard_in: Run
) -> None:
    castguard_in(
        project,
        *SUITE_ARGS,
        *NARROW,
        "--precision",
        "fp16",
        "--keep-io-types",
        "true",
        "--report-dir",
        str(tmp_path / "r"),
    )
    assert (tmp_path / "r" / "report.html").is_file()
