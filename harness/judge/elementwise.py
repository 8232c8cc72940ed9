"""The element-wise errors of obtained outputs against their goldens (the arithmetic of
:mod:`harness.judge.compare`, whose docstring states the semantics): exact widening to float64, abs and rel errors
a chunk at a time under the NaN/inf policy, their statistics over all iterations, and top-k hits."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from harness.core.dtypes import BFLOAT16
from harness.judge.tolerances import Tolerance

_ZERO_EPS = 2.220446049250313e-16
_FLOAT_DTYPES = frozenset({np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64), BFLOAT16})


def widen64(x: np.ndarray) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == BFLOAT16:
        arr = arr.astype(np.float32)
    return arr.astype(np.float64)


def dtype_kind(dtype: np.dtype) -> str:
    if dtype in _FLOAT_DTYPES:
        return "float"
    if dtype == np.dtype(np.bool_):
        return "bool"
    return str(dtype)


DIFF_CHUNK = 1 << 20
"""Elements widened to float64 at a time: the temporaries of a 134 MB logits tensor stay a few MB each."""


@dataclass(frozen=True)
class _Chunk:
    """The errors of one chunk of elements, in float64 (see the module docstring for the NaN/inf policy)."""

    abs: np.ndarray  # inf where a non-finite mismatch
    rel: np.ndarray
    over: int  # elements over the tolerance (isclose: numpy's rule)
    mismatch: int  # non-finite pairs that do not match under the policy


def _chunk(a_raw: np.ndarray, b_raw: np.ndarray, tol: Tolerance) -> _Chunk:
    a, b = widen64(a_raw), widen64(b_raw)
    exp_abs = np.abs(b)
    denom = np.where(exp_abs == 0.0, _ZERO_EPS, exp_abs)
    finite = np.isfinite(a) & np.isfinite(b)
    if finite.all():  # the common chunk: no NaN/inf policy to apply
        abs_err = np.abs(a - b)
        rel_err = abs_err / denom
        mismatch = 0
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            abs_err = np.where(finite, np.abs(a - b), 0.0)
        both_nan = np.isnan(a) & np.isnan(b)
        same_inf = np.isinf(a) & np.isinf(b) & (a == b)
        matched = ~finite & ~((both_nan & tol.nan_equal) | (same_inf & tol.inf_equal))
        abs_err = np.where(matched, np.inf, abs_err)
        with np.errstate(invalid="ignore"):
            rel_err = np.where(matched, np.inf, np.where(finite, abs_err / denom, 0.0))
        mismatch = int(matched.sum())
        exp_abs = np.where(np.isfinite(b), exp_abs, 0.0)
    if tol.mode == "isclose":
        over = abs_err > tol.atol + tol.rtol * exp_abs
    else:
        over = (abs_err > tol.atol) & (rel_err > tol.rtol)
    return _Chunk(abs=abs_err, rel=rel_err, over=int(over.sum()), mismatch=mismatch)


def _chunks(pairs: Sequence[tuple[np.ndarray, np.ndarray]], tol: Tolerance) -> Iterator[tuple[slice, _Chunk]]:
    """Every chunk of every iteration's (obtained, golden) pair, with where it goes in the joined flat arrays."""
    offset = 0
    for got, exp in pairs:
        flat_a, flat_b = np.asarray(got).ravel(), np.asarray(exp).ravel()
        for start in range(0, flat_b.size, DIFF_CHUNK):
            part = slice(start, start + DIFF_CHUNK)
            chunk = _chunk(flat_a[part], flat_b[part], tol)
            yield slice(offset + start, offset + start + chunk.abs.size), chunk
        offset += flat_b.size


def _stats(values: np.ndarray, q: float) -> tuple[float, float, float, float]:
    """max, mean, median, quantile of ``values`` (a scratch array: the median and quantile reorder it in place)."""
    if values.size == 0:
        return 0.0, 0.0, 0.0, 0.0
    with np.errstate(invalid="ignore"):
        top, mean = float(np.max(values)), float(np.mean(values))  # before the selections reorder it
        median = float(np.median(values, overwrite_input=True))
        return top, mean, median, float(np.quantile(values, q, overwrite_input=True))


@dataclass(frozen=True)
class ElementErrors:
    """One output's error statistics over all iterations: (max, mean, median, quantile) of abs and of rel."""

    abs: tuple[float, float, float, float]
    rel: tuple[float, float, float, float]
    over: int
    mismatch: int
    total: int


def maxima(pairs: Sequence[tuple[np.ndarray, np.ndarray]], tol: Tolerance) -> ElementErrors:
    """One pass, no scratch array: the max errors and the counts (what an ``elemwise``, ``isclose`` or ``max``
    verdict needs); the mean, median and quantile read NaN."""
    over = mismatch = total = 0
    top_abs = top_rel = 0.0
    for where, chunk in _chunks(pairs, tol):
        over, mismatch, total = over + chunk.over, mismatch + chunk.mismatch, where.stop
        top_abs, top_rel = max(top_abs, float(chunk.abs.max())), max(top_rel, float(chunk.rel.max()))
    nan = math.nan
    return ElementErrors(
        abs=(top_abs, nan, nan, nan), rel=(top_rel, nan, nan, nan), over=over, mismatch=mismatch, total=total
    )


def element_errors(
    pairs: Sequence[tuple[np.ndarray, np.ndarray]], tol: Tolerance, *, full: bool = True
) -> ElementErrors:
    """``full=False`` in a mode that needs no mean, median or quantile: :func:`maxima`. Otherwise two passes over the pairs: the abs errors of every element in one float64 array, their statistics, then the
    rel errors in the same array; the per-element temporaries never exceed :data:`DIFF_CHUNK` elements."""
    if not full and tol.mode in ("elemwise", "isclose", "max"):
        return maxima(pairs, tol)
    total = sum(int(np.asarray(exp).size) for _, exp in pairs)
    values = np.empty(total)
    over = mismatch = 0
    for where, chunk in _chunks(pairs, tol):
        values[where] = chunk.abs
        over, mismatch = over + chunk.over, mismatch + chunk.mismatch
    abs_stats = _stats(values, tol.quantile)
    for where, chunk in _chunks(pairs, tol):
        values[where] = chunk.rel
    return ElementErrors(abs=abs_stats, rel=_stats(values, tol.quantile), over=over, mismatch=mismatch, total=total)


def top_k_hits(obtained: np.ndarray, expected: np.ndarray, k: int) -> tuple[int, int]:
    """(shared top-k members summed over rows, k * rows) along the last axis."""
    a = widen64(obtained)
    b = widen64(expected)
    if a.ndim == 0 or a.shape[-1] < k:
        return 0, 0
    a2 = a.reshape(-1, a.shape[-1])
    b2 = b.reshape(-1, b.shape[-1])
    top_a = np.argsort(-a2, axis=1, kind="stable")[:, :k]
    top_b = np.argsort(-b2, axis=1, kind="stable")[:, :k]
    hits = sum(len(np.intersect1d(ra, rb)) for ra, rb in zip(top_a, top_b))
    return int(hits), k * a2.shape[0]
