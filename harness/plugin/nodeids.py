"""Which pytest node ids are sweep cases, and their parameter ids (the plugin and its shard hooks share them)."""

from __future__ import annotations

CASE_TESTS = ("test_low_precision[", "test_tuned[")  # the suite tests that are sweep cases (report records)


def is_case(nodeid: str) -> bool:
    return any(name in nodeid for name in CASE_TESTS)


def case_param(nodeid: str) -> str:
    """A sweep case test's parameter id (its ``Case.id``): ``...::test_low_precision[ID]`` -> ``ID``."""
    name = next(n for n in CASE_TESTS if n in nodeid)
    return nodeid.split(name, 1)[1].removesuffix("]")
