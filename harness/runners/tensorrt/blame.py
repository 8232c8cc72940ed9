"""Which ONNX node a TensorRT *builder* error is about (pure text and graph work; no TensorRT needed).

A parser refusal names its node (``ParserError.node_name``). A builder failure does not: it is one log line, such
as Myelin's ``Could not infer output types for operation: 31: deconv: y-(bf16[2,4,8,8]...) | x-(...),
convtranspose filterWeightsBFloat16-{...}``. TensorRT's ONNX parser names each layer after its ONNX node (the
parser's layer list, ``network.get_layer(i).name``), names weights ``<layer> filterWeights...`` and keeps the ONNX
tensor names, so the node is found in the text, in this order of evidence:

1. a layer name from the parser's list (or an ONNX node name) that appears in the text as a whole word;
2. an ONNX tensor that Myelin prints as ``name-(type[dims]...)``: the node that produces it;
3. the Myelin operation kind (``deconv``, ``conv``...) when exactly one node of the matching ONNX op exists.

Nothing found: an empty tuple (the caller keeps TensorRT's text, as before).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import onnx

from harness.runners.tensorrt.buildfacts import BuildCulprit as BuildCulprit
from harness.runners.tensorrt.precision_diff import declared_precisions

MYELIN_OPS = {
    "deconv": ("ConvTranspose",),
    "conv": ("Conv",),
    "convolution": ("Conv",),
    "gemm": ("Gemm", "MatMul"),
    "matmul": ("MatMul", "Gemm"),
}
"""Myelin operation kinds (``NN: kind:`` in its messages) -> the ONNX ops they come from."""
_MYELIN_KIND = re.compile(r"for operation:\s*\d+:\s*([A-Za-z_]+):")
_WORD_EDGE = r"[\w./:-]"


def _named(text: str, name: str) -> bool:
    """`name` appears in `text` as a whole word (not inside a longer name such as ``__mye33convtranspose``)."""
    return bool(name) and re.search(rf"(?<!{_WORD_EDGE}){re.escape(name)}(?!{_WORD_EDGE}|\w)", text) is not None


def blame_build_error(
    model: onnx.ModelProto, error: str, *, layers: Sequence[Sequence[Any]] = ()
) -> tuple[BuildCulprit, ...]:
    """The nodes of `model` that the builder's `error` text is about (strongest evidence first; see the module).

    `layers` is the parser's layer list as :func:`harness.runners.tensorrt.plan.build_plan` returns it
    (``[name, type, [dtypes]]``); a layer whose name is not an ONNX node name maps to the node whose name it
    starts with (the parser suffixes the extra layers of one node)."""
    nodes = {n.name: n for n in model.graph.node if n.name}
    declared = declared_precisions(model)

    def culprit(node: onnx.NodeProto, evidence: str) -> BuildCulprit:
        dtype = next((declared[i] for i in node.input if i in declared), "")
        return BuildCulprit(node=node.name, op=node.op_type, dtype=dtype, evidence=evidence)

    found: dict[str, BuildCulprit] = {}
    layer_names = [str(layer[0]) for layer in layers if layer] + list(nodes)
    for name in sorted(set(layer_names), key=len, reverse=True):  # longest first: "up/conv" before "up"
        node = nodes.get(name) or _owner(name, nodes)
        if node is not None and node.name not in found and _named(error, name):
            kind = "node" if name == node.name else f"layer {name!r} of node"
            found[node.name] = culprit(node, f"{kind} {node.name!r} is named in the builder's error")
    if found:
        return tuple(found.values())
    producers = {out: n for n in model.graph.node for out in n.output if out and n.name}
    for tensor, node in producers.items():
        if node.name not in found and re.search(rf"(?<!{_WORD_EDGE}){re.escape(tensor)}-\(", error):
            found[node.name] = culprit(node, f"its output {tensor!r} is named in the builder's error")
    if found:
        return tuple(found.values())
    match = _MYELIN_KIND.search(error)
    kind = match.group(1) if match else ""
    matches = [n for n in model.graph.node if n.op_type in MYELIN_OPS.get(kind.lower(), ()) and n.name]
    if len(matches) == 1:
        return (
            culprit(
                matches[0], f"the only {matches[0].op_type} node, and the error is about a Myelin {kind!r} operation"
            ),
        )
    return ()


def _owner(layer: str, nodes: dict[str, onnx.NodeProto]) -> onnx.NodeProto | None:
    """The node whose name `layer` extends with a suffix (``up_1``, ``up/bias``), longest name first."""
    for name in sorted(nodes, key=len, reverse=True):
        if layer.startswith(name) and len(layer) > len(name) and not (layer[len(name)].isalnum()):
            return nodes[name]
    return None
