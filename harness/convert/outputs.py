"""Split a reference run's outputs (every intermediate tensor) into groups of bounded size.

onnxruntime returns all requested outputs of one run at once, so asking for every intermediate tensor of a big
model keeps them all alive together. :func:`output_groups` estimates each tensor's bytes from onnx shape
inference (graph inputs pinned to the feed's shapes) and packs them, in graph order, into groups of at most
``max_output_bytes``; the child runs the model once per group and reduces each tensor as it arrives. A tensor of
unknown size counts as the largest known one. Small models need one group: one run, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import onnx

from harness.core.dtypes import np_dtype
from harness.data.protocopy import light_copy

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


@dataclass(frozen=True)
class TensorFacts:
    """What onnx inference (graph inputs pinned to one feed's shapes) tells of each tensor it types."""

    types: Mapping[str, int]
    """Element type of each plain tensor."""
    ranks: Mapping[str, int]
    sizes: Mapping[str, int | None]
    """Estimated bytes (None: unknown shape or an element type numpy has no dtype for)."""


def tensor_facts(model: onnx.ModelProto, feed: Mapping[str, np.ndarray]) -> TensorFacts:
    try:
        inferred = onnx.shape_inference.infer_shapes(_sized_inputs(model, feed), strict_mode=False)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError):
        inferred = model
    types: dict[str, int] = {}
    ranks: dict[str, int] = {}
    known: dict[str, int | None] = {}
    for value in [*inferred.graph.value_info, *inferred.graph.output, *inferred.graph.input]:
        tensor = value.type.tensor_type
        if value.type.HasField("tensor_type") and tensor.elem_type:
            types[value.name] = tensor.elem_type
            if tensor.HasField("shape"):
                ranks[value.name] = len(tensor.shape.dim)
        dims = [int(d.dim_value) for d in tensor.shape.dim if d.HasField("dim_value")]
        try:
            itemsize = np_dtype(tensor.elem_type).itemsize
        except ValueError:
            itemsize = 0
        static = tensor.HasField("shape") and len(dims) == len(tensor.shape.dim)
        known[value.name] = int(np.prod(dims, dtype=np.int64)) * itemsize if itemsize and static else None
    for init in model.graph.initializer:
        types.setdefault(init.name, init.data_type)
    return TensorFacts(types=types, ranks=ranks, sizes=known)


def estimated_bytes(model: onnx.ModelProto, feed: Mapping[str, np.ndarray]) -> dict[str, int | None]:
    """Graph output name -> estimated bytes (None: unknown shape or type)."""
    known = tensor_facts(model, feed).sizes
    return {o.name: known.get(o.name) for o in model.graph.output}


def pack(sizes: Mapping[str, int | None], *, max_output_bytes: int = MAX_OUTPUT_BYTES) -> list[list[str]]:
    """Names packed in order into groups of at most `max_output_bytes` (one tensor may exceed; unknown sizes
    count as the largest known one)."""
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


def output_groups(
    model: onnx.ModelProto, *, max_output_bytes: int = MAX_OUTPUT_BYTES, feed: Mapping[str, np.ndarray]
) -> list[list[str]]:
    """`model`'s graph outputs packed in order into groups of at most `max_output_bytes` (one tensor may exceed)."""
    return pack(estimated_bytes(model, feed), max_output_bytes=max_output_bytes)
