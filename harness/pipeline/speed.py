"""Measured speed of one case: the converted model and its FP32 original on the same GPU runner, interleaved.

Only runners whose traits claim a speed measure one (``harness.runners.timing.speed_claim``);
for the others the case records why not, and the report prints that reason instead of a number. The timed call
is the runner's inference on the first golden feed, host copies included (the FP32 and the converted model have
the same I/O types under keep_io_types, so the copies cancel in the ratio).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import onnx

from harness.core.errors import RunnerError, RunnerUnavailable
from harness.data.feeds import Feed, cast_feeds, input_specs
from harness.runners import make_runner
from harness.runners.base import Runner
from harness.runners.timing import Clock, TimingConfig, interleaved, speed_claim, speedup


@dataclass(frozen=True)
class Speed:
    """What a case records: the latencies and ratio when measured, else the reason none was claimed."""

    latency_ms: float | None = None
    fp32_latency_ms: float | None = None
    speedup: float | None = None
    note: str = ""


def time_pair(
    low: Runner, fp32: Runner, low_feed: Feed, fp32_feed: Feed, *, config: TimingConfig, clock: Clock
) -> Speed:
    """Time two active runners interleaved (see :func:`harness.runners.timing.interleaved`)."""
    result = interleaved(
        {"low": lambda: low.infer_impl(low_feed), "fp32": lambda: fp32.infer_impl(fp32_feed)},
        config=config,
        clock=clock,
    )
    low_ms, fp32_ms = result["low"].median_ms, result["fp32"].median_ms
    return Speed(latency_ms=low_ms, fp32_latency_ms=fp32_ms, speedup=speedup(fp32_ms, low_ms))


@dataclass(frozen=True)
class SpeedPair:
    """What a speed measurement runs: the converted model and its FP32 original on one runner (and providers),
    each with its weights' folder (``low_model_dir`` None: the FP32 model's), on the first of ``feeds``."""

    runner: str
    low_model: onnx.ModelProto
    fp32_model: onnx.ModelProto
    feeds: Sequence[Feed]
    providers: Sequence[str] = ()
    model_dir: Path | None = None
    low_model_dir: Path | None = None


def measure_speed(pair: SpeedPair, *, config: TimingConfig, clock: Clock) -> Speed:
    """The case's :class:`Speed`, or a note saying why it claims none (the runner's declared speed claim, or a
    timing failure)."""
    runner, providers = pair.runner, pair.providers
    note = speed_claim(runner, providers)
    if note:
        return Speed(note=note)
    low_feed = cast_feeds(list(pair.feeds[:1]), input_specs(pair.low_model))[0]
    fp32_feed = cast_feeds(list(pair.feeds[:1]), input_specs(pair.fp32_model))[0]
    low_dir = pair.low_model_dir or pair.model_dir
    try:
        with (
            make_runner(runner, pair.low_model, model_dir=low_dir, providers=providers) as low,
            make_runner(runner, pair.fp32_model, model_dir=pair.model_dir, providers=providers) as fp32,
        ):
            return time_pair(low, fp32, low_feed, fp32_feed, config=config, clock=clock)
    except (RunnerError, RunnerUnavailable) as err:
        return Speed(note=f"timing failed on {runner}: {err}")
