"""One sweep value, read from a TOML table or a command-line option and checked on its own: lists of strings,
comma-separated lists, limits (``inf`` turns a rule off), keep_io_types choices, node precisions and converter
options. Each error names where the value came from (:mod:`harness.sweep.sources` applies them to the spec)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from harness.core.errors import UserError
from harness.sweep.checks import check_limit, check_node_precisions, check_unique

KEEP_IO_CHOICES = {"both": (False, True), "true": (True,), "false": (False,)}


def parse_node_precisions(text: str, *, where: str) -> tuple[tuple[str, str], ...]:
    """``"Add:fp16,Sub:fp32"`` -> ``(("Add", "fp16"), ("Sub", "fp32"))``, sorted by key.

    The syntax is the converter's (:func:`harness.convert.options.parse_node_precisions`); the sweep adds the
    order-independence and uniqueness its case ids need.
    """
    from harness.convert.options import parse_node_precisions as parse_pairs

    split(text, where=where)  # the sweep's stricter comma rule: no empty items
    return node_precision_pairs(list(parse_pairs(text, where=where)), where=where)


def node_precision_table(value: object, *, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping):
        raise UserError(where=where, problem="not a table", fix='write { Add = "fp16", Sub = "fp32" }')
    return node_precision_pairs(list(value.items()), where=where)


def node_precision_pairs(pairs: Sequence[tuple[str, object]], *, where: str) -> tuple[tuple[str, str], ...]:
    check_unique([key for key, _ in pairs], where=where)
    result = tuple(sorted((str(key), str(prec)) for key, prec in pairs))
    check_node_precisions(result, where=where)
    return result


def converter_options(value: object, *, where: str) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    """``[..converter_options.ort-fp16] model_type = "bert"``: each converter's own options, as strings."""
    if not isinstance(value, Mapping) or not all(isinstance(v, Mapping) for v in value.values()):
        raise UserError(
            where=where, problem="not a table of tables", fix="write [tool.castguard.sweep.converter_options.ort-fp16]"
        )
    rows = []
    for name, options in sorted(value.items()):
        bad = [k for k, v in options.items() if not isinstance(v, (str, int, float)) or isinstance(v, bool)]
        if bad:
            raise UserError(
                where=f"{where}.{name}",
                problem=f"{bad[0]!r} is not a string or a number",
                fix='e.g. model_type = "bert"',
            )
        rows.append((str(name), tuple(sorted((str(k), str(v)) for k, v in options.items()))))
    return tuple(rows)


def keep_io(value: object, *, where: str) -> tuple[bool, ...]:
    if isinstance(value, bool):
        return (value,)
    if isinstance(value, str) and value.lower() in KEEP_IO_CHOICES:
        return KEEP_IO_CHOICES[value.lower()]
    if isinstance(value, list) and value and all(isinstance(v, bool) for v in value):
        return tuple(value)
    raise UserError(
        where=where,
        problem=f"{value!r} is not a keep_io_types choice",
        fix="use both, true or false (in TOML also [false, true])",
    )


def listed(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else [value]


def strings(value: object, *, where: str) -> tuple[str, ...]:
    items = listed(value)
    if not all(isinstance(v, str) and v for v in items):
        raise UserError(
            where=where,
            problem=f"{value!r} is not a string or a list of strings",
            fix='write a list such as ["a", "b"]',
        )
    return tuple(str(v) for v in items)


def split(text: str, *, where: str) -> tuple[str, ...]:
    items = tuple(part.strip() for part in text.split(","))
    if not all(items):
        raise UserError(where=where, problem=f"{text!r} has an empty item", fix="separate values with single commas")
    return items


def limit(value: object, *, where: str) -> float:
    if isinstance(value, str) and value.strip().lower() in ("inf", "+inf", "infinity"):
        return math.inf
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise UserError(
                where=where,
                problem=f"{value!r} is not a number",
                fix="give non-negative numbers or inf, e.g. 64,512,inf",
            ) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(where=where, problem=f"{value!r} is not a number", fix="give non-negative numbers or inf")
    check_limit(float(value), where=where)
    return float(value)
