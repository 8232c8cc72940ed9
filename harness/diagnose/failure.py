"""The diagnosis of one failing case: :func:`diagnose_failure` (see :mod:`harness.diagnose`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import onnx

from harness.convert import ConversionResult, ConvertOptions, Magnitudes
from harness.core.providers import on_host
from harness.data.recipes import Feed
from harness.diagnose.cause import find_cause, fix_region, neighbourhood, range_region
from harness.diagnose.command import (
    convert_command,
    needs_feeds,
    tune_command,
    write_feeds,
)
from harness.diagnose.facts import DEFAULT_BUDGET as DEFAULT_BUDGET  # re-exported
from harness.diagnose.facts import Diagnosis, Divergence
from harness.diagnose.pair import tensor_sizes
from harness.diagnose.profile import ModelPair, Profile, divergence_profile
from harness.diagnose.verify import (
    CaseSetup,
    FixOutcome,
    case_bound,
    failing_evaluation,
    verify_as_is,
    verify_fix,
)
from harness.judge.compare import CompareResult
from harness.judge.tolerances import TolerancePolicy
from harness.runners.options import RunnerOptionsTable
from harness.tune.oracle import Outputs

MAX_CANDIDATES = 16


def cause_of(reference: onnx.ModelProto, profile: Profile) -> Divergence | None:
    index = find_cause(reference.graph, profile)
    if index is None:
        return None
    row = profile.rows[index]
    max_abs, max_rel = profile.stats[row.tensor]
    return Divergence.at(row, max_abs=max_abs, max_rel=max_rel)


def first_divergence(pair: ModelPair) -> Divergence | None:
    """The diagnosed cause alone (see :mod:`harness.diagnose.cause`): a computed tensor whose error reaches a
    failing output, or None."""
    return cause_of(pair.reference, divergence_profile(pair))


@dataclass(frozen=True)
class FailedCase:
    """A failing case as it ran: the FP32 model and its file (the printed commands name it), the conversion with the
    options and magnitudes that made it, the golden's feeds and outputs, the case's own outputs (``obtained``: they
    spare one evaluation), the tolerance policy, and the case's runner as the case ran it."""

    reference: onnx.ModelProto
    model_path: Path
    conversion: ConversionResult
    options: ConvertOptions
    magnitudes: Magnitudes | None
    feeds: Sequence[Feed]
    goldens: Outputs
    obtained: Callable[[], Outputs] | None
    """Reads the case's own outputs, when they are needed (they are not held while the divergence profile runs)."""
    policy: TolerancePolicy
    verdict: CompareResult | None = None
    """The case's verdict on its outputs: the profile's rows of the graph outputs, where it holds them."""
    runner: str = "emulate"
    providers: tuple[str, ...] = ()
    runner_options: RunnerOptionsTable = ()
    runner_timeout: float | None = None
    work_providers: tuple[str, ...] = ()
    """Where the diagnosis's own ORT work runs (:meth:`RunnerTraits.work_providers`; () : the CPU)."""

    @property
    def pair(self) -> ModelPair:
        """The FP32 model and the failing conversion, for the divergence profile."""
        return ModelPair(
            reference=self.reference,
            converted=self.conversion.model,
            feeds=self.feeds,
            precision=self.options.low_precision_type,
            policy=self.policy,
            model_dir=self.model_path.parent,
            converted_dir=self.conversion.base_dir,
            sizes=tensor_sizes(self.magnitudes.shapes, self.feeds) if self.magnitudes is not None else {},
            goldens=self.goldens,
            obtained=self.obtained,
            verdict=self.verdict,
            **({"providers": self.work_providers} if self.work_providers else {}),
        )

    def setup(self) -> CaseSetup:
        """tune's setup that converts this case again and runs it on the case's runner."""
        return CaseSetup(
            model=self.reference,
            options=self.options,
            magnitudes=self.magnitudes,  # type: ignore[arg-type]
            feeds=list(self.feeds),
            goldens=list(self.goldens),
            bound=case_bound(precision=self.options.low_precision_type, policy=self.policy),
            model_dir=self.model_path.parent,
            use_magnitudes=needs_feeds(self.options) and self.magnitudes is not None,
            runner=self.runner,
            providers=self.providers,
            runner_options=self.runner_options,
            runner_timeout=self.runner_timeout,
            on_host=on_host(self.work_providers),
        )


def diagnose_failure(case: FailedCase, *, work_dir: Path, budget: int = DEFAULT_BUDGET) -> Diagnosis:
    """Diagnose a failing case (see :mod:`harness.diagnose`). ``work_dir``: where the fixed model's command writes
    it and the golden's feeds go when a command needs them (created only then)."""
    profile = divergence_profile(case.pair)
    cause = cause_of(case.reference, profile)
    low = set(case.conversion.low_nodes)
    facts = Diagnosis(cause=cause, profile=profile.rows, budget=budget, low_nodes=len(low))
    if not low:
        return facts
    options, fix_ops, outcome = _run_fix(case, profile, cause, budget=budget)
    calibration = None
    if needs_feeds(options) or not outcome.verified:
        calibration = write_feeds(work_dir / "feeds", case.feeds)
    command = tune = ""
    if outcome.verified:
        command = convert_command(
            case.model_path, options, outcome.kept, output_path=work_dir / "fixed.onnx", calibration=calibration
        )
    else:
        tune = tune_command(case.model_path, options, output_path=work_dir / "tuned.onnx", calibration=calibration)
    return replace(
        facts,
        fix_nodes=outcome.kept,
        fix_ops=fix_ops,
        verified=outcome.verified,
        fix_error=outcome.error,
        fix_share=outcome.share,
        evaluations=outcome.evaluations,
        command=command,
        tune_command=tune,
        problem=outcome.problem,
    )


def _run_fix(
    case: FailedCase, profile: Profile, cause: Divergence | None, *, budget: int
) -> tuple[ConvertOptions, tuple[str, ...], FixOutcome]:
    """The fix run on the case's runner: the cause's region kept FP32, then every out-of-range region with it, then
    tune's search over its neighbourhood;
    for a cause node with no name, its op type kept FP32. Returns the fix's options, its op types and outcome."""
    options, precision, graph = case.options, case.options.low_precision_type, case.reference.graph
    low = set(case.conversion.low_nodes)
    region: list[str] = []
    wider: list[str] = []
    more: list[str] = []
    if cause is not None and cause.node:
        region = [n for n in fix_region(graph, profile, cause.node, precision=precision) if n in low]
        wider = [n for n in range_region(graph, profile, precision=precision) if n in low]
        more = [n for n in neighbourhood(graph, profile, cause.node, limit=MAX_CANDIDATES) if n in low]
    outcome = FixOutcome(kept=(), verified=False, error=None, share=None, evaluations=0)
    setup = case.setup()
    if region or more:
        obtained, share = case.obtained, case.conversion.lowp_flop_share
        failing = None if obtained is None else lambda: failing_evaluation(setup, obtained(), share=share)
        outcome = verify_fix(setup, regions=(region, wider), more=more, budget=budget, failing=failing)
    if outcome.verified or cause is None or cause.node or outcome.evaluations >= budget:
        return options, (), outcome
    by_op = replace(options, op_types_to_exclude=(*options.op_types_to_exclude, cause.op))
    tried = verify_as_is(replace(setup, options=by_op))
    spent = outcome.evaluations + tried.evaluations
    if tried.verified:
        return by_op, (cause.op,), replace(tried, evaluations=spent)
    return options, (), replace(outcome, evaluations=spent)
