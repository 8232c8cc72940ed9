"""The record step: one :class:`~harness.report.CaseRecord`, assembled once from the steps' results.

Also the TensorRT (deployment) verdict on top of the accuracy one (:func:`tensorrt_verdict`) and the step timings (each step's
own seconds; ``total_s`` is the case's wall time plus its share of the magnitudes).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from harness.pipeline.context import CaseSettings, ModelContext, targets_tensorrt
from harness.pipeline.steps.convert import BuildChecked, Converted
from harness.pipeline.steps.diagnose import Diagnosed
from harness.pipeline.steps.duplicate import Duplicate
from harness.pipeline.steps.execute import Executed, Timed
from harness.pipeline.steps.tuned import Tuned
from harness.pipeline.steps.verdict import Judged
from harness.report import CaseRecord, Timings, output_stats, outputs_relpath, save_outputs
from harness.sweep import Case

NOT_BUILT = BuildChecked()


def tensorrt_verdict(record: CaseRecord, case: Case) -> CaseRecord:
    """A case meant for TensorRT (:func:`targets_tensorrt`) whose model does not build there, or whose types
    TensorRT changed, fails (before its accuracy is looked at: the model cannot be deployed as converted). The
    accuracy record is what :class:`~harness.pipeline.dedup.SameModels` keeps; this is the deployment verdict on it."""
    build = record.trt_build
    if build is None or build.ok or not targets_tensorrt(case) or record.status not in ("pass", "fail", "skip"):
        return record
    head = f"{record.model} [{case.id}] is converted for TensorRT but {build.summary()}"
    fix = (
        "  fix: keep the node's op in FP32 (--exclude-ops / castguard convert --op_types_to_exclude), or report "
        "the op to castguard: --target tensorrt should have kept it FP32"
    )
    return replace(record, status="fail", message="\n".join([head, fix] + ([record.message] if record.message else [])))


@dataclass(frozen=True)
class Progress:
    """What a case has so far: its model context and settings, when it started, its display notes, and the results
    of the steps up to find-duplicate (None/NOT_BUILT until a step has run). The later steps' results are passed to
    the record functions directly."""

    ctx: ModelContext
    case: Case
    started: float
    magnitudes_s: float = 0.0
    notes: tuple[str, ...] = ()
    converted: Converted | None = None
    built: BuildChecked = field(default=NOT_BUILT)
    duplicate: Duplicate | None = None


def case_record(
    progress: Progress,
    *,
    status: str,
    message: str,
    runner: str,
    executed: Executed | None = None,
    judged: Judged | None = None,
    diagnosed: Diagnosed | None = None,
    timed: Timed | None = None,
    tuned: Tuned | None = None,
    outputs_file: str | None = None,
    record_s: float = 0.0,
) -> CaseRecord:
    """The accuracy record of a case that ran (or stopped at some step: the later results are None)."""
    ctx, case, converted, built, duplicate = (
        progress.ctx,
        progress.case,
        progress.converted,
        progress.built,
        progress.duplicate,
    )
    magnitudes_s = progress.magnitudes_s
    conversion = None if converted is None else converted.conversion
    speed = None if timed is None else timed.speed
    timings = Timings(
        magnitudes_s=magnitudes_s,
        convert_s=converted.seconds if converted else 0.0,
        build_check_s=built.seconds,
        dedup_s=duplicate.seconds if duplicate else 0.0,
        setup_s=executed.setup_s if executed else 0.0,
        infer_s=executed.infer_s if executed else 0.0,
        compare_s=judged.seconds if judged else 0.0,
        diagnose_s=diagnosed.seconds if diagnosed else 0.0,
        speed_s=timed.seconds if timed else 0.0,
        record_s=record_s,
        tune_s=tuned.seconds if tuned else 0.0,
        total_s=time.perf_counter() - progress.started + magnitudes_s,
    )
    return CaseRecord(
        model=ctx.spec.name,
        model_sha256=ctx.spec.sha256,
        case=case,
        status=status,
        runner=runner,
        rounds_low_precision=executed.rounds_low_precision if executed else False,
        inputs_id=ctx.inputs_id,
        message=message,
        outputs=output_stats(judged.comparison, ctx.golden.outputs) if judged else (),
        lowp_flop_share=conversion.lowp_flop_share if conversion else None,
        lowp_share_bound=conversion.lowp_share_bound if conversion else None,
        cast_count=conversion.cast_count if conversion else None,
        low_nodes=len(conversion.low_nodes) if conversion else None,
        high_nodes=len(conversion.high_nodes) if conversion else None,
        timings=timings,
        first_divergent=diagnosed.diagnosis.cause if diagnosed else None,
        diagnosis=diagnosed.diagnosis if diagnosed else None,
        outputs_file=outputs_file,
        golden_file=ctx.golden_file,
        notes=progress.notes,
        latency_ms=speed.latency_ms if speed else None,
        fp32_latency_ms=speed.fp32_latency_ms if speed else None,
        speedup=speed.speedup if speed else None,
        speed_note=speed.note if speed else "",
        speed_basis=speed.basis if speed else "",
        e2e_latency_ms=speed.e2e_latency_ms if speed else None,
        e2e_fp32_latency_ms=speed.e2e_fp32_latency_ms if speed else None,
        e2e_speedup=speed.e2e_speedup if speed else None,
        trt_build=built.build,
        conversion_cached=converted.cached if converted else False,
        same_plan_as=duplicate.same_plan_as if duplicate else None,
        converted_digest=duplicate.graph[-1] if duplicate else "",
        cpu_float_nodes=executed.cpu_float_nodes if executed else (),
        trt_build_skipped=built.skipped,
        kept_fp32=tuned.kept_fp32 if tuned else (conversion.cast_held() if conversion else ()),
        fp32_cast_share=conversion.cast_held_share if conversion else None,
        qdq_kept=conversion.qdq_kept() if conversion else (),
        degenerate=ctx.degenerate,
    )


def record_step(
    progress: Progress,
    *,
    settings: CaseSettings,
    executed: Executed,
    judged: Judged,
    diagnosed: Diagnosed | None,
    timed: Timed | None,
    tuned: Tuned | None = None,
) -> CaseRecord:
    """Save the case's outputs into the report folder (for a later recheck) and assemble its record."""
    start = time.perf_counter()
    relpath = outputs_relpath(progress.ctx.spec.name, progress.ctx.inputs_id, progress.case.id)
    save_outputs(settings.report_dir, relpath, executed.outputs)
    message = diagnosed.message if diagnosed else judged.message
    return case_record(
        progress,
        status=judged.status,
        message=message,
        runner=executed.runner,
        executed=executed,
        judged=judged,
        diagnosed=diagnosed,
        timed=timed,
        tuned=tuned,
        outputs_file=relpath,
        record_s=time.perf_counter() - start,
    )


