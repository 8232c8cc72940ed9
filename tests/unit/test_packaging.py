"""The wheel installs one top-level package, ``harness``; the bundled models go in as ``harness.bundled_models``.

``pyproject.toml`` lists the packages by hand (the bundled models are mapped from ``test_models/``, which
``packages.find`` cannot express), so a test checks that the list names every package under ``harness/``; another
builds the real wheel and reads its file list.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from harness.core.files import read_toml

ROOT = Path(__file__).resolve().parents[2]


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
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path), str(ROOT)],
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
