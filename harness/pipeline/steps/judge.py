"""The judge step: the case's outputs against the golden (pure; it runs nothing: :mod:`harness.judge.paired`).

The comparison only; the status it gives is :func:`harness.pipeline.verdict.decide`'s."""

from __future__ import annotations

import time
from dataclasses import replace

from harness.judge.paired import judge_outputs
from harness.pipeline.caserun import CaseEnv, CaseRun, Judged


def judge_step(run: CaseRun, env: CaseEnv) -> CaseRun:
    assert run.executed is not None, "judge follows execute"
    start = time.perf_counter()
    comparison = judge_outputs(
        run.executed.outputs, run.context.golden.outputs, precision=run.point.precision, policy=env.settings.tolerances
    )
    return replace(run, judged=Judged(comparison=comparison, seconds=time.perf_counter() - start))
