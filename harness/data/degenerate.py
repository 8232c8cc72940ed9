"""Golden outputs against which an error cannot show: the NaN/inf values of each output (:func:`non_finite`, said
when a golden is written) and outputs that are all non-finite or one constant value (:func:`degenerate`, a fact of
every case of that golden)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from harness.core.dtypes import BFLOAT16


@dataclass(frozen=True)
class NonFinite:
    """The NaN/inf values of one golden output, over every iteration (``iteration``: the first that has them)."""

    output: str
    nan: int
    posinf: int
    neginf: int
    total: int
    iteration: int

    @property
    def count(self) -> int:
        return self.nan + self.posinf + self.neginf

    def describe(self) -> str:
        kinds = ", ".join(
            f"{n} {kind}" for n, kind in ((self.nan, "NaN"), (self.posinf, "+inf"), (self.neginf, "-inf")) if n
        )
        return f"output {self.output!r}: {self.count} of {self.total} values are not finite ({kinds})"


def non_finite(outputs: Sequence[Mapping[str, np.ndarray]]) -> tuple[NonFinite, ...]:
    """Every floating-point golden output holding NaN or inf (integer and bool outputs are always finite)."""
    found: dict[str, NonFinite] = {}
    for index, iteration in enumerate(outputs):
        for name, array in iteration.items():
            values = np.asarray(array)
            if values.dtype != BFLOAT16 and values.dtype.kind not in "fc":
                continue
            values = values.astype(np.float64) if values.dtype == BFLOAT16 else values
            nan, inf = int(np.isnan(values).sum()), np.isinf(values)
            pos, neg = int((inf & (values > 0)).sum()), int((inf & (values < 0)).sum())
            old = found.get(name, NonFinite(name, 0, 0, 0, 0, index))
            first = old.iteration if old.count or not nan + pos + neg else index
            found[name] = NonFinite(
                name, old.nan + nan, old.posinf + pos, old.neginf + neg, old.total + int(values.size), first
            )
    return tuple(f for f in found.values() if f.count)


DEGENERATE_KINDS = ("not_finite", "constant")


@dataclass(frozen=True)
class Degenerate:
    """A floating-point golden output against which no error can show: every value NaN or inf (``not_finite``), or
    one value everywhere, over every iteration (``constant``: the inputs do not exercise the model). A fact of
    every case of that golden (``CaseRecord.degenerate``), said in every run's summary and report."""

    output: str
    kind: str
    values: int  # how many values the output has over every iteration
    value: float | None = None  # the constant (kind "constant")

    def __post_init__(self) -> None:
        if self.kind not in DEGENERATE_KINDS:
            raise ValueError(f"Degenerate.kind must be one of {DEGENERATE_KINDS}, got {self.kind!r}")

    def describe(self) -> str:
        if self.kind == "not_finite":
            return f"output {self.output!r} is NaN/inf in all {self.values} values"
        return f"output {self.output!r} is {self.value:g} in all {self.values} values"


def degenerate(outputs: Sequence[Mapping[str, np.ndarray]]) -> tuple[Degenerate, ...]:
    """The golden's floating-point outputs that are all non-finite, or constant over at least two values."""
    found = []
    for name in outputs[0] if outputs else ():
        arrays = [np.asarray(iteration[name]) for iteration in outputs if name in iteration]
        if not arrays or (arrays[0].dtype != BFLOAT16 and arrays[0].dtype.kind not in "fc"):
            continue
        flats = [a.astype(np.float32).ravel() if a.dtype == BFLOAT16 else a.ravel() for a in arrays]  # exact
        size = sum(int(f.size) for f in flats)
        finite = [bool(np.isfinite(f).any()) for f in flats], [bool(np.isfinite(f).all()) for f in flats]
        if size and not any(finite[0]):
            found.append(Degenerate(output=name, kind="not_finite", values=size))
        elif size > 1 and all(finite[1]):
            first = next(f.flat[0] for f in flats if f.size)
            if all(bool(np.all(f == first)) for f in flats):
                found.append(Degenerate(output=name, kind="constant", values=size, value=float(first)))
    return tuple(found)
