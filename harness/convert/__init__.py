"""The AutoCast-compatible FP32 -> mixed FP16/BF16 converter.

Two steps: :func:`collect_magnitudes` (one onnxruntime run, the expensive part, cacheable as JSON) and
:func:`convert` (classification + conversion from those magnitudes, cheap and deterministic).
:func:`convert_to_mixed_precision` is AutoCast 0.47's function with the same arguments and defaults.

The names below are imported on first use: a module that needs one part (a sweep's options read
:class:`ConvertOptions`; a warm sweep reads its conversions from the cache) does not load the reference run and
AutoCast's function with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.core.lazy import lazy_names

_API = {
    "ConversionResult": "result",
    "ConvertOptions": "options",
    "Magnitudes": "magnitudes",
    "ReferenceData": "reference",
    "collect_magnitudes": "reference",
    "convert": "pipeline",
    "convert_path": "api",
    "convert_to_mixed_precision": "api",
    "parse_node_precisions": "options",
}

__all__ = sorted(_API)


__getattr__ = lazy_names(__name__, _API)  # see the module docstring


if TYPE_CHECKING:
    from harness.convert.api import convert_path as convert_path
    from harness.convert.api import convert_to_mixed_precision as convert_to_mixed_precision
    from harness.convert.magnitudes import Magnitudes as Magnitudes
    from harness.convert.options import ConvertOptions as ConvertOptions
    from harness.convert.options import parse_node_precisions as parse_node_precisions
    from harness.convert.pipeline import convert as convert
    from harness.convert.reference import ReferenceData as ReferenceData
    from harness.convert.reference import collect_magnitudes as collect_magnitudes
    from harness.convert.result import ConversionResult as ConversionResult
