"""After the Casts are in (:mod:`harness.convert.casts`): Casts inserted there that a lossless widening makes
redundant or that nobody reads are dropped, and a user's int -> fp32 Cast read only by our Cast to the low type
casts straight to it. The user's own Casts are never removed."""

from __future__ import annotations

from collections.abc import Mapping

import onnx
from onnx import TensorProto

from harness.convert.graphinfo import domain_of
from harness.convert.subgraphs import captured, rename_captures
from harness.core.dtypes import LOW_ELEMS

_WIDENING = {
    (TensorProto.FLOAT16, TensorProto.FLOAT),
    (TensorProto.BFLOAT16, TensorProto.FLOAT),
    (TensorProto.FLOAT16, TensorProto.DOUBLE),
    (TensorProto.BFLOAT16, TensorProto.DOUBLE),
    (TensorProto.FLOAT, TensorProto.DOUBLE),
}


def cleanup_casts(graph: onnx.GraphProto, ours: set[str], storage: dict[str, int]) -> int:
    """Tidy the Casts inserted here (never the user's): a Cast reading our lossless widening Cast reads
    its source instead (and disappears when that makes it an identity); Casts nobody reads are dropped."""
    removed = 0
    outputs = {o.name for o in graph.output}
    by_output = {n.output[0]: n for n in graph.node if n.name in ours}
    rename: dict[str, str] = {}
    for node in graph.node:
        first = by_output.get(node.input[0]) if node.name in ours else None
        if first is None or (storage.get(first.input[0]), storage[first.output[0]]) not in _WIDENING:
            continue
        node.input[0] = first.input[0]
        if storage[node.output[0]] == storage.get(first.input[0]) and node.output[0] not in outputs:
            rename[node.output[0]] = first.input[0]
    if rename:
        for node in graph.node:
            for index, name in enumerate(node.input):
                node.input[index] = rename.get(name, name)
            rename_captures(node, rename)
    while True:
        used = {n for node in graph.node for n in node.input} | outputs
        used |= {n for node in graph.node for n in captured(node)}
        dead = [n for n in graph.node if n.name in ours and n.output[0] not in used]
        if not dead:
            return removed
        for node in dead:
            graph.node.remove(node)
            removed += 1


def fold_user_upcasts(
    graph: onnx.GraphProto,
    ours: set[str],
    storage: dict[str, int],
    types: Mapping[str, int],
    *,
    exact_ints: frozenset[str] = frozenset(),
) -> int:
    """A user Cast from an integer/bool tensor to FLOAT whose only reader is our Cast to fp16 (or to bf16 from
    a type fp32 holds exactly, or from a tensor in `exact_ints`: seen within +-2**24 by the reference run) casts
    straight to that type: int -> fp32 -> fp16 rounds once either way (every integer below 2**24 is exact in
    fp32, and fp16 overflows long before). Returns the Casts removed."""
    outputs = {o.name for o in graph.output}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    by_output = {n.output[0]: n for n in graph.node if n.op_type == "Cast" and not domain_of(n) and n.name not in ours}
    rename: dict[str, str] = {}
    dead: list[onnx.NodeProto] = []
    for ours_cast in [n for n in graph.node if n.name in ours and n.op_type == "Cast"]:
        user = by_output.get(ours_cast.input[0])
        to = storage.get(ours_cast.output[0])
        if user is None or user.output[0] in outputs or to not in LOW_ELEMS:
            continue
        source, user_to = types.get(user.input[0]), next((a for a in user.attribute if a.name == "to"), None)
        exact = _INTEGERS if to == TensorProto.FLOAT16 or user.input[0] in exact_ints else _EXACT_IN_BF16
        if source not in exact or user_to is None or user_to.i != TensorProto.FLOAT:
            continue
        if [r.name for r in readers.get(user.output[0], [])] != [ours_cast.name]:
            continue
        user_to.i = to
        storage[user.output[0]] = to
        rename[ours_cast.output[0]] = user.output[0]
        dead.append(ours_cast)
    for node in dead:
        graph.node.remove(node)
    for node in graph.node:
        for index, name in enumerate(node.input):
            node.input[index] = rename.get(name, name)
    return len(dead)


_INTEGERS = frozenset(
    {
        TensorProto.BOOL,
        TensorProto.INT8,
        TensorProto.UINT8,
        TensorProto.INT16,
        TensorProto.UINT16,
        TensorProto.INT32,
        TensorProto.UINT32,
        TensorProto.INT64,
        TensorProto.UINT64,
    }
)
_EXACT_IN_BF16 = frozenset(
    {TensorProto.BOOL, TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16, TensorProto.UINT16}
)
