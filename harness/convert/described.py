"""Any converter's output described from its own types: which nodes compute in low precision, the low-precision
FLOP share, the casts. Nothing here trusts a converter's plan: a node is low when a float tensor it computes
(else one it reads) is fp16/bf16 in the converted graph, as onnx shape inference and the model's value_info say.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import onnx

from harness.convert.flops import flop_share
from harness.convert.result import ConversionResult
from harness.core.dtypes import FLOAT_TYPES, LOW_ELEMS, LOW_TYPES
from harness.data.protocopy import light_copy

_MOVERS = frozenset({"Cast", "CastLike"})


SAME_SHAPE_FUSED = frozenset(
    {
        "SkipLayerNormalization",
        "SkipSimplifiedLayerNormalization",
        "BiasGelu",
        "FastGelu",
        "Gelu",
        "QuickGelu",
        "Attention",
        "RotaryEmbedding",
        "BiasAdd",
        "LayerNormalization",
        "SimplifiedLayerNormalization",
    }
)
"""com.microsoft fused ops whose first output has their first input's shape (onnx has no schema to infer it)."""


def _infer(model: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError):
        return model


def _static(model: onnx.ModelProto, input_shapes: Mapping[str, tuple[int, ...]]) -> None:
    for value in model.graph.input:
        shape = input_shapes.get(value.name)
        if shape is not None and len(shape) == len(value.type.tensor_type.shape.dim):
            for dim, size in zip(value.type.tensor_type.shape.dim, shape):
                dim.Clear()
                dim.dim_value = size


def _types_and_shapes(
    model: onnx.ModelProto, input_shapes: Mapping[str, tuple[int, ...]]
) -> tuple[dict[str, int], dict[str, tuple[int | None, ...]]]:
    """Every tensor's declared or inferred elem type and shape, on the given input shapes. onnx cannot infer a
    fused com.microsoft op's output: those of :data:`SAME_SHAPE_FUSED` take their first input's shape, and
    inference runs again past them."""
    stub = light_copy(model)
    declare_domains(stub)
    _static(stub, input_shapes)
    fused = [n for n in stub.graph.node if n.domain not in ("", "ai.onnx") and n.op_type in SAME_SHAPE_FUSED]
    inferred = _infer(stub)
    for _ in range(len(fused)):
        types, shapes = _read(model, inferred)
        added = False
        for node in fused:
            out, first = node.output[0], node.input[0]
            if out not in shapes and first in shapes and None not in shapes[first]:
                elem = types.get(out) or types.get(first, onnx.TensorProto.FLOAT)
                stub.graph.value_info.append(onnx.helper.make_tensor_value_info(out, elem, shapes[first]))
                added = True
        if not added:
            break
        inferred = _infer(stub)
    return _read(model, inferred)


def _read(
    model: onnx.ModelProto, inferred: onnx.ModelProto
) -> tuple[dict[str, int], dict[str, tuple[int | None, ...]]]:
    types: dict[str, int] = {}
    shapes: dict[str, tuple[int | None, ...]] = {}
    graph = inferred.graph
    for value in (*model.graph.value_info, *graph.input, *graph.output, *graph.value_info):
        tensor = value.type.tensor_type
        if not value.type.HasField("tensor_type") or not tensor.elem_type:
            continue
        types[value.name] = tensor.elem_type
        if tensor.HasField("shape"):
            shapes[value.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
    for init in graph.initializer:
        types[init.name] = init.data_type
        shapes[init.name] = tuple(init.dims)
    return types, shapes


def declare_domains(model: onnx.ModelProto) -> None:
    """Add the opset import a converter forgot for a domain its nodes use (onnxruntime's optimizer leaves
    com.microsoft out; onnxruntime runs such a model, onnx's shape inference refuses it)."""
    have = {o.domain for o in model.opset_import}
    for domain in sorted({n.domain for n in model.graph.node} - have - {"ai.onnx"}):
        model.opset_import.append(onnx.helper.make_opsetid(domain, 1))


def _float_types(names: list[str], types: Mapping[str, int]) -> list[int]:
    return [types[n] for n in names if n and types.get(n) in FLOAT_TYPES]


def node_is_low(node: onnx.NodeProto, types: Mapping[str, int]) -> bool:
    """A node computes in low precision when its float outputs are fp16/bf16 (a Cast: never; it only moves a
    value to its target type), else, with no typed float output, when its float inputs are."""
    if node.op_type in _MOVERS:
        return False
    outs = _float_types(list(node.output), types)
    if outs:
        return any(t in LOW_ELEMS for t in outs)
    return any(t in LOW_ELEMS for t in _float_types(list(node.input), types))


def describe_converted(
    model: onnx.ModelProto,
    *,
    input_shapes: Mapping[str, tuple[int, ...]],
    base_dir: Path | None = None,
    notes: tuple[str, ...] = (),
) -> ConversionResult:
    """A :class:`ConversionResult` for a model converted by anyone (plugin, AutoCast, onnxruntime, a file), its
    FLOPs counted on ``input_shapes`` (the golden's first feed)."""
    types, shapes = _types_and_shapes(model, input_shapes)
    nodes = list(model.graph.node)
    initializers = {t.name: t for t in model.graph.initializer}
    work = [n for n in nodes if n.op_type not in _MOVERS]  # casts move values: not counted, as in castguard's plan
    flops = flop_share(work, lambda n: node_is_low(n, types), shapes.get, initializers)
    low = tuple(n.name for n in nodes if node_is_low(n, types))
    high = tuple(
        (n.name, "its float tensors are fp32 in the converted graph")
        for n in nodes
        if n.op_type not in _MOVERS and not node_is_low(n, types) and _float_types([*n.input, *n.output], types)
    )
    casts = sum(
        1
        for n in nodes
        if n.op_type == "Cast"
        and (any(a.name == "to" and a.i in LOW_TYPES for a in n.attribute) or types.get(n.input[0]) in LOW_ELEMS)
    )
    if flops.unknown:
        notes = (*notes, f"{flops.unknown} node(s) of unknown shape are not in the low-precision FLOP share")
    return ConversionResult(
        model=model,
        low_nodes=low,
        high_nodes=high,
        lowp_flop_share=flops.share,
        cast_count=casts,
        clamped=(),
        base_dir=base_dir,
        lowp_share_bound=flops.bound,
        notes=notes,
    )
