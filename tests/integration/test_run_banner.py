"""A failed run's banner (report.md, report.html) states its true reasons (issue 32.9): it used to blame "tests
that failed outside the sweep cases (a golden that could not be made)" whatever failed the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness.report import Report
from harness.report.banner import RunTrouble, failure_reasons
from tests.helpers.graphs import cancellation_model, save
from tests.helpers.report_samples import sample_report

REPO = Path(__file__).resolve().parents[2]
ONE_CASE = ("--precision", "fp16", "--data-max", "512", "--exclude-ops", "none", "--keep-io-types", "true")


def banner(report_dir: Path) -> str:
    return next(line for line in (report_dir / "report.md").read_text().splitlines() if "This run FAILED" in line)


def test_the_banner_names_what_failed_the_run(tmp_path: Path) -> None:
    model = save(cancellation_model(), tmp_path / "models" / "cancel.onnx")  # fails fp16 at data_max 512
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTEST_ADDOPTS", None)

    def run(report: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--model={model}", *ONE_CASE]
        command += [f"--report-dir={tmp_path / report}", f"--goldens-dir={tmp_path / 'goldens'}"]
        return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)

    assert run("first").returncode == 1  # the golden is written (its test fails once) and the case fails
    first = banner(tmp_path / "first")
    assert "1 case(s) failed their accuracy check" in first
    assert "1 test(s) outside the sweep cases failed: test_fp32_golden[" in first
    assert run("second").returncode == 1  # the golden exists: only the case fails
    second = banner(tmp_path / "second")
    assert "1 case(s) failed their accuracy check" in second
    assert "outside the sweep" not in second and "golden" not in second


def test_each_reason_only_when_its_fact_is_there() -> None:
    sample = sample_report()
    passing = Report.build(
        [c for c in sample.cases if c.status == "pass"], created=sample.created, provenance=sample.provenance
    )
    assert passing.cases
    assert failure_reasons(passing, RunTrouble(regressions=2), exitstatus=1) == [
        "2 regression(s) against the baseline (--fail-on-regression)"
    ]
    assert failure_reasons(passing, RunTrouble(no_golden=("m",)), exitstatus=1) == [
        "no FP32 golden could be made for: m"
    ]
    assert failure_reasons(passing, RunTrouble(), exitstatus=3) == [
        "pytest ended with exit status 3 for a reason outside castguard's cases"
    ]
