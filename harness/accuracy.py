"""The accuracy workflow behind ``pytest --model``: goldens, low-precision cases, verdicts (no pytest here).

:class:`AccuracySession` is built once per pytest process from a :class:`HarnessConfig`; it resolves and loads
every model and makes its feeds up front (bad models, input files or options are user errors before any test
runs), caches goldens and converted models
for the session only, and returns an :class:`Outcome` per test for the plugin to turn into pass/fail/skip.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import onnx

from harness.compare import CompareResult, Tolerance, compare_iterations
from harness.config import HarnessConfig
from harness.errors import UserError
from harness.goldens import Golden, GoldenStore, ensure_golden
from harness.inputs import Feed, InputRecipe, describe_inputs, input_specs, make_feeds, recipe_for_file
from harness.input_files import cast_feeds
from harness.models import ModelSpec, load_model, resolve_model
from harness.runners import make_runner
from harness.runners.ort import CPU

if TYPE_CHECKING:
    from harness.convert import ConversionResult

GOLDEN_PRODUCER = f"ort[{CPU}]"
# FP32 rerun of the golden inputs: only kernel-order noise is allowed (fp32 eps is 1.2e-7).
FP32_TOLERANCE = Tolerance(atol=1e-5, rtol=1e-4)
Status = Literal["pass", "fail", "not-oracle", "unavailable"]


@dataclass(frozen=True)
class LoadedModel:
    """A resolved, checked model with its input recipe and the feeds that recipe makes (validated)."""

    spec: ModelSpec
    model: onnx.ModelProto
    recipe: InputRecipe
    feeds: list[Feed]


@dataclass(frozen=True)
class LowPrecisionCase:
    """One low-precision check: a model converted with the converter's defaults, run on one runner."""

    model: str
    precision: str = "fp16"
    setting: str = "default"
    runner: str = "emulate"

    @property
    def id(self) -> str:
        return f"{self.model}-{self.precision}-{self.setting}-{self.runner}"


@dataclass(frozen=True)
class Outcome:
    """What a suite test reports: ``fail`` -> pytest.fail, ``not-oracle``/``unavailable`` -> pytest.skip."""

    status: Status
    message: str = ""
    comparison: CompareResult | None = None
    runner: str = ""


def build_cases(models: list[str], runners: tuple[str, ...]) -> list[LowPrecisionCase]:
    """The low-precision cases for now: fp16 with the converter's defaults, per model and runner."""
    return [LowPrecisionCase(model=m, runner=r) for m in models for r in runners]


def default_recipe(spec: ModelSpec, config: HarnessConfig, *, bundled_dir: Path) -> InputRecipe:
    """The input recipe for a model: the user's options, else a bundled model's own inputs or ranges."""
    if config.inputs_file is not None:
        return recipe_for_file(config.inputs_file, seed=config.seed)
    is_bundled = spec.path.is_relative_to(bundled_dir.resolve())
    if is_bundled and not config.val_ranges and not config.input_shapes:
        import test_models

        bundled_inputs = test_models.default_inputs(spec.name)
        if bundled_inputs is not None:
            return recipe_for_file(bundled_inputs, seed=config.seed)
        ranges = tuple((n, lo, hi) for n, (lo, hi) in sorted(test_models.default_val_ranges(spec.name).items()))
        return InputRecipe(seed=config.seed, iterations=config.iterations, val_ranges=ranges)
    return InputRecipe(seed=config.seed, iterations=config.iterations, val_ranges=config.val_ranges,
                       input_shapes=config.input_shapes)


