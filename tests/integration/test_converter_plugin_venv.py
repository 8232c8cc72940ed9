"""The example converter plugin (examples/converter_plugin) pip-installed with castguard into a fresh venv (issue
30): discovered, selectable with ``--converter plain-fp16`` next to castguard's own converter, only the settings it
takes swept, run in a child process, in the report with its package and version. Slow: the install takes about a
minute (pip's local cache, no network)."""

from __future__ import annotations

import json
import sys
import venv
from pathlib import Path

import pytest

from tests.conftest import Run

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_example_converter_installed_in_a_fresh_venv_runs_and_is_reported(tmp_path: Path, castguard_in: Run) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / ("Scripts" if sys.platform == "win32" else "bin") / "python")
    install = ("-m", "pip", "install", "-q", str(ROOT), str(ROOT / "examples" / "converter_plugin"))
    done = castguard_in(tmp_path, *install, tool="python", python=python, timeout=900).proc
    assert done.returncode == 0, done.stderr[-3000:]
    project = tmp_path / "my project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "p"\nversion = "0"\n\n[tool.castguard.sweep]\nconverters = ["castguard", "plain-fp16"]\n'
    )
    args = ["--model", "mnist", "--precision", "fp16", "--data-max", "8,512", "--exclude-ops", "none"]
    first = castguard_in(project, "-rs", *args, python=python, timeout=900).proc
    assert "golden written" in first.stdout, first.stdout[-3000:] + first.stderr[-3000:]
    report = json.loads((project / "castguard-report" / "report.json").read_text())
    statuses = {c["case_id"]: c["status"] for c in report["cases"]}
    assert statuses == {
        "fp16-dmax8-imax65504-excl_none-keepio0-emulate": statuses["fp16-dmax8-imax65504-excl_none-keepio0-emulate"],
        "fp16-dmax512-imax65504-excl_none-keepio0-emulate": "pass",
        "plain-fp16-excl_none-keepio0-emulate": "pass",  # data_max is not its setting: one case, not two
    }
    rows = {row[0]: row for row in report["provenance"]["converter_sources"]}
    assert rows["plain-fp16"][1] == "castguard-fp16-converter" and rows["plain-fp16"][2].startswith(
        "0.1.0 (onnxruntime "
    )
    md = (project / "castguard-report" / "report.md").read_text()
    assert "plain-fp16" in md and "Converters side by side" in md
