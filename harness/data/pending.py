"""Pending casts: an external tensor whose declared type is already the new one while its bytes on disk are still
the source's (:func:`set_pending_cast`); :func:`~harness.data.onnxsave.save_model` converts the bytes while streaming
them (:func:`apply_pending`). The mark is castguard's own and never trusted from a file (:func:`drop_pending`)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, external_data_helper

from harness.core.dtypes import np_dtype, saturating_cast

PENDING_KEY = "castguard.cast_from"


def set_pending_cast(tensor: TensorProto, target: int) -> None:
    """Declare external `tensor` as `target` type; its bytes are converted when the model is saved."""
    if not external_data_helper.uses_external_data(tensor):
        raise ValueError(f"tensor {tensor.name!r} is in memory; convert it directly")
    chain = [*_pending_chain(tensor), tensor.data_type]
    drop_pending(tensor)
    tensor.metadata_props.add(key=PENDING_KEY, value=",".join(str(t) for t in chain))
    tensor.data_type = target


def drop_pending(tensor: TensorProto) -> None:
    if any(p.key == PENDING_KEY for p in tensor.metadata_props):
        kept = [p for p in tensor.metadata_props if p.key != PENDING_KEY]
        del tensor.metadata_props[:]
        tensor.metadata_props.extend(kept)


def _pending_chain(tensor: TensorProto) -> list[int]:
    """Types the bytes pass through before the declared one: the stored type first (empty: no pending cast)."""
    found = [p.value for p in tensor.metadata_props if p.key == PENDING_KEY]
    return [int(t) for t in found[-1].split(",")] if found else []


def pending_cast(tensor: TensorProto) -> int | None:
    """The stored type of a tensor with a pending cast (see :func:`set_pending_cast`), else None."""
    chain = _pending_chain(tensor)
    return chain[0] if chain else None


def apply_pending(chunk: np.ndarray, tensor: TensorProto) -> np.ndarray:
    """Source values of `tensor` through each pending cast in turn (fp32 -> fp16 -> fp32 rounds), to its type."""
    for elem in [*_pending_chain(tensor)[1:], tensor.data_type] if pending_cast(tensor) is not None else []:
        chunk = saturating_cast(chunk, np_dtype(elem))[0]
    return chunk


def source_view(tensor: TensorProto) -> TensorProto:
    """A tensor with `tensor`'s dims and the type its bytes are stored in (the type before any pending cast)."""
    source = pending_cast(tensor)
    return TensorProto(dims=tensor.dims, data_type=tensor.data_type if source is None else source)
