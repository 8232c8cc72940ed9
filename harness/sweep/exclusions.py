"""Exclusion sets: named sets of op types a sweep case keeps in FP32 (``op_types_to_exclude``), and the built-in
ones (``none``, and ``sensitive``: the ops whose accuracy is known to suffer in low precision)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.core.errors import UserError
from harness.sweep.checks import check_unique

SENSITIVE_OPS = ("Softmax", "LayerNormalization", "GroupNormalization", "InstanceNormalization", "ReduceMean", "Pow")
"""Ops whose accuracy is known to suffer in fp16/bf16: the normalisations' variance (torch exports GroupNorm as
InstanceNormalization, or as GroupNormalization at opset 18+), softmax's exponent, and the x^2 of hand-written
norms."""

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")  # exclusion-set names
_OP_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")  # ONNX op types


@dataclass(frozen=True)
class ExclusionSet:
    """A named set of op types kept in FP32 (``op_types_to_exclude``)."""

    name: str
    ops: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        where = f"exclusion set {self.name!r}"
        if not _NAME.match(self.name):
            raise UserError(
                where=where,
                problem="the name is not a plain identifier",
                fix="use letters, digits and '_', starting with a letter (it becomes part of case ids)",
            )
        for op in self.ops:
            if not _OP_TYPE.match(op):
                raise UserError(
                    where=where,
                    problem=f"{op!r} is not an ONNX op type",
                    fix="list op types such as Softmax or LayerNormalization",
                )
        check_unique(self.ops, where=where)


BUILTIN_EXCLUSIONS = (ExclusionSet("none"), ExclusionSet("sensitive", SENSITIVE_OPS))
