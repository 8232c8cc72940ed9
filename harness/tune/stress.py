"""The hunt for inputs on which a tuned model misses its bound: corners first, then a guided Hypothesis search.

The tuned plan is verified on its tuning inputs only. This search looks for a counterexample inside the tuning
data's per-input value range (same shapes), in three steps that each stop at the first input over the bound:

1. the deterministic corner search (:mod:`harness.search.corners`): the sign-gradient corners of the box for the
   tensors the tuned model computes in low precision, highest predicted peak ``|value|`` first. The worst corner
   of a linear layer is found every time, whatever the seed;
2. a coordinate ascent from the best corner on ``error/bound + peak/limit``;
3. Hypothesis (``harness.search.strategies.feeds``: plain floats mixed with fp16 hazards), steered with
   ``hypothesis.target`` toward the largest error/bound and the largest peak ``|value|`` of a low-precision
   tensor over the type's largest finite value (its range limit).

Each candidate runs the FP32 model (ORT CPU, the low tensors exposed as extra outputs) and the tuned model
(``emulate``), and is judged together with the tuning inputs, as the bound is (its error is the largest error over
the largest ``|golden|`` of them all): a counterexample is an input that, added to the tuning inputs, breaks the
bound. An input whose FP32 output is not finite is never a counterexample. The finding feeds the tune's
next round (:mod:`harness.tune.rounds`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from random import Random

import numpy as np
import onnx

from harness.data.feeds import Feed, cast_feeds, input_specs
from harness.data.marked import with_outputs
from harness.runners import make_runner
from harness.search.corners import MAX_PROBES, Box, ascend, corner_feeds
from harness.tune.bound import Bound, measure

_CAP = 1e6
CORNERS = 8
ASCENT_EVALS = 32


@dataclass(frozen=True)
class StressOutcome:
    examples: int
    """Inputs tried in all (corners, ascent and Hypothesis)."""
    worst_ratio: float
    """Largest error/bound ratio seen (capped at 1e6 for non-finite outputs)."""
    domain: str
    failing_feed: Feed | None = None
    found_by: str = ""  # "corner search", "coordinate ascent" or "hypothesis"
    corners: int = 0
    worst_peak: float = 0.0
    """Largest peak |value| of a low-precision tensor (in the FP32 model) over the type's largest finite value."""
    failing_ratio: float | None = None
    """error/bound with the failing feed added to the tuning inputs."""

    def to_json(self) -> dict[str, object]:
        return {
            "examples": self.examples,
            "corners": self.corners,
            "worst_error_over_bound": self.worst_ratio,
            "worst_peak_over_range": self.worst_peak,
            "domain": self.domain,
            "found_failure": self.failing_feed is not None,
            "found_by": self.found_by or None,
            "failing_error_over_bound": self.failing_ratio,
        }


def calibration_domain(
    feeds: Sequence[Feed],
) -> tuple[tuple[tuple[str, float, float], ...], tuple[tuple[str, tuple[int, ...]], ...]]:
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


def low_tensors(model: onnx.ModelProto, low_nodes: Sequence[str]) -> list[str]:
    """The outputs of the nodes the tuned model runs in low precision (names shared with the FP32 model)."""
    low = set(low_nodes)
    outputs = {o.name for o in model.graph.output}
    return [out for node in model.graph.node if node.name in low for out in node.output if out and out not in outputs]


@dataclass(frozen=True)
class StressTarget:
    """What a hunt stresses: the FP32 model and its tuned conversion (``model_dir``: their external data's
    folder), the bound the plan must keep over the tuning inputs (``calibration``, whose value ranges are the
    search domain), and the tuned plan's low-precision nodes, whose tensors are watched against ``limit`` (the low
    type's largest finite value)."""

    model: onnx.ModelProto
    tuned: onnx.ModelProto
    bound: Bound
    calibration: Sequence[Feed]
    model_dir: Path | None = None
    low_nodes: Sequence[str] = ()
    limit: float = float(np.finfo(np.float16).max)


