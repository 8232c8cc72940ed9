"""What random reference data cannot stand for, so that the converter converts without magnitudes (and says so)
instead of refusing a model that onnxruntime runs and AutoCast converts.

Random feeds follow :func:`harness.data.recipes.plan_inputs`, which refuses to invent a shape-like integer input
(a Reshape shape, axes, split, sizes...). The converter's reference run has no ``--val-range``: such a model
converts without magnitudes, as does one with inputs random data cannot hold (sequences, optionals, strings,
float8/int4...), and one that onnxruntime loads but cannot run on random data.
"""

from __future__ import annotations

import onnx
from onnx import TensorProto

from harness.core.dtypes import np_dtype
from harness.data.roles import input_roles


def unholdable_inputs(model: onnx.ModelProto) -> dict[str, str]:
    """Graph inputs that random data and .npz files cannot hold -> why: not tensors (sequence, optional, map),
    strings, or an element type numpy has no plain dtype for (float8, int4, int2, float4...)."""
    inits = {i.name for i in model.graph.initializer}
    found: dict[str, str] = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        if not vi.type.HasField("tensor_type"):
            found[vi.name] = f"a {vi.type.WhichOneof('value')}"
            continue
        elem = vi.type.tensor_type.elem_type
        try:
            if elem == TensorProto.STRING:
                raise ValueError("strings")
            np_dtype(elem)
        except ValueError:
            found[vi.name] = TensorProto.DataType.Name(elem)
    return found


def shape_like_inputs(model: onnx.ModelProto) -> dict[str, str]:
    """Integer graph input -> what shape-like operand it feeds (data.feeds.input_roles' ``shape`` role)."""
    return {name: role.detail for name, role in input_roles(model).items() if role.kind == "shape"}
