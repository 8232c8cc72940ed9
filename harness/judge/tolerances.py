"""Default and configured tolerances for comparing a low-precision run with its FP32 golden.

Default formula, per output, for a low precision with machine epsilon ``eps``
(fp16: 2^-10, bf16: 2^-7, read from ``ml_dtypes.finfo``)::

    scale = max |golden| over its finite elements              (0 when there are none)
    ulp   = eps * 2^(floor(log2(scale)))                       spacing of the low-precision grid at
                                                               `scale`; at least the dtype's smallest
                                                               subnormal, so all-zero goldens work
    atol  = ABS_ULPS * ulp      (ABS_ULPS = 8)                 i.e. between 4 and 8 eps of the largest value
    rtol  = REL_EPS * eps       (REL_EPS = 2)                  fp16: 1.95e-3, bf16: 1.56e-2
    mode  = "elemwise"                                         an element fails only when over atol AND rtol

Why: a converted network's error is a few roundings of its largest activations, so it scales with the
dtype's epsilon times the output's magnitude, not with a fixed 1e-5 (Polygraphy's default, meant for
FP32). Measured fp16 errors of real CNN/transformer exports are 0.7-2 eps of max|golden| and bf16 about
2 eps (``docs/runtime-facts.md`` §2); the default leaves headroom above that, while a 10% error
(12.8 eps in bf16, 102 eps in fp16) or an overflow to inf still fails. Integer and bool outputs
(argmax, masks) must match exactly (atol = rtol = 0).

Overrides come from ``[tool.castguard.tolerances]``; each entry sets any :class:`Tolerance`
field and leaves the others at the computed default::

    [tool.castguard.tolerances]
    bf16 = { rtol = 0.03 }                              # by precision
    "Plus214_Output_0" = { atol = 0.05, mode = "median" }   # by output name (every precision)
    [tool.castguard.tolerances.fp16.outputs]             # by precision and output name
    "Plus214_Output_0" = { top_k = 1 }

Precedence, field by field: default < precision < output name < precision + output name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

import ml_dtypes
import numpy as np

from harness.core.dtypes import BFLOAT16
from harness.core.errors import UserError, unknown_key

Mode = Literal["elemwise", "max", "mean", "median", "quantile", "isclose"]
MODES: tuple[str, ...] = ("elemwise", "max", "mean", "median", "quantile", "isclose")


@dataclass(frozen=True)
class Tolerance:
    """How one output is judged. ``top_k`` adds a classifier check on the last axis."""

    atol: float = 1e-3
    rtol: float = 1e-3
    mode: Mode = "elemwise"
    quantile: float = 0.99
    nan_equal: bool = True  # NaN obtained where the golden is NaN matches (see :mod:`harness.judge.compare`)
    inf_equal: bool = True
    top_k: int | None = None
    min_top_k_agreement: float = 1.0
    vocab: bool | None = None
    """The output's last axis is a vocabulary (logits): None detects it (:mod:`harness.judge.vocab`)."""
    min_top1_agreement: float | None = None
    """Logits: fail when fewer positions than this fraction keep the golden's argmax token."""
    max_kl: float | None = None
    """Logits: fail when the mean KL(softmax(golden) || softmax(obtained)) exceeds this (nats)."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"Tolerance.mode must be one of {MODES}, got {self.mode!r}")
        if not (self.atol >= 0 and self.rtol >= 0):
            raise ValueError(f"Tolerance atol/rtol must be >= 0, got atol={self.atol} rtol={self.rtol}")
        if not 0.0 <= self.quantile <= 1.0:
            raise ValueError(f"Tolerance.quantile must be in [0, 1], got {self.quantile}")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"Tolerance.top_k must be >= 1 or None, got {self.top_k}")
        if self.min_top1_agreement is not None and not 0.0 <= self.min_top1_agreement <= 1.0:
            raise ValueError(f"Tolerance.min_top1_agreement must be in [0, 1], got {self.min_top1_agreement}")
        if self.max_kl is not None and not self.max_kl >= 0:
            raise ValueError(f"Tolerance.max_kl must be >= 0, got {self.max_kl}")
        if not 0.0 <= self.min_top_k_agreement <= 1.0:
            raise ValueError(f"Tolerance.min_top_k_agreement must be in [0, 1], got {self.min_top_k_agreement}")

    def describe(self) -> str:
        text = f"atol={self.atol:.3g} rtol={self.rtol:.3g} [{self.mode}"
        text += f" q={self.quantile:g}]" if self.mode == "quantile" else "]"
        return text


ABS_ULPS = 8.0
REL_EPS = 2.0
_LOW_DTYPES: dict[str, np.dtype] = {"fp16": np.dtype(np.float16), "bf16": BFLOAT16}
_FIELDS = tuple(f.name for f in fields(Tolerance))
_FIELD_KINDS = {
    "mode": "text",
    "nan_equal": "flag",
    "inf_equal": "flag",
    "vocab": "flag",
}  # every other field is a number

Override = tuple[tuple[str, Any], ...]  # (Tolerance field, value) pairs


def low_precision_ulp(precision: str, magnitude: float) -> float:
    """Spacing of the ``precision`` grid at ``magnitude`` (>= 0), never below its smallest subnormal."""
    info = ml_dtypes.finfo(_low_dtype(precision))  # type: ignore[no-untyped-call]
    if magnitude <= 0 or not math.isfinite(magnitude):
        return float(info.smallest_subnormal) if magnitude <= 0 else math.inf
    _, exponent = math.frexp(magnitude)  # magnitude = m * 2^exponent, 0.5 <= m < 1
    return max(float(info.eps) * 2.0 ** (exponent - 1), float(info.smallest_subnormal))


def golden_scale(golden: np.ndarray) -> float:
    """Largest finite magnitude of a golden output (0.0 when it has none)."""
    flat = np.asarray(golden).ravel()
    if flat.dtype == BFLOAT16 or flat.dtype.kind != "f":
        flat = flat.astype(np.float64)
    if not flat.size:
        return 0.0
    with np.errstate(invalid="ignore"):
        top, bottom = float(flat.max()), float(flat.min())  # no copy; NaN or inf here: the masked way below
    if math.isfinite(top) and math.isfinite(bottom):
        return max(top, -bottom, 0.0)
    largest = 0.0  # the max of |x| in the array's own float type is exact, and widening keeps it
    for start in range(0, flat.size, SCALE_CHUNK):
        values = np.abs(flat[start : start + SCALE_CHUNK])
        values = values[np.isfinite(values)]
        largest = max(largest, float(values.max()) if values.size else 0.0)
    return largest


SCALE_CHUNK = 1 << 22
"""Elements of a golden output with NaN/inf read at a time by :func:`golden_scale` (no float64 copy of logits)."""


def default_tolerance(precision: str, golden: np.ndarray | Sequence[np.ndarray]) -> Tolerance:
    """The documented default tolerance for one golden output converted to ``precision`` (fp16 or bf16); a sequence
    is the output's value in each iteration, scaled over all of them (no concatenated copy)."""
    eps = float(ml_dtypes.finfo(_low_dtype(precision)).eps)  # type: ignore[no-untyped-call]
    values = [np.asarray(golden)] if isinstance(golden, np.ndarray) else [np.asarray(g) for g in golden]
    dtype = values[0].dtype if values else np.dtype(np.float32)
    if dtype.kind != "f" and dtype != BFLOAT16:
        return Tolerance(atol=0.0, rtol=0.0, mode="elemwise")
    scale = max((golden_scale(value) for value in values), default=0.0)
    return Tolerance(atol=ABS_ULPS * low_precision_ulp(precision, scale), rtol=REL_EPS * eps, mode="elemwise")


