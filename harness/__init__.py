"""castguard: accuracy regression harness for mixed-precision ONNX.

The import package is ``harness``. Heavy libraries (onnxruntime, tensorrt) are
imported lazily inside the modules that need them.
"""
from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
