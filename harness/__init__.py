"""castguard: accuracy regression harness for mixed-precision ONNX.

The import package is ``harness``. Its public API is :data:`__all__` (Hypothesis style: import it from here,
``from harness import convert_model, make_runner, judge_outputs``; ``harness.convert`` is the converter's
package, so its pure ``convert`` function is exported as ``convert_model``); everything else is internal and may move. Names
are imported on first use, so ``import harness`` stays cheap and heavy libraries (onnxruntime, hypothesis,
tensorrt) load only in the modules that need them.

The stages, in data-flow order (docs/ARCHITECTURE.md): ``data`` (models, feeds, goldens) -> ``convert`` and
``runners`` -> ``sweep`` -> ``judge`` -> ``report`` -> ``run`` -> ``nightly`` -> ``search`` -> ``plugin``/``cli``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from harness.core.version import __version__

_API: dict[str, str] = {  # public name -> "module" or "module:attribute"
    # errors
    "HarnessError": "harness.core.errors",
    "UserError": "harness.core.errors",
    "InputDataError": "harness.core.errors",
    "ConversionError": "harness.core.errors",
    "RunnerUnavailable": "harness.core.errors",
    # data: models, feeds, goldens
    "resolve_model": "harness.data.models",
    "bundled_models_dir": "harness.data.models",
    "load_model": "harness.data.onnxfile",
    "input_specs": "harness.data.feeds",
    "cast_feeds": "harness.data.feeds",
    "InputRecipe": "harness.data.recipes",
    "recipe_for_file": "harness.data.recipes",
    "make_feeds": "harness.data.recipes",
    "GoldenStore": "harness.data.goldens",
    # convert and runners
    "ConvertOptions": "harness.convert",
    "ConversionResult": "harness.convert",
    "Magnitudes": "harness.convert",
    "convert_model": "harness.convert:convert",
    "collect_magnitudes": "harness.convert",
    "convert_to_mixed_precision": "harness.convert",
    "make_runner": "harness.runners",
    "Runner": "harness.runners",
    "RunResult": "harness.runners",
    "RUNNER_NAMES": "harness.runners",
    "declared_precisions": "harness.runners.tensorrt.precision_diff",
    # sweep and judge
    "SweepPoint": "harness.sweep",
    "SweepSpec": "harness.sweep",
    "expand": "harness.sweep",
    "Tolerance": "harness.judge.compare",
    "compare_outputs": "harness.judge.compare",
    "TolerancePolicy": "harness.judge.tolerances",
    "judge_outputs": "harness.judge.paired",
    "first_divergence": "harness.diagnose",
    "ModelPair": "harness.diagnose",
    # report and the main job
    "Report": "harness.report",
    "CaseRecord": "harness.report",
    "read_report": "harness.report",
    "HarnessConfig": "harness.config",
    "AccuracySession": "harness.pipeline.session",
    "Case": "harness.pipeline.session",
    # users' own tests (the castguard fixture's domain half) and runner plugins
    "Checker": "harness.check",
    "CheckResult": "harness.check",
    "RunnerPlugin": "harness.runners",
    "runner_names": "harness.runners",
}

__all__ = ["__version__", *sorted(_API)]


def __getattr__(name: str) -> Any:
    """Import a public name from its home module on first use (PEP 562)."""
    home = _API.get(name)
    if home is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    module, _, attr = home.partition(":")
    return getattr(importlib.import_module(module), attr or name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # the same names, for type checkers and IDEs
    from harness.check import Checker, CheckResult
    from harness.config import HarnessConfig
    from harness.convert import (
        ConversionResult,
        ConvertOptions,
        Magnitudes,
        collect_magnitudes,
        convert_to_mixed_precision,
    )
    from harness.convert import convert as convert_model
    from harness.core.errors import ConversionError, HarnessError, InputDataError, RunnerUnavailable, UserError
    from harness.data.feeds import cast_feeds, input_specs
    from harness.data.goldens import GoldenStore
    from harness.data.models import bundled_models_dir, resolve_model
    from harness.data.onnxfile import load_model
    from harness.data.recipes import InputRecipe, make_feeds, recipe_for_file
    from harness.diagnose import ModelPair, first_divergence
    from harness.judge.compare import Tolerance, compare_outputs
    from harness.judge.paired import judge_outputs
    from harness.judge.tolerances import TolerancePolicy
    from harness.pipeline.session import AccuracySession, Case
    from harness.report import CaseRecord, Report, read_report
    from harness.runners import RUNNER_NAMES, Runner, RunnerPlugin, RunResult, make_runner, runner_names
    from harness.runners.tensorrt.precision_diff import declared_precisions
    from harness.sweep import SweepPoint, SweepSpec, expand
