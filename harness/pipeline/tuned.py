"""The ``tuned`` case of ``pytest --model X --tune``: tune on the golden's inputs, keep the plan, check it later.

The plan of each (model, inputs, precision) is stored beside the goldens
(``goldens/<model>/<inputs-id>.tuned-<precision>.plan.json``, committed like them):

* no stored plan: tune on the golden's feeds and magnitudes, write the plan, pass;
* a stored plan: rebuild it on the current model and measure it (one evaluation). It passes while it meets its
  bound. When it stops meeting it (a new model version), the case fails as a regression: castguard re-tunes the
  current model and the message names the node(s) to move to FP32 (and those that may go back to low precision);
  with ``--update-goldens`` the re-tuned plan replaces the stored one (and the case fails once, like a golden).

The verdict is the bound (normalized max error per output on ``emulate``). The tuned case is a variant of the case
pipeline: this module is its first step (it fills :class:`harness.pipeline.caserun.Tuned`); execute -> save -> judge ->
settle follow as for any case (:data:`harness.pipeline.case.TUNED_STEPS`), so the record also carries the harness's per-output
statistics and the report can put the tuned plan on the error-vs-share plot.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from harness.convert import ConversionResult
from harness.core.errors import UserError
from harness.core.files import atomic_write_text, safe_component
from harness.core.jsonfile import JsonObject, json_type
from harness.pipeline.case import TUNED_STEPS
from harness.pipeline.caserun import Converted, Stop, Tuned
from harness.pipeline.context import ModelContext
from harness.pipeline.session import AccuracySession, Case, Outcome
from harness.tune.bound import Bound
from harness.tune.engine import TuneOutcome, TuneSettings, TuneSource, tune_setup
from harness.tune.oracle import Evaluation, Oracle, Setup

STRESS_EXAMPLES = 10


def plan_path(session: AccuracySession, sweep_case: Case) -> Path:
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


def check_tuned(session: AccuracySession, sweep_case: Case) -> Outcome:
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


@dataclass(frozen=True)
class TuneJob:
    """One tuned case's tune step: what it measures (``setup``), how it tunes, where its plan is kept."""

    label: str  # "model [case id]"
    model: str
    sha256: str
    model_path: Path
    precision: str
    setup: Setup
    settings: TuneSettings
    path: Path
    update: bool
    start: float

    def tuned(self, conversion: ConversionResult, kept: tuple[tuple[str, str], ...], **facts: Any) -> Tuned:
        return Tuned(conversion=conversion, kept_fp32=kept, seconds=time.perf_counter() - self.start, **facts)

    def retune(self) -> TuneOutcome:
        return tune_setup(
            self.setup, TuneSource(model_path=self.model_path, sha256=self.sha256), settings=self.settings
        )


def _tune(session: AccuracySession, sweep_case: Case, ctx: ModelContext, *, start: float) -> Tuned:
    """The tune step: tune on the golden's feeds, or check the stored plan (re-tuning when it fails its bound)."""
    case = sweep_case.case
    bound = Bound(precision=case.precision)
    setup = Setup(
        model=ctx.model,
        options=case.convert_options(),
        magnitudes=ctx.magnitudes,
        feeds=ctx.golden.feeds,
        goldens=ctx.golden.outputs,
        bound=bound,
        model_dir=ctx.spec.path.parent,
    )
    job = TuneJob(
        label=f"{sweep_case.model} [{case.id}]",
        model=sweep_case.model,
        sha256=ctx.spec.sha256,
        model_path=ctx.spec.path,
        precision=case.precision,
        setup=setup,
        settings=TuneSettings(bound=bound, cache_dir=session.config.cache_dir, stress_examples=STRESS_EXAMPLES),
        path=plan_path(session, sweep_case),
        update=session.config.update_goldens,
        start=start,
    )
    stored = _stored(job.path)
    return _first_tune(job) if stored is None else _check_stored(job, stored)


