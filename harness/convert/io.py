"""Load and save models for the converter: external data through onnx's helpers, atomic writes.

External-data locations must stay inside the model's folder; anything else (absolute paths,
``..``) is refused before a byte is read. Saving goes to a temporary file (or folder, for
external data) in the output directory and is renamed into place, so a failure never leaves a
partial output behind.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError
from onnx import external_data_helper

from harness.errors import ModelError

EXTERNAL_DATA_ABOVE = 1_800_000_000
"""Serialized size (bytes) above which a model is saved with external data (protobuf's limit is 2 GiB)."""


def _external_tensors(model: onnx.ModelProto) -> list[onnx.TensorProto]:
    return [t for t in external_data_helper._get_all_tensors(model) if external_data_helper.uses_external_data(t)]


def check_external_paths(model: onnx.ModelProto, folder: Path, *, where: Path) -> None:
    """Refuse external-data locations that leave `folder`."""
    root = folder.resolve()
    for tensor in _external_tensors(model):
        info = external_data_helper.ExternalDataInfo(tensor)
        target = (root / info.location).resolve()
        if Path(info.location).is_absolute() or not target.is_relative_to(root):
            raise ModelError(where=where, problem=f"tensor {tensor.name!r} points to external data {info.location!r} "
                                                  "outside the model's folder",
                             fix="keep external data files next to the model (relative paths inside its folder)")
        if not target.is_file():
            raise ModelError(where=where, problem=f"external data file {info.location!r} of tensor {tensor.name!r} "
                                                  "is missing", fix="copy the data file next to the model")


def load_model(path: Path) -> onnx.ModelProto:
    """Load an ONNX model and its external data (refusing paths outside its folder)."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(where=path, problem="model file not found", fix="pass the path of an existing .onnx file")
    try:
        model = onnx.load_model(str(path), load_external_data=False)
    except (DecodeError, ValueError, RuntimeError) as err:
        raise ModelError(where=path, problem=f"not an ONNX model ({type(err).__name__}: {err})",
                         fix="pass a valid .onnx file (check it with onnx.checker.check_model)") from None
    if model.ir_version <= 0 or not model.HasField("graph") or not model.opset_import:
        raise ModelError(where=path, problem="not an ONNX model (no IR version, graph or opset)",
                         fix="pass a valid .onnx file (check it with onnx.checker.check_model)")
    check_external_paths(model, path.parent, where=path)
    if _external_tensors(model):
        external_data_helper.load_external_data_for_model(model, str(path.parent))
    return model


def approximate_size(model: onnx.ModelProto) -> int:
    """Bytes of the top-level initializers: the bulk of a model, far cheaper to get than ByteSize()."""
    return sum(len(i.raw_data) + 4 * (len(i.float_data) + len(i.int32_data)) + 8 * (len(i.int64_data) + len(i.double_data))
               for i in model.graph.initializer)


def save_model(model: onnx.ModelProto, path: Path, *, external_above: int = EXTERNAL_DATA_ABOVE) -> None:
    """Write atomically; models above `external_above` bytes get one external data file ``<name>.data``."""
    path = Path(path)
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    if approximate_size(model) <= external_above:
        handle, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(model.SerializeToString())
            os.replace(tmp_name, path)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
        return
    data_name = f"{path.name}.data"
    tmp_dir = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=folder))
    try:
        staged = onnx.ModelProto()
        staged.CopyFrom(model)
        onnx.save_model(staged, str(tmp_dir / path.name), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=data_name, size_threshold=1024)
        os.replace(tmp_dir / data_name, folder / data_name)
        os.replace(tmp_dir / path.name, path)
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
