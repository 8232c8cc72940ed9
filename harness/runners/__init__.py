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
    low_types_in,
    registered,
    runner_names,
)

RUNNER_NAMES = BUILTIN
"""castguard's own runners; :func:`runner_names` adds the installed plugins."""

__all__ = ["RUNNER_NAMES", "RunResult", "Runner", "RunnerPlugin", "make_runner", "runner_names"]


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
    """A fresh, inactive runner. ``providers`` applies to ``ort`` only (default: CPU); ``options`` are the
    user's runner options (``--runner-option NAME:key=value``), passed to the plugin as ``options=`` when given.

    A plugin runs in a child process with a time-out (:class:`~harness.runners.isolated.IsolatedRunner`;
    ``timeout_s=None``: one that fits the model) unless it declares ``isolated = False``; castguard's own
    runners do. ``isolate`` overrides the declaration (the child itself builds the runner with ``False``)."""
    found = registered()
    if name not in found:
        raise UserError(
            where="--runner",
            problem=f"unknown runner {name!r}",
            fix=f"use one of: {', '.join(runner_names())} (or pip install the package that "
            f"registers {name!r} under castguard.runners)",
        )
    check_clash(name)
    if providers and name != "ort":
        raise ValueError(f"providers apply to the ort runner only, not {name!r}")
    entry = found[name]
    plugin = entry.load()
    missing = sorted(low_types_in(model) - set(plugin.precisions))
    if missing:
        raise RunnerUnavailable(
            f"runner {name} ({entry.distribution} {entry.version}) runs "
            f"{', '.join(plugin.precisions)} only; this model holds {', '.join(missing)}"
        )
    if isolate if isolate is not None else is_isolated(plugin):
        return IsolatedRunner(
            model,
            name=name,
            rounds_low_precision=plugin.rounds_low_precision,
            model_dir=model_dir,
            options=options,
            timeout_s=timeout_s,
        )
    return build_runner(name, plugin, model, model_dir=model_dir, providers=providers, options=options)
