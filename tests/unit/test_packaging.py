"""The wheel installs one top-level package, ``harness``; the bundled models go in as ``harness.bundled_models``.

``pyproject.toml`` lists the packages by hand (the bundled models are mapped from ``test_models/``, which
``packages.find`` cannot express), so a test checks that the list names every package under ``harness/``; another
builds the real wheel and reads its file list and metadata: the bundled models' files without the scripts that
build them (setup.py), the classifiers and the project URLs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from harness.core.files import read_toml

ROOT = Path(__file__).resolve().parents[2]
BUILD_LEFTOVERS = ("build", "dist", "*.egg-info", ".git", ".venv", ".*cache", ".hypothesis", ".castguard-cache",
                   "castguard-report", ".ci-venv*", "__pycache__")  # fmt: skip


def _setuptools_table() -> dict[str, object]:
    table = read_toml(ROOT / "pyproject.toml", what="pyproject.toml")["tool"]["setuptools"]  # type: ignore[index]
    assert isinstance(table, dict)
    return table


def test_the_package_list_names_every_harness_package() -> None:
    listed = set(_setuptools_table()["packages"])  # type: ignore[call-overload]
    found = {  # every folder under harness/ with an __init__.py (what setuptools' find_packages would list)
        ".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "harness").rglob("__init__.py")
    }
    assert found - listed == set(), f"pyproject.toml [tool.setuptools] packages misses {sorted(found - listed)}"
    assert listed - found == {"harness.bundled_models"}


def test_the_bundled_models_import_under_harness() -> None:
    from harness import bundled_models
    from harness.data.models import bundled_models_dir

    assert Path(bundled_models.__file__).resolve().parent == bundled_models_dir().resolve()
    assert (bundled_models_dir() / "mnist" / "mnist.onnx").is_file()


@pytest.mark.slow
def test_the_wheel_has_one_top_level_package(tmp_path: Path) -> None:
    source = tmp_path / "source"  # a clean copy: an in-tree build/ left by an earlier build would be packed again
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*BUILD_LEFTOVERS))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if built.returncode != 0 and "No matching distribution" in built.stderr:
        pytest.skip(f"the build backend could not be installed here: {built.stderr.strip()[-300:]}")
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("castguard-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names if not name.split("/", 1)[0].endswith((".dist-info", ".data"))}
    assert tops == {"harness"}, f"the wheel installs top-level {sorted(tops)}"
    assert "harness/bundled_models/__init__.py" in names
    assert "harness/bundled_models/mnist/mnist.onnx" in names
    assert "harness/py.typed" in names
    (license_file,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    assert "Apache License" in zipfile.ZipFile(wheel).read(license_file).decode()
    (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "Classifier: Framework :: Pytest" in text and "License-Expression: Apache-2.0" in text
    classifiers = {line.removeprefix("Classifier: ") for line in text.splitlines() if line.startswith("Classifier: ")}
    assert classifiers == set(_project()["classifiers"])
    urls = dict(
        line.removeprefix("Project-URL: ").split(", ", 1) for line in text.splitlines() if "Project-URL:" in line
    )
    assert urls == _project()["urls"] and all(
        u.startswith("https://pypi.org/project/castguard/") for u in urls.values()
    )
    _bundled_models_are_data_only(names, wheel, tmp_path / "unpacked")


def _bundled_models_are_data_only(names: list[str], wheel: Path, unpacked: Path) -> None:
    """The wheel's harness/bundled_models holds the registry and the models' files, no script that builds them,
    and the registry imports (and finds every model's files) where torch and scikit-learn cannot be imported."""
    bundled = [n.removeprefix("harness/bundled_models/") for n in names if n.startswith("harness/bundled_models/")]
    assert [n for n in bundled if n.endswith(".py")] == ["__init__.py"], bundled
    repo_data = {p.relative_to(ROOT / "test_models").as_posix() for p in (ROOT / "test_models").rglob("*")
                 if p.suffix in (".onnx", ".npz", ".pgm", ".json") and p.is_file()}  # fmt: skip
    assert repo_data and repo_data <= set(bundled), sorted(repo_data - set(bundled))
    zipfile.ZipFile(wheel).extractall(unpacked)
    done = subprocess.run([sys.executable, "-c", BLOCKED_HEAVY + IMPORT_REGISTRY], capture_output=True, text=True,
                          cwd=unpacked, env={**os.environ, "PYTHONPATH": str(unpacked)}, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(unpacked / "harness" / "bundled_models"), "ok"], done.stdout


BLOCKED_HEAVY = (
    "import sys\n"
    "sys.meta_path[:] = [f for f in sys.meta_path if 'ditable' not in repr(f)]  # no editable install's mapping\n"
    "class Blocked:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in ('torch', 'sklearn', 'transformers', 'timm'):\n"
    "            raise ImportError(f'{name} is blocked: the bundled models must not need it')\n"
    "sys.meta_path.insert(0, Blocked())\n"
)
IMPORT_REGISTRY = (
    "from harness.data.models import bundled_registry  # the installed package, else a checkout's test_models/\n"
    "m = bundled_registry()\n"
    "from pathlib import Path\n"
    "print(Path(m.__file__).parent)\n"
    "assert all(p.is_file() for n in m.names() for p in m.MODELS[n].artifacts()), 'a bundled model lacks its files'\n"
    "assert m.default_inputs('mnist') is not None and m.default_inputs('mnist').is_file()\n"
    "print('ok')\n"
)


def _project() -> dict[str, Any]:
    project = read_toml(ROOT / "pyproject.toml", what="pyproject.toml")["project"]
    assert isinstance(project, dict)
    return project


def test_the_registry_imports_without_torch_or_sklearn() -> None:
    """From the repository too: ``harness.bundled_models`` (test_models/__init__.py) is the registry, not a builder."""
    done = subprocess.run([sys.executable, "-c", BLOCKED_HEAVY + IMPORT_REGISTRY], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(ROOT / "test_models"), "ok"], done.stdout


def test_the_urls_and_the_classifiers_are_declared() -> None:
    """No invented repository: the URLs are the PyPI project page (there is no public repository)."""
    urls = _project()["urls"]
    assert set(urls) >= {"Homepage", "Documentation"}
    assert all(url.startswith("https://pypi.org/project/castguard/") for url in urls.values())
    assert "github.com" not in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert {"Framework :: Pytest", "License :: OSI Approved :: Apache Software License"} & set(
        _project()["classifiers"]
    )


def test_the_license_and_the_classifiers_are_declared() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
    project = read_toml(ROOT / "pyproject.toml", what="pyproject.toml")["project"]  # type: ignore[index]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    assert "Framework :: Pytest" in project["classifiers"]
    requires = project["requires-python"].removeprefix(">=")
    assert f"Programming Language :: Python :: {requires}" in project["classifiers"]


def test_a_checkout_on_pythonpath_finds_its_bundled_models(tmp_path: Path) -> None:
    """A source checkout used from PYTHONPATH, not installed (how benchmarks/gpu_smoke.sh runs on the GPU machine):
    no package mapping exists, and the registry loads test_models/ under the installed name."""
    code = (
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if 'ditable' not in repr(f)]  # no install's mapping\n"
        "from harness.data.models import bundled_models_dir\n"
        "print(bundled_models_dir())\n"
        "from harness.bundled_models.artifacts import read_pgm  # its modules, under the installed name\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == ROOT / "test_models"
