"""castguard costs nothing where it is not used (issue 34 item 2).

Installed, castguard's plugin loads into every pytest run of the environment. Importing it, and a whole pytest run
of a project that uses no castguard option, test or fixture, must not load Hypothesis, matplotlib, ONNX Runtime,
onnx, numpy or castguard's run machinery (checked in fresh processes through ``sys.modules``; the time this saves
is measured by benchmarks/bench_startup.py, not asserted here). The moment a test uses the ``castguard`` fixture,
the machinery loads: that run shows the check can see it. Hypothesis's own pytest plugin (installed with castguard)
imports hypothesis whether castguard is loaded or not, so the plain run is compared with ``-p no:castguard``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.graphs import mlp_model, save

REPO = Path(__file__).resolve().parents[2]
HEAVY = (
    "hypothesis",
    "matplotlib",
    "onnxruntime",
    "onnx",
    "numpy",
    "ml_dtypes",
    "harness.conductor",
    "harness.pipeline",
)
DUMP = """
import json, os, sys

def pytest_unconfigure(config):
    with open(os.environ["MODULES_OUT"], "w") as handle:
        json.dump(sorted(sys.modules), handle)
"""


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), **extra}
    env.pop("PYTEST_ADDOPTS", None)
    return env


def heavy(modules: list[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_importing_the_plugin_loads_nothing_heavy(tmp_path: Path) -> None:
    code = "import json, sys, harness.plugin, harness.plugin.fixture; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=_env(), capture_output=True, text=True, check=True
    )
    modules = json.loads(out.stdout)
    assert "harness.plugin" in modules
    assert heavy(modules) == []


def _pytest_modules(project: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    (project / "conftest.py").write_text(DUMP)
    out_file = project / "modules.json"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=project,
        env=_env(MODULES_OUT=str(out_file)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return run, json.loads(out_file.read_text())


def test_a_project_that_does_not_use_castguard_loads_nothing_heavy(tmp_path: Path) -> None:
    project = tmp_path / "plain project"
    project.mkdir()
    (project / "test_plain.py").write_text("def test_plain():\n    assert 1 + 1 == 2\n")
    run, modules = _pytest_modules(project)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "castguard" in run.stdout  # the plugin is loaded (the "plugins:" header line) ...
    assert "harness.plugin" in modules
    without, modules_without = _pytest_modules(project, "-p", "no:castguard")
    assert without.returncode == 0 and "harness.plugin" not in modules_without
    # ... and loads nothing heavy that the run without it does not load (Hypothesis's own pytest plugin, installed
    # with castguard, imports hypothesis in both)
    assert heavy(modules) == heavy(modules_without)
    assert [m for m in heavy(modules) if not m.startswith("hypothesis")] == []


def test_the_machinery_loads_when_a_test_uses_the_fixture(tmp_path: Path) -> None:
    project = tmp_path / "user project"
    project.mkdir()
    model = save(mlp_model(), tmp_path / "mlp.onnx")
    (project / "test_uses.py").write_text(
        f"def test_uses(castguard):\n    castguard.check({str(model)!r}, precision='fp16', runner='emulate')\n"
    )
    run, modules = _pytest_modules(project)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "harness.conductor" in modules and "onnx" in modules and "numpy" in modules
    assert list((project / "goldens").rglob("*.npz")), "the fixture's check ran (it wrote the golden)"
