"""QDQ (int8) models: the QuantizeLinear/DequantizeLinear nodes and the ops between them.

Int8 back ends (TensorRT, onnxruntime's QDQ transformers) fuse ``DequantizeLinear -> op -> QuantizeLinear`` into
one quantized kernel; a Cast inside that pattern breaks the fusion and requantizes rounded values. So the Q/DQ
nodes, every op reading a DQ output and every op feeding a Q keep their types (the classifier's rule 1b), and
the rest of the model is converted.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx

from harness.convert.graphinfo import domain_of

QDQ = "qdq"
"""The reason prefix of nodes kept FP32 because they belong to a quantized DQ -> op -> Q pattern."""
QUANT_OPS = ("QuantizeLinear", "DequantizeLinear")


def qdq_nodes(nodes: Sequence[onnx.NodeProto]) -> dict[str, str]:
    """Node name -> why it belongs to a QDQ pattern: the Q/DQ nodes themselves, the ops reading a DequantizeLinear
    output, the ops feeding a QuantizeLinear. Empty for a model without Q/DQ."""
    quant = [n for n in nodes if n.op_type in QUANT_OPS and domain_of(n) in ("", "com.microsoft")]
    if not quant:
        return {}
    dequantized = {o for n in quant if n.op_type == "DequantizeLinear" for o in n.output if o}
    quantized = {n.input[0] for n in quant if n.op_type == "QuantizeLinear" and n.input}
    found: dict[str, str] = {}
    quant_ids = {id(n) for n in quant}
    for node in nodes:
        if id(node) in quant_ids:
            found[node.name] = f"{node.op_type} keeps its quantized/FP32 types"
        elif any(i in dequantized for i in node.input):
            found[node.name] = "reads a DequantizeLinear output (DQ -> op -> Q is not split by Casts)"
        elif any(o in quantized for o in node.output):
            found[node.name] = "feeds a QuantizeLinear (DQ -> op -> Q is not split by Casts)"
    return found
