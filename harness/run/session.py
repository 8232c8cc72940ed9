"""The accuracy workflow behind ``pytest --model``: goldens, the sweep's cases, verdicts (no pytest here).

:class:`AccuracySession` is built once per pytest process from a :class:`HarnessConfig`; it resolves and loads
every model and makes its feeds up front (bad models, input files or options are user errors before any test
runs) and expands the sweep into :class:`SweepCase` objects (model x :class:`harness.sweep.Case`). Per model
it loads the golden and collects the magnitudes once (on the golden's feeds, through the on-disk
:class:`~harness.run.cache.ContentCache`), then :func:`harness.run.case.run_case` runs each case. Every check
returns an :class:`Outcome` for the suite to turn into pass/fail/skip; low-precision outcomes carry the
case's :class:`~harness.report.CaseRecord` for the report.
"""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, cast

import onnx

from harness.run.build_check import build_check_enabled
from harness.run.cache import ContentCache, content_key, feeds_digest
from harness.run.case import CaseSettings, ModelContext, run_case
from harness.run.dedup import SameModels
from harness.run.golden_notes import golden_run_failed, non_finite_note
from harness.judge.compare import CompareResult, Tolerance, compare_iterations
from harness.config import HarnessConfig
from harness.data.drift import check_golden_provenance, installed_versions
from harness.errors import GoldenRunFailed, RunnerError, UserError
from harness.data.goldens import Golden, GoldenStore, ensure_golden, rerun_command
from harness.data.recipes import (Feed, InputRecipe, describe_inputs, make_feeds, plan_recipe, recipe_for_file,
                                  recipe_lines)
from harness.data.feeds import input_specs
from harness.data.models import LocatedModel, ModelSpec, load_model, locate_model
from harness.data.scoping import InputOptions, check_every_name_used
from harness.report import CaseRecord, golden_relpath, save_outputs
from harness.runners import make_runner
from harness.runners.ort import CPU
from harness.sweep import Case, expand
from harness.sweep.shards import assign

GOLDEN_PRODUCER = f"ort[{CPU}]"
# FP32 rerun of the golden inputs: only kernel-order noise is allowed (fp32 eps is 1.2e-7).
FP32_TOLERANCE = Tolerance(atol=1e-5, rtol=1e-4)
Status = Literal["pass", "fail", "skip", "error"]


@dataclass(frozen=True)
class LoadedModel:
    """A resolved, checked model with its input recipe and the feeds that recipe makes (validated)."""

    spec: ModelSpec
    model: onnx.ModelProto
    recipe: InputRecipe
    feeds: list[Feed]
    input_lines: tuple[str, ...] = ()   # how the inputs were made (recipe_lines): terminal summary and report
    bundled_inputs: bool = False        # a bundled model's own inputs or ranges (a rerun command need not say them)

    @property
    def inputs_note(self) -> str:
        return "inputs: " + "; ".join(self.input_lines)


@dataclass(frozen=True)
class SweepCase:
    """One low-precision test: a model and one point of the sweep."""

    model: str
    case: Case

    @property
    def id(self) -> str:
        return f"{self.model}-{self.case.id}"


@dataclass(frozen=True)
class Outcome:
    """What a suite test reports: ``fail``/``error`` -> pytest.fail, ``skip`` -> pytest.skip."""

    status: Status
    message: str = ""
    comparison: CompareResult | None = None
    runner: str = ""
    record: CaseRecord | None = None


def default_recipe(spec: ModelSpec, config: HarnessConfig, *, bundled_dir: Path,
                   input_names: Sequence[str] | None = None) -> tuple[InputRecipe, bool]:
    """The input recipe for a model: the user's options, else a bundled model's own inputs or ranges; and whether
    it is the latter. ``input_names`` (a run over several models): only the options that name one of these
    inputs, or every input, are this model's (:mod:`harness.data.scoping`)."""
    own_file = dict(config.model_inputs).get(spec.name)
    if own_file is not None:
        return recipe_for_file(own_file, seed=config.seed), False
    if config.inputs_file is not None:
        return recipe_for_file(config.inputs_file, seed=config.seed), False
    options = InputOptions(val_ranges=config.val_ranges, input_shapes=config.input_shapes)
    if input_names is not None:
        options = options.for_inputs(input_names)
    is_bundled = spec.path.is_relative_to(bundled_dir.resolve())
    if is_bundled and not options:
        import test_models

        bundled_inputs = test_models.default_inputs(spec.name)
        if bundled_inputs is not None:
            return recipe_for_file(bundled_inputs, seed=config.seed), True
        ranges = tuple((n, lo, hi) for n, (lo, hi) in sorted(test_models.default_val_ranges(spec.name).items()))
        return InputRecipe(seed=config.seed, iterations=config.iterations, val_ranges=ranges), True
    return InputRecipe(seed=config.seed, iterations=config.iterations, val_ranges=options.val_ranges,
                       input_shapes=options.input_shapes), False


