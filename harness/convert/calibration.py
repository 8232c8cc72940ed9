"""Reference data for the magnitude run: random feeds, or calibration data from files.

Calibration data may be an ``.npz``, a folder of ``.npz`` (one or more batches per file, sorted by
name), a Polygraphy ``--save-inputs`` JSON (a list of feed dicts) or a mapping of arrays. An array
whose leading dim is a multiple of the model's static batch is split into that many batches, like
AutoCast; with a dynamic batch dim the whole array is one batch. Nothing is ever unpickled.
"""
from __future__ import annotations

import base64
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto

from harness.convert.shapelike import shape_like_inputs
from harness.dtypes import np_dtype
from harness.errors import InputDataError

Feed = dict[str, np.ndarray]
Dims = tuple[int | str | None, ...]


def unholdable_inputs(model: onnx.ModelProto) -> dict[str, str]:
    """Graph inputs that random data and .npz files cannot hold -> why: not tensors (sequence, optional, map),
    or of an element type numpy has no plain dtype for (float8, int4, int2, float4...)."""
    found: dict[str, str] = {}
    for vi in model.graph.input:
        if not vi.type.HasField("tensor_type"):
            found[vi.name] = f"a {vi.type.WhichOneof('value')}"
        elif vi.type.tensor_type.elem_type != TensorProto.STRING:
            try:
                np_dtype(vi.type.tensor_type.elem_type)
            except ValueError:
                found[vi.name] = TensorProto.DataType.Name(vi.type.tensor_type.elem_type)
    return found


def input_specs(model: onnx.ModelProto) -> dict[str, tuple[int, Dims]]:
    """Real graph inputs (initializers listed as inputs excluded) -> (elem type, dims; str/None = dynamic)."""
    inits = {i.name for i in model.graph.initializer}
    specs: dict[str, tuple[int, Dims]] = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        if not vi.type.HasField("tensor_type"):
            raise InputDataError(where=f"model input {vi.name!r}",
                                 problem=f"is a {vi.type.WhichOneof('value')}, not a tensor: reference data "
                                         "(random or .npz) holds tensors only",
                                 fix="skip the reference run (data_max=inf / --data_max inf)")
        tt = vi.type.tensor_type
        dims: Dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
        specs[vi.name] = (tt.elem_type, dims)
    return specs


def random_feeds(model: onnx.ModelProto, *, seed: int,
                 input_shapes: Mapping[str, Sequence[int]] | None) -> tuple[list[Feed], str]:
    """One feed: floats uniform in [-1, 1], ints in {0, 1} (0, 1, 2... for shape-like ones: see
    :mod:`harness.convert.shapelike`), bools random; dynamic dims 1 unless overridden, zero-size dims kept."""
    rng = np.random.default_rng(seed)
    overrides = dict(input_shapes or {})
    unknown = sorted(set(overrides) - set(input_specs(model)))
    if unknown:
        raise InputDataError(where="input_shapes", problem=f"no model input named {unknown}",
                             fix=f"use input names from {sorted(input_specs(model))}")
    feed: Feed = {}
    described = []
    shape_like = shape_like_inputs(model)
    for name, (elem, dims) in input_specs(model).items():
        shape = tuple(overrides.get(name) or (d if isinstance(d, int) and d >= 0 else 1 for d in dims))
        if elem == TensorProto.STRING:
            feed[name] = rng.choice(np.array(["a", "bc", "def"]), size=shape)
            described.append(f"{name}:{'x'.join(map(str, shape)) or 'scalar'}")
            continue
        dtype = np_dtype(elem)
        if np.issubdtype(dtype, np.bool_):
            feed[name] = rng.integers(0, 2, size=shape).astype(bool)
        elif name in shape_like:
            feed[name] = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
        elif np.issubdtype(dtype, np.integer):
            feed[name] = rng.integers(0, 2, size=shape).astype(dtype)
        else:
            feed[name] = rng.uniform(-1.0, 1.0, size=shape).astype(np.float32).astype(dtype)
        described.append(f"{name}:{'x'.join(map(str, shape)) or 'scalar'}")
    return [feed], f"random[-1,1] ints{{0,1}} seed={seed} shapes={','.join(described)}"


