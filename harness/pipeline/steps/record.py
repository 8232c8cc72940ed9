"""The save step and :func:`record`: the one place a :class:`~harness.report.CaseRecord` is built.

:func:`record` reads a finished :class:`~harness.pipeline.caserun.CaseRun` (whatever step it stopped at) and its
verdict (:func:`harness.pipeline.verdict.decide`); a reused case takes the facts of the run it reuses (its
outputs, speed, diagnosis) and its own conversion and timings. The step timings are each step's own seconds;
``total_s`` is the case's wall time plus its share of the magnitudes.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from harness.core.background import write_later
from harness.core.errors import UserError
from harness.pipeline.caserun import CaseEnv, CaseRun, Saved, Stop
from harness.pipeline.verdict import decide
from harness.report import CaseRecord, Timings, output_stats, outputs_relpath, save_outputs


def save_step(run: CaseRun, env: CaseEnv) -> CaseRun:
    """Start saving the case's outputs into the report folder (for a later recheck, and for the diagnosis, which
    reads them back), on a thread of their own while the judge runs (:mod:`harness.core.background`);
    :func:`settle_step` waits for it."""
    assert run.executed is not None, "save follows execute"
    start = time.perf_counter()
    relpath = outputs_relpath(run.context.spec.name, run.context.inputs_id, run.point.id)
    outputs, folder = run.executed.outputs, env.settings.report_dir
    pending = write_later(lambda: save_outputs(folder, relpath, outputs), name=relpath)
    return replace(run, saved=Saved(outputs_file=relpath, seconds=time.perf_counter() - start, pending=pending))


def settle_step(run: CaseRun, env: CaseEnv) -> CaseRun:
    """Once the judge has read them, wait for the case's outputs to be written and let them go: from here on the
    case holds none (a decoder's logits are the largest arrays of a case; the diagnosis reads them back if it
    needs them). A failed write (a full disk) raises its error, which stops the case as a failed step does."""
    settled = _written(run)
    executed = settled.executed
    return replace(settled, executed=replace(executed, outputs=[])) if executed is not None else settled


def settle_save(run: CaseRun) -> CaseRun:
    """:func:`settle_step` for a case that a step stopped before it (:func:`harness.pipeline.case.finish_case`):
    a write that failed stops the case with its error, unless a step stopped it first."""
    try:
        return _written(run)
    except (UserError, OSError) as err:
        saved = replace(run.saved, pending=None) if run.saved is not None else None
        return replace(
            run, saved=saved, stop=run.stop or Stop("error", f"{run.model} [{run.point.id}] could not run: {err}")
        )


def _written(run: CaseRun) -> CaseRun:
    """The case once its outputs' write is done (the wait counts in the save's seconds); the write's error raised."""
    saved = run.saved
    if saved is None or saved.pending is None:
        return run
    start = time.perf_counter()
    saved.pending.wait()
    return replace(run, saved=replace(saved, pending=None, seconds=saved.seconds + time.perf_counter() - start))


def record(run: CaseRun, *, deployment: bool = True) -> CaseRecord:
    """The case's record: its verdict and every fact its steps left (see the module docstring);
    ``deployment=False``: with the accuracy verdict alone (:func:`harness.pipeline.verdict.decide`)."""
    timings = _timings(run)  # the case's time ends here: assembling its record is not one of its steps
    verdict = decide(run, deployment=deployment)
    first = run.duplicate.first if run.duplicate is not None else None
    facts = (
        _reused(first, run) if first is not None and run.stop is not None and run.stop.kind == "reused" else _ran(run)
    )
    return CaseRecord(
        model=run.model,
        model_sha256=run.model_sha256,
        case=run.point,
        status=verdict.status,
        message=verdict.message,
        inputs_id=run.inputs_id,
        notes=run.notes,
        golden_file=run.ctx.golden_file if run.ctx is not None else None,
        timings=timings,
        stopped="" if run.stop is None else run.stop.kind,
        degenerate=run.ctx.degenerate if run.ctx is not None else (),
        converted_digest=run.duplicate.graph[-1] if run.duplicate is not None else "",
        **_conversion(run),
        **facts,
    )


