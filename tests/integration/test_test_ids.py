"""A failing case's test id, as pytest prints it, pasted back into pytest runs exactly that case; a run leaves
no empty .benchmarks/ folder (pytest-benchmark's) in the user's project."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
REPO = Path(__file__).resolve().parents[2]
FAILING = [
    "--model",
    "needs_constraints",
    "--precision",
    "fp16",
    "--data-max",
    "512,inf",
    "--exclude-ops",
    "none",
    "--keep-io-types",
    "false",
    f"--goldens-dir={REPO / 'goldens'}",
    "-p",
    "no:cacheprovider",
]


def test_a_failing_test_id_pasted_back_runs_that_case(pytester: pytest.Pytester) -> None:
    first = pytester.runpytest(*FAILING, "-rf")
    first.assert_outcomes(passed=2, failed=1)  # data_max=inf overflows Add/Sub in fp16
    (line,) = [line for line in first.stdout.lines if line.startswith("FAILED ")]
    test_id = re.match(r"FAILED (\S+)", line)[1]  # type: ignore[index]
    assert test_id.endswith("::test_low_precision[needs_constraints-fp16-dmaxinf-imax65504-excl_none-keepio0-emulate]")
    again = pytester.runpytest(*FAILING, test_id)  # pasted as printed
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines(["castguard: 1 case: 1 fail; report: *"])
    by_keyword = pytester.runpytest(*FAILING, "-k", "dmax512")  # and the usual -k still selects by id
    by_keyword.assert_outcomes(passed=1)
    assert not (pytester.path / ".benchmarks").exists()


def test_other_arguments_are_left_alone(pytester: pytest.Pytester) -> None:
    from harness.plugin.suitefiles import SUITE_FILE, suite_arg

    (pytester.path / "test_mine.py").write_text("def test_low_precision():\n    pass\n")
    assert (
        suite_arg("test_mine.py::test_low_precision", invocation_dir=pytester.path)
        == "test_mine.py::test_low_precision"
    )
    assert suite_arg("tests/", invocation_dir=pytester.path) == "tests/"
    assert suite_arg("::test_fp32_golden[m]", invocation_dir=pytester.path) == f"{SUITE_FILE}::test_fp32_golden[m]"
    (pytester.path / ".benchmarks").mkdir()  # the user's own: kept
    pytester.runpytest("-p", "no:cacheprovider", "test_mine.py").assert_outcomes(passed=1)
    assert (pytester.path / ".benchmarks").is_dir()
