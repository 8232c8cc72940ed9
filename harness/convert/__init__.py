"""The AutoCast-compatible FP32 -> mixed FP16/BF16 converter.

Two steps: :func:`collect_magnitudes` (one onnxruntime run, the expensive part, cacheable as JSON) and
:func:`convert` (classification + conversion from those magnitudes, cheap and deterministic).
:func:`convert_to_mixed_precision` is AutoCast 0.47's function with the same arguments and defaults.
"""

from __future__ import annotations

from harness.convert.api import convert_path, convert_to_mixed_precision
from harness.convert.magnitudes import Magnitudes
from harness.convert.options import ConvertOptions, parse_node_precisions
from harness.convert.pipeline import ConversionResult, convert
from harness.convert.reference import ReferenceData, collect_magnitudes

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
