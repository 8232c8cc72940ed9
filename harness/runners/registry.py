"""Runner plugins: every runner, built-in or third-party, comes from the entry-point group ``castguard.runners``.

A distribution registers a runner under the name users pass to ``--runner NAME`` (or ``runner=`` in the
``castguard`` fixture)::

    [project.entry-points."castguard.runners"]
    echo = "castguard_echo_runner:EchoRunner"

The entry point names an object that follows :class:`RunnerPlugin`: called as ``plugin(model, model_dir=...)`` it
returns a fresh, inactive :class:`~harness.runners.base.Runner` (subclass ``Runner`` and implement
``activate_impl`` / ``infer_impl`` / ``deactivate_impl``), and it declares, before any model is built:

* ``precisions``: the low types it runs (``("fp16",)``, ``("fp16", "bf16")``); a model holding another low type
  is skipped with the reason (:class:`~harness.core.errors.RunnerUnavailable`), as the built-in runners skip;
* ``rounds_low_precision``: whether its fp16/bf16 tensors really hold fp16/bf16 values (a runner that computes in
  fp32 cannot judge a case: its cases are skipped with "would pass/fail" recorded);
* optionally ``traits``: a :class:`~harness.runners.traits.RunnerTraits` (reuse by precision plan, speed claim,
  providers, deployment target, CPU placement); the case pipeline reads these, never the runner's name.

A runner that cannot run here (its library or device is missing) raises ``RunnerUnavailable`` from its
constructor or ``activate``: the case is skipped with that message. castguard's own runners are registered the
same way in its ``pyproject.toml`` (:mod:`harness.runners.builtin`). The report's provenance names the
distribution and version each runner of the run came from (:func:`runner_sources`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Protocol, cast, runtime_checkable

import onnx

from harness.core.errors import UserError
from harness.runners.base import Runner
from harness.runners.traits import RunnerTraits

GROUP = "castguard.runners"
LOW_PRECISIONS = ("fp16", "bf16")
BUILTIN = ("ort", "ort-cuda", "emulate", "reference", "trt")  # registered by castguard's own pyproject.toml


@runtime_checkable
class RunnerPlugin(Protocol):
    """What an entry point of ``castguard.runners`` names (a ``Runner`` subclass with two class attributes does)."""

    precisions: tuple[str, ...]
    rounds_low_precision: bool

    def __call__(self, model: onnx.ModelProto, *, model_dir: Path | None = None) -> Runner: ...


@dataclass(frozen=True)
class RegisteredRunner:
    """One discovered runner: its name, where it came from, and what it declares."""

    name: str
    distribution: str
    version: str
    value: str  # the entry point's target, e.g. "castguard_echo_runner:EchoRunner"
    entry_point: metadata.EntryPoint

    def load(self) -> RunnerPlugin:
        where = f"entry point {self.name} = {self.value!r} of {self.distribution} {self.version} (group {GROUP})"
        try:
            plugin = self.entry_point.load()
        except Exception as err:  # noqa: BLE001 - a plugin's import error is its own; name it and its package
            raise UserError(
                where=where,
                problem=f"it does not import: {type(err).__name__}: {err}",
                fix=f"fix or reinstall {self.distribution}, or drop --runner {self.name}",
            ) from None
        check_plugin(plugin, where=where)
        return cast(RunnerPlugin, plugin)


def check_plugin(plugin: object, *, where: str) -> None:
    """The declarations every runner plugin must make (see :class:`RunnerPlugin`)."""
    precisions = getattr(plugin, "precisions", None)
    rounds = getattr(plugin, "rounds_low_precision", None)
    if not callable(plugin):
        raise UserError(
            where=where,
            problem="it names an object that cannot be called",
            fix="name a Runner subclass or a factory: plugin(model, model_dir=...) -> Runner",
        )
    if not isinstance(precisions, tuple) or not precisions or not set(precisions) <= set(LOW_PRECISIONS):
        raise UserError(
            where=where,
            problem=f"precisions is {precisions!r}",
            fix=f"declare a non-empty tuple of {', '.join(LOW_PRECISIONS)}: precisions = ('fp16',)",
        )
    traits = getattr(plugin, "traits", RunnerTraits())
    if not isinstance(traits, RunnerTraits):
        raise UserError(
            where=where,
            problem=f"traits is {traits!r}",
            fix="declare traits = harness.runners.traits.RunnerTraits(...) or leave it out (the defaults)",
        )
    if not isinstance(rounds, bool):
        raise UserError(
            where=where,
            problem=f"rounds_low_precision is {rounds!r}",
            fix="declare rounds_low_precision = True or False (whether fp16/bf16 values are really rounded)",
        )


@lru_cache(maxsize=1)
def registered() -> dict[str, RegisteredRunner]:
    """Every runner of the group, by name (read once per process). Two distributions claiming one name, or
    castguard's own runners missing (metadata of an install made before the group existed), are user errors."""
    found: dict[str, RegisteredRunner] = {}
    for ep in metadata.entry_points(group=GROUP):
        dist = ep.dist
        entry = RegisteredRunner(
            name=ep.name,
            distribution=dist.name if dist else "unknown",
            version=dist.version if dist else "unknown",
            value=ep.value,
            entry_point=ep,
        )
        other = found.get(ep.name)
        if other is not None and (other.distribution, other.value) != (entry.distribution, entry.value):
            raise UserError(
                where=f"runner {ep.name!r} (group {GROUP})",
                problem=f"registered by both {other.distribution} ({other.value}) and "
                f"{entry.distribution} ({entry.value})",
                fix="uninstall the plugin: pip uninstall "
                + next(d for d in (entry.distribution, other.distribution) if d != "castguard"),
            )
        found[ep.name] = entry
    missing = [name for name in BUILTIN if name not in found]
    if missing:
        raise UserError(
            where=f"entry points {GROUP}",
            problem="castguard's own runners are not registered "
            f"({', '.join(missing)}): the installed castguard metadata predates runner plugins",
            fix="reinstall castguard: pip install -e . (or pip install castguard)",
        )
    return found


