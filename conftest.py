"""Repository pytest wiring: Hypothesis profiles, registered once here. castguard's own plugin is loaded by its
``pytest11`` entry point, not from here.

Profiles: ``dev`` (default, quick), ``ci`` (loaded when the ``CI`` environment variable is set: derandomized,
no deadline, no example database) and ``nightly`` (``pytest --hypothesis-profile nightly``: many more examples).
"""
from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=30, deadline=None)
settings.register_profile("ci", max_examples=60, derandomize=True, deadline=None, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("nightly", max_examples=2000, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "dev")
