"""Runner options: ``--runner-option NAME:key=value`` (repeatable), ``[tool.castguard] runner_options = {NAME =
{key = value}}`` and ``runner_options=`` in the fixture, parsed into one hashable table; the runner plugin NAME is
built with ``options={key: value}`` (:func:`harness.runners.make_runner`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.core.errors import UserError

OptionValue = str | int | float | bool
RunnerOptionsTable = tuple[tuple[str, tuple[tuple[str, OptionValue], ...]], ...]
"""``((runner, ((key, value), ...)), ...)``, sorted: frozen and hashable, for configs and cache keys."""

_FIX = 'write --runner-option NAME:key=value, or [tool.castguard] runner_options = {NAME = {key = "value"}}'


def parse_runner_options(value: Any, *, where: str) -> RunnerOptionsTable:
    """The table from command-line strings (``NAME:key=value``) or a TOML/fixture mapping ``{NAME: {key: value}}``."""
    table: dict[str, dict[str, OptionValue]] = {}
    if isinstance(value, Mapping):
        for runner, options in value.items():
            if not isinstance(options, Mapping):
                raise UserError(
                    where=where, problem=f"{runner!r}: expected a table of options, got {options!r}", fix=_FIX
                )
            for key, item in options.items():
                _put(table, str(runner), str(key), item, where=where)
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        for text in value:
            runner, colon, pair = text.partition(":")
            key, equals, item = pair.partition("=")
            if not (colon and equals and runner.strip() and key.strip()):
                raise UserError(where=where, problem=f"cannot parse {text!r}", fix=_FIX)
            _put(table, runner.strip(), key.strip(), item.strip(), where=where)
    else:
        raise UserError(where=where, problem=f"expected a table of runner options, got {value!r}", fix=_FIX)
    return tuple((r, tuple(sorted(opts.items()))) for r, opts in sorted(table.items()))


def _put(table: dict[str, dict[str, OptionValue]], runner: str, key: str, item: object, *, where: str) -> None:
    if not runner or not key:
        raise UserError(where=where, problem="an empty runner name or option key", fix=_FIX)
    if not isinstance(item, (str, int, float, bool)):
        raise UserError(where=where, problem=f"{runner}:{key} is {item!r}, not a string, number or boolean", fix=_FIX)
    table.setdefault(runner, {})[key] = item


def options_for(table: RunnerOptionsTable, runner: str) -> dict[str, OptionValue]:
    """The options of one runner (empty when none were given)."""
    return dict(next((opts for name, opts in table if name == runner), ()))


def merge_options(base: RunnerOptionsTable, over: RunnerOptionsTable) -> RunnerOptionsTable:
    """``over``'s options on top of ``base``'s, key by key (the fixture's over the project's)."""
    merged = {name: dict(opts) for name, opts in base}
    for name, opts in over:
        merged.setdefault(name, {}).update(opts)
    return tuple((r, tuple(sorted(opts.items()))) for r, opts in sorted(merged.items()))
