"""Exact max, mean, median and quantile of error values that are never held all at once (issue 31).

The judge's errors of a large output (a decoder's 8x512x32000 logits: 131 M values, 1 GB in float64) are made a
chunk at a time. Holding them all to call ``np.median`` and ``np.quantile`` cost a float64 scratch array the size
of the output and two full selections (1.4 s on 33 M values). Here the order statistics are found by radix
selection on the values' bits: a non-negative float64 (+inf included) orders like its bit pattern read as an
unsigned integer, so each pass over the chunks histograms 16 more bits of the candidates of every wanted rank,
and once the candidates are few (:data:`COLLECT`, or a 32nd of a larger stream, at the most) they are gathered and
selected with ``np.partition``. A typical output takes two passes; four at the most. Where the caller gives a
sample of the values (:mod:`harness.judge.orderwindow`), the first pass keeps the values in a window around each
wanted rank instead of histogramming: one pass when every rank falls in its window, and otherwise a histogram pass
more (five at the most). The results are bit-identical to
``np.median`` and ``np.quantile(method="linear")`` (numpy's interpolation is mirrored below); the mean is the sum of
the chunks' sums over the count (equal to ``np.mean`` up to summation order, exactly equal when everything fits in
one gather). Values must be non-negative and never NaN (the judge's abs and rel errors are).

Pure numpy; a pass is a callable that makes the chunks again (:func:`order_stats`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from harness.judge.orderwindow import Sample, Windows

COLLECT = 1 << 21
"""Candidates gathered as values (16 MB of float64) rather than histogrammed further; for a stream of more than
32 times as many values, a 32nd of it (a decoder's 8x512x32000 logits: 4 M, 32 MB; the pass over all 131 M errors
that a finer histogram would cost takes 0.7 s)."""
_GATHER_SHARE = 32
_BITS = 16

Stats = tuple[float, float, float, float]
"""(max, mean, median, quantile)."""


def _median_ranks(n: int) -> tuple[int, ...]:
    return (n // 2 - 1, n // 2) if n % 2 == 0 else (n // 2,)


def _quantile_ranks(n: int, q: float) -> tuple[float, int, int]:
    """numpy's ``linear`` method: the virtual index, and the two ranks it reads (clamped as numpy clamps)."""
    virtual = float(np.float64(n - 1) * np.float64(q))
    if virtual >= n - 1:
        return virtual, n - 1, n - 1
    if virtual < 0:
        return virtual, 0, 0
    low = math.floor(virtual)
    return virtual, low, low + 1


def _lerp(a: np.float64, b: np.float64, t: np.float64) -> float:
    """numpy's ``_lerp`` on scalars: ``a + (b-a)*t``, or ``b - (b-a)*(1-t)`` from ``t >= 0.5``."""
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: NaN, as numpy gives
        diff = b - a
        return float(b - diff * (1 - t)) if t >= 0.5 else float(a + diff * t)


@dataclass
class _Target:
    """The search for one rank of one stream: candidates are the values whose high bits equal ``prefix``."""

    stream: int
    rank: int  # within the candidates
    shift: int = 64  # bits still undecided (64: every value is a candidate)
    prefix: int = 0
    count: int = -1  # candidates (-1: not yet known)
    span: tuple[float, float] | None = None  # the candidates' min and max, from the last pass that read them
    value: float | None = None
    gathered: list[np.ndarray] | None = None

    def key(self) -> tuple[int, int, int]:
        return self.stream, self.shift, self.prefix


