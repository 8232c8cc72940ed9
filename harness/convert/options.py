"""`ConvertOptions`: the classification and conversion settings, AutoCast 0.47 names and defaults.

Regexes in ``nodes_to_exclude``/``nodes_to_include`` are applied with :func:`re.match`, as in
AutoCast: they are anchored at the *start* of the node name (``relu`` matches ``relu_a`` but not
``my_relu``; write ``.*relu`` for a substring match) and not at the end.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass, fields

import numpy as np

from harness.core.dtypes import MIN_OPSET, PRECISION_ALIASES, PRECISION_ELEMS, PRECISIONS
from harness.core.errors import ConversionError

LOW_PRECISIONS: dict[str, int] = {p: PRECISION_ELEMS[p] for p in PRECISIONS}
TARGETS = ("any", "ort-cuda", "tensorrt")
_PRECISION_ALIASES = PRECISION_ALIASES


def _bad(field: str, problem: str, fix: str) -> ConversionError:
    return ConversionError(where=f"ConvertOptions.{field}", problem=problem, fix=fix, step="options")


@dataclass(frozen=True)
class ConvertOptions:
    """How to classify nodes and convert a model. Thresholds are absolute values."""

    low_precision_type: str = "fp16"
    nodes_to_exclude: tuple[str, ...] = ()
    op_types_to_exclude: tuple[str, ...] = ()
    nodes_to_include: tuple[str, ...] = ()
    op_types_to_include: tuple[str, ...] = ()
    data_max: float = 512.0
    init_max: float = 65504.0
    keep_io_types: bool = False
    init_conversion_max_bytes: int | None = None
    max_depth_of_reduction: int | None = None
    opset: int | None = None
    custom_ops: tuple[str, ...] = ()
    """Custom (non-ONNX) op types, each optionally ``"Op:fp16"``/``"Op:bf16"``/``"Op:fp32"`` (default fp32)."""
    node_precisions: tuple[tuple[str, str], ...] = ()
    """Explicit overrides: (node name or op type, "fp32"|"fp16"|"bf16"). They win over every other rule."""
    fp32_accumulation: bool = False
    respect_existing_types: bool = False
    """The model's explicit types are authoritative: fp16/bf16 nodes stay, fp32 nodes stay fp32 unless
    included, and graph inputs/outputs keep their types (as with keep_io_types)."""
    respect_fp32_casts: bool = True
    """A Cast to FLOAT (or DOUBLE) of a tensor that is already of that type in the FP32 model, the trace of
    ``softmax(x, dtype=torch.float32)`` or ``x.float()`` in an export, holds the nodes reading it in FP32, even in
    a small FP32 island: it is the author's only recorded request for precision. False ignores such casts (their
    readers follow the other rules; the Cast becomes an Identity between low nodes): fewer casts, AutoCast's
    behaviour. Casts that really widen (fp16/bf16 -> fp32 in the input model) are always respected."""
    fp32_island_min_flops: int = 4096
    """A connected group of FP32 nodes with fewer estimated FLOPs becomes low unless a rule requires FP32
    (0 turns the rule off); see :mod:`harness.convert.folding`."""
    target: str = "any"
    """Where the model will run: ``any`` (every op the ONNX schema allows goes low), ``ort-cuda`` or
    ``tensorrt`` (ops with no low-precision kernel there stay FP32); see :mod:`harness.convert.targets`."""

    def __post_init__(self) -> None:
        _normalize(self)
        if self.low_precision_type not in LOW_PRECISIONS:
            raise _bad(
                "low_precision_type", f"unknown low precision type {self.low_precision_type!r}", "use 'fp16' or 'bf16'"
            )
        if self.target not in TARGETS:
            raise _bad("target", f"unknown target {self.target!r}", f"use one of {', '.join(TARGETS)}")
        if not isinstance(self.fp32_island_min_flops, int) or self.fp32_island_min_flops < 0:
            raise _bad(
                "fp32_island_min_flops",
                f"must be a non-negative integer, got {self.fp32_island_min_flops!r}",
                "pass e.g. 4096, or 0 to keep every FP32 island",
            )
        for field in ("data_max", "init_max"):
            value = getattr(self, field)
            if not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
                raise _bad(
                    field,
                    f"threshold must be a non-negative number or inf, got {value!r}",
                    f"pass {field}=512 (data) / 65504 (initializers), or inf to disable the rule",
                )
        for field in ("init_conversion_max_bytes", "max_depth_of_reduction", "opset"):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, int) or value < (0 if field.startswith("init") else 1)):
                raise _bad(
                    field, f"must be a positive integer or None, got {value!r}", f"omit {field} or pass e.g. 1024"
                )
        for field in ("nodes_to_exclude", "nodes_to_include"):
            for pattern in getattr(self, field):
                try:
                    re.compile(pattern)
                except re.error as err:
                    raise _bad(
                        field,
                        f"invalid regular expression {pattern!r}: {err}",
                        "escape special characters (e.g. '\\.'), or use '.*name.*' for a substring",
                    ) from None
        for key, precision in self.node_precisions:
            if not key or precision not in PRECISION_ELEMS:
                raise _bad(
                    "node_precisions",
                    f"bad entry {key!r}:{precision!r}",
                    "use NAME_OR_OPTYPE:fp32|fp16|bf16, e.g. Add:fp16,Sub:fp32",
                )
        for entry in self.custom_ops:
            op, _, precision = entry.partition(":")
            if not op or (precision and precision not in PRECISION_ELEMS):
                raise _bad("custom_ops", f"bad entry {entry!r}", "use OpType or OpType:fp16|bf16|fp32")

    @property
    def keeps_io_types(self) -> bool:
        """Graph inputs/outputs keep their original types."""
        return self.keep_io_types or self.respect_existing_types

    @property
    def low_elem(self) -> int:
        """ONNX element type of the low precision."""
        return LOW_PRECISIONS[self.low_precision_type]

    @property
    def target_opset(self) -> int:
        """Minimum default-domain opset the converted model gets (never a downgrade)."""
        return self.opset if self.opset is not None else MIN_OPSET[self.low_precision_type]

    def custom_op_precisions(self) -> dict[str, int]:
        """Custom op type -> element type its float tensors use."""
        result: dict[str, int] = {}
        for entry in self.custom_ops:
            op, _, precision = entry.partition(":")
            result[op] = PRECISION_ELEMS[precision or "fp32"]
        return result


_REALS = ("data_max", "init_max")
_INTS = ("init_conversion_max_bytes", "max_depth_of_reduction", "opset", "fp32_island_min_flops")


def _normalize(options: ConvertOptions) -> None:
    """Numpy scalars and other number types become Python's, as AutoCast takes them: its own default is
    ``init_max=np.finfo(np.float16).max``; a config or script may pass ``np.float32(512)``, ``np.int64(13)``,
    ``np.bool_(True)`` or ``np.str_("fp16")``. Anything that is not the right kind is left for the checks."""

    def setattr_(name: str, value: object) -> None:
        object.__setattr__(options, name, value)

    for field in fields(options):
        value = getattr(options, field.name)
        if field.name in _REALS:
            if isinstance(value, (numbers.Real, np.number)) and not isinstance(value, (bool, np.bool_)):
                setattr_(field.name, float(value))
        elif field.name in _INTS:
            if isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, (bool, np.bool_)):
                setattr_(field.name, int(value))
        elif isinstance(value, (bool, np.bool_)):
            setattr_(field.name, bool(value))
        elif isinstance(value, str):
            setattr_(field.name, str(value))
        elif isinstance(value, tuple) and field.name != "node_precisions":
            setattr_(field.name, tuple(str(v) if isinstance(v, str) else v for v in value))


def parse_node_precisions(text: str, *, where: str) -> tuple[tuple[str, str], ...]:
    """Parse ``"Add:fp16,Sub:fp32"`` (also ``float16``/``float32``/``bfloat16``) into option pairs."""
    pairs: list[tuple[str, str]] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        key, sep, precision = item.rpartition(":")
        precision = _PRECISION_ALIASES.get(precision.strip(), precision.strip())
        if not sep or not key.strip() or precision not in PRECISION_ELEMS:
            raise ConversionError(
                where=where,
                problem=f"bad node precision {item!r}",
                fix="write NAME_OR_OPTYPE:fp32|fp16|bf16, comma separated, e.g. Add:fp16,Sub:fp32",
                step="options",
            )
        pairs.append((key.strip(), precision))
    return tuple(pairs)