def load_calibration(data: str | Path | Mapping[str, np.ndarray], model: onnx.ModelProto) -> tuple[list[Feed], str]:
    """Load and validate calibration data; returns the batches and a description of the source."""
    specs = input_specs(model)
    if isinstance(data, Mapping):
        return _split(dict(data), specs, where="calibration_data"), "calibration:<dict>"
    path = Path(data)
    if path.is_dir():
        files = sorted(path.glob("*.npz"))
        if not files:
            raise InputDataError(where=path, problem="folder holds no .npz files",
                                 fix="put one .npz per batch in the folder, keys = model input names")
        batches = [b for f in files for b in _split(_read_npz(f), specs, where=str(f))]
        return batches, f"calibration:{path} ({len(files)} files)"
    if not path.is_file():
        raise InputDataError(where=path, problem="calibration file not found", fix="pass an existing .npz/.json/folder")
    if path.suffix == ".npz":
        return _split(_read_npz(path), specs, where=str(path)), f"calibration:{path}"
    if path.suffix == ".json":
        feeds = _read_polygraphy_json(path)
        return [b for feed in feeds for b in _split(feed, specs, where=str(path))], f"calibration:{path}"
    raise InputDataError(where=path, problem=f"unknown calibration format {path.suffix!r}",
                         fix="use an .npz, a folder of .npz, or a Polygraphy --save-inputs .json")


def _read_npz(path: Path) -> Feed:
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {key: npz[key] for key in npz.files}
    except ValueError as err:
        raise InputDataError(where=path, problem=f"cannot read arrays ({err})",
                             fix="save plain numeric arrays with np.savez (no object arrays)") from None
    except (OSError, EOFError) as err:
        raise InputDataError(where=path, problem=f"not a readable .npz ({err})", fix="re-create it with np.savez") from None


def _read_polygraphy_json(path: Path) -> list[Feed]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputDataError(where=path, problem=f"not readable JSON ({err})",
                             fix="save inputs with `polygraphy run --save-inputs FILE.json`") from None
    if isinstance(doc, dict):
        doc = [doc]
    if not isinstance(doc, list) or not all(isinstance(feed, dict) for feed in doc):
        raise InputDataError(where=path, problem="expected a list of {input name: array} feeds",
                             fix="save inputs with `polygraphy run --save-inputs FILE.json`")
    return [{name: _decode_array(value, path, name) for name, value in feed.items()} for feed in doc]


def _decode_array(value: object, path: Path, name: str) -> np.ndarray:
    if not (isinstance(value, dict) and value.get("polygraphy_class") == "ndarray" and "array" in value):
        raise InputDataError(where=f"{path}:{name}", problem="value is not a Polygraphy-encoded ndarray",
                             fix="save inputs with `polygraphy run --save-inputs FILE.json`")
    try:
        return np.asarray(np.load(io.BytesIO(base64.b64decode(value["array"])), allow_pickle=False))
    except ValueError as err:
        raise InputDataError(where=f"{path}:{name}", problem=f"cannot decode the array ({err})",
                             fix="re-save the inputs with Polygraphy") from None


def _split(feed: Feed, specs: Mapping[str, tuple[int, Dims]], *, where: str) -> list[Feed]:
    if sorted(feed) != sorted(specs):
        raise InputDataError(where=where, problem=f"keys {sorted(feed)} do not match model inputs {sorted(specs)}",
                             fix="name each array after a model input (np.savez(path, **{name: array}))")
    counts = set()
    checked: Feed = {}
    for name, (elem, dims) in specs.items():
        array = np.asarray(feed[name])
        dtype = np_dtype(elem)
        if array.ndim != len(dims):
            raise InputDataError(where=f"{where}:{name}", problem=f"rank {array.ndim}, model expects {len(dims)}",
                                 fix=f"reshape to {list(dims)}")
        if array.dtype != dtype:
            if array.dtype.kind != np.dtype(dtype).kind and not (array.dtype.kind in "fiu" and dtype.kind in "fV"):
                raise InputDataError(where=f"{where}:{name}", problem=f"dtype {array.dtype}, model expects {dtype}",
                                     fix=f"save the array as {dtype}")
            array = array.astype(dtype)
        for axis, (want, got) in enumerate(zip(dims, array.shape)):
            if axis > 0 and isinstance(want, int) and want > 0 and want != got:
                raise InputDataError(where=f"{where}:{name}", problem=f"shape {array.shape}, model expects {list(dims)}",
                                     fix="match every static dim of the model input")
        batch = _static_batch(dims)
        if batch is not None:
            if array.shape[0] % batch:
                raise InputDataError(where=f"{where}:{name}",
                                     problem=f"leading dim {array.shape[0]} is not a multiple of the model batch {batch}",
                                     fix=f"give a multiple of {batch} rows")
            counts.add(array.shape[0] // batch)
        checked[name] = array
    if len(counts) > 1:
        raise InputDataError(where=where, problem=f"inputs split into different batch counts {sorted(counts)}",
                             fix="give every input the same number of rows")
    n = counts.pop() if counts else 1
    if n == 1:
        return [checked]
    return [{name: np.array_split(arr, n)[i] if _static_batch(specs[name][1]) is not None else arr
             for name, arr in checked.items()} for i in range(n)]


def _static_batch(dims: Dims) -> int | None:
    first = dims[0] if dims else None
    return first if isinstance(first, int) and first > 0 else None
