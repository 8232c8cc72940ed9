"""The execute and time steps: the converted model on the case's runner, and its measured speed (runners whose
traits claim one).

A runner is third-party code: whatever it raises, or outputs that are not numeric arrays, is that case's
:class:`~harness.core.errors.RunnerError` naming the runner (the run goes on and the case is recorded)."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from harness.core.errors import HarnessError, RunnerError
from harness.core.memory import give_back_freed
from harness.core.providers import on_host
from harness.data.feeds import Feed, cast_feeds, input_specs
from harness.pipeline.caserun import CaseEnv, CaseRun, Executed, Timed
from harness.pipeline.speed import SpeedPair, measure_speed
from harness.runners import make_runner
from harness.runners.base import Runner, RunResult
from harness.runners.options import options_for

NOT_NUMERIC = "OSUM"  # object, bytes, str, datetime (bfloat16 is a void-kind ml_dtypes type, and numeric)


def execute_step(run: CaseRun, env: CaseEnv) -> CaseRun:
    """Run the converted model (raises RunnerUnavailable, RunnerError or UserError, as the runner does); a runner
    plugin runs in a child with the settings' time-out, and a hang or crash there is a RunnerError."""
    assert run.converted is not None, "execute follows convert"
    start = time.perf_counter()
    model = run.converted.conversion.model
    runner = make_runner(
        run.point.runner,
        model,
        model_dir=run.converted.model_dir(run.context),
        providers=run.providers,
        options=options_for(env.settings.runner_options, run.point.runner),
        timeout_s=env.settings.runner_timeout,
    )
    feeds = cast_feeds(run.context.golden.feeds, input_specs(model))
    if on_host(run.traits.work_providers(run.providers)):  # a run in host memory: the golden's file-mapped
        run.context.golden.release()  # outputs need not be resident while it runs
    result = guarded_run(runner, feeds, name=run.point.runner)
    give_back_freed()  # the session's arena, before the judge reads the golden
    floats = tuple(runner.profile_placement(feeds[0])) if run.traits.reports_cpu_placement else ()
    executed = Executed(
        outputs=result.outputs,
        runner=result.runner,
        rounds_low_precision=result.rounds_low_precision,
        cpu_float_nodes=floats,
        setup_s=time.perf_counter() - start - result.seconds,
        infer_s=result.seconds,
    )
    return replace(run, executed=executed)


def guarded_run(runner: Runner, feeds: list[Feed], *, name: str) -> RunResult:
    """``runner.run(feeds)``; anything but castguard's own errors becomes a RunnerError naming the runner, and so
    does an output that is not a numeric array (an object array cannot be compared)."""
    try:
        result = runner.run(feeds)
    except HarnessError:
        raise
    except Exception as err:  # noqa: BLE001 - a runner's own failure is its case's error, with its words
        raise RunnerError(f"runner {name} raised {type(err).__name__}: {err}") from err
    for feed in result.outputs:
        for output, value in feed.items():
            if not isinstance(value, np.ndarray) or value.dtype.kind in NOT_NUMERIC:
                kind = type(value).__name__ if not isinstance(value, np.ndarray) else f"array of {value.dtype}"
                raise RunnerError(
                    f"runner {name} returned {kind} for output {output!r}; a runner returns numeric numpy arrays"
                )
    return result


def time_step(run: CaseRun, env: CaseEnv) -> CaseRun:
    assert run.converted is not None, "time follows convert"
    start = time.perf_counter()
    pair = SpeedPair(
        runner=run.point.runner,
        low_model=run.converted.conversion.model,
        fp32_model=run.context.model,
        feeds=run.context.golden.feeds,
        providers=run.providers,
        model_dir=run.context.spec.path.parent,
        low_model_dir=run.converted.conversion.base_dir,
    )
    speed = measure_speed(pair, config=env.settings.timing)
    return replace(run, timed=Timed(speed=speed, seconds=time.perf_counter() - start))