def _first_tune(job: TuneJob) -> Tuned:
    """No stored plan: tune, write the plan, pass."""
    outcome = job.retune()
    atomic_write_text(job.path, outcome.plan.to_json())
    notes = [
        f"tuned plan written: {job.path} ({outcome.plan.evaluations} evaluations, "
        f"{outcome.plan.evaluations_cached} from cache); commit it beside the goldens"
    ]
    if outcome.stress is not None and outcome.stress.failing_feed is not None:
        notes.append(
            f"adversarial: {outcome.stress.examples} Hypothesis inputs in {outcome.stress.domain} found "
            f"one over the bound (error/bound {outcome.stress.worst_ratio:.3g}); the bound holds on the "
            "golden inputs only"
        )
    kept = tuple((n, outcome.plan.why.get(n, "")) for n in outcome.plan.kept_fp32)
    return job.tuned(outcome.conversion, kept, meets_bound=True, notes=tuple(notes))


def _check_stored(job: TuneJob, stored: JsonObject) -> Tuned:
    """A stored plan: measure it on the current model; it passes while it meets its bound, else re-tune."""
    present = {n.name for n in job.setup.convert(()).model.graph.node}
    old_kept = stored.items("kept_fp32", str)
    check = Oracle(job.setup, budget=1).evaluate([n for n in old_kept if n in present])
    gone = [n for n in old_kept if n not in present]
    notes = [f"stored plan names nodes this model no longer has: {', '.join(gone)}"] if gone else []
    if check.passed:
        why = cast(dict[str, str], stored.object("why", optional=True).data)
        kept = tuple(
            (n, why.get(n, "") or f"kept by the stored plan {job.path.name}") for n in old_kept if n in present
        )
        notes.append(f"stored tuned plan {job.path} still meets its bound")
        conversion = job.setup.convert([n for n, _ in kept])
        return job.tuned(conversion, kept, meets_bound=True, notes=tuple(notes))
    outcome = job.retune()
    new_kept = outcome.plan.kept_fp32
    move = [n for n in new_kept if n not in old_kept]
    back = [n for n in old_kept if n not in new_kept and n in present]
    if job.update:
        atomic_write_text(job.path, outcome.plan.to_json())
    message = _missed_message(job, stored, check, outcome, Moves(to_fp32=tuple(move), back=tuple(back)))
    kept = tuple((n, outcome.plan.why.get(n, "")) for n in new_kept)
    return job.tuned(
        outcome.conversion, kept, meets_bound=False, message=message, notes=tuple(notes), moved=tuple(move)
    )


@dataclass(frozen=True)
class Moves:
    """How a re-tuned plan differs from the stored one: the nodes it moves to FP32 and those that may go back to
    the low precision."""

    to_fp32: tuple[str, ...]
    back: tuple[str, ...]


def _missed_message(job: TuneJob, stored: JsonObject, check: Evaluation, outcome: TuneOutcome, moves: Moves) -> str:
    """A stored plan that no longer meets its bound: by how much, the moves of the re-tuned plan, and the fix."""
    move, back = moves.to_fp32, moves.back
    worst = check.measurement.worst_output()
    path, bound = job.path, job.settings.bound
    return (
        f"{job.label}: the tuned plan {path} (model {stored.get('model_sha256', str, '')[:12]}) "
        f"no longer meets its bound on this model version ({job.sha256[:12]}): output {worst!r} "
        f"error {check.measurement.error_of(worst):.3g} > {bound.limit(worst):.3g}\n"
        f"  move to FP32: {', '.join(move) or '(none: the re-tuned plan keeps other nodes)'}"
        + (f"\n  may go back to {job.precision}: {', '.join(back)}" if back else "")
        + f"\n  re-tuned plan: {len(outcome.plan.kept_fp32)} node(s) FP32, error "
        + ", ".join(f"{k} {v:.3g}" for k, v in outcome.plan.error.items())
        + (
            f"\n  rewritten (--update-goldens): {path}; review the moves and commit it"
            if job.update
            else f"\n  fix: review the moves and accept the new plan: pytest --model {job.model} --tune "
            f"--update-goldens (rewrites {path})"
        )
    )


__all__ = ["check_tuned", "plan_path"]
