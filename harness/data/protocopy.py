"""Copies of a model's proto that never touch its weights' bytes: :func:`light_copy` (every big tensor an
external-data stub, for shape inference and the checker: they need names, types and dims only; a full copy of a
500 MB model, and the serialization inside ``infer_shapes``, cost seconds), :func:`copy_except` and
:func:`value_bytes`; :func:`compacted` (a message's live bytes only), :func:`values_left_out`; and
:func:`split_weights`, which hands the big in-memory tensors to onnxruntime as arrays
instead of serializing them. Pending casts (:mod:`harness.data.pending`) already declare their new type, which the stub
keeps."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import uses_external_data

from harness.core.dtypes import FLOAT_TYPES, INT_TYPES, np_dtype

STUB_BYTES = 1024
"""In-memory tensors above this many bytes become stubs in a light copy (small ones, shapes among them, stay)."""
STUB_LOCATION = "castguard-stub"


def copy_except(message: Any, skip: str) -> Any:
    """A copy of a protobuf message without field `skip` (no bytes of that field are touched)."""
    out = type(message)()
    for fd, value in message.ListFields():
        if fd.name == skip:
            continue
        if fd.is_repeated:
            getattr(out, fd.name).extend(value)
        elif fd.message_type is not None:
            getattr(out, fd.name).CopyFrom(value)
        else:
            setattr(out, fd.name, value)
    return out


def compacted(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy holding only what ``model`` holds now. Protobuf (upb) keeps the bytes of every field a message
    replaced until the whole message dies: a converter's working copy of a 66 MB FP32 decoder whose weights became
    fp16 held 100 MB (the FP32 bytes it no longer shows, then the fp16 ones) while ``ByteSize()`` said 33 MB."""
    fresh = onnx.ModelProto()
    fresh.CopyFrom(model)
    return fresh


def value_bytes(tensor: TensorProto) -> int:
    """Bytes of a tensor's values from its dims and type (reading ``raw_data`` or ``ByteSize()`` would copy or
    walk the bytes: over a second for a 500 MB model)."""
    count = 1
    for dim in tensor.dims:
        count *= dim
    if tensor.data_type in (TensorProto.STRING, TensorProto.UNDEFINED):
        return count * 8
    return count * helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize


def values_left_out(
    model: onnx.ModelProto, which: Callable[[TensorProto], bool] = lambda tensor: True
) -> tuple[onnx.ModelProto, dict[str, TensorProto]]:
    """A copy of ``model`` whose big in-memory top-level initializers (``raw_data`` above :data:`STUB_BYTES`, for
    which ``which`` holds) have no values, and those initializers by name (``model``'s own messages, not copies).
    Such a copy is not a valid model until the values are put back or written beside it
    (:func:`harness.data.onnxsave.save_for_session`): it lets a model be rebuilt from another without holding the
    other's bytes twice (protobuf keeps a replaced field's bytes as long as the message lives)."""
    work: onnx.ModelProto = copy_except(model, "graph")
    work.graph.CopyFrom(copy_except(model.graph, "initializer"))
    values: dict[str, TensorProto] = {}
    for init in model.graph.initializer:
        if (
            init.HasField("raw_data")
            and not uses_external_data(init)
            and value_bytes(init) > STUB_BYTES
            and which(init)
        ):
            work.graph.initializer.append(copy_except(init, "raw_data"))
            values[init.name] = init
        else:
            work.graph.initializer.append(init)
    return work, values


def light_copy(model: onnx.ModelProto, *, location: str = STUB_LOCATION) -> onnx.ModelProto:
    """A copy whose big initializers are external-data stubs at `location`: same names, dims and types, no
    bytes. The big tensors are never copied or serialized, so this costs microseconds on any model."""
    light: onnx.ModelProto = copy_except(model, "graph")
    light.graph.CopyFrom(copy_except(model.graph, "initializer"))
    for init in model.graph.initializer:
        if uses_external_data(init) or value_bytes(init) > STUB_BYTES:
            stub = light.graph.initializer.add(
                name=init.name, data_type=init.data_type, dims=init.dims, data_location=TensorProto.EXTERNAL
            )
            stub.external_data.add(key="location", value=location)
        else:
            light.graph.initializer.append(init)
    return light


SPLIT_TYPES = FLOAT_TYPES | INT_TYPES | {TensorProto.UINT64}
"""Tensor types :func:`split_weights` hands over as arrays (onnxruntime takes numpy arrays of these)."""


def split_weights(model: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A copy whose in-memory top-level initializers above :data:`STUB_BYTES` are external-data stubs, and their
    values by name: onnxruntime takes those as external initializers, so the weights are never serialized into
    the bytes it parses (seconds for a 500 MB model). External tensors and small ones stay as they are."""
    light: onnx.ModelProto = copy_except(model, "graph")
    light.graph.CopyFrom(copy_except(model.graph, "initializer"))
    values: dict[str, np.ndarray] = {}
    for init in model.graph.initializer:
        if not uses_external_data(init) and init.data_type in SPLIT_TYPES and value_bytes(init) > STUB_BYTES:
            stub = light.graph.initializer.add(
                name=init.name, data_type=init.data_type, dims=init.dims, data_location=TensorProto.EXTERNAL
            )
            stub.external_data.add(key="location", value=STUB_LOCATION)
            values[init.name] = _values(init)
        else:
            light.graph.initializer.append(init)
    return light, values


def _values(tensor: TensorProto) -> np.ndarray:
    """A tensor's values: a view of its ``raw_data`` where it has one (one copy of the bytes, not two)."""
    if tensor.HasField("raw_data") and sys.byteorder == "little":
        return np.frombuffer(tensor.raw_data, dtype=np_dtype(tensor.data_type)).reshape(tuple(tensor.dims))
    return numpy_helper.to_array(tensor)
