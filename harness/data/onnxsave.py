"""The one place that writes ONNX files, external data included, in bounded memory (:mod:`harness.data.onnxfile`
loads them).

* :func:`save_model` writes atomically (temporary names in the target folder, then renames): one ``.onnx`` and,
  when the model is lazy or above ``external_above`` bytes, one ``<name>.data`` file with every initializer of
  ``inline_below`` bytes or more, offsets aligned to :data:`ALIGN` for mmap (the layout of
  ``onnx.save_model(..., save_as_external_data=True, all_tensors_to_one_file=True)``). A failed write (disk
  full, quota) is one ModelError and leaves nothing behind.
* :func:`save_for_session` writes a model as onnxruntime loads it best, into a private scratch folder: one copy of
  the bytes, nothing synced or renamed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np
import onnx
from onnx import TensorProto, external_data_helper

from harness.core.errors import ModelError, UserError
from harness.core.files import atomic_write, atomic_write_files, disk_full
from harness.data.onnxfile import EXTERNAL_DATA_ABOVE, external_tensors, is_lazy, iter_chunks, weights_size
from harness.data.pending import apply_pending, drop_pending
from harness.data.protocopy import copy_except, value_bytes

INLINE_BELOW = 1024
"""Initializers smaller than this stay inside the ``.onnx`` (onnx's ``size_threshold`` default)."""
ALIGN = 4096
"""Offsets of tensors in a data file are multiples of this (mmap)."""


def save_model(
    model: onnx.ModelProto,
    path: Path,
    *,
    base_dir: Path | None = None,
    external_above: int = EXTERNAL_DATA_ABOVE,
    inline_below: int = INLINE_BELOW,
) -> None:
    """Write `model` to `path` atomically; lazy models (external tensors relative to `base_dir`) and models
    above `external_above` bytes get one aligned ``<name>.data`` file beside it (see the module docstring)."""
    path = Path(path)
    folder = path.parent
    lazy = is_lazy(model)
    if lazy and base_dir is None:
        raise ValueError("save_model: the model has external tensors; pass base_dir (their folder)")
    try:
        if not lazy and weights_size(model) <= external_above:
            atomic_write(path, model.SerializeToString())
            return
    except OSError as err:
        raise _write_error(path, err) from None
    data_path = folder / f"{path.name}.data"

    def write(temps: Sequence[Path]) -> None:
        out = onnx.ModelProto()
        out.CopyFrom(model)
        _write_data(out, temps[0], base_dir=base_dir, inline_below=inline_below)
        temps[1].write_bytes(out.SerializeToString())

    try:
        atomic_write_files([data_path, path], write)  # the data first: the model names it
    except OSError as err:
        raise _write_error(path, err) from None


def save_for_session(model: onnx.ModelProto, folder: Path, *, values: Mapping[str, TensorProto] | None = None) -> Path:
    """``model`` written as onnxruntime loads it best from a private scratch ``folder``: each top-level in-memory
    initializer of :data:`INLINE_BELOW` bytes or more in one aligned ``model.onnx.data``, the rest in
    ``model.onnx`` (returned). ``values``: the values of initializers ``model`` has without them
    (:func:`harness.data.protocopy.values_left_out`), by name. The bytes are copied once, a tensor at a time: no
    copy of the whole proto (which :func:`save_model` makes), nothing synced or renamed (the files live until the
    session is made)."""
    path = folder / "model.onnx"
    data_path = folder / f"{path.name}.data"
    out = copy_except(model, "graph")
    out.graph.CopyFrom(copy_except(model.graph, "initializer"))
    with open(data_path, "wb") as sink:
        for init in model.graph.initializer:
            source = (values or {}).get(init.name, init)
            if (
                not external_data_helper.uses_external_data(source)
                and source.HasField("raw_data")
                and value_bytes(source) >= INLINE_BELOW
            ):
                stub = copy_except(init, "raw_data")
                _place(stub, sink, data_path.name, iter([np.frombuffer(source.raw_data, np.uint8)]))
                out.graph.initializer.append(stub)
            else:
                out.graph.initializer.append(source)
    path.write_bytes(out.SerializeToString())
    return path


def _write_data(out: onnx.ModelProto, data_path: Path, *, base_dir: Path | None, inline_below: int) -> None:
    """Stream every external tensor (pending casts applied) and every in-memory initializer of `inline_below`
    bytes or more into `data_path`, aligned; `out`'s tensors are pointed at it."""
    with open(data_path, "wb") as sink:
        for tensor in external_tensors(out):
            assert base_dir is not None
            _place(tensor, sink, data_path.name, _converted_chunks(tensor, base_dir))
        for tensor in external_data_helper._get_initializer_tensors(out):
            if (
                not external_data_helper.uses_external_data(tensor)
                and tensor.HasField("raw_data")
                and len(tensor.raw_data) >= inline_below
            ):
                _place(tensor, sink, data_path.name, iter([np.frombuffer(tensor.raw_data, np.uint8)]))
                tensor.ClearField("raw_data")
        sink.flush()
        os.fsync(sink.fileno())


def _converted_chunks(tensor: TensorProto, base_dir: Path) -> Iterator[np.ndarray]:
    for chunk in iter_chunks(tensor, base_dir):
        yield apply_pending(chunk, tensor)
    drop_pending(tensor)


def _place(tensor: TensorProto, sink: BinaryIO, location: str, chunks: Iterator[np.ndarray]) -> None:
    offset = -(-sink.tell() // ALIGN) * ALIGN
    sink.write(b"\0" * (offset - sink.tell()))
    for chunk in chunks:
        sink.write(np.ascontiguousarray(chunk).view(np.uint8).data)
    length = sink.tell() - offset
    del tensor.external_data[:]
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        tensor.external_data.add(key=key, value=value)
    tensor.data_location = TensorProto.EXTERNAL


def _write_error(path: Path, err: OSError) -> UserError:
    full = disk_full(path, err)
    if full is not None:
        return full
    return ModelError(
        where=path,
        problem=f"cannot write the model ({err.strerror or err}); nothing was written",
        fix=f"free disk space (or raise the quota) in {path.parent}, or write elsewhere (--output_path)",
    )