def runner_traits(name: str) -> RunnerTraits:
    """What the runner registered as ``name`` declares (:class:`RunnerTraits`; the defaults when it declares
    none). An unknown name is a UserError naming the runners there are."""
    found = registered()
    if name not in found:
        raise UserError(
            where="--runner",
            problem=f"unknown runner {name!r}",
            fix=f"use one of: {', '.join(runner_names())} (or pip install the package that "
            f"registers {name!r} under castguard.runners)",
        )
    traits = getattr(found[name].load(), "traits", RunnerTraits())
    assert isinstance(traits, RunnerTraits), "check_plugin refuses other traits"
    return traits


def runner_names() -> tuple[str, ...]:
    """Every runner ``--runner`` accepts: castguard's first, then installed plugins by name."""
    found = registered()
    return (*BUILTIN, *sorted(n for n in found if n not in BUILTIN))


def runner_sources(names: Sequence[str]) -> tuple[tuple[str, str, str], ...]:
    """``(runner, distribution, version)`` for each known name (provenance); unknown names are left out."""
    found = registered()
    return tuple((n, found[n].distribution, found[n].version) for n in names if n in found)


def low_types_in(model: onnx.ModelProto) -> set[str]:
    """The low float types a model holds (graph I/O, value_info, initializers, Cast targets), as precision names."""
    names = {onnx.TensorProto.FLOAT16: "fp16", onnx.TensorProto.BFLOAT16: "bf16"}
    graph = model.graph
    elems = {v.type.tensor_type.elem_type for v in (*graph.input, *graph.output, *graph.value_info)}
    elems |= {t.data_type for t in graph.initializer}
    elems |= {a.i for n in graph.node if n.op_type == "Cast" for a in n.attribute if a.name == "to"}
    return {names[e] for e in elems if e in names}
