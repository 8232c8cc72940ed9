"""The golden lifecycle (issue 34.5), on models built here, as a user runs it.

* ``castguard goldens --model X`` exits 0 after writing the golden it was asked for;
* the sidecar lists the cases and tests that use the golden;
* ``--update-goldens`` fails nothing when the regenerated golden is value-identical (and leaves the file alone),
  and fails once when it really changed;
* ``castguard goldens --unused`` lists the goldens no case of the last complete run used; ``--prune`` deletes them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from tests.helpers.graphs import cancellation_model, mlp_model, save

REPO = Path(__file__).resolve().parents[2]
ONE_CASE = ("--precision", "fp16", "--data-max", "512", "--exclude-ops", "none", "--keep-io-types", "true")


def pytest_in(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTEST_ADDOPTS", None)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *ONE_CASE, *args]
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False)


def project_with(tmp_path: Path) -> Path:
    project = tmp_path / "my project"
    save(mlp_model(), project / "models" / "mlp.onnx")
    save(cancellation_model(), project / "models" / "cancel.onnx")
    (project / "pyproject.toml").write_text("[tool.castguard]\n")
    return project


def test_goldens_command_exits_0_and_the_sidecar_lists_its_users(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = project_with(tmp_path)
    argv = ["goldens", "--model", "models/mlp.onnx", "--rootdir", str(project), *ONE_CASE]
    monkeypatch.chdir(project)
    assert main(argv) == 0
    assert "golden written" in capsys.readouterr().out
    (sidecar,) = (project / "goldens").glob("*/*.json")
    used_by = json.loads(sidecar.read_text())["used_by"]
    assert used_by["cases"] == ["fp16-dmax512-imax65504-excl_none-keepio1-emulate"]
    assert used_by["tests"] == [
        "test_fp32_golden[models.mlp]",
        "test_low_precision[models.mlp-fp16-dmax512-imax65504-excl_none-keepio1-emulate]",
    ]
    assert main(argv) == 0 and "models.mlp: pass" in capsys.readouterr().out


def test_update_goldens_fails_nothing_when_the_golden_did_not_change(tmp_path: Path) -> None:
    project = project_with(tmp_path)
    model = "--model=models/mlp.onnx"
    assert pytest_in(project, model).returncode == 1  # the first golden fails once
    (golden,) = (project / "goldens").glob("*/*.npz")
    before = golden.stat().st_mtime_ns, golden.with_suffix(".json").read_bytes()
    same = pytest_in(project, model, "--update-goldens")
    assert same.returncode == 0, same.stdout[-3000:]
    assert (golden.stat().st_mtime_ns, golden.with_suffix(".json").read_bytes()) == before
    wider = pytest_in(project, model, "--update-goldens", "--data-max", "512,inf")  # more cases use it now
    assert wider.returncode == 0, wider.stdout[-3000:]
    assert golden.stat().st_mtime_ns == before[0]  # the .npz untouched; its sidecar lists the new users
    assert len(json.loads(golden.with_suffix(".json").read_text())["used_by"]["cases"]) == 2
    save(mlp_model(seed=1), project / "models" / "mlp.onnx")  # the model really changed
    changed = pytest_in(project, model, "--update-goldens")
    assert changed.returncode == 1 and "golden written" in changed.stdout
    assert pytest_in(project, model).returncode == 0


def test_unused_goldens_are_listed_and_pruned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    project = project_with(tmp_path)
    both = pytest_in(project, "--model=models/mlp.onnx", "--model=models/cancel.onnx")
    assert len(list((project / "goldens").glob("*/*.npz"))) == 2, both.stdout[-3000:]
    assert pytest_in(project, "--model=models/mlp.onnx").returncode == 0  # the last complete run: mlp only
    monkeypatch.chdir(project)
    assert main(["goldens", "--unused", "--rootdir", str(project)]) == 0
    out = capsys.readouterr().out
    assert "unused: " in out and "models.cancel" in out and "models.mlp" not in out.split("golden(s)")[0]
    assert (project / "goldens" / "models.cancel").is_dir()  # listing deletes nothing
    assert main(["goldens", "--prune", "--rootdir", str(project)]) == 0
    assert "deleted: " in capsys.readouterr().out
    assert [p.parent.name for p in (project / "goldens").glob("*/*")] == ["models.mlp", "models.mlp"]
