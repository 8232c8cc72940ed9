"""castguard's short option names (``--model``) beside its namespaced ones (``--castguard-model``), never at a
user's expense.

castguard is installed into environments that hold other people's tests; a conftest with its own ``--model``
(common in ML repositories) must keep working. pytest loads entry-point plugins before the rootdir's conftests, so
castguard cannot know at ``pytest_addoption`` which short names will be free. Hence two steps:

* ``pytest_addoption``: every option of :data:`harness.options.PLUGIN_OPTIONS` as ``--castguard-NAME`` only
  (:func:`add_namespaced`);
* after the initial conftests are loaded (``pytest_load_initial_conftests``, the last moment before pytest parses
  the command line for real): each short form that no other plugin or conftest registered is added as an alias
  of the same option (:func:`add_short_forms`); the taken ones are returned, and the run says so once, in the
  header (:func:`header_line`).

Until the aliases exist pytest's early parse sees ``--model PATH`` as an unknown flag and a test path; the rootdir
correction (:mod:`harness.plugin.rootdir`) takes such values out (:func:`space_form_values`).

Which names are taken is read from ``Parser._groups`` (pytest keeps every registered option there, 8.0 to 9.x;
pyproject's ``pytest<10`` bound and tests/unit/plugin/test_aliases.py fence it).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from harness.options import PLUGIN_OPTIONS, prefixed

GROUP = "castguard"
GROUP_DESCRIPTION = "castguard: mixed-precision ONNX accuracy"


def add_namespaced(parser: pytest.Parser) -> None:
    """Every castguard option as ``--castguard-NAME`` (always free: the prefix is castguard's)."""
    group = parser.getgroup(GROUP, GROUP_DESCRIPTION)
    for option in PLUGIN_OPTIONS:
        option.register(group.addoption, flags=(prefixed(option.flag),))


def taken_names(parser: pytest.Parser) -> frozenset[str]:
    """Every option string registered so far, by pytest, plugins and conftests."""
    groups = getattr(parser, "_groups", None)
    if groups is None:
        raise pytest.UsageError(
            f"castguard: this pytest ({pytest.__version__}) keeps its options where castguard cannot see them; "
            "install a pytest castguard supports (pip install 'pytest>=8,<10')"
        )
    return frozenset(name for group in groups for option in group.options for name in option.names())


def add_short_forms(parser: pytest.Parser) -> tuple[str, ...]:
    """Add ``--NAME`` for every option whose short name is free; returns the short names another plugin or
    conftest owns (castguard's option is then ``--castguard-NAME`` only)."""
    group = parser.getgroup(GROUP, GROUP_DESCRIPTION)
    taken = taken_names(parser)
    owned_elsewhere = []
    for option in PLUGIN_OPTIONS:
        if option.flag in taken:
            owned_elsewhere.append(option.flag)
            continue
        option.register(group.addoption, flags=(option.flag,), help=f"short for {prefixed(option.flag)}")
    return tuple(owned_elsewhere)


def header_line(owned_elsewhere: Sequence[str]) -> str | None:
    """The one line that says which short names castguard left to their owners."""
    if not owned_elsewhere:
        return None
    mine = ", ".join(prefixed(flag) for flag in owned_elsewhere)
    return f"castguard: {', '.join(owned_elsewhere)} belong to another plugin or conftest here; castguard's are {mine}"


def space_form_values(args: Sequence[str]) -> list[str]:
    """The values of castguard's options written ``--opt VALUE`` (short or namespaced): not test paths."""
    value_flags = {
        flag for option in PLUGIN_OPTIONS if option.takes_value for flag in (option.flag, prefixed(option.flag))
    }
    return [value for flag, value in zip(args, args[1:]) if flag in value_flags]
