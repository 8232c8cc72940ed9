"""The accuracy workflow behind ``pytest --model``: goldens, the sweep's cases, verdicts (no pytest here).

:class:`AccuracySession` is opened once per pytest process from a :class:`HarnessConfig` (:meth:`AccuracySession.open`):
:func:`harness.pipeline.plan.plan_session` resolves and loads every model and makes its feeds up front (bad models, input
files or options are user errors before any test runs) and expands the sweep into :class:`Case` objects
(model x :class:`harness.sweep.SweepPoint`); the session holds that plan. Per model
it loads the golden and collects the magnitudes once (on the golden's feeds, through the on-disk
:class:`~harness.pipeline.cache.ContentCache`), then :meth:`AccuracySession.start_case` and
:func:`harness.pipeline.case.finish_case` run each case. Every check
returns an :class:`Outcome` for the suite to turn into pass/fail/skip; low-precision outcomes carry the
case's :class:`~harness.report.CaseRecord` for the report.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, cast

from harness.config import HarnessConfig
from harness.core.errors import (
    DiskFull,
    GoldenError,
    GoldenRunFailed,
    NotWritable,
    RunnerError,
    RunnerUnavailable,
    UserError,
)
from harness.core.memory import give_back_freed
from harness.core.providers import CPU
from harness.data.degenerate import degenerate
from harness.data.drift import check_golden_provenance, installed_versions
from harness.data.golden_usage import with_usage
from harness.data.goldens import Golden, GoldenStore, ensure_golden
from harness.data.keys import content_key, feeds_digest
from harness.data.rerun import rerun_command
from harness.judge.compare import CompareResult, Tolerance, compare_iterations
from harness.pipeline.cache import ContentCache
from harness.pipeline.case import SWEEP_STEPS, CaseSettings, ModelContext, Step, begin, finish_case
from harness.pipeline.caserun import CaseEnv, CaseRun, Stop
from harness.pipeline.context import FIXES_DIR
from harness.pipeline.dedup import SameModels
from harness.pipeline.golden_notes import produce_golden, written_message
from harness.pipeline.plan import (
    Case,
    LoadedModel,
    SessionPlan,
    default_recipe,
    plan_session,
    tuned_case,
)
from harness.pipeline.steps.record import record
from harness.pipeline.verdict import raised
from harness.report import CaseRecord, golden_relpath, save_golden_copy
from harness.report.runs import is_run_id
from harness.runners import FP32_RUNNER, make_runner
from harness.runners.registry import prepare_runners

__all__ = [
    "AccuracySession",
    "LoadedModel",
    "Outcome",
    "SessionPlan",
    "Status",
    "Case",
    "default_recipe",
    "plan_session",
    "produce_golden",
    "tuned_case",
]

GOLDEN_PRODUCER = f"{FP32_RUNNER}[{CPU}]"
# FP32 rerun of the golden inputs: only kernel-order noise is allowed (fp32 eps is 1.2e-7).
FP32_TOLERANCE = Tolerance(atol=1e-5, rtol=1e-4)
Status = Literal["pass", "fail", "skip", "error"]


@dataclass(frozen=True)
class Outcome:
    """What a suite test reports: ``fail``/``error`` -> pytest.fail, ``skip`` -> pytest.skip."""

    status: Status
    message: str = ""
    comparison: CompareResult | None = None
    runner: str = ""
    record: CaseRecord | None = None


@dataclass(frozen=True)
class SessionRole:
    """Whose session it is and what its run asks of it: the packaged suite's (``suite`` False: the castguard
    fixture's, whose tests are the user's), the run's folder for saved outputs (``output_dir`` None: the config's
    report folder), and whether golden version drift is an error (``strict_provenance``: --strict-provenance)."""

    suite: bool = True
    output_dir: Path | None = None
    strict_provenance: bool = False


class AccuracySession:
    """Per-process state of one accuracy run; see the module docstring."""

    def __init__(
        self, config: HarnessConfig, plan: SessionPlan, *, cache: ContentCache, role: SessionRole = SessionRole()
    ) -> None:
        """Hold a planned run (:func:`harness.pipeline.plan.plan_session`); no I/O here: see :meth:`open`."""
        self.config = config
        self.plan = plan
        self.models = plan.models
        self.cases = list(plan.cases)
        self.tuned_cases = list(plan.tuned_cases)
        self.shard_work = plan.shard_work
        self.output_dir = role.output_dir or config.report_dir  # this run's folder for saved outputs
        self.suite = role.suite  # the packaged suite's session (False: the castguard fixture's tests, the user's)
        # the run this session belongs to (every xdist worker of one run shares it); stamped on goldens it writes
        self.run_id = self.output_dir.name if is_run_id(self.output_dir.name) else None
        self.strict_provenance = role.strict_provenance  # --strict-provenance: golden version drift is an error
        self.store = GoldenStore(config.goldens_dir)
        self.cache = cache
        self.settings = CaseSettings(
            tolerances=config.tolerances,
            ort_providers=config.ort_providers,
            report_dir=self.output_dir,
            fixes_dir=config.report_dir / FIXES_DIR,
            trt_build_check=plan.trt_build_check,
            diagnose=config.diagnose,
            runner_options=config.runner_options,
            runner_timeout=config.runner_timeout,
        )
        self._goldens: dict[str, Golden] = {}
        self._contexts: dict[str, ModelContext] = {}
        self._updated: set[str] = set()
        self.golden_failures: dict[str, GoldenRunFailed] = {}  # models whose golden onnxruntime could not make
        self._unwritable: dict[str, DiskFull | NotWritable] = {}  # models whose golden could not be written
        self.same_models = SameModels()  # identical converted models run once per process

    @classmethod
    def open(cls, config: HarnessConfig, *, bundled_dir: Path, role: SessionRole = SessionRole()) -> AccuracySession:
        """Plan the run (load its models, make their feeds, list its cases) and hold it; its runners' start-up work
        begins first."""
        prepare_runners(config.runners)
        return cls(
            config, plan_session(config, bundled_dir=bundled_dir), cache=ContentCache(config.cache_dir), role=role
        )

    def golden(self, name: str, *, allow_update: bool) -> tuple[Golden, Path | None]:
        """The model's golden; writes it when missing (or once per session with --update-goldens)."""
        loaded = self.models[name]
        if name in self.golden_failures:  # onnxruntime failed on this model once: one error per model
            raise self.golden_failures[name]
        if name in self._unwritable:  # its golden could not be written: said in full once, then one line
            said = self._unwritable[name]
            raise GoldenError(
                where=said.where,
                problem=f"no golden: {said.problem.split(';')[0]} (said in full once)",
                fix="see the first error of this run",
            )
        update = allow_update and self.config.update_goldens and name not in self._updated
        if name in self._goldens and not update:
            return self._goldens[name], None
        try:
            golden, written = ensure_golden(
                self.store, loaded.spec, loaded.recipe, update=update, produce=lambda: self._produce(name)
            )
        except GoldenRunFailed as err:
            self.golden_failures[name] = err
            raise
        except (DiskFull, NotWritable) as err:  # the whole paragraph once; then one line per case
            self._unwritable[name] = err
            raise
        if update:
            self._updated.add(name)
        self._goldens[name] = golden
        return golden, written

    def _produce(self, name: str) -> Golden:
        """A new golden of model ``name``; the packaged suite's sidecar lists the cases and tests of this run that
        use it (a golden the castguard fixture writes is used by the user's own tests, which the sidecar does not
        name)."""
        if not self.suite:
            return produce_golden(self.models[name], run_id=self.run_id)
        cases = [c for c in (*self.cases, *self.tuned_cases) if c.model == name]
        tests = [f"test_fp32_golden[{name}]"]
        tests += [f"test_low_precision[{c.id}]" for c in self.cases if c.model == name]
        tests += [f"test_tuned[{c.id}]" for c in self.tuned_cases if c.model == name]
        golden = produce_golden(self.models[name], run_id=self.run_id)
        return with_usage(golden, cases=[c.case.id for c in cases], tests=tests)

    def rerun(self, loaded: LoadedModel, *flags: str) -> str:
        """The command that reruns this model with its inputs (a bundled model's own inputs go without saying)."""
        bundled = loaded.bundled_inputs and loaded.spec.rerun == loaded.spec.name
        return rerun_command(loaded.spec, loaded.recipe, *flags, input_options=not bundled)

    def check_fp32_golden(self, name: str) -> Outcome:
        """Ensure the golden exists and ORT FP32 still reproduces it on its own inputs (a golden onnxruntime
        cannot make is this test's error, said in full once)."""
        try:
            return self._check_fp32_golden(name)
        except (UserError, RunnerError, RunnerUnavailable) as err:
            verdict = raised(err)
            return Outcome(verdict.status, verdict.message)

    def _check_fp32_golden(self, name: str) -> Outcome:
        golden, written = self.golden(name, allow_update=True)
        loaded = self.models[name]
        if written is not None:
            return Outcome("fail", self._written(loaded, written, golden))
        golden.release()  # file-mapped outputs: not needed while the model runs
        result = make_runner(FP32_RUNNER, loaded.model, model_dir=loaded.spec.path.parent).run(golden.feeds)
        give_back_freed()  # the session's arena, before the golden is read
        quick = compare_iterations(result.outputs, golden.outputs, tolerances={}, default=FP32_TOLERANCE, full=False)
        if quick:  # the verdict alone; the full statistics only for the message of a golden no longer reproduced
            return Outcome("pass", comparison=quick, runner=result.runner)
        comparison = compare_iterations(result.outputs, golden.outputs, tolerances={}, default=FP32_TOLERANCE)
        path = self.store.path_for(loaded.spec, loaded.recipe)
        return Outcome(
            "fail",
            f"{name}: ORT FP32 no longer reproduces its golden\n{comparison.summary()}\n"
            f"  golden: {path} (made by {golden.meta.get('producer')}, "
            f"onnxruntime {golden.meta.get('versions', {}).get('onnxruntime')})\n"
            f"  fix: if the runtime change is expected, rewrite it: "
            f"{self.rerun(loaded, '--update-goldens')}",
            comparison=comparison,
            runner=result.runner,
        )

    def _written(self, loaded: LoadedModel, written: Path, golden: Golden) -> str:
        """The message of a just-written golden (:func:`harness.pipeline.golden_notes.written_message`)."""
        return written_message(loaded, written, golden, rerun=self.rerun(loaded))

    def context(self, name: str, golden: Golden) -> tuple[ModelContext, bool]:
        """The model's shared case context (built once per process); second item: built by this call."""
        if name in self._contexts:
            return self._contexts[name], False
        from harness.convert import collect_magnitudes

        loaded = self.models[name]
        key = content_key("magnitudes", self.cache.fingerprint, loaded.spec.sha256, feeds_digest(golden.feeds))
        start = time.perf_counter()
        magnitudes, hit = self.cache.magnitudes(
            key, lambda: collect_magnitudes(loaded.model, feeds=golden.feeds, base_dir=loaded.spec.path.parent)
        )
        seconds = 0.0 if hit else time.perf_counter() - start
        golden_file = golden_relpath(name, loaded.recipe.id)
        golden_path = self.store.path_for(loaded.spec, loaded.recipe)
        save_golden_copy(self.output_dir, golden_file, golden_file=golden_path, iterations=golden.outputs)
        self._contexts[name] = ModelContext(
            spec=loaded.spec,
            model=loaded.model,
            golden=golden,
            golden_path=golden_path,
            golden_file=golden_file,
            inputs_id=loaded.recipe.id,
            magnitudes=magnitudes,
            magnitudes_key=key,
            magnitudes_s=seconds,
            degenerate=degenerate(golden.outputs),
        )
        return self._contexts[name], True

    def start_case(self, sweep_case: Case) -> CaseRun:
        """A case with its model's context (golden, magnitudes, golden-version notes), or stopped where the
        golden stops it: not made (onnxruntime failed: said once by test_fp32_golden), written by this case
        (nothing to compare yet), or a user error."""
        loaded = self.models[sweep_case.model]
        run = begin(sweep_case.model, loaded, sweep_case.case, settings=self.settings)
        try:
            golden, written = self.golden(sweep_case.model, allow_update=False)
            if written is not None:
                return replace(run, stop=Stop("golden_written", self._written(loaded, written, golden)))
            ctx, first = self.context(sweep_case.model, golden)
            drift = check_golden_provenance(
                golden.meta, current=installed_versions(), strict=self.strict_provenance, golden=ctx.golden_path
            )
        except GoldenRunFailed as err:
            return replace(run, stop=Stop("golden_not_made", err.skip_reason))
        except UserError as err:
            return replace(run, stop=Stop("error", str(err)))
        magnitudes_s = ctx.magnitudes_s if first else 0.0
        started = time.perf_counter()  # the magnitudes, collected above, count as magnitudes_s
        return replace(run, ctx=ctx, magnitudes_s=magnitudes_s, notes=(*run.notes, *drift), started=started)

    def finish(self, run: CaseRun, steps: Sequence[Step] = SWEEP_STEPS) -> Outcome:
        """Run a started case's steps (nothing when it stopped already) and hand back its record."""
        env = CaseEnv(settings=self.settings, cache=self.cache, same=self.same_models)
        return outcome_of(finish_case(run, env, steps))

    def check_low_precision(self, sweep_case: Case) -> Outcome:
        """Convert, run on the case's runner, compare with the golden; the outcome carries the record (a case
        that stopped early too: :meth:`start_case`)."""
        return self.finish(self.start_case(sweep_case))

    def lost_case(self, case_id: str, why: str) -> CaseRecord | None:
        """The record of a planned case (by its test parameter id) that never handed one: never reached, or its
        test raised; None for an id that is no case of this run."""
        found = [c for c in (*self.cases, *self.tuned_cases) if c.id == case_id]
        if not found:
            return None
        loaded = self.models[found[0].model]
        run = begin(found[0].model, loaded, found[0].case, settings=self.settings)
        return record(replace(run, stop=Stop("not_reached", why)))


def outcome_of(case_record: CaseRecord) -> Outcome:
    """What a suite test reports for a case: a view of its record."""
    status = cast(Status, case_record.status)
    return Outcome(status, case_record.message, runner=case_record.runner, record=case_record)
