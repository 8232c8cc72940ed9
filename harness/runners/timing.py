"""Latency of a runner on real hardware: warm-up, then repeats; median and spread.

Only runners whose kernels really run in fp16/bf16 on an accelerator claim a speed: each declares it
(:class:`~harness.runners.traits.SpeedClaim`) and :func:`speed_claim` reads it, giving the others' reason. ``emulate`` computes in
fp32 with Cast pairs and ORT's CPU provider computes fp16 in fp32, so their timings say nothing about the speed of
low precision on a deployment target.

The clock is part of :class:`TimingConfig` (``time.perf_counter`` by default) so tests drive the logic with a fake
timer.
Several models are timed *interleaved* (:func:`interleaved`): round after round, each model's repeats in turn,
and the median of the per-round medians, which cancels the slow drift of a shared, noisy machine.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from harness.runners.registry import runner_traits

Clock = Callable[[], float]


@dataclass(frozen=True)
class TimingConfig:
    """How to time one case: ``warmup`` untimed calls, then ``rounds`` x ``repeats`` timed calls. ``budget_s``: the
    timed calls' expected seconds, all calls together, past which ``repeats`` shrinks (to :data:`MIN_REPEATS` at
    the least), judged from the last warm-up call of each: a model at deploy shapes (a decoder's 8x512 logits, tens
    of ms a call) is timed in about a second (the 8x1024 decoder on an H200: 4 repeats of its four calls a round,
    20 timed calls each), not 400 calls; a small model keeps every repeat."""

    warmup: int = 5
    repeats: int = 20
    rounds: int = 5
    clock: Clock = time.perf_counter
    """Seconds now (a fake one in tests, which drive the logic without real time)."""
    budget_s: float | None = 1.0

    def __post_init__(self) -> None:
        if self.warmup < 0 or self.repeats < 1 or self.rounds < 1:
            raise ValueError(f"TimingConfig needs warmup >= 0, repeats >= 1, rounds >= 1, got {self}")

    def repeats_for(self, seconds_per_round_call: float) -> int:
        """The repeats that keep ``rounds`` x repeats x ``seconds_per_round_call`` (one call of each model) within
        the budget."""
        if self.budget_s is None or seconds_per_round_call <= 0:
            return self.repeats
        fits = int(self.budget_s / (self.rounds * seconds_per_round_call))
        return max(min(self.repeats, fits), min(MIN_REPEATS, self.repeats))


MIN_REPEATS = 3


@dataclass(frozen=True)
class Latency:
    """Milliseconds per call: the median of the per-round medians, and the spread (max - min of those)."""

    median_ms: float
    spread_ms: float
    samples: int


def speed_claim(runner: str, providers: Sequence[str] = ()) -> str:
    """'' when `runner` measures real low-precision speed, else the reason it claims none (its declared
    :class:`~harness.runners.traits.SpeedClaim`)."""
    return runner_traits(runner).speed.note(runner, providers)


def _round_median(call: Callable[[], object], repeats: int, clock: Clock) -> float:
    samples = []
    for _ in range(repeats):
        start = clock()
        call()
        samples.append(clock() - start)
    return statistics.median(samples)


def interleaved(
    calls: Mapping[str, Callable[[], object]],
    *,
    config: TimingConfig = TimingConfig(),
) -> dict[str, Latency]:
    """Time every call in `calls` round by round (all of them in each round), after ``warmup`` calls each; the
    repeats as :meth:`TimingConfig.repeats_for` allows."""
    last: dict[str, float] = {}
    for name, call in calls.items():
        for _ in range(config.warmup):
            start = config.clock()
            call()
            last[name] = config.clock() - start
    repeats = config.repeats_for(sum(last.values())) if len(last) == len(calls) else config.repeats
    medians: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(config.rounds):
        for name, call in calls.items():
            medians[name].append(_round_median(call, repeats, config.clock))
    return {
        name: Latency(
            median_ms=1e3 * statistics.median(values),
            spread_ms=1e3 * (max(values) - min(values)),
            samples=config.rounds * repeats,
        )
        for name, values in medians.items()
    }


def speedup(fp32_ms: float | None, low_ms: float | None) -> float | None:
    """FP32 latency / low-precision latency (> 1: the low-precision model is faster); None if either is unknown."""
    if fp32_ms is None or low_ms is None or low_ms <= 0:
        return None
    return fp32_ms / low_ms
