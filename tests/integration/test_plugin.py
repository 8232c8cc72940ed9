"""The pytest plugin end to end, with pytester: collection, goldens lifecycle, config precedence, usage errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Run
from tests.helpers.graphs import cancellation_model, mlp_model, save

pytest_plugins = ["pytester"]


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    save(mlp_model(), pytester.path / "models" / "mlp.onnx")
    pytester.makepyfile(test_own="def test_own():\n    assert 1 + 1 == 2\n")
    return pytester


# One sweep point (of the default 24) keeps these plugin tests fast; the sweep itself is tested in test_sweep_suite.py.
ONE_CASE = ("--precision", "fp16", "--data-max", "512", "--exclude-ops", "none", "--keep-io-types", "false")
CASE = "fp16-dmax512-imax65504-excl_none-keepio0"


SUITE_ARGS = ("-rs", *ONE_CASE)  # the options of most runs here


def test_model_runs_the_suite_and_writes_the_golden_once(project: pytest.Pytester, castguard_in: Run) -> None:
    first = castguard_in(project, *SUITE_ARGS, "--model", "models/mlp.onnx")
    first.assert_outcomes(passed=1, failed=1)
    first.stdout.fnmatch_lines(["*test_fp32_golden*mlp*", "*golden written*goldens/models.mlp/seed0-it1-*.npz*"])
    assert "test_own" not in first.stdout.str()
    assert list((project.path / "goldens" / "models.mlp").glob("*.json"))
    second = castguard_in(project, *SUITE_ARGS, "--model", "models/mlp.onnx", "-v")
    second.assert_outcomes(passed=2)
    second.stdout.fnmatch_lines(
        ["*test_fp32_golden?models.mlp? PASSED*", f"*test_low_precision?models.mlp-{CASE}-emulate? PASSED*"]
    )


def test_plain_pytest_runs_the_projects_own_tests(project: pytest.Pytester, castguard_in: Run) -> None:
    castguard_in(project, *SUITE_ARGS).assert_outcomes(passed=1)


def test_explicit_paths_are_respected_with_model(project: pytest.Pytester, castguard_in: Run) -> None:
    castguard_in(project, *SUITE_ARGS, "--model", "models/mlp.onnx", "test_own.py").assert_outcomes(passed=1)


def test_stale_golden_then_update(project: pytest.Pytester, castguard_in: Run) -> None:
    castguard_in(project, *SUITE_ARGS, "--model", "models/mlp.onnx")
    save(mlp_model(seed=5), project.path / "models" / "mlp.onnx")
    stale = castguard_in(project, *SUITE_ARGS, "--model", "models/mlp.onnx")
    stale.assert_outcomes(failed=2)
    stale.stdout.fnmatch_lines(["*never reused for a different model*", "*fix: *--update-goldens*"])
    assert "Traceback" not in stale.stdout.str()
    castguard_in(project, *SUITE_ARGS, "--model", "models/mlp.onnx", "--update-goldens").assert_outcomes(
        passed=1, failed=1
    )
    castguard_in(project, *SUITE_ARGS, "--model", "models/mlp.onnx").assert_outcomes(passed=2)


def test_pyproject_defaults_and_cli_override(project: pytest.Pytester, castguard_in: Run) -> None:
    project.makepyprojecttoml('[tool.castguard]\nrunners = ["reference", "emulate"]\ngoldens_dir = "gold"\nseed = 7\n')
    result = castguard_in(project, *SUITE_ARGS, "--model", "models/mlp.onnx", "--collect-only", "-q")
    result.stdout.fnmatch_lines([f"*mlp-{CASE}-reference*", f"*mlp-{CASE}-emulate*"])
    override = castguard_in(project, *SUITE_ARGS, "--model", "models/mlp.onnx", "--runner", "ort")
    override.assert_outcomes(failed=1, skipped=1)
    override.stdout.fnmatch_lines(
        ["*gold/models.mlp/seed7-it1-*", "*computes fp16 in fp32; not a low-precision oracle*"]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "mnst"], "did you mean 'mnist'"),
        (["--model", "models/mlp.onnx", "--runner", "gpu"], "unknown runner"),
        (["--model", "models/mlp.onnx", "--val-range", "z:[0,1]"], "no input named 'z'"),
        (["--model", "models/mlp.onnx", "--val-range", "x:[2,1"], "cannot parse"),
    ],
)
def test_usage_errors_are_one_message(
    project: pytest.Pytester, args: list[str], message: str, castguard_in: Run
) -> None:
    result = castguard_in(project, *SUITE_ARGS, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert err.lstrip().startswith("ERROR: ") and message in err and "fix:" in err
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_bundled_model_by_name_uses_its_default_inputs(pytester: pytest.Pytester, castguard_in: Run) -> None:
    result = castguard_in(pytester, *SUITE_ARGS, "--model", "mnist.onnx", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["*test_fp32_golden[[]mnist[]]*", f"*test_low_precision[[]mnist-{CASE}-emulate[]]*"])


def test_xdist_workers_share_goldens_safely(project: pytest.Pytester, castguard_in: Run) -> None:
    save(mlp_model(seed=3), project.path / "models" / "other.onnx")
    args = [
        "--model",
        "models/mlp.onnx",
        "--model",
        "models/other.onnx",
        "--runner",
        "emulate",
        "--runner",
        "reference",
        "-n",
        "2",
        *ONE_CASE,
    ]
    first = castguard_in(project.path, *args)  # a process of its own: xdist starts workers
    outcomes = first.parseoutcomes()
    assert outcomes.get("failed", 0) >= 2 and not outcomes.get("error")
    second = castguard_in(project.path, *args)
    second.assert_outcomes(passed=6)
    assert len(list(Path(project.path, "goldens").glob("*/*.npz"))) == 2


def test_low_precision_failure_message_and_ort_cpu_is_not_an_oracle(
    pytester: pytest.Pytester, castguard_in: Run
) -> None:
    save(cancellation_model(), pytester.path / "cancel.onnx")
    args = ["--model", "cancel.onnx", "--val-range", "x:[-0.5,0.5]", "--runner", "emulate", "--runner", "ort"]
    castguard_in(pytester, *SUITE_ARGS, *args)
    result = castguard_in(pytester, *SUITE_ARGS, *args)
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            f"*cancel [[]{CASE}-emulate[]] does not match its FP32 golden on emulate: output 'y' max_rel 1.00e+00, "
            "diverges first at 'y' (Sub)",
            "  output 'y' FAIL: * element(s) over tolerance",
            "*/16 (*%) elements outside atol=* rtol=* [[]elemwise[]]*would pass with atol>=*",
            "*golden: *goldens/cancel/seed0-it1-*.npz",
            "*conversion: low_precision_type='fp16', data_max=512, *; 2 node(s) in fp16*",
            "*cause: tensor 'y' from node 'sub' (Sub)*",
            "*verified: with 'sub', 'add' in FP32 this case passes*",
            "*fix: castguard convert --onnx_path /*cancel.onnx --output_path /*",
            "*SKIPPED*ort[[]CPUExecutionProvider[]] computes fp16 in fp32; not a low-precision oracle*would pass*",
        ]
    )
