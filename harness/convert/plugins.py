"""Converter plugins: every converter, castguard's own too, comes from the entry-point group ``castguard.converters``.

A distribution registers a converter under the name users pass to ``--converter NAME`` (or ``converters = [...]``
in ``[tool.castguard.sweep]``)::

    [project.entry-points."castguard.converters"]
    halve = "castguard_halve_converter:HalveConverter"

The entry point names an object that follows :class:`ConverterPlugin`: it declares its :class:`ConverterTraits`
(which sweep settings it takes; settings it does not take are not swept for it) and, called with a
:class:`ConvertRequest`, returns the converted ``onnx.ModelProto`` (or castguard's own
:class:`~harness.convert.result.ConversionResult`). castguard reads what it needs (the low-precision FLOP share,
the low and FP32 nodes) from the converted graph's types (:mod:`harness.convert.described`), never from the
converter's word. A converter that cannot run here (its library is missing) raises
:class:`~harness.core.errors.RunnerUnavailable` with the reason and the install command: its cases are skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast, runtime_checkable

import numpy as np
import onnx

from harness.core.entrypoints import Registered, builtin_first, discover_group
from harness.core.errors import UserError

if TYPE_CHECKING:
    from harness.convert.magnitudes import Magnitudes
    from harness.convert.options import ConvertOptions
    from harness.convert.result import ConversionResult

GROUP = "castguard.converters"
BUILTIN = ("castguard", "ort-fp16", "autocast")  # registered by castguard's own pyproject.toml
CANDIDATE = "candidate"  # not a plugin: the user's own converted file (--candidate KEY=PATH)
OWN = "castguard"  # castguard's own converter: in-process, cached by its options, fully diagnosed
SETTINGS = (
    "precision",
    "data_max",
    "init_max",
    "exclusions",
    "keep_io_types",
    "node_precisions",
    "fp32_accumulation",
    "target",
    "fp32_casts",
)
"""The sweep settings a converter may take (the runner is never a converter setting)."""


@dataclass(frozen=True)
class ConverterTraits:
    """What a converter declares before it runs: the sweep settings it takes (a subset of :data:`SETTINGS`),
    the low precisions it makes, whether it needs castguard's reference magnitudes (in-process converters only),
    the library that does the work (provenance) and whether it runs in a child process (the default)."""

    takes: frozenset[str] = frozenset()
    precisions: tuple[str, ...] = ("fp16",)
    needs_magnitudes: bool = False
    library: str = ""
    in_child: bool = True
    """Run in a child process (:mod:`harness.convert.childconvert`): a crash there is one case error."""
    """The distribution that does the converting, when it is not the plugin's own (provenance names its version)."""

    def __post_init__(self) -> None:
        unknown = set(self.takes) - set(SETTINGS)
        if unknown:
            raise ValueError(f"unknown sweep settings {sorted(unknown)}; known: {', '.join(SETTINGS)}")


@dataclass(frozen=True, kw_only=True)
class ConvertRequest:
    """One conversion: the FP32 model (in memory and its file), the case's settings (those the converter does
    not take hold their defaults), the golden's feeds as calibration data, and castguard's magnitudes when the
    converter asked for them."""

    model: onnx.ModelProto
    model_path: Path
    options: ConvertOptions
    calibration: Sequence[Mapping[str, np.ndarray]] = ()
    magnitudes: Magnitudes | None = None
    converter_options: Mapping[str, str] = field(default_factory=dict)
    calibration_file: Path | None = None
    """The calibration feeds as one ``.npz`` (set in a child process; AutoCast reads the file as its CLI does)."""


@runtime_checkable
class ConverterPlugin(Protocol):
    """What an entry point of ``castguard.converters`` names."""

    traits: ConverterTraits

    def __call__(self, request: ConvertRequest) -> onnx.ModelProto | ConversionResult: ...


def load_plugin(entry: Registered) -> ConverterPlugin:
    """The converter plugin an entry point of the group names, checked: callable, with its traits."""
    plugin = entry.load(option="--converter")
    if not callable(plugin) or not isinstance(getattr(plugin, "traits", None), ConverterTraits):
        raise UserError(
            where=entry.where,
            problem="it is not a converter: it needs `traits = ConverterTraits(...)` and to be callable",
            fix="name an object with traits that is called as plugin(request) -> onnx.ModelProto",
        )
    return cast(ConverterPlugin, plugin)


@lru_cache(maxsize=1)
def registered() -> dict[str, Registered]:
    """Every converter of the group, by name (read once per process); a name claimed twice is a user error."""
    group = discover_group(GROUP, builtin=BUILTIN, kind="converter")
    for name, (other, entry) in group.clashes.items():
        raise UserError(
            where=f"converter {name!r} (group {GROUP})",
            problem=f"registered by both {other.distribution} ({other.value}) and {entry.distribution} ({entry.value})",
            fix="uninstall the plugin: pip uninstall "
            + next(d for d in (entry.distribution, other.distribution) if d != "castguard"),
        )
    return group.found


def converter_names() -> tuple[str, ...]:
    """Every converter ``--converter`` accepts: castguard's first, then installed plugins by name."""
    return builtin_first(registered(), BUILTIN)


def check_converter(value: object, *, where: str) -> None:
    """The one converter-name check (the sweep, ``SweepPoint`` and ``--converter``)."""
    if value == CANDIDATE:
        return
    if value not in converter_names():
        raise UserError(
            where=where,
            problem=f"unknown converter {value!r}",
            fix=f"use one or more of: {', '.join(converter_names())}",
        )


@cache
def traits_of(name: str) -> ConverterTraits:
    """A converter's declared traits (loads its entry point); the candidate takes no setting."""
    if name == CANDIDATE:
        return ConverterTraits(takes=frozenset(), precisions=("fp16", "bf16"))
    return load_plugin(registered()[name]).traits


def load_converter(name: str) -> ConverterPlugin:
    return load_plugin(registered()[name])


def converter_sources(names: Sequence[str]) -> tuple[tuple[str, str, str], ...]:
    """``(converter, distribution, version)`` for each known name (provenance); the candidate is left out. A
    converter that wraps another library names it too: ``castguard 0.9 (onnxruntime 1.32.0)``."""
    found = registered()
    rows = []
    for name in names:
        if name not in found:
            continue
        entry, version = found[name], found[name].version
        library = traits_of(name).library
        if library:
            try:
                version += f" ({library} {metadata.version(library)})"
            except metadata.PackageNotFoundError:
                version += f" ({library} not installed)"
        rows.append((name, entry.distribution, version))
    return tuple(rows)
