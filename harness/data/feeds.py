"""The model's declared inputs (and what its graph does with them), and feeds read from files: ``.npz``, a folder
of ``.npz`` or Polygraphy ``--save-inputs`` JSON. The one home of input feeds: the golden's inputs
(:mod:`harness.data.recipes`), the converter's calibration data and the search strategies all use it.

Nothing here unpickles: ``.npz`` files are opened with ``allow_pickle=False`` and Polygraphy's base64
``np.save`` payloads are decoded the same way. Every mismatch with the model (names, dtype, rank, static
dims) is one :class:`~harness.core.errors.InputDataError` naming the file, the iteration and the input.
"""

from __future__ import annotations

import base64
import binascii
import io
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from harness.core.dtypes import BFLOAT16, FLOAT_TYPES, np_dtype
from harness.core.errors import InputDataError, UserError
from harness.core.jsonfile import read_json

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


# Ops that pass an integer tensor's values on unchanged (an index input may be reshaped or cast first).
_PASS_VALUES = {
    "Cast": (0,),
    "Reshape": (0,),
    "Unsqueeze": (0,),
    "Squeeze": (0,),
    "Flatten": (0,),
    "Identity": (0,),
    "Expand": (0,),
    "Transpose": (0,),
    "Concat": None,
}
# Operands that are shapes, axes, sizes or counts: input positions per op type.
_SHAPE_OPERANDS = {
    "Reshape": (1,),
    "Expand": (1,),
    "Tile": (1,),
    "Squeeze": (1,),
    "Unsqueeze": (1,),
    "Split": (1,),
    "Resize": (1, 2, 3),
    "Upsample": (1,),
    "Slice": (1, 2, 3, 4),
    "Pad": (1, 3),
    "ConstantOfShape": (0,),
    "TopK": (1,),
    "Range": (0, 1, 2),
    "OneHot": (1,),
    "CumSum": (1,),
    "ReduceSum": (1,),
    "ReduceMean": (1,),
    "ReduceMax": (1,),
    "ReduceMin": (1,),
    "ReduceProd": (1,),
    "ReduceL1": (1,),
    "ReduceL2": (1,),
    "ReduceLogSumExp": (1,),
    "ReduceSumSquare": (1,),
    "ReduceLogSum": (1,),
    "Trilu": (1,),
    "CenterCropPad": (1, 2),
    "Col2Im": (1, 2),
}
_INDEX_OPERANDS = {"Gather": (1, 0), "GatherElements": (1, 0), "GatherND": (1, None)}  # (indices, data) positions


@dataclass(frozen=True)
class InputRole:
    """What the graph does with an integer input: ``index`` (rows of the tables it indexes), ``shape`` (a shape,
    axes, sizes... operand) or ``unknown``; ``detail`` says which node, for the report."""

    kind: str
    detail: str = ""
    rows: int | None = None


def input_roles(model: onnx.ModelProto) -> dict[str, InputRole]:
    """Role of every integer graph input, found by following it through value-preserving ops (Cast, Reshape...)."""
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in model.graph.node:
        for position, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, position))
    inits = {t.name: tuple(t.dims) for t in model.graph.initializer}
    consts = {
        out: tuple(a.t.dims)
        for n in model.graph.node
        if n.op_type == "Constant"
        for a in n.attribute
        if a.name == "value"
        for out in n.output[:1]
    }
    tables = {**inits, **consts}
    roles: dict[str, InputRole] = {}
    for spec in input_specs(model):
        if spec.elem_type not in INT_TYPES:
            continue
        roles[spec.name] = _role(spec.name, consumers, tables)
    return roles


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


def _role(
    name: str, consumers: Mapping[str, list[tuple[onnx.NodeProto, int]]], tables: Mapping[str, tuple[int, ...]]
) -> InputRole:
    rows: list[tuple[int, str]] = []
    seen, todo = {name}, [name]
    while todo:
        tensor = todo.pop()
        for node, position in consumers.get(tensor, []):
            label = f"{node.op_type} {node.name or node.output[0]!r}"
            if position in _SHAPE_OPERANDS.get(node.op_type, ()):
                return InputRole("shape", f"operand {position} of {label}")
            index_data = _INDEX_OPERANDS.get(node.op_type)
            if index_data is not None and position == index_data[0]:
                data = node.input[0] if node.input else ""
                axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                dims = tables.get(data)
                if node.op_type == "GatherND" or dims is None or not dims:
                    return InputRole("unknown", f"indexes {label}, whose table is computed in the graph")
                rows.append((dims[axis % len(dims)], label))
                continue
            passes = node.op_type in _PASS_VALUES and (
                _PASS_VALUES[node.op_type] is None or position in (_PASS_VALUES[node.op_type] or ())
            )
            if passes:
                for out in node.output[:1]:
                    if out not in seen:
                        seen.add(out)
                        todo.append(out)
    if rows:
        smallest = min(rows)
        return InputRole("index", f"indices of {', '.join(label for _, label in sorted(set(rows)))}", rows=smallest[0])
    return InputRole("unknown")