class AccuracySession:
    """Per-process state of one accuracy run; see the module docstring."""

    def __init__(self, config: HarnessConfig, *, bundled_dir: Path) -> None:
        self.config = config
        self.store = GoldenStore(config.goldens_dir)
        self.models: dict[str, LoadedModel] = {}
        for ref in config.models:
            spec = resolve_model(ref, search_dir=bundled_dir)
            if spec.name in self.models:
                raise _duplicate(ref, spec, self.models[spec.name].spec)
            model = load_model(spec.path)
            recipe = default_recipe(spec, config, bundled_dir=bundled_dir)
            feeds = make_feeds(model, recipe, where=str(spec.path))
            self.models[spec.name] = LoadedModel(spec=spec, model=model, recipe=recipe, feeds=feeds)
        self.cases = build_cases(list(self.models), config.runners)
        self._goldens: dict[str, Golden] = {}
        self._converted: dict[tuple[str, str], ConversionResult] = {}
        self._updated: set[str] = set()
        self.records: list[tuple[LowPrecisionCase, Outcome]] = []

    def golden(self, name: str, *, allow_update: bool) -> tuple[Golden, Path | None]:
        """The model's golden; writes it when missing (or once per session with --update-goldens)."""
        loaded = self.models[name]
        update = allow_update and self.config.update_goldens and name not in self._updated
        if name in self._goldens and not update:
            return self._goldens[name], None
        golden, written = ensure_golden(self.store, loaded.spec, loaded.recipe, update=update,
                                        produce=lambda: produce_golden(loaded))
        if update:
            self._updated.add(name)
        self._goldens[name] = golden
        return golden, written

    def check_fp32_golden(self, name: str) -> Outcome:
        """Ensure the golden exists and ORT FP32 still reproduces it on its own inputs."""
        golden, written = self.golden(name, allow_update=True)
        if written is not None:
            return Outcome("fail", _written_message(self.models[name], written, golden))
        loaded = self.models[name]
        result = make_runner("ort", loaded.model, model_dir=loaded.spec.path.parent).run(golden.feeds)
        comparison = compare_iterations(result.outputs, golden.outputs, tolerances={}, default=FP32_TOLERANCE)
        if comparison:
            return Outcome("pass", comparison=comparison, runner=result.runner)
        path = self.store.path_for(loaded.spec, loaded.recipe)
        return Outcome("fail", f"{name}: ORT FP32 no longer reproduces its golden\n{comparison.summary()}\n"
                               f"  golden: {path} (made by {golden.meta.get('producer')}, "
                               f"onnxruntime {golden.meta.get('versions', {}).get('onnxruntime')})\n"
                               f"  fix: if the runtime change is expected, rewrite it: "
                               f"pytest --model {name} --update-goldens", comparison=comparison, runner=result.runner)

    def converted(self, name: str, precision: str, golden: Golden) -> ConversionResult:
        """The converter's result for (model, precision) with default options, on the golden's inputs."""
        key = (name, precision)
        if key not in self._converted:
            from harness.convert import ConvertOptions, collect_magnitudes, convert

            model = self.models[name].model
            magnitudes = collect_magnitudes(model, feeds=golden.feeds)
            self._converted[key] = convert(model, options=ConvertOptions(low_precision_type=precision),
                                           magnitudes=magnitudes)
        return self._converted[key]

    def check_low_precision(self, case: LowPrecisionCase) -> Outcome:
        """Convert, run on the case's runner, compare with the golden; see :class:`Outcome`."""
        from harness.tolerances import TolerancePolicy

        golden, written = self.golden(case.model, allow_update=False)
        loaded = self.models[case.model]
        if written is not None:
            return Outcome("fail", _written_message(loaded, written, golden))
        conversion = self.converted(case.model, case.precision, golden)
        providers = self.config.ort_providers if case.runner == "ort" else ()
        runner = make_runner(case.runner, conversion.model, model_dir=loaded.spec.path.parent, providers=providers)
        result = runner.run(cast_feeds(golden.feeds, input_specs(conversion.model)))
        tolerances = TolerancePolicy().tolerances_for(precision=case.precision, goldens=golden.outputs)
        comparison = compare_iterations(result.outputs, golden.outputs, tolerances=tolerances, default=Tolerance())
        path = self.store.path_for(loaded.spec, loaded.recipe)
        if not result.rounds_low_precision:
            outcome = Outcome("not-oracle", f"{result.runner} computes {case.precision} in fp32; not a "
                              f"low-precision oracle - use --runner emulate (recorded: "
                              f"{'would pass' if comparison else 'would fail'})", comparison, result.runner)
        elif comparison:
            outcome = Outcome("pass", comparison=comparison, runner=result.runner)
        else:
            outcome = Outcome("fail", _failure_message(case, comparison, path, conversion, result.runner,
                                                       model_file=loaded.spec.path.name),
                              comparison, result.runner)
        self.records.append((case, outcome))
        return outcome


def produce_golden(loaded: LoadedModel) -> Golden:
    """Run the recipe's feeds on ORT CPU FP32."""
    result = make_runner("ort", loaded.model, model_dir=loaded.spec.path.parent).run(loaded.feeds)
    meta = {"producer": result.runner, "inputs": describe_inputs(loaded.model, loaded.recipe, loaded.feeds)}
    return Golden(feeds=loaded.feeds, outputs=result.outputs, meta=meta)


def _duplicate(ref: str, spec: ModelSpec, other: ModelSpec) -> UserError:
    if spec.path == other.path:
        return UserError(where=f"--model {ref}", problem="model given twice", fix="pass each model once")
    return UserError(where=f"--model {ref}", problem=f"name {spec.name!r} is also used by {other.path}; goldens "
                     "are stored by name", fix="rename one of the files")


def _written_message(loaded: LoadedModel, path: Path, golden: Golden) -> str:
    return (f"{loaded.spec.name}: golden written (it was missing, or --update-goldens): {path}\n"
            f"  {len(golden.feeds)} iteration(s) from {loaded.recipe.id}, produced by {golden.meta.get('producer')}\n"
            f"  fix: review it, commit it, and rerun: `pytest --model {loaded.spec.name}` then compares against it")


def _failure_message(case: LowPrecisionCase, comparison: CompareResult, golden_path: Path,
                     conversion: ConversionResult, runner: str, *, model_file: str) -> str:
    low, high, share = conversion.low_nodes, conversion.high_nodes, conversion.lowp_flop_share
    summary = "\n".join("  " + line for line in comparison.summary().splitlines())
    lines = [f"{case.model} [{case.id}] does not match its FP32 golden on {runner}:", summary,
             f"  golden: {golden_path}",
             f"  conversion: ConvertOptions(low_precision_type={case.precision!r}) defaults; {len(low)} node(s) in "
             f"{case.precision}, {len(high)} kept in fp32, {share:.0%} of FLOPs in {case.precision}",
             f"  fix: keep the sensitive nodes in fp32 (castguard convert --onnx_path {model_file} "
             "--nodes_to_exclude NAME / --op_types_to_exclude OP, or a lower --data_max), or, if this error is "
             f"acceptable, loosen [tool.castguard.tolerances] {case.precision}"]
    return "\n".join(lines)
