"""The element-wise errors of obtained outputs against their goldens (the arithmetic of
:mod:`harness.judge.compare`, whose docstring states the semantics): exact widening to float64, abs and rel errors
a chunk at a time under the NaN/inf policy, their statistics over all iterations (exact, without holding every
error: :mod:`harness.judge.orderstats`), and top-k hits."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from harness.core.dtypes import BFLOAT16
from harness.judge.orderstats import order_stats
from harness.judge.orderwindow import SAMPLE_SIZE, Sample
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


DIFF_CHUNK = 1 << 16
"""Elements widened to float64 at a time: the temporaries stay in the CPU's cache (512 KB each)."""


@dataclass(frozen=True)
class _Chunk:
    """The errors of one chunk of elements, in float64 (see the module docstring for the NaN/inf policy)."""

    abs: np.ndarray  # inf where a non-finite mismatch
    rel: np.ndarray
    over: int  # elements over the tolerance (isclose: numpy's rule)
    mismatch: int  # non-finite pairs that do not match under the policy


def _chunk(a_raw: np.ndarray, b_raw: np.ndarray, tol: Tolerance, *, count: bool = True) -> _Chunk:
    """``count=False``: the errors only (``over`` and ``mismatch`` read 0), for a later pass over the same chunk."""
    a, b = widen64(a_raw), widen64(b_raw)  # copies of their own
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.subtract(a, b)
        common = math.isfinite(float(np.add.reduce(diff)))  # both finite everywhere (a float32 d cannot overflow)
    if common:  # the common chunk: no NaN/inf policy to apply
        abs_err = np.abs(diff, out=diff)
        exp_abs = np.abs(b, out=b)
        rel_err = abs_err / np.where(exp_abs == 0.0, _ZERO_EPS, exp_abs)
        mismatch = 0
    else:
        exp_abs = np.abs(b)
        denom = np.where(exp_abs == 0.0, _ZERO_EPS, exp_abs)
        finite = np.isfinite(a) & np.isfinite(b)
        with np.errstate(invalid="ignore", over="ignore"):
            abs_err = np.where(finite, np.abs(diff), 0.0)
        both_nan = np.isnan(a) & np.isnan(b)
        same_inf = np.isinf(a) & np.isinf(b) & (a == b)
        matched = ~finite & ~((both_nan & tol.nan_equal) | (same_inf & tol.inf_equal))
        abs_err = np.where(matched, np.inf, abs_err)
        with np.errstate(invalid="ignore"):
            rel_err = np.where(matched, np.inf, np.where(finite, abs_err / denom, 0.0))
        mismatch = int(matched.sum())
        exp_abs = np.where(np.isfinite(b), exp_abs, 0.0)
    if not count:
        return _Chunk(abs=abs_err, rel=rel_err, over=0, mismatch=0)
    if tol.mode == "isclose":
        over = abs_err > tol.atol + tol.rtol * exp_abs
    else:
        over = (abs_err > tol.atol) & (rel_err > tol.rtol)
    return _Chunk(abs=abs_err, rel=rel_err, over=int(over.sum()), mismatch=mismatch)


def _chunks(
    pairs: Sequence[tuple[np.ndarray, np.ndarray]], tol: Tolerance, *, count: bool = True
) -> Iterator[tuple[slice, _Chunk]]:
    """Every chunk of every iteration's (obtained, golden) pair, with where it goes in the joined flat arrays."""
    offset = 0
    for got, exp in pairs:
        flat_a, flat_b = np.asarray(got).ravel(), np.asarray(exp).ravel()
        # FP32 against its golden, mostly: equal chunks are all-zero errors (NaN is never equal; an infinity equal to
        # itself is an error only when the tolerance says so)
        same = tol.inf_equal and bool(np.array_equal(flat_a[:DIFF_CHUNK], flat_b[:DIFF_CHUNK]))
        for start in range(0, flat_b.size, DIFF_CHUNK):
            part = slice(start, start + DIFF_CHUNK)
            a_part, b_part = flat_a[part], flat_b[part]
            equal = same and bool(np.array_equal(a_part, b_part))
            chunk = _identical(b_part.size) if equal else _chunk(a_part, b_part, tol, count=count)
            yield slice(offset + start, offset + start + chunk.abs.size), chunk
        offset += flat_b.size


def _identical(size: int) -> _Chunk:
    """The errors of a chunk whose values equal the golden's one for one (NaN never does): all zero, nothing over,
    nothing mismatched (what :func:`_chunk` computes there, without computing it)."""
    zeros = np.zeros(size)
    return _Chunk(abs=zeros, rel=zeros, over=0, mismatch=0)


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
    """``full=False`` in a mode that needs no mean, median or quantile: :func:`maxima`. Otherwise the abs and rel
    errors' statistics by :func:`harness.judge.orderstats.order_stats`, exact, in a few passes over the chunks: the
    per-element temporaries never exceed :data:`DIFF_CHUNK` elements, and no array holds every error."""
    if not full and tol.mode in ("elemwise", "isclose", "max"):
        return maxima(pairs, tol)
    tally = [0, 0, 0, 0]  # passes made, then the first pass's over, mismatch and total

    def chunks() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        tally[0] += 1
        for where, chunk in _chunks(pairs, tol, count=tally[0] == 1):
            tally[1:] = (tally[1] + chunk.over, tally[2] + chunk.mismatch, where.stop) if tally[0] == 1 else tally[1:]
            yield chunk.abs, chunk.rel

    abs_stats, rel_stats = order_stats(chunks, streams=2, q=tol.quantile, sample=lambda: _sample(pairs, tol))
    return ElementErrors(abs=abs_stats, rel=rel_stats, over=tally[1], mismatch=tally[2], total=tally[3])


def _sample(pairs: Sequence[tuple[np.ndarray, np.ndarray]], tol: Tolerance) -> Sample:
    """The abs and rel errors of :data:`~harness.judge.orderwindow.SAMPLE_SIZE` elements drawn uniformly (seeded,
    with replacement) from every iteration's output, each iteration in proportion to its size: random positions,
    not a stride, which would follow a vocabulary's period."""
    sizes = [np.asarray(exp).size for _, exp in pairs]
    population = sum(sizes)
    rng = np.random.default_rng(0)
    abs_parts, rel_parts = [], []
    for (got, exp), size in zip(pairs, sizes):
        if not size:
            continue
        picks = np.sort(rng.integers(0, size, round(SAMPLE_SIZE * size / population)))
        chunk = _chunk(np.asarray(got).ravel()[picks], np.asarray(exp).ravel()[picks], tol, count=False)
        abs_parts.append(chunk.abs)
        rel_parts.append(chunk.rel)
    return Sample(values=(np.concatenate(abs_parts), np.concatenate(rel_parts)), population=population)


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