class _Trial:
    """Runs one feed through both models and keeps the worst figures seen."""

    def __init__(self, golden: object, low: object, stressed: StressTarget, *, watched: Sequence[str]) -> None:
        self.golden, self.low, self.bound = golden, low, stressed.bound
        self.outputs, self.watched, self.limit = (
            [o.name for o in stressed.model.graph.output],
            list(watched),
            stressed.limit,
        )
        self.low_specs = input_specs(stressed.tuned)
        self.tried, self.worst, self.worst_peak = 0, 0.0, 0.0
        self.failing_ratio: float | None = None  # error/bound of the first input found over the bound
        # the bound is judged over the tuning inputs together (max error / max |golden| over all of them), so a
        # candidate is judged with them: "added to the tuning inputs, it breaks the bound", as the next round sees it
        tuning = stressed.calibration
        self.tuning_gold = [{n: self.golden.infer(f)[n] for n in self.outputs} for f in tuning]  # type: ignore[attr-defined]
        self.tuning_got = [self.low.infer(f) for f in cast_feeds(list(tuning), self.low_specs)]  # type: ignore[attr-defined]

    def watched_values(self, feed: Feed) -> np.ndarray:
        got = self.golden.infer(feed)  # type: ignore[attr-defined]
        parts = [
            np.asarray(got[n], dtype=np.float64).ravel()
            for n in (*self.outputs, *self.watched)
            if np.asarray(got[n]).dtype.kind == "f"
        ]
        return np.concatenate(parts) if parts else np.zeros(0)

    def run(self, feed: Feed) -> tuple[float, float, bool]:
        """(error/bound, peak/limit, over the bound with a finite golden)."""
        self.tried += 1
        everything = self.golden.infer(feed)  # type: ignore[attr-defined]
        gold = {n: everything[n] for n in self.outputs}
        peak = max(
            (
                float(np.max(np.abs(np.asarray(everything[n], dtype=np.float64)), initial=0.0))
                for n in self.watched
                if np.asarray(everything[n]).dtype.kind == "f"
            ),
            default=0.0,
        )
        peak = min(peak / self.limit, _CAP) if np.isfinite(peak) else _CAP
        got = self.low.infer(cast_feeds([feed], self.low_specs)[0])  # type: ignore[attr-defined]
        m = measure([*self.tuning_got, got], [*self.tuning_gold, gold], self.bound)
        ratio = min(m.ratio, _CAP) if np.isfinite(m.ratio) else _CAP
        self.worst, self.worst_peak = max(self.worst, ratio), max(self.worst_peak, peak)
        finite_gold = all(np.isfinite(np.asarray(v, dtype=np.float64)).all() for v in gold.values())
        over = bool(finite_gold and not m.passed)
        if over and self.failing_ratio is None:
            self.failing_ratio = ratio
        return ratio, peak, over


def stress(stressed: StressTarget, *, examples: int, seed: int = 0, max_probes: int = MAX_PROBES) -> StressOutcome:
    """See the module docstring; ``examples`` Hypothesis feeds at most (generate + target phases, no shrinking)."""
    model, calibration = stressed.model, stressed.calibration
    ranges, shapes = calibration_domain(calibration)
    domain = ", ".join(f"{n}:[{lo:.4g},{hi:.4g}]" for n, lo, hi in ranges) or "inputs as declared"
    watched = low_tensors(model, stressed.low_nodes)
    box = Box(ranges=ranges, base=dict(calibration[0]), max_probes=max_probes)
    with (
        make_runner("ort", with_outputs(model, watched), model_dir=stressed.model_dir) as golden,
        make_runner("emulate", stressed.tuned, model_dir=stressed.model_dir) as low,
    ):
        trial = _Trial(golden, low, stressed, watched=watched)

        def result(feed: Feed | None, how: str, corners: int) -> StressOutcome:
            return StressOutcome(
                examples=trial.tried,
                worst_ratio=trial.worst,
                domain=domain,
                failing_feed=feed,
                found_by=how if feed is not None else "",
                corners=corners,
                worst_peak=trial.worst_peak,
                failing_ratio=trial.failing_ratio if feed is not None else None,
            )

        corners = corner_feeds(trial.watched_values, box, top=CORNERS) if ranges else []
        best: tuple[float, Feed] | None = None
        for tried, corner in enumerate(corners, start=1):
            ratio, peak, over = trial.run(corner)
            if over:
                return result(corner, "corner search", tried)
            if best is None or ratio + peak > best[0]:
                best = (ratio + peak, corner)
        if best is not None:
            failing: list[Feed] = []

            def score(feed: Feed) -> float:
                ratio, peak, over = trial.run(feed)
                if over and not failing:
                    failing.append(feed)
                return ratio + peak

            ascend(score, best[1], box, max_evals=ASCENT_EVALS, stop=lambda _: bool(failing))
            if failing:
                return result(failing[0], "coordinate ascent", len(corners))
        if not examples:
            return result(None, "", len(corners))

        # imported here, not at the top: a sweep imports this module (diagnosis -> tune) but only a hunt needs
        # Hypothesis, whose import is the largest part of a warm run's start-up (benchmarks/bench_pipeline.py)
        from hypothesis import HealthCheck, Phase, find, settings, target
        from hypothesis.errors import NoSuchExample

        from harness.search.strategies import feeds as feed_strategy

        def fails(feed: Feed) -> bool:
            ratio, peak, over = trial.run(feed)
            target(ratio, label="error / bound")
            target(peak, label="peak |value| of a low-precision tensor / the type's max")
            return over

        strategy = feed_strategy(model, val_ranges=ranges, input_shapes=shapes)
        profile = settings(
            max_examples=examples,
            deadline=None,
            database=None,
            phases=(Phase.generate, Phase.target),
            suppress_health_check=list(HealthCheck),
        )
        try:
            found: Feed | None = find(strategy, fails, settings=profile, random=Random(seed))
        except NoSuchExample:
            found = None
        return result(found, "hypothesis", len(corners))
