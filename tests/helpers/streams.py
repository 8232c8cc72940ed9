"""Value streams for the judge's order statistics tests: a function that makes the same chunks of two streams (the
values and three times them) at every call, and counts the calls (the passes)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np


def chunked(values: np.ndarray, chunk: int, passes: list[int]) -> Callable[[], Iterator[tuple[np.ndarray, ...]]]:
    def chunks() -> Iterator[tuple[np.ndarray, ...]]:
        passes.append(1)
        for start in range(0, values.size, chunk):
            yield values[start : start + chunk], 3 * values[start : start + chunk]

    return chunks


def same(got: float, want: float) -> bool:
    """Equal, NaN equal to NaN."""
    return got == want or (math.isnan(got) and math.isnan(want))