class AccuracySession:
    """Per-process state of one accuracy run; see the module docstring."""

    def __init__(self, config: HarnessConfig, *, bundled_dir: Path, strict_provenance: bool = False,
                 output_dir: Path | None = None) -> None:
        self.config = config
        self.bundled_dir = bundled_dir
        self.output_dir = output_dir or config.report_dir    # this run's folder for saved outputs
        self.strict_provenance = strict_provenance   # --strict-provenance: golden version drift is an error
        self.store = GoldenStore(config.goldens_dir)
        located: dict[str, LocatedModel] = {}
        for ref in config.models:
            found = locate_model(ref, search_dir=bundled_dir, project_dir=config.project)
            if found.name in located:
                raise _duplicate(ref, found, located[found.name])
            located[found.name] = found
        _check_input_keys(config, located)
        sweep_cases = expand(config.sweep)
        tuned = [tuned_case(precision) for precision in config.sweep.precisions] if config.tune else []
        # --shard K/N: every shard locates every model (keys only: nothing is hashed or loaded) and keeps its part
        self.shard_work = None if config.shard is None else assign(
            list(located), [c.id for c in (*sweep_cases, *tuned)], config.shard)
        self.models: dict[str, LoadedModel] = {}
        several = len(located) > 1      # then each model takes the options naming its inputs
        inputs: dict[str, list[str]] = {}
        own_files = dict(config.model_inputs)
        for name, found in located.items():
            if self.shard_work is not None and name not in self.shard_work.assigned_models:
                continue
            spec = found.spec()
            model = load_model(spec.path, weights="lazy")   # big weights stay on disk (model_dir)
            names = [s.name for s in input_specs(model)]
            if name not in own_files:        # a model with its own file takes no options
                inputs[name] = names
            recipe, bundled = default_recipe(spec, config, bundled_dir=bundled_dir,
                                             input_names=names if several else None)
            recipe = plan_recipe(model, recipe, where=str(spec.path))
            feeds = make_feeds(model, recipe, where=str(spec.path))
            self.models[spec.name] = LoadedModel(spec=spec, model=model, recipe=recipe, feeds=feeds,
                                                 input_lines=tuple(recipe_lines(model, recipe)), bundled_inputs=bundled)
        if several and config.inputs_file is None:
            check_every_name_used(InputOptions(val_ranges=config.val_ranges, input_shapes=config.input_shapes),
                                  inputs, more=lambda: _input_names(located, skip=[*self.models, *own_files]),
                                  own_files=bool(config.model_inputs))
        self.cases = [SweepCase(name, case) for name in self.models for case in sweep_cases if self._mine(name, case)]
        self.tuned_cases = [SweepCase(name, case) for name in self.models for case in tuned if self._mine(name, case)]
        self.cache = ContentCache(config.cache_dir)
        self.settings = CaseSettings(tolerances=config.tolerances, ort_providers=config.ort_providers,
                                     report_dir=self.output_dir,
                                     trt_build_check=build_check_enabled(config.trt_build_check))
        self._goldens: dict[str, Golden] = {}
        self._contexts: dict[str, ModelContext] = {}
        self._updated: set[str] = set()
        self.golden_failures: dict[str, GoldenRunFailed] = {}   # models whose golden onnxruntime could not make
        self.same_models = SameModels()      # identical converted models run once per process

    def _mine(self, model: str, case: Case) -> bool:
        """Whether this process runs the case: always, or when its shard was assigned it."""
        return self.shard_work is None or self.shard_work.runs(model, case.id)

    def golden(self, name: str, *, allow_update: bool) -> tuple[Golden, Path | None]:
        """The model's golden; writes it when missing (or once per session with --update-goldens)."""
        loaded = self.models[name]
        if name in self.golden_failures:     # onnxruntime failed on this model once: one error per model
            raise self.golden_failures[name]
        update = allow_update and self.config.update_goldens and name not in self._updated
        if name in self._goldens and not update:
            return self._goldens[name], None
        try:
            golden, written = ensure_golden(self.store, loaded.spec, loaded.recipe, update=update,
                                            produce=lambda: produce_golden(loaded))
        except GoldenRunFailed as err:
            self.golden_failures[name] = err
            raise
        if update:
            self._updated.add(name)
        self._goldens[name] = golden
        return golden, written

    def rerun(self, loaded: LoadedModel, *flags: str) -> str:
        """The command that reruns this model with its inputs (a bundled model's own inputs go without saying)."""
        bundled = loaded.bundled_inputs and loaded.spec.rerun == loaded.spec.name
        return rerun_command(loaded.spec, loaded.recipe, *flags, input_options=not bundled)

    def check_fp32_golden(self, name: str) -> Outcome:
        """Ensure the golden exists and ORT FP32 still reproduces it on its own inputs."""
        golden, written = self.golden(name, allow_update=True)
        loaded = self.models[name]
        if written is not None:
            return Outcome("fail", self._written(loaded, written, golden))
        result = make_runner("ort", loaded.model, model_dir=loaded.spec.path.parent).run(golden.feeds)
        comparison = compare_iterations(result.outputs, golden.outputs, tolerances={}, default=FP32_TOLERANCE)
        if comparison:
            return Outcome("pass", comparison=comparison, runner=result.runner)
        path = self.store.path_for(loaded.spec, loaded.recipe)
        return Outcome("fail", f"{name}: ORT FP32 no longer reproduces its golden\n{comparison.summary()}\n"
                               f"  golden: {path} (made by {golden.meta.get('producer')}, "
                               f"onnxruntime {golden.meta.get('versions', {}).get('onnxruntime')})\n"
                               f"  fix: if the runtime change is expected, rewrite it: "
                               f"{self.rerun(loaded, '--update-goldens')}",
                       comparison=comparison, runner=result.runner)

    def _written(self, loaded: LoadedModel, written: Path, golden: Golden) -> str:
        """The message of a just-written golden; a golden holding NaN/inf says so (harness.run.golden_notes)."""
        note = non_finite_note(loaded.model, golden, model_dir=loaded.spec.path.parent, input_lines=loaded.input_lines,
                               rerun=self.rerun(loaded))
        head, fix = _written_message(loaded, written, golden, self.rerun(loaded)).rsplit("\n  fix: ", 1)
        return "\n".join([head, *([note] if note else []), f"  fix: {fix}"])

    def context(self, name: str, golden: Golden) -> tuple[ModelContext, bool]:
        """The model's shared case context (built once per process); second item: built by this call."""
        if name in self._contexts:
            return self._contexts[name], False
        from harness.convert import collect_magnitudes

        loaded = self.models[name]
        key = content_key("magnitudes", self.cache.fingerprint, loaded.spec.sha256, feeds_digest(golden.feeds))
        start = time.perf_counter()
        magnitudes, hit = self.cache.magnitudes(key, lambda: collect_magnitudes(
            loaded.model, feeds=golden.feeds, base_dir=loaded.spec.path.parent))
        seconds = 0.0 if hit else time.perf_counter() - start
        golden_file = golden_relpath(name, loaded.recipe.id)
        save_outputs(self.output_dir, golden_file, golden.outputs)
        self._contexts[name] = ModelContext(spec=loaded.spec, model=loaded.model, golden=golden,
                                            golden_path=self.store.path_for(loaded.spec, loaded.recipe),
                                            golden_file=golden_file, inputs_id=loaded.recipe.id,
                                            magnitudes=magnitudes, magnitudes_key=key, magnitudes_s=seconds)
        return self._contexts[name], True

    def check_low_precision(self, sweep_case: SweepCase) -> Outcome:
        """Convert, run on the case's runner, compare with the golden; the outcome carries the record."""
        name, case = sweep_case.model, sweep_case.case
        loaded = self.models[name]
        try:
            golden, written = self.golden(name, allow_update=False)
            if written is not None:
                return Outcome("fail", self._written(loaded, written, golden))
            ctx, first = self.context(name, golden)
            drift = check_golden_provenance(golden.meta, current=installed_versions(), strict=self.strict_provenance,
                                            golden=ctx.golden_path)
        except GoldenRunFailed as err:      # said once, by test_fp32_golden; each case skips in one line
            return Outcome("skip", err.skip_reason, record=CaseRecord(
                model=name, model_sha256=loaded.spec.sha256, case=case, status="skip", runner=case.runner,
                inputs_id=loaded.recipe.id, message=err.skip_reason, notes=(loaded.inputs_note,)))
        except UserError as err:
            record = CaseRecord(model=name, model_sha256=loaded.spec.sha256, case=case, status="error",
                                runner=case.runner, inputs_id=loaded.recipe.id, message=str(err),
                                notes=(loaded.inputs_note,))
            return Outcome("error", str(err), record=record)
        record = run_case(ctx, case, settings=self.settings, cache=self.cache, first_of_model=first,
                          same=self.same_models)
        record = replace(record, notes=(loaded.inputs_note, *drift, *record.notes))   # on every case
        return Outcome(cast(Status, record.status), record.message, runner=record.runner, record=record)


