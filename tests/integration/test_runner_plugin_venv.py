"""The example runner plugin (examples/runner_plugin) pip-installed with castguard into a fresh venv (issue 24.2):
discovered, selectable with ``--runner onnxref`` and ``runner="onnxref"`` in the fixture, run, in the report with
its package and version. Slow: the install takes about a minute (pip's local cache, no network)."""

from __future__ import annotations

import json
import sys
import venv
from pathlib import Path

import pytest

from tests.conftest import Run

ROOT = Path(__file__).resolve().parents[2]

USER_TEST = """
import pytest


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_mnist_on_onnxref(castguard, precision):
    result = castguard.check("mnist", precision=precision, runner="onnxref")
    if precision == "bf16":
        assert result.status == "skip", result.explain()
    else:
        assert result.passed and result.runner == "onnxref", result.explain()
"""


@pytest.mark.slow
def test_example_plugin_installed_in_a_fresh_venv_runs_and_is_reported(tmp_path: Path, castguard_in: Run) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / ("Scripts" if sys.platform == "win32" else "bin") / "python")
    install = ("-m", "pip", "install", "-q", str(ROOT), str(ROOT / "examples" / "runner_plugin"))
    done = castguard_in(tmp_path, *install, tool="python", python=python, timeout=900).proc
    assert done.returncode == 0, done.stderr[-3000:]
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0"\n\n[tool.castguard]\n')
    (project / "test_mine.py").write_text(USER_TEST)

    suite = castguard_in(
        project,
        "-rs",
        "--model",
        "mnist",
        "--runner",
        "onnxref",
        "--precision",
        "fp16,bf16",
        "--data-max",
        "512",
        "--exclude-ops",
        "none",
        python=python,
        timeout=900,
    ).proc
    assert suite.returncode == 1, suite.stdout[-3000:]  # the golden test fails once: it wrote the golden
    assert "golden written" in suite.stdout
    assert "runner onnxref (castguard-onnxref-runner 0.1.0) runs fp16 only; this model holds bf16" in suite.stdout
    report = json.loads((project / "castguard-report" / "report.json").read_text())
    assert {c["case_id"]: c["status"] for c in report["cases"]} == {
        "fp16-dmax512-imax65504-excl_none-keepio0-onnxref": "pass",
        "bf16-dmax512-imax65504-excl_none-keepio0-onnxref": "skip",
    }
    assert ["onnxref", "castguard-onnxref-runner", "0.1.0"] in report["provenance"]["runner_sources"]
    assert "onnxref (castguard-onnxref-runner 0.1.0)" in (project / "castguard-report" / "report.md").read_text()

    fixture = castguard_in(project, "-q", "test_mine.py", python=python, timeout=900).proc
    assert fixture.returncode == 0, fixture.stdout[-3000:]
    report = json.loads((project / "castguard-report" / "report.json").read_text())
    assert {c["case_id"]: c["status"] for c in report["cases"]} == {
        "fp16-dmax512-imax65504-excl_none-keepio0-onnxref": "pass",
        "bf16-dmax512-imax65504-excl_none-keepio0-onnxref": "skip",
    }
    assert ["onnxref", "castguard-onnxref-runner", "0.1.0"] in report["provenance"]["runner_sources"]
