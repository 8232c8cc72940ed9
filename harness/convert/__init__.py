"""The AutoCast-compatible FP32 -> mixed FP16/BF16 converter.

Two steps: :func:`collect_magnitudes` (one onnxruntime run, the expensive part, cacheable as JSON) and
:func:`convert` (classification + conversion from those magnitudes, cheap and deterministic).
:func:`convert_to_mixed_precision` is AutoCast 0.47's function with the same arguments and defaults.

The names below are imported on first use: a module that needs one part (a sweep's options read
:class:`ConvertOptions`; a warm sweep reads its conversions from the cache) does not load the reference run and
AutoCast's function with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_API = {
    "ConversionResult": "pipeline",
    "ConvertOptions": "options",
    "Magnitudes": "magnitudes",
    "ReferenceData": "reference",
    "collect_magnitudes": "reference",
    "convert": "pipeline",
    "convert_path": "api",
    "convert_to_mixed_precision": "api",
    "parse_node_precisions": "options",
}

__all__ = [
    "ConversionResult",
    "ConvertOptions",
    "Magnitudes",
    "ReferenceData",
    "collect_magnitudes",
    "convert",
    "convert_path",
    "convert_to_mixed_precision",
    "parse_node_precisions",
]


def __getattr__(name: str) -> Any:
    """Import on first use (see the module docstring)."""
    if name not in _API:
        raise AttributeError(f"module 'harness.convert' has no attribute {name!r}")
    return getattr(importlib.import_module(f"harness.convert.{_API[name]}"), name)


if TYPE_CHECKING:
    from harness.convert.api import convert_path as convert_path
    from harness.convert.api import convert_to_mixed_precision as convert_to_mixed_precision
    from harness.convert.magnitudes import Magnitudes as Magnitudes
    from harness.convert.options import ConvertOptions as ConvertOptions
    from harness.convert.options import parse_node_precisions as parse_node_precisions
    from harness.convert.pipeline import ConversionResult as ConversionResult
    from harness.convert.pipeline import convert as convert
    from harness.convert.reference import ReferenceData as ReferenceData
    from harness.convert.reference import collect_magnitudes as collect_magnitudes
