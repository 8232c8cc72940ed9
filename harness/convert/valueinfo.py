"""Complete ``value_info`` in every converted model: a type (and a shape where known) for every tensor a
top-level node produces, inserted Casts included.

TensorRT, Polygraphy and onnx-graphsurgeon read intermediate types from ``value_info`` (graphsurgeon gives a
tensor without one the dtype None). The entries come from the strict inference that validates the model;
tensors inference cannot type (outputs of custom ops) get the type the converter stored them in.
"""

from __future__ import annotations

from collections.abc import Mapping

import onnx
from onnx import helper

from harness.convert.graphinfo import Shape


def complete_value_info(
    model: onnx.ModelProto, inferred: onnx.ModelProto, *, storage: Mapping[str, int], shapes: Mapping[str, Shape]
) -> int:
    """Replace `model`'s top-level value_info by one entry per node output that is not a graph output.
    Returns how many entries had to come from `storage` (untyped by inference)."""
    graph = model.graph
    found = {
        vi.name: vi
        for vi in inferred.graph.value_info
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type
    }
    found.update({vi.name: vi for vi in inferred.graph.value_info if not vi.type.HasField("tensor_type")})
    skip = {vi.name for vi in graph.output} | {vi.name for vi in graph.input}
    entries: list[onnx.ValueInfoProto] = []
    fallback = 0
    seen: set[str] = set()
    for node in graph.node:
        for name in node.output:
            if not name or name in skip or name in seen:
                continue
            seen.add(name)
            if name in found:
                entries.append(found[name])
            elif name in storage:
                shape = shapes.get(name)
                dims = None if shape is None else [d if d is not None else None for d in shape]
                entries.append(helper.make_tensor_value_info(name, storage[name], dims))
                fallback += 1
    del graph.value_info[:]
    graph.value_info.extend(entries)
    return fallback
