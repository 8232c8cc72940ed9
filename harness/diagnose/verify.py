"""Apply a fix before printing it: convert the case again with nodes kept FP32, run it on the case's runner
against the same golden, and judge it with the case's tolerance policy.

The measuring and the bounded search are tune's (:class:`harness.tune.oracle.Oracle`,
:func:`harness.tune.search.search`); only the runner differs: tune measures on ``emulate``, a case is judged
on its own runner, so :class:`CaseSetup` runs there. The bound is the case's verdict: the tolerance policy
alone (no max-error bound of its own).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import onnx

from harness.convert import ConversionResult, convert
from harness.core.errors import RunnerError, RunnerUnavailable, UserError
from harness.core.memory import give_back_freed
from harness.core.npzfile import release_pages
from harness.data.feeds import cast_feeds, input_specs
from harness.judge.tolerances import TolerancePolicy
from harness.runners import make_runner
from harness.runners.options import RunnerOptionsTable, options_for
from harness.tune.bound import Bound, measure
from harness.tune.oracle import (
    BudgetExhausted,
    Evaluation,
    Oracle,
    Outputs,
    Setup,
    plan_key,
    plan_options,
)
from harness.tune.search import Unreachable, search


def case_bound(*, precision: str, policy: TolerancePolicy) -> Bound:
    """The case's own verdict as a tune bound: the tolerance policy decides; the max-error bound never binds."""
    return Bound(precision=precision, max_error=sys.float_info.max, use_policy=True, policy=policy)


@dataclass(frozen=True)
class CaseSetup(Setup):
    """tune's :class:`Setup` for one case: converts as the printed ``castguard convert`` does (the case's
    magnitudes, which that command collects again from the golden's feeds, only when ``data_max`` is finite:
    ``use_magnitudes``), and runs on the case's runner and providers."""

    runner: str = "emulate"
    providers: tuple[str, ...] = ()
    runner_options: RunnerOptionsTable = ()  # the case's --runner-option values (all runners')
    runner_timeout: float | None = None
    on_host: bool = True
    """The runner runs in host memory (the CPU): the goldens' file pages are let go before each run."""

    def convert(self, kept: Sequence[str] | frozenset[str]) -> ConversionResult:  # type: ignore[override]
        return convert(
            self.model,
            options=plan_options(self.options, kept),
            magnitudes=self.magnitudes if self.use_magnitudes else None,
            base_dir=self.model_dir,
            shapes=self.magnitudes.shapes if self.magnitudes is not None else None,  # the golden's run's shapes
        )

    def run(self, converted: onnx.ModelProto) -> Outputs:
        feeds = cast_feeds(self.feeds, input_specs(converted))
        if self.on_host:  # a run in host memory: the file-mapped goldens need not be resident
            release_pages(v for outputs in self.goldens for v in outputs.values())
        runner = make_runner(
            self.runner,
            converted,
            model_dir=self.model_dir,
            providers=self.providers,
            options=options_for(self.runner_options, self.runner),
            timeout_s=self.runner_timeout,
        )
        outputs = runner.run(feeds).outputs
        give_back_freed()  # the session's arena, before the goldens are read again to measure
        return outputs


@dataclass(frozen=True)
class FixOutcome:
    """The fix that was run: the kept nodes, whether the case then passes, and what it cost."""

    kept: tuple[str, ...]
    verified: bool
    error: float | None
    share: float | None
    evaluations: int
    problem: str = ""
    """Why an evaluation could not run (a runner or conversion error), when one could not."""


def _found(evaluation: Evaluation, order: Sequence[str], spent: int) -> FixOutcome:
    kept = tuple(n for n in order if n in evaluation.kept)
    worst = max((e for _, e in evaluation.measurement.errors), default=0.0)
    return FixOutcome(
        kept=kept, verified=evaluation.passed, error=worst, share=evaluation.lowp_flop_share, evaluations=spent
    )


def failing_evaluation(setup: CaseSetup, outputs: Outputs, *, share: float) -> Evaluation:
    """The case's own outputs (everything low: nothing kept FP32) as an evaluation of ``setup``, which spares the
    search its first one; ``share``: the conversion's low-precision FLOP share."""
    return Evaluation(kept=frozenset(), measurement=measure(outputs, setup.goldens, setup.bound), lowp_flop_share=share)


def verify_fix(
    setup: CaseSetup,
    *,
    regions: Sequence[Sequence[str]],
    more: Sequence[str],
    budget: int,
    failing: Callable[[], Evaluation] | None = None,
) -> FixOutcome:
    """Try each of ``regions`` kept FP32 in turn, each with the ones before it (1 evaluation each, skipped when it
    adds no node: the cause's region, then every region out of the low type's range); if the case still fails,
    run tune's search over all of them and ``more`` within ``budget`` evaluations in all. ``failing`` (the case's
    own outputs, :func:`failing_evaluation`; called only when the search runs) spares the all-low evaluation the
    search starts with."""
    oracle = Oracle(setup, budget=budget, memo={})
    order = list(dict.fromkeys([*(n for region in regions for n in region), *more]))
    last: Evaluation | None = None
    kept: list[str] = []
    try:
        for region in regions:
            grown = list(dict.fromkeys([*kept, *region]))
            if len(grown) > len(kept):
                kept = grown
                last = oracle.evaluate(kept)
                if last.passed:
                    return _found(last, order, oracle.spent)
        if more:
            if failing is not None:
                oracle.memo[plan_key(())] = failing().to_json()
            result = search(oracle, order, lambda: order)
            return _found(result.best, order, oracle.spent)
    except (BudgetExhausted, Unreachable):
        pass
    except (UserError, RunnerError, RunnerUnavailable) as err:
        if not (isinstance(err, UserError) and oracle.spent >= oracle.budget):  # search's "budget spent" error
            return FixOutcome(
                kept=(), verified=False, error=None, share=None, evaluations=oracle.spent, problem=str(err)
            )  # the fix could not be converted or run
    if last is None:
        return FixOutcome(kept=(), verified=False, error=None, share=None, evaluations=oracle.spent)
    return _found(last, order, oracle.spent)


def verify_as_is(setup: CaseSetup) -> FixOutcome:
    """One evaluation of ``setup``'s own options (a fix by op type, for a cause node with no name)."""
    try:
        evaluation = Oracle(setup, budget=1).evaluate(())
    except (UserError, RunnerError, RunnerUnavailable) as err:
        return FixOutcome(kept=(), verified=False, error=None, share=None, evaluations=1, problem=str(err))
    return _found(evaluation, (), 1)