@dataclass(frozen=True)
class TolerancePolicy:
    """Configured overrides on top of :func:`default_tolerance`; empty means "defaults everywhere"."""

    by_precision: tuple[tuple[str, Override], ...] = ()
    by_output: tuple[tuple[str, Override], ...] = ()
    by_precision_output: tuple[tuple[tuple[str, str], Override], ...] = ()

    def tolerance_for(self, *, precision: str, output: str, golden: np.ndarray | Sequence[np.ndarray]) -> Tolerance:
        """The tolerance for one output (its golden, or its golden in each iteration): the default, then the
        matching overrides in precedence order."""
        tol = default_tolerance(precision, golden)
        for layer in (
            dict(self.by_precision).get(precision),
            dict(self.by_output).get(output),
            dict(self.by_precision_output).get((precision, output)),
        ):
            if layer:
                tol = replace(tol, **dict(layer))
        return tol

    def tolerances_for(self, *, precision: str, goldens: Sequence[Mapping[str, np.ndarray]]) -> dict[str, Tolerance]:
        """Per-output tolerances for ``compare_iterations(tolerances=...)``, scaled over every iteration."""
        names = dict.fromkeys(name for iteration in goldens for name in iteration)
        return {
            name: self.tolerance_for(
                precision=precision,
                output=name,
                golden=[it[name] for it in goldens if name in it],
            )
            for name in names
        }