def _ran(run: CaseRun) -> dict[str, Any]:
    executed, judged, diagnosed, timed = run.executed, run.judged, run.diagnosed, run.timed
    conversion = run.converted.conversion if run.converted is not None else None
    speed = timed.speed if timed is not None else None
    return {
        "runner": executed.runner if executed else _runner(run),
        "rounds_low_precision": executed.rounds_low_precision if executed else False,
        "cpu_float_nodes": executed.cpu_float_nodes if executed else (),
        "outputs": output_stats(judged.comparison, run.context.golden.outputs) if judged else (),
        "first_divergent": diagnosed.diagnosis.cause if diagnosed and diagnosed.diagnosis else None,
        "diagnosis": diagnosed.diagnosis if diagnosed else None,
        "outputs_file": run.saved.outputs_file if run.saved else None,
        "latency_ms": speed.latency_ms if speed else None,
        "fp32_latency_ms": speed.fp32_latency_ms if speed else None,
        "speedup": speed.speedup if speed else None,
        "speed_note": speed.note if speed else "",
        "speed_basis": speed.basis if speed else "",
        "e2e_latency_ms": speed.e2e_latency_ms if speed else None,
        "e2e_fp32_latency_ms": speed.e2e_fp32_latency_ms if speed else None,
        "e2e_speedup": speed.e2e_speedup if speed else None,
        "kept_fp32": run.tuned.kept_fp32 if run.tuned else (conversion.cast_held() if conversion else ()),
        "moved_fp32": run.tuned.moved if run.tuned else (),
        "same_plan_as": run.duplicate.same_plan_as if run.duplicate else None,
    }


def _runner(run: CaseRun) -> str:
    """Who would have run a case that stopped before its runner did (a runner that takes providers names them)."""
    if run.stop is not None and run.stop.kind == "cannot_run" and run.providers:
        return f"{run.point.runner}[{run.providers[0]}]"
    return run.point.runner


def _reused(first: CaseRecord, run: CaseRun) -> dict[str, Any]:
    """What a reused case takes from the record it reuses."""
    fields = (
        *("runner", "rounds_low_precision", "cpu_float_nodes", "outputs", "first_divergent", "diagnosis"),
        *("outputs_file", "latency_ms", "fp32_latency_ms", "speedup", "speed_note", "kept_fp32"),
        *("speed_basis", "e2e_latency_ms", "e2e_fp32_latency_ms", "e2e_speedup"),
    )
    return {
        **{name: getattr(first, name) for name in fields},
        "same_plan_as": None,
        "reused_from": first.case_id,
        "reuse_kind": run.duplicate.kind if run.duplicate is not None else "graph",
    }


def _conversion(run: CaseRun) -> dict[str, Any]:
    converted = run.converted
    conversion = converted.conversion if converted is not None else None
    return {
        "lowp_flop_share": conversion.lowp_flop_share if conversion else None,
        "lowp_share_bound": conversion.lowp_share_bound if conversion else None,
        "cast_count": conversion.cast_count if conversion else None,
        "low_nodes": len(conversion.low_nodes) if conversion else None,
        "high_nodes": len(conversion.high_nodes) if conversion else None,
        "conversion_cached": converted.cached if converted else False,
        "trt_build": run.built.build,
        "trt_build_skipped": run.built.skipped,
        "fp32_cast_share": conversion.cast_held_share if conversion else None,
        "qdq_kept": conversion.qdq_kept() if conversion else (),
    }


def _timings(run: CaseRun) -> Timings:
    return Timings(
        magnitudes_s=run.magnitudes_s,
        convert_s=run.converted.seconds if run.converted else 0.0,
        build_check_s=run.built.seconds,
        dedup_s=run.duplicate.seconds if run.duplicate else 0.0,
        setup_s=run.executed.setup_s if run.executed else 0.0,
        infer_s=run.executed.infer_s if run.executed else 0.0,
        compare_s=run.judged.seconds if run.judged else 0.0,
        diagnose_s=run.diagnosed.seconds if run.diagnosed else 0.0,
        speed_s=run.timed.seconds if run.timed else 0.0,
        record_s=run.saved.seconds if run.saved else 0.0,
        tune_s=run.tuned.seconds if run.tuned else 0.0,
        total_s=time.perf_counter() - run.started + run.magnitudes_s,
    )
