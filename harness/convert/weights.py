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
from typing import Any
from pathlib import Path

import numpy as np
from onnx import TensorProto, numpy_helper
from onnx.external_data_helper import uses_external_data

from harness.data.onnxfile import iter_chunks
from harness.dtypes import LOW_ELEMS, np_dtype
from harness.dtypes import LOW_MAX as _LIMITS



@dataclass(frozen=True)
class TensorStats:
    """absmax: inf when any value is non-finite; absmin: smallest non-zero finite |x| (inf: none; NaN: not
    computed);
    nonnegative: every value >= 0 (NaN is not); clamps: per low type, (values beyond its max, worst |x|)."""

    absmax: float
    absmin: float
    nonnegative: bool
    clamps: dict[int, tuple[int, float]] = field(default_factory=dict)


def array_stats(chunks: Iterable[np.ndarray], *, is_float: bool, with_absmin: bool = True) -> TensorStats:
    """One pass of reductions per chunk in the chunk's own dtype (no float64 copy, no |x| array: a 400 MB
    weight costs a few reductions, not seconds); the clamp counts only when a value passes a low type's max."""
    absmax, absmin, nonnegative = 0.0, math.inf, True
    clamps: dict[int, tuple[int, float]] = {elem: (0, 0.0) for elem in sorted(LOW_ELEMS)} if is_float else {}
    for chunk in chunks:
        if not chunk.size:
            continue
        if chunk.dtype.kind not in "fiub":
            chunk = chunk.astype(np.float32)
        low, high = chunk.min(), chunk.max()
        if chunk.dtype.kind == "f" and not (np.isfinite(low) and np.isfinite(high)):
            _slow_float(chunk, clamps)
            finite = chunk[np.isfinite(chunk)]
            absmax = math.inf
            nonnegative = nonnegative and bool((chunk >= 0).all())
            if finite.size:
                absmin = min(absmin, _smallest_nonzero(finite))
            continue
        nonnegative = nonnegative and bool(low >= 0)
        peak = max(abs(float(low)), abs(float(high)))
        absmax = max(absmax, peak)
        if with_absmin:
            absmin = min(absmin, _smallest_nonzero(chunk))
        if clamps and peak > min(_LIMITS.values()):
            _slow_float(chunk, clamps)
    return TensorStats(absmax=absmax, absmin=absmin if with_absmin else math.nan, nonnegative=nonnegative,
                       clamps=clamps)


_UINT: dict[int, type[np.unsignedinteger[Any]]] = {2: np.uint16, 4: np.uint32, 8: np.uint64}
_SIGN_OFF = {2: np.uint16(0x7FFF), 4: np.uint32(0x7FFFFFFF), 8: np.uint64(0x7FFFFFFFFFFFFFFF)}


def _smallest_nonzero(chunk: np.ndarray) -> float:
    """Smallest non-zero |x|. For finite IEEE floats |x| orders like its bits without the sign, so this is the
    least of ``(bits & ~sign) - 1`` (zeros wrap to the largest integer) plus one: two plain integer passes."""
    if chunk.dtype.kind != "f" or chunk.dtype.itemsize not in _UINT:
        nonzero = chunk[chunk != 0]
        return float(np.abs(nonzero.astype(np.float64)).min()) if nonzero.size else math.inf
    uint = _UINT[chunk.dtype.itemsize]
    bits = np.ascontiguousarray(chunk).view(uint) & _SIGN_OFF[chunk.dtype.itemsize]
    with np.errstate(over="ignore"):  # all zeros: the largest integer wraps back to 0
        bits -= uint(1)
        least = bits.min() + uint(1)
    return math.inf if least == 0 else float(np.array([least], dtype=uint).view(chunk.dtype)[0])


def _slow_float(chunk: np.ndarray, clamps: dict[int, tuple[int, float]]) -> None:
    """Count the finite values beyond each low type's max (rare: only chunks that reach one)."""
    magnitude = np.abs(chunk[np.isfinite(chunk)].astype(np.float64))
    for elem, limit in _LIMITS.items():
        if elem in clamps and magnitude.size and float(magnitude.max()) > limit:
            over = magnitude[magnitude > limit]
            clamps[elem] = (clamps[elem][0] + over.size, max(clamps[elem][1], float(over.max())))


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

    def stats(self, tensor: TensorProto, *, absmin: bool = False) -> TensorStats:
        """Figures of `tensor`, kept by name (an unnamed Constant value is small and recomputed). ``absmin`` is
        computed only when asked for (a Div or Pow operand): otherwise it is NaN."""
        kept = self._stats.get(tensor.name) if tensor.name else None
        if kept is not None and (not absmin or not math.isnan(kept.absmin)):
            return kept
        is_float = np_dtype(tensor.data_type).kind == "f" or tensor.data_type == TensorProto.BFLOAT16
        found = array_stats(self._chunks(tensor), is_float=is_float, with_absmin=absmin)
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
