"""The declared minimum versions work (issue 34 item 3).

The proof is CI's leg .ci/legs/15-floors.sh: castguard's wheel with every runtime dependency at exactly its floor,
on the oldest Python, runs the quick start and its bf16 cases. Here: the constraints it installs are the floors
pyproject declares, and the code keeps to what the floors support (``np.savez`` took no ``allow_pickle`` keyword
before numpy 2.2: it stored an array named ``allow_pickle`` and every case then failed with "Invalid input name").
"""

from __future__ import annotations

import ast
import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.core.npzfile import save_npz

REPO = Path(__file__).resolve().parents[2]
if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the oldest Python
    import tomli as tomllib


def _dependencies() -> list[str]:
    return list(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"])


def test_the_floors_leg_installs_exactly_the_declared_floors() -> None:
    if sys.version_info < (3, 11):
        pytest.skip(".ci/floors.py runs on CI's newest Python (tomllib)")
    out = subprocess.run(
        [sys.executable, str(REPO / ".ci" / "floors.py")], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    declared = _dependencies()
    assert len(out) == len(declared)
    for line, requirement in zip(out, declared):
        name, _, rest = line.partition("==")
        assert requirement.startswith(name) and f">={rest.split(';')[0].strip()}" in requirement


def test_every_dependency_declares_a_floor_and_pytest_a_tested_ceiling() -> None:
    for requirement in _dependencies():
        assert ">=" in requirement, f"{requirement}: no floor"
    (pytest_requirement,) = [r for r in _dependencies() if r.startswith("pytest")]
    assert "<10" in pytest_requirement  # harness/plugin/rootdir.py and aliases.py use pytest internals (8.x, 9.x)
    assert not any(r.startswith("pytest-benchmark") for r in _dependencies()), "pytest-benchmark is a dev tool"


def _savez_calls_with_allow_pickle(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("savez", "savez_compressed")
            and any(k.arg == "allow_pickle" for k in node.keywords)
        ):
            lines.append(node.lineno)
    return lines


def test_no_savez_call_passes_allow_pickle() -> None:
    found = {
        str(path.relative_to(REPO)): lines
        for folder in ("harness", "test_models", "benchmarks")
        for path in sorted((REPO / folder).rglob("*.py"))
        if (lines := _savez_calls_with_allow_pickle(path))
    }
    assert found == {}, "np.savez(..., allow_pickle=...) stores an array named allow_pickle on numpy < 2.2"


def test_save_npz_stores_exactly_the_arrays_and_refuses_objects(tmp_path: Path) -> None:
    arrays = {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "ids": np.array([1, 2], dtype=np.int64)}
    for compressed in (False, True):
        buffer = io.BytesIO()
        save_npz(buffer, arrays, compressed=compressed)
        with np.load(io.BytesIO(buffer.getvalue()), allow_pickle=False) as loaded:
            assert sorted(loaded.files) == ["ids", "x"]
            np.testing.assert_array_equal(loaded["x"], arrays["x"])
    with pytest.raises(ValueError, match="'bad' holds Python objects"):
        save_npz(tmp_path / "bad.npz", {"bad": np.array([{"a": 1}], dtype=object)})
    assert not (tmp_path / "bad.npz").exists()
