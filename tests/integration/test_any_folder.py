"""A new user's commands, typed as written, from an empty folder outside the repository (issue 9, section 1).

Each run is a real ``python -m pytest`` in a subprocess whose working folder is empty; the model, the inputs,
the report folder and the history live in other folders, and every path option is written both ways
(``--opt value`` and ``--opt=value``). pytest guesses its rootdir from path-like arguments before castguard's
options exist; castguard re-decides it (harness/plugin/rootdir.py), so nothing lands next to the model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.graphs import mlp_model, save

REPO = Path(__file__).resolve().parents[2]
ONE_CASE = ("--precision", "fp16", "--data-max", "512", "--exclude-ops", "none", "--keep-io-types", "true")


def pytest_in(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m pytest ARGS`` run from ``folder``, with this checkout's castguard first on the path."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def option(flag: str, value: Path | str, form: str) -> list[str]:
    return [flag, str(value)] if form == "space" else [f"{flag}={value}"]


@pytest.mark.parametrize("form", ["space", "equals"])
def test_path_options_work_from_an_empty_folder(tmp_path: Path, form: str) -> None:
    empty, models, data = tmp_path / "empty", tmp_path / "models", tmp_path / "data"
    report, history = tmp_path / "report", tmp_path / "history"
    for folder in (empty, data, report, history):  # existing folders are what moved pytest's rootdir
        folder.mkdir()
    model = save(mlp_model(), models / "mlp.onnx")
    np.savez(data / "x.npz", x=np.random.default_rng(1).uniform(-1, 1, (1, 8)).astype(np.float32))
    paths = [
        *option("--model", model, form),
        *option("--inputs", data / "x.npz", form),
        *option("--report-dir", report, form),
        *option("--history", history, form),
    ]

    first = pytest_in(empty, *paths, *ONE_CASE)
    assert first.returncode == 1, first.stdout[-3000:] + first.stderr[-3000:]
    assert f"rootdir: {empty}" in first.stdout
    assert "golden written" in first.stdout and "1 failed, 1 passed" in first.stdout
    golden_dirs = [p.parent for p in (empty / "goldens").rglob("*.npz")]
    assert len(golden_dirs) == 1 and golden_dirs[0].parent == empty / "goldens"

    second = pytest_in(empty, *paths, *option("--baseline", history, form), *ONE_CASE)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "2 passed" in second.stdout and "over 1 case(s) compared" in second.stdout
    assert json.loads((report / "report.json").read_text())["summary"]["pass"] == 1
    assert len(list(history.glob("*.json"))) == 2
    assert (empty / ".pytest_cache").is_dir()
    for folder in (models, data, report, history, tmp_path):
        assert not (folder / ".pytest_cache").exists(), f".pytest_cache written in {folder}"


def test_the_project_is_found_from_the_invocation_folder(tmp_path: Path) -> None:
    """From a subfolder of a project, with the model elsewhere: the project's pyproject, ini and goldens apply."""
    project, sub = tmp_path / "project", tmp_path / "project" / "src" / "deep"
    sub.mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n\n'
        '[tool.castguard]\ngoldens_dir = "gold"\nreport_dir = "out"\n'
    )
    model = save(mlp_model(), tmp_path / "elsewhere" / "mlp.onnx")
    done = pytest_in(sub, "--model", str(model), *ONE_CASE)
    assert done.returncode == 1 and "golden written" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"rootdir: {project}" in done.stdout and "configfile: pyproject.toml" in done.stdout
    assert list((project / "gold").rglob("*.npz")) and (project / "out" / "report.json").is_file()
    for folder in (project, sub, model.parent):  # the project's addopts (-p no:cacheprovider) were applied
        assert not (folder / ".pytest_cache").exists()
    assert not (sub / "goldens").exists() and not (model.parent / "goldens").exists()
