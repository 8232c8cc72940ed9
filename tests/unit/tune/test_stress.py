"""The hunt for inputs over the bound finds the worst corner of a linear layer, every time.

30 random Hypothesis inputs in [-1, 1] miss the overflow of a plain ``x @ w -> square -> mean`` head: its worst
input is the corner ``x = sign(w[:, j])`` of the column ``j`` with the largest ``sum |w[:, j]|``. The corner search
(sign-gradient step from the centre of the box) finds it analytically, for any weights and any seed.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.convert import ConvertOptions, collect_magnitudes, convert
from harness.core.dtypes import FP16_MAX
from harness.search.corners import Box, ascend, corner_feeds
from harness.tune.bound import Bound
from harness.tune.stress import StressTarget, stress
from tests.helpers.tune_heads import square_head, weights, worst_corner


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("lo", "hi"), [(-1.0, 1.0), (-0.25, 2.0)])
def test_the_first_corner_is_the_worst_corner_of_a_linear_layer(seed: int, lo: float, hi: float) -> None:
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(64, 10))
    box = Box(ranges=(("x", lo, hi),), base={"x": rng.uniform(lo, hi, (1, 64)).astype(np.float32)})

    def probe(feed: dict[str, np.ndarray]) -> np.ndarray:
        return (np.asarray(feed["x"], dtype=np.float64) @ w).ravel()

    corners = corner_feeds(probe, box)
    assert corners and all(np.isin(c["x"], np.float32([lo, hi])).all() for c in corners)
    expected = worst_corner(w, lo, hi)
    np.testing.assert_array_equal(corners[0]["x"].ravel(), expected.astype(np.float32))
    found = max(abs(probe(c)).max() for c in corners)
    assert found == pytest.approx(abs(expected @ w).max(), rel=1e-6)


def test_blocks_and_ascent_on_an_input_larger_than_the_probe_budget() -> None:
    """4096 coordinates, 64 probes: blocks of 64 move together, so the corner is the best one whose blocks are
    constant (exact at that granularity, not the coordinate-wise worst); the ascent keeps to the box's bounds."""
    rng = np.random.default_rng(7)
    w = rng.normal(size=(4096,))
    box = Box(ranges=(("x", -1.0, 1.0),), base={"x": np.zeros((1, 4096), dtype=np.float32)}, max_probes=64)

    def probe(feed: dict[str, np.ndarray]) -> np.ndarray:
        return np.asarray([float(np.asarray(feed["x"], dtype=np.float64).ravel() @ w)])

    (corner,) = corner_feeds(probe, box)
    assert np.isin(corner["x"], np.float32([-1.0, 1.0])).all()

    def score(feed: dict[str, np.ndarray]) -> float:
        return abs(float(probe(feed)[0]))

    block_optimum = sum(abs(part.sum()) for part in np.array_split(w, 64))
    assert score(corner) == pytest.approx(block_optimum, rel=1e-4)
    best, value, spent = ascend(score, corner, box, max_evals=20)
    assert value >= score(corner) and spent <= 20 and np.isin(best["x"], np.float32([-1.0, 1.0])).all()


@pytest.mark.parametrize("seed", range(5))
def test_the_hunt_finds_the_square_head_overflow_for_every_seed(seed: int) -> None:
    model = square_head(seed=seed)
    all_low = convert(model, options=ConvertOptions(data_max=FP16_MAX), magnitudes=collect_magnitudes(model))
    assert set(all_low.low_nodes) == {"proj", "square", "mean"}
    rng = np.random.default_rng(seed)
    tuning = [{"x": rng.uniform(-1, 1, (1, 256)).astype(np.float32)} for _ in range(8)]
    target = StressTarget(
        model, all_low.model, bound=Bound(max_error=1e-2), calibration=tuning, low_nodes=all_low.low_nodes
    )
    found = stress(target, examples=30, seed=seed)
    assert found.failing_feed is not None and found.found_by == "corner search"
    assert found.worst_peak > 1.0  # a low-precision tensor past 65504
    x = found.failing_feed["x"].astype(np.float64).ravel()
    assert np.max(np.abs(x @ weights(model))) ** 2 > FP16_MAX
