"""A runner plugin "installed" into a folder: the example package's source plus a real ``*.dist-info`` with its
entry points, so :mod:`importlib.metadata` discovers it on ``sys.path`` exactly as it does a pip-installed one."""

from __future__ import annotations

import shutil
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "runner_plugin"
PACKAGE = "castguard_onnxref_runner"


def install_into(
    folder: Path,
    *,
    name: str = "castguard-onnxref-runner",
    version: str = "0.1.0",
    entry_points: str = "onnxref = castguard_onnxref_runner:OnnxRefRunner",
    extra_source: str = "",
) -> Path:
    """Copy the example package into `folder` and write its dist-info; returns `folder` (put it on sys.path)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(EXAMPLE / PACKAGE, folder / PACKAGE, dirs_exist_ok=True)
    if extra_source:
        with (folder / PACKAGE / "__init__.py").open("a") as handle:
            handle.write("\n" + extra_source)
    info = folder / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[castguard.runners]\n{entry_points}\n")
    return folder
