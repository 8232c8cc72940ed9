"""Split a reference run's outputs (every intermediate tensor) into groups of bounded size.

onnxruntime returns all requested outputs of one run at once, so asking for every intermediate tensor of a big
model keeps them all alive together. :func:`output_groups` estimates each tensor's bytes from onnx shape
inference (graph inputs pinned to the feed's shapes) and packs them, in graph order, into groups of at most
``max_output_bytes``; the child runs the model once per group and reduces each tensor as it arrives. A tensor of
unknown size counts as the largest known one. Small models need one group: one run, as before.
"""
from __future__ import annotations


from collections.abc import Mapping, Sequence

import numpy as np
import onnx

from harness.convert.graphinfo import light_copy
from harness.dtypes import np_dtype

MAX_OUTPUT_BYTES = 512 << 20


def _sized_inputs(model: onnx.ModelProto, feed: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    light = light_copy(model)  # every big tensor a stub: inference never serializes the weights
    for value in light.graph.input:
        if value.name in feed and value.type.HasField("tensor_type"):
            shape = value.type.tensor_type.shape
            del shape.dim[:]
            for size in np.shape(feed[value.name]):
                shape.dim.add().dim_value = int(size)
    return light


def estimated_bytes(model: onnx.ModelProto, feed: Mapping[str, np.ndarray]) -> dict[str, int | None]:
    """Graph output name -> estimated bytes (None: unknown shape or type)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(_sized_inputs(model, feed), strict_mode=False)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError):
        inferred = model
    known: dict[str, int | None] = {}
    for value in [*inferred.graph.value_info, *inferred.graph.output, *inferred.graph.input]:
        tensor = value.type.tensor_type
        dims = [int(d.dim_value) for d in tensor.shape.dim if d.HasField("dim_value")]
        try:
            itemsize = np_dtype(tensor.elem_type).itemsize
        except ValueError:
            itemsize = 0
        static = tensor.HasField("shape") and len(dims) == len(tensor.shape.dim)
        known[value.name] = int(np.prod(dims, dtype=np.int64)) * itemsize if itemsize and static else None
    return {o.name: known.get(o.name) for o in model.graph.output}


def output_groups(model: onnx.ModelProto, *, max_output_bytes: int = MAX_OUTPUT_BYTES,
                  feed: Mapping[str, np.ndarray], names: Sequence[str] | None = None) -> list[list[str]]:
    """`model`'s graph outputs (or those of them in `names`) packed in order into groups of at most
    `max_output_bytes` (one tensor may exceed)."""
    sizes = estimated_bytes(model, feed)
    if names is not None:
        sizes = {name: sizes.get(name) for name in names}
    largest = max((v for v in sizes.values() if v is not None), default=0)
    groups: list[list[str]] = [[]]
    used = 0
    for name, size in sizes.items():
        cost = largest if size is None else size
        if groups[-1] and used + cost > max_output_bytes:
            groups.append([])
            used = 0
        groups[-1].append(name)
        used += cost
    return [g for g in groups if g]
