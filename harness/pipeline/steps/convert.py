"""The convert and build-check steps: the case's converted model (cached), and whether TensorRT builds it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from harness.convert import ConversionResult, convert
from harness.convert.dispatch import load_candidate, run_converter
from harness.convert.plugins import CANDIDATE, ConvertRequest, converter_sources
from harness.pipeline.build_check import cached_build
from harness.pipeline.cache import ContentCache, content_key
from harness.pipeline.context import ModelContext
from harness.runners.tensorrt.typed_build import TrtBuild
from harness.sweep import Case


@dataclass(frozen=True)
class Converted:
    """The case's conversion, whether it came from the content cache, and the seconds it took."""

    conversion: ConversionResult
    cached: bool
    seconds: float

    def model_dir(self, ctx: ModelContext) -> Path:
        """Where the converted model's external weights are (the original model's folder by default)."""
        return self.conversion.base_dir or ctx.spec.path.parent


@dataclass(frozen=True)
class BuildChecked:
    """The TensorRT build check of the converted model: its result, or why there is none ("" when not asked)."""

    build: TrtBuild | None = None
    skipped: str = ""
    seconds: float = 0.0


def convert_cached(ctx: ModelContext, case: Case, cache: ContentCache) -> tuple[ConversionResult, float, bool]:
    """The case's conversion (from the cache when nothing changed), seconds spent, and whether it was a hit.
    Another converter's conversion or a candidate file: :mod:`harness.convert.dispatch`."""
    start = time.perf_counter()
    if case.converter == CANDIDATE:
        shapes = {k: tuple(v.shape) for k, v in ctx.golden.feeds[0].items()}
        return load_candidate(Path(case.candidate), input_shapes=shapes), time.perf_counter() - start, False
    options = case.convert_options()
    if case.converter == "castguard":
        key = content_key("convert", cache.fingerprint, ctx.spec.sha256, ctx.magnitudes_key, repr(options))
        make = lambda: convert(ctx.model, options=options, magnitudes=ctx.magnitudes, base_dir=ctx.spec.path.parent)  # noqa: E731
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
        make = lambda: run_converter(case.converter, request)  # noqa: E731
    result, hit = cache.conversion(key, make, weights_dir=ctx.spec.path.parent)
    return result, time.perf_counter() - start, hit


def convert_step(ctx: ModelContext, case: Case, cache: ContentCache) -> Converted:
    conversion, seconds, hit = convert_cached(ctx, case, cache)
    return Converted(conversion=conversion, cached=hit, seconds=seconds)


def build_check_step(ctx: ModelContext, converted: Converted, *, enabled: bool, cache: ContentCache) -> BuildChecked:
    """The build check when ``--trt-build-check`` asked for it (from the cache when built before)."""
    if not enabled:
        return BuildChecked()
    start = time.perf_counter()
    build, skipped = cached_build(
        converted.conversion.model,
        model_dir=converted.model_dir(ctx),
        feed_shapes=[{k: a.shape for k, a in f.items()} for f in ctx.golden.feeds],
        cache=cache,
    )
    return BuildChecked(build=build, skipped=skipped, seconds=time.perf_counter() - start)
