"""Integer graph inputs that feed shape-like parameters (axes, shape, split, sizes, indices...).

Random reference data cannot know valid values for them: ``Reshape(x, shape)`` with a random ``shape`` fails.
Random feeds give them distinct small values (``0, 1, 2...``: valid axes and indices for most ops), and when the
reference run still fails on random data the converter converts without magnitudes and says so.
"""
from __future__ import annotations

import onnx
from onnx import TensorProto, defs

SHAPE_PARAMS = frozenset({"axes", "shape", "split", "sizes", "indices", "repeats", "pads", "starts", "ends",
                          "steps", "K", "k", "depth", "input", "limit", "delta", "start", "axis", "output_shape",
                          "max_output_boxes_per_class", "batch_indices", "sequence_lens", "blocksize", "pad"})
INTS = frozenset({TensorProto.INT64, TensorProto.INT32, TensorProto.INT16, TensorProto.INT8, TensorProto.UINT64,
                  TensorProto.UINT32, TensorProto.UINT16, TensorProto.UINT8})


def _param_name(node: onnx.NodeProto, index: int, opset: int) -> str:
    try:
        schema = defs.get_schema(node.op_type, opset, node.domain if node.domain != "ai.onnx" else "")
    except defs.SchemaError:
        return ""
    params = schema.inputs
    return params[min(index, len(params) - 1)].name if params else ""


def shape_like_inputs(model: onnx.ModelProto) -> dict[str, str]:
    """Integer graph input -> "Op.param" of the first shape-like parameter it feeds (top-level graph)."""
    inits = {i.name for i in model.graph.initializer}
    ints = {vi.name for vi in model.graph.input
            if vi.name not in inits and vi.type.tensor_type.elem_type in INTS}
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    found: dict[str, str] = {}
    for node in model.graph.node:
        for index, name in enumerate(node.input):
            if name in ints and name not in found:
                param = _param_name(node, index, opset)
                if param in SHAPE_PARAMS:
                    found[name] = f"{node.op_type}.{param}"
    return found
