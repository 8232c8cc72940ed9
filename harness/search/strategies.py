"""Hypothesis strategies: model inputs that hunt for fp16/bf16 hazards, and random valid ONNX models.

* :func:`arrays` / :func:`feeds`: arrays in an input's own dtype and shape (dynamic dims drawn within
  bounds), inside its val-range when one is given, else anywhere the dtype can represent (an fp16 input
  never gets |x| > 65504). Values mix plain floats with fp16 hazards: near +-65504, near +-6e-5 (smallest
  normal) and +-6e-8 (smallest subnormal), powers of two, pairs whose sum cancels, and large outliers among
  normal values. Failing inputs shrink toward mostly-zero arrays with a few readable values.
* :func:`onnx_models`: random valid DAGs of common ops (:data:`harness.search.graphgen.OPS`) with constants of
  random magnitude (some past 65504 or below 1e-7); see :mod:`harness.search.graphgen`.
* :func:`convert_options`: converter settings to fuzz the converter with.

Every public function takes keyword-only options and checks them when called, raising
:class:`~harness.core.errors.UserError` (not later, while drawing).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import ml_dtypes
import numpy as np
import onnx
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from hypothesis.strategies import DrawFn, SearchStrategy

from harness.convert.options import ConvertOptions
from harness.core.dtypes import BFLOAT16, FP16_MAX
from harness.core.errors import UserError
from harness.data.feeds import Feed, input_specs, spec_dtype
from harness.data.recipes import range_for
from harness.search import graphbuild, graphgen

__all__ = ["HAZARDS", "arrays", "convert_options", "feeds", "onnx_models", "representable_range"]

HAZARDS = (
    65504.0,
    65488.0,
    65472.0,
    65519.0,
    65520.0,
    32768.0,
    2048.0,
    256.0,
    255.9,
    6.103515625e-05,
    6.097555160522461e-05,
    6.2e-05,
    5.960464477539063e-08,
    2.9802322387695312e-08,
    8.9e-08,
    1e-08,
    1.0009765625,
    1.00048828125,
    1.00390625,
    0.1,
    3.0e4,
    1.0e4,
)
"""Magnitudes that break fp16/bf16 (each is also drawn negated): fp16's max and its neighbours, the value
that rounds to inf (65520 and up), sqrt(65504), the smallest normal (2^-14) and subnormal (2^-24) and
the halfway points below them, 1 + one fp16/bf16 ulp, and large values whose squares or sums overflow."""
_WIDTHS: dict[np.dtype, Literal[16, 32, 64]] = {
    np.dtype(np.float16): 16,
    np.dtype(np.float32): 32,
    np.dtype(np.float64): 64,
    BFLOAT16: 32,
}


def _fail(option: str, problem: str, fix: str) -> UserError:
    return UserError(where=f"harness.search.strategies {option}", problem=problem, fix=fix)


def representable_range(dtype: np.dtype, val_range: tuple[float, float] | None) -> tuple[float, float]:
    """``val_range`` (default: the dtype's whole finite range) shrunk to its outermost values ``dtype`` holds."""
    finite = float(ml_dtypes.finfo(dtype).max)  # type: ignore[no-untyped-call]
    lo, hi = val_range if val_range is not None else (-finite, finite)
    lo_t, hi_t = (np.array(v, dtype=np.float64).astype(dtype) for v in (max(lo, -finite), min(hi, finite)))
    if float(lo_t) < lo:
        lo_t = np.nextafter(lo_t, np.array(np.inf, dtype=dtype))
    if float(hi_t) > hi:
        hi_t = np.nextafter(hi_t, np.array(-np.inf, dtype=dtype))
    if float(lo_t) > float(hi_t):
        raise _fail("val_range", f"[{lo}, {hi}] holds no {dtype} value", "widen the range")
    return float(lo_t), float(hi_t)


def _elements(dtype: np.dtype, lo: float, hi: float) -> SearchStrategy[float]:
    plain = st.floats(lo, hi, width=_WIDTHS.get(dtype, 64), allow_nan=False, allow_infinity=False)
    hazards = sorted({v for h in HAZARDS for v in (h, -h) if lo <= v <= hi})
    powers = [v for k in range(-24, 16) for v in (2.0**k, -(2.0**k)) if lo <= v <= hi]
    return st.one_of(plain, *(st.sampled_from(values) for values in (hazards, powers) if values))


@st.composite
def _float_array(draw: DrawFn, dtype: np.dtype, shape: tuple[int, ...], lo: float, hi: float) -> np.ndarray:
    values = draw(hnp.arrays(np.float64, shape, elements=_elements(dtype, lo, hi)))
    flat = values.reshape(-1)
    if flat.size >= 2 and draw(st.booleans(), label="cancelling pair"):
        i, j = draw(st.lists(st.integers(0, flat.size - 1), min_size=2, max_size=2, unique=True))
        big = draw(st.sampled_from([v for v in (FP16_MAX, 3.0e4, 1.0e4, 2048.0, 1.0) if -v >= lo and v <= hi] or [hi]))
        flat[i], flat[j] = big, -big * draw(st.sampled_from((1.0, 1.0 - 2.0**-11, 1.0 + 2.0**-10)))
    if flat.size >= 2 and draw(st.booleans(), label="outliers"):
        for index in draw(st.lists(st.integers(0, flat.size - 1), min_size=1, max_size=3, unique=True)):
            flat[index] = draw(st.sampled_from((hi, lo, hi / 2, lo / 2, FP16_MAX, -FP16_MAX, 1.0e4)))
    result: np.ndarray = np.clip(flat, lo, hi).reshape(shape).astype(dtype)
    return result


def arrays(
    *, dtype: np.dtype | type | str, shape: Sequence[int], val_range: tuple[float, float] | None = None
) -> SearchStrategy[np.ndarray]:
    """Arrays of ``dtype`` and ``shape``; floats inside ``val_range`` (default: every finite value of ``dtype``)
    mixed with fp16 hazards; integers uniform in ``val_range`` (default [0, 1]); bools fair."""
    dt = np.dtype(dtype)
    dims = tuple(shape)
    if any(not isinstance(d, (int, np.integer)) or d < 0 for d in dims):
        raise _fail("arrays(shape=...)", f"{list(shape)} is not a list of non-negative sizes", "e.g. shape=(1, 8)")
    if val_range is not None and not (
        len(val_range) == 2 and val_range[0] <= val_range[1] and not any(math.isnan(v) for v in val_range)
    ):
        raise _fail("arrays(val_range=...)", f"{val_range!r} is not (lo, hi) with lo <= hi", "e.g. (-1.0, 1.0)")
    if dt == np.dtype(np.bool_):
        return hnp.arrays(dt, dims)
    if dt.kind in "iu":
        lo, hi = val_range if val_range is not None else (0.0, 1.0)
        info = np.iinfo(dt)
        lo_i, hi_i = max(math.ceil(lo), int(info.min)), min(math.floor(hi), int(info.max))
        if lo_i > hi_i:
            raise _fail("arrays(val_range=...)", f"{val_range} holds no {dt} value", "widen the range")
        return hnp.arrays(dt, dims, elements=st.integers(lo_i, hi_i))
    if dt.kind != "f" and dt != BFLOAT16:
        raise _fail("arrays(dtype=...)", f"cannot draw {dt} arrays", "use a float, integer or bool dtype")
    lo, hi = representable_range(dt, val_range)
    return _float_array(dt, dims, lo, hi)


def feeds(
    model: onnx.ModelProto,
    *,
    val_ranges: Sequence[tuple[str, float, float]] = (),
    input_shapes: Sequence[tuple[str, tuple[int, ...]]] = (),
    dynamic_dims: tuple[int, int] = (1, 4),
) -> SearchStrategy[Feed]:
    """Feeds for ``model``'s graph inputs, each array in the input's declared dtype.

    ``val_ranges``: ``(name, lo, hi)`` as parsed from ``--val-range`` (``""`` = every input).
    ``input_shapes``: ``(name, dims)`` as parsed from ``--input-shapes``; other dynamic dims are drawn in
    ``dynamic_dims`` (inclusive), the same size for every dim sharing a ``dim_param`` name.
    """
    inputs = input_specs(model)
    names = [spec.name for spec in inputs]
    for option, given in (
        ("val_ranges", [r[0] for r in val_ranges if r[0]]),
        ("input_shapes", [s[0] for s in input_shapes]),
    ):
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise _fail(f"feeds({option}=...)", f"the model has no input(s) {unknown}", f"use {names}")
    low, high = dynamic_dims
    if not 0 <= low <= high:
        raise _fail(
            "feeds(dynamic_dims=...)",
            f"{dynamic_dims} is not (min, max) with 0 <= min <= max",
            "e.g. dynamic_dims=(1, 4)",
        )
    specs = []
    for spec in inputs:
        dtype = spec_dtype(spec, where="harness.search.strategies feeds(model=...)")
        if spec.dims is None and spec.name not in dict(input_shapes):
            raise _fail(
                "feeds(input_shapes=...)",
                f"input {spec.name!r} has no declared shape",
                f"give input_shapes=[({spec.name!r}, (1, 8))]",
            )
        dims: list[int | str] = [
            d if d is not None else (spec.dim_params[i] or f"?{spec.name}.{i}") for i, d in enumerate(spec.dims or ())
        ]
        specs.append((spec.name, dtype, dims, range_for(spec.name, val_ranges)))
    for name, shape in input_shapes:
        spec_dims = next(s[2] for s in specs if s[0] == name)
        if tuple(spec_dims) and (
            len(shape) != len(spec_dims) or any(isinstance(d, int) and d != g for d, g in zip(spec_dims, shape))
        ):
            raise _fail(
                "feeds(input_shapes=...)",
                f"{name}:{list(shape)} does not fit the declared {spec_dims}",
                "keep the rank and the static dims",
            )
    for _name, dtype, _, val_range in specs:
        arrays(dtype=dtype, shape=(), val_range=val_range)  # checks the range now, not while drawing
    return _feeds(tuple(specs), dict(input_shapes), (low, high))


@st.composite
def _feeds(
    draw: DrawFn,
    specs: tuple[tuple[str, np.dtype, list[int | str], tuple[float, float] | None], ...],
    given: Mapping[str, tuple[int, ...]],
    bounds: tuple[int, int],
) -> Feed:
    sizes: dict[str, int] = {}
    feed: Feed = {}
    for name, dtype, dims, val_range in specs:
        if name in given:
            shape = tuple(given[name])
        else:
            for dim in dims:
                if isinstance(dim, str) and dim not in sizes:
                    sizes[dim] = draw(st.integers(*bounds), label=f"dim {dim}")
            shape = tuple(sizes[d] if isinstance(d, str) else d for d in dims)
        feed[name] = draw(arrays(dtype=dtype, shape=shape, val_range=val_range), label=name)
    return feed


def onnx_models(
    *,
    ops: Sequence[str] = graphgen.OPS,
    max_nodes: int = 8,
    max_inputs: int = 2,
    max_rank: int = 4,
    max_dim: int = 4,
    max_elements: int = 256,
    opsets: Sequence[int] = (13, 17, 18),
) -> SearchStrategy[onnx.ModelProto]:
    """Random valid float32 models (``onnx.checker`` full check) of 1..``max_nodes`` ops from ``ops``."""
    unknown = sorted(set(ops) - set(graphgen.RULES))
    if unknown or not ops:
        raise _fail("onnx_models(ops=...)", f"unknown or no op types {unknown}", f"use some of {graphgen.OPS}")
    if not set(ops) & graphgen.ANY_TENSOR_OPS:
        raise _fail(
            "onnx_models(ops=...)",
            "no op that applies to every tensor",
            f"include one of {sorted(graphgen.ANY_TENSOR_OPS)}",
        )
    for option, value, least in (
        ("max_nodes", max_nodes, 1),
        ("max_inputs", max_inputs, 1),
        ("max_rank", max_rank, 0),
        ("max_dim", max_dim, 1),
        ("max_elements", max_elements, max_dim**max_rank),
    ):
        if not isinstance(value, int) or value < least:
            raise _fail(f"onnx_models({option}=...)", f"{value!r} is below {least}", f"use {option} >= {least}")
    if not opsets or any(not 13 <= o <= 21 for o in opsets):
        raise _fail("onnx_models(opsets=...)", f"{list(opsets)} must be opsets in 13..21", "e.g. (13, 17)")
    limits = _Limits(
        ops=tuple(ops),
        max_nodes=max_nodes,
        max_inputs=max_inputs,
        max_rank=max_rank,
        max_dim=max_dim,
        max_elements=max_elements,
        opsets=tuple(opsets),
    )
    return _models(limits)


@dataclass(frozen=True)
class _Limits:
    """What :func:`onnx_models` may draw (its arguments, checked)."""

    ops: tuple[str, ...]
    max_nodes: int
    max_inputs: int
    max_rank: int
    max_dim: int
    max_elements: int
    opsets: tuple[int, ...]


@st.composite
def _models(draw: DrawFn, limits: _Limits) -> onnx.ModelProto:
    ops, max_nodes, max_inputs, max_rank = limits.ops, limits.max_nodes, limits.max_inputs, limits.max_rank
    opsets, max_dim, max_elements = limits.opsets, limits.max_dim, limits.max_elements
    build = graphbuild.Build(
        draw=draw, opset=draw(st.sampled_from(opsets), label="opset"), max_dim=max_dim, max_elements=max_elements
    )
    shapes = st.lists(st.integers(1, max_dim), min_size=min(1, max_rank), max_size=max_rank).map(tuple)
    inputs = [
        graphbuild.Tensor(f"x{i}", draw(shapes, label=f"x{i} shape")) for i in range(draw(st.integers(1, max_inputs)))
    ]
    build.pool.extend(inputs)
    count = draw(st.sampled_from(range(1, max_nodes + 1)), label="nodes")  # uniform, not biased to small
    made = [graphgen.grow(build, ops) for _ in range(count)]
    extra = draw(
        st.lists(st.sampled_from([*made, *build.side]), max_size=2, unique_by=lambda t: t.name), label="extra outputs"
    )
    outputs = [made[-1], *(t for t in extra if t is not made[-1])]
    naming = draw(st.sampled_from(graphbuild.NAMINGS), label="node names")
    return graphbuild.assemble(build, inputs, outputs, naming=naming)


def convert_options(
    *,
    precisions: Sequence[str] = ("fp16", "bf16"),
    data_max: Sequence[float] = (512.0, 8.0, math.inf),
    exclusions: Sequence[tuple[str, ...]] = ((), ("Softmax", "LayerNormalization"), ("MatMul",)),
) -> SearchStrategy[ConvertOptions]:
    """Converter settings: precision, keep_io_types, data_max, init_max, exclusions, fp32 accumulation,
    reduction depth. The first value of each option is the one shrinking prefers."""
    for option, values in (("precisions", precisions), ("data_max", data_max), ("exclusions", exclusions)):
        if not values:
            raise _fail(f"convert_options({option}=...)", "no values", "give at least one")
    for precision in precisions:
        ConvertOptions(low_precision_type=precision)  # a bad name raises ConversionError (a UserError) now
    return st.builds(
        ConvertOptions,
        low_precision_type=st.sampled_from(tuple(precisions)),
        keep_io_types=st.booleans(),
        data_max=st.sampled_from(tuple(data_max)),
        init_max=st.sampled_from((65504.0, math.inf)),
        op_types_to_exclude=st.sampled_from(tuple(exclusions)),
        fp32_accumulation=st.booleans(),
        max_depth_of_reduction=st.sampled_from((None, 64)),
    )
