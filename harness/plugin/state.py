"""Where the plugin keeps its one state object: the run's :class:`harness.conductor.CastguardRun` in ``config.stash``
under :data:`RUN_KEY` (the plugin's hooks and the ``castguard`` fixture both read it from here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # the conductor loads in pytest_configure, not at plugin import
    from harness.conductor import CastguardRun

RUN_KEY: pytest.StashKey[CastguardRun] = pytest.StashKey()  # the one plugin state object (harness.conductor)
