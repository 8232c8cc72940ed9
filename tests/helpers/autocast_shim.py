"""A thin import shim: AutoCast's public names, served by castguard (what a user's `import` swap looks like).

``from autocast_shim import convert_to_mixed_precision, main, get_parser, get_opset_version`` stands in for
``modelopt.onnx.autocast`` / ``modelopt.onnx.autocast.__main__`` / ``modelopt.onnx.utils.get_opset_version``.
"""

from __future__ import annotations

import onnx

from harness.convert import convert_to_mixed_precision
from harness.convert.cli import get_parser, main

__all__ = ["convert_to_mixed_precision", "get_opset_version", "get_parser", "main"]


def get_opset_version(model: onnx.ModelProto) -> int:
    """The default-domain opset, as modelopt.onnx.utils.get_opset_version reports it."""
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
