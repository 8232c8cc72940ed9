"""Convert initializers and Constant values by their users; never duplicate a shared weight.

Storage choice per source (initializer or Constant ``value``):
- all users want one type -> store it in that type (unless it is larger than init_conversion_max_bytes:
  then it stays as it is and the users get a runtime Cast);
- users want several types -> stored once: in the low type when that conversion is exact (users of the
  original type get a Cast up), else in its original type (users of the low type get a Cast down).
FP16/BF16 conversion clamps finite values to the type's largest finite value and logs each clamp;
tiny values round to nearest (keeping their sign, or becoming +-0); inf/NaN stay inf/NaN.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper
from onnx.external_data_helper import uses_external_data

from harness.convert.graphinfo import GraphInfo
from harness.convert.weights import Weights
from harness.core.dtypes import LOW_MAX, np_dtype, saturating_cast
from harness.data.pending import set_pending_cast

LOG = logging.getLogger("harness.convert")


def _nbytes(tensor: TensorProto) -> int:
    if tensor.raw_data:
        return len(tensor.raw_data)
    return int(np.prod(tensor.dims, dtype=np.int64)) * np_dtype(tensor.data_type).itemsize


def choose_storage(tensor: TensorProto, wants: set[int], *, max_bytes: int | None, weights: Weights) -> int:
    original = tensor.data_type
    if not wants or wants == {original}:
        return original
    if max_bytes is not None and _nbytes(tensor) > max_bytes:
        return original
    if len(wants) == 1:
        return next(iter(wants))
    lows = [w for w in wants if w in LOW_MAX]
    if len(lows) == 1 and original in wants and weights.exact_in(tensor, np_dtype(lows[0])):
        return lows[0]
    return original


def convert_tensor(tensor: TensorProto, target: int) -> tuple[TensorProto, str | None]:
    """`tensor` in `target` type (same name), and a clamp message when values were clamped."""
    array, count, worst = saturating_cast(numpy_helper.to_array(tensor), np_dtype(target))
    return numpy_helper.from_array(array, tensor.name), _clamp_message(tensor, target, count, worst)


def _clamp_message(tensor: TensorProto, target: int, count: int, worst: float) -> str | None:
    if not count:
        return None
    return f"{tensor.name or '<constant>'}: {count} value(s) clamped to +-{LOW_MAX[target]:g} (max |x| {worst:.6g})"


def _convert_in_place(tensor: TensorProto, target: int) -> str | None:
    """Rewrite an in-memory tensor as `target`: new bytes and type set on the message itself (no second copy
    of the tensor through CopyFrom); returns the clamp message."""
    converted, message = convert_tensor(tensor, target)
    for name in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data"):
        tensor.ClearField(name)
    tensor.data_type = converted.data_type
    tensor.raw_data = converted.raw_data
    return message


def mark_external(tensor: TensorProto, target: int, weights: Weights) -> str | None:
    """An external tensor (lazy model) becomes `target` when saved (streamed); its clamp message from its figures."""
    count, worst = weights.clamps(tensor, target)
    set_pending_cast(tensor, target)
    return _clamp_message(tensor, target, count, worst)


def apply_storage(model: onnx.ModelProto, info: GraphInfo, storage: Mapping[str, int]) -> list[str]:
    """Rewrite initializers and Constant values whose storage type changed; returns clamp messages.
    External tensors (lazy models) get a pending cast instead: their bytes are converted when saved."""
    clamped: list[str] = []
    inits = model.graph.initializer
    for index, init in enumerate(inits):
        target = storage.get(init.name, init.data_type)
        if target != init.data_type:
            if uses_external_data(init):
                message = mark_external(init, target, info.weights)
            else:
                message = _convert_in_place(inits[index], target)
            if message:
                clamped.append(message)
    for node in model.graph.node:
        if not node.output or node.output[0] not in info.constants:
            continue
        attr = node.attribute[0]
        target = storage.get(node.output[0], attr.t.data_type)
        if target != attr.t.data_type:
            if uses_external_data(attr.t):
                message = mark_external(attr.t, target, info.weights)
            else:
                converted, message = convert_tensor(attr.t, target)
                attr.t.CopyFrom(converted)
            if message:
                clamped.append(f"{node.output[0]}: {message.partition(': ')[2]}")
    for message in clamped:
        LOG.warning("clamped while converting: %s", message)
    return clamped
