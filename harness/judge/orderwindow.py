"""Order statistics found in the first pass over the values, from a sample (issue 31's judge of large outputs).

:mod:`harness.judge.orderstats` finds a rank by radix selection: its first pass histograms the values' top bits, a
second pass gathers the candidates of the chosen bucket. On a decoder's 131 M logits that second pass (every error
made again) was a third of the judge. With a uniform sample of the values taken before the first pass, the value
at each wanted rank is predicted, and the first pass also keeps every value inside a window around the prediction
and counts the values below it. Once the pass is over, a rank that falls inside its window is the window's value at
that position: exact whatever the sample (the sample only moves the window; the count decides). A rank outside its
window (an unlucky sample, a window that outgrew its share of memory) is left to the radix selection, which then
makes the histogram the first pass skipped (one pass more): the figures never depend on the sample, only the
number of passes does. A window up to 0 only counts (the values are never negative: everything in it is 0).

The window of a rank ``r`` of ``n`` values spans the sample's values from ``r/(n-1) - m`` to ``r/(n-1) + m`` of
the way through the sorted sample, ``m`` being :data:`SIGMAS` binomial standard deviations of that fraction's
estimate from the sample (at least two sample values either side).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

SIGMAS = 4.0
SAMPLE_SIZE = 1 << 18
"""Values in a sample: 2 MB of float64 per stream, whose windows then hold about 1.6 % of a median's values."""


@dataclass(frozen=True)
class Sample:
    """A uniform sample of each stream's values (one float64 array a stream, any order), and how many values each
    stream has in all (the sample decides the windows only where this is the count the first pass finds)."""

    values: tuple[np.ndarray, ...]
    population: int


@dataclass
class _Window:
    """The values of one stream in ``[low, high]`` and how many are below ``low``; ``kept`` None: dropped."""

    stream: int
    low: float
    high: float
    below: int = 0
    size: int = 0
    kept: list[np.ndarray] | None = field(default_factory=list)


class Windows:
    """The windows of every wanted rank of every stream, filled a chunk at a time in the first pass."""

    def __init__(self, sample: Sample, ranks: Sequence[int], *, limit: int) -> None:
        self.population, self._limit = sample.population, limit
        self._windows: list[_Window] = []
        for stream, values in enumerate(sample.values):
            ordered = np.sort(values)
            spans = sorted(_span(ordered, rank, sample.population) for rank in ranks)
            for low, high in _merged(spans):
                self._windows.append(_Window(stream=stream, low=low, high=high))

    def add(self, stream: int, part: np.ndarray) -> None:
        """Count and keep ``part``'s values (one chunk of ``stream``) against that stream's windows."""
        for window in self._windows:
            if window.stream != stream or window.kept is None:
                continue
            window.below += int(np.count_nonzero(part < window.low))
            if window.high <= 0.0:  # the values are never negative: a window up to 0 holds only zeros
                window.size += int(np.count_nonzero(part <= window.high))
                continue  # counted, not kept (an output equal to its golden: every error is 0)
            inside = part[(part >= window.low) & (part <= window.high)]
            window.size += inside.size
            if window.size > self._limit:  # more than its share of memory: the radix selection will find it
                window.kept = None
            elif inside.size:
                window.kept.append(inside.copy())

    def value(self, stream: int, rank: int) -> float | None:
        """The stream's value at ``rank`` (0-based, ascending) where a window holds that rank, else None."""
        for window in self._windows:
            if window.stream == stream and window.kept is not None and 0 <= rank - window.below < window.size:
                if window.high <= 0.0:
                    return 0.0
                values = np.concatenate(window.kept) if len(window.kept) != 1 else window.kept[0]
                window.kept = [values]
                return float(np.partition(values, rank - window.below)[rank - window.below])
        return None


def _span(ordered: np.ndarray, rank: int, population: int) -> tuple[float, float]:
    """The window of ``rank`` of ``population`` values predicted from the sorted sample ``ordered``."""
    size = ordered.size
    fraction = rank / (population - 1) if population > 1 else 0.0
    spread = SIGMAS * math.sqrt(max(fraction * (1.0 - fraction), 1.0 / size) / size) * size + 2
    centre = fraction * (size - 1)
    low, high = max(0, math.floor(centre - spread)), min(size - 1, math.ceil(centre + spread))
    # at the sample's ends, the window reaches the stream's (values beyond the sample's extremes may hold the rank)
    return (-math.inf if low == 0 else float(ordered[low])), (math.inf if high == size - 1 else float(ordered[high]))


def _merged(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Overlapping windows of one stream as one (a value is kept once)."""
    merged: list[tuple[float, float]] = []
    for low, high in spans:
        if merged and low <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged
