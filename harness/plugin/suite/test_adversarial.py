"""castguard's adversarial search (marker ``adversarial``: ``pytest --model X -m adversarial`` runs only it).

For each model and each conversion of the sweep (the same cases as ``test_low_precision``, searched once per
conversion on ``emulate``), Hypothesis looks for an input on which the converted model misses its FP32
golden, climbing on error/tolerance and shrinking what it finds. The search domain is ``--val-range`` (and
``--input-shapes``); without it, every value the converted model's inputs can hold. A failure prints the
shrunk input and the replay command; the input is saved under ``<report-dir>/adversarial/<model>/``.
The work is :func:`harness.pipeline.hunt.search_case`; this file only reports it.
"""

from __future__ import annotations

import pytest
from hypothesis import settings

from harness.core.errors import UserError
from harness.pipeline.hunt import failure_message, search_case
from harness.pipeline.session import AccuracySession, Case

pytestmark = pytest.mark.adversarial


def test_adversarial(castguard_case: Case, castguard_session: AccuracySession, request: pytest.FixtureRequest) -> None:
    case = castguard_case.case
    first_runner = castguard_session.config.sweep.runners[0]
    if case.runner != first_runner:
        pytest.skip(f"the adversarial search runs on emulate once per conversion (see the {first_runner} case)")
    seed = request.config.getoption("hypothesis_seed", None)
    current = settings()  # the loaded profile
    note = (
        f"profile {settings.get_current_profile_name()}, derandomize={current.derandomize}, "
        f"max_examples={current.max_examples}, seed={seed}"
    )
    try:
        found = search_case(castguard_session, castguard_case, hypothesis_note=note)
    except UserError as err:
        pytest.fail(str(err), pytrace=False)
    if found.failed:
        pytest.fail(failure_message(castguard_case, found), pytrace=False)
