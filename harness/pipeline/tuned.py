"""The ``tuned`` case of ``pytest --model X --tune``: tune on the golden's inputs, keep the plan, check it later.

The plan of each (model, inputs, precision) is stored beside the goldens
(``goldens/<model>/<inputs-id>.tuned-<precision>.plan.json``, committed like them):

* no stored plan: tune on the golden's feeds and magnitudes, write the plan, pass;
* a stored plan: rebuild it on the current model and measure it (one evaluation). It passes while it meets its
  bound. When it stops meeting it (a new model version), the case fails as a regression: castguard re-tunes the
  current model and the message names the node(s) to move to FP32 (and those that may go back to low precision);
  with ``--update-goldens`` the re-tuned plan replaces the stored one (and the case fails once, like a golden).

The verdict is the bound (normalized max error per output on ``emulate``). The tuned case is a variant of the case
pipeline: this module is its first step (it fills :class:`harness.pipeline.caserun.Tuned`); execute -> judge -> save
follow as for any case (:data:`harness.pipeline.case.TUNED_STEPS`), so the record also carries the harness's per-output
statistics and the report can put the tuned plan on the error-vs-share plot.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import cast

from harness.core.errors import UserError
from harness.core.files import atomic_write_text, safe_component
from harness.pipeline.case import TUNED_STEPS
from harness.pipeline.caserun import Converted, Stop, Tuned
from harness.pipeline.context import ModelContext
from harness.pipeline.session import AccuracySession, Outcome, SweepCase
from harness.tune.bound import Bound
from harness.tune.engine import TuneSettings, tune_setup
from harness.tune.oracle import Oracle, Setup

STRESS_EXAMPLES = 10


def plan_path(session: AccuracySession, sweep_case: SweepCase) -> Path:
    loaded = session.models[sweep_case.model]
    return (
        session.config.goldens_dir
        / safe_component(sweep_case.model)
        / f"{safe_component(loaded.recipe.id)}.tuned-{sweep_case.case.precision}.plan.json"
    )


def _stored(path: Path) -> dict[str, object] | None:
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(doc.get("kept_fp32"), list):
            raise ValueError("no kept_fp32 list")
        return cast(dict[str, object], doc)
    except (OSError, ValueError) as err:
        raise UserError(
            where=path,
            problem=f"unreadable tuned plan ({err})",
            fix="rewrite it: pytest --model ... --tune --update-goldens",
        ) from None


def check_tuned(session: AccuracySession, sweep_case: SweepCase) -> Outcome:
    """Run the tuned case; see the module docstring. A case stopped by its golden, or by a stored plan that
    cannot be read, is recorded with where and why it stopped."""
    run = session.start_case(sweep_case)
    if run.stop is not None:
        return session.finish(run, TUNED_STEPS)
    try:
        tuned = _tune(session, sweep_case, run.context, start=run.started)
    except UserError as err:
        return session.finish(replace(run, stop=Stop("error", str(err))), TUNED_STEPS)
    converted = Converted(conversion=tuned.conversion, cached=False, seconds=0.0)
    run = replace(run, tuned=tuned, converted=converted, notes=(*run.notes, *tuned.notes), magnitudes_s=0.0)
    return session.finish(run, TUNED_STEPS)  # its magnitudes, if collected now, are in tune_s


def _tune(session: AccuracySession, sweep_case: SweepCase, ctx: ModelContext, *, start: float) -> Tuned:
    """The tune step: tune on the golden's feeds, or check the stored plan (re-tuning when it fails its bound)."""
    name, case = sweep_case.model, sweep_case.case
    loaded = session.models[name]
    golden = ctx.golden
    bound = Bound(precision=case.precision)
    setup = Setup(
        model=ctx.model,
        options=case.convert_options(),
        magnitudes=ctx.magnitudes,
        feeds=golden.feeds,
        goldens=golden.outputs,
        bound=bound,
        model_dir=ctx.spec.path.parent,
    )
    path = plan_path(session, sweep_case)
    stored = _stored(path)
    settings = TuneSettings(bound=bound, cache_dir=session.config.cache_dir, stress_examples=STRESS_EXAMPLES)
    notes: list[str] = []
    if stored is None:
        outcome = tune_setup(setup, model_path=ctx.spec.path, sha256=ctx.spec.sha256, settings=settings, reference=None)
        atomic_write_text(path, outcome.plan.to_json())
        notes.append(
            f"tuned plan written: {path} ({outcome.plan.evaluations} evaluations, "
            f"{outcome.plan.evaluations_cached} from cache); commit it beside the goldens"
        )
        if outcome.stress is not None and outcome.stress.failing_feed is not None:
            notes.append(
                f"adversarial: {outcome.stress.examples} Hypothesis inputs in {outcome.stress.domain} found "
                f"one over the bound (error/bound {outcome.stress.worst_ratio:.3g}); the bound holds on the "
                "golden inputs only"
            )
        kept = tuple((n, outcome.plan.why.get(n, "")) for n in outcome.plan.kept_fp32)
        return Tuned(
            conversion=outcome.conversion,
            kept_fp32=kept,
            meets_bound=True,
            notes=tuple(notes),
            seconds=time.perf_counter() - start,
        )
    present = {n.name for n in setup.convert(()).model.graph.node}
    old_kept = [str(n) for n in cast(list[object], stored["kept_fp32"])]
    check = Oracle(setup, budget=1).evaluate([n for n in old_kept if n in present])
    gone = [n for n in old_kept if n not in present]
    if gone:
        notes.append(f"stored plan names nodes this model no longer has: {', '.join(gone)}")
    if check.passed:
        why = cast(dict[str, str], stored.get("why", {}))
        kept = tuple((n, why.get(n, "") or f"kept by the stored plan {path.name}") for n in old_kept if n in present)
        notes.append(f"stored tuned plan {path} still meets its bound")
        return Tuned(
            conversion=setup.convert([n for n, _ in kept]),
            kept_fp32=kept,
            meets_bound=True,
            notes=tuple(notes),
            seconds=time.perf_counter() - start,
        )
    outcome = tune_setup(setup, model_path=ctx.spec.path, sha256=ctx.spec.sha256, settings=settings, reference=None)
    new_kept = outcome.plan.kept_fp32
    move = [n for n in new_kept if n not in old_kept]
    back = [n for n in old_kept if n not in new_kept and n in present]
    worst = check.measurement.worst_output()
    update = session.config.update_goldens
    if update:
        atomic_write_text(path, outcome.plan.to_json())
    message = (
        f"{name} [{case.id}]: the tuned plan {path} (model {str(stored.get('model_sha256', ''))[:12]}) "
        f"no longer meets its bound on this model version ({loaded.spec.sha256[:12]}): output {worst!r} "
        f"error {check.measurement.error_of(worst):.3g} > {bound.limit(worst):.3g}\n"
        f"  move to FP32: {', '.join(move) or '(none: the re-tuned plan keeps other nodes)'}"
        + (f"\n  may go back to {case.precision}: {', '.join(back)}" if back else "")
        + f"\n  re-tuned plan: {len(new_kept)} node(s) FP32, error "
        + ", ".join(f"{k} {v:.3g}" for k, v in outcome.plan.error.items())
        + (
            f"\n  rewritten (--update-goldens): {path}; review the moves and commit it"
            if update
            else f"\n  fix: review the moves and accept the new plan: pytest --model {name} --tune --update-goldens "
            f"(rewrites {path})"
        )
    )
    kept = tuple((n, outcome.plan.why.get(n, "")) for n in new_kept)
    return Tuned(
        conversion=outcome.conversion,
        kept_fp32=kept,
        meets_bound=False,
        message=message,
        notes=tuple(notes),
        moved=tuple(move),
        seconds=time.perf_counter() - start,
    )


__all__ = ["check_tuned", "plan_path"]
