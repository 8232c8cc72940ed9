"""The diagnose step of a failing case: where it first diverges, and the failure message with its fix.

The content (the divergence search, the message) is :func:`harness.judge.divergence.first_divergence` and
:func:`failure_message`, called here as they are; this module only places them in the pipeline and times them.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from harness.convert import ConversionResult
from harness.judge.compare import CompareResult
from harness.judge.divergence import first_divergence
from harness.judge.tolerances import TolerancePolicy
from harness.report import Divergence
from harness.report.format import fmt_error
from harness.run.context import ModelContext
from harness.run.steps.convert import Converted
from harness.sweep import Case


@dataclass(frozen=True)
class Diagnosed:
    """A failing case's first divergent tensor (None: none beyond tolerance before the outputs) and message."""

    divergence: Divergence | None
    message: str
    seconds: float = 0.0


def diagnose_step(ctx: ModelContext, case: Case, converted: Converted, comparison: CompareResult, *, runner: str,
                  policy: TolerancePolicy) -> Diagnosed:
    start = time.perf_counter()
    conversion = converted.conversion
    divergence = first_divergence(ctx.model, conversion.model, ctx.golden.feeds, precision=case.precision,
                                  policy=policy, model_dir=ctx.spec.path.parent, converted_dir=conversion.base_dir)
    message = failure_message(ctx, case, comparison, conversion, runner, divergence)
    return Diagnosed(divergence=divergence, message=message, seconds=time.perf_counter() - start)


def failure_message(ctx: ModelContext, case: Case, comparison: CompareResult, conversion: ConversionResult,
                    runner: str, divergence: Divergence | None) -> str:
    """What failed, by how much, where it started, and what to do about it."""
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
    if divergence is not None:
        head += f", diverges first at {divergence.tensor!r} ({divergence.op})"
    lines = [head, summary,
             f"  golden: {ctx.golden_path}",
             f"  conversion: {settings}; {len(low)} node(s) in {case.precision}, {len(high)} kept in fp32, "
             f"{share:.0%} of FLOPs in {case.precision}"]
    model_file = ctx.spec.path.name
    if divergence is not None:
        lines.append(f"  first divergent tensor: {divergence.tensor!r} from node {divergence.node!r} "
                     f"({divergence.op}), max_abs {fmt_error(divergence.max_abs)}, "
                     f"max_rel {fmt_error(divergence.max_rel)}")
        exclude = f"--nodes_to_exclude {divergence.node}"
    else:
        lines.append("  first divergent tensor: none beyond tolerance before the outputs")
        exclude = "--nodes_to_exclude NAME"
    if options.node_precisions:
        lines.append(f"  fix: this case forces node precisions ({', '.join(f'{k}:{v}' for k, v in options.node_precisions)}"
                     "); drop or change them (--node-precisions), or keep the nodes that feed the divergent tensor "
                     "in fp32")
    else:
        lines.append(f"  fix: keep the sensitive nodes in fp32 (castguard convert --onnx_path {model_file} {exclude} "
                     "/ --op_types_to_exclude OP, or a lower --data_max), or, if this error is acceptable, loosen "
                     f"[tool.castguard.tolerances] {case.precision}")
    return "\n".join(lines)
