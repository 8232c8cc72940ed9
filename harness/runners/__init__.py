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

from harness.core.errors import RunnerUnavailable, UserError
from harness.runners.base import Runner, RunnerOptions, RunResult
from harness.runners.isolated import IsolatedRunner
from harness.runners.registry import (
    BUILTIN,
    RunnerPlugin,
    build_runner,
    check_clash,
    is_isolated,
    load_plugin,
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
    name: str,
    model: onnx.ModelProto,
    *,
    model_dir: Path | None = None,
    providers: Sequence[str] = (),
    options: RunnerOptions | None = None,
    timeout_s: float | None = None,
    isolate: bool | None = None,
) -> Runner:
    """A fresh, inactive runner. ``providers`` applies to runners that take them (``traits.takes_providers``);
    ``options`` are the user's runner options (``--runner-option NAME:key=value``), passed to the plugin as
    ``options=`` when given.

    A plugin runs in a child process with a time-out (:class:`~harness.runners.isolated.IsolatedRunner`;
    ``timeout_s=None``: one that fits the model) unless it declares ``isolated = False``; castguard's own
    runners do. ``isolate`` overrides the declaration (the child itself builds the runner with ``False``)."""
    traits = runner_traits(name)  # an unknown name is a UserError
    check_clash(name)
    if providers and not traits.takes_providers:
        raise ValueError(f"runner {name!r} takes no providers (its traits say takes_providers=False)")
    entry = registered()[name]
    plugin = load_plugin(entry)
    missing = sorted(low_types_in(model) - set(plugin.precisions))
    if missing:
        raise RunnerUnavailable(
            f"runner {name} ({entry.distribution} {entry.version}) runs "
            f"{', '.join(plugin.precisions)} only; this model holds {', '.join(missing)}"
        )
    if isolate if isolate is not None else is_isolated(plugin):
        if traits.takes_providers or traits.reports_cpu_placement:  # the child protocol carries neither
            raise UserError(
                where=f"runner {name!r}",
                problem="its traits (takes_providers / reports_cpu_placement) need it in castguard's process, "
                "but it runs in a child process",
                fix="declare isolated = False on the runner plugin",
            )
        return IsolatedRunner(
            model,
            name=name,
            rounds_low_precision=plugin.rounds_low_precision,
            model_dir=model_dir,
            options=options,
            timeout_s=timeout_s,
        )
    return build_runner(name, plugin, model, model_dir=model_dir, providers=providers, options=options)