def fmt_dims(dims: tuple[Dim, ...] | None) -> str:
    return "unknown" if dims is None else "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def spec_dtype(spec: InputSpec, *, where: str) -> np.dtype:
    try:
        return np_dtype(spec.elem_type)
    except ValueError as err:
        raise UserError(
            where=where, problem=f"input {spec.name!r}: {err}", fix="castguard supports numeric and bool tensor inputs"
        ) from err


def load_feed_file(path: Path) -> list[Feed]:
    """Read an ``.npz`` (one feed, maybe batched), a folder of ``.npz`` (one feed per file, sorted by name) or a
    Polygraphy JSON (a list of feeds), never unpickling."""
    if path.is_dir():
        files = sorted(path.glob("*.npz"))
        if not files:
            raise InputDataError(
                where=path,
                problem="folder holds no .npz files",
                fix="put one .npz per batch in the folder, keys = model input names",
            )
        return [_load_npz(file) for file in files]
    if not path.is_file():
        raise InputDataError(where=path, problem="inputs file not found", fix="check the path")
    if path.suffix == ".npz":
        return [_load_npz(path)]
    if path.suffix == ".json":
        return _load_polygraphy_json(path)
    raise InputDataError(
        where=path,
        problem=f"unsupported inputs file type {path.suffix!r}",
        fix="use an .npz (np.savez), a folder of .npz or a Polygraphy --save-inputs .json",
    )


def _load_npz(path: Path) -> Feed:
    if not zipfile.is_zipfile(path):
        raise InputDataError(
            where=path,
            problem="not a readable .npz (not a zip archive)",
            fix="save inputs with np.savez(path, name=array, ...)",
        )
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: np.ascontiguousarray(data[key]) for key in data.files}
    except ValueError as err:
        if "allow_pickle" in str(err) or "Object arrays" in str(err):
            raise InputDataError(
                where=path,
                problem="holds pickled Python objects (object arrays); castguard never unpickles input files",
                fix="save plain numeric arrays, e.g. np.savez(path, x=x.astype(np.float32))",
            ) from err
        raise InputDataError(where=path, problem=f"not a readable .npz: {err}", fix="re-save it with np.savez") from err
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        raise InputDataError(where=path, problem=f"not a readable .npz: {err}", fix="re-save it with np.savez") from err


def _decode_array(obj: Any, *, path: Path, where: str) -> np.ndarray:
    if not isinstance(obj, Mapping) or "array" not in obj:
        raise InputDataError(
            where=path,
            problem=f"{where} is not a Polygraphy ndarray object "
            "({'array': <base64>, 'polygraphy_class': 'ndarray'})",
            fix="save inputs with `polygraphy run --save-inputs` or use an .npz",
        )
    try:
        raw = base64.b64decode(obj["array"], validate=True)
        arr: np.ndarray = np.load(io.BytesIO(raw), allow_pickle=False)
        return arr
    except (binascii.Error, ValueError, EOFError, TypeError) as err:
        raise InputDataError(
            where=path,
            problem=f"{where} cannot be decoded without unpickling: {err}",
            fix="save plain numeric arrays (polygraphy run --save-inputs)",
        ) from err


def _load_polygraphy_json(path: Path) -> list[Feed]:
    data = read_json(path, what="inputs file", fix="pass a Polygraphy --save-inputs file", error=InputDataError)
    if isinstance(data, Mapping):  # one feed saved on its own
        data = [data]
    if not isinstance(data, list) or not all(isinstance(it, Mapping) for it in data) or not data:
        raise InputDataError(
            where=path,
            problem="expected a non-empty JSON list of {input name: array} feeds",
            fix="pass a Polygraphy --save-inputs file",
        )
    return [
        {name: _decode_array(value, path=path, where=f"iteration {i} input {name!r}") for name, value in it.items()}
        for i, it in enumerate(data)
    ]


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