def reused_record(progress: Progress, first: CaseRecord, *, kind: str) -> CaseRecord:
    """This case (converted, build-checked and found a duplicate, not run) completed from the equivalent earlier
    ``first`` record."""
    ctx, case, converted, built, duplicate = (
        progress.ctx,
        progress.case,
        progress.converted,
        progress.built,
        progress.duplicate,
    )
    assert converted is not None and duplicate is not None, "a reused case was converted and matched"
    magnitudes_s = progress.magnitudes_s
    message = first.message
    if message:
        how = "identical precision plan" if kind == "plan" else "identical graph"
        message = (
            f"{ctx.spec.name} [{case.id}] converts to the same model as [{first.case_id}] "
            f"({how}; not run again); its result:\n{message}"
        )
    conversion = converted.conversion
    timings = Timings(
        magnitudes_s=magnitudes_s,
        convert_s=converted.seconds,
        build_check_s=built.seconds,
        dedup_s=duplicate.seconds,
        total_s=time.perf_counter() - progress.started + magnitudes_s,
    )
    return replace(
        first,
        case=case,
        inputs_id=ctx.inputs_id,
        message=message,
        notes=progress.notes,
        lowp_flop_share=conversion.lowp_flop_share,
        lowp_share_bound=conversion.lowp_share_bound,
        cast_count=conversion.cast_count,
        low_nodes=len(conversion.low_nodes),
        high_nodes=len(conversion.high_nodes),
        trt_build=built.build,
        trt_build_skipped=built.skipped,
        conversion_cached=converted.cached,
        reused_from=first.case_id,
        reuse_kind=kind,
        same_plan_as=None,
        converted_digest=duplicate.graph[-1],
        timings=timings,
    )
