"""Report <-> JSON-compatible dicts, strictly typed both ways.

Floats that JSON cannot hold are written as the strings ``"inf"``, ``"-inf"`` and ``"nan"`` so the file
is standard JSON (``jq``, browsers). Derived values (``case_id``, ``worst_error``, ``worst_max_rel``, ``summary``) are
written for readers of the file and checked on the way back: a ``case_id`` that does not match its
settings means the file was edited or made by another id scheme. Decoding errors raise
:class:`ReportFormatError` naming the JSON path; :mod:`harness.report.io` turns it into a UserError.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from functools import cache
from typing import Any, TypeVar

from harness.core.errors import UserError
from harness.report.legacy import upgrade_v1
from harness.report.model import SCHEMA_VERSION, CaseRecord, Provenance, Report, ShardInfo

T = TypeVar("T")
READABLE_VERSIONS = (1, SCHEMA_VERSION)  # schema 1 is upgraded on reading (harness.report.legacy)
_SPECIAL = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
_DERIVED: dict[type, tuple[str, ...]] = {CaseRecord: ("case_id", "worst_error", "worst_max_rel"), Report: ("summary",)}


class ReportFormatError(ValueError):
    """A report dict does not match its schema version."""


def report_to_dict(report: Report) -> dict[str, Any]:
    return {
        "schema_version": report.schema_version,
        "created": report.created,
        "provenance": _encode(report.provenance),
        "summary": report.counts(),
        "run_id": report.run_id,
        "interrupted": report.interrupted,
        "planned_cases": report.planned_cases,
        **({"shard": _encode(report.shard)} if report.shard is not None else {}),
        **({"shards": _encode(report.shards)} if report.shards else {}),
        "cases": [record_to_dict(case) for case in report.cases],
    }


def record_to_dict(record: CaseRecord) -> dict[str, Any]:
    """One case as JSON-compatible data (also how xdist workers can hand records to the controller)."""
    return {
        "case_id": record.case_id,
        **_encode(record),
        "worst_error": _number(record.worst_error),
        "worst_max_rel": _number(record.worst_max_rel),
    }


def record_from_dict(data: Any, *, path: str = "$") -> CaseRecord:
    """The inverse of :func:`record_to_dict`; raises ReportFormatError naming the bad key."""
    record: CaseRecord = _decode(CaseRecord, data, path)
    if data.get("case_id") != record.case_id:
        raise ReportFormatError(
            f"{path}.case_id: {data.get('case_id')!r} does not match its settings ({record.case_id!r})"
        )
    return record


def report_from_dict(data: Any) -> Report:
    if not isinstance(data, dict):
        raise ReportFormatError("$: the top level is not an object")
    version = data.get("schema_version")
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        raise ReportFormatError(f"$.schema_version: {version!r} is not one of {READABLE_VERSIONS}")
    if version == 1:
        data = upgrade_v1(data)
    report: Report = _decode(Report, data, "$")
    for index, raw in enumerate(data["cases"]):
        record_from_dict(raw, path=f"$.cases[{index}]")  # checks each stored case_id against its settings
    return report


SHARD_MARKER = 1  # the schema of runs/<id>/shard.json


def shard_marker_to_dict(shard: ShardInfo, *, provenance: Provenance) -> dict[str, Any]:
    """A shard's start marker: which shard of which assignment, and where it runs."""
    return {"castguard_shard": SHARD_MARKER, "shard": _encode(shard), "provenance": _encode(provenance)}


def shard_marker_from_dict(data: Any) -> tuple[ShardInfo, Provenance]:
    """The inverse of :func:`shard_marker_to_dict`; raises ReportFormatError naming the bad key."""
    if not isinstance(data, dict) or data.get("castguard_shard") != SHARD_MARKER:
        raise ReportFormatError(f"$: not a castguard shard marker of schema {SHARD_MARKER}")
    return _decode(ShardInfo, data.get("shard"), "$.shard"), _decode(Provenance, data.get("provenance"), "$.provenance")


def _number(value: float | None) -> float | str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def _encode(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, tuple):
        return [_encode(item) for item in obj]
    if isinstance(obj, float):
        return _number(obj)
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    raise TypeError(f"cannot encode {type(obj).__name__} in a report")


def _decode(hint: Any, value: Any, path: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _decode(inner, value, path)
    if origin is tuple:
        if not isinstance(value, list):
            raise ReportFormatError(f"{path}: expected a list, got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], item, f"{path}[{i}]") for i, item in enumerate(value))
        if len(value) != len(args):
            raise ReportFormatError(f"{path}: expected {len(args)} items, got {len(value)}")
        return tuple(_decode(a, item, f"{path}[{i}]") for i, (a, item) in enumerate(zip(args, value)))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _decode_dataclass(hint, value, path)
    return _decode_scalar(hint, value, path)


def _decode_scalar(hint: Any, value: Any, path: str) -> Any:
    if hint is float:
        if isinstance(value, str) and value in _SPECIAL:
            return _SPECIAL[value]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint in (str, bool):
        if isinstance(value, hint):
            return value
    else:
        raise TypeError(f"{path}: no decoder for {hint!r}")
    raise ReportFormatError(f"{path}: expected {hint.__name__}, got {value!r}")


def _decode_dataclass(cls: type[T], value: Any, path: str) -> T:
    if not isinstance(value, dict):
        raise ReportFormatError(f"{path}: expected an object, got {value!r}")
    klass: type = cls  # functools.cache keys on the class
    hints, fields = _schema(klass)
    unknown = sorted(set(value) - set(fields) - set(_DERIVED.get(cls, ())))
    if unknown:
        raise ReportFormatError(f"{path}: unknown key(s) {unknown}")
    kwargs = {}
    for name, field in fields.items():
        if name in value:
            kwargs[name] = _decode(hints[name], value[name], f"{path}.{name}")
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise ReportFormatError(f"{path}: missing key {name!r}")
    try:
        return cls(**kwargs)
    except (ValueError, UserError) as err:
        raise ReportFormatError(f"{path}: {err}") from err


@cache
def _schema(cls: type) -> tuple[dict[str, Any], dict[str, dataclasses.Field[Any]]]:
    """A report dataclass's field types and fields, resolved once per class (``get_type_hints`` evaluates every
    annotation of the class and its bases each time it is called: most of the time of reading a record)."""
    return typing.get_type_hints(cls), {f.name: f for f in dataclasses.fields(cls)}
