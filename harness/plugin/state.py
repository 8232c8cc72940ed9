"""The plugin's one state object, :class:`PluginState` in ``config.stash`` (the plugin's hooks and the ``castguard``
fixture both read it from here): the run's :class:`harness.conductor.CastguardRun`, built on first need
(:func:`ensure_run`, through the builder the main plugin's ``pytest_configure`` leaves here), with the run id an
xdist controller handed its workers (:func:`workers_run_id`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # the conductor loads in pytest_configure, not at plugin import
    from harness.conductor import CastguardRun


@dataclass
class PluginState:
    """The plugin's one state object (``config.stash[STATE_KEY]``)."""

    run: CastguardRun | None = None
    """Built on first need (:func:`ensure_run`)."""
    owned_elsewhere: tuple[str, ...] = ()
    """castguard's short option names that another plugin or conftest owns (:mod:`harness.plugin.aliases`)."""
    reserved_run_id: str | None = None
    """xdist controller whose run is not built: the run id handed to its workers (:func:`workers_run_id`), which
    the run takes at construction if a worker's ``castguard`` fixture wrote cases."""
    fixture_used: bool = False
    """xdist controller: a worker's test used the ``castguard`` fixture (:func:`finishing_run` builds the run)."""
    build: Callable[[pytest.Config], CastguardRun] | None = None
    """Builds and starts the run (the main plugin's, set in its ``pytest_configure``)."""


STATE_KEY: pytest.StashKey[PluginState] = pytest.StashKey()


def state(config: pytest.Config) -> PluginState:
    return config.stash.setdefault(STATE_KEY, PluginState())


def current_run(config: pytest.Config) -> CastguardRun | None:
    """This process's run, if it was built."""
    return state(config).run


def ensure_run(config: pytest.Config) -> CastguardRun:
    """This process's run, built (and started) on first need."""
    plugin_state = state(config)
    if plugin_state.run is None:
        assert plugin_state.build is not None, "the castguard plugin's pytest_configure sets the builder"
        plugin_state.run = plugin_state.build(config)
    return plugin_state.run


def workers_run_id(config: pytest.Config) -> str:
    """xdist controller: the run id its workers write into: the run's, or, while no castguard option built it, one
    reserved now (castguard's machinery stays unloaded unless a worker's test uses the ``castguard`` fixture)."""
    plugin_state = state(config)
    if plugin_state.run is not None and plugin_state.run.run_id is not None:
        return plugin_state.run.run_id
    if plugin_state.reserved_run_id is None:
        from harness.core.runid import new_run_id

        plugin_state.reserved_run_id = new_run_id()
    return plugin_state.reserved_run_id


def finishing_run(config: pytest.Config) -> CastguardRun | None:
    """The run to finish at session end: built now on an xdist controller whose workers used the fixture."""
    return ensure_run(config) if state(config).fixture_used else current_run(config)