def tuned_case(precision: str) -> Case:
    """The ``pytest --tune`` case of one precision: the search starts from the low type's range (data_max)."""
    from harness.dtypes import LOW_MAX
    from harness.convert.options import LOW_PRECISIONS

    return Case(precision=precision, data_max=LOW_MAX[LOW_PRECISIONS[precision]], tuned=True)


def produce_golden(loaded: LoadedModel) -> Golden:
    """Run the recipe's feeds on ORT CPU FP32; onnxruntime's failure is :class:`GoldenRunFailed` (its message, the
    inputs used, the fix)."""
    try:
        result = make_runner("ort", loaded.model, model_dir=loaded.spec.path.parent).run(loaded.feeds)
    except RunnerError as err:
        raise golden_run_failed(loaded.spec, loaded.recipe, loaded.feeds, err, input_lines=loaded.input_lines) from None
    meta = {"producer": result.runner, "inputs": describe_inputs(loaded.model, loaded.recipe, loaded.feeds)}
    return Golden(feeds=loaded.feeds, outputs=result.outputs, meta=meta)


def _duplicate(ref: str, spec: LocatedModel, other: LocatedModel) -> UserError:
    if spec.path == other.path:
        return UserError(where=f"--model {ref}", problem="model given twice", fix="pass each model once")
    return UserError(where=f"--model {ref}", problem=f"key {spec.name!r} is also used by {other.path}; goldens "
                     "are stored by key", fix=f"name one of them: --model OTHERKEY={spec.path}")


def _written_message(loaded: LoadedModel, path: Path, golden: Golden, rerun: str) -> str:
    return (f"{loaded.spec.name}: golden written (it was missing, or --update-goldens): {path}\n"
            f"  {len(golden.feeds)} iteration(s) from {loaded.recipe.id}, produced by {golden.meta.get('producer')}\n"
            f"  fix: review it, commit it, and rerun: `{rerun}` then compares against it")


def _check_input_keys(config: HarnessConfig, located: Mapping[str, LocatedModel]) -> None:
    """Every ``--inputs KEY=FILE`` names a model of this run."""
    for key, _ in config.model_inputs:
        if key not in located:
            raise UserError(where=f"--inputs {key}=...", problem=f"no model of this run has the key {key!r}",
                            fix="use one of the run's model keys: " + ", ".join(sorted(located))
                                + " (`--model KEY=PATH` names a model)")


def _input_names(located: Mapping[str, LocatedModel], *, skip: Sequence[str]) -> dict[str, list[str]]:
    """Input names of the located models not loaded here (a shard's unassigned ones): graphs only."""
    return {name: [s.name for s in input_specs(load_model(found.spec().path, weights="lazy"))]
            for name, found in located.items() if name not in skip}
