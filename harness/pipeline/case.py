"""One case end to end: a :class:`CaseRun` through a list of steps, then its record. No pytest.

The sweep case is :data:`SWEEP_STEPS`: check-runnable -> convert -> build-check -> find-duplicate -> execute ->
save -> judge -> settle -> diagnose -> time (the save writes the case's outputs on a thread of its own while the
judge runs; settle waits for the write and lets the outputs go, so the diagnosis reads them back from the report
folder if it wants them, and does not hold them while it runs); the tuned case (``pytest --tune``) is
:data:`TUNED_STEPS`, after its tune step (:mod:`harness.pipeline.tuned`) filled :attr:`CaseRun.tuned` and the
converted model: execute -> save -> judge -> settle. Every
step has the shape ``step(run, env) -> run`` (:mod:`harness.pipeline.steps`); :func:`run_steps` runs them until
one stops the case (a user, conversion or runner error, an unavailable runner, a reused result), so a case whose
step failed still reaches :func:`~harness.pipeline.steps.record.record` with where and why it stopped. Work shared
by every case of a model (its golden, its magnitudes) arrives in a :class:`ModelContext`, built once per process by
:class:`harness.pipeline.session.AccuracySession`. The verdict is :func:`harness.pipeline.verdict.decide`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace

from harness.core.errors import RunnerError, RunnerUnavailable, UserError
from harness.pipeline.caserun import CaseEnv, CaseRun, Stop
from harness.pipeline.context import CaseSettings, ModelContext
from harness.pipeline.estimate import Estimate, diagnose_estimate, judge_estimate, time_estimate
from harness.pipeline.plan import LoadedModel
from harness.pipeline.steps.convert import build_check_step, check_runnable, convert_cached, convert_step
from harness.pipeline.steps.diagnose import diagnose_step, failure_message, needs_diagnosis
from harness.pipeline.steps.duplicate import find_duplicate, remember
from harness.pipeline.steps.execute import execute_step, time_step
from harness.pipeline.steps.judge import judge_step
from harness.pipeline.steps.record import record, save_step, settle_save, settle_step
from harness.report import CaseRecord
from harness.runners.registry import runner_traits
from harness.runners.traits import RunnerTraits
from harness.sweep import SweepPoint

__all__ = [
    "SWEEP_STEPS",
    "TUNED_STEPS",
    "CaseSettings",
    "ModelContext",
    "begin",
    "convert_cached",
    "failure_message",
    "finish_case",
    "run_steps",
]

Step = Callable[[CaseRun, CaseEnv], CaseRun]
SWEEP_STEPS: tuple[Step, ...] = (
    check_runnable,
    convert_step,
    build_check_step,
    find_duplicate,
    execute_step,
    save_step,
    judge_step,
    settle_step,
    diagnose_step,
    time_step,
)
TUNED_STEPS: tuple[Step, ...] = (execute_step, save_step, judge_step, settle_step)


def begin(name: str, loaded: LoadedModel, point: SweepPoint, *, settings: CaseSettings) -> CaseRun:
    """A case before any step: its model's facts (``name``, the loaded model's hash, input set and how its inputs
    were made), its sweep point, its runner's traits and providers. A runner whose plugin does not load stops the
    case here (an error, recorded)."""
    run = CaseRun(
        model=name,
        model_sha256=loaded.spec.sha256,
        inputs_id=loaded.recipe.id,
        point=point,
        traits=RunnerTraits(),
        notes=(loaded.inputs_note,),
    )
    try:
        traits = runner_traits(point.runner)
    except UserError as err:
        return replace(run, stop=Stop("error", str(err)))
    providers = settings.ort_providers if traits.takes_providers else ()
    return replace(run, traits=traits, providers=providers)


def run_steps(run: CaseRun, env: CaseEnv, steps: Sequence[Step]) -> CaseRun:
    """Each step in turn until one stops the case; its error becomes the stop (the case is still recorded)."""
    for step in steps:
        if run.stop is not None:
            break
        try:
            _announce(run, env, step)
            with _live(run, env, step):
                run = step(run, env)
        except RunnerUnavailable as err:
            run = replace(run, stop=Stop("unavailable", str(err)))
        except (UserError, RunnerError) as err:
            run = replace(run, stop=Stop("error", f"{run.model} [{run.point.id}] could not run: {err}"))
    return run


def _live(run: CaseRun, env: CaseEnv, step: Step) -> AbstractContextManager[None]:
    """A live line while a long step runs (:meth:`CaseSettings.step`); steps that are always short have none."""
    words: dict[Step, str] = {
        convert_step: "converting",
        execute_step: f"running on {run.point.runner}",
        judge_step: "judging",
        diagnose_step: "diagnosing (divergence profile, then a verified fix)",
        time_step: "timing",
    }
    said = words.get(step) if step is not diagnose_step or needs_diagnosis(run) else None
    return nullcontext() if said is None else env.settings.step(f"{run.model} [{run.point.id}]", said)


def _announce(run: CaseRun, env: CaseEnv, step: Step) -> None:
    """Before a step not bounded by one forward, its estimated cost when it crosses the live line's thresholds
    (:mod:`harness.pipeline.estimate`); a diagnosis only when the case will be diagnosed."""
    live = env.settings.live
    if live is None:
        return
    estimates: dict[Step, Callable[[], Estimate | None]] = {
        judge_step: lambda: judge_estimate(run),
        diagnose_step: lambda: diagnose_estimate(run) if needs_diagnosis(run) else None,
        time_step: lambda: time_estimate(run, config=env.settings.timing),
    }
    found = estimates[step]() if step in estimates else None
    if found is not None:
        label = f"{run.model} [{run.point.id}]"
        live.announce(label, seconds=found.seconds, peak_bytes=found.peak_bytes, text=found.describe())


def finish_case(run: CaseRun, env: CaseEnv, steps: Sequence[Step] = SWEEP_STEPS) -> CaseRecord:
    """Run the steps and record the case; a case that really ran is remembered for later duplicates."""
    done = settle_save(run_steps(run, env, steps))
    result = record(done)
    remember(done, result if done.built.build is None else record(done, deployment=False), env)
    return result
