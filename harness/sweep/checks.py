"""The checks of one sweep setting each (the sweep, ``SweepPoint``, the sweep's sources and ``--runner`` share them):
one :class:`~harness.core.errors.UserError` naming the setting, the bad value and the fix.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence

from harness.core.dtypes import NODE_PRECISIONS
from harness.core.errors import UserError
from harness.runners.registry import runner_names


def check_limit(value: float, *, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
        raise UserError(
            where=where,
            problem=f"{value!r} is not a non-negative number",
            fix="give a magnitude such as 512, or inf to disable the rule",
        )


def check_choice(value: object, choices: tuple[str, ...], *, where: str) -> None:
    if value not in choices:
        raise UserError(
            where=where, problem=f"{value!r} is not one of {', '.join(choices)}", fix=f"use {' or '.join(choices)}"
        )


def check_runner(value: object, *, where: str) -> None:
    """The one runner-name check (the sweep, ``SweepPoint`` and ``--runner`` all use it)."""
    if value not in runner_names():
        raise UserError(
            where=where, problem=f"unknown runner {value!r}", fix=f"use one or more of: {', '.join(runner_names())}"
        )


def check_node_precisions(pairs: tuple[tuple[str, str], ...], *, where: str) -> None:
    for key, prec in pairs:
        if not key:
            raise UserError(where=where, problem="an empty node name or op type", fix="name a node or an op type")
        check_choice(prec, NODE_PRECISIONS, where=f"{where} [{key!r}]")
    if list(pairs) != sorted(pairs):
        raise UserError(
            where=where,
            problem="node precisions are not sorted by key",
            fix="build them with parse_node_precisions() so ids stay order-independent",
        )
    check_unique([key for key, _ in pairs], where=where)


def check_unique(values: Sequence[Hashable], *, where: str) -> None:
    dupes = [value for value, count in Counter(values).items() if count > 1]
    if dupes:
        raise UserError(
            where=where, problem=f"repeated value(s): {', '.join(map(repr, dupes))}", fix="list each value once"
        )