def parse_tolerance_policy(table: Mapping[str, object], *, where: str) -> TolerancePolicy:
    """Read a ``[tool.castguard.tolerances]`` table (see the module docstring); bad entries raise UserError."""
    by_precision: list[tuple[str, Override]] = []
    by_output: list[tuple[str, Override]] = []
    by_both: list[tuple[tuple[str, str], Override]] = []
    for key, entry in table.items():
        here = f"{where} key {key!r}"
        if not isinstance(entry, Mapping):
            raise UserError(
                where=here, problem="not a table of tolerance fields", fix="write e.g. { atol = 1e-2, rtol = 1e-2 }"
            )
        if key not in _LOW_DTYPES:
            by_output.append((key, _override(entry, where=here)))
            continue
        outputs = entry.get("outputs", {})
        if not isinstance(outputs, Mapping):
            raise UserError(
                where=f"{here}.outputs",
                problem="not a table keyed by output name",
                fix=f'write [tool.castguard.tolerances.{key}.outputs] with "name" = {{ atol = ... }}',
            )
        by_precision.append((key, _override({k: v for k, v in entry.items() if k != "outputs"}, where=here)))
        for name, sub in outputs.items():
            if not isinstance(sub, Mapping):
                raise UserError(
                    where=f"{here}.outputs.{name}",
                    problem="not a table of tolerance fields",
                    fix="write e.g. { atol = 1e-2 }",
                )
            by_both.append(((key, name), _override(sub, where=f"{here}.outputs.{name}")))
    return TolerancePolicy(
        by_precision=tuple(by_precision), by_output=tuple(by_output), by_precision_output=tuple(by_both)
    )


def _override(entry: Mapping[str, object], *, where: str) -> Override:
    unknown = sorted(set(entry) - set(_FIELDS))
    if unknown:
        raise unknown_key(unknown[0], _FIELDS, where=where, what="tolerance field")
    pairs: Override = tuple(sorted(entry.items()))
    for name, value in pairs:
        kind = _FIELD_KINDS.get(name, "number")
        ok = (
            isinstance(value, str)
            if kind == "text"
            else isinstance(value, bool)
            if kind == "flag"
            else (isinstance(value, (int, float)) and not isinstance(value, bool))
        )
        if not ok:
            raise UserError(where=f"{where}.{name}", problem=f"{value!r} has the wrong type", fix=f"give a {kind}")
    try:
        replace(Tolerance(), **dict(pairs))
    except ValueError as err:
        raise UserError(
            where=where, problem=str(err), fix="see harness.judge.compare.Tolerance for valid values"
        ) from err
    return pairs


def _low_dtype(precision: str) -> np.dtype:
    if precision not in _LOW_DTYPES:
        raise UserError(
            where="tolerance precision", problem=f"{precision!r} is not a low precision", fix="use fp16 or bf16"
        )
    return _LOW_DTYPES[precision]
