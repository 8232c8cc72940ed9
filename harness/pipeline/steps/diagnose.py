"""The diagnose step of a failing case: why it fails, a fix that was run, and the failure message.

The content is :func:`harness.diagnose.diagnose_failure` (the cause that reaches the output, the verified fix, the
commands); this module places it in the pipeline, times it, and words the message (:func:`failure_message`).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from harness.convert import ConversionResult
from harness.diagnose import Diagnosis, diagnose_failure
from harness.diagnose.foreign import diagnose_foreign
from harness.judge.compare import CompareResult
from harness.pipeline.caserun import CaseEnv, CaseRun, Diagnosed
from harness.pipeline.context import ModelContext
from harness.report import outputs_relpath
from harness.report.diagnosis import diagnosis_lines
from harness.report.format import fmt_error
from harness.sweep import SweepPoint


def needs_diagnosis(run: CaseRun) -> bool:
    """A case whose comparison failed on a runner that rounds (the only cases diagnosed)."""
    executed, judged = run.executed, run.judged
    return executed is not None and judged is not None and executed.rounds_low_precision and not judged.comparison


def diagnose_step(run: CaseRun, env: CaseEnv) -> CaseRun:
    """Diagnose a case whose comparison failed on a runner that rounds (others are not diagnosed)."""
    executed, judged, converted = run.executed, run.judged, run.converted
    if (
        executed is None
        or judged is None
        or converted is None
        or judged.comparison
        or not executed.rounds_low_precision
    ):
        return run
    start = time.perf_counter()
    ctx, case, conversion = run.context, run.point, converted.conversion
    relpath = outputs_relpath(ctx.spec.name, ctx.inputs_id, case.id)
    if case.converter != "castguard":  # another converter's output: the search only, said what it could not follow
        diagnosis = diagnose_foreign(
            reference=ctx.model,
            converted=conversion.model,
            feeds=ctx.golden.feeds,
            precision=case.precision,
            policy=env.settings.tolerances,
            model_dir=ctx.spec.path.parent,
            converted_dir=conversion.base_dir,
            converter=case.converter,
        )
        message = failure_message(ctx, case, judged.comparison, conversion, executed.runner, diagnosis)
        return replace(
            run, diagnosed=Diagnosed(diagnosis=diagnosis, message=message, seconds=time.perf_counter() - start)
        )
    diagnosis = diagnose_failure(
        reference=ctx.model,
        model_path=ctx.spec.path,
        conversion=converted.conversion,
        options=case.convert_options(),
        magnitudes=ctx.magnitudes,
        feeds=ctx.golden.feeds,
        goldens=ctx.golden.outputs,
        obtained=executed.outputs,
        runner=case.runner,
        providers=run.providers,
        policy=env.settings.tolerances,
        work_dir=env.settings.fixes_dir.resolve() / Path(relpath).relative_to("outputs").with_suffix(""),
        runner_options=env.settings.runner_options,
        runner_timeout=env.settings.runner_timeout,
    )
    message = failure_message(ctx, case, judged.comparison, converted.conversion, executed.runner, diagnosis)
    diagnosed = Diagnosed(diagnosis=diagnosis, message=message, seconds=time.perf_counter() - start)
    return replace(run, diagnosed=diagnosed)


def failure_message(
    ctx: ModelContext,
    case: SweepPoint,
    comparison: CompareResult,
    conversion: ConversionResult,
    runner: str,
    diagnosis: Diagnosis,
) -> str:
    """What failed, by how much, where it started, and the fix castguard ran (:mod:`harness.report.diagnosis`)."""
    low, high, share = conversion.low_nodes, conversion.high_nodes, conversion.lowp_flop_share
    summary = "\n".join("  " + line for line in comparison.summary().splitlines())
    options = case.convert_options()
    settings = (
        f"low_precision_type={options.low_precision_type!r}, data_max={options.data_max:g}, "
        f"init_max={options.init_max:g}, op_types_to_exclude={list(options.op_types_to_exclude)}, "
        f"keep_io_types={options.keep_io_types}"
        + (f", node_precisions={dict(options.node_precisions)}" if options.node_precisions else "")
        + (", fp32_accumulation=True" if options.fp32_accumulation else "")
        + (", respect_fp32_casts=False" if not options.respect_fp32_casts else "")
    )
    if case.converter != "castguard":
        taken = ", ".join(case.applied_settings()) or "no sweep setting"
        settings = f"converter {case.converter} ({taken})" + (f": {case.candidate}" if case.candidate else "")
    worst = max((o for o in comparison.outputs if not o.passed), key=lambda o: o.max_rel, default=None)
    head = f"{ctx.spec.name} [{case.id}] does not match its FP32 golden on {runner}:"
    if worst is not None:
        head += f" output {worst.name!r} max_rel {fmt_error(worst.max_rel)}"
    if diagnosis.cause is not None:
        head += f", diverges first at {diagnosis.cause.tensor!r} ({diagnosis.cause.op})"
    lines = [
        head,
        summary,
        f"  golden: {ctx.golden_path}",
        f"  conversion: {settings}; {len(low)} node(s) in {case.precision}, {len(high)} kept in fp32, "
        f"{'<= ' if conversion.lowp_share_bound else ''}{share:.0%} of FLOPs in {case.precision}",
    ]
    return "\n".join(
        [*lines, *diagnosis_lines(diagnosis, precision=case.precision, node_precisions=options.node_precisions)]
    )
