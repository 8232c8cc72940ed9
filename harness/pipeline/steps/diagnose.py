"""The diagnose step of a failing case: why it fails, a fix that was run, and the failure message.

The content is :func:`harness.diagnose.diagnose_failure` (the cause that reaches the output, the verified fix, the
commands); this module places it in the pipeline, times it, and words the message (:func:`failure_message`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from harness.pipeline.caserun import CaseEnv, CaseRun, Diagnosed
from harness.report import load_outputs, outputs_relpath
from harness.report.format import fmt_error

if TYPE_CHECKING:  # the diagnosis is imported by the cases that fail: a passing run never loads it
    from harness.diagnose import Diagnosis
    from harness.tune.oracle import Outputs

NO_DIAGNOSE = "--no-diagnose ([tool.castguard] diagnose = false)"


def needs_diagnosis(run: CaseRun) -> bool:
    """A case whose comparison failed on a runner that rounds (the only cases diagnosed)."""
    executed, judged = run.executed, run.judged
    return executed is not None and judged is not None and executed.rounds_low_precision and not judged.comparison


def diagnose_step(run: CaseRun, env: CaseEnv) -> CaseRun:
    """Diagnose a case whose comparison failed on a runner that rounds (others are not diagnosed)."""
    if not needs_diagnosis(run):
        return run
    if not env.settings.diagnose:
        assert run.judged is not None, "needs_diagnosis: judged"
        skipped = run.judged.comparison.summary() + f"\n  not diagnosed: {NO_DIAGNOSE} skipped the diagnosis"
        return replace(run, diagnosed=Diagnosed(diagnosis=None, message=skipped))
    start = time.perf_counter()
    diagnosis = _diagnose(run, env)
    message = failure_message(run, diagnosis)
    return replace(run, diagnosed=Diagnosed(diagnosis=diagnosis, message=message, seconds=time.perf_counter() - start))


def _diagnose(run: CaseRun, env: CaseEnv) -> Diagnosis:
    """castguard's own conversion: the cause and a fix run on the case's runner; another converter's output:
    :func:`_diagnose_foreign`."""
    from harness.diagnose import FailedCase, diagnose_failure

    assert run.executed is not None and run.converted is not None, "a diagnosed case was converted and executed"
    ctx, case, conversion = run.context, run.point, run.converted.conversion
    if not case.builtin_converter:
        return _diagnose_foreign(run, env)
    failed = FailedCase(
        reference=ctx.model,
        model_path=ctx.spec.path,
        conversion=conversion,
        options=case.convert_options(),
        magnitudes=ctx.magnitudes,
        feeds=ctx.golden.feeds,
        goldens=ctx.golden.outputs,
        obtained=_obtained(run, env),
        policy=env.settings.tolerances,
        verdict=run.judged.comparison if run.judged is not None else None,
        runner=case.runner,
        providers=tuple(run.providers),
        runner_options=env.settings.runner_options,
        runner_timeout=env.settings.runner_timeout,
        work_providers=run.traits.work_providers(run.providers),
    )
    relpath = outputs_relpath(ctx.spec.name, ctx.inputs_id, case.id)
    return diagnose_failure(
        failed, work_dir=env.settings.fixes_dir.resolve() / Path(relpath).relative_to("outputs").with_suffix("")
    )


def _diagnose_foreign(run: CaseRun, env: CaseEnv) -> Diagnosis:
    """Another converter's output: the search only, said what it could not follow."""
    from harness.diagnose import ModelPair
    from harness.diagnose.foreign import diagnose_foreign

    assert run.converted is not None, "a diagnosed case was converted"
    ctx, conversion = run.context, run.converted.conversion
    pair = ModelPair(
        reference=ctx.model,
        converted=conversion.model,
        feeds=ctx.golden.feeds,
        precision=run.point.precision,
        policy=env.settings.tolerances,
        model_dir=ctx.spec.path.parent,
        converted_dir=conversion.base_dir,
    )
    return diagnose_foreign(pair, converter=run.point.converter)


def _obtained(run: CaseRun, env: CaseEnv) -> Callable[[], Outputs] | None:
    """The case's own outputs, when the diagnosis wants them: still in the case (not saved yet), or read back from
    the report folder once written (:func:`harness.pipeline.steps.record.settle_step` let them go)."""
    executed, saved = run.executed, run.saved
    if executed is not None and executed.outputs:
        outputs = executed.outputs
        return lambda: outputs
    if saved is not None:

        def read_back() -> Outputs:
            if saved.pending is not None:
                saved.pending.wait()  # a failed write raises here (once): the case stops with it
            return load_outputs(env.settings.report_dir, saved.outputs_file)

        return read_back
    return None


def failure_message(run: CaseRun, diagnosis: Diagnosis) -> str:
    """What failed, by how much, where it started, and the fix castguard ran (:mod:`harness.report.diagnosis`)."""
    from harness.report.diagnosis import diagnosis_lines

    executed, judged, converted = run.executed, run.judged, run.converted
    assert executed is not None and judged is not None and converted is not None, "a failing case was judged"
    ctx, case, comparison, conversion = run.context, run.point, judged.comparison, converted.conversion
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
    if not case.builtin_converter:
        taken = ", ".join(case.applied_settings()) or "no sweep setting"
        settings = f"converter {case.converter} ({taken})" + (f": {case.candidate}" if case.candidate else "")
    worst = max((o for o in comparison.outputs if not o.passed), key=lambda o: o.max_rel, default=None)
    head = f"{ctx.spec.name} [{case.id}] does not match its FP32 golden on {executed.runner}:"
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
