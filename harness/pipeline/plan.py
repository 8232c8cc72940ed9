"""Planning an accuracy run: locate and load its models, make their feeds, and list its cases (no pytest).

:func:`plan_session` does the I/O of a run's start (bad models, input files or options are user errors before any
test runs) and returns a :class:`SessionPlan`; :class:`harness.pipeline.session.AccuracySession` holds it and runs the
cases. Each model is a :class:`LoadedModel`; each test a :class:`Case` (model x :class:`harness.sweep.SweepPoint`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import onnx

from harness.config import HarnessConfig
from harness.core.errors import UserError
from harness.data.feeds import input_specs
from harness.data.models import LocatedModel, ModelSpec, locate_model
from harness.data.onnxfile import load_model
from harness.data.recipes import Feed, InputRecipe, make_feeds, plan_recipe, recipe_for_file, recipe_lines
from harness.data.scoping import InputOptions, check_every_name_used
from harness.pipeline.build_check import build_check_enabled
from harness.sweep import SweepPoint, expand
from harness.sweep.shards import ShardWork, assign


@dataclass(frozen=True)
class LoadedModel:
    """A resolved, checked model with its input recipe and the feeds that recipe makes (validated)."""

    spec: ModelSpec
    model: onnx.ModelProto
    recipe: InputRecipe
    feeds: list[Feed]
    input_lines: tuple[str, ...] = ()  # how the inputs were made (recipe_lines): terminal summary and report
    bundled_inputs: bool = False  # a bundled model's own inputs or ranges (a rerun command need not say them)

    @property
    def inputs_note(self) -> str:
        return "inputs: " + "; ".join(self.input_lines)


@dataclass(frozen=True)
class Case:
    """One low-precision test: a model and one point of the sweep."""

    model: str
    case: SweepPoint

    @property
    def id(self) -> str:
        return f"{self.model}-{self.case.id}"


@dataclass(frozen=True)
class SessionPlan:
    """What a run holds before any case runs: its models (this shard's), its cases, and the shard's assignment."""

    models: Mapping[str, LoadedModel]
    cases: tuple[Case, ...] = ()
    tuned_cases: tuple[Case, ...] = ()
    shard_work: ShardWork | None = None
    trt_build_check: bool = False  # resolved: True only where TensorRT is installed


def plan_session(config: HarnessConfig, *, bundled_dir: Path) -> SessionPlan:
    """Locate every model, load this shard's (with their feeds) and expand the sweep; see the module docstring."""
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
    shard_work = (
        None if config.shard is None else assign(list(located), [c.id for c in (*sweep_cases, *tuned)], config.shard)
    )
    models = load_models(config, located, bundled_dir=bundled_dir, shard_work=shard_work)

    def mine(model: str, case: SweepPoint) -> bool:
        return shard_work is None or shard_work.runs(model, case.id)

    candidates = candidate_cases(config, models)
    return SessionPlan(
        models=models,
        shard_work=shard_work,
        cases=tuple(Case(n, c) for n in models for c in sweep_cases if mine(n, c))
        + tuple(c for c in candidates if shard_work is None or mine(c.model, sweep_cases[0])),  # with its first case
        tuned_cases=tuple(Case(n, c) for n in models for c in tuned if mine(n, c)),
        trt_build_check=build_check_enabled(config.trt_build_check),
    )


def load_models(
    config: HarnessConfig,
    located: Mapping[str, LocatedModel],
    *,
    bundled_dir: Path,
    shard_work: ShardWork | None = None,
) -> dict[str, LoadedModel]:
    """Load the located models (a shard: its assigned ones), each with its input recipe and feeds."""
    models: dict[str, LoadedModel] = {}
    several = len(located) > 1  # then each model takes the options naming its inputs
    inputs: dict[str, list[str]] = {}
    own_files = dict(config.model_inputs)
    for name, found in located.items():
        if shard_work is not None and name not in shard_work.assigned_models:
            continue
        spec, model = found.load()  # big weights stay on disk (model_dir)
        names = [s.name for s in input_specs(model)]
        if name not in own_files:  # a model with its own file takes no options
            inputs[name] = names
        recipe, bundled = default_recipe(spec, config, bundled_dir=bundled_dir, input_names=names if several else None)
        recipe = plan_recipe(model, recipe, where=str(spec.path))
        feeds = make_feeds(model, recipe, where=str(spec.path))
        models[spec.name] = LoadedModel(
            spec=spec,
            model=model,
            recipe=recipe,
            feeds=feeds,
            input_lines=tuple(recipe_lines(model, recipe)),
            bundled_inputs=bundled,
        )
    if several and config.inputs_file is None:
        check_every_name_used(
            InputOptions(val_ranges=config.val_ranges, input_shapes=config.input_shapes),
            inputs,
            more=lambda: _input_names(located, skip=[*models, *own_files]),
            own_files=bool(config.model_inputs),
        )
    return models


def default_recipe(
    spec: ModelSpec, config: HarnessConfig, *, bundled_dir: Path, input_names: Sequence[str] | None = None
) -> tuple[InputRecipe, bool]:
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
        from harness.data.models import bundled_registry

        test_models = bundled_registry()

        bundled_inputs = test_models.default_inputs(spec.name)
        if bundled_inputs is not None:
            return recipe_for_file(bundled_inputs, seed=config.seed), True
        ranges = tuple((n, lo, hi) for n, (lo, hi) in sorted(test_models.default_val_ranges(spec.name).items()))
        return InputRecipe(seed=config.seed, iterations=config.iterations, val_ranges=ranges), True
    return InputRecipe(
        seed=config.seed, iterations=config.iterations, val_ranges=options.val_ranges, input_shapes=options.input_shapes
    ), False


def candidate_cases(config: HarnessConfig, models: Mapping[str, LoadedModel]) -> tuple[Case, ...]:
    """``--candidate KEY=FILE``: one case per runner for each loaded model that has a candidate, its signature
    checked against the FP32 model's first (a mismatch is one error naming both)."""
    if not config.candidates:
        return ()
    from harness.convert.dispatch import check_candidate
    from harness.convert.plugins import CANDIDATE

    cases = []
    for key, path in config.candidates:
        if key not in models:
            if config.shard is None:
                raise UserError(
                    where=f"--candidate {key}={path}",
                    problem=f"no model of this run has the key {key!r}",
                    fix="use one of the run's model keys: " + ", ".join(sorted(models)),
                )
            continue
        precision = check_candidate(models[key].model, models[key].spec.path, path)
        for runner in config.sweep.runners:
            case = SweepPoint(converter=CANDIDATE, candidate=str(path), runner=runner, precision=precision)
            cases.append(Case(key, case))
    return tuple(cases)


def tuned_case(precision: str) -> SweepPoint:
    """The ``pytest --tune`` case of one precision: the search starts from the low type's range (data_max)."""
    from harness.convert.options import LOW_PRECISIONS
    from harness.core.dtypes import LOW_MAX

    return SweepPoint(precision=precision, data_max=LOW_MAX[LOW_PRECISIONS[precision]], tuned=True)


def _duplicate(ref: str, spec: LocatedModel, other: LocatedModel) -> UserError:
    if spec.path == other.path:
        return UserError(where=f"--model {ref}", problem="model given twice", fix="pass each model once")
    return UserError(
        where=f"--model {ref}",
        problem=f"key {spec.name!r} is also used by {other.path}; goldens are stored by key",
        fix=f"name one of them: --model OTHERKEY={spec.path}",
    )


def _check_input_keys(config: HarnessConfig, located: Mapping[str, LocatedModel]) -> None:
    """Every ``--inputs KEY=FILE`` names a model of this run."""
    for key, _ in config.model_inputs:
        if key not in located:
            raise UserError(
                where=f"--inputs {key}=...",
                problem=f"no model of this run has the key {key!r}",
                fix="use one of the run's model keys: "
                + ", ".join(sorted(located))
                + " (`--model KEY=PATH` names a model)",
            )


def _input_names(located: Mapping[str, LocatedModel], *, skip: Sequence[str]) -> dict[str, list[str]]:
    """Input names of the located models not loaded here (a shard's unassigned ones): graphs only."""
    return {
        name: [s.name for s in input_specs(load_model(found.spec().path, weights="lazy"))]
        for name, found in located.items()
        if name not in skip
    }
