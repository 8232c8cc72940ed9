"""The diagnosis of one failing case: :func:`diagnose_failure` (see :mod:`harness.diagnose`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import onnx

from harness.convert import ConversionResult, ConvertOptions, Magnitudes
from harness.data.recipes import Feed
from harness.diagnose.cause import find_cause, fix_region, neighbourhood
from harness.diagnose.command import (
    convert_command,
    needs_feeds,
    tune_command,
    write_feeds,
)
from harness.diagnose.facts import Diagnosis, Divergence
from harness.diagnose.profile import Profile, divergence_profile
from harness.diagnose.verify import (
    CaseSetup,
    FixOutcome,
    case_bound,
    verify_as_is,
    verify_fix,
)
from harness.judge.tolerances import TolerancePolicy
from harness.runners.options import RunnerOptionsTable
from harness.tune.oracle import Outputs

DEFAULT_BUDGET = 8
"""Conversions a diagnosis may run to verify its fix (the region, then tune's search)."""
MAX_CANDIDATES = 16


def cause_of(reference: onnx.ModelProto, profile: Profile) -> Divergence | None:
    index = find_cause(reference.graph, profile)
    if index is None:
        return None
    row = profile.rows[index]
    max_abs, max_rel = profile.stats[row.tensor]
    return Divergence(
        tensor=row.tensor,
        node=row.node,
        op=row.op,
        max_abs=max_abs,
        max_rel=max_rel,
        differing=row.differing,
        elements=row.elements,
        port=row.port,
    )


def first_divergence(
    reference: onnx.ModelProto,
    converted: onnx.ModelProto,
    feeds: Sequence[Feed],
    *,
    precision: str,
    policy: TolerancePolicy,
    model_dir: Path | None = None,
    converted_dir: Path | None = None,
) -> Divergence | None:
    """The diagnosed cause alone (see :mod:`harness.diagnose.cause`): a computed tensor whose error reaches a
    failing output, or None."""
    profile = divergence_profile(
        reference,
        converted,
        feeds,
        precision=precision,
        policy=policy,
        model_dir=model_dir,
        converted_dir=converted_dir,
    )
    return cause_of(reference, profile)


def diagnose_failure(
    *,
    reference: onnx.ModelProto,
    model_path: Path,
    conversion: ConversionResult,
    options: ConvertOptions,
    magnitudes: Magnitudes | None,
    feeds: Sequence[Feed],
    goldens: Outputs,
    obtained: Outputs | None,
    runner: str,
    providers: Sequence[str] = (),
    policy: TolerancePolicy,
    work_dir: Path,
    budget: int = DEFAULT_BUDGET,
    runner_options: RunnerOptionsTable = (),
    runner_timeout: float | None = None,
) -> Diagnosis:
    """Diagnose a failing case (see :mod:`harness.diagnose`). ``obtained``: the case's outputs (they spare one
    evaluation); ``runner``/``providers``/``runner_options``/``runner_timeout``: the case's runner, as the case ran
    it; ``work_dir``: where the fixed model's command writes it and the golden's feeds go when a command needs
    them (created only then)."""
    precision = options.low_precision_type
    profile = divergence_profile(
        reference,
        conversion.model,
        feeds,
        precision=precision,
        policy=policy,
        model_dir=model_path.parent,
        converted_dir=conversion.base_dir,
    )
    cause = cause_of(reference, profile)
    low = set(conversion.low_nodes)
    facts = Diagnosis(cause=cause, profile=profile.rows, budget=budget, low_nodes=len(low))
    if not low:
        return facts
    region: list[str] = []
    more: list[str] = []
    if cause is not None and cause.node:
        region = [n for n in fix_region(reference.graph, profile, cause.node, precision=precision) if n in low]
        more = [n for n in neighbourhood(reference.graph, profile, cause.node, limit=MAX_CANDIDATES) if n in low]
    outcome = FixOutcome(kept=(), verified=False, error=None, share=None, evaluations=0)
    setup = CaseSetup(
        model=reference,
        options=options,
        magnitudes=magnitudes,  # type: ignore[arg-type]
        feeds=list(feeds),
        goldens=list(goldens),
        bound=case_bound(precision=precision, policy=policy),
        model_dir=model_path.parent,
        use_magnitudes=needs_feeds(options) and magnitudes is not None,
        runner=runner,
        providers=tuple(providers),
        runner_options=runner_options,
        runner_timeout=runner_timeout,
    )
    if region or more:
        outcome = verify_fix(
            setup, region=region, more=more, budget=budget, failing=obtained, failing_share=conversion.lowp_flop_share
        )
    fix_ops: tuple[str, ...] = ()
    if not outcome.verified and cause is not None and not cause.node and outcome.evaluations < budget:
        by_op = replace(options, op_types_to_exclude=(*options.op_types_to_exclude, cause.op))
        tried = verify_as_is(replace(setup, options=by_op))
        spent = outcome.evaluations + tried.evaluations
        if tried.verified:
            options, fix_ops, outcome = by_op, (cause.op,), replace(tried, evaluations=spent)
        else:
            outcome = replace(outcome, evaluations=spent)
    calibration = None
    if needs_feeds(options) or not outcome.verified:
        calibration = write_feeds(work_dir / "feeds", feeds)
    command = tune = ""
    if outcome.verified:
        command = convert_command(
            model_path, options, outcome.kept, output_path=work_dir / "fixed.onnx", calibration=calibration
        )
    else:
        tune = tune_command(model_path, options, output_path=work_dir / "tuned.onnx", calibration=calibration)
    return Diagnosis(
        cause=cause,
        profile=profile.rows,
        fix_nodes=outcome.kept,
        fix_ops=fix_ops,
        verified=outcome.verified,
        fix_error=outcome.error,
        fix_share=outcome.share,
        evaluations=outcome.evaluations,
        budget=budget,
        command=command,
        tune_command=tune,
        low_nodes=len(low),
        problem=outcome.problem,
    )
