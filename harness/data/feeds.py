"""The model's declared inputs, and feeds read from files: ``.npz`` or Polygraphy ``--save-inputs`` JSON.

Nothing here unpickles: ``.npz`` files are opened with ``allow_pickle=False`` and Polygraphy's base64
``np.save`` payloads are decoded the same way. Every mismatch with the model (names, dtype, rank, static
dims) is one :class:`~harness.errors.InputDataError` naming the file, the iteration and the input.
"""
from __future__ import annotations

import base64
import binascii
import io
import json
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from harness.dtypes import BFLOAT16, FLOAT_TYPES, np_dtype
from harness.errors import InputDataError, UserError

Feed = dict[str, np.ndarray]
Dim = int | None


@dataclass(frozen=True)
class InputSpec:
    """One graph input as declared: name, ONNX element type and dims (None = dynamic)."""

    name: str
    elem_type: int
    dims: tuple[Dim, ...] | None  # None: rank unknown


def input_specs(model: onnx.ModelProto) -> list[InputSpec]:
    """Graph inputs that are real inputs (old IR models also list initializers as inputs)."""
    inits = {t.name for t in model.graph.initializer}
    specs = []
    for value in model.graph.input:
        if value.name in inits:
            continue
        tensor = value.type.tensor_type
        dims = None
        if tensor.HasField("shape"):
            dims = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                         for d in tensor.shape.dim)
        specs.append(InputSpec(name=value.name, elem_type=tensor.elem_type, dims=dims))
    return specs


def fmt_dims(dims: tuple[Dim, ...] | None) -> str:
    return "unknown" if dims is None else "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def spec_dtype(spec: InputSpec, *, where: str) -> np.dtype:
    try:
        return np_dtype(spec.elem_type)
    except ValueError as err:
        raise UserError(where=where, problem=f"input {spec.name!r}: {err}",
                        fix="castguard supports numeric and bool tensor inputs") from err


def load_feed_file(path: Path) -> list[Feed]:
    """Read an ``.npz`` (one feed, maybe batched) or a Polygraphy JSON (a list of feeds), never unpickling."""
    if path.suffix == ".npz":
        return [_load_npz(path)]
    if path.suffix == ".json":
        return _load_polygraphy_json(path)
    raise InputDataError(where=path, problem=f"unsupported inputs file type {path.suffix!r}",
                         fix="use an .npz (np.savez) or a Polygraphy --save-inputs .json")


def _load_npz(path: Path) -> Feed:
    if not zipfile.is_zipfile(path):
        raise InputDataError(where=path, problem="not a readable .npz (not a zip archive)",
                             fix="save inputs with np.savez(path, name=array, ...)")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: np.ascontiguousarray(data[key]) for key in data.files}
    except ValueError as err:
        if "allow_pickle" in str(err) or "Object arrays" in str(err):
            raise InputDataError(where=path, problem="holds pickled Python objects (object arrays); castguard "
                                 "never unpickles input files", fix="save plain numeric arrays, e.g. "
                                 "np.savez(path, x=x.astype(np.float32))") from err
        raise InputDataError(where=path, problem=f"not a readable .npz: {err}", fix="re-save it with np.savez") from err
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        raise InputDataError(where=path, problem=f"not a readable .npz: {err}", fix="re-save it with np.savez") from err


def _decode_array(obj: Any, *, path: Path, where: str) -> np.ndarray:
    if not isinstance(obj, Mapping) or "array" not in obj:
        raise InputDataError(where=path, problem=f"{where} is not a Polygraphy ndarray object "
                             "({'array': <base64>, 'polygraphy_class': 'ndarray'})",
                             fix="save inputs with `polygraphy run --save-inputs` or use an .npz")
    try:
        raw = base64.b64decode(obj["array"], validate=True)
        arr: np.ndarray = np.load(io.BytesIO(raw), allow_pickle=False)
        return arr
    except (binascii.Error, ValueError, EOFError, TypeError) as err:
        raise InputDataError(where=path, problem=f"{where} cannot be decoded without unpickling: {err}",
                             fix="save plain numeric arrays (polygraphy run --save-inputs)") from err


def _load_polygraphy_json(path: Path) -> list[Feed]:
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputDataError(where=path, problem=f"not valid JSON: {err}",
                             fix="pass a Polygraphy --save-inputs file") from err
    if not isinstance(data, list) or not all(isinstance(it, Mapping) for it in data) or not data:
        raise InputDataError(where=path, problem="expected a non-empty JSON list of {input name: array} feeds",
                             fix="pass a Polygraphy --save-inputs file")
    return [{name: _decode_array(value, path=path, where=f"iteration {i} input {name!r}")
             for name, value in it.items()} for i, it in enumerate(data)]


def split_batches(feeds: list[Feed], specs: Sequence[InputSpec]) -> list[Feed]:
    """Split stacked arrays (leading dim = k x the static batch) into k feeds; otherwise unchanged."""
    if len(feeds) != 1:
        return feeds
    feed = feeds[0]
    batches: dict[str, int] = {}
    counts: dict[str, int] = {}
    for spec in specs:
        arr = feed.get(spec.name)
        batch = spec.dims[0] if spec.dims else None
        if arr is None or batch is None or spec.dims is None or arr.ndim != len(spec.dims):
            continue
        if arr.shape[0] != batch and arr.shape[0] % batch == 0:
            batches[spec.name], counts[spec.name] = batch, arr.shape[0] // batch
    if not counts or len(set(counts.values())) != 1 or set(counts) != set(feed):
        return feeds  # nothing stacked, or not a consistent stack: validation reports the shapes
    n = next(iter(counts.values()))
    return [{name: np.ascontiguousarray(arr[i * batches[name]:(i + 1) * batches[name]]) for name, arr in feed.items()}
            for i in range(n)]


def validate_feeds(feeds: Sequence[Feed], specs: Sequence[InputSpec], *, where: str) -> list[Feed]:
    """Names, dtypes, ranks and static dims of every feed, one clear error each."""
    names = [s.name for s in specs]
    checked = []
    for index, feed in enumerate(feeds):
        at = f"iteration {index}"
        missing = [n for n in names if n not in feed]
        extra = [n for n in feed if n not in names]
        if missing or extra:
            raise InputDataError(where=where, problem=f"{at}: input names do not match the model "
                                 f"(missing {missing}, unexpected {extra})",
                                 fix=f"store exactly the model's inputs: {', '.join(names)}")
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
        raise InputDataError(where=where, problem=f"{at}: input {spec.name!r} has dtype {arr.dtype}, the model "
                             f"declares {want}", fix=f"save it as {want} (arr.astype(np.{want.name}))")
    if spec.dims is not None:
        if arr.ndim != len(spec.dims):
            raise InputDataError(where=where, problem=f"{at}: input {spec.name!r} has rank {arr.ndim} "
                                 f"{list(arr.shape)}, the model declares {fmt_dims(spec.dims)}",
                                 fix="save arrays with the model's input rank")
        bad = [i for i, (d, s) in enumerate(zip(spec.dims, arr.shape)) if d is not None and d != s]
        if bad:
            raise InputDataError(where=where, problem=f"{at}: input {spec.name!r} has shape {list(arr.shape)}, "
                                 f"the model declares {fmt_dims(spec.dims)} (dim {bad[0]} differs)",
                                 fix="save arrays matching the model's static dimensions")
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
