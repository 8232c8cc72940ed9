"""Plugins from an entry-point group: the one reader of ``castguard.runners`` and ``castguard.converters``.

:func:`discover_group` reads a group once: every entry point by name, with the distribution and version it came
from (provenance), and the names two distributions claim (each registry decides what a clash means). castguard's
own entries missing from the group (metadata of an install made before the group existed) is a user error.
:meth:`Registered.load` imports the object an entry point names; an import error is the plugin's, named with its
package.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata

from harness.core.errors import UserError


@dataclass(frozen=True)
class Registered:
    """One discovered entry point: its group and name, the distribution and version it came from, and its target
    (``value``, e.g. ``"castguard_echo_runner:EchoRunner"``)."""

    group: str
    name: str
    distribution: str
    version: str
    value: str
    entry_point: metadata.EntryPoint

    @property
    def where(self) -> str:
        """The entry point, as an error message names it."""
        return f"entry point {self.name} = {self.value!r} of {self.distribution} {self.version} (group {self.group})"

    def load(self, *, option: str) -> object:
        """The object the entry point names; an import error is a UserError (``option``: the command-line option
        that picks a plugin, e.g. ``--runner``, named in the fix)."""
        try:
            return self.entry_point.load()
        except Exception as err:  # noqa: BLE001 - a plugin's import error is its own; name it and its package
            raise UserError(
                where=self.where,
                problem=f"it does not import: {type(err).__name__}: {err}",
                fix=f"fix or reinstall {self.distribution}, or drop {option} {self.name}",
            ) from None


@dataclass(frozen=True)
class Discovered:
    """A group as read: its entry points by name (a name two distributions claim maps to the first one read), and
    those names with both claims."""

    found: dict[str, Registered]
    clashes: dict[str, tuple[Registered, Registered]]


def discover_group(group: str, *, builtin: Sequence[str], kind: str) -> Discovered:
    """Read the entry-point ``group``; ``builtin``: the names castguard's own pyproject.toml registers, ``kind``:
    what the group holds ("runner", "converter"), for the error when they are missing."""
    found: dict[str, Registered] = {}
    clashes: dict[str, tuple[Registered, Registered]] = {}
    described: dict[object, tuple[str, str]] = {}  # a distribution's name and version: its metadata parsed once
    for ep in metadata.entry_points(group=group):
        dist = ep.dist
        if dist is not None and dist not in described:
            meta = dist.metadata
            described[dist] = (meta["Name"], meta["Version"])
        distribution, version = described[dist] if dist is not None else ("unknown", "unknown")
        entry = Registered(
            group=group,
            name=ep.name,
            distribution=distribution,
            version=version,
            value=ep.value,
            entry_point=ep,
        )
        other = found.get(ep.name)
        if other is not None and (other.distribution, other.value) != (entry.distribution, entry.value):
            clashes[ep.name] = (other, entry)
        found.setdefault(ep.name, entry)
    missing = [name for name in builtin if name not in found]
    if missing:
        raise UserError(
            where=f"entry points {group}",
            problem=f"castguard's own {kind}s are not registered ({', '.join(missing)}): the installed castguard "
            f"metadata predates {kind} plugins",
            fix="reinstall castguard: pip install -e . (or pip install castguard)",
        )
    return Discovered(found=found, clashes=clashes)


def builtin_first(found: Mapping[str, Registered], builtin: Sequence[str]) -> tuple[str, ...]:
    """Every name of a group as an option accepts them: castguard's own first, then installed plugins by name."""
    return (*builtin, *sorted(n for n in found if n not in builtin))
