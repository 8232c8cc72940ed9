"""Measured speed of one case: the converted model and its FP32 original on the same GPU runner, interleaved.

Only runners whose traits claim a speed measure one (``harness.runners.timing.speed_claim``);
for the others the case records why not, and the report prints that reason instead of a number. Two figures per
model, on the first golden feed, timed in the same interleaved rounds:

- device-resident: the runner's :meth:`~harness.runners.base.Runner.device_call` (onnxruntime IO binding): inputs
  copied to the device once, outputs left there. This is what a served model costs, and what the case's
  ``speedup`` (the Pareto front, the nightly ``speedup`` rule) is;
- end to end: the runner's inference with numpy in and out, host copies included. The copies do not cancel in
  the ratio: they add the same time to both models, which pulls every ratio toward 1 (8x512x8000 fp32 logits are
  131 MB copied back at every call).

A runner without a device call (TensorRT's) claims the end-to-end figure, and the case says so (``basis``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import onnx

from harness.core.errors import RunnerError, RunnerUnavailable
from harness.data.feeds import Feed, cast_feeds, input_specs
from harness.runners import make_runner
from harness.runners.base import Runner
from harness.runners.timing import TimingConfig, interleaved, speed_claim, speedup

DEVICE_RESIDENT = "device-resident"
END_TO_END = "end to end"


@dataclass(frozen=True)
class Speed:
    """What a case records: the latencies and ratio when measured, else the reason none was claimed.
    ``latency_ms``/``fp32_latency_ms``/``speedup`` are the claimed figures, measured as ``basis`` says
    (device-resident where the runner can bind its inputs on the device); ``e2e_*``: end to end, copies included."""

    latency_ms: float | None = None
    fp32_latency_ms: float | None = None
    speedup: float | None = None
    note: str = ""
    basis: str = ""
    e2e_latency_ms: float | None = None
    e2e_fp32_latency_ms: float | None = None
    e2e_speedup: float | None = None


def time_pair(low: Runner, fp32: Runner, low_feed: Feed, fp32_feed: Feed, *, config: TimingConfig) -> Speed:
    """Time two active runners interleaved (see :func:`harness.runners.timing.interleaved`): device-resident
    (where both have a device call) and end to end, in the same rounds."""
    calls: dict[str, Callable[[], object]] = {
        "low": lambda: low.infer_impl(low_feed),
        "fp32": lambda: fp32.infer_impl(fp32_feed),
    }
    low_bound, fp32_bound = low.device_call(low_feed), fp32.device_call(fp32_feed)
    if low_bound is not None and fp32_bound is not None:
        calls.update({"low_resident": low_bound, "fp32_resident": fp32_bound})
    result = interleaved(calls, config=config)
    low_ms, fp32_ms = result["low"].median_ms, result["fp32"].median_ms
    end_to_end = Speed(
        latency_ms=low_ms,
        fp32_latency_ms=fp32_ms,
        speedup=speedup(fp32_ms, low_ms),
        basis=END_TO_END,
        e2e_latency_ms=low_ms,
        e2e_fp32_latency_ms=fp32_ms,
        e2e_speedup=speedup(fp32_ms, low_ms),
    )
    if "low_resident" not in result:
        return end_to_end
    low_dev, fp32_dev = result["low_resident"].median_ms, result["fp32_resident"].median_ms
    return replace(
        end_to_end,
        latency_ms=low_dev,
        fp32_latency_ms=fp32_dev,
        speedup=speedup(fp32_dev, low_dev),
        basis=DEVICE_RESIDENT,
    )


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


def measure_speed(pair: SpeedPair, *, config: TimingConfig) -> Speed:
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
            return time_pair(low, fp32, low_feed, fp32_feed, config=config)
    except (RunnerError, RunnerUnavailable) as err:
        return Speed(note=f"timing failed on {runner}: {err}")
