"""Which TensorRT this process uses: full TensorRT (``tensorrt``) first, else TensorRT-RTX (``tensorrt_rtx_bindings``).

Both expose the same Python API for what castguard does (parse an ONNX model, build a strongly typed plan,
deserialize and run it); they differ in what they run on. Full TensorRT 10/11 builds and runs on the machine's
GPU. TensorRT-RTX 1.x builds ahead of time on any machine, a CPU-only one included, and its plans run on GPUs of
compute capability 8.0, 8.6, 8.9 and 12.x (not Hopper's 9.0); ``pip install "castguard[trt]"`` installs it.
:func:`installed_backend` answers from package metadata without importing anything (for the report's provenance
and the build check's opt-in); :func:`import_tensorrt` imports the module.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from importlib import metadata
from types import ModuleType

from harness.core.errors import RunnerUnavailable

FULL_MODULE = "tensorrt"
RTX_MODULE = "tensorrt_rtx_bindings"
MODULES = (FULL_MODULE, RTX_MODULE)  # the import order
RTX_DISTRIBUTIONS = ("tensorrt-rtx-cu13-bindings", "tensorrt-rtx-cu12-bindings")
INSTALL_LINE = 'pip install "castguard[trt]"'  # the TensorRT-RTX wheels: builds anywhere, no GPU needed
INSTALL_HINT = (
    f"{INSTALL_LINE} (TensorRT-RTX, builds on any machine), or install full TensorRT 10/11 on a "
    "machine with an NVIDIA GPU"
)


@dataclass(frozen=True)
class TrtModule:
    """An imported TensorRT module and what it is."""

    module: ModuleType
    name: str  # "tensorrt" or "tensorrt_rtx_bindings"
    version: str  # its __version__, e.g. "1.7.1.116"

    @property
    def rtx(self) -> bool:
        return self.name == RTX_MODULE

    @property
    def backend(self) -> str:
        """``"TensorRT 10.13.0.35"`` or ``"TensorRT-RTX 1.7.1.116"``: what the report says built an engine."""
        return backend_label(self.name, self.version)

    @property
    def runner_name(self) -> str:
        """``trt-10.13`` for full TensorRT, ``trt-rtx-1.7`` for TensorRT-RTX."""
        major, minor = self.version.split(".")[:2]
        return f"trt-{'rtx-' if self.rtx else ''}{major}.{minor}"


def backend_label(module: str, version: str) -> str:
    return f"{'TensorRT-RTX' if module == RTX_MODULE else 'TensorRT'} {version}"


def installed_module() -> str | None:
    """The module :func:`import_tensorrt` would import (``tensorrt`` first), from the import system's finders
    only (nothing is imported), or None when neither is installed."""
    return next((name for name in MODULES if importlib.util.find_spec(name) is not None), None)


def installed_backend() -> str | None:
    """``"TensorRT 10.13.0.35"`` / ``"TensorRT-RTX 1.7.1.116"`` from package metadata, or None (nothing imported)."""
    name = installed_module()
    if name is None:
        return None
    distributions = ("tensorrt", "tensorrt-cu12", "tensorrt-cu13") if name == FULL_MODULE else RTX_DISTRIBUTIONS
    for distribution in distributions:
        try:
            return backend_label(name, metadata.version(distribution))
        except metadata.PackageNotFoundError:
            continue
    return backend_label(name, "(version unknown)")


def import_tensorrt() -> TrtModule:
    """Import ``tensorrt``, else ``tensorrt_rtx_bindings``; RunnerUnavailable naming the install line when neither
    is installed, or the loader's error when one is installed but its shared library cannot be loaded."""
    name = installed_module()
    if name is None:
        raise RunnerUnavailable(f"no TensorRT is installed (neither {FULL_MODULE} nor {RTX_MODULE}): {INSTALL_HINT}")
    try:
        module = importlib.import_module(name)
    except (ImportError, OSError) as err:  # a missing libnvinfer / libtensorrt_rtx
        raise RunnerUnavailable(f"{name} is installed but cannot be loaded: {err}") from err
    return TrtModule(module=module, name=name, version=str(module.__version__))
