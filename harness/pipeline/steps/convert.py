"""The convert and build-check steps: the case's converted model (cached), and whether TensorRT builds it."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from harness.data.keys import content_key
from harness.pipeline.build_check import cached_build
from harness.pipeline.cache import ContentCache
from harness.pipeline.caserun import BuildChecked, CaseEnv, CaseRun, Converted, Stop
from harness.pipeline.context import ModelContext
from harness.sweep import SweepPoint

if TYPE_CHECKING:  # the converter is imported when a case converts: a warm run's cache hits never load it
    from harness.convert import ConversionResult, ConvertOptions
    from harness.convert.plugins import ConvertRequest


def convert_cached(ctx: ModelContext, case: SweepPoint, cache: ContentCache) -> tuple[ConversionResult, float, bool]:
    """The case's conversion (from the cache when nothing changed), seconds spent, and whether it was a hit.
    Another converter's conversion or a candidate file: :mod:`harness.convert.dispatch`."""
    from harness.convert.plugins import CANDIDATE, ConvertRequest, converter_sources

    start = time.perf_counter()
    if case.converter == CANDIDATE:
        from harness.convert.dispatch import load_candidate

        shapes = {k: tuple(v.shape) for k, v in ctx.golden.feeds[0].items()}
        return load_candidate(Path(case.candidate), input_shapes=shapes), time.perf_counter() - start, False
    options = case.convert_options()
    if case.builtin_converter:
        key = content_key("convert", cache.fingerprint, ctx.spec.sha256, ctx.magnitudes_key, repr(options))
        make = lambda: _convert(ctx, options)  # noqa: E731
    else:
        request = ConvertRequest(
            model=ctx.model,
            model_path=ctx.spec.path,
            options=options,
            calibration=ctx.golden.feeds[:1],
            converter_options=dict(case.converter_options),
        )
        source = repr((converter_sources([case.converter]), case.converter_options))
        key = content_key("convert", cache.fingerprint, ctx.spec.sha256, source, repr(options))
        make = lambda: _run_converter(case.converter, request)  # noqa: E731
    result, hit = cache.conversion(key, make, weights_dir=ctx.spec.path.parent)
    return result, time.perf_counter() - start, hit


def _run_converter(name: str, request: ConvertRequest) -> ConversionResult:
    from harness.convert.dispatch import run_converter

    return run_converter(name, request)


def _convert(ctx: ModelContext, options: ConvertOptions) -> ConversionResult:
    from harness.convert import convert

    return convert(ctx.model, options=options, magnitudes=ctx.magnitudes, base_dir=ctx.spec.path.parent)


def check_runnable(run: CaseRun, env: CaseEnv) -> CaseRun:
    """Stop a case its runner cannot run at all (its declared traits; checked before converting)."""
    why = run.traits.cannot_run(run.point.runner, run.point.precision, run.providers)
    return run if why is None else replace(run, stop=Stop("cannot_run", why))


def convert_step(run: CaseRun, env: CaseEnv) -> CaseRun:
    conversion, seconds, hit = convert_cached(run.context, run.point, env.cache)
    converted = Converted(conversion=conversion, cached=hit, seconds=seconds)
    return replace(run, converted=converted, notes=(*run.notes, *conversion.notes))  # the converter's notes


def build_check_step(run: CaseRun, env: CaseEnv) -> CaseRun:
    """The build check when ``--trt-build-check`` asked for it (from the cache when built before)."""
    if not env.settings.trt_build_check or run.converted is None:
        return run
    start = time.perf_counter()
    build, skipped = cached_build(
        run.converted.conversion.model,
        model_dir=run.converted.model_dir(run.context),
        feed_shapes=[{k: a.shape for k, a in f.items()} for f in run.context.golden.feeds],
        cache=env.cache,
    )
    return replace(run, built=BuildChecked(build=build, skipped=skipped, seconds=time.perf_counter() - start))
