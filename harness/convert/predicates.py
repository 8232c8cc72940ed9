"""A user's Cast read only by IsInf / IsNaN carries no precision request: it is dropped before classification.

``IsInf(Cast(x, to=DOUBLE))`` is ``IsInf(x)`` for every float ``x`` (a widening or identity Cast keeps infinities,
NaNs and finite values), so such a Cast only makes the predicate read a wider type. castguard otherwise keeps the
author's Casts (README, "Differences from AutoCast"); this one is removed, as AutoCast removes it, and the
predicate reads the tensor in its stored type where its schema allows it (IsInf takes fp16 from opset 20, bf16
from opset 20; earlier opsets read an fp32 Cast of it). TensorFlow exports put a ``Cast(to=DOUBLE)`` before
IsInf/IsNaN; AutoCast's ``test_conv_isinf_conversion`` is that graph.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import onnx
from onnx import TensorProto

from harness.convert.subgraphs import captured

LOG = logging.getLogger("harness.convert")
PREDICATES = frozenset({"IsInf", "IsNaN"})
_WIDTH: dict[int, int] = {
    TensorProto.BFLOAT16: 16,
    TensorProto.FLOAT16: 16,
    TensorProto.FLOAT: 32,
    TensorProto.DOUBLE: 64,
}


def _to(node: onnx.NodeProto) -> int | None:
    return next((a.i for a in node.attribute if a.name == "to"), None)


def drop_predicate_casts(model: onnx.ModelProto, types: Mapping[str, int]) -> list[str]:
    """Remove every top-level float Cast that does not narrow (source type as wide or wider in the target) and is
    read only by default-domain IsInf/IsNaN nodes (not a graph output, not captured by a subgraph); its readers
    read its input. Returns the names of the removed Casts."""
    graph = model.graph
    outputs = {o.name for o in graph.output}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
        for name in captured(node):
            readers.setdefault(name, []).append(node)
    removed: list[str] = []
    gone: set[str] = set()
    for node in list(graph.node):
        if node.op_type != "Cast" or node.domain not in ("", "ai.onnx") or len(node.output) != 1:
            continue
        source, target = types.get(node.input[0]), _to(node)
        out = node.output[0]
        users = readers.get(out, [])
        if (
            source not in _WIDTH
            or target not in _WIDTH
            or _WIDTH[target] < _WIDTH[source]
            or out in outputs
            or not users
            or any(u.op_type not in PREDICATES or u.domain not in ("", "ai.onnx") or out in captured(u) for u in users)
        ):
            continue
        for user in users:
            for index, name in enumerate(user.input):
                if name == out:
                    user.input[index] = node.input[0]
        graph.node.remove(node)
        removed.append(node.name)
        gone.add(out)
    if removed:
        kept = [vi for vi in graph.value_info if vi.name not in gone]
        del graph.value_info[:]
        graph.value_info.extend(kept)
        LOG.info(
            "%d Cast(s) read only by IsInf/IsNaN dropped (the answer is the same in any float type): %s",
            len(removed),
            ", ".join(removed[:5]) + (" ..." if len(removed) > 5 else ""),
        )
    return removed
