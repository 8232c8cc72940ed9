"""The model's declared inputs (:class:`InputSpec`) and the feeds given for them: split when stacked, validated
against the model, cast to its float types. The one home of input feeds: the golden's inputs
(:mod:`harness.data.recipes`), the converter's calibration data and the search strategies all use it; feed files are
read and written in :mod:`harness.data.feedfiles`, integer inputs' roles found in :mod:`harness.data.roles`.

Every mismatch with the model (names, dtype, rank, static dims) is one :class:`~harness.core.errors.InputDataError`
naming the file, the iteration and the input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnx

from harness.core.dtypes import BFLOAT16, FLOAT_TYPES, np_dtype
from harness.core.errors import InputDataError, UserError

Feed = dict[str, np.ndarray]
Dim = int | None


@dataclass(frozen=True)
class InputSpec:
    """One graph input as declared: name, ONNX element type, dims (None = dynamic; 0 is a real zero-size dim)
    and each dim's ``dim_param`` name ("" when it has none)."""

    name: str
    elem_type: int
    dims: tuple[Dim, ...] | None  # None: rank unknown
    dim_params: tuple[str, ...] = ()

    def dim_name(self, axis: int) -> str:
        """``'sequence'`` for a named dynamic dim, else ``dim 1``."""
        param = self.dim_params[axis] if axis < len(self.dim_params) else ""
        return f"dim {axis} ({param!r})" if param else f"dim {axis} (unnamed)"


def input_specs(model: onnx.ModelProto) -> list[InputSpec]:
    """Graph inputs that are real inputs (old IR models also list initializers as inputs)."""
    inits = {t.name for t in model.graph.initializer}
    specs = []
    for value in model.graph.input:
        if value.name in inits:
            continue
        tensor = value.type.tensor_type
        dims: tuple[Dim, ...] | None = None
        params: tuple[str, ...] = ()
        if tensor.HasField("shape"):
            dims = tuple(
                d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else None for d in tensor.shape.dim
            )
            params = tuple(d.dim_param if d.HasField("dim_param") else "" for d in tensor.shape.dim)
        specs.append(InputSpec(name=value.name, elem_type=tensor.elem_type, dims=dims, dim_params=params))
    return specs


INT_TYPES = {
    onnx.TensorProto.INT8,
    onnx.TensorProto.INT16,
    onnx.TensorProto.INT32,
    onnx.TensorProto.INT64,
    onnx.TensorProto.UINT8,
    onnx.TensorProto.UINT16,
    onnx.TensorProto.UINT32,
    onnx.TensorProto.UINT64,
}


def fmt_dims(dims: tuple[Dim, ...] | None) -> str:
    return "unknown" if dims is None else "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def spec_dtype(spec: InputSpec, *, where: str) -> np.dtype:
    try:
        return np_dtype(spec.elem_type)
    except ValueError as err:
        raise UserError(
            where=where, problem=f"input {spec.name!r}: {err}", fix="castguard supports numeric and bool tensor inputs"
        ) from err


def split_batches(feeds: Sequence[Feed], specs: Sequence[InputSpec]) -> list[Feed]:
    """Split each feed whose arrays are stacked (leading dim = k x the static batch, the same k for every input)
    into k feeds, as AutoCast does; other feeds are left for validation to judge."""
    return [part for feed in feeds for part in _split_one(feed, specs)]


def _split_one(feed: Feed, specs: Sequence[InputSpec]) -> list[Feed]:
    batches: dict[str, int] = {}
    counts: dict[str, int] = {}
    for spec in specs:
        arr = feed.get(spec.name)
        batch = spec.dims[0] if spec.dims else None
        if arr is None or not batch or spec.dims is None or arr.ndim != len(spec.dims):
            continue
        if arr.shape[0] != batch and arr.shape[0] % batch == 0:
            batches[spec.name], counts[spec.name] = batch, arr.shape[0] // batch
    if not counts or len(set(counts.values())) != 1 or set(counts) != set(feed):
        return [feed]  # nothing stacked, or not a consistent stack: validation reports the shapes
    n = next(iter(counts.values()))
    return [
        {name: np.ascontiguousarray(arr[i * batches[name] : (i + 1) * batches[name]]) for name, arr in feed.items()}
        for i in range(n)
    ]


def validate_feeds(feeds: Sequence[Feed], specs: Sequence[InputSpec], *, where: str) -> list[Feed]:
    """Names, dtypes, ranks and static dims of every feed, one clear error each."""
    names = [s.name for s in specs]
    checked = []
    for index, feed in enumerate(feeds):
        at = f"iteration {index}"
        missing = [n for n in names if n not in feed]
        extra = [n for n in feed if n not in names]
        if missing or extra:
            raise InputDataError(
                where=where,
                problem=f"{at}: input names do not match the model (missing {missing}, unexpected {extra})",
                fix=f"store exactly the model's inputs: {', '.join(names)}",
            )
        out = {}
        for spec in specs:
            out[spec.name] = _validate_array(np.asarray(feed[spec.name]), spec, where=where, at=at)
        checked.append(out)
    return checked


def _validate_array(arr: np.ndarray, spec: InputSpec, *, where: str, at: str) -> np.ndarray:
    want = spec_dtype(spec, where=where)
    if want == BFLOAT16 and arr.dtype == np.dtype(np.uint16):
        arr = arr.view(BFLOAT16)
    if arr.dtype != want:
        raise InputDataError(
            where=where,
            problem=f"{at}: input {spec.name!r} has dtype {arr.dtype}, the model declares {want}",
            fix=f"save it as {want} (arr.astype(np.{want.name}))",
        )
    if spec.dims is not None:
        if arr.ndim != len(spec.dims):
            raise InputDataError(
                where=where,
                problem=f"{at}: input {spec.name!r} has rank {arr.ndim} "
                f"{list(arr.shape)}, the model declares {fmt_dims(spec.dims)}",
                fix="save arrays with the model's input rank",
            )
        bad = [i for i, (d, s) in enumerate(zip(spec.dims, arr.shape)) if d is not None and d != s]
        if bad:
            raise InputDataError(
                where=where,
                problem=f"{at}: input {spec.name!r} has shape {list(arr.shape)}, "
                f"the model declares {fmt_dims(spec.dims)} (dim {bad[0]} differs)",
                fix="save arrays matching the model's static dimensions",
            )
    return np.ascontiguousarray(arr)


def cast_feeds(feeds: Sequence[Feed], specs: Sequence[InputSpec]) -> list[Feed]:
    """Float arrays cast to each input's declared float type (the golden's fp32 feeds for an fp16-I/O model).

    Only float -> float casts are made, as a deployment would; anything else is left for validation to report.
    """
    out = []
    for feed in feeds:
        cast = dict(feed)
        for spec in specs:
            arr = feed.get(spec.name)
            want = np_dtype(spec.elem_type) if spec.elem_type in FLOAT_TYPES else None
            if arr is not None and want is not None and arr.dtype != want and _is_float(arr.dtype):
                cast[spec.name] = arr.astype(want)
        out.append(cast)
    return out


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype == BFLOAT16
