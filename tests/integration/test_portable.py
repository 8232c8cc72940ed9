"""castguard runs where POSIX-only modules are missing (Windows has no fcntl, resource, pwd or termios).

The quick start and ``castguard convert`` run in a subprocess whose ``sitecustomize`` makes those modules
unimportable (``sys.modules[name] = None``), and a static check finds no module-level import of them anywhere in
``harness``. Before harness/core/locks.py, ``harness.report.runs`` and ``harness.pipeline.cache`` imported fcntl at module
level, so the quick start stopped at start-up.
"""

from __future__ import annotations

import ast
from pathlib import Path

import onnx
import pytest

from tests.conftest import Run

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "harness"
POSIX_ONLY = ("fcntl", "resource", "pwd", "grp", "termios", "tty", "pty")
BLOCK = f"import sys\nfor _name in {POSIX_ONLY!r}:\n    sys.modules[_name] = None   # import _name -> ImportError\n"
ONE_CASE = ("--precision", "fp16", "--data-max", "512", "--exclude-ops", "none", "--keep-io-types", "true")


@pytest.fixture
def blocked(tmp_path: Path) -> list[Path]:
    """The ``PYTHONPATH`` of a process without the POSIX-only modules: the blocking ``sitecustomize``, the repo."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCK)
    return [site, REPO]


def test_the_blocker_really_blocks(tmp_path: Path, blocked: list[Path], castguard_in: Run) -> None:
    (tmp_path / "work").mkdir()
    proc = castguard_in(tmp_path / "work", "-c", "import fcntl", tool="python", extra_path=blocked, timeout=120).proc
    assert proc.returncode != 0 and "import of fcntl halted" in proc.stderr, proc.stderr


def test_quick_start_and_convert_without_posix_only_modules(
    tmp_path: Path, blocked: list[Path], castguard_in: Run
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    first = castguard_in(work, "--model", "mnist", *ONE_CASE, extra_path=blocked, timeout=120).proc
    assert first.returncode == 1, first.stdout[-3000:] + first.stderr[-3000:]  # the golden is written once
    assert "golden written" in first.stdout and "1 failed, 1 passed" in first.stdout
    second = castguard_in(work, "--model", "mnist", *ONE_CASE, extra_path=blocked, timeout=120).proc
    assert second.returncode == 0 and "2 passed" in second.stdout, second.stdout[-3000:] + second.stderr[-3000:]
    assert "Traceback" not in first.stderr + second.stderr

    mnist = REPO / "test_models" / "mnist" / "mnist.onnx"
    convert = ("convert", "--onnx_path", str(mnist), "--output_path", "mnist16.onnx")
    proc = castguard_in(work, *convert, tool="castguard", extra_path=blocked, timeout=120).proc
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    onnx.checker.check_model(str(work / "mnist16.onnx"), full_check=True)


def test_no_module_level_import_of_a_posix_only_module() -> None:
    """Imports at module level (not inside functions) of POSIX-only modules, anywhere in harness."""
    found = []
    for path in sorted(HARNESS.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in tree.body:
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [f"{path.relative_to(REPO)}:{node.lineno}: {n}" for n in names if n.split(".")[0] in POSIX_ONLY]
    assert found == []
