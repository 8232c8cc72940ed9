"""One sweep case end to end: convert (cached) -> run -> compare -> :class:`CaseRecord`. No pytest here.

Work shared by every case of a model (its golden, its magnitudes) arrives in a :class:`ModelContext`,
built once per process by :class:`harness.run.session.AccuracySession`. The record's ``status`` is the verdict:

* ``pass`` / ``fail``: the comparison with the golden, on a runner that really rounds fp16/bf16;
* ``skip``: the runner cannot judge the case: ORT's CPU provider computes fp16 in fp32 (the comparison is
  still recorded, with "would pass/fail"), has no bf16 kernels at all, or the runner is unavailable here;
* ``error``: the case could not run (conversion error, runner error).

A failing case is diagnosed (:func:`harness.diagnose.diagnose_failure`: the cause, and a fix that was run). Each case's obtained outputs
are saved into the report folder for a later recheck.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

import onnx

from harness.run.build_check import cached_build
from harness.run.cache import ContentCache, content_key
from harness.judge.compare import CompareResult
from harness.judge.paired import judge_outputs
from harness.run.dedup import PLAN_RUNNERS, SameModels, model_digest, plan_digest, reuse
from harness.convert import ConversionResult, Magnitudes, convert
from harness.diagnose import Diagnosis, diagnose_failure
from harness.errors import RunnerError, RunnerUnavailable, UserError
from harness.data.goldens import Golden
from harness.data.feeds import cast_feeds, input_specs
from harness.data.models import ModelSpec
from harness.report import CaseRecord, Timings, output_stats, outputs_relpath, save_outputs
from harness.report.diagnosis import diagnosis_lines
from harness.report.format import fmt_error
from harness.runners import make_runner
from harness.runners.ort import CPU
from harness.runners.ort_cuda import OrtCudaRunner
from harness.runners.timing import Clock, TimingConfig
from harness.run.speed import measure_speed
from harness.sweep import Case
from harness.judge.tolerances import TolerancePolicy


@dataclass(frozen=True)
class ModelContext:
    """What every case of one model shares: the model, its golden and its magnitudes on the golden's feeds."""

    spec: ModelSpec
    model: onnx.ModelProto
    golden: Golden
    golden_path: Path
    golden_file: str             # the golden's copy in the report folder (relative path)
    inputs_id: str
    magnitudes: Magnitudes
    magnitudes_key: str
    magnitudes_s: float          # seconds this process spent collecting them (0.0 on a cache hit)


@dataclass(frozen=True)
class CaseSettings:
    """The run-wide settings a case needs."""

    tolerances: TolerancePolicy = TolerancePolicy()
    ort_providers: tuple[str, ...] = (CPU,)
    report_dir: Path = Path("castguard-report")
    timing: TimingConfig = TimingConfig()
    clock: Clock = time.perf_counter
    trt_build_check: bool = False      # build every converted model with TensorRT (harness.run.build_check)


def targets_tensorrt(case: Case) -> bool:
    """A case whose model is meant for TensorRT (``--target tensorrt``, or the trt runner): a model that does not
    build there fails the case. Elsewhere a failed build is reported, and the accuracy verdict stands."""
    return case.target == "tensorrt" or case.runner == "trt"


def cannot_judge(case: Case, settings: CaseSettings) -> str | None:
    """Why the case's runner cannot run it at all (checked before converting), or None."""
    if case.runner == "ort" and case.precision == "bf16" and settings.ort_providers[0] == CPU:
        return (f"ort[{CPU}] has no bf16 kernels, so a bf16 model cannot run on it; use --runner emulate "
                "(or --runner ort with --ort-providers CUDAExecutionProvider on a GPU)")
    return None


def convert_cached(ctx: ModelContext, case: Case, cache: ContentCache) -> tuple[ConversionResult, float, bool]:
    """The case's conversion (from the cache when nothing changed), seconds spent, and whether it was a hit."""
    options = case.convert_options()
    key = content_key("convert", cache.fingerprint, ctx.spec.sha256, ctx.magnitudes_key, repr(options))
    start = time.perf_counter()
    result, hit = cache.conversion(key, lambda: convert(ctx.model, options=options, magnitudes=ctx.magnitudes,
                                                        base_dir=ctx.spec.path.parent),
                                   weights_dir=ctx.spec.path.parent)
    return result, time.perf_counter() - start, hit


