"""Sweep cases expected to fail: ``xfail = ["pattern", ...]`` in ``[tool.castguard]`` and ``--xfail PATTERN``.

A pattern is an :mod:`fnmatch` pattern over a case's id (``fp16-dmaxinf-*``) or over the test's id,
``<model>-<case id>`` (``mnist-*-dmaxinf-*``), so one model's known failures can be named alone. Pure: the
verdict (and the pytest plugin, which marks the test) call :func:`expected_failure`; a matching case that fails
is recorded as ``xfail``, one that passes as ``xpass`` (reported: the pattern no longer holds).
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase

from harness.core.errors import UserError

XFAIL_KEY = "xfail"


def expected_failure(model: str, case_id: str, patterns: Sequence[str]) -> str | None:
    """The first pattern that marks ``case_id`` of ``model`` as expected to fail, or None."""
    for pattern in patterns:
        if fnmatchcase(case_id, pattern) or fnmatchcase(f"{model}-{case_id}", pattern):
            return pattern
    return None


def xfail_reason(pattern: str) -> str:
    """The reason pytest shows for a case marked by ``pattern``."""
    return f"expected to fail: matches xfail pattern {pattern!r} ([tool.castguard] xfail / --xfail)"


def parse_patterns(values: Sequence[str], *, where: str) -> tuple[str, ...]:
    """Patterns from a config list or repeated options (comma-separated allowed); empty ones are errors."""
    found = tuple(p.strip() for value in values for p in value.split(","))
    if any(not p for p in found):
        raise UserError(
            where=where,
            problem=f"an empty xfail pattern in {list(values)!r}",
            fix='give fnmatch patterns over case ids, e.g. xfail = ["*-dmaxinf-*"]',
        )
    return found
