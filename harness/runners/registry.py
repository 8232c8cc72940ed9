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
* optionally ``isolated``: ``False`` lets it run in castguard's process; by default a plugin runs in a child
  process with a time-out (:mod:`harness.runners.isolated`), so a hang or crash fails only its case.

A plugin given runner options (``--runner-option NAME:key=value``) is called with ``options={key: value}`` too.

A runner that cannot run here (its library or device is missing) raises ``RunnerUnavailable`` from its
constructor or ``activate``: the case is skipped with that message. castguard's own runners are registered the
same way in its ``pyproject.toml`` (:mod:`harness.runners.builtin`). The report's provenance names the
distribution and version each runner of the run came from (:func:`runner_sources`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Protocol, cast, runtime_checkable

import onnx

from harness.core.entrypoints import Discovered, Registered, builtin_first, discover_group
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


def load_plugin(entry: Registered) -> RunnerPlugin:
    """The runner plugin an entry point of the group names, checked (:func:`check_plugin`)."""
    plugin = entry.load(option="--runner")
    check_plugin(plugin, where=entry.where)
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
def discover() -> Discovered:
    """Read the group (once per process). castguard's own runners missing is a user error; a name claimed twice
    is recorded, and an error only where that name is used (:func:`check_clash`), so a plugin that claims
    ``emulate`` cannot break runs that never use it."""
    return discover_group(GROUP, builtin=BUILTIN, kind="runner")


class _Registered:
    """``registered()``: every runner of the group, by name (a name two distributions claim maps to the first one
    read); ``registered.cache_clear()`` forgets the group (tests that install a plugin on sys.path)."""

    def __call__(self) -> dict[str, Registered]:
        return discover().found

    def cache_clear(self) -> None:
        discover.cache_clear()


registered = _Registered()


def check_clash(name: str) -> None:
    """One clear error where a runner name two distributions register is used (``--runner``, the fixture, the
    sweep, the default ``emulate``): neither is silently picked. Names nobody uses are never checked."""
    pair = discover().clashes.get(name)
    if pair is None:
        return
    first, second = pair
    plugin = next((e.distribution for e in pair if e.distribution != "castguard"), second.distribution)
    raise UserError(
        where=f"runner {name!r} (group {GROUP})",
        problem=f"registered by both {first.distribution} ({first.value}) and {second.distribution} "
        f"({second.value}); castguard will not guess which one you mean",
        fix=f"uninstall the plugin (pip uninstall {plugin}), or ask its authors to register it under another name",
    )


def build_runner(
    name: str,
    plugin: RunnerPlugin,
    model: onnx.ModelProto,
    *,
    model_dir: Path | None,
    providers: Sequence[str] = (),
    options: Mapping[str, object] | None = None,
) -> Runner:
    """The plugin's runner, built in this process: ``options=`` and ``providers=`` are passed only when given
    (a plugin written before runner options still builds); a class that declares no ``name`` is known by ``name``."""
    extra: dict[str, object] = {"providers": tuple(providers)} if providers else {}
    if options:
        extra["options"] = dict(options)
    runner: Runner = plugin(model, model_dir=model_dir, **extra)
    if not hasattr(type(runner), "name") and runner.name == type(runner).__name__:
        runner.name = name
    return runner


def is_isolated(plugin: object) -> bool:
    """Whether the plugin's runner runs in a child process: its ``isolated`` declaration, True when it makes none
    (a third-party runner is not trusted to leave castguard's process alive; castguard's own declare False)."""
    declared = getattr(plugin, "isolated", True)
    return declared if isinstance(declared, bool) else True


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
    traits = getattr(load_plugin(found[name]), "traits", RunnerTraits())
    assert isinstance(traits, RunnerTraits), "check_plugin refuses other traits"
    return traits


def prepare_runners(names: Sequence[str]) -> None:
    """Let each runner named (known, and run in this process) begin its start-up work (:meth:`Runner.prepare`)."""
    found = registered()
    for name in dict.fromkeys(names):
        try:
            plugin = load_plugin(found[name]) if name in found else None
        except UserError:
            continue  # a plugin that does not load: each case that uses it says so
        prepare = getattr(plugin, "prepare", None)
        if plugin is not None and not is_isolated(plugin) and callable(prepare):
            prepare()


def runner_names() -> tuple[str, ...]:
    """Every runner ``--runner`` accepts: castguard's first, then installed plugins by name."""
    return builtin_first(registered(), BUILTIN)


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