def run_case(ctx: ModelContext, case: Case, *, settings: CaseSettings, cache: ContentCache,
             first_of_model: bool = False, same: SameModels | None = None) -> CaseRecord:
    """Run one case; see the module docstring. ``first_of_model`` charges the magnitudes time to it; with
    ``same``, a case whose converted model is identical to an earlier case's reuses that record (not run)."""
    start = time.perf_counter()
    base = CaseRecord(model=ctx.spec.name, model_sha256=ctx.spec.sha256, case=case, status="error",
                      runner=case.runner, inputs_id=ctx.inputs_id, golden_file=ctx.golden_file)
    mags_s = ctx.magnitudes_s if first_of_model else 0.0
    reason = cannot_judge(case, settings)
    if reason is not None:
        return replace(base, status="skip", message=reason, runner=f"ort[{CPU}]",
                       timings=Timings(magnitudes_s=mags_s, total_s=time.perf_counter() - start))
    try:
        conversion, convert_s, hit = convert_cached(ctx, case, cache)
        base = replace(base, lowp_flop_share=conversion.lowp_flop_share,
                       lowp_share_bound=conversion.lowp_share_bound, cast_count=conversion.cast_count,
                       low_nodes=len(conversion.low_nodes), high_nodes=len(conversion.high_nodes),
                       notes=("conversion from cache",) if hit else ())
        providers = settings.ort_providers if case.runner == "ort" else ()
        if settings.trt_build_check:
            build, why_not = cached_build(conversion.model, model_dir=conversion.base_dir or ctx.spec.path.parent,
                                          feed_shapes=[{k: a.shape for k, a in f.items()} for f in ctx.golden.feeds],
                                          cache=cache)
            base = replace(base, trt_build=build, notes=(*base.notes, why_not) if why_not else base.notes)
        if same is not None:
            where = (ctx.spec.name, ctx.inputs_id, case.runner, *providers, str(conversion.base_dir or ""))
            graph = (*where, model_digest(conversion.model))
            plan = (*where, plan_digest(conversion, precision=case.precision,
                                        fp32_accumulation=case.fp32_accumulation))
            found = same.first(graph, plan, by_plan=case.runner in PLAN_RUNNERS)
            if found is not None:
                return tensorrt_verdict(reuse(found[0], base, how=found[1], convert_s=convert_s,
                                              total_s=time.perf_counter() - start + mags_s), case)
            note = same.plan_note(plan)
            if note is not None:
                base = replace(base, notes=(*base.notes, note))
        runner = make_runner(case.runner, conversion.model, model_dir=conversion.base_dir or ctx.spec.path.parent,
                             providers=providers)
        feeds = cast_feeds(ctx.golden.feeds, input_specs(conversion.model))
        result = runner.run(feeds)
        if isinstance(runner, OrtCudaRunner) and runner.profile_placement(feeds[0]):
            base = replace(base, notes=(*base.notes, runner.fallback_note))
    except RunnerUnavailable as err:
        return tensorrt_verdict(replace(base, status="skip", message=str(err), timings=Timings(
            magnitudes_s=mags_s, total_s=time.perf_counter() - start)), case)
    except (UserError, RunnerError) as err:
        return replace(base, status="error", message=f"{ctx.spec.name} [{case.id}] could not run: {err}",
                       timings=Timings(magnitudes_s=mags_s, total_s=time.perf_counter() - start))
    compare_start = time.perf_counter()
    comparison = judge_outputs(result.outputs, ctx.golden.outputs, precision=case.precision,
                               policy=settings.tolerances)
    compare_s = time.perf_counter() - compare_start
    relpath = outputs_relpath(ctx.spec.name, ctx.inputs_id, case.id)
    save_outputs(settings.report_dir, relpath, result.outputs)
    record = replace(base, runner=result.runner, rounds_low_precision=result.rounds_low_precision,
                     outputs=output_stats(comparison, ctx.golden.outputs), outputs_file=relpath)
    if not result.rounds_low_precision:
        record = replace(record, status="skip", message=(
            f"{result.runner} computes {case.precision} in fp32; not a low-precision oracle - use --runner "
            f"emulate (recorded: {'would pass' if comparison else 'would fail'})"))
    elif comparison:
        record = replace(record, status="pass")
    else:
        diagnosis = diagnose_failure(
            reference=ctx.model, model_path=ctx.spec.path, conversion=conversion, options=case.convert_options(),
            magnitudes=ctx.magnitudes, feeds=ctx.golden.feeds, goldens=ctx.golden.outputs, obtained=result.outputs,
            runner=case.runner, providers=providers, policy=settings.tolerances,
            work_dir=settings.report_dir.resolve() / "diagnose" / Path(relpath).relative_to("outputs").with_suffix(""))
        record = replace(record, status="fail", first_divergent=diagnosis.cause, diagnosis=diagnosis,
                         message=failure_message(ctx, case, comparison, conversion, result.runner, diagnosis))
    speed = measure_speed(case.runner, conversion.model, ctx.model, ctx.golden.feeds, providers=providers,
                          model_dir=ctx.spec.path.parent, config=settings.timing, clock=settings.clock,
                          low_model_dir=conversion.base_dir)
    record = replace(record, latency_ms=speed.latency_ms, fp32_latency_ms=speed.fp32_latency_ms,
                     speedup=speed.speedup, speed_note=speed.note)
    timings = Timings(magnitudes_s=mags_s, convert_s=convert_s, infer_s=result.seconds, compare_s=compare_s,
                      total_s=time.perf_counter() - start + mags_s)
    record = replace(record, timings=timings)
    if same is not None:
        same.remember(graph, plan, record)
    return tensorrt_verdict(record, case)


