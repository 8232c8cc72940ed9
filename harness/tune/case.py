"""The ``tuned`` case of ``pytest --model X --tune``: tune on the golden's inputs, keep the plan, check it later.

The plan of each (model, inputs, precision) is stored beside the goldens
(``goldens/<model>/<inputs-id>.tuned-<precision>.plan.json``, committed like them):

* no stored plan: tune on the golden's feeds and magnitudes, write the plan, pass;
* a stored plan: rebuild it on the current model and measure it (one evaluation). It passes while it meets its
  bound. When it stops meeting it (a new model version), the case fails as a regression: castguard re-tunes the
  current model and the message names the node(s) to move to FP32 (and those that may go back to low precision);
  with ``--update-goldens`` the re-tuned plan replaces the stored one (and the case fails once, like a golden).

The verdict is the bound (normalized max error per output on ``emulate``). The tuned case is a variant of the case
pipeline: this module is its first step (:class:`harness.pipeline.steps.tuned.Tuned`); execute -> judge -> record follow
as for any case (:func:`harness.pipeline.case.run_tuned`), so the record also carries the harness's per-output
statistics and the report can put the tuned plan on the error-vs-share plot.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import cast

from harness.core.files import atomic_write_text, safe_component
from harness.core.jsonfile import JsonObject, json_type
from harness.nightly.rules import MOVE_PREFIX
from harness.pipeline.case import run_tuned
from harness.pipeline.session import AccuracySession, Outcome, SweepCase
from harness.pipeline.steps.tuned import Tuned
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


def _stored(path: Path) -> JsonObject | None:
    """The stored plan, its fields checked for type (:mod:`harness.core.jsonfile`); None when there is none."""
    if not path.is_file():
        return None
    fix = "rewrite it: pytest --model ... --tune --update-goldens"
    doc = JsonObject.read(path, what="tuned plan", fix=fix)
    doc.items("kept_fp32", str)
    for node, why in doc.object("why", optional=True).data.items():
        if not isinstance(why, str):
            raise doc.fail(f"why.{node}", f"is {json_type(why)}, expected a string")
    doc.get("model_sha256", str, "")
    return doc


def check_tuned(session: AccuracySession, sweep_case: SweepCase) -> Outcome:
    """Run the tuned case; see the module docstring."""
    start = time.perf_counter()
    name, case = sweep_case.model, sweep_case.case
    loaded = session.models[name]
    golden, written = session.golden(name, allow_update=False)
    if written is not None:
        return Outcome("fail", f"{name}: golden written ({written}); rerun to tune against it")
    ctx, _ = session.context(name, golden)  # its magnitudes, if collected now, are in this case's tune_s
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
        return _record(
            session,
            sweep_case,
            Tuned(
                conversion=outcome.conversion,
                kept_fp32=kept,
                status="pass",
                notes=tuple(notes),
                seconds=time.perf_counter() - start,
            ),
            start=start,
        )
    present = {n.name for n in setup.convert(()).model.graph.node}
    old_kept = stored.items("kept_fp32", str)
    check = Oracle(setup, budget=1).evaluate([n for n in old_kept if n in present])
    gone = [n for n in old_kept if n not in present]
    if gone:
        notes.append(f"stored plan names nodes this model no longer has: {', '.join(gone)}")
    if check.passed:
        why = cast(dict[str, str], stored.object("why", optional=True).data)
        kept = tuple((n, why.get(n, "") or f"kept by the stored plan {path.name}") for n in old_kept if n in present)
        notes.append(f"stored tuned plan {path} still meets its bound")
        return _record(
            session,
            sweep_case,
            Tuned(
                conversion=setup.convert([n for n, _ in kept]),
                kept_fp32=kept,
                status="pass",
                notes=tuple(notes),
                seconds=time.perf_counter() - start,
            ),
            start=start,
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
        f"{name} [{case.id}]: the tuned plan {path} (model {stored.get('model_sha256', str, '')[:12]}) "
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
    kept = tuple((n, (MOVE_PREFIX if n in move else "") + outcome.plan.why.get(n, "")) for n in new_kept)
    return _record(
        session,
        sweep_case,
        Tuned(
            conversion=outcome.conversion,
            kept_fp32=kept,
            status="fail",
            message=message,
            notes=tuple(notes),
            seconds=time.perf_counter() - start,
        ),
        start=start,
    )


def _record(session: AccuracySession, sweep_case: SweepCase, tuned: Tuned, *, start: float) -> Outcome:
    """The rest of the pipeline for the tuned case: execute -> judge -> record (:func:`harness.pipeline.case.run_tuned`)."""
    ctx = session.context(sweep_case.model, session.golden(sweep_case.model, allow_update=False)[0])[0]
    record = run_tuned(ctx, sweep_case.case, tuned, settings=session.settings, started=start)
    return Outcome(tuned.status, tuned.message, runner=record.runner, record=record)


__all__ = ["check_tuned", "plan_path"]
