"""How one generated input's values are drawn: ``--val-range`` parsed (:func:`parse_val_range`) and looked up
(:func:`range_for`), the range chosen by the input's type and role, and why (:func:`value_plan`, an
:class:`InputPlan` line), and the seeded draw (:func:`draw`). The recipe that plans every input is
:mod:`harness.data.recipes`."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.core.dtypes import BFLOAT16
from harness.core.errors import UserError
from harness.data.feeds import InputSpec, spec_dtype
from harness.data.flagnames import InputFlags
from harness.data.roles import InputRole

_RANGE_RE = re.compile(r"^(?:(?P<name>.*):)?\[(?P<lo>[^,\[\]]+),(?P<hi>[^,\[\]]+)\]$")
_DEFAULT_FLOAT_RANGE = (-1.0, 1.0)
_DEFAULT_INT_RANGE = (0.0, 1.0)


def parse_val_range(text: str) -> tuple[str, float, float]:
    """``NAME:[lo,hi]`` or ``[lo,hi]`` (all inputs) -> (name, lo, hi)."""
    match = _RANGE_RE.match(text.replace(" ", ""))
    fix = "use Polygraphy syntax: --val-range x:[1,2] (one input) or --val-range [0,1] (all inputs)"
    if not match:
        raise UserError(where="--val-range", problem=f"cannot parse {text!r}", fix=fix)
    try:
        lo, hi = float(match["lo"]), float(match["hi"])
    except ValueError:
        raise UserError(where="--val-range", problem=f"bounds in {text!r} are not numbers", fix=fix) from None
    if math.isnan(lo) or math.isnan(hi) or lo > hi:
        raise UserError(where="--val-range", problem=f"{text!r} is not an interval with lo <= hi", fix=fix)
    return match["name"] or "", lo, hi


def range_for(name: str, val_ranges: Sequence[tuple[str, float, float]]) -> tuple[float, float] | None:
    """The last ``--val-range`` naming the input, else the last unnamed one (every input), else None."""
    for wanted in (name, ""):
        hits = [(lo, hi) for rname, lo, hi in val_ranges if rname == wanted]
        if hits:
            return hits[-1]
    return None


@dataclass(frozen=True)
class InputPlan:
    """How one input is filled: its shape and value range, and why (``how``, for the report)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    low: float
    high: float
    how: str

    def line(self) -> str:
        dims = "x".join(str(d) for d in self.shape) or "scalar"
        return f"{self.name} {self.dtype}[{dims}]: {self.how}"


def value_plan(
    spec: InputSpec, role: InputRole | None, given: tuple[float, float] | None, *, flags: InputFlags, where: str
) -> tuple[float, float, str]:
    """One generated input's value range and why (``how``): the ``--val-range`` ``given`` for it (checked against
    the table its ids index), else a default by its type and role; a shape-like integer input is refused."""
    dtype = spec_dtype(spec, where=where)
    if dtype == np.dtype(np.bool_):
        return 0.0, 1.0, "random booleans"
    if given is not None:
        _check_ids_in_table(spec.name, given, role, where=where)
        return given[0], given[1], f"uniform in [{given[0]:g}, {given[1]:g}] (--val-range)"
    if dtype.kind not in "iu":
        lo, hi = _DEFAULT_FLOAT_RANGE
        return lo, hi, f"uniform in [{lo:g}, {hi:g}] (default; {flags.default_range_note()})"
    if role is not None and role.kind == "index" and role.rows:
        return 0.0, float(role.rows - 1), f"ids uniform in [0, {role.rows}): {role.detail}"
    if role is not None and role.kind == "shape":
        raise UserError(
            where=where,
            problem=f"integer input {spec.name!r} is a shape-like value ({role.detail}); "
            "castguard cannot invent a valid one",
            fix=flags.real_values_fix(spec.name),
        )
    lo, hi = _DEFAULT_INT_RANGE
    why = f" ({role.detail})" if role is not None and role.detail else ""
    return (
        lo,
        hi,
        (
            f"uniform in [{lo:g}, {hi:g}]: castguard cannot tell what this integer input holds{why}; "
            f"{flags.range_fix(spec.name)}"
        ),
    )


def _check_ids_in_table(name: str, given: tuple[float, float], role: InputRole | None, *, where: str) -> None:
    """A ``--val-range`` for ids that index a table (Gather...) stays within its rows: onnxruntime would fail on the
    first id beyond it, so this is refused before anything runs."""
    if role is None or role.kind != "index" or not role.rows:
        return
    lo, hi = given
    if hi > role.rows - 1 or lo < -role.rows:
        raise UserError(
            where=f"--val-range {name}:[{lo:g},{hi:g}]",
            problem=f"{where}: input {name!r} holds the {role.detail}, whose table has {role.rows} rows: ids "
            f"outside [{-role.rows}, {role.rows - 1}] are beyond the table and onnxruntime fails "
            "on them",
            fix=f"--val-range {name}:[0,{role.rows - 1}] (or leave it out: castguard then draws ids within the table)",
        )


def draw(rng: np.random.Generator, plan: InputPlan, *, flags: InputFlags) -> np.ndarray:
    """One random array as ``plan`` says (its dtype, shape and value range)."""
    dtype = np.dtype(plan.dtype) if plan.dtype != "bfloat16" else BFLOAT16
    shape, lo, hi, name = plan.shape, plan.low, plan.high, plan.name
    if dtype == np.dtype(np.bool_):
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo_i, hi_i = max(math.ceil(lo), info.min), min(math.floor(hi), info.max)
        if lo_i > hi_i:
            raise UserError(
                where="--val-range",
                problem=f"[{lo}, {hi}] holds no {dtype} value for {name!r}",
                fix=f"give {name} a range that contains integers valid for {dtype}",
            )
        return rng.integers(lo_i, hi_i, size=shape, endpoint=True).astype(dtype)
    if dtype.kind == "f" or dtype == BFLOAT16:
        return rng.uniform(lo, hi, size=shape).astype(dtype)
    raise UserError(
        where=name,
        problem=f"castguard cannot generate random {dtype} inputs",
        fix=f"pass the inputs with {flags.inputs_file} FILE.npz",
    )