def order_stats(
    chunks: Callable[[], Iterable[Sequence[np.ndarray]]],
    *,
    streams: int,
    q: float,
    sample: Callable[[], Sample] | None = None,
) -> list[Stats]:
    """(max, mean, median, quantile ``q``) of each of ``streams`` value streams. ``chunks()`` yields, each time it
    is called, the same tuples of ``streams`` float64 arrays (a chunk of every stream). ``sample`` (called past one
    gather): a uniform sample of the streams, for :mod:`harness.judge.orderwindow` (one pass, the same figures)."""
    total, tops, sums = 0, [0.0] * streams, [0.0] * streams
    small: list[list[np.ndarray]] | None = [[] for _ in range(streams)]
    histograms: dict[tuple[int, int, int], np.ndarray] = {}
    windows: Windows | None = None

    def tally(s: int, part: np.ndarray) -> None:  # with windows, no histogram: a pass makes it if one is missed
        if windows is None:
            _histogram(histograms, (s, 64, 0), part)
        else:
            windows.add(s, part)

    for parts in chunks():  # pass 1: the maxima, sums, and (past one gather) the top 16 bits' histogram
        total += parts[0].size
        for s, part in enumerate(parts):
            tops[s] = max(tops[s], float(part.max(initial=0.0)))
            sums[s] += float(part.sum())
            if small is not None:
                small[s].append(part.copy())
            else:
                tally(s, part)
        if small is not None and total > COLLECT:  # more than one gather holds: histograms from now on
            windows = None if sample is None else _windows(sample(), q)
            for s, kept in enumerate(small):
                for part in kept:
                    tally(s, part)
            small = None
    if total == 0:
        return [(0.0, 0.0, 0.0, 0.0)] * streams
    if small is not None:  # everything fits: numpy's own formulas on the whole array
        return [_direct(np.concatenate(parts), q) for parts in small]
    _, q_low, q_high = _quantile_ranks(total, q)
    ranks = sorted({*_median_ranks(total), q_low, q_high})
    targets = {(s, r): _Target(stream=s, rank=r) for s in range(streams) for r in ranks}
    if windows is not None:
        for t in targets.values():
            t.value = windows.value(t.stream, t.rank) if windows.population == total else None
            t.count = total  # otherwise every value is still a candidate, and no histogram was made
    _advance(targets.values(), histograms)
    while any(t.value is None for t in targets.values()):
        _pass(
            chunks,
            [t for t in targets.values() if t.value is None],
            histograms,
            collect=max(COLLECT, total // _GATHER_SHARE),
        )
        _advance(targets.values(), histograms)
    return [
        (tops[s], sums[s] / total, *_median_and_quantile({r: targets[(s, r)].value for r in ranks}, total, q))
        for s in range(streams)
    ]


def _median_and_quantile(values: Mapping[int, float | None], total: int, q: float) -> tuple[float, float]:
    """numpy's median and ``linear`` quantile of ``total`` values from the values at their ranks."""
    picked = {rank: np.float64(value) for rank, value in values.items()}
    virtual, q_low, q_high = _quantile_ranks(total, q)
    mid = _median_ranks(total)
    median = float((picked[mid[0]] + picked[mid[1]]) / 2) if len(mid) == 2 else float(picked[mid[0]])
    gamma = np.float64(virtual - (q_low if virtual < total - 1 else -1))  # numpy clamps the index to -1 there
    return median, _lerp(picked[q_low], picked[q_high], gamma)


def _windows(sample: Sample, q: float) -> Windows:
    """The first pass's windows around the ranks a stream of ``sample.population`` values is asked for."""
    n = sample.population
    _, q_low, q_high = _quantile_ranks(n, q)
    return Windows(sample, sorted({*_median_ranks(n), q_low, q_high}), limit=max(COLLECT, n // _GATHER_SHARE))


def _histogram(histograms: dict[tuple[int, int, int], np.ndarray], key: tuple[int, int, int], bits: np.ndarray) -> None:
    """Add the counts of the 16 bits below ``key``'s decided ones (``bits``: the candidates' float64 values or
    their uint64 bits) to ``key``'s histogram."""
    shift = key[1] - _BITS
    low = (bits.view(np.uint64) >> np.uint64(shift)) & np.uint64((1 << _BITS) - 1)
    found = np.bincount(low.view(np.int64), minlength=1 << _BITS)  # low < 2**16: the same number as int64
    if key in histograms:
        np.add(histograms[key], found, out=histograms[key])
    else:
        histograms[key] = found


def _direct(values: np.ndarray, q: float) -> Stats:
    with np.errstate(invalid="ignore"):
        top, mean = float(np.max(values)), float(np.mean(values))
        median = float(np.median(values, overwrite_input=True))
        return top, mean, median, float(np.quantile(values, q, overwrite_input=True))


def _advance(targets: Iterable[_Target], histograms: dict[tuple[int, int, int], np.ndarray]) -> None:
    """Narrow each unresolved target with the histogram of its candidates, or select among gathered values."""
    for t in targets:
        if t.value is not None:
            continue
        if t.gathered is not None:
            values = np.concatenate(t.gathered)
            values.partition(t.rank)
            t.value, t.gathered = float(values[t.rank]), None
            continue
        if t.span is not None and t.span[0] == t.span[1]:  # every candidate is one value (all 0, all inf, ...)
            t.value = t.span[0]
            continue
        bins = histograms.get(t.key())
        if bins is None:
            continue
        below = np.cumsum(bins)
        bucket = int(np.searchsorted(below, t.rank, side="right"))
        t.rank -= int(below[bucket - 1]) if bucket else 0
        t.count = int(bins[bucket])
        t.shift -= _BITS
        t.prefix = (t.prefix << _BITS) | bucket
        if t.shift == 0:  # every bit decided: the candidates all equal this value
            t.value = _as_float(t.prefix)


def _as_float(bits: int) -> float:
    return float(np.array([bits], dtype=np.uint64).view(np.float64)[0])


def _pass(
    chunks: Callable[[], Iterable[Sequence[np.ndarray]]],
    open_targets: Sequence[_Target],
    histograms: dict[tuple[int, int, int], np.ndarray],
    *,
    collect: int,
) -> None:
    """One pass over the chunks: gather the candidates of the targets that have ``collect`` or fewer, histogram the
    next 16 bits of the others' (targets that share candidates share the work)."""
    gather = {t.key(): t for t in open_targets if t.count <= collect}
    refine = {t.key() for t in open_targets if t.key() not in gather}
    found: dict[tuple[int, int, int], list[np.ndarray]] = {key: [] for key in gather}
    spans: dict[tuple[int, int, int], tuple[int, int]] = {}  # the refined candidates' min and max bits
    for parts in chunks():
        for key in {*gather, *refine}:
            stream, shift, prefix = key
            bits = parts[stream].view(np.uint64)
            chosen = bits if shift == 64 else bits[(bits >> np.uint64(shift)) == np.uint64(prefix)]
            if key in gather:
                found[key].append(chosen.view(np.float64).copy())
                continue
            _histogram(histograms, key, chosen)
            if chosen.size:
                lo, hi = int(chosen.min()), int(chosen.max())
                old = spans.get(key)
                spans[key] = (min(lo, old[0]), max(hi, old[1])) if old else (lo, hi)
    for t in open_targets:
        if t.key() in gather:
            t.gathered = found[t.key()]
            t.count = sum(part.size for part in t.gathered)
        elif t.key() in spans:
            lo, hi = spans[t.key()]
            t.span = (_as_float(lo), _as_float(hi))