def tensorrt_verdict(record: CaseRecord, case: Case) -> CaseRecord:
    """A case meant for TensorRT (:func:`targets_tensorrt`) whose model does not build there, or whose types
    TensorRT changed, fails (before its accuracy is looked at: the model cannot be deployed as converted)."""
    build = record.trt_build
    if build is None or build.ok or not targets_tensorrt(case) or record.status not in ("pass", "fail", "skip"):
        return record
    head = f"{record.model} [{case.id}] is converted for TensorRT but {build.summary()}"
    fix = ("  fix: keep the node's op in FP32 (--exclude-ops / castguard convert --op_types_to_exclude), or report "
           "the op to castguard: --target tensorrt should have kept it FP32")
    return replace(record, status="fail", message="\n".join([head, fix] + ([record.message] if record.message else [])))


def failure_message(ctx: ModelContext, case: Case, comparison: CompareResult, conversion: ConversionResult,
                    runner: str, diagnosis: Diagnosis) -> str:
    """What failed, by how much, where it started, and the fix castguard ran (:mod:`harness.report.diagnosis`)."""
    low, high, share = conversion.low_nodes, conversion.high_nodes, conversion.lowp_flop_share
    summary = "\n".join("  " + line for line in comparison.summary().splitlines())
    options = case.convert_options()
    settings = (f"low_precision_type={options.low_precision_type!r}, data_max={options.data_max:g}, "
                f"init_max={options.init_max:g}, op_types_to_exclude={list(options.op_types_to_exclude)}, "
                f"keep_io_types={options.keep_io_types}"
                + (f", node_precisions={dict(options.node_precisions)}" if options.node_precisions else "")
                + (", fp32_accumulation=True" if options.fp32_accumulation else ""))
    worst = max((o for o in comparison.outputs if not o.passed), key=lambda o: o.max_rel, default=None)
    head = f"{ctx.spec.name} [{case.id}] does not match its FP32 golden on {runner}:"
    if worst is not None:
        head += f" output {worst.name!r} max_rel {fmt_error(worst.max_rel)}"
    if diagnosis.cause is not None:
        head += f", diverges first at {diagnosis.cause.tensor!r} ({diagnosis.cause.op})"
    lines = [head, summary,
             f"  golden: {ctx.golden_path}",
             f"  conversion: {settings}; {len(low)} node(s) in {case.precision}, {len(high)} kept in fp32, "
             f"{'<= ' if conversion.lowp_share_bound else ''}{share:.0%} of FLOPs in {case.precision}"]
    return "\n".join([*lines, *diagnosis_lines(diagnosis, precision=case.precision,
                                                node_precisions=options.node_precisions)])
