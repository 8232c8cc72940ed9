"""One sweep case end to end, as a short sequence of steps (:mod:`harness.pipeline.steps`). No pytest.

convert -> build-check -> find-duplicate -> execute -> judge -> diagnose -> time -> record. Work shared by every
case of a model (its golden, its magnitudes) arrives in a :class:`ModelContext`, built once per process by
:class:`harness.pipeline.session.AccuracySession`. The record's ``status`` is the verdict:

* ``pass`` / ``fail``: the comparison with the golden, on a runner that really rounds fp16/bf16;
* ``skip``: the runner cannot judge the case: ORT's CPU provider computes fp16 in fp32 (the comparison is
  still recorded, with "would pass/fail"), has no bf16 kernels at all, or the runner is unavailable here;
* ``error``: the case could not run (conversion error, runner error).

A failing case is diagnosed (the diagnose step, :func:`harness.diagnose.diagnose_failure`: the cause, and a fix
that was run). Each case's obtained outputs are saved
into the report folder for a later recheck. Each step's seconds go into the record's
:class:`~harness.report.Timings`, which add up to the case's ``total_s``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from harness.core.errors import RunnerError, RunnerUnavailable, UserError
from harness.pipeline.cache import ContentCache
from harness.pipeline.context import CaseSettings, ModelContext, cannot_judge, case_providers, targets_tensorrt
from harness.pipeline.dedup import SameModels
from harness.pipeline.steps.convert import Converted, build_check_step, convert_cached, convert_step
from harness.pipeline.steps.diagnose import diagnose_step, failure_message
from harness.pipeline.steps.duplicate import find_duplicate
from harness.pipeline.steps.execute import execute_step, time_step
from harness.pipeline.steps.record import Progress, case_record, record_step, reused_record, tensorrt_verdict
from harness.pipeline.steps.tuned import Tuned
from harness.pipeline.steps.verdict import judge_step
from harness.report import CaseRecord
from harness.runners.ort import CPU
from harness.sweep import Case

__all__ = [
    "CaseSettings",
    "ModelContext",
    "cannot_judge",
    "convert_cached",
    "failure_message",
    "run_case",
    "run_tuned",
    "targets_tensorrt",
    "tensorrt_verdict",
]


def run_case(
    ctx: ModelContext,
    case: Case,
    *,
    settings: CaseSettings,
    cache: ContentCache,
    first_of_model: bool = False,
    same: SameModels | None = None,
    notes: Sequence[str] = (),
) -> CaseRecord:
    """Run one case; see the module docstring. ``first_of_model`` charges the magnitudes time to it; with
    ``same``, a case whose converted model is identical to an earlier case's reuses that record (not run);
    ``notes`` are display notes for the record (its input plan, golden drift)."""
    progress = Progress(
        ctx=ctx,
        case=case,
        started=time.perf_counter(),
        notes=tuple(notes),
        magnitudes_s=ctx.magnitudes_s if first_of_model else 0.0,
    )
    reason = cannot_judge(case, settings)
    if reason is not None:
        return case_record(progress, status="skip", message=reason, runner=f"ort[{CPU}]")
    providers = case_providers(case, settings)
    label = f"{ctx.spec.name} [{case.id}]"
    try:
        with settings.step(label, "converting"):
            converted = convert_step(ctx, case, cache)
        progress = replace(progress, converted=converted, notes=(*progress.notes, *converted.conversion.notes))
        progress = replace(
            progress, built=build_check_step(ctx, converted, enabled=settings.trt_build_check, cache=cache)
        )
        if same is not None:
            duplicate = find_duplicate(ctx, case, converted, same=same, providers=providers)
            progress = replace(progress, duplicate=duplicate)
            if duplicate.first is not None:
                return tensorrt_verdict(reused_record(progress, duplicate.first, kind=duplicate.kind), case)
        with settings.step(label, f"running on {case.runner}"):
            executed = execute_step(ctx, case, converted, providers=providers, settings=settings)
    except RunnerUnavailable as err:
        return tensorrt_verdict(case_record(progress, status="skip", message=str(err), runner=case.runner), case)
    except (UserError, RunnerError) as err:
        message = f"{ctx.spec.name} [{case.id}] could not run: {err}"
        return case_record(progress, status="error", message=message, runner=case.runner)
    with settings.step(label, "judging"):
        judged = judge_step(ctx, case, executed, policy=settings.tolerances)
    diagnosed = None
    if judged.status == "fail":
        with settings.step(label, "diagnosing (divergence profile, then a verified fix)"):
            diagnosed = diagnose_step(
                ctx,
                case,
                converted,
                executed,
                judged.comparison,
                providers=providers,
                policy=settings.tolerances,
                fixes_dir=settings.fixes_dir,
                settings=settings,
            )
    with settings.step(label, "timing"):
        timed = time_step(ctx, case, converted, settings=settings, providers=providers)
    record = record_step(
        progress, settings=settings, executed=executed, judged=judged, diagnosed=diagnosed, timed=timed
    )
    if same is not None and progress.duplicate is not None:
        same.remember(progress.duplicate.graph, progress.duplicate.plan, record)
    return tensorrt_verdict(record, case)


def run_tuned(ctx: ModelContext, case: Case, tuned: Tuned, *, settings: CaseSettings, started: float) -> CaseRecord:
    """The tuned case (``pytest --tune``): the tune step (:mod:`harness.tune.case`) stands in for convert, and its
    bound gives the verdict; then execute -> judge (the record keeps the harness's per-output statistics) ->
    record, as for any case. ``started``: when the tune step began (its seconds include the model's context, so
    magnitudes collected for it are not counted again)."""
    converted = Converted(conversion=tuned.conversion, cached=False, seconds=0.0)
    progress = Progress(ctx=ctx, case=case, started=started, notes=tuple(tuned.notes), converted=converted)
    executed = execute_step(ctx, case, converted, providers=())
    judged = replace(
        judge_step(ctx, case, executed, policy=settings.tolerances), status=tuned.status, message=tuned.message
    )  # the bound decides, not the tolerances
    return record_step(
        progress, settings=settings, executed=executed, judged=judged, diagnosed=None, timed=None, tuned=tuned
    )
