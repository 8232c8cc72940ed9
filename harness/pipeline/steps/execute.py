"""The execute and time steps: the converted model on the case's runner, and its measured speed (GPU runners)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from harness.data.feeds import Feed, cast_feeds, input_specs
from harness.pipeline.context import CaseSettings, ModelContext
from harness.pipeline.speed import Speed, measure_speed
from harness.pipeline.steps.convert import Converted
from harness.runners import make_runner
from harness.runners.options import options_for
from harness.runners.ort_cuda import OrtCudaRunner
from harness.sweep import Case


@dataclass(frozen=True)
class Executed:
    """The converted model's outputs on the golden's feeds, who produced them, and where the time went:
    ``setup_s`` (the runner's session and the feeds) and ``infer_s`` (inference)."""

    outputs: list[Feed]
    runner: str
    rounds_low_precision: bool
    cpu_float_nodes: tuple[str, ...] = ()  # ort-cuda: float nodes its CUDA EP left to the CPU EP
    setup_s: float = 0.0
    infer_s: float = 0.0


def execute_step(
    ctx: ModelContext,
    case: Case,
    converted: Converted,
    *,
    providers: tuple[str, ...],
    settings: CaseSettings = CaseSettings(),
) -> Executed:
    """Run the converted model (raises RunnerUnavailable, RunnerError or UserError, as the runner does); a runner
    plugin runs in a child with the settings' time-out, and a hang or crash there is a RunnerError."""
    start = time.perf_counter()
    model = converted.conversion.model
    runner = make_runner(
        case.runner,
        model,
        model_dir=converted.model_dir(ctx),
        providers=providers,
        options=options_for(settings.runner_options, case.runner),
        timeout_s=settings.runner_timeout,
    )
    feeds = cast_feeds(ctx.golden.feeds, input_specs(model))
    result = runner.run(feeds)
    floats = tuple(runner.profile_placement(feeds[0])) if isinstance(runner, OrtCudaRunner) else ()
    return Executed(
        outputs=result.outputs,
        runner=result.runner,
        rounds_low_precision=result.rounds_low_precision,
        cpu_float_nodes=floats,
        setup_s=time.perf_counter() - start - result.seconds,
        infer_s=result.seconds,
    )


@dataclass(frozen=True)
class Timed:
    """The case's measured speed (or why none is claimed) and the seconds spent measuring."""

    speed: Speed
    seconds: float = 0.0


def time_step(
    ctx: ModelContext, case: Case, converted: Converted, *, settings: CaseSettings, providers: tuple[str, ...]
) -> Timed:
    start = time.perf_counter()
    speed = measure_speed(
        case.runner,
        converted.conversion.model,
        ctx.model,
        ctx.golden.feeds,
        providers=providers,
        model_dir=ctx.spec.path.parent,
        config=settings.timing,
        clock=settings.clock,
        low_model_dir=converted.conversion.base_dir,
    )
    return Timed(speed=speed, seconds=time.perf_counter() - start)
