"""Installing castguard never breaks another project's test run (issue 34 item 1).

Every castguard option has a ``--castguard-NAME`` form; the short ``--NAME`` is castguard's only where no other
plugin or conftest owns it (harness/plugin/aliases.py), and the run says once which ones it left. Each run is a
real ``python -m pytest`` in a user project outside the repository.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.options import PLUGIN_OPTIONS, Option, prefixed
from tests.helpers.graphs import mlp_model, save
from tests.integration.test_any_folder import ONE_CASE

REPO = Path(__file__).resolve().parents[2]

CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--model", default="resnet")
    parser.addoption("--seed", type=int, default=1)
    parser.addoption("--runner", action="store_true")
"""
OWN_TEST = """
def test_own_options(request):
    assert request.config.getoption("--model") == "vit"
    assert request.config.getoption("--seed") == 7
    assert request.config.getoption("--runner") is True
"""
PLUGIN = """
def pytest_addoption(parser):
    parser.getgroup("other").addoption("--target", dest="other_target", default="cpu")
    parser.addoption("--history", dest="other_history", action="store_true")
"""


def pytest_in(folder: Path, *args: str, extra_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m pytest ARGS`` from ``folder``, this checkout's castguard first on the path."""
    paths = [str(REPO), *([str(extra_path)] if extra_path else [])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args], cwd=folder, env=env, capture_output=True, text=True, timeout=300
    )


def ml_project(root: Path) -> Path:
    """A user's ML project whose conftest defines --model, --seed and --runner (a space in its path)."""
    project = root / "ml project"
    project.mkdir()
    (project / "conftest.py").write_text(CONFTEST)
    (project / "test_own.py").write_text(OWN_TEST)
    return project


def test_a_conftest_that_owns_model_seed_and_runner_keeps_them(tmp_path: Path) -> None:
    project = ml_project(tmp_path)
    run = pytest_in(project, "--model", "vit", "--seed", "7", "--runner")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "1 passed" in run.stdout
    said = [line for line in run.stdout.splitlines() if "belong to another plugin or conftest" in line]
    assert len(said) == 1, run.stdout
    for flag in ("--model", "--seed", "--runner"):
        assert flag in said[0] and prefixed(flag) in said[0]
    assert "--precision" not in said[0]


def test_castguard_model_works_where_a_conftest_owns_model(tmp_path: Path) -> None:
    project = ml_project(tmp_path)
    model = save(mlp_model(), tmp_path / "models" / "mlp.onnx")
    first = pytest_in(project, "--castguard-model", str(model), "--castguard-seed", "3", *ONE_CASE)
    assert first.returncode == 1, first.stdout[-3000:] + first.stderr[-3000:]
    assert "golden written" in first.stdout and "1 failed, 1 passed" in first.stdout
    assert list((project / "goldens").rglob("*.npz")), "the golden goes to the user's project"
    second = pytest_in(project, f"--castguard-model={model}", "--castguard-seed=3", *ONE_CASE)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "2 passed" in second.stdout


def test_another_plugin_keeps_its_names_and_castguard_keeps_the_rest(tmp_path: Path) -> None:
    """A plugin loaded with -p owns --target and --history; castguard's short --model and --precision stay."""
    (tmp_path / "other_plugin.py").write_text(PLUGIN)
    (tmp_path / "empty").mkdir()
    model = save(mlp_model(), tmp_path / "models" / "mlp.onnx")
    run = pytest_in(
        tmp_path / "empty",
        "-p",
        "other_plugin",
        "--model",
        str(model),
        "--target",
        "gpu",
        "--castguard-target",
        "any",
        *ONE_CASE,
        extra_path=tmp_path,
    )
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "1 failed, 1 passed" in run.stdout
    said = [line for line in run.stdout.splitlines() if "belong to another plugin or conftest" in line]
    assert len(said) == 1 and "--target" in said[0] and "--history" in said[0], run.stdout
    assert "--model" not in said[0].split(";")[0] and "--precision" not in said[0]


@pytest.mark.parametrize("option", PLUGIN_OPTIONS, ids=lambda o: o.flag)
def test_every_option_has_a_namespaced_form_in_pytest_help(option: Option, help_text: str) -> None:
    flag = option.flag
    for name in (flag, prefixed(flag)):
        assert re.search(rf"^\s+{re.escape(name)}(=|\s|$)", help_text, re.MULTILINE), name


@pytest.fixture(scope="module")
def help_text(tmp_path_factory: pytest.TempPathFactory) -> str:
    run = pytest_in(tmp_path_factory.mktemp("help"), "--help")
    assert run.returncode == 0, run.stderr
    return run.stdout
