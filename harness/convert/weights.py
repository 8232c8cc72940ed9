"""Figures of weights that stay on disk (lazy models): read one tensor at a time, a chunk at a time.

The classifier needs an initializer's abs-max (init_max rule), its smallest non-zero magnitude (a Div
denominator) and whether it is all non-negative (a Pow exponent); the initializer rewrite needs how many values
a low type would clamp and whether a low copy is exact. :class:`Weights` gives each figure for in-memory and
external tensors alike, streaming an external one from its data file (peak memory: one chunk,
:data:`harness.data.onnxfile.CHUNK_BYTES`, never one model). Each figure costs a pass only when asked for; the
abs-max pass (every float initializer, for init_max) is two reductions per chunk, so a big model is read once.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from onnx import TensorProto, numpy_helper
from onnx.external_data_helper import uses_external_data

from harness.core.dtypes import LOW_MAX
from harness.data.onnxfile import iter_chunks


class Weights:
    """Figures of a model's tensors, streamed from `base_dir` for external ones; kept per tensor name (an
    unnamed Constant value is small and recomputed)."""

    def __init__(self, base_dir: Path | None) -> None:
        self.base_dir = base_dir
        self._ranges: dict[str, tuple[float, float]] = {}

    def _chunks(self, tensor: TensorProto) -> Iterator[np.ndarray]:
        if not uses_external_data(tensor):
            chunks: Iterator[np.ndarray] = iter((numpy_helper.to_array(tensor).reshape(-1),))
        elif self.base_dir is None:
            raise ValueError(f"tensor {tensor.name!r} is external, but no base folder was given")
        else:
            chunks = iter_chunks(tensor, self.base_dir)
        for chunk in chunks:
            if chunk.size:
                yield chunk if chunk.dtype.kind in "fiu" else chunk.astype(np.float32)

    def _range(self, tensor: TensorProto) -> tuple[float, float]:
        """(min, max) over the values; NaN when any value is NaN."""
        if tensor.name in self._ranges:
            return self._ranges[tensor.name]
        lo, hi = math.inf, -math.inf
        for chunk in self._chunks(tensor):
            lo, hi = min(lo, float(chunk.min())), max(hi, float(chunk.max()))
            if math.isnan(lo) or math.isnan(hi):
                lo = hi = math.nan
                break
        if tensor.name:
            self._ranges[tensor.name] = (lo, hi)
        return lo, hi

    def absmax(self, tensor: TensorProto) -> float:
        """Largest |x| (0.0 for an empty tensor); inf when any value is inf or NaN."""
        lo, hi = self._range(tensor)
        if math.isnan(lo) or math.isinf(lo) and lo > 0:
            return math.inf if math.isnan(lo) else 0.0
        return max(-lo, hi)

    def nonnegative(self, tensor: TensorProto) -> bool:
        """Every value >= 0 (NaN is not)."""
        lo, _ = self._range(tensor)
        return not math.isnan(lo) and lo >= 0

    def absmin(self, tensor: TensorProto) -> float:
        """Smallest non-zero finite |x| (inf: none)."""
        smallest = math.inf
        for chunk in self._chunks(tensor):
            magnitude = np.abs(chunk[np.isfinite(chunk) & (chunk != 0)]).astype(np.float64)
            if magnitude.size:
                smallest = min(smallest, float(magnitude.min()))
        return smallest

    def clamps(self, tensor: TensorProto, elem: int) -> tuple[int, float]:
        """(finite values beyond `elem`'s largest value, the largest such |x|): what storing in `elem` clamps."""
        limit = LOW_MAX.get(elem)
        if limit is None or self.absmax(tensor) <= limit:
            return 0, 0.0
        count, worst = 0, 0.0
        for chunk in self._chunks(tensor):
            wide = np.abs(chunk.astype(np.float64))
            over = wide[np.isfinite(wide) & (wide > limit)]
            if over.size:
                count, worst = count + int(over.size), max(worst, float(over.max()))
        return count, worst

    def exact_in(self, tensor: TensorProto, low: np.dtype) -> bool:
        """Whether every value survives a round trip through `low` (NaN == NaN)."""
        for chunk in self._chunks(tensor):
            if not np.array_equal(chunk.astype(low).astype(chunk.dtype), chunk, equal_nan=True):
                return False
        return True
