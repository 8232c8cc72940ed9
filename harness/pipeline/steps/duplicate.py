"""The find-duplicate step: an earlier case of this process whose result this case can reuse (:mod:`harness.pipeline.dedup`)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from harness.pipeline.context import ModelContext
from harness.pipeline.dedup import PLAN_RUNNERS, SameModels, model_digest, plan_digest
from harness.pipeline.steps.convert import Converted
from harness.report import CaseRecord
from harness.sweep import Case


@dataclass(frozen=True)
class Duplicate:
    """This case's keys in :class:`SameModels`, and what they found: a record to reuse (and how it matched:
    ``"graph"`` or ``"plan"``), or else the first case with the same precision plan (it runs anyway)."""

    graph: tuple[str, ...]
    plan: tuple[str, ...]
    first: CaseRecord | None = None
    kind: str = ""
    same_plan_as: str | None = None
    seconds: float = 0.0


def find_duplicate(
    ctx: ModelContext, case: Case, converted: Converted, *, same: SameModels, providers: tuple[str, ...]
) -> Duplicate:
    start = time.perf_counter()
    conversion = converted.conversion
    where = (ctx.spec.name, ctx.inputs_id, case.runner, *providers, str(conversion.base_dir or ""))
    graph = (*where, model_digest(conversion.model))
    plan = (*where, plan_digest(conversion, precision=case.precision, fp32_accumulation=case.fp32_accumulation))
    found = same.first(graph, plan, by_plan=case.runner in PLAN_RUNNERS)
    if found is not None:
        return Duplicate(graph=graph, plan=plan, first=found[0], kind=found[1], seconds=time.perf_counter() - start)
    return Duplicate(graph=graph, plan=plan, same_plan_as=same.first_of_plan(plan), seconds=time.perf_counter() - start)
