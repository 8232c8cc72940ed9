"""A short Hypothesis search for inputs on which the tuned model misses its bound (reported, never hidden).

The tuned plan is verified on the calibration inputs only. This search draws feeds inside the calibration
data's per-input value range (same shapes), mixed with fp16 hazards (``harness.strategies``), runs the FP32
model (ORT CPU) and the tuned model (``emulate``), and steers toward the largest error/bound ratio with
``hypothesis.target``. A failing feed is a finding about the plan's domain, not a proof: the plan JSON records
what was tried and what was found, and the bound is claimed for the calibration data only.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from random import Random

import numpy as np
import onnx
from hypothesis import HealthCheck, Phase, find, settings, target
from hypothesis.errors import NoSuchExample

from harness.data.feeds import Feed, cast_feeds, input_specs
from harness.runners import make_runner
from harness.search.strategies import feeds as feed_strategy
from harness.tune.bound import Bound, measure

_CAP = 1e6


@dataclass(frozen=True)
class StressOutcome:
    examples: int
    worst_ratio: float
    """Largest error/bound ratio seen (capped at 1e6 for non-finite outputs)."""
    domain: str
    failing_feed: Feed | None = None

    def to_json(self) -> dict[str, object]:
        return {"examples": self.examples, "worst_error_over_bound": self.worst_ratio, "domain": self.domain,
                "found_failure": self.failing_feed is not None}


def calibration_domain(feeds: Sequence[Feed]) -> tuple[tuple[tuple[str, float, float], ...],
                                                       tuple[tuple[str, tuple[int, ...]], ...]]:
    """Per float input, [min, max] over the calibration feeds; shapes of the first feed."""
    ranges, shapes = [], []
    for name, first in feeds[0].items():
        shapes.append((name, tuple(int(d) for d in first.shape)))
        if np.asarray(first).dtype.kind == "f":
            values = np.concatenate([np.asarray(f[name], dtype=np.float64).ravel() for f in feeds])
            finite = values[np.isfinite(values)]
            if finite.size:
                ranges.append((name, float(finite.min()), float(finite.max())))
    return tuple(ranges), tuple(shapes)


def stress(model: onnx.ModelProto, tuned: onnx.ModelProto, *, bound: Bound, calibration: Sequence[Feed],
           examples: int, seed: int = 0, model_dir: Path | None = None) -> StressOutcome:
    """Up to ``examples`` Hypothesis feeds (generate + target phases, no shrinking); see the module docstring."""
    ranges, shapes = calibration_domain(calibration)
    domain = ", ".join(f"{n}:[{lo:.4g},{hi:.4g}]" for n, lo, hi in ranges) or "inputs as declared"
    strategy = feed_strategy(model, val_ranges=ranges, input_shapes=shapes)
    tried, worst = 0, 0.0
    low_specs = input_specs(tuned)
    with make_runner("ort", model, model_dir=model_dir) as golden, \
            make_runner("emulate", tuned, model_dir=model_dir) as low:
        def fails(feed: Feed) -> bool:
            nonlocal tried, worst
            tried += 1
            gold = golden.infer(feed)
            got = low.infer(cast_feeds([feed], low_specs)[0])
            m = measure([got], [gold], bound)
            ratio = min(m.ratio, _CAP) if np.isfinite(m.ratio) else _CAP
            worst = max(worst, ratio)
            target(ratio, label="error / bound")
            finite_gold = all(np.isfinite(np.asarray(v, dtype=np.float64)).all() for v in gold.values())
            return bool(finite_gold and not m.passed)

        profile = settings(max_examples=examples, deadline=None, database=None, phases=(Phase.generate, Phase.target),
                           suppress_health_check=list(HealthCheck))
        try:
            found: Feed | None = find(strategy, fails, settings=profile, random=Random(seed))
        except NoSuchExample:
            found = None
    return StressOutcome(examples=tried, worst_ratio=worst, domain=domain, failing_feed=found)
