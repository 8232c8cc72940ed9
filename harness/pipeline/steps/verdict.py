"""The judge step: the case's outputs against the golden (pure; it runs nothing: :mod:`harness.judge.paired`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from harness.judge.compare import CompareResult
from harness.judge.paired import judge_outputs
from harness.judge.tolerances import TolerancePolicy
from harness.pipeline.context import ModelContext
from harness.pipeline.steps.execute import Executed
from harness.sweep import Case


@dataclass(frozen=True)
class Judged:
    """The comparison and the status it gives: ``pass``/``fail``, or ``skip`` (with why) for a runner that does
    not round to low precision (the comparison is still recorded: "would pass/fail")."""

    comparison: CompareResult
    status: Literal["pass", "fail", "skip"]
    message: str = ""
    seconds: float = 0.0


def judge_step(ctx: ModelContext, case: Case, executed: Executed, *, policy: TolerancePolicy) -> Judged:
    start = time.perf_counter()
    comparison = judge_outputs(executed.outputs, ctx.golden.outputs, precision=case.precision, policy=policy)
    if not executed.rounds_low_precision:
        message = (
            f"{executed.runner} computes {case.precision} in fp32; not a low-precision oracle - use --runner "
            f"emulate (recorded: {'would pass' if comparison else 'would fail'})"
        )
        return Judged(comparison=comparison, status="skip", message=message, seconds=time.perf_counter() - start)
    return Judged(comparison=comparison, status="pass" if comparison else "fail", seconds=time.perf_counter() - start)
