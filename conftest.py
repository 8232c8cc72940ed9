"""Repository pytest wiring: the Hypothesis profiles (registered once, here) and the nightly seed. castguard's
own plugin is loaded by its ``pytest11`` entry point, not from here.

Profiles (the number is examples per Hypothesis test: generated models per converter-fuzz test, inputs
per adversarial search):

* ``dev`` (the default): 30 examples, example database on.
* ``ci`` (loaded when the ``CI`` environment variable is set, as ``.ci/run`` does): 60 examples,
  derandomized (the same examples on every run), no deadline; Hypothesis allows no database with
  derandomize.
* ``nightly`` (``pytest --hypothesis-profile nightly``): 5000 examples, example database on, and a seed
  chosen per run (``--hypothesis-seed N`` or ``CASTGUARD_HYPOTHESIS_SEED``, else a random one) that is
  printed in the report header (and kept in a castguard report's provenance) so any night can be replayed.
  The converter fuzzing is one test per precision: ``pytest tests/property --hypothesis-profile nightly -n 2``
  runs them side by side (10,000 generated models).

The example database is ``$CASTGUARD_HYPOTHESIS_DB`` or ``.hypothesis/examples`` here: cache that folder in
CI so that failures found by one nightly run are replayed first by the next.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _register_profiles() -> None:
    """The profiles above, loaded for this repository's own runs only. With an editable install, a user's
    ``pytest --model X`` in another folder also loads this file (pytest walks up from the suite inside
    ``harness/``): it must not import Hypothesis there, nor change a user's Hypothesis settings."""
    from hypothesis import HealthCheck, settings
    from hypothesis.database import DirectoryBasedExampleDatabase

    database = DirectoryBasedExampleDatabase(
        os.environ.get("CASTGUARD_HYPOTHESIS_DB") or HERE / ".hypothesis" / "examples"
    )
    slow_ok = [HealthCheck.too_slow, HealthCheck.data_too_large]
    settings.register_profile("dev", max_examples=30, deadline=None, database=database)
    settings.register_profile(
        "ci",
        max_examples=60,
        derandomize=True,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=slow_ok,
    )
    settings.register_profile(
        "nightly", max_examples=5000, deadline=None, database=database, print_blob=True, suppress_health_check=slow_ok
    )
    settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Register the profiles and give a nightly run a seed (before Hypothesis' own plugin reads
    ``--hypothesis-profile`` and ``--hypothesis-seed``)."""
    if Path(config.rootpath).resolve() != HERE:
        return
    _register_profiles()
    if config.getoption("hypothesis_profile", None) == "nightly" and not config.getoption("hypothesis_seed", None):
        config.option.hypothesis_seed = os.environ.get("CASTGUARD_HYPOTHESIS_SEED") or str(secrets.randbelow(2**32))


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = config.getoption("hypothesis_seed", None)
    if seed is None:
        return None
    profile = config.getoption("hypothesis_profile", None) or "dev"
    return f"castguard: hypothesis seed {seed} (replay: pytest --hypothesis-profile {profile} --hypothesis-seed {seed})"
