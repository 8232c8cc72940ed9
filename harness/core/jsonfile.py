"""Every JSON file castguard reads (golden sidecars, tuned plans, tune cache entries, history files, reports, shard
markers, input files) is read here: its syntax *and* the type of each field it uses are checked, and any defect is
one :class:`~harness.core.errors.UserError` (or the subclass the reader names) saying the file, the field and the
fix. Valid JSON of the wrong shape (a sidecar with ``"inputs": []``, a plan file holding ``null``) is then an
error message, never an ``AttributeError`` in the middle of a run.

- :func:`read_json` reads and parses a file;
- :meth:`JsonObject.of` checks that a parsed value is a JSON object, and :meth:`JsonObject.get` /
  :meth:`JsonObject.object` / :meth:`JsonObject.items` read one field of it with its type checked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast, overload

from harness.core.errors import UserError

__all__ = ["JsonObject", "json_type", "read_json"]

T = TypeVar("T")
_MISSING: Any = object()
_NAMES = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number", bool: "true/false"}


def json_type(value: object) -> str:
    """How a JSON value is called in an error message (``null``, ``a list``, ...)."""
    if value is None:
        return "null"
    for kind in (bool, dict, list, str, int, float):
        if isinstance(value, kind):
            return _NAMES[kind]
    return type(value).__name__


def read_json(path: Path, *, what: str, fix: str, error: type[UserError] = UserError) -> object:
    """The parsed content of ``path`` (``what``: how the file is called); missing, unreadable, not UTF-8 or not
    JSON: one ``error`` naming the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(where=path, problem=f"{what} not found", fix=fix) from None
    except (OSError, UnicodeDecodeError) as err:
        raise error(where=path, problem=f"unreadable {what}: {err}", fix=fix) from None
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as err:
        raise error(where=path, problem=f"unreadable {what}: not valid JSON ({err})", fix=fix) from None


@dataclass(frozen=True)
class JsonObject:
    """One JSON object read from ``path``; ``at`` is where it sits in the file (``""``: the whole file)."""

    path: Path
    data: Mapping[str, object]
    what: str
    fix: str
    error: type[UserError] = UserError
    at: str = ""

    @classmethod
    def of(cls, value: object, *, path: Path, what: str, fix: str, error: type[UserError] = UserError) -> JsonObject:
        """``value`` (a file's parsed content) as an object; anything else is one error naming the file."""
        if not isinstance(value, dict):
            raise error(where=path, problem=f"the {what} holds {json_type(value)}, not a JSON object", fix=fix)
        return cls(path=Path(path), data=value, what=what, fix=fix, error=error)

    @classmethod
    def read(cls, path: Path, *, what: str, fix: str, error: type[UserError] = UserError) -> JsonObject:
        """:func:`read_json` of a file that must hold one object."""
        return cls.of(read_json(path, what=what, fix=fix, error=error), path=path, what=what, fix=fix, error=error)

    def fail(self, name: str, problem: str) -> UserError:
        """The error for field ``name`` of this object."""
        return self.error(where=self.path, problem=f"{self.what}: field '{self.at}{name}' {problem}", fix=self.fix)

    @overload
    def get(self, name: str, kind: type[T]) -> T: ...
    @overload
    def get(self, name: str, kind: type[T], default: None) -> T | None: ...
    @overload
    def get(self, name: str, kind: type[T], default: T) -> T: ...

    def get(self, name: str, kind: type[T], default: Any = _MISSING) -> Any:
        """Field ``name``, which must be a ``kind`` (``float`` accepts integers; ``int`` refuses true/false); an
        absent field (or null, when a default is given) is ``default``, or an error when there is none."""
        value = self.data.get(name, _MISSING)
        if value is _MISSING or (value is None and default is not _MISSING):
            if default is _MISSING:
                raise self.fail(name, "is missing")
            return default
        numeric = kind is float and isinstance(value, int) and not isinstance(value, bool)
        if (isinstance(value, bool) and kind is int) or not (isinstance(value, kind) or numeric):
            raise self.fail(name, f"is {json_type(value)}, expected {_NAMES.get(kind, kind.__name__)}")
        return float(cast(float, value)) if numeric else value

    def object(self, name: str, *, optional: bool = False) -> JsonObject:
        """Field ``name`` as an object (``optional``: absent or null is an empty one)."""
        value = self.get(name, dict, {} if optional else _MISSING)
        return JsonObject(self.path, value, self.what, self.fix, self.error, f"{self.at}{name}.")

    def items(self, name: str, kind: type[T], *, default: list[T] | None = None) -> list[T]:
        """Field ``name``: a list whose every item is a ``kind``."""
        values = self.get(name, list) if default is None else self.get(name, list, default)
        for index, value in enumerate(values):
            if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
                raise self.fail(name, f"item {index} is {json_type(value)}, expected {_NAMES.get(kind, kind.__name__)}")
        return cast(list[T], values)
