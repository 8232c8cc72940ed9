"""Statistics of weights that stay on disk (lazy models): read one tensor at a time, a chunk at a time.

The classifier needs an initializer's abs-max (init_max rule), its smallest non-zero magnitude (a Div
denominator) and whether it is all non-negative (a Pow exponent); the initializer rewrite needs how many values
a low type would clamp and whether a low copy is exact. For in-memory tensors these come from numpy directly;
for external ones :class:`Weights` streams the data file once per tensor and keeps the figures, so peak memory
is one chunk (:data:`harness.data.onnxfile.CHUNK_BYTES`), not one model.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from onnx import TensorProto, numpy_helper
from onnx.external_data_helper import uses_external_data

from harness.data.onnxfile import iter_chunks
from harness.dtypes import LOW_ELEMS, np_dtype
from harness.dtypes import LOW_MAX as _LIMITS



@dataclass(frozen=True)
class TensorStats:
    """absmax: inf when any value is non-finite; absmin: smallest non-zero finite |x| (inf: none);
    nonnegative: every value >= 0 (NaN is not); clamps: per low type, (values beyond its max, worst |x|)."""

    absmax: float
    absmin: float
    nonnegative: bool
    clamps: dict[int, tuple[int, float]] = field(default_factory=dict)


def array_stats(chunks: Iterable[np.ndarray], *, is_float: bool) -> TensorStats:
    absmax, absmin, nonnegative = 0.0, math.inf, True
    clamps: dict[int, tuple[int, float]] = {elem: (0, 0.0) for elem in sorted(LOW_ELEMS)} if is_float else {}
    for chunk in chunks:
        if not chunk.size:
            continue
        wide = chunk.astype(np.float64)
        finite = np.isfinite(wide)
        nonnegative = nonnegative and bool((wide >= 0).all())
        if not finite.all():
            absmax = math.inf
        magnitude = np.abs(wide[finite])
        if magnitude.size:
            absmax = max(absmax, float(magnitude.max()))
            nonzero = magnitude[magnitude > 0]
            absmin = min(absmin, float(nonzero.min())) if nonzero.size else absmin
        for elem, limit in _LIMITS.items():
            if elem in clamps and magnitude.size and float(magnitude.max()) > limit:
                over = magnitude[magnitude > limit]
                clamps[elem] = (clamps[elem][0] + over.size, max(clamps[elem][1], float(over.max())))
    return TensorStats(absmax=absmax, absmin=absmin, nonnegative=nonnegative, clamps=clamps)


class Weights:
    """Figures of a model's tensors, streamed from `base_dir` for external ones and kept per tensor name."""

    def __init__(self, base_dir: Path | None) -> None:
        self.base_dir = base_dir
        self._stats: dict[str, TensorStats] = {}

    def _chunks(self, tensor: TensorProto) -> Iterator[np.ndarray]:
        if not uses_external_data(tensor):
            yield numpy_helper.to_array(tensor).reshape(-1)
            return
        if self.base_dir is None:
            raise ValueError(f"tensor {tensor.name!r} is external, but no base folder was given")
        yield from iter_chunks(tensor, self.base_dir)

    def stats(self, tensor: TensorProto) -> TensorStats:
        """Figures of `tensor`, kept by name (an unnamed Constant value is small and recomputed)."""
        if tensor.name in self._stats:
            return self._stats[tensor.name]
        is_float = np_dtype(tensor.data_type).kind == "f" or tensor.data_type == TensorProto.BFLOAT16
        found = array_stats(self._chunks(tensor), is_float=is_float)
        if tensor.name:
            self._stats[tensor.name] = found
        return found

    def exact_in(self, tensor: TensorProto, elem: int) -> bool:
        """Whether every value survives a round trip through `elem` (NaN == NaN)."""
        low = np_dtype(elem)
        for chunk in self._chunks(tensor):
            if not np.array_equal(chunk.astype(low).astype(chunk.dtype), chunk, equal_nan=True):
                return False
        return True
