"""Runner registry: ``make_runner(name, model)`` builds a runner registered under ``castguard.runners``.

Every runner, castguard's own (:mod:`harness.runners.builtin`) and third-party plugins alike, is found through
that entry-point group (:mod:`harness.runners.registry`, which documents the :class:`RunnerPlugin` protocol).
Backends are imported only when asked for; ``trt`` raises :class:`~harness.core.errors.RunnerUnavailable` when
TensorRT is absent, and a runner whose declared precisions miss the model's low type raises it too (the case is
skipped with that reason).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import onnx

from harness.core.errors import RunnerUnavailable
from harness.runners.base import Runner, RunResult
from harness.runners.registry import (
    BUILTIN,
    RunnerPlugin,
    low_types_in,
    registered,
    runner_names,
    runner_traits,
)
from harness.runners.traits import RunnerTraits, SpeedClaim

RUNNER_NAMES = BUILTIN
"""castguard's own runners; :func:`runner_names` adds the installed plugins."""
FP32_RUNNER = "ort"
"""The runner that makes and checks FP32 goldens (ORT's CPU provider: the FP32 reference)."""

__all__ = [
    "FP32_RUNNER",
    "RUNNER_NAMES",
    "RunResult",
    "Runner",
    "RunnerPlugin",
    "RunnerTraits",
    "SpeedClaim",
    "make_runner",
    "runner_names",
    "runner_traits",
]


def make_runner(
    name: str, model: onnx.ModelProto, *, model_dir: Path | None = None, providers: Sequence[str] = ()
) -> Runner:
    """A fresh, inactive runner. ``providers`` applies to runners that take them (``traits.takes_providers``)."""
    traits = runner_traits(name)  # an unknown name is a UserError
    if providers and not traits.takes_providers:
        raise ValueError(f"runner {name!r} takes no providers (its traits say takes_providers=False)")
    entry = registered()[name]
    plugin = entry.load()
    missing = sorted(low_types_in(model) - set(plugin.precisions))
    if missing:
        raise RunnerUnavailable(
            f"runner {name} ({entry.distribution} {entry.version}) runs "
            f"{', '.join(plugin.precisions)} only; this model holds {', '.join(missing)}"
        )
    if providers:
        runner: Runner = plugin(model, model_dir=model_dir, providers=providers)  # type: ignore[call-arg]
    else:
        runner = plugin(model, model_dir=model_dir)
    return runner
