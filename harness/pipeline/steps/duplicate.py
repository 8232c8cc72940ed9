"""The find-duplicate step: an earlier case of this process whose result this case can reuse (:mod:`harness.pipeline.dedup`).

Reuse by identical precision plan is for runners whose traits declare ``computes_exact_plan``."""

from __future__ import annotations

import time
from dataclasses import replace

from harness.pipeline.caserun import CaseEnv, CaseRun, Duplicate, Stop
from harness.pipeline.dedup import model_digest, plan_digest
from harness.report import CaseRecord


def find_duplicate(run: CaseRun, env: CaseEnv) -> CaseRun:
    if env.same is None or run.converted is None:
        return run
    start = time.perf_counter()
    ctx, case, conversion = run.context, run.point, run.converted.conversion
    where = (ctx.spec.name, ctx.inputs_id, case.runner, *run.providers, str(conversion.base_dir or ""))
    graph = (*where, model_digest(conversion.model))
    plan = (*where, plan_digest(conversion, precision=case.precision, fp32_accumulation=case.fp32_accumulation))
    found = env.same.first(graph, plan, by_plan=run.traits.computes_exact_plan)
    if found is not None:
        duplicate = Duplicate(
            graph=graph, plan=plan, first=found[0], kind=found[1], seconds=time.perf_counter() - start
        )
        return replace(run, duplicate=duplicate, stop=Stop("reused"))
    first = env.same.first_of_plan(plan)
    return replace(
        run, duplicate=Duplicate(graph=graph, plan=plan, same_plan_as=first, seconds=time.perf_counter() - start)
    )


def remember(run: CaseRun, record: CaseRecord, env: CaseEnv) -> None:
    """Keep the record of a case that really ran, for later duplicates (:meth:`SameModels.remember`)."""
    if env.same is not None and run.duplicate is not None and run.stop is None:
        env.same.remember(run.duplicate.graph, run.duplicate.plan, record)
